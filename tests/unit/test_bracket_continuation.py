"""Three shapes a user met that showed nothing or too much: a line ending with a bracket it leaves
open (`return (`, `const xs = [`, Python's `x = foo(`), whose answer the model begins with a line
break; an answer stopped by the token cap in the middle of a line, after lines that write the code
below the cursor again; and a brace language's block header whose `{` is still to come (C#'s
Allman `if (amount > Balance)` answered `\\n{\\n    throw …;\\n}`, K&R's ` {` on the same line)."""

from __future__ import annotations

import random

import pytest

from repomem.backends.base import Generation
from repomem.backends.templates import QWEN
from repomem.completion.engine import CompletionEngine
from repomem.completion.postprocess import clean_completion, completion_settled, completion_shape
from repomem.config import with_overrides
from repomem.languages.registry import language_named
from repomem.positions import locate
from tests.unit.test_scope_imports import Words, long_report

PY = language_named("python")
JS, TS, TSX = language_named("javascript"), language_named("typescript"), language_named("tsx")
GO, JAVA, C, CPP = language_named("go"), language_named("java"), language_named("c"), language_named("cpp")
CSHARP, PHP, KOTLIN = language_named("csharp"), language_named("php"), language_named("kotlin")
RUBY, LUA, BASH = language_named("ruby"), language_named("lua"), language_named("bash")


def completed(language, prefix: str, suffix: str, raw: str, capped: bool = False) -> str:
    return clean_completion(raw, completion_shape(prefix, suffix, language), suffix=suffix,
                            **({"capped": True} if capped else {}))


# -- 1. a line ending with a bracket it leaves open ---------------------------------------------

@pytest.mark.parametrize(("language", "prefix", "suffix", "raw", "shown"), [
    # JSX over lines (Prettier's `return (`): up to the line that closes it, that line whole.
    (TSX, "  return (", "\n}\n", "\n    <div>\n      <p>{todo.text}</p>\n    </div>\n  );\n}\n\nexport default App;\n",
     "\n    <div>\n      <p>{todo.text}</p>\n    </div>\n  );"),
    (TSX, "      {items.map((todo) => (", "\n    </ul>\n",
     "\n        <li key={todo.id}>{todo.text}</li>\n      ))}\n    </ul>\n  );\n",
     "\n        <li key={todo.id}>{todo.text}</li>\n      ))}"),
    (JS, "const xs = [", "\n", "\n  'a',\n  'b',\n];\nconsole.log(xs);\n", "\n  'a',\n  'b',\n];"),
    (TS, "  const total = sum(", "\n", "\n    items.map((i) => i.price),\n  );\n  return total;\n",
     "\n    items.map((i) => i.price),\n  );"),
    (GO, "\tx := compute(", "\n", "\n\t\ta,\n\t\tb,\n\t)\n\treturn x\n", "\n\t\ta,\n\t\tb,\n\t)"),
    (JAVA, "    List<String> xs = List.of(", "\n", "\n        \"a\",\n        \"b\");\n    return xs;\n",
     '\n        "a",\n        "b");'),
    (KOTLIN, "    val xs = listOf(", "\n", '\n        "a",\n    )\n    return xs\n', '\n        "a",\n    )'),
    (PY, "result = compute(", "\n", "\n    a,\n    b,\n)\nprint(result)\n", "\n    a,\n    b,\n)"),
    (PY, "x = [", "\n", "\n    1,\n    2,\n]\ny = 2\n", "\n    1,\n    2,\n]"),
    (PY, "    config = {", "\n", "\n        'a': 1,  # {\n        'b': '}',\n    }\n    return config\n",
     "\n        'a': 1,  # {\n        'b': '}',\n    }"),  # brackets in comments and strings do not count
    (PY, "    query = run(", "\n", '\n        """\n        SELECT ( FROM t\n        """,\n    )\n    x = 1\n',
     '\n        """\n        SELECT ( FROM t\n        """,\n    )'),  # nor in a string over lines
    (RUBY, "total = sum(", "\n", "\n  a,\n  b\n)\nputs total\n", "\n  a,\n  b\n)"),
    (LUA, "local t = pack(", "\n", "\n  a,\n  b\n)\nprint(t)\n", "\n  a,\n  b\n)"),
    (BASH, "files=(", "\n", "\n  a.txt\n  b.txt\n)\necho done\n", "\n  a.txt\n  b.txt\n)"),
    # The model's answer starts on the cursor's line and goes on below.
    (PY, "x = foo(", "\n", "a,\n        b)\nprint(x)\n", "a,\n        b)"),
])
def test_a_line_ending_with_an_open_bracket_runs_on_to_its_closer(language, prefix, suffix, raw, shown):
    """These showed nothing: the completion was the line's rest, and the model began with a line
    break (the engine even stopped it there). The continuation ends with the line that closes the
    bracket the cursor's line left open: nothing after it."""
    shape = completion_shape(prefix, suffix, language)
    assert shape.multiline and shape.bracket_closer
    assert completed(language, prefix, suffix, raw) == shown


