"""The fragment relation matrix W: graph relation (eq. 8) and context-structure relation (eq. 7).

W is symmetric, has an empty diagonal (eq. 9 sums over j != i) and keeps only w_ij at or above
`relation_cutoff`, so a query costs one sparse matrix-vector product.
"""

from __future__ import annotations

import itertools
import math
import queue
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
import scipy.sparse as sp

from repomem.config import GraphConfig, RelationConfig
from repomem.index.fragments import FragmentTable
from repomem.index.graph import CodeGraph
from repomem.index.helper_threads import run_parts
from repomem.index.kernels.csr import (
    invert_incidence,
    mark_mirrored,
    merge_mirrored_rows,
    place_mirror_only,
    sort_row_range_by_column,
)
from repomem.index.kernels.relation_rows import (
    BandSums,
    FragmentCover,
    NumberedStarts,
    RelationRules,
    RelationScratch,
    StartAnchors,
    assemble_rows,
    number_starts,
    relation_rows,
    relation_scratch,
    search_bands,
)
from repomem.index.kernels.selection import strongest_in_row_runs
from repomem.index.kernels.shortest_paths import (
    COST_TOLERANCE,
    GraphRows,
    SearchLimits,
    exit_costs,
    most_common_cost,
    tree_anchors,
)
from repomem.index.search_graph import SearchGraph, search_graph
from repomem.index.search_memo import SearchMemory, joined_sums, memo_of, recalled_rows

ProgressCallback = Callable[[int], None]
# (vectors, known): every window's unit embedding by fragment id, float32, shape (n_fragments,
# dimensions), and which of them hold one (bool, shape (n_fragments,)); eq. 6 reads them.
WindowVectors = tuple[np.ndarray, np.ndarray]


def cost_limit(strength_cutoff: float) -> float:
    return -math.log(strength_cutoff) + COST_TOLERANCE


