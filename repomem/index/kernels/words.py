"""Words of UTF-8 text as ids of one process-wide hash table (numba), and their renumbering."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _word_byte(byte):
    """[A-Za-z0-9_]: a byte an identifier continues with."""
    return (97 <= byte <= 122) or (65 <= byte <= 90) or (48 <= byte <= 57) or byte == 95


@njit(cache=True, nogil=True)
def _fnv_slot(data, first, end, mask):
    """Hash table slot of the bytes data[first:end] (FNV-1a, 64 bits, masked)."""
    digest = np.uint64(14695981039346656037)
    for k in range(first, end):
        digest = (digest ^ np.uint64(data[k])) * np.uint64(1099511628211)
    return np.int64(digest & np.uint64(mask))


@njit(cache=True, nogil=True)
def rehash_words(size, word_first, word_end, word_bytes, n_words):
    """A new `known_words` table of `size` slots (a power of two) holding words 0..n_words-1."""
    table = np.full(size, -1, dtype=np.int64)
    for word in range(n_words):
        slot = _fnv_slot(word_bytes, word_first[word], word_end[word], size - 1)
        while table[slot] >= 0:
            slot = (slot + 1) & (size - 1)
        table[slot] = word
    return table


@njit(cache=True, nogil=True)
def count_words(data):
    """How many words `known_words` finds in `data` (the room it may need for new ones)."""
    n = data.shape[0]
    count = 0
    at = 0
    while at < n:
        byte = data[at]
        if (97 <= byte <= 122) or (65 <= byte <= 90) or byte == 95:
            count += 1
            at += 1
            while at < n and _word_byte(data[at]):
                at += 1
        elif 48 <= byte <= 57:
            count += 1
            at += 1
            while at < n and 48 <= data[at] <= 57:
                at += 1
        else:
            at += 1
    return count


@njit(cache=True, nogil=True)
def known_words(data, n_occurrences, table, word_first, word_end, word_bytes, n_words, n_bytes):
    """The words of UTF-8 text (uint8, shape (n,)) as tokens.py's `[A-Za-z_][A-Za-z0-9_]*|\\d+`
    finds them in ASCII (any other byte separates words), each as its id in a process-wide table.

    The table: `table` (int64, a power of two long, -1 = empty) maps FNV-1a hashes of a word's
    bytes to its id, probing linearly; word w's bytes are word_bytes[word_first[w]:word_end[w]].
    `n_occurrences` is `count_words(data)`. Words not seen before are added (ids n_words,
    n_words + 1, ...): the caller gives room for that many more words and n more bytes and keeps the
    table at most half full with them. Comparisons are byte by byte, so ids are exact.

    Returns (word id of each occurrence (int64, shape (n_occurrences,)), occurrences before each
    line (int64, shape (n_lines + 1,), lines split at "\\n"), the new count of words, of bytes).
    """
    n = data.shape[0]
    n_lines = 1
    for at in range(n):
        if data[at] == 10:
            n_lines += 1
    # Exactly as many as there are (a digit run and a word need no space between them: "1a 1a" holds
    # four words in five bytes, so n / 2 is no bound).
    occurrence = np.empty(n_occurrences, dtype=np.int64)
    line_words = np.zeros(n_lines + 1, dtype=np.int64)
    mask = table.shape[0] - 1
    n_found = 0
    line = 0
    at = np.int64(0)  # int64, not a literal 0: a literal compiles _fnv_slot once more
    while at < n:
        byte = data[at]
        if byte == 10:
            line += 1
            line_words[line] = n_found
            at += 1
            continue
        if (97 <= byte <= 122) or (65 <= byte <= 90) or byte == 95:
            end = at + 1
            while end < n and _word_byte(data[end]):
                end += 1
        elif 48 <= byte <= 57:
            end = at + 1
            while end < n and 48 <= data[end] <= 57:
                end += 1
        else:
            at += 1
            continue
        slot = _fnv_slot(data, at, end, mask)
        while True:
            word = table[slot]
            if word < 0:
                word = n_words
                table[slot] = word
                word_first[word] = n_bytes
                for k in range(at, end):
                    word_bytes[n_bytes] = data[k]
                    n_bytes += 1
                word_end[word] = n_bytes
                n_words += 1
                break
            first = word_first[word]
            if word_end[word] - first == end - at:
                same = True
                for k in range(end - at):
                    if word_bytes[first + k] != data[at + k]:
                        same = False
                        break
                if same:
                    break
            slot = (slot + 1) & mask
        occurrence[n_found] = word
        n_found += 1
        at = end
    line_words[n_lines] = n_found
    return occurrence[:n_found].copy(), line_words, n_words, n_bytes


@njit(cache=True, nogil=True)
def first_appearance_ids(tokens, local_of):
    """Tokens (int64 ids, shape (n,)) renumbered 0, 1, ... in order of first appearance: (local id
    of each token (int32, shape (n,)), the distinct ids in that order). `local_of` is -1 at every
    id on entry and on return (scratch indexed by id)."""
    local = np.empty(tokens.shape[0], dtype=np.int32)
    distinct = np.empty(tokens.shape[0], dtype=np.int64)
    n_distinct = 0
    for at in range(tokens.shape[0]):
        token = tokens[at]
        if local_of[token] < 0:
            local_of[token] = n_distinct
            distinct[n_distinct] = token
            n_distinct += 1
        local[at] = local_of[token]
    for k in range(n_distinct):
        local_of[distinct[k]] = -1
    return local, distinct[:n_distinct].copy()
