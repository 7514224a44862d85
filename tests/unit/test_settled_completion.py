"""Generation stops once the completion is settled: every token after it would be cut by
`clean_completion`. Checked on every prefix of many model-like texts, in every completion shape:
where `completion_settled` says a prefix is settled, cleaning that prefix gives what cleaning the
whole text gives."""

from __future__ import annotations

import random

import pytest

from repomem.backends.templates import QWEN
from repomem.completion.engine import _without_healed
from repomem.completion.postprocess import clean_completion, completion_settled, completion_shape
from repomem.languages.registry import language_named

GO = language_named("go")

# (prefix before the cursor, suffix after it, language): each completion shape the engine makes.
SHAPES = [
    ("def f(x):", "", None),  # a block opener: its body, multiline
    ("def f(x):\n    ", "\nreturn_later()\n", None),  # a blank line after an opener, with a suffix to echo
    ("total = compute(", "", None),  # the rest of a line
    ("x = 1\n", "", None),  # a blank line: the first real line
    ("x = 1\n", "\nreturn_later()\n", None),  # ... whose line below a one-line answer may echo
    ("x = 1\n    ", "", None),  # a blank indented line: the first real line, left-stripped
    ('s = "abc:', '"\n', None),  # inside a string: one line
    ("func add(a, b int) int {", "", GO),  # a brace block
    ("if x > 0 {\n\t", "\n}\n", GO),  # a brace block whose closing brace the suffix holds
    ("x := add(", "", GO),
]

# Pieces a model streams: code, indents, newlines, braces, repeats (loops), sentinels split over tokens.
PIECES = ["x = 1", "return y", "    ", "\t", "\n", "\n", "\n", "\r\n", "  ", "def g():", "class C:", "if a:",
          "{", "}", "} else {", '"}"', "// }", "foo()", "@dec", "<|fim", "_pad|>", "<|endoftext|>",
          "return_later()", "y := 2", "pass", "from m import n", " ", "a()", "\n    a()"]


def _texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        texts.append("".join(rng.choice(PIECES) for _ in range(rng.randint(1, 30))))
    # A loop the model falls into, and a body that runs past max_lines.
    texts.append("\n    a()\n    a()\n    a()\n    a()\n")
    texts.append("\n    a()\n    a()\n    a()x\n    b()\n")  # the third `a()` is not one until its line ends
    texts.append("".join(f"\n    v{i} = {i}" for i in range(30)) + "\n")
    texts.append('sql = "%s>(' + "%s, " * 20 + '%s)"\n    return sql\n')  # a loop inside a line, left later
    return texts


@pytest.mark.parametrize(("prefix", "suffix", "language"), SHAPES)
@pytest.mark.parametrize("max_lines", [1, 3, 16])
def test_a_settled_prefix_cleans_as_the_whole_text(prefix, suffix, language, max_lines):
    shape = completion_shape(prefix, suffix, language) if language else completion_shape(prefix, suffix)
    settled_somewhere = 0
    for text in _texts(len(prefix) * 31 + max_lines, 300):
        whole = clean_completion(text, shape, QWEN.sentinels, suffix, max_lines)
        for end in range(len(text) + 1):
            if completion_settled(text[:end], shape, QWEN.sentinels, suffix, max_lines):
                settled_somewhere += 1
                assert clean_completion(text[:end], shape, QWEN.sentinels, suffix, max_lines) == whole, \
                    (prefix, text[:end], text)
                break
    assert settled_somewhere > 50  # the check bites: most texts settle before they end


def test_what_settles_a_completion():
    body = completion_shape("def f(x):")
    assert not completion_settled("\n    y = x + 1\n    return y", body)  # the body may go on
    assert completion_settled("\n    y = x + 1\n    return y\n\n", body) is False  # a blank line decides nothing
    assert completion_settled("\n    return y\nd", body)  # a dedent has begun: the body is over
    assert completion_settled("\n    a()\n    a()\n    a()\n", body)  # a loop is cut
    assert not completion_settled("\n    a()\n    a()\n    a()", body)  # unless its line goes on
    line = completion_shape("total = compute(")
    assert not completion_settled("a, b)", line) and completion_settled("a, b)\n", line)
    blank = completion_shape("x = 1\n")
    assert not completion_settled("\n\n", blank) and completion_settled("\n\ny = 2\n", blank)
    brace = completion_shape("func add(a, b int) int {", "", GO)
    assert not completion_settled("\n\treturn a + b\n}", brace)  # `}` may still be `} else {`
    assert completion_settled("\n\treturn a + b\n}\n", brace)
    assert completion_settled("\n\treturn a<|fim_pad|>", body, QWEN.sentinels)  # a sentinel ends the text


def test_a_line_that_loops_ends_there():
    line = completion_shape("sql = build(")
    looping = "s>(" + "%s, " * 5 + "%s"
    assert not completion_settled(looping, line)  # 5 units and a half: not yet
    assert completion_settled(looping + ", ", line)  # the sixth
    assert clean_completion(looping + ", %s, %s, %s)", line) == looping + ","
    assert not completion_settled("IdMaker([], [], None, None, None, None, None)", line)  # five: written on purpose
    separator = completion_shape("    # ")
    assert not completion_settled("-" * 70, separator)  # one character repeated is written on purpose
    body = completion_shape("def f(x):")
    assert completion_settled("\n    return [" + "TypeVar, " * 6, body)


def test_a_run_the_file_shows_is_no_loop():
    table = "TABLE = [\n    [" + "0, " * 15 + "0],\n    ["
    row = "0, " * 15 + "0],"
    assert clean_completion(row, completion_shape(table)) == row  # a row like the ones above it
    assert not completion_settled(row[:-3], completion_shape(table))
    elsewhere = completion_shape("weights = [")
    assert completion_settled(row[:-3], elsewhere)  # no such row in the file: a loop
    assert clean_completion(row, elsewhere) == "0, 0, 0, 0, 0, 0,"
    after = completion_shape("weights = [", "\nDEFAULT = [" + "0, " * 15 + "0]\n")
    assert clean_completion(row, after) == row  # the text after the cursor counts too
    shorter = completion_shape("weights = [", "\nDEFAULT = [" + "0, " * 9 + "0]\n")
    assert clean_completion(row, shorter) == "0, " * 9 + "0,"  # a run longer than the file's: a loop


@pytest.mark.parametrize("healed", ["", " ", "    "])
def test_taking_off_the_healed_spaces_keeps_a_prefix_a_prefix(healed):
    for text in ["", " ", "  ", "   x", "    x", "     x y", "\n    z"]:
        whole = _without_healed(text + " tail", healed)
        for end in range(len(text) + 1):
            assert whole.startswith(_without_healed(text[:end], healed))
