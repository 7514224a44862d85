"""Identifier-aware tokenizer for BM25.

Code identifiers carry most of the signal: `get_user_name` yields the whole identifier and its
parts `get`, `user`, `name`; `HTTPResponseRedirect` yields itself and `http`, `response`,
`redirect`. Numbers are tokens; punctuation and whitespace are not. Words are identifiers in any
script (`größeBerechnen`: itself, `größe`, `berechnen`; identifier_chars has the rule).
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from repomem.config import BM25Config
from repomem.index.identifier_chars import ASCII_PATTERN, ascii_classes, word_classes, word_pattern
from repomem.index.kernels.words import count_words, first_appearance_ids, known_words, rehash_words

_ASCII_WORD = re.compile(ASCII_PATTERN)  # the words of ASCII text: what word_pattern() finds there
_ASCII_CLASSES = ascii_classes()
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
# _PART over a word's characters written as their kinds (`_parts_in_any_script`): the same parts in any script,
# and runs of letters without case (CJK, Arabic, ...) as parts of their own.
_KIND_PART = re.compile(r"A+(?=Aa)|A?a+|A+|0+|x+")


@lru_cache(maxsize=1 << 18)
def _expand(word: str, split_subwords: bool, lowercase: bool) -> tuple[str, ...]:
    whole = word.lower() if lowercase else word
    if not split_subwords or (word.islower() and word.isalpha()):  # the latter has one part: itself
        return (whole,)
    parts = _PART.findall(word) if word.isascii() else _parts_in_any_script(word)
    if len(parts) <= 1:
        return (whole,)
    if lowercase:
        parts = [p.lower() for p in parts]
    return (whole, *parts)


def _parts_in_any_script(word: str) -> list[str]:
    """`_PART`'s parts of a word with non-ASCII characters: letters by case (upper "A", lower "a"),
    decimal digits ("0"), other letters ("x"); a mark or joiner goes with the character before it
    (`हिन्दी` is one part), `_` with none."""
    kinds = []
    for char in word:
        if char.isupper():
            kinds.append("A")
        elif char.islower():
            kinds.append("a")
        elif char.isdecimal():
            kinds.append("0")
        elif char == "_":
            kinds.append("_")
        elif char.isidentifier():
            kinds.append("x")
        else:
            kinds.append(kinds[-1] if kinds else "x")
    return [word[m.start() : m.end()] for m in _KIND_PART.finditer("".join(kinds))]


@lru_cache(maxsize=1)
def _word_in_any_script() -> re.Pattern[str]:
    return re.compile(word_pattern())


@lru_cache(maxsize=1)
def _word_or_line_break() -> re.Pattern[str]:
    return re.compile(word_pattern() + r"|\n")


def tokenize(text: str, config: BM25Config) -> list[str]:
    tokens: list[str] = []
    words = _ASCII_WORD if text.isascii() else _word_in_any_script()
    for word in words.findall(text):
        tokens.extend(_expand(word, config.split_subwords, config.lowercase))
    return tokens


@dataclass(frozen=True)
class LineTokens:
    """One file's tokens, line by line, compactly: each distinct token once, every occurrence as
    an index into them. A parse worker sends this instead of one string per token per window (a
    window's tokens are a slice: windows are line ranges), which keeps the cold build's memory and
    the workers' pickles small (docs/measurements.md#parsing-and-analysis)."""

    words: tuple[str, ...]  # distinct tokens, in order of first appearance
    ids: np.ndarray  # int32, shape (n_tokens,): index into `words` of each token, line after line
    line_offsets: np.ndarray  # int64, shape (n_lines + 1,): line l's tokens are ids[offsets[l]:offsets[l + 1]]

    def window_term_ids(self, vocabulary: dict[str, int], starts: np.ndarray, ends: np.ndarray) -> list[np.ndarray]:
        """Term ids of each window [starts[w], ends[w]) (0-based lines, end exclusive), adding
        unseen tokens to `vocabulary` in order of first appearance in the windows (views into
        one int32 array)."""
        first_token = self.line_offsets[starts]
        last_token = self.line_offsets[ends]
        # Windows over each token: +1 where a window starts, -1 where it ends, summed along.
        size = self.ids.shape[0] + 1
        covered = np.bincount(first_token, minlength=size) - np.bincount(last_token, minlength=size)
        is_covered = np.cumsum(covered[:-1]) > 0
        setdefault = vocabulary.setdefault
        if is_covered.all():
            # Every token in some window (windows tile a file): local ids already number the words
            # by first appearance, so they join the vocabulary in id order, without a sort of each
            # file's tokens (docs/measurements.md#parsing-and-analysis).
            lookup = np.asarray([setdefault(word, len(vocabulary)) for word in self.words], dtype=np.int32)
        else:
            # First appearance of each local word among the covered tokens, in token order.
            local, first_at = np.unique(self.ids[is_covered], return_index=True)
            order = local[np.argsort(first_at, kind="stable")].tolist()
            lookup = np.full(len(self.words), -1, dtype=np.int32)
            lookup[order] = [setdefault(self.words[word], len(vocabulary)) for word in order]
        terms = lookup[self.ids]
        return [terms[a:b] for a, b in zip(first_token.tolist(), last_token.tolist())]


def _doubled_length(length: int, size: int) -> int:
    """`length` doubled until it is at least `size`."""
    while length < size:
        length *= 2
    return length


def _doubled(array: np.ndarray, size: int, fill: int = 0) -> np.ndarray:
    """`array` grown by doubling to at least `size` items (new items = fill)."""
    if array.shape[0] >= size:
        return array
    out = np.full(_doubled_length(array.shape[0], size), fill, dtype=array.dtype)
    out[: array.shape[0]] = array
    return out


class _WordTable:
    """Every word this process has tokenized (kernels.words.known_words keeps the hash table and the
    words' bytes) and each word's tokens, by process-wide ids: a parse worker expands an identifier
    once, not once per file. One table per setting of split_subwords / lowercase."""

    def __init__(self, split: bool, lowercase: bool):
        self.split, self.lowercase = split, lowercase
        self.table = np.full(1 << 12, -1, dtype=np.int64)  # hash slot -> word id
        self.word_first = np.zeros(1 << 11, dtype=np.int64)  # by word: its bytes in word_bytes
        self.word_end = np.zeros(1 << 11, dtype=np.int64)
        self.word_bytes = np.zeros(1 << 14, dtype=np.uint8)
        self.n_words = self.n_bytes = 0
        self.token_count = np.zeros(1 << 11, dtype=np.int64)  # by word: its tokens, a CSR
        self.token_start = np.zeros(1 << 11, dtype=np.int64)
        self.token_ids = np.zeros(1 << 12, dtype=np.int64)
        self.n_token_ids = 0
        self.token_id: dict[str, int] = {}
        self.tokens: list[str] = []  # by token id
        self.local_of = np.full(1 << 12, -1, dtype=np.int64)  # scratch of first_appearance_ids

    def words_of(self, data: np.ndarray, classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(word id of each occurrence, occurrences before each line) of UTF-8 bytes `data`, whose
        characters' classes `classes` holds (identifier_chars)."""
        most = count_words(data, classes)  # occurrences: at most this many new words
        if 2 * (self.n_words + most) > self.table.shape[0]:
            self._rehash(2 * (self.n_words + most))
        self.word_first = _doubled(self.word_first, self.n_words + most)
        self.word_end = _doubled(self.word_end, self.n_words + most)
        self.word_bytes = _doubled(self.word_bytes, self.n_bytes + data.shape[0])
        known = self.n_words
        occurrence, line_words, self.n_words, self.n_bytes = known_words(
            data, classes, most, self.table, self.word_first, self.word_end, self.word_bytes, self.n_words,
            self.n_bytes)
        if self.n_words > known:
            self._expand_words(known)
        return occurrence, line_words

    def _rehash(self, size: int) -> None:
        self.table = rehash_words(_doubled_length(self.table.shape[0], size), self.word_first, self.word_end,
                                  self.word_bytes, self.n_words)

    def _expand_words(self, first_new: int) -> None:
        """Tokens of words first_new.. (just added: their bytes are the end of word_bytes)."""
        n = self.n_words
        firsts, ends = self.word_first[first_new:n].tolist(), self.word_end[first_new:n].tolist()
        encoded = self.word_bytes[firsts[0] : ends[-1]].tobytes()
        raw = encoded.decode("utf-8", "surrogatepass")
        base = firsts[0]
        if len(raw) == len(encoded):  # ASCII: byte offsets are character offsets
            words = [raw[a - base : b - base] for a, b in zip(firsts, ends)]
        else:
            words = [encoded[a - base : b - base].decode("utf-8", "surrogatepass") for a, b in zip(firsts, ends)]
        token_id, tokens = self.token_id, self.tokens
        counts: list[int] = []
        ids: list[int] = []
        for word in words:
            expanded = _expand(word, self.split, self.lowercase)
            counts.append(len(expanded))
            for token in expanded:
                known = token_id.get(token)
                if known is None:
                    known = token_id[token] = len(tokens)
                    tokens.append(token)
                ids.append(known)
        self.token_count = _doubled(self.token_count, n)
        self.token_start = _doubled(self.token_start, n)
        self.token_ids = _doubled(self.token_ids, self.n_token_ids + len(ids))
        count = np.asarray(counts, dtype=np.int64)
        self.token_count[first_new:n] = count
        self.token_start[first_new:n] = self.n_token_ids + np.cumsum(count) - count
        self.token_ids[self.n_token_ids : self.n_token_ids + len(ids)] = ids
        self.n_token_ids += len(ids)
        self.local_of = _doubled(self.local_of, len(tokens), fill=-1)


_word_tables: dict[tuple[bool, bool], _WordTable] = {}
# The tables change in place (the kernel writes them without the GIL): one file at a time, whichever
# thread tokenizes it (a language server's edits).
_tables_lock = threading.Lock()


def _fresh_tables_in_child() -> None:
    """A forked parse worker starts with empty tables and a free lock: another thread of the parent
    may have held the lock, mid-change, when it forked."""
    global _tables_lock
    _tables_lock = threading.Lock()
    _word_tables.clear()


os.register_at_fork(after_in_child=_fresh_tables_in_child)


def line_tokens(text: str, config: BM25Config) -> LineTokens:
    """`text`'s tokens by line (lines split at "\\n"). A compiled kernel scans the UTF-8 bytes into
    words of the process's word table, whose tokens are expanded once per process; the rest is
    array work (a regex took longer: docs/measurements.md#parsing-and-analysis). The kernel reads
    each character's class (identifier_chars): ASCII's alone for ASCII text."""
    classes = _ASCII_CLASSES if text.isascii() else word_classes()
    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    key = (config.split_subwords, config.lowercase)
    with _tables_lock:
        table = _word_tables.get(key) or _word_tables.setdefault(key, _WordTable(*key))
        word, line_words = table.words_of(data, classes)
        counts = table.token_count[word]  # tokens of each occurrence
        before = np.zeros(word.shape[0] + 1, dtype=np.int64)  # tokens before each occurrence
        np.cumsum(counts, out=before[1:])
        # Token k of occurrence o is token_ids[token_start[word of o] + k]: the file's tokens in
        # order, as process-wide ids, then numbered by first appearance as the regex pass numbers them.
        within = np.arange(before[-1], dtype=np.int64) - np.repeat(before[:-1], counts)
        local, distinct = first_appearance_ids(
            table.token_ids[np.repeat(table.token_start[word], counts) + within], table.local_of)
        words = tuple([table.tokens[t] for t in distinct.tolist()])
    return LineTokens(words, local, before[line_words])


def _line_tokens_by_regex(text: str, config: BM25Config) -> LineTokens:
    """`line_tokens` by one regex pass over the whole text: the words and the line breaks; each
    distinct word is expanded once per file. The reference the kernel is tested against."""
    local: dict[str, int] = {}
    ids_of_word: dict[str, tuple[int, ...]] = {}
    ids: list[int] = []
    offsets = [0]
    split, lowercase = config.split_subwords, config.lowercase
    for item in _word_or_line_break().findall(text):
        if item == "\n":
            offsets.append(len(ids))
            continue
        word_ids = ids_of_word.get(item)
        if word_ids is None:
            word_ids = ids_of_word[item] = tuple(
                local.setdefault(token, len(local)) for token in _expand(item, split, lowercase)
            )
        ids += word_ids
    offsets.append(len(ids))
    return LineTokens(tuple(local), np.asarray(ids, dtype=np.int32), np.asarray(offsets, dtype=np.int64))
