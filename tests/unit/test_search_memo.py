"""The memo of an edit's searches (repomem/index/search_memo.py): recalled by a start's place in
its file's block, and joined with the searches made for the starts it lacks."""

from __future__ import annotations

import numpy as np

from repomem.index.kernels.relation_rows import BandSums
from repomem.index.search_memo import joined_sums, memo_of, recalled_rows

KEY = (np.asarray([3.0, 2.0]).tobytes(), 3.0, 0)


def sums_of(per_start: list[list[list[tuple[int, float]]]]) -> BandSums:
    """Band sums laid out as a search lays them out: start after start, its bands from the last
    (smallest budget) to the first; an empty band keeps (0, 0)."""
    n_bands = len(per_start[0])
    band_first = np.zeros((len(per_start), n_bands), dtype=np.int64)
    band_end = np.zeros_like(band_first)
    frags: list[int] = []
    values: list[float] = []
    for k, bands in enumerate(per_start):
        for b in reversed(range(n_bands)):
            if bands[b]:
                band_first[k, b] = len(frags)
                frags += [j for j, _ in bands[b]]
                values += [v for _, v in bands[b]]
                band_end[k, b] = len(frags)
    return BandSums(band_first, band_end, np.asarray(frags, dtype=np.int32), np.asarray(values))


def read(sums: BandSums, k: int) -> list[list[tuple[int, float]]]:
    return [list(zip(sums.pair_frag[sums.band_first[k, b]:sums.band_end[k, b]].tolist(),
                     sums.pair_value[sums.band_first[k, b]:sums.band_end[k, b]].tolist()))
            for b in range(sums.band_first.shape[1])]


OLD = [  # three starts of a file whose block began at node 100: nodes 100, 103, 105
    [[(7, 0.5)], [(8, 0.25), (9, 0.125)]],
    [[], []],
    [[(1, 1.0), (2, 2.0)], [(3, 3.0)]],
]


def test_a_start_is_recalled_by_its_place_in_the_block_and_the_rest_are_searched():
    memo = memo_of(4, KEY, np.asarray([100, 103, 105]), 100, sums_of(OLD))
    # The file's block now begins at node 500; its starts come in another order, one is new.
    starts = np.asarray([505, 507, 500, 503])
    rows = recalled_rows(memo, 4, KEY, starts, 500)
    assert rows.tolist() == [2, -1, 0, 1]
    searched_alone = [[(11, 4.0)], [(12, 5.0)]]
    searched = sums_of([[[], []], searched_alone, [[], []], [[], []]])
    joined = joined_sums(memo, rows, searched)
    assert [read(joined, k) for k in range(4)] == [OLD[2], searched_alone, OLD[0], OLD[1]]
    # Laid out start after start, as a search lays them out.
    assert joined.pair_frag.tolist() == [3, 1, 2, 12, 11, 8, 9, 7]


def test_the_same_starts_in_the_same_order_are_the_memos_own_arrays():
    sums = sums_of(OLD)
    memo = memo_of(4, KEY, np.asarray([100, 103, 105]), 100, sums)
    rows = recalled_rows(memo, 4, KEY, np.asarray([200, 203, 205]), 200)
    assert joined_sums(memo, rows, sums_of([[[], []]] * 3)) is sums


def test_another_file_other_bands_or_no_memo_recall_nothing():
    memo = memo_of(4, KEY, np.asarray([100, 103, 105]), 100, sums_of(OLD))
    starts = np.asarray([100, 103])
    assert recalled_rows(memo, 5, KEY, starts, 100).tolist() == [-1, -1]
    other_bands = (np.asarray([3.0, 1.0]).tobytes(), 3.0, 0)
    assert recalled_rows(memo, 4, other_bands, starts, 100).tolist() == [-1, -1]
    assert recalled_rows(None, 4, KEY, starts, 100).tolist() == [-1, -1]
    searched = sums_of([OLD[0], OLD[2]])
    joined = joined_sums(None, np.asarray([-1, -1]), searched)
    assert [read(joined, k) for k in range(2)] == [OLD[0], OLD[2]]


def test_a_memo_of_other_bands_that_recalls_nothing_leaves_the_search_alone():
    """The memo of another file's edit or of other budgets has rows of another width (bands): with
    nothing recalled, the joins stacked its rows beside the search's and raised, halfway through
    an edit that had already appended its fragments (the editor's next query then crashed)."""
    memo = memo_of(0, KEY, np.asarray([100, 103, 105]), 100, sums_of(OLD))  # two bands
    searched = sums_of([[[(4, 1.5)], [], [(5, 0.5)]], [[], [(6, 2.0)], []]])  # three bands
    rows = recalled_rows(memo, 1, KEY, np.asarray([200, 201]), 200)  # another file: nothing recalled
    assert (rows == -1).all()
    joined = joined_sums(memo, rows, searched)
    assert [read(joined, k) for k in range(2)] == [read(searched, k) for k in range(2)]
