"""Exact token counts as sums of the counts of a text's pieces, each piece counted once.

Fitting a prompt counts text after text that differ only in where they start or which blocks
they hold: the same lines, again and again, each count a tokenization of thousands of characters
in the model's process (docs/editors.md#interactive-latency). For a tokenizer whose pre-tokenizer
is Qwen2's (llama.cpp's `qwen2`), a text's count is the sum of its pieces' counts when it is cut
only where the tokenizer itself never joins across:

- around each special token (the tokenizer splits them out first, each one token; none of them
  has llama.cpp's strip attributes, and none holds another's text, so the split is unique);
- before a line holding a character that is not whitespace: the pre-tokenizer's chunk that holds
  the line break before it ends at that break (a run of whitespace joins the break only when more
  line breaks follow it, a blank line, where no cut is made), and BPE merges within a chunk only.

So a piece is a line, with the blank lines after it; its count is kept (`PieceCounts`), and a text
costs the counts of the pieces not seen before, asked in one request. The tests compare the sums
with whole counts by the real tokenizer on cut code, special tokens, CRLF, blank runs and
non-ASCII text.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

# llama.cpp pre-tokenizer types (GGUF `tokenizer.ggml.pre`) whose chunks behave as above.
QWEN2_LIKE_PRE_TOKENIZERS = frozenset({"qwen2"})
# Leading characters of a line that whitespace-only lines start with too; a line whose first
# other character is not whitespace starts a piece.
_INDENT = " \t\f\v"


def special_token_pattern(special: Sequence[str], group: bool = False) -> re.Pattern | None:
    """A regex matching the special tokens' texts, the longest first (`group`: as one capturing
    group, so that `split` keeps them); None when there are none."""
    ordered = sorted({s for s in special if s}, key=len, reverse=True)
    if not ordered:
        return None
    alternatives = "|".join(map(re.escape, ordered))
    return re.compile(f"({alternatives})" if group else alternatives)


class TokenPieces:
    """Cuts a text where its token count is the sum of the parts' (see the module's doc)."""

    def __init__(self, special: Sequence[str]):
        self._special = special_token_pattern(special, group=True)

    def pieces(self, text: str) -> tuple[int, list[str]]:
        """(special tokens in `text`, the other pieces in order)."""
        parts = self._special.split(text) if self._special is not None else [text]
        n_special = len(parts) // 2  # split with one group: text, special, text, ...
        pieces: list[str] = []
        for part in parts[::2]:
            if part:
                pieces.extend(_line_pieces(part))
        return n_special, pieces


def _line_pieces(text: str) -> Iterable[str]:
    lines = text.split("\n")
    current = lines[0]
    for line in lines[1:]:
        rest = line.lstrip(_INDENT)
        if rest and not rest[0].isspace():
            yield current + "\n"
            current = line
        else:
            current += "\n" + line
    if current:
        yield current


def token_pieces(pre_tokenizer: str, special: Sequence[str], strips: bool) -> TokenPieces | None:
    """The cutter for a vocabulary (its pre-tokenizer type, its special tokens' texts, whether any
    of them strips whitespace next to it), or None where sums are not known to be exact."""
    if pre_tokenizer not in QWEN2_LIKE_PRE_TOKENIZERS or strips:
        return None
    if any(a != b and a in b for a in special for b in special):
        return None  # one special token inside another: the split would depend on their order
    return TokenPieces(special)


class PieceCounts:
    """Token counts of pieces, the most recently used kept (thread-safe)."""

    def __init__(self, capacity: int = 1 << 16):
        self.capacity = capacity
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def known(self, pieces: Iterable[str]) -> dict[str, int]:
        found: dict[str, int] = {}
        with self._lock:
            for piece in pieces:
                value = self._counts.get(piece)
                if value is not None:
                    self._counts.move_to_end(piece)
                    found[piece] = value
        return found

    def keep(self, counts: dict[str, int]) -> None:
        with self._lock:
            self._counts.update(counts)
            while len(self._counts) > self.capacity:
                self._counts.popitem(last=False)
