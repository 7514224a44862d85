"""Prompts and completions in the cursor file's own language: block headers in its line comments,
and in a `{`-block language the body after an opener runs to the brace that balances it."""

from __future__ import annotations

import pytest

from repomem.backends.templates import PLAIN
from repomem.completion.postprocess import clean_completion, completion_shape
from repomem.completion.prompt import ContextBlock, PromptBudget, build_prompt, render_block
from repomem.completion.request import enclosing_definition_of
from repomem.languages.registry import LANGUAGES, language_named
from tests.unit.test_scope_imports import Words

GO = language_named("go")


@pytest.mark.parametrize(("name", "comment"), [("python", "#"), ("go", "//"), ("rust", "//"), ("java", "//"),
                                               ("typescript", "//"), ("javascript", "//"), ("ruby", "#"),
                                               ("bash", "#"), ("lua", "--")])
def test_each_language_has_its_line_comment(name, comment):
    assert language_named(name).line_comment == comment


def test_a_go_prompt_comments_its_blocks_with_slashes_and_python_stays_repocoders():
    block = ContextBlock(3, "util/math.go", 0, 3, "func add(a, b int) int {\n\treturn a + b\n}", 1.0)
    prompt = build_prompt(left_lines=["package main", "", "func main() {", "\tx := "], suffix=None,
                          candidates=[block], tokenizer=Words(), template=PLAIN,
                          budget=PromptBudget(max_prompt_tokens=400), comment=GO.line_comment)
    head = prompt.text.split("package main")[0]
    assert head.startswith("// Here are some relevant code fragments from other files of the repo:\n")
    assert "// util/math.go\n" in head and "// \treturn a + b\n" in head
    assert all(line.startswith("// ") for line in head.splitlines())  # nothing the model could take for code
    assert prompt.block_tokens == Words().count(head)
    python = render_block(block)
    assert python.startswith("# the below code fragment can be found in:\n# util/math.go\n# ---")


def test_every_brace_language_parses_strings_and_comments_as_such():
    for language in LANGUAGES:
        if language.brace_blocks:
            assert language.string_or_comment_types and language.line_comment == "//", language.name
    assert not completion_shape("func f() {\n\t// note {", "", GO).multiline  # a comment
    assert not completion_shape('func f() {\n\ts := "{', '"\n}', GO).multiline  # inside a string


def test_after_an_opener_the_body_runs_to_the_closing_brace():
    shape = completion_shape("func add(a, b int) int {", "", GO)
    assert shape.multiline and shape.brace_block
    raw = "\n\tsum := a + b\n\treturn sum\n}\n\nfunc other() {\n\treturn\n}\n"
    assert clean_completion(raw, shape) == "\n\tsum := a + b\n\treturn sum\n}"
    # An editor that paired the brace already: the completion stops before it.
    assert clean_completion(raw, shape, suffix="\n}\n") == "\n\tsum := a + b\n\treturn sum"
    # On the blank line below an opener too.
    blank = completion_shape("if x > 0 {\n\t", "", GO)
    assert blank.multiline and clean_completion("y := 1\n\tz := \"}\"\n} else {\n\ty = 2\n}\nfoo()", blank) \
        == "y := 1\n\tz := \"}\"\n} else {\n\ty = 2\n}"  # a brace in a string, and `} else {`, do not close it


def test_elsewhere_a_brace_language_completes_the_line():
    java = language_named("java")
    for prefix in ("int total = compute(", "class A {\n  int x = 1;\n  ", "  return x;"):
        shape = completion_shape(prefix, "", java)
        # `compute(` may run on over lines (test_bracket_continuation.py); answered on its own line, it is that line.
        assert shape.multiline == prefix.endswith("(")
        assert clean_completion("a, b);\nfoo();\n", shape) == "a, b);"
    # No brace language (a table constructor left open over lines runs to its `}`: test_keyword_blocks).
    assert not completion_shape("local t = {}", "", language_named("lua")).multiline


