"""backends.token_pieces: where a text is cut, and when cutting is allowed."""

from __future__ import annotations

from repomem.backends.token_pieces import PieceCounts, token_pieces

SPECIAL = ["<|fim_prefix|>", "<|fim_suffix|>", "<|endoftext|>"]


def test_a_piece_is_a_line_with_the_blank_lines_after_it_and_special_tokens_stand_apart():
    cutter = token_pieces("qwen2", SPECIAL, strips=False)
    assert cutter is not None
    text = "<|fim_prefix|>def f(x):\n\n    \n    return x\r\n\tpass<|fim_suffix|>\n  \n<|endoftext|>"
    n_special, pieces = cutter.pieces(text)
    assert n_special == 3
    assert pieces == ["def f(x):\n\n    \n", "    return x\r\n", "\tpass", "\n  \n"]
    assert "".join(pieces) == text.replace("<|fim_prefix|>", "").replace("<|fim_suffix|>", "").replace(
        "<|endoftext|>", "")
    # A line that begins with whitespace other than indentation (a no-break space) is not cut
    # before: the cut is made only where the tokenizer's chunks are known to end.
    assert cutter.pieces("a\n\u00a0b\nc")[1] == ["a\n\u00a0b\n", "c"]
    assert cutter.pieces("") == (0, [])


def test_no_cutting_where_sums_are_not_known_to_be_exact():
    assert token_pieces("llama3", SPECIAL, strips=False) is None
    assert token_pieces("qwen2", SPECIAL, strips=True) is None
    assert token_pieces("qwen2", ["<|a|>", "x<|a|>y"], strips=False) is None


def test_piece_counts_keep_the_most_recently_used():
    counts = PieceCounts(capacity=2)
    counts.keep({"a": 1, "b": 2})
    assert counts.known(["a"]) == {"a": 1}  # a is now the most recent
    counts.keep({"c": 3})
    assert counts.known(["a", "b", "c"]) == {"a": 1, "c": 3}
