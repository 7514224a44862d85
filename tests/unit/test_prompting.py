"""Prompt templates, budgets and post-processing: exact strings, with a simple exact tokenizer."""

from __future__ import annotations

from repomem.backends.templates import CODELLAMA, PLAIN, QWEN, STARCODER, template_for
from repomem.completion.postprocess import clean_completion, completion_shape
from repomem.completion.prompt import HEADER, SEPARATOR, ContextBlock, PromptBudget, build_prompt, render_block
from repomem.completion.warm_prefix import PromptStart
from repomem.failures import Failure


class WordTokenizer:
    """One token per whitespace-separated word plus one per newline: exact and easy to reason about."""

    def count(self, text: str) -> int:
        return len(text.split()) + text.count("\n")


def test_fim_strings_are_exact():
    assert CODELLAMA.infill("def f(", "):\n") == "<PRE> def f( <SUF>):\n <MID>"
    assert QWEN.infill("a = ", "\nb") == "<|fim_prefix|>a = <|fim_suffix|>\nb<|fim_middle|>"
    assert STARCODER.infill("x", "y") == "<fim_prefix>x<fim_suffix>y<fim_middle>"
    assert PLAIN.infill("x", "y") == "x"
    assert QWEN.repo_files("shop", [("a.py", "x = 1")]) + QWEN.current_file("b.py") == (
        "<|repo_name|>shop\n<|file_sep|>a.py\nx = 1\n<|file_sep|>b.py\n"
    )
    assert "<EOT>" in CODELLAMA.stops and "<|endoftext|>" in QWEN.stops


def test_template_from_names():
    assert template_for("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf") is QWEN
    assert template_for("codellama-7b.Q4_K_M.gguf") is CODELLAMA
    assert template_for("meta-llama/CodeLlama-13b-hf") is CODELLAMA
    assert template_for("bigcode/starcoder2-3b") is STARCODER
    assert template_for("gpt2") is PLAIN


def block(fragment: int, path: str, text: str, score: float) -> ContextBlock:
    return ContextBlock(fragment, path, 0, text.count("\n") + 1, text, score)


def test_prompt_layout_and_order():
    blocks = [block(1, "b.py", "def best():\n    pass", 9.0), block(2, "a.py", "def second():\n    pass", 5.0)]
    left = ["import os", "x = best("]
    prompt = build_prompt(left_lines=left, suffix=None, candidates=blocks, tokenizer=WordTokenizer(),
                          template=PLAIN, budget=PromptBudget(1000), order="score")
    assert not isinstance(prompt, Failure)
    expected = (HEADER + SEPARATOR + render_block(blocks[1]) + render_block(blocks[0]) + "import os\nx = best(")
    assert prompt.text == expected  # the most similar block sits last, nearest the cursor
    assert render_block(blocks[0]) == (
        "# the below code fragment can be found in:\n# b.py\n" + SEPARATOR
        + "# def best():\n#     pass\n" + SEPARATOR
    )
    stable = build_prompt(left_lines=left, suffix=None, candidates=blocks, tokenizer=WordTokenizer(),
                          template=PLAIN, budget=PromptBudget(1000), order="stable")
    assert [b.path for b in stable.blocks] == ["a.py", "b.py"]
    assert prompt.n_tokens == WordTokenizer().count(prompt.text) <= 1000


def test_budgets_trim_blocks_and_left_context():
    tokenizer = WordTokenizer()
    blocks = [block(i, f"f{i}.py", "\n".join(f"line_{i}_{j} = {j}" for j in range(20)), 10.0 - i) for i in range(5)]
    left = [f"value_{i} = compute({i})" for i in range(300)]
    budget = PromptBudget(max_prompt_tokens=400, context_share=0.5)
    prompt = build_prompt(left_lines=left, suffix=None, candidates=blocks, tokenizer=tokenizer,
                          template=PLAIN, budget=budget)
    assert not isinstance(prompt, Failure)
    assert prompt.n_tokens <= 400
    assert tokenizer.count("".join(render_block(b) for b in prompt.blocks)) <= 200
    assert [b.fragment for b in prompt.blocks] == sorted([b.fragment for b in prompt.blocks], reverse=True)
    assert prompt.text.endswith("value_299 = compute(299)")
    # one more line would not have fit
    assert prompt.left_first_line > 0
    longer = prompt.text.replace(left[prompt.left_first_line], left[prompt.left_first_line - 1] + "\n"
                                 + left[prompt.left_first_line])
    assert tokenizer.count(longer) > 400