@pytest.mark.parametrize(("name", "source", "line", "expected"), [
    ("go", "package m\n\ntype S struct{}\n\nfunc (s *S) Get(a int) int {\n\tx := a\n\t\n\treturn x\n}\n", 6, 4),
    ("go", "package m\n\nvar x = 1\n\n", 3, -1),
    ("java", "class A {\n  @Override\n  int get(int a) {\n    int x = a;\n    \n  }\n  int y;\n}\n", 4, 1),
    ("java", "class A {\n  @Override\n  int get(int a) {\n    int x = a;\n    \n  }\n  int y;\n}\n", 6, 0),
    ("rust", "impl S {\n    fn get(&self) -> i32 {\n        let x = 1;\n        \n        x\n    }\n}\n", 3, 1),
    ("typescript", "export class A {\n  get(a: number) {\n    \n  }\n}\nconst f = () => {\n  \n};\n", 2, 1),
    ("typescript", "export class A {\n  get(a: number) {\n    \n  }\n}\nconst f = () => {\n  \n};\n", 6, 5),
    ("javascript", "function g() {\n  [1].map((v) => {\n    \n  });\n}\n", 2, 0),  # a callback is not a definition
])
def test_the_cursors_function_in_a_brace_language_comes_from_its_syntax(name, source, line, expected):
    """Order "stable" remembers blocks per function and the levers ask for "the cursor's function":
    in a brace language both come from the syntax tree, not from Python's def / class lines."""
    assert enclosing_definition_of(language_named(name), source.split("\n"), line) == expected


# -- what a brace language's user sees (the review of 2026-12-05) --------------------------------

JAVA = language_named("java")
JS = language_named("javascript")
RUST = language_named("rust")
C = language_named("c")


def _completed(prefix: str, suffix: str, raw: str, language) -> tuple[str, str]:
    """The completion shown, and the text around it once it is taken."""
    shown = clean_completion(raw, completion_shape(prefix, suffix, language), suffix=suffix)
    return shown, prefix + shown + suffix


def test_a_later_sibling_blocks_brace_does_not_close_a_new_block():
    """A new `if err != nil {` typed above a `for` block: the `for`'s `}` at the same indent closes
    the `for`, and the new block keeps its own (it swallowed the loop, and the file compiled no more)."""
    prefix = "func f(xs []int) error {\n\tx, err := g()\n\tif err != nil {"
    suffix = "\n\tfor _, v := range xs {\n\t\tuse(v)\n\t}\n\treturn nil\n}\n"
    shown, _ = _completed(prefix, suffix, "\n\t\treturn err\n\t}\n", GO)
    assert shown == "\n\t\treturn err\n\t}"


def test_a_body_before_an_auto_paired_brace_leaves_the_brace_on_its_own_line():
    shown, text = _completed("function isEmpty(items) {", "}\n", "\n  return items.length === 0;\n}\n\n", JS)
    assert text == "function isEmpty(items) {\n  return items.length === 0;\n}\n"
    _, text = _completed("\tif ok {", "}\n", "\n\t\treturn 1\n\t}\n", GO)
    assert text == "\tif ok {\n\t\treturn 1\n\t}\n"  # at the opener's indent, in its tabs
    _, text = _completed("  return {", "};\n", " ok: true };", JS)
    assert text == "  return { ok: true };\n"  # one line: the model's space before the brace stays


def test_a_one_line_completion_does_not_write_the_lines_rest_again():
    for prefix, rest, raw, expected in [
            ("  console.log(", ");", "total);", "total"),
            ("    foo(", ");", "a, b);", "a, b"),
            ("  if (", ") {", "x > 0) {", "x > 0"),
            ("func f(", ") error {", "ctx context.Context) error {", "ctx context.Context"),
            ("const x = ", ";", "compute();", "compute()"),
            ("  sum(", ")", "price(item))", "price(item)"),  # the line balances only with it: kept
            ("  f(", ")", "g(x)", "g(x)")]:
        shown, _ = _completed(prefix, rest + "\n", raw, JS)
        assert shown == expected, (prefix, raw, shown)


