"""Identifier-aware tokenizer for BM25.

Code identifiers carry most of the signal: `get_user_name` yields the whole identifier and its
parts `get`, `user`, `name`; `HTTPResponseRedirect` yields itself and `http`, `response`,
`redirect`. Numbers are tokens; punctuation and whitespace are not.
"""

from __future__ import annotations

import re
from functools import lru_cache

from repomem.config import BM25Config

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


@lru_cache(maxsize=1 << 18)
def _expand(word: str, split_subwords: bool, lowercase: bool) -> tuple[str, ...]:
    whole = word.lower() if lowercase else word
    if not split_subwords:
        return (whole,)
    parts = _PART.findall(word)
    if len(parts) <= 1:
        return (whole,)
    if lowercase:
        parts = [p.lower() for p in parts]
    return (whole, *parts)


def tokenize(text: str, config: BM25Config) -> list[str]:
    tokens: list[str] = []
    for word in _WORD.findall(text):
        tokens.extend(_expand(word, config.split_subwords, config.lowercase))
    return tokens