def test_an_auto_paired_closer_stays_the_suffixs_on_a_line_of_its_own():
    """`return (|);` (an editor paired the bracket): the lines inside go above the closer, which
    the code after the cursor has already."""
    prefix = "function App() {\n  return ("
    shown = completed(TSX, prefix, ");\n}\n", "\n    <div>hi</div>\n  );\n}\n")
    assert prefix + shown + ");" == "function App() {\n  return (\n    <div>hi</div>\n  );"
    # Closed after code on the same line, the line stays glued to it.
    shown = completed(PY, "x = foo(", ")\n", "\n    a,\n    b)\n")
    assert "x = foo(" + shown + ")" == "x = foo(\n    a,\n    b)"


@pytest.mark.parametrize(("language", "prefix", "suffix", "raw", "shown"), [
    (PY, "x = foo(", "\n", "a, b)\nprint(x)\n", "a, b)"),
    (PY, "x = foo(", ")\n", "a, b)\nprint(x)\n", "a, b"),  # the line's own `)` is not written twice
    (PY, "    return sum(price(", "))\n", "item) for item in items)\n", "item) for item in items"),
    (JS, "  console.log(", ");\n", "total);\nfoo();\n", "total"),
    (JAVA, "int total = compute(", "\n", "a, b);\nfoo();\n", "a, b);"),
])
def test_an_answer_that_closes_the_bracket_on_its_line_is_shown_as_before(language, prefix, suffix, raw, shown):
    assert completed(language, prefix, suffix, raw) == shown


def test_the_continuation_ends_where_the_statement_does():
    # A line not indented deeper than the cursor's (the next statement), or a new top-level statement.
    assert completed(PY, "    x = foo(", "\n", "\n        a,\nprint(x)\n") == "\n        a,"
    assert completed(PY, "    x = foo(", ")\n", "a, b\n    y = 2\n") == "a, b"  # the `)` is the editor's
    assert completed(PY, "x = foo(", "\n", "\n    a,\ndef g():\n    pass\n") == "\n    a,"
    assert completed(JS, "  const xs = [", "\n", "\n    1,\n}\n") == "\n    1,"


@pytest.mark.parametrize(("language", "prefix", "suffix"), [
    (PY, "x = foo(", "a)\n"),  # code after the cursor: the line's rest
    (PY, "x = foo(a", "\n"), (PY, 's = "(', '"\n'), (PY, "x = 1  # (", "\n"),
    (JS, "  f(", "x);\n"), (JS, '  const s = "[', '";\n'),
    (PY, "x = foo(\n", "    a)\n"),  # the blank line below: its first real line, as before (RepoEval's cursor)
    (PY, "x = foo(\n    ", "\n"),
])
def test_elsewhere_the_line_is_completed_as_before(language, prefix, suffix):
    shape = completion_shape(prefix, suffix, language)
    assert not shape.multiline, prefix


# -- 2. an answer stopped by the token cap ------------------------------------------------------

def test_a_capped_answers_cut_off_line_goes_before_the_repeat_of_the_code_below_is_trimmed():
    """C++ after `public:`: the model's new member, then the members already below, then the cap in
    the middle of a line. That line matched nothing below, so the repeated lines stayed too."""
    prefix, suffix = "class Graph {\npublic:", "\n    void add(int x);\n    int size() const;\n    bool empty();\n};\n"
    raw = "\n    Graph();\n    void add(int x);\n    int size() const;\n    bool emp"
    assert completed(CPP, prefix, suffix, raw) == raw  # a model that stopped there itself: as it wrote it
    assert completed(CPP, prefix, suffix, raw, capped=True) == "\n    Graph();"
    body = completion_shape("def f(x):")
    assert clean_completion("\n    y = x + 1\n    return compute(y, ", body, capped=True) == "\n    y = x + 1"