def test_an_opener_after_aligned_parameters_closes_at_its_statements_indent():
    prefix = "class A {\n    void f(int a,\n           int b) {\n"
    suffix = "        int c = a + 1;\n    }\n}\n"
    assert completion_shape(prefix, suffix, JAVA).block_indent == 4
    shown, _ = _completed(prefix, suffix, "        int d = 0;\n    }\n", JAVA)
    assert shown == "        int d = 0;"
    prefix = "int f(int a, int b) {\n    if (a > 0 &&\n        b > 0) {\n"
    shown, _ = _completed(prefix, "        log(a);\n    }\n    return 0;\n}\n", "        a++;\n    }\n", C)
    assert shown == "        a++;"


def test_a_body_closed_on_a_line_with_code_keeps_that_code():
    assert _completed("\tp := Point{", "}\n", "X: 1, Y: 2}", GO)[1] == "\tp := Point{X: 1, Y: 2}\n"
    assert _completed("    P {", "}\n", " x: 1, y: 2 }", RUST)[1] == "    P { x: 1, y: 2 }\n"
    _, text = _completed("  foo({", "});\n", "\n    a: 1,\n    b: 2 });", JS)
    assert text == "  foo({\n    a: 1,\n    b: 2\n  });\n"


def test_a_body_stops_at_an_else_the_code_below_already_has():
    prefix = "func f(x int) int {\n\tif x > 0 {"
    suffix = "\n\t} else {\n\t\treturn -1\n\t}\n}\n"
    shown, _ = _completed(prefix, suffix, "\n\t\treturn 1\n\t} else {\n\t\treturn 0\n\t}\n}\n", GO)
    assert shown == "\n\t\treturn 1"
    # Without the code below, the `else` is the body's own.
    shown, _ = _completed(prefix, "\n", "\n\t\treturn 1\n\t} else {\n\t\treturn 0\n\t}\n", GO)
    assert shown == "\n\t\treturn 1\n\t} else {\n\t\treturn 0\n\t}"


def test_a_closing_brace_alone_is_the_one_below_at_any_indent():
    shown, _ = _completed("func f() int {\n\tx := 1\n\treturn x\n\t", "\n}\n", "}", GO)
    assert shown == ""


# -- literals, comments and directives over lines (the review of 2026-12-06) ----------------------

CPP = language_named("cpp")
KOTLIN = language_named("kotlin")
PHP = language_named("php")


def test_a_rust_lifetime_or_a_digit_separator_starts_no_character_literal():
    """`Parser<'a> = Parser { s: x, c: 'x' }` was read as a literal from `'a` to `c: '`, so its `}`
    closed the function's body after its first line; `1'000; char c = '{'` opened one more block and
    the body ran on into the next function."""
    shown, _ = _completed("fn f<'a>(x: &'a str) {", "\n",
                          "\n    let p: Parser<'a> = Parser { s: x, c: 'x' };\n    p.run();\n}\nfn g() {}\n", RUST)
    assert shown == "\n    let p: Parser<'a> = Parser { s: x, c: 'x' };\n    p.run();\n}"
    shown, _ = _completed("int main() {", "\n", "\n    int n = 1'000; char c = '{';\n    return n;\n}\nint y;\n", CPP)
    assert shown == "\n    int n = 1'000; char c = '{';\n    return n;\n}"


def test_braces_in_comments_and_strings_over_several_lines_do_not_count():
    """A block comment, a template literal, Go's raw string and a Kotlin raw string spanning lines:
    a `{` inside ran the body past its end (into the next function), a `}` inside ended it there."""
    for prefix, raw, expected, language in [
            ("function f(s) {", "\n  /* a {\n   */\n  return s;\n}\n\nfunction g() {}\n",
             "\n  /* a {\n   */\n  return s;\n}", JS),
            ("function f(s) {", "\n  const t = `\n    ${s} }\n  `;\n  return t;\n}\n\nfunction g() {}\n",
             "\n  const t = `\n    ${s} }\n  `;\n  return t;\n}", JS),
            ("func f() {", "\n\tq := `\n{\n`\n\trun(q)\n}\n\nfunc g() {}\n", "\n\tq := `\n{\n`\n\trun(q)\n}", GO),
            ("fun f() {", '\n    val s = """\n      {\n    """\n    g()\n}\nfun h() {}\n',
             '\n    val s = """\n      {\n    """\n    g()\n}', KOTLIN),
            ("function f($x) {", "\n    # a {\n    return $x;\n}\nfunction g() {}\n",
             "\n    # a {\n    return $x;\n}", PHP)]:
        shown, _ = _completed(prefix, "\n", raw, language)
        assert shown == expected, (language.name, shown)


