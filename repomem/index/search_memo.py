"""What an edit's relation searches found, kept for the next edit of the same file.

A language server re-indexes the file being typed into at every keystroke, and most keystrokes
leave that file's part of the code graph the same shape: a letter typed inside a name, a string
or a comment changes no kept syntax node and no call edge (docs/measurements.md#an-edit). Its
nodes are renumbered (the kept graph gives an edited file new ids, `edit_graph`), but a search
from one of its anchors walks the same graph, so it finds the same sums. With `same_file_weight`
0 (the default) a search sums other files' fragments only, which the edit did not touch; the
edited file's new windows differ only in their own cover, which `assemble_rows` reads afresh.

The memo holds the band sums (`relation_rows.BandSums`) of the last edit's search starts, keyed by
the start's offset in its file's block of nodes. `EditGraph.sync` keeps it (`EditGraph.searches`)
only across a sync that changed nothing but that file, and left its syntax tree and every call
row the same; anything else drops it. A memo also answers only searches with the same bands (the
budgets) and limits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from repomem.index.kernels.relation_rows import BandSums


@dataclass(frozen=True)
class SearchMemo:
    """The band sums of one file's search starts (see the module's doc)."""

    file: int
    key: tuple[bytes, float, int]  # the budgets (float64 bytes), the cost limit, the reach limit
    offsets: np.ndarray  # int64, shape (n_starts,), ascending: each start's node - its block's first
    order: np.ndarray  # int64, shape (n_starts,): the row of `sums` for offsets[i]
    sums: BandSums  # rows by start in the order the starts were numbered
    first: np.ndarray  # int64, shape (n_starts,): start k's pairs are sums.pair_*[first[k]:end[k]]
    end: np.ndarray


def memo_of(file: int, key: tuple[bytes, float, int], starts: np.ndarray, block_first: int,
            sums: BandSums) -> SearchMemo:
    """A memo of `sums` (rows in the order of `starts`, graph node ids of `file`'s block, which
    begins at node `block_first`). A start's bands are consecutive runs of the pair arrays (a
    search appends one band after the other)."""
    offsets = starts.astype(np.int64) - block_first
    order = np.argsort(offsets, kind="stable")
    first, end = _runs(sums)
    return SearchMemo(file, key, offsets[order], order, sums, first, end)


def recalled_rows(memo: SearchMemo | None, file: int, key: tuple[bytes, float, int], starts: np.ndarray,
                  block_first: int) -> np.ndarray:
    """For each of `starts` (graph node ids of `file`'s block), the memo's row holding its sums,
    or -1 (int64, shape (n_starts,)); all -1 when the memo is for another file or other bands."""
    missing = np.full(starts.shape[0], -1, dtype=np.int64)
    if memo is None or memo.file != file or memo.key != key or not memo.offsets.shape[0]:
        return missing
    offsets = starts.astype(np.int64) - block_first
    at = np.minimum(np.searchsorted(memo.offsets, offsets), memo.offsets.shape[0] - 1)
    return np.where(memo.offsets[at] == offsets, memo.order[at], missing)


def joined_sums(memo: SearchMemo | None, rows: np.ndarray, searched: BandSums) -> BandSums:
    """The band sums of every start: start k's from the memo's row rows[k] when that is >= 0, else
    from `searched` (whose row k holds it). The pairs are laid out start after start."""
    hit = rows >= 0
    if not hit.any():
        # Nothing recalled: `searched` alone. A memo of other bands (another file's last edit, other
        # budgets) has rows of another width, which the joins below cannot stack: an edit raised
        # there, halfway through, and left the index's arrays of different lengths.
        memo = None
    if memo is not None and hit.all() and rows.shape[0] == memo.order.shape[0] \
            and np.array_equal(rows, np.arange(rows.shape[0])):
        return memo.sums  # the same starts in the same order: the memo's own arrays
    n_memo = 0 if memo is None else int(memo.sums.pair_frag.shape[0])
    searched_first, searched_end = _runs(searched)
    if memo is None:
        first, end = searched_first, searched_end
        band_first, band_end = searched.band_first, searched.band_end
        pool_frag, pool_value = searched.pair_frag, searched.pair_value
    else:
        row = np.maximum(rows, 0)
        first = np.where(hit, memo.first[row], searched_first + n_memo)
        end = np.where(hit, memo.end[row], searched_end + n_memo)
        band_first = np.where(hit[:, None], memo.sums.band_first[row], searched.band_first + n_memo)
        band_end = np.where(hit[:, None], memo.sums.band_end[row], searched.band_end + n_memo)
        pool_frag = np.concatenate([memo.sums.pair_frag, searched.pair_frag])
        pool_value = np.concatenate([memo.sums.pair_value, searched.pair_value])
    lengths = end - first
    placed = np.cumsum(lengths) - lengths  # where each start's run begins in the joined arrays
    take = np.repeat(first - placed, lengths) + np.arange(int(lengths.sum()), dtype=np.int64)
    shift = (placed - first)[:, None]
    return BandSums(band_first + shift, band_end + shift, pool_frag[take], pool_value[take])


def _runs(sums: BandSums) -> tuple[np.ndarray, np.ndarray]:
    """Each start's run of pairs [first, end) in `sums` (0, 0 for a start without pairs)."""
    filled = sums.band_end > sums.band_first
    anything = filled.any(axis=1)
    first = np.where(anything, np.where(filled, sums.band_first, np.iinfo(np.int64).max).min(axis=1), 0)
    end = np.where(anything, np.where(filled, sums.band_end, 0).max(axis=1), 0)
    return first, end


class SearchMemory:
    """Where the kept graph keeps its memo (`EditGraph.searches`): the edit's searches read and
    replace it (`relations.graph_relation_entries`), the graph's sync drops it."""

    def __init__(self) -> None:
        self.memo: SearchMemo | None = None
