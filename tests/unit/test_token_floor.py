"""backends.token_floor: when a lower bound on the token count is given, and what it counts."""

from __future__ import annotations

import pytest

from repomem.backends.base import BackendTokenizer
from repomem.backends.token_floor import token_floor
from repomem.completion.prompt import exceeds

SPECIAL = ["<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<tool_call>", "</tool_call>"]


def test_letter_runs_and_digits_count_and_special_tokens_do_not():
    floor = token_floor("qwen2", SPECIAL)
    assert floor is not None
    assert floor("def get_user(x1): return 42") == 8  # def, get, user, x, 1, return, 4, 2
    # A special token is replaced by a separator: the runs on each side stay apart, its own
    # letters do not count (one token, whatever its text).
    assert floor("a<|fim_prefix|>b") == 2 and floor("<tool_call>") == 0
    assert floor("") == 0 and floor("   \n\t") == 0
    assert floor("naïve café") == 0  # non-ASCII text: no floor


@pytest.mark.parametrize(("pre", "special"), [
    ("llama3", SPECIAL),  # another pre-tokenizer: digits in threes, other rules
    ("", SPECIAL),
    ("qwen2", ["<|x|>", "sep"]),  # a special token edged by letters could join or split runs
])
def test_no_floor_where_the_bound_is_not_known_to_hold(pre, special):
    assert token_floor(pre, special) is None


class _Counting:
    """A backend whose count is the number of characters, with a floor of a third of it."""

    def __init__(self):
        self.counted: list[str] = []

    def count(self, text):
        self.counted.append(text)
        return len(text)

    def count_floor(self, text):
        return len(text) // 3


def test_a_text_whose_floor_is_over_the_limit_is_not_counted():
    backend = _Counting()
    tokenizer = BackendTokenizer(backend, mask=str.upper)
    assert exceeds(tokenizer, "x" * 400, 100) and backend.counted == []
    assert exceeds(tokenizer, "x" * 200, 100) and backend.counted == ["X" * 200]  # floor 66: counted
    assert not exceeds(tokenizer, "x" * 50, 100)


def test_a_tokenizer_without_a_floor_is_counted():
    class Plain:
        def count(self, text):
            return len(text)

    assert exceeds(Plain(), "x" * 101, 100) and not exceeds(Plain(), "x" * 100, 100)