def test_an_else_branch_of_the_preprocessor_opens_no_second_block():
    """`#ifdef` / `#else` giving two versions of `if (...) {` closed by one `}`: both were counted,
    and the body ran on past the function's end."""
    raw = ("\n#ifdef DEBUG\n    if (x) {\n#else\n    if (x > 0) {\n#endif\n"
           "        return 1;\n    }\n    return 0;\n}\n\nint g() {}\n")
    shown, _ = _completed("int f(int x) {", "\n", raw, C)
    assert shown == raw[: raw.index("\n\nint g")]


def test_lines_of_directives_and_literals_below_are_no_outdent():
    """The code below closes the new block, past an `#ifdef` at column 0 or a raw string's lines at
    column 0: those lines were taken for an outdent, the block for unclosed, and its `}` written twice."""
    prefix = "int f(void) {\n    for (i = 0; i < n; i++) {"
    suffix = "\n        a(i);\n#ifdef DEBUG\n        b(i);\n#endif\n    }\n    return 0;\n}\n"
    assert _completed(prefix, suffix, "\n        c(i);\n    }\n", C)[0] == "\n        c(i);"
    prefix = "func f() {\n\tif ok {"
    suffix = "\n\t\tq := `\nSELECT 1\n`\n\t\trun(q)\n\t}\n}\n"
    assert _completed(prefix, suffix, "\n\t\trun(x)\n\t}\n", GO)[0] == "\n\t\trun(x)"


def test_a_body_on_a_blank_line_below_an_opener_starts_at_the_cursor():
    """On the indented blank line below `{`, a body the model starts with a line break left that line
    blank with its indentation trailing, the body one line lower (Python's body starts at the cursor)."""
    shown, text = _completed("func f() {\n\t", "\n}\n", "\n\tx := 1\n\treturn\n}\n", GO)
    assert shown == "x := 1\n\treturn" and text == "func f() {\n\tx := 1\n\treturn\n}\n"
    shown, _ = _completed("  void f() {\n    ", "\n  }\n}\n", "\n\n    int x = 1;\n    g(x);\n  }\n", JAVA)
    assert shown == "int x = 1;\n    g(x);"


def test_a_one_line_completion_that_is_only_the_lines_rest_is_nothing():
    """`x, err |:= f()` completed `:= f()`: the line's rest written again, whole, was shown
    (`x, err := f() := f()`); written after more code it is cut (test above)."""
    for prefix, rest, raw, language in [("\tx, err ", " := f()", ":= f()", GO),
                                        ("  const x = ", "compute(a);", "compute(a);", JS),
                                        ("    int y = ", "x + 1;", " x + 1;", JAVA)]:
        assert _completed(prefix, rest + "\n", raw, language)[0] == "", (prefix, raw)


# -- the less-tested brace languages (the review of Kotlin, Scala, Swift, C# and C) ---------------

SCALA = language_named("scala")
SWIFT = language_named("swift")
CSHARP = language_named("csharp")


@pytest.mark.parametrize(("language", "prefix", "raw", "body"), [
    (KOTLIN, "fun f(points: List<Point>) {\n    points.forEach { (a, b) ->",
     "\n        total += a.x\n    }\n    return total\n}\n", "\n        total += a.x\n    }"),
    (SWIFT, "func f() {\n    items.forEach { [weak self] item in",
     "\n        print(item)\n    }\n}\n", "\n        print(item)\n    }"),
    (SCALA, "object Main {\n  xs.foreach { case (k, v) =>",
     "\n    println(k)\n  }\n  other()\n}\n", "\n    println(k)\n  }"),
    (SCALA, "object Main {\n  xs.foreach { x =>\n    ", "println(x)\n  }\n  other()\n}\n", "println(x)\n  }"),
])
def test_a_lambda_with_parameters_opens_a_block_body(language, prefix, raw, body):
    """Kotlin's `forEach { p ->`, Swift's `map { item in` and Scala's `foreach { x =>` open the
    lambda's body as a `{` does: they completed one line, and a body the model began with a line
    break (as it always does there) completed nothing."""
    assert completion_shape(prefix, "\n", language).brace_block
    assert _completed(prefix, "\n", raw, language)[0] == body


