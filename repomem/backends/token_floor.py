"""A lower bound on a text's token count that costs a regex pass, not a tokenization.

Fitting a prompt asks "does this text fit N tokens?" many times, often of texts several times too
long (the whole file left of the cursor, the whole file after it), and the embedded model's
tokenizer takes milliseconds per few thousand characters, plus a round trip to its process
(docs/editors.md#interactive-latency). When a text's floor is above N, it does not fit, and the
exact count is not needed: the answer is the one the count gives.

Why it is a lower bound, for a tokenizer whose pre-tokenizer is Qwen2's (llama.cpp's `qwen2`
pre-type): the text is first split at the vocabulary's special tokens (each one token), then
each piece into chunks by a regex in which a chunk holds at most one run of letters (`\\p{L}+`,
maybe cut by a contraction like `'s`) and a digit is a chunk of its own (`\\p{N}`); BPE merges
within a chunk only, so each chunk is at least one token. Counted on ASCII text only (where
`[A-Za-z]` and `[0-9]` are exactly those classes), with every special token's text replaced by a
space: a special token begins and ends with a character that is neither a letter nor a digit
(checked), so a replaced one never joins or splits a run. Any other tokenizer gets no floor
(0), and non-ASCII text neither.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from repomem.backends.token_pieces import QWEN2_LIKE_PRE_TOKENIZERS, special_token_pattern

_LETTER_RUN_OR_DIGIT = re.compile(r"[A-Za-z]+|[0-9]")


class TokenFloor:
    """floor(text) <= the tokenizer's count of `text` (with special tokens parsed)."""

    def __init__(self, special: Sequence[str]):
        self._special = special_token_pattern(special)

    def __call__(self, text: str) -> int:
        if not text.isascii():
            return 0
        if self._special is not None:
            text = self._special.sub(" ", text)
        return len(_LETTER_RUN_OR_DIGIT.findall(text))


def token_floor(pre_tokenizer: str, special: Sequence[str]) -> TokenFloor | None:
    """The floor for a vocabulary (its pre-tokenizer type and the texts of its special tokens:
    control, user-defined and unknown ones), or None where the bound is not known to hold."""
    if pre_tokenizer not in QWEN2_LIKE_PRE_TOKENIZERS:
        return None
    if any(s and (s[0].isalnum() or s[-1].isalnum()) for s in special):
        return None  # replacing such a token could join or split a run of letters
    return TokenFloor(special)
