"""Words of UTF-8 text as ids of one process-wide hash table (numba), and their renumbering."""

from __future__ import annotations

import numpy as np
from numba import njit

from repomem.index.identifier_chars import DIGIT, WORD_CONTINUE, WORD_START


@njit(cache=True, nogil=True)
def _wide_char(data, at, classes):
    """(class bits, bytes) of the UTF-8 character of two to four bytes at data[at] (`classes` by
    code point; one past its end, a stray continuation byte or a cut sequence separates words).
    The text is valid UTF-8 (str.encode, lone surrogates passed as three bytes). The callers read
    ASCII bytes themselves: this call in their loops for every byte made them 12x slower
    (count_words over 1.6 MB of ASCII: 3.9 -> 48 ms)."""
    byte = np.int64(data[at])
    n = data.shape[0]
    if byte >= 0xF0 and at + 3 < n:
        code = ((byte & 7) << 18) | ((np.int64(data[at + 1]) & 63) << 12) \
            | ((np.int64(data[at + 2]) & 63) << 6) | (np.int64(data[at + 3]) & 63)
        length = 4
    elif 0xE0 <= byte < 0xF0 and at + 2 < n:
        code = ((byte & 15) << 12) | ((np.int64(data[at + 1]) & 63) << 6) | (np.int64(data[at + 2]) & 63)
        length = 3
    elif 0xC0 <= byte < 0xE0 and at + 1 < n:
        code = ((byte & 31) << 6) | (np.int64(data[at + 1]) & 63)
        length = 2
    else:
        return np.int64(0), np.int64(1)
    return (np.int64(classes[code]) if code < classes.shape[0] else np.int64(0)), np.int64(length)


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
def count_words(data, classes):
    """How many words `known_words` finds in `data` (the room it may need for new ones)."""
    n = data.shape[0]
    count = 0
    state = 0
    at = np.int64(0)
    while at < n:
        byte = data[at]
        if byte < 128:
            bits, length = np.int64(classes[byte]), np.int64(1)
        else:
            bits, length = _wide_char(data, at, classes)
        if not bits & state:
            # What the character begins: a word, a digit run, or nothing (a state is the bit a
            # character needs to go on with it).
            state = WORD_CONTINUE if bits & WORD_START else DIGIT if bits & DIGIT else 0
            if state:
                count += 1
        at += length
    return count


@njit(cache=True, nogil=True)
def known_words(data, classes, n_occurrences, table, word_first, word_end, word_bytes, n_words, n_bytes):
    """The words of UTF-8 text (uint8, shape (n,)) as identifier_chars' pattern finds them in the
    decoded text (`classes`: its class bits by code point), each as its id in a process-wide table.

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
    state = 0  # 0 between words, else the class bit a character needs to go on with the current one
    first = np.int64(0)  # where the current word began
    at = np.int64(0)
    while at <= n:
        if at < n:
            byte = data[at]
            if byte < 128:
                bits, length = np.int64(classes[byte]), np.int64(1)
            else:
                bits, length = _wide_char(data, at, classes)
            if bits & state:
                at += length
                continue
        else:
            byte, bits, length = 0, np.int64(0), np.int64(1)  # the end of the text ends a word
        if state:  # the word data[first:at] ends here: its id, added if new
            slot = _fnv_slot(data, first, at, mask)
            while True:
                word = table[slot]
                if word < 0:
                    word = n_words
                    table[slot] = word
                    word_first[word] = n_bytes
                    for k in range(first, at):
                        word_bytes[n_bytes] = data[k]
                        n_bytes += 1
                    word_end[word] = n_bytes
                    n_words += 1
                    break
                known_first = word_first[word]
                if word_end[word] - known_first == at - first:
                    same = True
                    for k in range(at - first):
                        if word_bytes[known_first + k] != data[first + k]:
                            same = False
                            break
                    if same:
                        break
                slot = (slot + 1) & mask
            occurrence[n_found] = word
            n_found += 1
        if byte == 10:
            line += 1
            line_words[line] = n_found
        state = WORD_CONTINUE if bits & WORD_START else DIGIT if bits & DIGIT else 0  # as count_words
        first = at
        at += length
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