def test_an_arrow_outside_a_lambda_header_opens_no_block():
    for prefix, language in [("    for item in", SWIFT), ('    val s = "{ x ->"', KOTLIN)]:
        assert not completion_shape(prefix, "\n", language).multiline, prefix
    # A Scala match arm and a Kotlin `when` arm open no `{` block; their bodies are indented below
    # them (tests further down).
    assert not completion_shape("  case Some(x) =>", "\n", SCALA).brace_block
    assert not completion_shape("    is Circle ->", "\n", KOTLIN).brace_block


def test_braces_in_a_csharp_verbatim_string_over_lines_do_not_count():
    """`@"{` opened a block inside the string (its `""` quotes, its `\\` no escape): the body ran on
    past the method's `}` into the next method."""
    raw = '\n    var json = @"{\n  ""a"": ""\\""\n";\n    return json;\n}\n\nvoid G() {}\n'
    assert _completed("string F() {", "\n", raw, CSHARP)[0] == raw[: raw.index("\n\nvoid G")]
    raw = '\n    var q = $@"{x} ""{{"" ";\n    return q;\n}\n\nvoid G() {}\n'
    assert _completed("string F() {", "\n", raw, CSHARP)[0] == raw[: raw.index("\n\nvoid G")]


def test_code_switched_off_by_if_0_opens_no_block():
    """`#if 0` lines are no code: the `{` of an old version kept there ran the body past the
    function's end; its `#else` branch is the live one, whose braces count."""
    raw = "\n#if 0\n    if (old) {\n#endif\n    return 1;\n}\n\nint g(void) { return 2; }\n"
    assert _completed("int f(void) {", "\n", raw, C)[0] == raw[: raw.index("\n\nint g")]
    raw = ("\n#if 0\n    if (old) {\n#else\n    if (new) {\n#endif\n        return 1;\n    }\n"
           "    return 0;\n}\n\nint g(void) { return 2; }\n")
    assert _completed("int f(void) {", "\n", raw, C)[0] == raw[: raw.index("\n\nint g")]


# -- bodies without braces: Scala 3's indentation syntax, Kotlin's and Scala's `=` continued below --

