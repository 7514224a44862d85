"""Post-processing a model's raw answer into the completion shown, in Python: cases found wrong in
a review of the one-line / block decision, the body's indentation and the answer's line breaks."""

from __future__ import annotations

from repomem.backends.templates import QWEN
from repomem.completion.postprocess import clean_completion, completion_settled, completion_shape


def test_a_colon_inside_a_bracket_the_line_leaves_open_opens_no_block():
    """`d = {"a":|}` (an editor's auto-paired brace), `x[1:|]`, `def f(x:|)` and a lambda's colon end
    with `:` but open no block: they complete the rest of the line, and the closer the line already
    has is not written again. Read as a block opener, the answer went through the body's path, which
    leaves the line's rest alone: the line became `d = {"a": 1}}`. A user wants `1` inserted (the
    `}` is already there)."""
    shape = completion_shape('    d = {"a":', "}\n")
    assert not shape.multiline
    assert clean_completion(" 1}\n    return d\n", shape, suffix="}\n") == " 1"
    assert clean_completion("2]\n", completion_shape("y = x[1:", "]\n"), suffix="]\n") == "2"
    annotation = completion_shape("def f(x:", ")\n")
    assert not annotation.multiline
    assert clean_completion(" int)", annotation, suffix=")\n") == " int"
    assert not completion_shape("rows.sort(key=lambda row:", ")\n").multiline
    assert not completion_shape("    key = lambda row:").multiline  # no bracket, still no block
    # Block openers stay openers: a condition closed over several lines, a lambda inside the
    # statement, a dict literal iterated.
    assert completion_shape("    if (a and\n            b):").multiline
    assert completion_shape("for row in sorted(rows, key=lambda r: r[0]):").multiline
    assert completion_shape('for k in {"a": 1}:').multiline
    assert completion_shape("if f(lambda: 1):").multiline


def test_the_body_of_an_opener_written_over_several_lines_is_indented_from_its_statements_start():
    """PEP 8's own layout (`def long_function_name(` / hanging `var_four):`) and an `if (a and` /
    aligned `b):`: the body's indent was measured from the opener's last line, deeper than the body
    itself, so every body line read as a dedent and the completion was empty. A user wants the
    body, up to the dedent to the statement's own indent."""
    pep8 = completion_shape("def long_function_name(\n        var_one, var_two,\n        var_four):")
    assert pep8.multiline and pep8.block_indent == 0
    raw = "\n    print(var_one)\n    return var_two\n\nx = 1\n"
    assert clean_completion(raw, pep8) == "\n    print(var_one)\n    return var_two"
    aligned = completion_shape("class A:\n    def f(self, a,\n          b):")
    assert clean_completion("\n        return a + b\n    def g(self):\n", aligned) == "\n        return a + b"
    condition = "def f(a, b):\n    if (a //\n            b):"  # `//` is Python's floor division
    assert clean_completion("\n        return 1\n    return 2\n", completion_shape(condition)) == "\n        return 1"
    # On the blank line below such an opener, the same.
    below = completion_shape("def f(a, b):\n    if (a and\n            b):\n        ")
    assert below.multiline and below.block_indent == 4
    assert clean_completion("return 1\n        a()\n    return 2\n", below) == "return 1\n        a()"
    # A dict literal closed over several lines counts too.
    braces = completion_shape('for k in {"a": 1,\n          "b": 2}:')
    assert clean_completion("\n    print(k)\nprint(0)\n", braces) == "\n    print(k)"


def test_a_lone_carriage_return_in_the_answer_breaks_the_line():
    """`\\r\\n` was read as a line break, a lone `\\r` (old Mac line ends, as the file reader
    normalizes them: repomem.index.scan.normalize_newlines) was not: the body's second line was no
    line to the dedent check, and the editor received a raw `\\r` in the middle of a line. A user
    wants the lines, each ended as the file's are."""
    body = completion_shape("def f():")
    assert clean_completion("\n    x = 1\r    y = 2\rprint(x)\r", body) == "\n    x = 1\n    y = 2"
    line = completion_shape("x = foo(")
    assert clean_completion("a)\rb = 2\r", line) == "a)"
    assert completion_settled("a)\r", line)  # the line has ended


def test_a_body_on_a_blank_line_below_an_opener_starts_on_the_cursors_line():
    """The cursor on the (blank, maybe indented) line below `class A:`: an answer starting with a
    line break was shown as is, so accepting it left the cursor's line blank (holding its
    indentation as trailing spaces) and the body a line lower. A one-line completion there already
    skips such leading breaks; a user wants the body to start where the cursor is, its first line
    without the indentation the cursor's line already has."""
    indented = completion_shape("class A:\n    ")
    assert clean_completion("\n    x = 1\n    y = 2\n", indented) == "x = 1\n    y = 2"
    assert clean_completion("\n\n    x = 1\n\nz = 3\n", indented) == "x = 1"
    column0 = completion_shape("class A:\n")
    assert clean_completion("\n    x = 1\n    y = 2\n", column0) == "    x = 1\n    y = 2"
    # Nothing of the body yet, or a dedent first: nothing to show, as before.
    assert clean_completion("\n\n", indented) == ""
    assert clean_completion("\nz = 3\n", column0) == ""
    # Right after the opener (the cursor line is the opener's), the line break is the body's own.
    assert clean_completion("\n    x = 1\n", completion_shape("class A:")) == "\n    x = 1"


def test_settled_prefixes_of_these_answers_clean_as_the_whole():
    """Generation stops once completion_settled says so: every prefix it accepts must clean to what
    the whole answer cleans to (tests/unit/test_settled_completion.py, on these shapes)."""
    cases = [
        (completion_shape("class A:\n    "), "\n\n    x = 1\n    y = 2\nz = 3\n"),
        (completion_shape("class A:\n"), "\n    x = 1\r\n    y = 2\rz = 3\r\n"),
        (completion_shape("def g(\n        a):"), "\n    return a\r\ndef h():\n"),
        (completion_shape('    d = {"a":', "}\n"), " 1}\r\n    return d\n"),
    ]
    for shape, raw in cases:
        whole = clean_completion(raw, shape, QWEN.sentinels, "")
        for end in range(len(raw) + 1):
            if completion_settled(raw[:end], shape, QWEN.sentinels, ""):
                assert clean_completion(raw[:end], shape, QWEN.sentinels, "") == whole, (raw[:end], raw)


def test_a_body_on_a_blank_line_that_is_the_code_below_it_is_dropped():
    """The cursor on the empty line below `def f():`, the function's body already below it: a
    body that writes those lines again was shown, since its first line was compared without its
    indentation (`return 1` against `    return 1`). The editor would hold them twice; a user wants
    nothing there, as a one-line completion that is the next line shows nothing."""
    below = "\n    return 1\n"
    assert clean_completion("    return 1\n", completion_shape("def f():\n", below), suffix=below) == ""
    indented = completion_shape("def f():\n    ", below)
    assert clean_completion("return 1\n", indented, suffix=below) == ""
    two = "\n    x = 1\n    return x\n"
    assert clean_completion("    x = 1\n    return x\n", completion_shape("def f():\n", two), suffix=two) == ""
    # A body that ends with them keeps its own lines; the same code at another indentation is
    # another line.
    assert clean_completion("    y = 0\n    return 1\n", completion_shape("def f():\n", below), suffix=below) \
        == "    y = 0"
    assert clean_completion("        return 1\n", completion_shape("def f():\n", below), suffix=below) \
        == "        return 1"