def test_fim_prompt_and_too_long():
    prompt = build_prompt(left_lines=["def f(x):", "    return "], suffix="\n\nprint(f(2))", candidates=[],
                          tokenizer=WordTokenizer(), template=QWEN, budget=PromptBudget(100))
    assert prompt.text == "<|fim_prefix|>def f(x):\n    return <|fim_suffix|>\n\nprint(f(2))<|fim_middle|>"
    assert prompt.fim
    # The line at the cursor alone longer than the budget (a data line, minified code): its end is
    # shown, begun at a word (every such completion failed, "the line at the cursor alone exceeds").
    line = " ".join(f"w{i}" for i in range(500)) + " total = f("
    cut = build_prompt(left_lines=["import x", line], suffix="\n", candidates=[], tokenizer=WordTokenizer(),
                       template=QWEN, budget=PromptBudget(100))
    assert not isinstance(cut, Failure), cut
    assert cut.n_tokens <= 100 and cut.left_first_line == 1
    assert cut.text.startswith("<|fim_prefix|>w") and cut.text.endswith("total = f(<|fim_suffix|>\n<|fim_middle|>")
    shown = cut.text[len("<|fim_prefix|>"):].split(" ")[0]
    assert shown in line.split(" ")  # a whole word
    assert cut.n_tokens >= 90  # the budget used, less the words up to the next space past the cut


def test_repo_style_prompt():
    blocks = [block(1, "lib/a.py", "def helper():\n    return 1", 3.0)]
    prompt = build_prompt(left_lines=["x = helper("], suffix=")", candidates=blocks, tokenizer=WordTokenizer(),
                          template=QWEN, budget=PromptBudget(500), style="repo", repo="shop", path="main.py")
    assert prompt.text == ("<|repo_name|>shop\n<|file_sep|>lib/a.py\ndef helper():\n    return 1\n"
                           "<|file_sep|>main.py\n<|fim_prefix|>x = helper(<|fim_suffix|>)<|fim_middle|>")


def test_a_line_break_in_a_file_name_stays_inside_the_names_line():
    """git allows a newline in a file name: the rest of the name stood in the prompt as a line of
    code, out of the comment (or the file section's header) that holds the name."""
    blocks = [block(1, "lib/a\nimport os\r.py", "def helper():\n    return 1", 3.0)]
    commented = build_prompt(left_lines=["x = helper("], suffix=None, candidates=blocks, tokenizer=WordTokenizer(),
                             template=PLAIN, budget=PromptBudget(500))
    assert "# lib/a\\nimport os\\r.py\n" in commented.text
    assert all(line.startswith("#") for line in commented.text.split("\n")[:-1]), commented.text
    repo_form = build_prompt(left_lines=["x = helper("], suffix=")", candidates=blocks, tokenizer=WordTokenizer(),
                             template=QWEN, budget=PromptBudget(500), style="repo", repo="shop\nx", path="m\nain.py")
    assert repo_form.text == ("<|repo_name|>shop\\nx\n<|file_sep|>lib/a\\nimport os\\r.py\n"
                              "def helper():\n    return 1\n"
                              "<|file_sep|>m\\nain.py\n<|fim_prefix|>x = helper(<|fim_suffix|>)<|fim_middle|>")


def test_repo_style_opens_the_current_file_with_its_pinned_imports():
    """A pinned block of the cursor's file (its imports) is the head of the current file's section,
    not a second section of the same path; retrieved blocks stay files of their own."""
    pinned = ContextBlock(-1, "main.py", 0, 1, "from lib.a import helper", float("inf"), summary=True)
    blocks = [block(1, "lib/a.py", "def helper():\n    return 1", 3.0)]
    prompt = build_prompt(left_lines=["    x = helper("], suffix=None, candidates=blocks, tokenizer=WordTokenizer(),
                          template=QWEN, budget=PromptBudget(500), style="repo", repo="shop", path="main.py",
                          pinned=[pinned])
    assert prompt.text == ("<|repo_name|>shop\n<|file_sep|>lib/a.py\ndef helper():\n    return 1\n"
                           "<|file_sep|>main.py\nfrom lib.a import helper\n    x = helper(")
    assert prompt.text.count("main.py") == 1


