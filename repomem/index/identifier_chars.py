"""Which characters make up the words BM25 indexes, in every script.

A word is an identifier as programming languages read one (Unicode's XID_Start, or `_`, then
XID_Continue, as `str.isidentifier` decides), or a run of decimal digits (`\\d`, category Nd).
So `größe`, `naïve`, `ユーザー名` and `हिन्दी` are one word each, where ASCII-only words cut them
into junk (`gr`, `e`) or dropped them. In ASCII this is `[A-Za-z_][A-Za-z0-9_]*|\\d+`, the words
of the tokenizer before it, so English code indexes as it did.

Two forms of one rule, built from the same table: a class per code point for the word-table kernel
(`word_classes`), and a regular expression for the regex pass and for queries (`word_pattern`).
"""

from __future__ import annotations

import os
import re
import threading

import numpy as np

# Bits of a code point's class (uint8).
WORD_START = 1  # may begin a word: XID_Start or "_"
WORD_CONTINUE = 2  # may continue one: XID_Continue (letters, marks, digits, connectors)
DIGIT = 4  # a decimal digit (Nd): begins a run of digits; words continue with it too

# Code points that may be any of the three lie in planes 0-3 (letters, digits, CJK) and plane 14
# (variation selectors, which continue words); every other code point separates words
# (tests/unit/test_identifier_chars.py checks all of them). Classes are worked out for these
# ranges only: ~60 ms once per process, instead of ~0.3 s for all 1.1M code points.
_CLASSIFIED = ((0, 0x40000), (0xE0000, 0xE1000))
N_CODE_POINTS = 0x110000

ASCII_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*|\d+"

_lock = threading.Lock()
_classes: np.ndarray | None = None
_pattern: str | None = None


def _free_lock_in_child() -> None:
    """A forked parse worker starts with a free lock: another thread of the parent may have held it,
    building the table, when it forked (the child then waited on it forever)."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_free_lock_in_child)


def ascii_classes() -> np.ndarray:
    """The classes of the 128 ASCII code points (uint8, shape (128,)): all an ASCII text needs."""
    classes = np.zeros(128, dtype=np.uint8)
    for code in range(128):
        classes[code] = _class_of(chr(code))
    return classes


def word_classes() -> np.ndarray:
    """Every code point's class bits (uint8, shape (0x110000,); 1.1 MB), built once per process."""
    global _classes
    with _lock:
        if _classes is None:
            classes = np.zeros(N_CODE_POINTS, dtype=np.uint8)
            for first, end in _CLASSIFIED:
                classes[first:end] = [_class_of(chr(code)) for code in range(first, end)]
            _classes = classes
        return _classes


def identifier_pattern() -> str:
    """The regular expression of an identifier in any script (XID_Start or `_`, then XID_Continue)."""
    global _pattern
    classes = word_classes()
    with _lock:
        if _pattern is None:
            start = _character_class(np.flatnonzero(classes & WORD_START))
            more = _character_class(np.flatnonzero(classes & WORD_CONTINUE))
            _pattern = f"{start}{more}*"
        return _pattern


def word_pattern() -> str:
    """The regular expression of a word in any script (see the module's doc), as a pattern."""
    return identifier_pattern() + "|\\d+"


def _class_of(char: str) -> int:
    bits = WORD_START if char.isidentifier() else 0
    if ("a" + char).isidentifier():
        bits |= WORD_CONTINUE
    if char.isdecimal():
        bits |= DIGIT
    return bits


def _character_class(codes: np.ndarray) -> str:
    """A regex character class holding exactly the code points `codes` (ascending), as ranges."""
    breaks = np.flatnonzero(np.diff(codes) != 1)
    firsts = np.concatenate([codes[:1], codes[breaks + 1]]).tolist()
    lasts = np.concatenate([codes[breaks], codes[-1:]]).tolist()
    ranges = "".join(
        re.escape(chr(first)) if first == last else f"{re.escape(chr(first))}-{re.escape(chr(last))}"
        for first, last in zip(firsts, lasts)
    )
    return f"[{ranges}]"