def test_a_capped_answers_last_line_stays_where_it_is_all_there_is_or_only_closers():
    assert clean_completion("\n    return compute(a, b", completion_shape("def f(a, b):"), capped=True) \
        == "\n    return compute(a, b"
    assert completed(GO, "func f() int {", "\n", "\n\tx := 1\n\treturn x\n}", capped=True) \
        == "\n\tx := 1\n\treturn x\n}"
    # One line: as before (RepoEval's line tasks), cut or not.
    assert clean_completion("a, b, c", completion_shape("x = 1\n"), capped=True) == "a, b, c"
    assert clean_completion("compute(a, b", completion_shape("    return "), capped=True) == "compute(a, b"


class Scripted(Words):
    def __init__(self, answer: str, finish: str):
        super().__init__()
        self.answer, self.finish, self.requests = answer, finish, []

    def generate(self, request):
        self.requests.append(request)
        return Generation(self.answer, self.count(request.prompt), 3, 0, self.finish, 0.01, -0.1)


def _engine_completion(tmp_path, last_line: str, answer: str, finish: str):
    service, text, _ = long_report(tmp_path)
    text = text[: text.rindex("\n") + 1] + last_line
    (service.root / "shop" / "report.py").write_text(text)
    config = with_overrides(service.config, completion={"max_prompt_tokens": 300, "fill_in_middle": False})
    backend = Scripted(answer, finish)
    cursor = locate(service.root, "shop/report.py", text, text.count("\n") + 1, None)
    return CompletionEngine(service, backend, config).complete(cursor, "infile"), backend


def test_the_engine_tells_the_cleaning_that_the_cap_was_hit(tmp_path):
    answer = "\n    rate = compute_tax(amount_cents, tax_class)\n    return amount_cents * ra"
    result, _ = _engine_completion(tmp_path / "a", "    if amount_cents > 0:", answer.replace("\n", "\n    "), "length")
    assert result.text == "\n        rate = compute_tax(amount_cents, tax_class)"
    result, _ = _engine_completion(tmp_path / "b", "    if amount_cents > 0:", answer.replace("\n", "\n    "), "stop")
    assert result.text.endswith("* ra")  # the model ended there itself


def test_the_engine_lets_an_open_brackets_answer_run_past_the_line(tmp_path):
    result, backend = _engine_completion(tmp_path, "    return compute_tax(",
                                         "\n        amount_cents,\n        tax_class,\n    )\n", "stop")
    assert "\n" not in backend.requests[-1].stop  # the one-line shape's stop at the line's end ended it at once
    assert result.text == "\n        amount_cents,\n        tax_class,\n    )"


# -- 3. a block header whose `{` is still to come -----------------------------------------------