@pytest.mark.parametrize(("language", "prefix", "raw", "body"), [
    (SCALA, "object Main:\n  def f(x: Int): Int =", "\n    val y = x + 1\n    y * 2\n  def g = 1\n",
     "\n    val y = x + 1\n    y * 2"),
    (SCALA, "object Main:", "\n  def main(args: Array[String]): Unit =\n    println(1)\n\nobject Other\n",
     "\n  def main(args: Array[String]): Unit =\n    println(1)"),
    (SCALA, "class A:", "\n  val xs = List(1, 2)\n  def n = xs.size\nclass B\n",
     "\n  val xs = List(1, 2)\n  def n = xs.size"),
    (SCALA, "def f(x: Int) =\n  if x > 0 then", "\n    println(x)\n    x\n  else 0\n", "\n    println(x)\n    x"),
    (SCALA, "def f(xs: List[Int]) =\n  for x <- xs do", "\n    println(x)\n  done()\n", "\n    println(x)"),
    (SCALA, "def f(x: Int) =\n  while x > 0 do", "\n    tick()\n  done()\n", "\n    tick()"),
    (SCALA, "def f(x: Int) =\n  x match", "\n    case 1 => \"one\"\n    case _ => \"many\"\n\ndef g = 1\n",
     '\n    case 1 => "one"\n    case _ => "many"'),
    (SCALA, "x match {\n  case Some(y) =>", "\n    log(y)\n    y\n  case None => 0\n}\n", "\n    log(y)\n    y"),
    (SCALA, "def f(\n    a: Int,\n    b: Int\n): Int =", "\n  a + b\n\ndef g = 1\n", "\n  a + b"),
    (SCALA, "object Main:\n  def f(x: Int): Int =\n    ", "x + 1\n  def g = 2\n", "x + 1"),  # on the blank line below
    (KOTLIN, "class Rect(val w: Int, val h: Int) {\n    fun area(): Int =",
     "\n        w * h\n\n    fun twice() = 2 * area()\n}\n", "\n        w * h"),
    # After `val xs = ` the model writes the call and its items: its `)` at the opener's indent is the body's.
    (KOTLIN, "fun f() {\n    val xs = ", 'mapOf(\n        "a" to 1,\n    )\n    return xs\n}\n',
     'mapOf(\n        "a" to 1,\n    )'),
    (KOTLIN, "fun area(s: Shape): Double = when (s) {\n    is Circle ->",
     "\n        PI * s.r * s.r\n    is Square -> s.side * s.side\n}\n", "\n        PI * s.r * s.r"),
    (KOTLIN, "fun total(items: List<Item>): Int =", "\n    items.sumOf { it.price }\n\nfun main() {}\n",
     "\n    items.sumOf { it.price }"),
])
def test_a_body_without_braces_is_indented_below_its_opener(language, prefix, raw, body):
    """Scala 3's `object Main:`, `if x then`, `for x <- xs do`, `x match`, a match arm's `=>` and an
    expression body after `=` (Scala's `def`, Kotlin's `fun area(): Int =`): a line break begins the
    body, which completed one line, nothing; it runs to a dedent, as Python's."""
    shape = completion_shape(prefix, "\n", language)
    assert shape.multiline and not shape.brace_block
    assert _completed(prefix, "\n", raw, language)[0] == body


@pytest.mark.parametrize(("language", "prefix", "suffix"), [
    (SCALA, '  val s = "a:"', "\n"), (SCALA, "  foo(x =", "\n"), (KOTLIN, "    if (a ==", "\n"),
    (KOTLIN, "    val x =", " y\n"),  # code after the cursor: the line's rest
    (SCALA, "  xs.map(x =>", "\n"), (KOTLIN, "    x <= y", "\n"), (SCALA, "class A extends B with", "\n"),
])
def test_a_line_that_only_looks_like_an_indented_opener_completes_itself(language, prefix, suffix):
    assert not completion_shape(prefix, suffix, language).multiline, prefix


def test_scala_2_braces_are_still_a_brace_block():
    shape = completion_shape("object Main {\n  def f(x: Int): Int = {", "\n", SCALA)
    assert shape.brace_block
    assert _completed("object Main {\n  def f(x: Int): Int = {", "\n", "\n    x + 1\n  }\n}\n", SCALA)[0] \
        == "\n    x + 1\n  }"


@pytest.mark.parametrize("raw", [
    "\n    $s = <<<EOT\n{ hello {$name}\nEOT;\n    return $s;\n}\n\nfunction g() {}\n",
    "\n    $s = <<<'EOT'\n  } bye\n  EOT;\n    return $s;\n}\n\nfunction g() {}\n",
    '\n    return f(<<<"SQL"\n    SELECT } FROM t WHERE EOTSQL\n    SQL, 1);\n}\n\nfunction g() {}\n',
])
def test_braces_in_a_php_heredoc_or_nowdoc_do_not_count(raw):
    """A heredoc's (`<<<EOT`) or nowdoc's (`<<<'EOT'`) text, up to the line its terminator starts:
    a `{` inside ran the body past the function's end, a `}` inside ended it in the middle."""
    assert _completed("function f($name) {", "\n", raw, PHP)[0] == raw[: raw.index("\n\nfunction g")]


# -- a switch arm's label ending its line: its statements below, up to the next arm --

TS = language_named("typescript")