def test_repo_style_budgets_blocks_as_it_writes_them():
    """Blocks are charged what the repository form costs (no comment marks, no rules), so a block
    budget that holds one commented block holds both blocks written as files."""
    blocks = [block(1, "lib/a.py", "a b c d e f", 3.0), block(2, "lib/b.py", "g h i j k l", 2.0)]
    one_commented = WordTokenizer().count(render_block(blocks[0]))
    budget = PromptBudget(2 * (one_commented + 1), context_share=0.5)
    comments = build_prompt(left_lines=["x = 1"], suffix=None, candidates=blocks, tokenizer=WordTokenizer(),
                            template=QWEN, budget=budget)
    repo = build_prompt(left_lines=["x = 1"], suffix=None, candidates=blocks, tokenizer=WordTokenizer(),
                        template=QWEN, budget=budget, style="repo", repo="shop", path="main.py")
    assert len(comments.blocks) == 1 and len(repo.blocks) == 2
    assert repo.block_tokens == WordTokenizer().count(QWEN.repo_files("shop", [(b.path, b.text) for b in blocks]))


def test_shape_from_syntax():
    assert completion_shape("def f(x):").multiline
    assert completion_shape("if x:\n    ").multiline
    # An open bracket ending the line runs on to its closer (tests/unit/test_bracket_continuation.py).
    assert completion_shape("x = compute(").bracket_closer == ")"
    assert not completion_shape("x = compute(a").multiline
    assert not completion_shape("x = 1\n").multiline
    assert not completion_shape('s = "abc:', '"\n').multiline  # inside a string
    assert not completion_shape("# note:").multiline  # a comment


def test_clean_single_line():
    shape = completion_shape("total = compute(")
    assert clean_completion("a, b)\nprint(total)\n", shape) == "a, b)"
    assert clean_completion("a)<|fim_pad|>junk", shape, QWEN.sentinels) == "a)"
    blank = completion_shape("def f():\n    x = 1\n    ")
    assert clean_completion("\n    return x\n", blank) == "return x"


def test_clean_block_stops_at_dedent_and_top_level():
    shape = completion_shape("def area(r):")
    raw = "\n    pi = 3.14\n    return pi * r * r\n\ndef other():\n    pass\n"
    assert clean_completion(raw, shape) == "\n    pi = 3.14\n    return pi * r * r"
    nested = completion_shape("class A:\n    def m(self):")
    raw = "\n        return 1\n    def n(self):\n        return 2\n"
    assert clean_completion(raw, nested) == "\n        return 1"


def test_clean_cuts_loops_and_suffix_echo():
    shape = completion_shape("def f():")
    loop = "\n    x += 1\n    x += 1\n    x += 1\n    x += 1\n"
    assert clean_completion(loop, shape) == "\n    x += 1\n    x += 1"
    echo = "\n    y = 2\n    return y"
    assert clean_completion(echo, shape, suffix="\n    return y\n") == "\n    y = 2"


def test_a_one_line_completion_that_is_the_next_line_below_is_dropped():
    """Small models skip the line being written and go on with the one below it: shown, the
    editor would hold that line twice."""
    prefix = "def total(items):\n    count = 0\n"
    below = "\n    return sum(items)\n"
    blank = completion_shape(prefix, below)
    assert clean_completion("    return sum(items)\n", blank, suffix=below) == ""
    assert clean_completion("\n    return sum(items)", blank, suffix="\n\n" + below) == ""  # past blank lines
    # Typed halfway, the line as it would stand is compared.
    typed = completion_shape(prefix + "    ret", below)
    assert clean_completion("urn sum(items)\n", typed, suffix=below) == ""
    # Anything else is kept: another line, the same code at another indentation, and any answer
    # where code follows the cursor on its line.
    assert clean_completion("    count = len(items)\n", blank, suffix=below) == "    count = len(items)"
    assert clean_completion("return sum(items)\n", blank, suffix=below) == "return sum(items)"
    middle = completion_shape(prefix + "    x = f(", ")" + below)
    assert clean_completion("items)\n", middle, suffix=")" + below) == "items"


def test_enclosing_definition():
    from repomem.completion.request import enclosing_definition

    lines = ["import os", "", "class A:", "    def m(self):", "        x = 1", "", "        y = 2", "x = 3"]
    assert enclosing_definition(lines, 4) == 3
    assert enclosing_definition(lines, 6) == 3
    assert enclosing_definition(lines, 5) == 3  # a blank line inside the method
    assert enclosing_definition(lines, 3) == 3
    assert enclosing_definition(lines, 7) == -1