def node_fragment_index(fragments: FragmentTable, n_nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Transpose of the fragment -> node incidence: (indptr, fragment ids, weights) per node."""
    return invert_incidence(fragments.indptr, fragments.nodes, fragments.weights, n_nodes)


def graph_relation_entries(
    rows: np.ndarray,
    fragments: FragmentTable,
    graph: SearchGraph,
    live: np.ndarray,
    graph_config: GraphConfig,
    relation_config: RelationConfig,
    progress: ProgressCallback | None = None,
    keep: int = 0,
    memory: SearchMemory | None = None,
    stored: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Eq. 8 entries (row, col, w) for fragment `rows` against every live fragment, pairs of one
    file scaled by `relation_config.same_file_weight`. `stored`: the weights as W stores them (as
    `gathered`'s), for a whole build.

    At most `keep` strongest entries per row when keep > 0. Also returns each row's entry bar
    (shape (len(rows),)): its weakest kept value if truncated, else the relation cutoff.
    `memory`: the kept graph's memo of the last edit's searches (`search_memo`), read and replaced
    by an edit's rows.
    """
    queued_cost = most_common_cost(graph.costs[: graph.n_slots])
    limit = cost_limit(graph_config.strength_cutoff)
    # Anchors and exit costs cover the rows' files' nodes only (an edit: one file's).
    files = fragments.file[rows] if rows.shape[0] else np.zeros(0, dtype=np.int64)
    first = int(graph.block_start[files].min()) if files.shape[0] else 0
    end = max(first, int(graph.block_end[files].max())) if files.shape[0] else 0
    if relation_config.same_file_weight == 0.0:
        # Only other files count: searches start at the nodes a file is left through (kernels).
        step = -math.log(graph_config.syntax_weight)
        anchor, anchor_cost = tree_anchors(graph.syntax_parent, graph.portal, step, first, end)
        exit_cost = exit_costs(graph.syntax_parent, graph.portal, step, first, end)
    else:
        anchor, anchor_cost = np.arange(first, end, dtype=np.int64), np.zeros(end - first)
        exit_cost = np.zeros(end - first)
    # An edited file's rows stay on one thread: its windows share most search starts, which a
    # second chunk would search again (two threads measured no faster on Django's models.py).
    workers = max(1, relation_config.workers) if rows.shape[0] > 512 else 1
    # Big builds: chunks small enough for a live progress bar; updates: one chunk.
    chunk = min(128, max(8, -(-rows.shape[0] // workers)))
    chunks = [rows[i : i + chunk] for i in range(0, rows.shape[0], chunk)]
    heap_capacity = max(1024, 2 * graph.n_slots + 1)
    # What every chunk's kernels read, grouped once per call.
    cover = FragmentCover(
        fragments.indptr, fragments.nodes, fragments.weights, fragments.totals, fragments.file.astype(np.int64),
        live, graph.node_indptr, graph.node_frags, graph.node_weights)
    rows_of_graph = GraphRows(graph.row_start, graph.row_end, graph.indices, graph.costs, queued_cost,
                              graph.distinct_edges)
    limits = SearchLimits(limit, graph_config.max_reach)
    rules = RelationRules(relation_config.relation_cutoff, keep, relation_config.same_file_weight)
    anchors = StartAnchors(first, anchor, anchor_cost, exit_cost, graph.block_start, graph.block_end)
    # One scratch set per thread, handed from chunk to chunk; an edit's rows take the kept set.
    scratch: queue.SimpleQueue = queue.SimpleQueue()
    kept = _EDIT_SCRATCH.take(graph.n_nodes, fragments.size, heap_capacity) if rows.shape[0] <= 512 else None
    if kept is not None and rows.shape[0] >= TWO_THREAD_MIN_ROWS:
        # An edit's rows in three steps: each start searched once, on two threads where there are
        # two, or recalled from the last edit of the file (`memory`).
        second = None
        try:
            if relation_config.workers > 1:
                second = _SECOND_EDIT_SCRATCH.take(graph.n_nodes, fragments.size, heap_capacity)
            entries = _edit_rows_searched(rows, cover, rows_of_graph, limits, rules, anchors, kept, second, memory,
                                          stored)
        finally:
            if second is not None:
                _SECOND_EDIT_SCRATCH.give_back()
            _EDIT_SCRATCH.give_back()
        if progress is not None:
            progress(int(rows.shape[0]))
        return entries
    if kept is not None:
        scratch.put(kept)
    else:
        for _ in range(min(workers, len(chunks))):
            scratch.put(relation_scratch(graph.n_nodes, fragments.size, heap_capacity))

    def run(part: np.ndarray):
        buffers = scratch.get()
        try:
            result = relation_rows(part.astype(np.int64), cover, rows_of_graph, limits, rules, anchors, buffers)
        finally:
            scratch.put(buffers)
        if not result[4]:
            raise RuntimeError("Dijkstra heap overflow")  # cannot happen: capacity >= 2 * edges
        if progress is not None:
            progress(int(part.shape[0]))
        # Row and column ids as int32 (millions of entries: docs/measurements.md#graph-and-relations).
        return result[0].astype(np.int32), result[1].astype(np.int32), result[2], result[3]

    try:
        if workers == 1 or len(chunks) <= 1:
            return gathered(map(run, chunks), rows.shape[0], keep, stored)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return gathered(pool.map(run, chunks), rows.shape[0], keep, stored)
    finally:
        if kept is not None:
            _EDIT_SCRATCH.give_back()


# An edit with fewer new fragments searches on one thread (a thread's start costs more than it saves).
TWO_THREAD_MIN_ROWS = 8
# Starts a thread takes at a time: a few calls of the search kernel an edit, each run's starts
# neighbours in the file.
STARTS_PER_RUN = 6


def _edit_rows_searched(
    rows: np.ndarray, cover: FragmentCover, graph: GraphRows, limits: SearchLimits, rules: RelationRules,
    anchors: StartAnchors, kept: RelationScratch, second: RelationScratch | None, memory: SearchMemory | None,
    stored: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`relation_rows` for an edit's rows in its three steps: the starts numbered, each searched once
    (on two threads when `second` is given) unless `memory` holds what it found at the last edit of
    the same file (`search_memo`), the rows assembled. The same entries as `relation_rows`, bit for
    bit, when nothing is recalled (the same searches and sums, in the same order per start)."""
    rows = rows.astype(np.int64)
    numbered = number_starts(rows, cover, limits, rules, anchors, kept.source_slot)
    starts = numbered.starts
    try:
        file = int(cover.file[rows[0]])
        # Recalled only where a search sums other files' fragments alone and the rows are one file's.
        recallable = memory is not None and rules.same_file_weight == 0.0 and bool((cover.file[rows] == file).all())
        block_first = int(anchors.block_start[file])
        key = (numbered.budgets.tobytes(), float(limits.limit), int(limits.max_reach))
        memo = memory.memo if memory is not None and recallable else None
        recalled = recalled_rows(memo, file, key, starts, block_first)
        searched = _searched_starts(np.flatnonzero(recalled < 0), numbered, cover, graph, limits, rules, anchors,
                                    kept, second)
        sums = joined_sums(memo, recalled, searched)
        if memory is not None:
            # All recalled in the same order: the memo already describes these sums.
            memory.memo = None if not recallable else memo if memo is not None and sums is memo.sums \
                else memo_of(file, key, starts, block_first, sums)
        out_row, out_col, out_val, bars = assemble_rows(rows, cover, limits, rules, anchors, numbered, sums, kept)
    finally:
        kept.source_slot[starts] = -1
    return gathered([(out_row.astype(np.int32), out_col.astype(np.int32), out_val, bars)], rows.shape[0],
                    rules.keep, stored)


def _searched_starts(
    which: np.ndarray, numbered: NumberedStarts, cover: FragmentCover, graph: GraphRows, limits: SearchLimits,
    rules: RelationRules, anchors: StartAnchors, kept: RelationScratch, second: RelationScratch | None,
) -> BandSums:
    """The band sums of the starts numbered `which` (rows of the other starts empty). On two threads
    when `second` is given: runs of neighbouring starts (which cost alike) go to whichever thread is
    free next, each thread sums into its own scratch and pair list, and the pairs are put together
    in run order. Taken as the threads come free rather than split in halves: halves of
    alternating starts left one thread waiting on the other (docs/measurements.md#an-edit)."""
    band_first = np.zeros((numbered.starts.shape[0], numbered.budgets.shape[0]), dtype=np.int64)
    band_end = np.zeros_like(band_first)
    if second is None or not which.shape[0]:
        pair_frag, pair_value, ok = search_bands(which, numbered, cover, graph, limits, rules, anchors, kept,
                                                 band_first, band_end)
        if not ok:
            raise RuntimeError("Dijkstra heap overflow")  # cannot happen: capacity >= 2 * slots
        return BandSums(band_first, band_end, pair_frag, pair_value)
    # At least four runs (two per thread) where there are starts enough.
    size = max(1, min(STARTS_PER_RUN, which.shape[0] // 4))
    runs = [which[first : first + size] for first in range(0, which.shape[0], size)]
    found: list[tuple[np.ndarray, np.ndarray]] = [(np.zeros(0, np.int32), np.zeros(0))] * len(runs)
    next_run = itertools.count(2)  # one C call under the GIL: each run is taken once

    def search(first_run: int, buffers: RelationScratch) -> bool:
        run = first_run  # each thread's first run is its own, then whichever is next
        while run < len(runs):
            pair_frag, pair_value, ok = search_bands(runs[run], numbered, cover, graph, limits, rules, anchors,
                                                     buffers, band_first, band_end)
            if not ok:
                return False
            found[run] = (pair_frag, pair_value)
            run = next(next_run)
        return True

    if not all(run_parts([partial(search, 0, kept), partial(search, 1, second)])):
        raise RuntimeError("Dijkstra heap overflow")  # cannot happen: capacity >= 2 * slots
    offset = 0
    for run, (pair_frag, _) in zip(runs, found):
        band_first[run] += offset
        band_end[run] += offset
        offset += pair_frag.shape[0]
    return BandSums(band_first, band_end, np.concatenate([pair_frag for pair_frag, _ in found]),
                    np.concatenate([pair_value for _, pair_value in found]))


class KeptScratch:
    """One `relation_scratch` set kept between calls, for an edit's rows (a language server edits
    all day): a fresh graph-sized set faulted its pages in on every edit (what that cost, and what
    the kept set leaves resident: docs/measurements.md#an-edit). One caller at a time; another gets None and makes
    its own set. Grown with headroom as the graph grows."""

    HEADROOM = 1.25  # sizes kept above the current need, so files added do not re-allocate at once
    STAMP_LIMIT = 1 << 30  # search stamps are int32: start over (clear `settled`) well before they wrap

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffers: RelationScratch | None = None
        self._sizes = (0, 0, 0)

    def take(self, n_graph: int, n_frags: int, heap_capacity: int) -> RelationScratch | None:
        if not self._lock.acquire(blocking=False):
            return None
        needed = (n_graph, n_frags, heap_capacity)
        if self._buffers is None or any(need > have for need, have in zip(needed, self._sizes)):
            self._sizes = tuple(int(need * self.HEADROOM) + 1 for need in needed)  # type: ignore[assignment]
            self._buffers = None  # the old set goes before the new one is made
            try:
                self._buffers = relation_scratch(*self._sizes)
            except BaseException:  # out of memory: not held, the next caller tries again
                self._lock.release()
                raise
        settled, stamp_box = self._buffers.search.settled, self._buffers.stamp_box
        if stamp_box[0] > self.STAMP_LIMIT:
            settled[:] = 0
            stamp_box[0] = 0
        return self._buffers

    def give_back(self) -> None:
        self._lock.release()


_EDIT_SCRATCH = KeptScratch()
_SECOND_EDIT_SCRATCH = KeptScratch()  # the second thread's, for an edit's searches on two threads


def gathered(
    chunks: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], n_rows: int, keep: int,
    stored: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The chunks' (row, col, w, bar) arrays end to end, each chunk let go once copied.

    With `keep` > 0 a row has at most `keep` entries, so the entries go straight into arrays of
    that capacity as the chunks come in, and the result is their filled front: untouched pages
    of np.empty are never resident, and neither the chunks nor a joined copy pile up (a cold build
    held both at its peak: docs/measurements.md#memory-of-a-cold-build). Otherwise joined at the end.
    `stored`: the weights as float32, the precision W keeps them at (index_state.stored_weights
    rounds them so): 4 bytes an entry less at that peak.
    """
    weights = np.float32 if stored else np.float64
    if keep <= 0:
        parts = list(chunks)
        if not parts:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=weights), np.zeros(0)
        rows, cols, values, bars = (np.concatenate(column) for column in zip(*parts))
        return rows, cols, values.astype(weights, copy=False), bars
    capacity = keep * n_rows
    bars = np.empty(n_rows)
    out = (np.empty(capacity, dtype=np.int32), np.empty(capacity, dtype=np.int32),
           np.empty(capacity, dtype=weights))
    count = at_row = 0
    for *entries, chunk_bars in chunks:
        n = entries[0].shape[0]
        for column, values in zip(out, entries):
            column[count : count + n] = values
        count += n
        bars[at_row : at_row + chunk_bars.shape[0]] = chunk_bars
        at_row += chunk_bars.shape[0]
        del entries, chunk_bars
    return out[0][:count], out[1][:count], out[2][:count], bars[:at_row]


def context_relation_entries(
    rows: np.ndarray, fragments: FragmentTable, live: np.ndarray, config: RelationConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eq. 7: w_ij = gamma^|i - j| for windows i != j of one file (window order within the file)."""
    gamma = config.context_gamma
    if gamma <= 0.0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    reach = 1 if gamma >= 1.0 else max(1, int(math.floor(math.log(config.relation_cutoff) / math.log(gamma) + 1e-9)))
    if gamma >= 1.0:
        reach = fragments.size
    out_r, out_c, out_v = [], [], []
    for distance in range(1, reach + 1):
        value = gamma**distance
        if value < config.relation_cutoff:
            break
        for sign in (-1, 1):
            cols = rows + sign * distance
            ok = (cols >= 0) & (cols < fragments.size)
            r, c = rows[ok], cols[ok]
            same = (fragments.file[r] == fragments.file[c]) & live[c]
            out_r.append(r[same])
            out_c.append(c[same])
            out_v.append(np.full(int(same.sum()), value))
    if not out_r:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    return np.concatenate(out_r).astype(np.int64), np.concatenate(out_c).astype(np.int64), np.concatenate(out_v)


# Rows of the cosine block computed at once: (rows x fragments) float32, 64 MB at 2,048 x 8,192.
SEMANTIC_ROW_BLOCK = 2048


def semantic_relation_entries(
    rows: np.ndarray, fragments: FragmentTable, live: np.ndarray, window_vectors: WindowVectors,
    config: RelationConfig,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eq. 6: w_ij = cos(e_i, e_j) of the windows' embeddings, each row keeping its
    `semantic_neighbours` most similar live windows j != i at `semantic_min_cosine` or more. A
    pair of windows of one file is scaled by `same_file_weight` (0 leaves it out, as eq. 8's are:
    overlapping windows share half their lines, so their cosine says little). A window without a
    vector (an unsaved editor buffer) has no semantic relations."""
    empty = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    vectors, known = window_vectors
    k = config.semantic_neighbours
    candidates = np.flatnonzero(known[: fragments.size] & live[: fragments.size])
    rows = rows[known[rows] & live[rows]] if rows.size else rows
    if k <= 0 or not rows.size or not candidates.size:
        return empty
    basis = vectors[candidates]  # (n_candidates, dimensions), float32
    out_r, out_c, out_v = [], [], []
    for first in range(0, rows.shape[0], SEMANTIC_ROW_BLOCK):
        block = rows[first : first + SEMANTIC_ROW_BLOCK]
        cosines = vectors[block] @ basis.T  # (block, n_candidates)
        same_file = fragments.file[block][:, None] == fragments.file[candidates][None, :]
        cosines[same_file] *= config.same_file_weight
        cosines[block[:, None] == candidates[None, :]] = -np.inf  # not its own neighbour
        keep = min(k, candidates.size)
        # The k largest per row (the merge with the other relations keeps the row's top list).
        top = np.argpartition(-cosines, keep - 1, axis=1)[:, :keep] if keep < candidates.size else \
            np.broadcast_to(np.arange(candidates.size), (block.size, candidates.size))
        values = np.take_along_axis(cosines, top, axis=1)
        r = np.repeat(block, keep)
        c = candidates[top].ravel()
        v = values.ravel().astype(np.float64)
        chosen = v >= max(config.semantic_min_cosine, config.relation_cutoff)
        out_r.append(r[chosen])
        out_c.append(c[chosen])
        out_v.append(v[chosen])
    return np.concatenate(out_r), np.concatenate(out_c), np.concatenate(out_v)


def relation_entries(
    rows: np.ndarray,
    fragments: FragmentTable,
    graph: CodeGraph | SearchGraph,
    live: np.ndarray,
    graph_config: GraphConfig,
    relation_config: RelationConfig,
    progress: ProgressCallback | None = None,
    keep: int | None = None,
    window_vectors: WindowVectors | None = None,
    memory: SearchMemory | None = None,
    stored: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The configured relation's strongest entries for `rows`: (row, col, w, entry bar per row);
    `stored`: w rounded to float32 and held so, as W stores it (a whole build's).

    Graph (eq. 8), context (eq. 7), or their elementwise max, and with `window_vectors` and
    `semantic_neighbours` the semantic relation (eq. 6) in that max too; each row keeps its
    `max_relations_per_fragment` largest entries (or `keep`; 0 keeps all), and its bar is the
    weakest one kept (the relation cutoff when the row was not full). A `CodeGraph` is made
    into its `SearchGraph` with `fragments` (when the relation kind reads the graph). `memory`: as
    `graph_relation_entries`.
    """
    kind = relation_config.kind
    if keep is None:
        keep = relation_config.max_relations_per_fragment
    if isinstance(graph, CodeGraph) and kind != "context":
        graph = search_graph(graph, fragments)
    semantic = window_vectors is not None and relation_config.semantic_neighbours > 0
    if kind == "graph" and not semantic:
        # The kernel already keeps each row's `keep` strongest and knows their bars: sorting the
        # entries again cost the cold build (docs/measurements.md#graph-and-relations; the parity
        # tests check both ways agree).
        return graph_relation_entries(rows, fragments, graph, live, graph_config, relation_config, progress, keep,
                                      memory, stored)
    parts = []
    if kind in ("graph", "graph+context"):
        parts.append(graph_relation_entries(rows, fragments, graph, live, graph_config, relation_config,
                                            progress, keep, memory)[:3])
    elif progress is not None:
        progress(int(rows.shape[0]))
    if kind in ("context", "graph+context"):
        parts.append(context_relation_entries(rows, fragments, live, relation_config))
    if semantic:
        assert window_vectors is not None
        parts.append(semantic_relation_entries(rows, fragments, live, window_vectors, relation_config))
    r = np.concatenate([p[0] for p in parts])
    c = np.concatenate([p[1] for p in parts])
    v = np.concatenate([p[2] for p in parts])
    if len(parts) > 1:
        order = np.lexsort((-v, c, r))
        r, c, v = r[order], c[order], v[order]
        first = np.ones(r.shape[0], dtype=bool)
        first[1:] = (r[1:] != r[:-1]) | (c[1:] != c[:-1])
        r, c, v = r[first], c[first], v[first]
    r, c, v = strongest_per_row(r, c, v, keep)
    size = int(max(fragments.size, 1))
    bars = row_thresholds(r, v, size, keep, relation_config.relation_cutoff)[rows]
    return r, c, v.astype(np.float32) if stored else v, bars


def strongest_per_row(
    rows: np.ndarray, cols: np.ndarray, values: np.ndarray, limit: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep each row's `limit` largest entries (ties broken by column id)."""
    if limit <= 0 or rows.shape[0] == 0:
        return rows, cols, values
    if np.all(rows[1:] >= rows[:-1]):  # rows in runs (relation rows): a partition per row
        kept = strongest_in_row_runs(rows, cols, values, limit)
        return rows[kept], cols[kept], values[kept]
    return strongest_per_row_by_sort(rows, cols, values, limit)


def strongest_per_row_by_sort(
    rows: np.ndarray, cols: np.ndarray, values: np.ndarray, limit: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`strongest_per_row` for entries in any order, by sorting them all (the reference)."""
    if limit <= 0 or rows.shape[0] == 0:
        return rows, cols, values
    order = np.lexsort((cols, -values, rows))
    rows, cols, values = rows[order], cols[order], values[order]
    starts = np.ones(rows.shape[0], dtype=bool)
    starts[1:] = rows[1:] != rows[:-1]
    first_of_row = np.maximum.accumulate(np.where(starts, np.arange(rows.shape[0]), 0))
    rank = np.arange(rows.shape[0]) - first_of_row
    keep = rank < limit
    return rows[keep], cols[keep], values[keep]


def row_thresholds(rows: np.ndarray, values: np.ndarray, size: int, limit: int, cutoff: float) -> np.ndarray:
    """Smallest value a new entry needs to enter each row's top list, shape (size,): a full row's
    weakest kept value (entries from strongest_per_row, in any order), else the cutoff."""
    threshold = np.full(size, cutoff)
    if limit <= 0 or rows.shape[0] == 0:
        return threshold
    counts = np.bincount(rows, minlength=size)
    full = counts >= limit
    weakest = np.full(size, np.inf)
    if np.all(rows[1:] >= rows[:-1]):
        # Rows in runs (an edit's top lists): one minimum per run, where np.minimum.at costs a
        # call per entry (0.75 ms an edit of a 2,700-line file).
        starts = np.flatnonzero(np.concatenate([[True], rows[1:] != rows[:-1]]))
        weakest[rows[starts]] = np.minimum.reduceat(values, starts)
    else:
        np.minimum.at(weakest, rows, values)
    threshold[full] = np.maximum(weakest[full], cutoff)
    return threshold


def symmetric_union(
    rows: np.ndarray, cols: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Entries plus their transposes; a pair present twice keeps its larger value. Sorted by row,
    then column (as `symmetric_union_by_lexsort`, the reference). One sort of a combined int64 key
    and a maximum per run of equal keys: a three-key lexsort was slower (docs/measurements.md#an-edit)."""
    r = np.concatenate([rows, cols])
    c = np.concatenate([cols, rows])
    v = np.concatenate([values, values])
    if r.shape[0] == 0:
        return r, c, v
    key = r.astype(np.int64) * (int(c.max()) + 1) + c
    # Not a stable sort: entries with one key are one pair, whose maximum takes no order.
    order = np.argsort(key)
    key, v = key[order], v[order]
    first = np.ones(key.shape[0], dtype=bool)
    first[1:] = key[1:] != key[:-1]
    starts = np.flatnonzero(first)
    return r[order][starts], c[order][starts], np.maximum.reduceat(v, starts)


def symmetric_union_by_lexsort(
    rows: np.ndarray, cols: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`symmetric_union` by sorting on (row, column, -value): the reference."""
    r = np.concatenate([rows, cols])
    c = np.concatenate([cols, rows])
    v = np.concatenate([values, values])
    order = np.lexsort((-v, c, r))
    r, c, v = r[order], c[order], v[order]
    first = np.ones(r.shape[0], dtype=bool)
    first[1:] = (r[1:] != r[:-1]) | (c[1:] != c[:-1])
    return r[first], c[first], v[first]


def _symmetric_max(indptr: np.ndarray, cols: np.ndarray,
                   values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """max(A, A^T) of the CSR matrix (indptr, cols, values) as CSR arrays (int64 indptr, int32
    columns, float64 values), rows sorted by column; A's rows are sorted in place first. The
    passes that go row by row run on two threads, half of A's entries each (the kernels release
    the GIL; kernels/csr.py): on one core they were the longest serial stretch of a cold build
    after the calls (docs/measurements.md#parsing-and-analysis)."""
    size = indptr.shape[0] - 1
    middle = int(np.searchsorted(indptr, indptr[-1] // 2))
    halves = ((0, min(middle, size)), (min(middle, size), size))
    run_parts([partial(sort_row_range_by_column, indptr, cols, values, first, end) for first, end in halves])
    mirrored = np.empty(cols.shape[0], dtype=np.bool_)
    counts = [np.zeros(size, dtype=np.int64) for _ in halves]
    run_parts([partial(mark_mirrored, indptr, cols, mirrored, count, first, end)
               for count, (first, end) in zip(counts, halves)])
    only_mirrored = counts[0] + counts[1]
    del counts
    out_indptr = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(np.diff(indptr) + only_mirrored, out=out_indptr[1:])
    out_cols = np.empty(out_indptr[size], dtype=np.int32)
    out_values = np.empty(out_indptr[size], dtype=np.float64)
    place_mirror_only(indptr, cols, values, mirrored, out_indptr, only_mirrored, out_cols, out_values)
    run_parts([partial(merge_mirrored_rows, indptr, cols, values, mirrored, out_indptr, only_mirrored,
                       out_cols, out_values, first, end) for first, end in halves])
    return out_indptr, out_cols, out_values


def symmetric_matrix(entries: list[np.ndarray], size: int) -> sp.csr_matrix:
    """`symmetric_union` of a whole build's entries [rows, cols, values] as a canonical CSR matrix
    of shape (size, size).

    No (row, col) pair twice, values > 0; rows ascending saves a sort (graph relation rows come
    out row after row).
    The list is emptied as its arrays are used, so the entries are not resident beside the matrix
    made of them. Same as scipy's maximum of the one-sided matrix and its transpose (a parity
    test), without its copies.
    """
    rows, cols, values = entries
    entries.clear()
    if rows.shape[0] and not np.all(rows[1:] >= rows[:-1]):  # other relation kinds: unsorted rows
        order = np.argsort(rows, kind="stable")
        rows, cols, values = rows[order], cols[order], values[order]
    indptr = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=size), out=indptr[1:])
    del rows
    out_indptr, out_cols, out_values = _symmetric_max(indptr, cols, values)
    del indptr, cols, values
    index_dtype = np.int32 if out_indptr[-1] < np.iinfo(np.int32).max else np.int64
    matrix = sp.csr_matrix((size, size), dtype=np.float64)
    matrix.indptr = out_indptr.astype(index_dtype)
    matrix.indices = out_cols.astype(index_dtype, copy=False)
    matrix.data = out_values
    matrix.has_sorted_indices = True
    return matrix