@pytest.mark.parametrize(("language", "prefix", "suffix", "raw", "body"), [
    # The model's statements, then the next arm the code below has already: the arm's body alone.
    (C, "    switch (cmd) {\n    case CMD_MAX:", "\n    case CMD_COUNT:\n        break;\n    }\n",
     '\n        printf("%g\\n", vec_max(v));\n        break;\n    case CMD_COUNT:\n',
     '\n        printf("%g\\n", vec_max(v));\n        break;'),
    (GO, "\tswitch fields[0] {\n\tcase \"remove\":", "\n\tdefault:\n\t\treturn nil\n\t}\n",
     "\n\t\tqty, err := strconv.Atoi(fields[2])\n\t\tif err != nil {\n\t\t\treturn err\n\t\t}\n\tdefault:\n",
     "\n\t\tqty, err := strconv.Atoi(fields[2])\n\t\tif err != nil {\n\t\t\treturn err\n\t\t}"),
    (SWIFT, "        switch reading.condition {\n        case .rainy, .snowy:", "\n        }\n",
     '\n            return "umbrella"\n        }\n', '\n            return "umbrella"'),
    (TS, '    switch (filter) {\n      default:', "\n    }\n", "\n        return all;\n    }\n",
     "\n        return all;"),
    (JAVA, "        switch (c) {\n            case ':':", "\n        }\n",
     "\n                n++;\n                break;\n        }\n",
     "\n                n++;\n                break;"),
    (CSHARP, "            case Kind.Savings:", "\n        }\n",
     "\n                return 0.02m;\n            default:\n",
     "\n                return 0.02m;"),
    (CPP, "class Graph {\npublic:", "\n};\n", "\n    void add(int x);\n    int size() const;\n};\n",
     "\n    void add(int x);\n    int size() const;"),
    # On the blank line below the label: the body starts at the cursor.
    (C, "    switch (cmd) {\n    case CMD_MAX:\n        ", "\n    }\n", "break;\n    }\n", "break;"),
])
def test_a_switch_arms_label_opens_its_statements_below(language, prefix, suffix, raw, body):
    """`case X:` / `default:` (and C++'s `public:`) ending its line: a line break begins the arm's
    statements, which a one-line completion left out (nothing shown); they run to a dedent."""
    assert completion_shape(prefix, suffix, language).multiline
    assert _completed(prefix, suffix, raw, language)[0] == body


@pytest.mark.parametrize(("language", "prefix"), [
    (C, "    case 1: x++;"), (JAVA, "        int x = ok ? a :"), (TS, '    const s = "case x:"'),
    (GO, "\tcase <-done: // stop:"),
])
def test_a_line_that_is_no_arm_label_completes_itself(language, prefix):
    assert not completion_shape(prefix, "\n", language).multiline, prefix


# -- JavaScript / TypeScript: an expression continued below a line ending with `=>` or `=` --


@pytest.mark.parametrize(("language", "prefix", "suffix", "raw", "body"), [
    # Prettier's form for an arrow function whose body is too long for its line.
    (TS, "export const totalCents = (items: Item[]): number =>", "\n\nexport function f() {}\n",
     "\n  items.reduce((sum, item) => sum + item.cents, 0);\n\nexport function f() {}\n",
     "\n  items.reduce((sum, item) => sum + item.cents, 0);"),
    (JS, "  const message =", "\n  return message;\n}\n",
     '\n    `${user.name} has ${count} new items`;\n  return message;\n}\n',
     '\n    `${user.name} has ${count} new items`;'),
])
def test_a_line_ending_with_an_arrow_or_assignment_continues_on_the_lines_below(language, prefix, suffix, raw, body):
    """Nothing was shown there: the completion was the line's own rest, and the model's answer
    began with a line break."""
    assert completion_shape(prefix, suffix, language).multiline
    assert _completed(prefix, suffix, raw, language)[0] == body


@pytest.mark.parametrize(("language", "prefix"), [
    (TS, "  if (a =="), (JS, "  const ok = a >="), (TS, "  items.reduce((sum, item) =>"), (JS, '  const s = "a =>"'),
])
def test_a_comparison_an_open_call_or_a_string_ending_a_line_opens_no_continuation(language, prefix):
    assert not completion_shape(prefix, "\n", language).multiline, prefix