def test_similarity_order_puts_the_most_similar_block_nearest_the_code():
    # Ranked by relevance (score), but the second block is the lexically closer one (similarity).
    blocks = [ContextBlock(1, "a.py", 0, 2, "def related():\n    pass", 9.0, similarity=3.0),
              ContextBlock(2, "b.py", 0, 2, "def similar():\n    pass", 5.0, similarity=7.0),
              ContextBlock(3, "c.py", 0, 2, "def third():\n    pass", 4.0)]  # no similarity: its score
    left = ["x = 1"]
    common = dict(left_lines=left, suffix=None, candidates=blocks, tokenizer=WordTokenizer(), template=PLAIN,
                  budget=PromptBudget(1000))
    by_score = build_prompt(**common, order="score")
    by_similarity = build_prompt(**common, order="similarity")
    assert [b.fragment for b in by_score.blocks] == [3, 2, 1]
    assert [b.fragment for b in by_similarity.blocks] == [1, 3, 2]
    assert by_similarity.text.endswith(render_block(blocks[1]) + "x = 1")


def test_pinned_blocks_come_first_outside_the_block_budget():
    tokenizer = WordTokenizer()
    header = ContextBlock(-1, "cur.py", 0, 1, "from .a import best", float("inf"), summary=True)
    blocks = [block(1, "a.py", "def best():\n    pass", 9.0)]
    left = [f"v{i} = best({i})" for i in range(40)]
    common = dict(left_lines=left, suffix=None, candidates=blocks, tokenizer=tokenizer, template=PLAIN)
    plain = build_prompt(**common, budget=PromptBudget(120))
    pinned = build_prompt(**common, budget=PromptBudget(120), pinned=[header])
    assert [b.fragment for b in pinned.blocks] == [-1, 1]  # first, and the retrieved block still fits
    assert pinned.text.index("from .a import best") < pinned.text.index("def best():")
    assert pinned.n_tokens <= 120 and pinned.left_first_line > plain.left_first_line  # its room: the left's
    # When only the cursor's line fits, the pinned block goes too rather than failing.
    tight = build_prompt(**common, budget=PromptBudget(8, context_share=0.0), pinned=[header])
    assert not isinstance(tight, Failure) and tight.blocks == () and tight.text.endswith("v39 = best(39)")