@pytest.mark.parametrize(("language", "prefix", "suffix", "raw", "shown"), [
    (CSHARP, "        if (amount > Balance)", "\n        Balance -= amount;\n",
     "\n        {\n            throw new InvalidOperationException(\"{\");\n        }\n        Balance -= amount;\n",
     "\n        {\n            throw new InvalidOperationException(\"{\");\n        }"),
    (CSHARP, "    public void Deposit(decimal amount)", "\n\n    public void Withdraw()\n",
     "\n    {\n        if (amount <= 0)\n        {\n            return;\n        }\n        Balance += amount;\n"
     "    }\n\n    public void Withdraw()\n",
     "\n    {\n        if (amount <= 0)\n        {\n            return;\n        }\n        Balance += amount;\n    }"),
    (CSHARP, "    } else", "\n", "\n    {\n        x();\n    }\n    y();\n", "\n    {\n        x();\n    }"),
    (CSHARP, "        foreach (var a in accounts)", "\n", "\n        {\n            a.Close();\n        }\n",
     "\n        {\n            a.Close();\n        }"),
    (C, "int main(void)", "\n", "\n{\n    return 0;\n}\n\nint g(void)\n", "\n{\n    return 0;\n}"),
    (CPP, "    for (int i = 0; i < n; i++)", "\n", "\n    {\n        a[i] = 0;\n    }\n    return;\n",
     "\n    {\n        a[i] = 0;\n    }"),
    (CPP, "    int size() const", "\n", "\n    {\n        return n;\n    }\n    int n;\n",
     "\n    {\n        return n;\n    }"),
    (JAVA, "    public void run() throws IOException", "\n", "\n    {\n        go();\n    }\n",
     "\n    {\n        go();\n    }"),
    (PHP, "    public function total($items)", "\n", "\n    {\n        return 0;\n    }\n",
     "\n    {\n        return 0;\n    }"),
    # K&R: the `{` on the header's line, the block below it: was ` {` alone.
    (JAVA, "        if (amount > balance)", "\n", " {\n            throw new X();\n        }\n        y();\n",
     " {\n            throw new X();\n        }"),
    (JS, "  while (queue.length)", "\n", " {\n    step();\n  }\n  done();\n", " {\n    step();\n  }"),
    # A condition over lines.
    (CSHARP, "        if (a &&\n            b)", "\n", "\n        {\n            c();\n        }\n        d();\n",
     "\n        {\n            c();\n        }"),
    # A body without braces: the statement indented below it, to a dedent.
    (CSHARP, "        if (amount > Balance)", "\n", "\n            return;\n        Balance -= amount;\n",
     "\n            return;"),
    # Answered on the header's own line: that line, as before.
    (CSHARP, "        if (amount > Balance)", "\n", " return;\n        Balance -= amount;\n", " return;"),
])
def test_a_headers_block_is_shown_where_its_brace_comes(language, prefix, suffix, raw, shown):
    shape = completion_shape(prefix, suffix, language)
    assert shape.multiline and shape.header
    assert completed(language, prefix, suffix, raw) == shown


@pytest.mark.parametrize(("language", "prefix", "suffix"), [
    (CSHARP, "        return Compute(x)", "\n"), (CSHARP, "        var a = new Account(1)", "\n"),
    (CSHARP, "        Compute(x)", "\n"), (CPP, "    } while (x)", "\n"), (CPP, "    if (a) b()", "\n"),
    (C, "#if defined(X)", "\n"), (CPP, "    virtual int f() = 0", "\n"),
    (CSHARP, "    public Account(int b) : base(b)", "\n"),
    (CSHARP, "        if (amount > Balance)", " return;\n"),  # code after the cursor
    (CSHARP, "        if (amount > Balance)", "\n        {\n            return;\n        }\n"),  # its block is below
    (GO, "\tif x > 0", "\n"), (KOTLIN, "    if (x > 0)", "\n"),  # not these languages
    (JS, "  render(items)", "\n"),  # a call in JavaScript (no signature there)
])
def test_a_line_that_is_no_header_waiting_for_its_block_is_completed_as_before(language, prefix, suffix):
    assert not completion_shape(prefix, suffix, language).multiline, prefix


# -- every shape: generation stops only where the rest would all be cut -------------------------

@pytest.mark.parametrize(("prefix", "suffix", "language"), [
    ("  return (", "\n}\n", TSX), ("  return (", ");\n}\n", TSX), ("x = foo(", "\n", PY), ("x = [", "]\n", PY),
    ("        if (amount > Balance)", "\n", CSHARP), ("    } else", "\n        y();\n", JAVA),
])
def test_a_settled_prefix_cleans_as_the_whole_answer(prefix, suffix, language):
    pieces = ["a", "b, ", "(", ")", "[", "]", "{", "}", ");", "\n", "\n", "    ", "  ", "<div>", "'('", "# )",
              "// )", "return 1;", "<|endoftext|>", "def g():", "x"]
    rng = random.Random(len(prefix))
    shape = completion_shape(prefix, suffix, language)
    settled_somewhere = 0
    for _ in range(400):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 25)))
        for max_lines in (1, 3, 16):
            whole = clean_completion(text, shape, QWEN.sentinels, suffix, max_lines)
            for end in range(len(text) + 1):
                if completion_settled(text[:end], shape, QWEN.sentinels, suffix, max_lines):
                    settled_somewhere += 1
                    assert clean_completion(text[:end], shape, QWEN.sentinels, suffix, max_lines) == whole, \
                        (text[:end], text, max_lines)
                    break
    assert settled_somewhere > 300