def _first_line_by_search(left: list[str], fits, hint: int | None) -> int:
    """The first kept line as build_prompt chose it before the hint shortcut: a binary search for
    the fewest dropped lines, then the hint (kept while the search ends at or before it, else a
    quarter of the room cleared)."""
    low, high = 0, max(len(left) - 1, 0)
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    if hint is not None and low > 0:
        low = hint if low <= hint < len(left) else min(len(left) - 1, low + (len(left) - low) // 4)
    return low


def test_a_first_line_hint_gives_what_the_search_gives_with_fewer_counts():
    import random

    rng = random.Random(7)
    tokenizer = WordTokenizer()
    blocks = [block(1, "b.py", "def best():\n    return helper(1, 2)", 9.0)]
    for _ in range(300):
        left = [" ".join(["w"] * rng.randint(0, 6)) for _ in range(rng.randint(1, 60))]
        budget = PromptBudget(rng.randint(20, 200), context_share=0.5)
        hint = rng.choice([None, 0, rng.randint(0, len(left) + 3), rng.randint(0, len(left) - 1)])

        class Counting(WordTokenizer):
            calls = 0

            def count(self, text: str) -> int:
                type(self).calls += 1
                return super().count(text)

        prompt = build_prompt(left_lines=left, suffix=None, candidates=blocks, tokenizer=Counting(), template=PLAIN,
                              budget=budget, order="score", start=PromptStart(None, hint, 0))
        if isinstance(prompt, Failure):
            continue
        shown = list(prompt.blocks)
        # The reference search over the same blocks (the fit above may have dropped the block).
        unbounded = PromptBudget(10**6)
        fits = [tokenizer.count(build_prompt(left_lines=left[first:], suffix=None, candidates=shown,
                                             tokenizer=tokenizer, template=PLAIN, budget=unbounded,
                                             order="score").text) <= budget.max_prompt_tokens
                for first in range(len(left))]
        assert prompt.left_first_line == _first_line_by_search(left, fits.__getitem__, hint), (left, budget, hint)
        if hint is not None and 0 < hint < len(left) and (fits[0] or fits[hint]):
            assert Counting.calls <= 8  # the search alone would count the prompt ~log2(lines) times more


def _markers(template, text: str) -> list[str]:
    return template._special_text.findall(text) if template.specials else []


def test_repository_text_never_carries_a_special_token_into_the_prompt():
    """A repository that holds the templates' own special texts (a tokenizer's source, a chat
    template) reaches the prompt with each of them broken: the only special texts left are the
    ones the template wrote, in every form (fill-in-the-middle, left to right, repository form,
    the memories' instruction turn), and the broken form turns back in a completion."""
    for template in (QWEN, CODELLAMA, STARCODER):
        hostile = "TOKENS = [" + ", ".join(f'"{s}"' for s in template.specials) + "]"
        blocks = [block(1, f"lib/{template.specials[0]}.py", hostile, 3.0)]
        for style in ("comments", "repo"):
            for suffix in (hostile, None):
                prompt = build_prompt(left_lines=[hostile, "x = "], suffix=suffix, candidates=blocks,
                                      tokenizer=WordTokenizer(), template=template, budget=PromptBudget(5000),
                                      style=style, repo=template.specials[1], path=template.specials[2])
                plain = build_prompt(left_lines=["y", "x = "], suffix=suffix and "z",
                                     candidates=[block(1, "lib/a.py", "a", 3.0)], tokenizer=WordTokenizer(),
                                     template=template, budget=PromptBudget(5000), style=style, repo="r",
                                     path="p.py")
                assert prompt.blocks, (template.family, style)
                assert _markers(template, prompt.text) == _markers(template, plain.text), (template.family, style)
        question = template.instruction(hostile)
        assert len(_markers(template, question)) == len(_markers(template, template.instruction("q")))
        assert template.plain(template.plain(hostile)) == template.plain(hostile)
        assert template.restored(template.plain(hostile)) == hostile
        assert template.restored("x = 1") == "x = 1" and template.plain("x < y > z") == "x < y > z"
    assert PLAIN.plain("<|endoftext|>") == "<|endoftext|>" == PLAIN.restored("<|endoftext|>")


def test_repeated_lines_around_different_code_are_no_loop_and_a_repeated_run_is():
    """A line seen the third time anywhere counted as a loop: the third `}` of a JavaScript body
    or the third `except KeyError:` cut the completion there, braces left open."""
    from repomem.languages.registry import language_named

    javascript = language_named("javascript")
    body = "\n  if (a) {\n    x();\n  }\n  if (b) {\n    y();\n  }\n  if (c) {\n    z();\n  }\n  return 0;\n}\n"
    shape = completion_shape("function f(a, b, c) {", "", javascript)
    assert clean_completion(body, shape) == body.rstrip("\n")
    python = "\n    try:\n        a()\n    except KeyError:\n        pass\n" * 3 + "    return 1\n"
    assert clean_completion(python.replace("a()", "b()", 1).replace("a()", "c()", 1), completion_shape("def f():")) \
        .count("except KeyError:") == 3
    loop = "\n    x = load()\n    y = x + 1\n    x = load()\n    y = x + 1\n    x = load()\n    y = x + 1\n    z = 2\n"
    assert clean_completion(loop, completion_shape("def f():")) == "\n    x = load()\n    y = x + 1" * 2


def test_a_block_opener_with_a_hash_in_a_string_and_a_body_holding_a_long_string():
    """`'#'` in a string read as a comment (the line was no opener: one line completed, nothing);
    lines of a triple-quoted string at column 0 ended the body."""
    shape = completion_shape("def strip(lines):\n    for line in lines:\n        if line.startswith('#'):")
    assert shape.multiline and clean_completion("\n            continue\n        yield line\n", shape) \
        == "\n            continue"
    query = '\n    query = """\nSELECT id\nFROM orders\n"""\n    return db.run(query)\n'
    assert clean_completion(query, completion_shape("def load(db):")) == query.rstrip("\n")


def test_a_one_line_completion_leaves_the_closers_the_line_already_has():
    """`sum(price(|))` completed `item) for item in items)` made the line one `)` too long."""
    shape = completion_shape("    return sum(price(")
    assert clean_completion("item) for item in items)", shape, suffix="))\n") == "item) for item in items"
    assert clean_completion("g(1)", completion_shape("x = f("), suffix=")\n") == "g(1)"  # balanced: kept
    assert clean_completion("a, b))", completion_shape("x = f("), suffix=")\n") == "a, b"
    assert clean_completion("')'", completion_shape("x = f("), suffix=")\n") == "')'"  # in a string


def test_a_cursor_line_longer_than_the_suffix_budget_is_cut_not_dropped():
    """The code after the cursor on its line was dropped whole when it alone exceeded
    max_suffix_tokens, and the prompt then said that nothing followed the cursor."""
    rest = ", ".join(f"argument_{i}" for i in range(66)) + ")"
    prompt = build_prompt(left_lines=["result = combine("], suffix=rest + "\nreturn result", candidates=[],
                          tokenizer=WordTokenizer(), template=QWEN, budget=PromptBudget(2048, 0.5, 64))
    shown = prompt.text.split("<|fim_suffix|>")[1].split("<|fim_middle|>")[0]
    assert shown and rest.startswith(shown) and 60 <= WordTokenizer().count(shown) <= 64
    many = "\n".join(f"line_{i} = {i}" for i in range(20))  # 79 tokens; 19 lines are 75
    prompt = build_prompt(left_lines=["x = "], suffix=many, candidates=[], tokenizer=WordTokenizer(),
                          template=QWEN, budget=PromptBudget(2048, 0.5, 78))
    assert prompt.suffix_lines == 19  # halving from 20 kept 10 before


def test_a_suffix_budget_as_large_as_the_prompts_leaves_room_for_the_code_before_the_cursor():
    """With max_suffix_tokens at (or near) max_prompt_tokens the code after the cursor took the whole
    budget: every completion with code below it failed with "the line at the cursor alone exceeds
    the prompt budget", the line at the cursor being four spaces."""
    tokenizer = WordTokenizer()
    left = [f"value_{i} = compute({i})" for i in range(40)] + ["    "]
    below = "\n".join(f"other_{i} = compute({i})" for i in range(300))
    blocks = [block(1, "lib/a.py", "def compute(x):\n    return x", 3.0)]
    for max_suffix in (100, 200, 90):
        prompt = build_prompt(left_lines=left, suffix=below, candidates=blocks, tokenizer=tokenizer,
                              template=QWEN, budget=PromptBudget(100, 0.5, max_suffix))
        assert not isinstance(prompt, Failure), prompt
        assert prompt.fim and prompt.blocks and tokenizer.count(prompt.text) <= 100
        assert 0 < prompt.suffix_tokens <= 25  # a quarter of the prompt at most
        assert prompt.text.count("value_") >= 5  # lines above the cursor, not the cursor line alone


def test_blocks_are_framed_in_the_comment_of_a_file_no_grammar_covers():
    from repomem.languages.registry import line_comment_of

    assert [line_comment_of(path) for path in ("a/conf.yaml", "q.sql", "Makefile", "x.py", "y.go", "z.lua")] == \
        ["#", "--", "#", "#", "//", "--"]


def test_xml_under_its_other_names_frames_blocks_in_xml_comments():
    """An XHTML page, an SVG image, an XSLT sheet, a .NET project: XML, where `#` is text, as in .xml;
    and the other languages whose comment is not `#`."""
    from repomem.completion.prompt import header
    from repomem.languages.registry import line_comment_of

    paths = ("web/cart.xhtml", "icons/logo.svg", "site.xslt", "App/App.csproj", "Views/Main.xaml", "Info.plist")
    assert {line_comment_of(path) for path in paths} == {"<!-- -->"}
    assert header(line_comment_of("web/cart.xhtml")).startswith("<!-- Here are")
    # Nor is `#` a comment in OCaml, Fortran, Vim script, batch files or reStructuredText.
    assert [line_comment_of(path) for path in ("lib/a.ml", "solve.f90", "plugin.vim", "build.bat", "index.rst")] \
        == ["(* *)", "!", '"', "REM", ".."]
    assert header("(* *)") == "(* Here are some relevant code fragments from other files of the repo: *)\n"


def test_a_language_without_line_comments_frames_blocks_in_its_block_comment():
    """CSS, HTML, Vue and Markdown have no line comment: blocks framed with `#` read as selectors,
    text or headings there. Their block comment holds each line, a closer inside a line broken up;
    the `#` languages' prompts stay as they were, byte for byte."""
    from repomem.completion.prompt import HEADER, SEPARATOR, commented, frames_blocks, header, render_context
    from repomem.languages.registry import line_comment_of

    assert [line_comment_of(path) for path in ("a.css", "b.scss", "c.vue", "d.html", "e.md")] == \
        ["/* */", "/* */", "<!-- -->", "<!-- -->", "<!-- -->"]
    assert HEADER == "# Here are some relevant code fragments from other files of the repo:\n"
    assert SEPARATOR == "# " + "-" * 50 + "\n" and commented("#", "") == "# "
    css = ContextBlock(fragment=1, path="styles/theme.css", start_line=0, end_line=2,
                       text=":root {\n  --brand: #c0ffee; /* the brand */\n}", score=1.0)
    framed = render_context([css], "/* */").splitlines()
    assert framed[0] == "/* Here are some relevant code fragments from other files of the repo: */"
    assert framed[6] == "/*   --brand: #c0ffee; /* the brand * / */"  # still one comment
    assert all(line.startswith("/* ") and line.endswith(" */") and line.count("*/") == 1 for line in framed)
    assert [frames_blocks(line, "/* */") for line in framed] == [True, True, True, False, True, False, False,
                                                                  False, True]
    assert header("<!-- -->") == "<!-- Here are some relevant code fragments from other files of the repo: -->\n"
    assert commented("<!-- -->", "a --> b") == "<!-- a - - > b -->"
    assert not frames_blocks("<div>", "<!-- -->")


def test_brace_bodies_keep_their_own_closing_braces_and_leave_the_suffixs():
    """A nested block's `}` was taken for the `}` after the cursor and dropped (a Go loop ending a
    function left open); a `}` after the cursor closing an enclosing block took the completion's
    own; a block the suffix closes farther down kept the model's early `}`; braces in multi-character
    single-quoted strings and block comments were counted."""
    from repomem.languages.registry import language_named

    go, rust, javascript = (language_named(name) for name in ("go", "rust", "javascript"))
    loop = "\n\tfor _, u := range users {\n\t\tfmt.Println(u.Name)\n\t}\n}\n\n"
    shape = completion_shape("func PrintAll(users []store.User) {", "\n}\n", go)
    assert clean_completion(loop, shape, suffix="\n}\n") == loop[:loop.index("\n}")]  # the loop's own `}` kept
    arms = "\n        Some(v) => v,\n        None => 0,\n    }\n}\n"
    shape = completion_shape("fn f(x: Option<i32>) -> i32 {\n    match x {", "\n}\n", rust)
    assert clean_completion(arms, shape, suffix="\n}\n") == "\n        Some(v) => v,\n        None => 0,\n    }"
    shape = completion_shape("func f() int {\n\t", "\n\tx := 1\n\treturn x\n}", go)
    assert clean_completion("y := 2\n}\n", shape, suffix="\n\tx := 1\n\treturn x\n}") == "y := 2"
    body = "\n  out.write('{\\n');\n  /* { */\n  return out;\n}\n\nfunction close(out) {\n  return 1;\n}\n"
    shape = completion_shape("function open(out) {", "", javascript)
    assert clean_completion(body, shape) == "\n  out.write('{\\n');\n  /* { */\n  return out;\n}"


def test_a_byte_order_mark_before_a_files_first_line_stays_out_of_the_prompt():
    """A file saved with a byte-order mark (Windows editors, Java and C# projects) reads with U+FEFF
    before its first line: its first window, and the current file's left context from its top,
    showed it mid-prompt, inside a commented line or at the head of a file section."""
    cart = ContextBlock(1, "src/Cart.java", 0, 2, "\ufeffpublic class Cart {\n\tint total() { return 1; }", 2.0)
    left = ["\ufeffpublic class Shop {", "\tint t = cart.total("]
    for template, style in ((PLAIN, "comments"), (QWEN, "comments"), (QWEN, "repo")):
        for suffix in (None, "\n}"):
            prompt = build_prompt(left_lines=left, suffix=suffix, candidates=[cart], tokenizer=WordTokenizer(),
                                  template=template, budget=PromptBudget(1000), style=style, repo="shop",
                                  path="src/Shop.java", comment="//")
            assert not isinstance(prompt, Failure) and prompt.blocks, (template.family, style)
            assert "\ufeff" not in prompt.text, (template.family, style, suffix)
            assert "public class Cart {" in prompt.text and "public class Shop {\n\tint t = cart.total(" in prompt.text
    assert render_block(cart, "//").splitlines()[3] == "// public class Cart {"
