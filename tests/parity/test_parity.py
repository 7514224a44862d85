"""Fast paths against exact references: networkx Dijkstra, eq. 8 by loops, rank-bm25."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from rank_bm25 import BM25Okapi

from repomem.completion.engine import CompletionEngine
from repomem.config import BM25Config, Config, with_overrides
from repomem.index.bm25 import (
    TermSegment,
    build_segment,
    compute_stats,
    document_frequencies,
    joined_segment,
    postings_joined,
    score_query,
)
from repomem.index.fragments import CoverEntries
from repomem.index.graph import syntax_edges
from repomem.index.kernels.csr import sort_rows_by_column
from repomem.index.kernels.selection import kth_smallest, largest_positions, top_k_offered, top_k_positions
from repomem.index.kernels.shortest_paths import (
    GraphRows,
    PrunedSpan,
    SearchLimits,
    SearchScratch,
    bounded_dijkstra,
    exit_costs,
    most_common_cost,
)
from repomem.index.relations import (
    cost_limit,
    node_fragment_index,
    relation_entries,
    row_thresholds,
    strongest_per_row,
    strongest_per_row_by_sort,
    symmetric_matrix,
    symmetric_union,
    symmetric_union_by_lexsort,
)
from repomem.index.repo_index import RepoIndex, apply_changes
from repomem.index.scan import SourceFile, content_digest
from repomem.index.snapshot_encoding import symmetric_matrix_from_upper
from repomem.index.tokens import _line_tokens_by_regex, line_tokens, tokenize
from repomem.languages.python.calls import CallEdge
from repomem.positions import locate
from repomem.retrieval import scoring
from repomem.retrieval.scoring import best_fragments, score_fragments, top_fragments
from repomem.service import RepoService
from tests.parity.reference import reference_cover, reference_graph, reference_relation, reference_strengths
from tests.repos import write_repo

REPOSITORY = Path(__file__).resolve().parents[2]
EXACT = {"graph": {"max_reach": 0}, "relations": {"max_relations_per_fragment": 0, "relation_cutoff": 0.0}}


def open_index(root: Path, config: Config) -> RepoIndex:
    service = RepoService.open(root, config)
    assert isinstance(service, RepoService)
    report = service.ensure_index()
    assert not hasattr(report, "kind"), report
    assert service.index is not None
    return service.index


def node_key_for(graph):
    def key(node: int):
        n_syntax = int(graph.node_offset[-1])
        if node < n_syntax:
            file_id = int(np.searchsorted(graph.node_offset, node, side="right") - 1)
            return ("syntax", file_id, node - int(graph.node_offset[file_id]))
        if node < n_syntax + graph.file_node.shape[0]:
            return ("file", node - n_syntax)
        return ("dir", graph.directories[node - n_syntax - graph.file_node.shape[0]])
    return key


def all_calls(index: RepoIndex):
    return [CallEdge(*row) for row in index.all_calls().tolist()]


@pytest.mark.parametrize("seed", [0, 1])
def test_symmetric_union_by_one_key_is_the_lexsort(seed):
    """An edit's entries and their transposes, a pair present twice keeping its larger value:
    one sort of a combined key against the three-key lexsort, duplicates, ties and both dtypes."""
    rng = np.random.default_rng(seed)
    for dtype in (np.int32, np.int64):
        rows = rng.integers(0, 40, 300).astype(dtype)
        cols = rng.integers(0, 60, 300).astype(dtype)
        values = rng.choice([0.25, 0.5, 0.75, 1.0], 300)
        got = symmetric_union(rows, cols, values)
        want = symmetric_union_by_lexsort(rows, cols, values)
        for fast, slow in zip(got, want):
            assert fast.dtype == slow.dtype
            np.testing.assert_array_equal(fast, slow)
        assert got[0].shape[0] < 600  # duplicates were merged
    empty = np.zeros(0, dtype=np.int32)
    assert all(a.shape == (0,) for a in symmetric_union(empty, empty, np.zeros(0)))


def test_cover_entries_replaced_by_runs_are_the_masked_ones(synthetic_repo):
    """An edit drops its dead fragments' cover entries run by run: the same arrays as keeping the
    entries of live fragments by a mask, with dead ids given in any order, repeated, at either end
    and without entries; then the added entries follow."""
    index = open_index(synthetic_repo, Config())
    cover = index.cover_entries()
    n = index.n_fragments
    added = CoverEntries(np.array([n, n, n + 1]), np.array([0, 0, 1]), np.array([0, 1, 0]), np.array([1.0, 2.0, 3.0]))
    rng = np.random.default_rng(3)
    for dead in (np.array([0, n - 1]), rng.permutation(n)[: n // 3], np.array([5, 5, 4, n + 7]), np.zeros(0, np.int64),
                 np.arange(n)):
        live = np.ones(n + 8, dtype=bool)
        live[dead] = False
        keep = live[cover.fragment]
        got = cover.replaced(dead, added)
        for name in ("fragment", "file", "local_node", "weight"):
            want = np.concatenate([getattr(cover, name)[keep], getattr(added, name)])
            np.testing.assert_array_equal(getattr(got, name), want)


def test_spliced_syntax_edges_are_the_rebuilt_ones(synthetic_repo):
    """An edit's syntax edges come from the last ones (the changed files replaced, the others
    shifted): the same arrays as building them from scratch, with files grown, shrunk and removed."""
    index = open_index(synthetic_repo, Config())
    index.ensure_structure()
    files = list(index.syntax)
    previous = syntax_edges(files)
    sizes = [f.n_nodes for f in files if f is not None]
    assert len(set(sizes)) > 1
    changed = list(files)
    changed[1], changed[4] = files[4], files[1]  # two files swap sizes: one grows, one shrinks
    changed[len(files) - 1] = None  # the last removed
    spliced = syntax_edges(changed, previous)
    rebuilt = syntax_edges(changed)
    for name in ("sizes", "node_offset", "child", "parent", "edge_offset"):
        np.testing.assert_array_equal(getattr(spliced, name), getattr(rebuilt, name))
    assert spliced.child.shape[0] > 0 and not np.array_equal(spliced.node_offset, previous.node_offset)


@pytest.mark.parametrize("granularity", ["statement", "named"])
@pytest.mark.parametrize("repo", ["package_repo", "synthetic_repo"])
def test_graph_edges_match_reference(repo, granularity, request):
    config = with_overrides(Config(), graph={"granularity": granularity})
    index = open_index(request.getfixturevalue(repo), config)
    graph = index.graph()
    reference = reference_graph(index.syntax, all_calls(index), config.graph)
    key = node_key_for(graph)
    fast = {frozenset((key(int(a)), key(int(b)))): float(w)
            for a, b, w in zip(graph.edge_a, graph.edge_b, graph.edge_weight)}
    slow = {frozenset((a, b)): data["w"] for a, b, data in reference.edges(data=True)}
    assert fast.keys() == slow.keys()
    for pair, weight in slow.items():
        assert fast[pair] == pytest.approx(weight, rel=1e-15)
    assert graph.n_nodes == reference.number_of_nodes()


@pytest.mark.parametrize("cutoff", [1e-3, 1e-2, 0.05])
@pytest.mark.parametrize("prune_own_file", [False, True])
@pytest.mark.parametrize("queued", ["most common", "least common", "none"])
def test_bounded_dijkstra_matches_networkx(synthetic_repo, cutoff, prune_own_file, queued):
    """Exact strengths; with the source's own file pruned to what can still lead out of it, every
    node of other files keeps its exact strength. The same whichever edge cost goes through the
    FIFO (or none: the heap alone)."""
    config = with_overrides(Config(), graph={"strength_cutoff": cutoff, "max_reach": 0})
    index = open_index(synthetic_repo, config)
    graph = index.graph()
    indptr, indices, costs = graph.csr()
    step = -math.log(config.graph.syntax_weight)
    exit_cost = exit_costs(graph.syntax_parent, graph.portals(), step, 0, graph.n_nodes)
    reference = reference_graph(index.syntax, all_calls(index), config.graph)
    key = node_key_for(graph)
    n = graph.n_nodes
    n_syntax = int(graph.node_offset[-1])
    dist = np.empty(n)
    settled = np.zeros(n, dtype=np.int64)
    reached = np.empty(n, dtype=np.int64)
    heap_cost = np.empty(2 * indices.shape[0] + 1)
    heap_node = np.empty(2 * indices.shape[0] + 1, dtype=np.int64)
    queue_cost, queue_node = np.empty_like(heap_cost), np.empty_like(heap_node)
    values, counts = np.unique(costs, return_counts=True)
    assert len(values) > 2  # the FIFO and the heap both carry edges
    queued_cost = {"most common": most_common_cost(costs), "least common": float(values[np.argmin(counts)]),
                   "none": float("nan")}[queued]
    if queued == "most common":
        assert queued_cost == values[np.argmax(counts)]
    sources = list(range(0, n, max(1, n // 150)))
    slow = reference_strengths(reference, [key(s) for s in sources], cutoff)
    pruned_somewhere = False
    for stamp, source in enumerate(sources, start=1):
        first = end = 0
        if prune_own_file and source < n_syntax:
            file_id = int(np.searchsorted(graph.node_offset, source, side="right") - 1)
            first, end = int(graph.node_offset[file_id]), int(graph.node_offset[file_id + 1])
        count = bounded_dijkstra(GraphRows(indptr[:-1], indptr[1:], indices, costs, queued_cost, True),
                                 SearchLimits(cost_limit(cutoff), 0),
                                 SearchScratch(dist, settled, reached, heap_cost, heap_node, queue_cost, queue_node),
                                 source, stamp, PrunedSpan(first, end, exit_cost, 0))
        fast = {key(int(node)): math.exp(-dist[node]) for node in reached[:count]}
        expected = slow[key(source)]
        if first < end:
            own = {key(node) for node in range(first, end) if node != source}
            pruned_somewhere |= len(expected.keys() & own) > len(fast.keys() & own)  # it did skip some
            expected = {node: value for node, value in expected.items() if node not in own}
            fast = {node: value for node, value in fast.items() if node not in own}
        assert fast.keys() == expected.keys()
        for node, strength in expected.items():
            assert fast[node] == pytest.approx(strength, rel=1e-12)
    assert pruned_somewhere == prune_own_file


@pytest.mark.parametrize("max_reach", [3, 25, 120])
def test_a_capped_search_keeps_whole_cost_levels(synthetic_repo, max_reach):
    """The cap keeps the max_reach strongest (networkx, sorted) less the cost level it cuts, if
    it cuts one, so which of equally strong nodes stay does not depend on which queue carries
    which edges."""
    cutoff = 1e-3
    config = with_overrides(Config(), graph={"strength_cutoff": cutoff})
    index = open_index(synthetic_repo, config)
    graph = index.graph()
    indptr, indices, costs = graph.csr()
    reference = reference_graph(index.syntax, all_calls(index), config.graph)
    key = node_key_for(graph)
    n = graph.n_nodes
    scratch = [np.empty(n), np.zeros(n, dtype=np.int64), np.empty(n, dtype=np.int64)]
    heap = [np.empty(2 * indices.shape[0] + 1), np.empty(2 * indices.shape[0] + 1, dtype=np.int64)]
    fifo = [np.empty(2 * indices.shape[0] + 1), np.empty(2 * indices.shape[0] + 1, dtype=np.int64)]
    values = np.unique(costs)
    sources = list(range(0, n, max(1, n // 100)))
    slow = reference_strengths(reference, [key(s) for s in sources], cutoff, max_reach)
    slow_all = reference_strengths(reference, [key(s) for s in sources], cutoff)
    cut_a_level = 0
    stamp = 0
    for source in sources:
        kept = []
        # Every choice of queued cost, with and without skipping the levels a hub's neighbours
        # fill past the cap (the graph is deduplicated: each neighbour is counted once).
        for queued_cost in (float(values[0]), float(values[-1]), most_common_cost(costs), float("nan")):
            for distinct_neighbours in (False, True):
                stamp += 1
                dist, settled, reached = scratch
                count = bounded_dijkstra(
                    GraphRows(indptr[:-1], indptr[1:], indices, costs, queued_cost, distinct_neighbours),
                    SearchLimits(cost_limit(cutoff), max_reach), SearchScratch(dist, settled, reached, *heap, *fifo),
                    source, stamp, PrunedSpan(0, 0, np.zeros(n), 0))
                kept.append({key(int(node)): math.exp(-dist[node]) for node in reached[:count]})
        assert all(k == kept[0] for k in kept[1:])
        expected = slow[key(source)]
        assert kept[0].keys() == expected.keys()
        for node, strength in expected.items():
            assert kept[0][node] == pytest.approx(strength, rel=1e-12)
        cut_a_level += 0 < len(expected) < max_reach and len(slow_all[key(source)]) > max_reach
    assert cut_a_level  # some cut fell inside a cost level
    assert (np.diff(indptr) > max_reach).any() or max_reach > 3  # hubs: nodes with more neighbours than the cap


@pytest.mark.parametrize("granularity, same_file_weight",
                         [("statement", 1.0), ("named", 1.0), ("statement", 0.3), ("statement", 0.0), ("named", 0.0)])
@pytest.mark.parametrize("repo", ["package_repo", "synthetic_repo"])
def test_relation_matrix_matches_eq8(repo, granularity, same_file_weight, request):
    config = with_overrides(Config(), graph={"granularity": granularity, "max_reach": 0},
                            relations={"max_relations_per_fragment": 0, "relation_cutoff": 0.0,
                                       "same_file_weight": same_file_weight})
    index = open_index(request.getfixturevalue(repo), config)
    graph = index.graph()
    table = index.fragment_table(graph)
    rows = np.arange(table.size)
    r, c, v, _ = relation_entries(rows, table, graph, index.live, config.graph, config.relations)
    fast = np.zeros((table.size, table.size))
    fast[r, c] = v
    reference = reference_graph(index.syntax, all_calls(index), config.graph)
    slow = reference_relation(table, node_key_for(graph), reference, config.graph.strength_cutoff, index.live,
                              same_file_weight)
    assert np.count_nonzero(slow) > table.size  # the test repo really has relations
    np.testing.assert_allclose(fast, slow, rtol=1e-10, atol=1e-15)
    np.testing.assert_allclose(fast, fast.T, rtol=1e-10, atol=1e-15)  # eq. 8 is symmetric


def test_node_fragment_index_is_a_stable_sort_of_the_incidence(synthetic_repo):
    index = open_index(synthetic_repo, Config())
    graph = index.graph()
    table = index.fragment_table(graph)
    node_indptr, node_frags, node_weights = node_fragment_index(table, graph.n_nodes)
    frag_of_slot = np.repeat(np.arange(table.size), np.diff(table.indptr))
    order = np.argsort(table.nodes, kind="stable")
    np.testing.assert_array_equal(node_indptr, np.concatenate([[0], np.cumsum(np.bincount(table.nodes,
                                                                                          minlength=graph.n_nodes))]))
    np.testing.assert_array_equal(node_frags, frag_of_slot[order])
    np.testing.assert_array_equal(node_weights, table.weights[order])
    assert (np.diff(node_indptr) > 1).any()  # some node lies in several fragments


def test_the_selection_and_the_row_sort_are_numpys_sorts():
    """The kernels' own quickselect and heapsort (numba's np.partition / np.argsort took seconds
    to compile on a first run) against numpy: order statistics with many ties, and rows longer
    than the insertion sort's 64 entries sorted by column with their values."""
    rng = np.random.default_rng(7)
    for trial in range(400):
        n = int(rng.integers(1, 200))
        values = (rng.integers(0, 4, n) * 0.25) if trial % 2 else rng.random(n)
        ids = rng.integers(0, 50, n).astype(np.int64)
        k = int(rng.integers(0, n))
        assert kth_smallest(values, k) == np.sort(values)[k] and kth_smallest(ids, k) == np.sort(ids)[k]
    lengths = np.array([0, 3, 64, 65, 300, 1, 1000])
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    cols = np.concatenate([rng.permutation(5000)[:length] for length in lengths]).astype(np.int32)
    values = rng.random(cols.shape[0])
    want_cols, want_values = cols.copy(), values.copy()
    for first, end in zip(indptr[:-1], indptr[1:]):
        order = np.argsort(want_cols[first:end])
        want_cols[first:end], want_values[first:end] = want_cols[first:end][order], want_values[first:end][order]
    sort_rows_by_column(indptr, cols, values)
    np.testing.assert_array_equal(cols, want_cols)
    np.testing.assert_array_equal(values, want_values)


@pytest.mark.parametrize("keep", [8, 14, 20])
def test_strongest_per_row_by_partition_is_the_sort(keep):
    """Rows in runs take a partition per row; the same entries as sorting all of them, ties
    (many equal values) to the lower column, rows shorter, as long as and longer than `keep`."""
    rng = np.random.default_rng(keep)
    rows = np.sort(rng.integers(0, 40, 600))
    cols = rng.permutation(600) % 97
    values = rng.integers(1, 6, 600) / 8.0  # few distinct values: ties at every bar
    fast = strongest_per_row(rows, cols, values, keep)
    slow = strongest_per_row_by_sort(rows, cols, values, keep)
    assert sorted(zip(*(a.tolist() for a in fast))) == sorted(zip(*(a.tolist() for a in slow)))
    lengths = np.bincount(rows)
    assert (lengths > keep).any() and (lengths <= keep).any()
    np.testing.assert_array_equal(row_thresholds(fast[0], fast[2], 40, keep, 0.01),
                                  row_thresholds(slow[0], slow[2], 40, keep, 0.01))
    shuffled = rng.permutation(fast[0].shape[0])  # entries in any order: the same bars
    np.testing.assert_array_equal(row_thresholds(fast[0][shuffled], fast[2][shuffled], 40, keep, 0.01),
                                  row_thresholds(fast[0], fast[2], 40, keep, 0.01))


@pytest.mark.parametrize("seed, rows_ascending", [(0, True), (1, True), (2, False)])
def test_symmetric_matrix_is_scipys_maximum_with_the_transpose(seed, rows_ascending):
    """The cold build's W from its one-sided rows: same as scipy's max(A, A^T), canonical CSR.
    Pairs present one way and both ways (with either direction the larger), empty rows."""
    rng = np.random.default_rng(seed)
    size = 300
    one_sided = sp.random(size, size, density=0.03, random_state=seed, format="coo")
    keep = (one_sided.row != one_sided.col) & (one_sided.row < 250) & (one_sided.col < 250)  # 50 empty rows
    rows, cols = one_sided.row[keep], one_sided.col[keep]
    mirrored = rng.random(rows.shape[0]) < 0.3  # some pairs also appear the other way round
    rows, cols = np.concatenate([rows, cols[mirrored]]), np.concatenate([cols, rows[mirrored]])
    pairs = np.unique(np.stack([rows, cols], axis=1), axis=0)  # one entry per (row, col), rows ascending
    rows, cols = pairs[:, 0].astype(np.int32), pairs[:, 1].astype(np.int32)
    shuffled = rng.permutation(rows.shape[0])
    by_row = shuffled[np.argsort(rows[shuffled], kind="stable")] if rows_ascending else shuffled
    rows, cols = rows[by_row], cols[by_row]
    values = rng.random(rows.shape[0]) + 0.01
    a = sp.csr_matrix((values, (rows, cols)), shape=(size, size))
    expected = a.maximum(a.T.tocsr()).tocsr()
    expected.sort_indices()
    got = symmetric_matrix([rows.copy(), cols.copy(), values.copy()], size)
    assert got.has_canonical_format
    np.testing.assert_array_equal(got.indptr, expected.indptr)
    np.testing.assert_array_equal(got.indices, expected.indices)
    np.testing.assert_array_equal(got.data, expected.data)
    assert (np.diff(got.indptr) == 0).any()
    # A build hands its weights over as float32 (relation_entries(stored=True)): the same matrix as
    # the float64 weights rounded so.
    rounded = values.astype(np.float32)
    from_float32 = symmetric_matrix([rows.copy(), cols.copy(), rounded.copy()], size)
    from_float64 = symmetric_matrix([rows.copy(), cols.copy(), rounded.astype(np.float64)], size)
    assert from_float32.dtype == np.float64
    for part in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(from_float32, part), getattr(from_float64, part))


@pytest.mark.parametrize("size, density", [(1, 0.5), (6, 0.9), (300, 0.05), (2_000, 0.01)])
def test_loaded_matrix_is_scipys_upper_plus_its_transpose(size, density):
    """A load rebuilds W from the stored strict upper triangle (float32) by a kernel: the same
    canonical float64 CSR as scipy's U + U.T, zeros dropped as scipy drops them, empty rows kept."""
    a = sp.random(size, size, density=density, random_state=size, format="csr", dtype=np.float32)
    kept = (np.arange(size) < size - size // 10).astype(np.float32)  # the last tenth: empty rows
    a = (sp.diags(kept) @ a @ sp.diags(kept)).tocsr()
    a.data[::7] = 0.0  # explicit zeros: scipy's sum drops them
    upper = sp.triu(a, k=1, format="csr")
    upper.sort_indices()
    expected = (upper.astype(np.float64) + upper.T.astype(np.float64)).tocsr()
    expected.sort_indices()
    got = symmetric_matrix_from_upper(upper)
    assert got.has_canonical_format and got.dtype == np.float64
    np.testing.assert_array_equal(got.indptr, expected.indptr)
    np.testing.assert_array_equal(got.indices, expected.indices)
    np.testing.assert_array_equal(got.data, expected.data)
    if size >= 10:
        assert got.nnz > 0 and (np.diff(got.indptr) == 0).any()
    # A triangle that is not strictly upper (a damaged index) is refused, not mis-sorted.
    if upper.nnz:
        damaged = upper.copy()
        damaged.indices[-1] = 0
        with pytest.raises(ValueError):
            symmetric_matrix_from_upper(damaged)


def test_stored_matrix_is_symmetric_union_of_row_tops(synthetic_repo):
    config = with_overrides(Config(), relations={"max_relations_per_fragment": 5})
    index = open_index(synthetic_repo, config)
    w = index.relation_matrix().toarray().astype(np.float64)  # stored float32, summed in float64
    np.testing.assert_allclose(w, w.T, rtol=1e-12)
    assert np.all(np.diag(w) == 0)
    graph = index.graph()
    table = index.fragment_table(graph)
    r, c, v, _ = relation_entries(np.arange(table.size), table, graph, index.live, config.graph,
                                  with_overrides(config, relations={"max_relations_per_fragment": 0}).relations)
    full = np.zeros_like(w)
    full[r, c] = v
    for i in range(table.size):
        row = full[i]
        strongest = np.sort(row[row > 0])[::-1][:5]
        kept = np.sort(w[i][w[i] > 0])[::-1]
        # every row keeps at least its own top 5 (more when others chose it), stored at float32
        assert np.all(np.isin(strongest.astype(np.float32), kept.astype(np.float32)))


@pytest.mark.parametrize("quantile", [0.25, 0.5, 0.9])
def test_rows_kept_by_the_kernel_match_a_sort_of_all_entries(synthetic_repo, quantile):
    """The kernel's per-row top `keep` and entry bars (a full row's weakest kept value, else the
    cutoff) against sorting every entry of eq. 8 and reading the bars off the sorted rows. `keep`
    is a row length that occurs, so rows longer than it, shorter and exactly as long all exist."""
    config = Config()
    index = open_index(synthetic_repo, config)
    graph = index.graph()
    table = index.fragment_table(graph)
    rows = np.arange(table.size)
    all_r, all_c, all_v, _ = relation_entries(rows, table, graph, index.live, config.graph, config.relations, keep=0)
    lengths = np.bincount(all_r, minlength=table.size)
    keep = int(np.quantile(lengths[lengths > 0], quantile, method="lower"))
    assert (lengths > keep).any() and (lengths == keep).any() and (lengths < keep).any()
    r, c, v, bars = relation_entries(rows, table, graph, index.live, config.graph, config.relations, keep=keep)
    # As a build asks for them: the same entries and bars, the weights rounded to float32 and held so.
    stored = relation_entries(rows, table, graph, index.live, config.graph, config.relations, keep=keep, stored=True)
    assert stored[2].dtype == np.float32
    for got, expected in zip(stored, (r, c, v.astype(np.float32), bars)):
        np.testing.assert_array_equal(got, expected)
    ref_r, ref_c, ref_v = strongest_per_row_by_sort(all_r, all_c, all_v, keep)
    ref_bars = row_thresholds(ref_r, ref_v, table.size, keep, config.relations.relation_cutoff)
    assert sorted(zip(r.tolist(), c.tolist(), v.tolist())) == sorted(zip(ref_r.tolist(), ref_c.tolist(),
                                                                           ref_v.tolist()))
    np.testing.assert_array_equal(bars, ref_bars)


def window_corpus(index: RepoIndex, root: Path) -> list[list[str]]:
    corpus: list[list[str]] = [[] for _ in range(index.n_fragments)]
    for record in index.files:
        if record is None:
            continue
        lines = (root / record.path).read_text(encoding="utf-8").split("\n")
        for fragment in range(record.first_fragment, record.first_fragment + record.n_fragments):
            a, b = int(index.fragment_start[fragment]), int(index.fragment_end[fragment])
            corpus[fragment] = [t for line in lines[a:b] for t in tokenize(line, index.config.bm25)]
    return corpus


QUERIES = [
    "def grow(self, amount):\n    self.value += amount",
    "total_3 = func4_2(x) + Thing1(total_3).grow(x)",
    "return self.shrink(amount // 2) self self self",  # repeated terms count repeatedly
    "no_such_token_anywhere",
    "",
]


TOKEN_TEXTS = [
    "", "\n", "a", "x1 = 1_000\r\n  fooBar(HTTPResponse, 12abc)\n\n__init__", "123abc def9 _ 9_9 0x1F\n\n",
    "caf\u00e9 = na\u00efve(x\u00b2) + \U0001d518x  # \u00e9t\u00e9\n\tgetHTTPResponseCode\n",  # non-ASCII, no digit
    "x = \u0663\u0664 + 5  # Arabic-Indic digits: \\d takes them\nnext_line\n",
    "a\udc80b = 1\n",  # a lone surrogate (surrogateescape text)
    # Identifiers in other scripts: accents, CJK, marks (Devanagari), digits of other scripts inside a
    # word, a character outside the BMP, a variation selector (plane 14) continuing a word, ideographic
    # and fullwidth punctuation separating words.
    "def größeBerechnen(naïve, ユーザー名Get):\n    return हिन्दी_x١٢ + Ａｂｃ\U00020000\U000e0100z、次\n",
    "x\u0301 \u0301x _\u00b2 \u00b2x \u2160\u2161 \u00aa\u00ba \u02b0\u02b1 \ufe4d\u203f_ \u0660\u0661a",
    "1a 1a 1a " * 500 + "\n9z9 0_0 x",  # more words than half the bytes: a digit run needs no space after it
]


@pytest.mark.parametrize("split_subwords", [True, False])
@pytest.mark.parametrize("lowercase", [True, False])
def test_line_tokens_by_kernel_are_the_regex_pass(split_subwords, lowercase):
    """The word-table kernel against the regex pass it replaced: the same distinct tokens in the
    same order, ids and line offsets, on edge cases (words in other scripts among them) and on
    every Python file of this repository; and against tokenizing each line alone. More distinct
    words than the first table holds (its rehash) are included."""
    config = BM25Config(split_subwords=split_subwords, lowercase=lowercase)
    root = Path(__file__).resolve().parents[2]
    texts = [*TOKEN_TEXTS, *(f.read_text(encoding="utf-8") for f in sorted(root.glob("repomem/**/*.py")))]
    texts.append(" ".join(f"name_{i} Word{i}x {i}" for i in range(6000)) + "\n" * 3)
    # Words of every case pattern the parts rule tells apart (word_tokens' kernel reads it byte by
    # byte): capitals before a capitalised word, capitals alone, digits and underscores between,
    # with a character past ASCII now and then (that word expanded in Python, its tokens shared).
    rng = np.random.default_rng(11)
    alphabet = np.array(list("AaBbZzQq09_"))
    texts.append("\n".join(" ".join("".join(rng.choice(alphabet, rng.integers(1, 9))) for _ in range(12))
                           for _ in range(300)))
    texts.append("HTTPResponse ABc aB A _ __init__ x1y2 ABC_ foo_foo Xabc XYZ9 a_b_C GETx getÉtat ÉtatHTTP Ab_Cd")
    for text in texts:
        fast, slow = line_tokens(text, config), _line_tokens_by_regex(text, config)
        assert fast.words == slow.words
        for got, want in ((fast.ids, slow.ids), (fast.line_offsets, slow.line_offsets)):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
        words = np.asarray(fast.words, dtype=object)
        lines = text.split("\n")
        assert fast.line_offsets.shape[0] == len(lines) + 1
        for number, line in enumerate(lines):
            ids = fast.ids[fast.line_offsets[number] : fast.line_offsets[number + 1]]
            assert words[ids].tolist() == tokenize(line, config)


def test_postings_segment_is_scipys_csc_of_the_token_counts():
    """Postings by two counting passes against scipy's COO -> CSC with duplicates summed: term
    counts per document, documents ascending per term, empty documents and unused terms."""
    rng = np.random.default_rng(7)
    n_terms = 50
    doc_terms = [rng.integers(0, n_terms - 5, rng.integers(0, 30)).astype(np.int32) for _ in range(80)]
    assert any(d.shape[0] == 0 for d in doc_terms)
    segment = build_segment(3, doc_terms, n_terms)
    lengths = [d.shape[0] for d in doc_terms]
    docs = np.repeat(np.arange(len(doc_terms)), lengths)
    expected = sp.csc_matrix((np.ones(docs.shape[0], dtype=np.int32), (docs, np.concatenate(doc_terms))),
                             shape=(len(doc_terms), n_terms))
    expected.sum_duplicates()
    assert segment.first_doc == 3 and segment.tf.has_canonical_format
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(segment.tf, name), getattr(expected, name))
    assert segment.tf.data.max() > 1


def test_joined_segments_score_the_same_bits_without_dead_postings():
    """Consecutive segments joined (vocabularies of different widths, dead documents in each):
    every live document scores the same bits as over the separate segments, dead ones 0, and the
    joined postings are the live documents' postings of the parts, ascending per term."""
    rng = np.random.default_rng(11)
    segments, first, widths = [], 0, [40, 47, 55]
    for width in widths:
        doc_terms = [rng.integers(0, width, rng.integers(0, 25)).astype(np.int32) for _ in range(30)]
        segments.append(build_segment(first, doc_terms, width))
        first += len(doc_terms)
    live = rng.random(first) < 0.6
    joined = joined_segment(segments, live)
    assert joined.first_doc == 0 and joined.tf.shape == (first, widths[-1]) and joined.tf.has_canonical_format
    dense = sum(sp.vstack([sp.csr_matrix((s.first_doc, s.tf.shape[1])), s.tf.tocsr(),
                           sp.csr_matrix((first - s.first_doc - s.tf.shape[0], s.tf.shape[1]))])
                .toarray() @ np.eye(s.tf.shape[1], widths[-1]) for s in segments)
    np.testing.assert_array_equal(joined.tf.toarray(), dense * live[:, None])
    doc_len = rng.integers(1, 40, first).astype(np.int64)
    df = document_frequencies(joined, widths[-1], live)
    stats = compute_stats(df, doc_len, live, BM25Config())
    for query in ([3, 3, 9, 41, 54], list(range(0, 55, 2)), [50]):
        apart = score_query(query, segments, stats, doc_len, live, BM25Config())
        together = score_query(query, [joined], stats, doc_len, live, BM25Config())
        assert apart.tobytes() == together.tobytes()
        assert (together[~live] == 0).all()


@pytest.mark.parametrize("alive", [(False, True), (False, True, False), (True,)])
def test_a_join_where_one_segment_holds_every_live_document_is_the_kernels_join(alive):
    """Typing into one file leaves the last version's segment all dead beside the new one: the
    join then takes the live segment's postings as they are (`joined_segment`'s short way), the
    same arrays, dtypes and shape as the joining kernel's."""
    rng = np.random.default_rng(5)
    segments, first = [], 7
    for width in [30, 44, 38][: len(alive)]:
        doc_terms = [rng.integers(0, width, rng.integers(1, 20)).astype(np.int32) for _ in range(12)]
        segments.append(build_segment(first, doc_terms, width))
        first += len(doc_terms)
    live = np.zeros(first + 3, dtype=bool)
    for segment, on in zip(segments, alive):
        live[segment.first_doc : segment.first_doc + segment.tf.shape[0]] = on
    short, kernel = joined_segment(segments, live), postings_joined(segments, live)
    assert short.first_doc == kernel.first_doc and short.tf.shape == kernel.tf.shape
    for name in ("indptr", "indices", "data"):
        ours, theirs = getattr(short.tf, name), getattr(kernel.tf, name)
        assert ours.dtype == theirs.dtype and ours.tobytes() == theirs.tobytes(), name


def test_a_small_segments_documents_give_their_terms_as_its_by_document_copy_does():
    """An edit's segment (fewer postings than terms) reads the retired documents' terms from its
    columns; the same term ids, as many times, as the by-document copy a large segment keeps."""
    rng = np.random.default_rng(3)
    doc_terms = [rng.integers(0, 900, rng.integers(0, 40)).astype(np.int32) for _ in range(30)]
    small = build_segment(11, doc_terms, 1000)
    assert small.tf.nnz <= small.tf.shape[1]
    copied = TermSegment(small.first_doc, small.tf)
    copied._by_doc.append(small.tf.tocsr())  # as `prepare_edits` makes it
    for docs in ([0, 5, 29], [], list(range(30)), [7]):
        local = np.asarray(docs, dtype=np.int64)
        assert sorted(small.doc_terms(local).tolist()) == sorted(copied.doc_terms(local).tolist())
    assert not small._by_doc  # no copy made


def test_scaled_lengths_follow_the_length_array_they_are_asked_about():
    """The statistics keep the scaled lengths of the last length array asked about: the same array
    answers from the cache, another array (an edit's) is worked out again, and scores agree with
    the product made per query (what score_query computed before the cache) bit for bit."""
    rng = np.random.default_rng(5)
    doc_terms = [rng.integers(0, 30, rng.integers(1, 20)).astype(np.int32) for _ in range(40)]
    segment = build_segment(0, doc_terms, 30)
    live = np.ones(40, dtype=bool)
    doc_len = np.asarray([t.shape[0] for t in doc_terms], dtype=np.int64)
    config = BM25Config()
    stats = compute_stats(document_frequencies(segment, 30, live), doc_len, live, config)
    first = stats.scaled_lengths(doc_len, config)
    assert stats.scaled_lengths(doc_len, config) is first
    assert first.tobytes() == (config.k1 * config.b / stats.avgdl * doc_len).tobytes()
    longer = doc_len + 3  # another array, as an edit makes
    again = stats.scaled_lengths(longer, config)
    assert again is not first and again.tobytes() == (config.k1 * config.b / stats.avgdl * longer).tobytes()
    query = [1, 4, 4, 29]
    assert score_query(query, [segment], stats, longer, live, config).tobytes() != \
        score_query(query, [segment], stats, doc_len, live, config).tobytes()


def test_statistics_worked_out_from_the_last_edits_are_a_whole_pass_bit_for_bit():
    """An edit's idf starts from the statistics before it (only the terms whose df changed are
    worked out again when the live count stays): after a run of random edits (df up and down,
    terms dropping to 0 and coming back, the vocabulary growing, the live count kept or changed),
    every idf, the floor's average and N are a whole pass's, bit for bit (ln(df + 0.5) kept across
    a changed live count, too)."""
    rng = np.random.default_rng(11)
    config = BM25Config(epsilon=0.25)
    n_docs = 60
    live = np.ones(n_docs, dtype=bool)
    doc_len = rng.integers(1, 50, n_docs).astype(np.int64)
    # Terms in most documents have a negative idf, which the floor replaces.
    df = np.concatenate([rng.integers(0, 8, 300), rng.integers(40, 60, 20)]).astype(np.int64)
    stats = compute_stats(df, doc_len, live, config)
    kept_count = 0
    for step in range(80):
        df = df.copy()
        changed = rng.choice(df.shape[0], size=rng.integers(1, 12), replace=False)
        df[changed] = np.clip(df[changed] + rng.integers(-2, 3, changed.shape[0]), 0, n_docs)
        if step % 7 == 3:
            df = np.concatenate([df, rng.integers(0, 3, 5)])  # new words joined the vocabulary
        if step % 5 == 4:
            live = live.copy()
            live[rng.integers(0, n_docs)] ^= True  # the edit changed the number of windows
        # No term is in more documents than live ones (a whole pass's ln(N - df + 0.5) would be NaN).
        df = np.minimum(df, np.count_nonzero(live))
        incremental = compute_stats(df, doc_len, live, config, before=stats)
        whole = compute_stats(df, doc_len, live, config)
        kept_count += incremental.n_live == stats.n_live
        assert incremental.idf.tobytes() == whole.idf.tobytes()
        assert (incremental.avgdl, incremental.n_live) == (whole.avgdl, whole.n_live)
        stats = incremental
    assert kept_count > 40  # most edits took the incremental path
    assert 80 - kept_count >= 10  # and enough changed the live count

def test_an_editing_session_keeps_few_segments_and_rank_bm25s_scores(synthetic_repo):
    """Forty edits of one file and a few of others: the postings stay in a handful of segments
    (one appended per edit, joined as they come), and BM25 still equals rank-bm25 over the
    windows the index holds now."""
    index = open_index(synthetic_repo, Config())
    names = ["lib/part1/mod4.py"] * 30 + ["lib/part0/mod3.py", "lib/part2/mod8.py"] * 5
    for round_number, name in enumerate(names):
        text = (synthetic_repo / name).read_text(encoding="utf-8") + f"\n\ndef edit_{round_number}(q):\n    return q\n"
        source = SourceFile(name, "python", text, content_digest(text.encode()), len(text.encode()), 1)
        apply_changes(index, [source], [])
        (synthetic_repo / name).write_text(text, encoding="utf-8")
        assert len(index.segments) - index.base_segments <= 1 + math.log2(round_number + 1)
    corpus = window_corpus(index, synthetic_repo)
    live = np.flatnonzero(index.live)
    reference = BM25Okapi([corpus[f] for f in live], k1=1.5, b=0.75, epsilon=0.25)
    for query in QUERIES:
        expected = reference.get_scores(tokenize(query + " edit_39 edit_12", index.config.bm25))
        scores = score_fragments(index, query + " edit_39 edit_12", alpha=0.0)
        np.testing.assert_allclose(scores.s_ind[live], expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("query", QUERIES)
def test_bm25_equals_rank_bm25(synthetic_repo, query):
    index = open_index(synthetic_repo, Config())
    corpus = window_corpus(index, synthetic_repo)
    reference = BM25Okapi(corpus, k1=1.5, b=0.75, epsilon=0.25)
    expected = reference.get_scores(tokenize(query, index.config.bm25))
    scores = score_fragments(index, query, alpha=0.0)
    np.testing.assert_allclose(scores.s_ind, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(scores.s_rel, scores.s_ind)  # alpha = 0 is plain BM25


def test_alpha_zero_ranks_exactly_like_bm25(synthetic_repo):
    index = open_index(synthetic_repo, Config())
    corpus = window_corpus(index, synthetic_repo)
    reference = BM25Okapi(corpus)
    query = QUERIES[1]
    expected = reference.get_scores(tokenize(query, index.config.bm25))
    top = top_fragments(index, score_fragments(index, query, alpha=0.0), k=10)
    order = sorted(range(len(expected)), key=lambda i: (-expected[i], i))[:10]
    assert [f.fragment for f in top] == order


@pytest.mark.parametrize("threads", [1, 3])
def test_environment_score_is_eq9(synthetic_repo, threads):
    # threads 3: W @ s_ind as three row blocks on three threads (a large repository's path).
    config = with_overrides(Config(), relations={"product_threads": threads, "parallel_product_entries": 1})
    index = open_index(synthetic_repo, config)
    blocks = index._base_blocks().blocks
    assert len(blocks) == threads
    # The blocks are views of W, not copies of it (scipy's constructor copies such slices).
    assert all(np.shares_memory(block.data, index.w_base.data) for block in blocks)
    w = index.relation_matrix().toarray().astype(np.float64)  # stored float32, summed in float64
    query = QUERIES[1]
    scores = score_fragments(index, query, alpha=0.5)
    s = scores.s_ind
    denominator = w.sum(axis=1)
    expected = np.divide(w @ s, denominator, out=np.zeros_like(s), where=denominator > 0)
    # Not vacuous: many fragments have a non-zero environment, and it is not their own score.
    assert np.count_nonzero(expected) >= index.n_fragments // 4
    assert not np.allclose(expected, s)
    np.testing.assert_allclose(scores.s_env, expected, rtol=1e-10)
    np.testing.assert_allclose(scores.s_rel, s + 0.5 * expected, rtol=1e-10)


def test_excluded_fragments_neither_rank_nor_feed_neighbours(synthetic_repo):
    index = open_index(synthetic_repo, Config())
    query = QUERIES[1]
    full = score_fragments(index, query, alpha=0.5)
    hidden = np.argsort(-full.s_rel)[:3]
    scores = score_fragments(index, query, alpha=0.5, excluded=hidden)
    top = top_fragments(index, scores, k=20)
    assert not {f.fragment for f in top} & set(hidden.tolist())
    w = index.relation_matrix().toarray().astype(np.float64)  # stored float32, summed in float64
    visible = np.ones(index.n_fragments, dtype=bool)
    visible[hidden] = False
    s = np.where(visible, full.s_ind, 0.0)
    denominator = w[:, visible].sum(axis=1)
    expected = np.divide(w @ s, denominator, out=np.zeros_like(s), where=denominator > 1e-300)
    np.testing.assert_allclose(scores.s_env[visible], expected[visible], rtol=1e-10)
    # Not vacuous: the hidden fragments did feed neighbours, whose environment now changed.
    neighbours = np.flatnonzero(w[:, hidden].sum(axis=1) > 0)
    neighbours = neighbours[visible[neighbours]]
    assert neighbours.size > 0
    assert np.any(np.abs(scores.s_env[neighbours] - full.s_env[neighbours]) > 1e-9)


def test_unlisted_fragments_do_not_rank_but_feed_neighbours(synthetic_repo):
    index = open_index(synthetic_repo, Config())
    query = QUERIES[1]
    full = score_fragments(index, query, alpha=0.5)
    unlisted = np.argsort(-full.s_rel)[:3]
    scores = score_fragments(index, query, alpha=0.5, unlisted=unlisted)
    assert np.all(np.isnan(scores.s_rel[unlisted]))
    assert not {f.fragment for f in top_fragments(index, scores, k=20)} & set(unlisted.tolist())
    offered = np.ones(index.n_fragments, dtype=bool)
    offered[unlisted] = False
    # Their s_ind still reaches every neighbour: s_env is the one of an unrestricted query.
    np.testing.assert_allclose(scores.s_env, full.s_env, rtol=1e-12)
    np.testing.assert_allclose(scores.s_rel[offered], full.s_rel[offered], rtol=1e-12)
    assert np.count_nonzero(full.s_env[offered]) > 0


def test_context_relation_is_eq7(synthetic_repo):
    config = with_overrides(Config(), relations={"kind": "context", "context_gamma": 0.5,
                                                 "max_relations_per_fragment": 0})
    index = open_index(synthetic_repo, config)
    w = index.relation_matrix().toarray().astype(np.float64)  # stored float32, summed in float64
    n = index.n_fragments
    expected = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            same_file = index.fragment_file[i] == index.fragment_file[j]
            if i != j and same_file and 0.5 ** abs(i - j) >= config.relations.relation_cutoff:
                expected[i, j] = 0.5 ** abs(i - j)
    np.testing.assert_allclose(w, expected)


def fragment_key(index: RepoIndex, fragment: int):
    record = index.files[int(index.fragment_file[fragment])]
    return record.path, int(index.fragment_start[fragment]), int(index.fragment_end[fragment])


def test_row_sums_kept_across_edits_are_the_whole_product(synthetic_repo):
    """An edit sums again only the rows its dead fragments sit in; after a series of edits (one
    file twice, another once, one removed) the row sums are what the whole product of W and the
    live mask gives."""
    index = open_index(synthetic_repo, Config())
    for round_number, name in enumerate(["lib/part1/mod4.py", "lib/part0/mod3.py", "lib/part1/mod4.py"]):
        text = (synthetic_repo / name).read_text(encoding="utf-8") + f"\n\ndef edit_{round_number}(q):\n    return q\n"
        source = SourceFile(name, "python", text, content_digest(text.encode()), len(text.encode()), 1)
        apply_changes(index, [source], [])
        kept = index._derived.base_rowsum
        assert kept is not None and kept[0] is index.w_base  # the kept sums were used
    apply_changes(index, [], ["lib/part2/mod8.py"])
    whole = index.relation_times(index.live.astype(np.float64))
    assert (~index.live).sum() > 0 and (whole > 0).sum() > 10
    np.testing.assert_allclose(index.rowsum, whole, rtol=1e-12, atol=0)


def test_incremental_update_matches_rebuild(tmp_path, synthetic_repo):
    config = with_overrides(Config(), **EXACT)
    index = open_index(synthetic_repo, config)
    edited = synthetic_repo / "lib/part1/mod4.py"
    text = edited.read_text(encoding="utf-8")
    edited.write_text(text.replace("def func4_3(x, y=1):", "def func4_3(x, y=2):\n    helper = Thing4(x)\n"
                                   "    helper.grow(y)\n") + "\n\ndef added_function(q):\n    return func4_0(q)\n",
                      encoding="utf-8")
    (synthetic_repo / "lib/part2/mod8.py").unlink()
    (synthetic_repo / "lib/part0/mod9.py").write_text("from lib.part1.mod4 import added_function\n\n"
                                                      "def newcomer():\n    return added_function(3)\n")
    service = RepoService.open(synthetic_repo, config)
    service.index = index
    report = service.ensure_index()
    assert report.action == "updated" and report.changed == 2 and report.removed == 1
    rebuilt = open_index_full(synthetic_repo, config)

    query = QUERIES[1] + "\nadded_function newcomer"
    fast = score_fragments(index, query, alpha=0.0)
    slow = score_fragments(rebuilt, query, alpha=0.0)
    fast_by_key = {fragment_key(index, f): fast.s_ind[f] for f in np.flatnonzero(index.live)}
    slow_by_key = {fragment_key(rebuilt, f): slow.s_ind[f] for f in range(rebuilt.n_fragments)}
    assert fast_by_key.keys() == slow_by_key.keys()
    for key, value in slow_by_key.items():
        assert fast_by_key[key] == pytest.approx(value, rel=1e-12, abs=1e-12)

    # W rows of the changed files equal the rebuilt ones.
    w_fast = index.relation_matrix()
    w_slow = rebuilt.relation_matrix()
    changed = {"lib/part1/mod4.py", "lib/part0/mod9.py"}
    live_fast = {fragment_key(index, f): f for f in np.flatnonzero(index.live)}
    live_slow = {fragment_key(rebuilt, f): f for f in range(rebuilt.n_fragments)}
    checked = 0
    for key, row_fast in live_fast.items():
        if key[0] not in changed:
            continue
        row_slow = live_slow[key]
        for other, col_fast in live_fast.items():
            col_slow = live_slow[other]
            assert w_fast[row_fast, col_fast] == pytest.approx(w_slow[row_slow, col_slow], rel=1e-9, abs=1e-15)
            assert w_fast[col_fast, row_fast] == pytest.approx(w_slow[col_slow, row_slow], rel=1e-9, abs=1e-15)
            checked += 1
    assert checked > 100


def test_removing_and_restoring_an_imported_module_restores_its_callers_edges(package_repo):
    config = with_overrides(Config(), **EXACT)
    service = RepoService.open(package_repo, config)
    service.ensure_index()
    helpers = package_repo / "pkg/helpers.py"
    text = helpers.read_text(encoding="utf-8")
    helpers.unlink()
    service.ensure_index()
    helpers.write_text(text, encoding="utf-8")
    service.ensure_index()
    rebuilt = open_index_full(package_repo, config)

    def edges(index: RepoIndex):
        out = set()
        for row in index.all_calls().tolist():
            source, target = index.files[row[0]].path, index.files[row[2]].path
            src_line = int(index.syntax[row[0]].start_line[row[1]])
            dst_line = int(index.syntax[row[2]].start_line[row[3]])
            out.add((source, src_line, target, dst_line))
        return out

    assert edges(service.index) == edges(rebuilt)


def open_index_full(root: Path, config: Config) -> RepoIndex:
    service = RepoService.open(root, config)
    assert isinstance(service, RepoService)
    service.ensure_index(full=True)
    assert service.index is not None
    return service.index


NESTED_CALLS = '''
import os


def outer(values):
    total = sum(len(str(abs(v))) for v in values) + max(map(int, values), default=0)
    if check(os.path.join(base(), name(first(values)))):
        return {"k": wrap(dict(a=inner(x=deep(1))))}[key(values)]
    return [f(g(h(i(j(k(z)))))) for z in values if ok(z)]


class Box:
    def method(self):
        return self.helper(lambda q: transform(q, other(q)))
'''


@pytest.mark.parametrize("granularity", ["statement", "named"])
def test_call_sites_match_a_parent_by_parent_walk(granularity):
    """Every call's kept node and depth below it (which sets the call edge's weight) equal a plain
    walk up the tree, on ordinary code and on a call nested 400 deep."""
    from repomem.languages.registry import language_named
    from repomem.languages.syntax import walk_tree
    from repomem.languages.treesitter import parse
    from tests.parity.reference import reference_call_owners

    language = language_named("python")
    for text in (NESTED_CALLS, "y = " + "f(" * 400 + "1" + ")" * 400 + "\n"):
        root = parse("python", text.encode()).root_node
        kept = walk_tree(root, language, granularity, text.count("\n"), len(text))
        _, _, calls = kept.symbols.finish(root, kept.kept_index, kept.class_scope)
        assert len(calls) >= (14 if text is NESTED_CALLS else 400)
        assert [(c.node, c.hops) for c in calls] == reference_call_owners(root, kept.kept_index)
        if granularity == "statement":
            assert max(c.hops for c in calls) >= 6  # deep calls are really below their statement


# Trees tree-sitter recovered: ERROR nodes, zero-width MISSING nodes sharing bytes with their
# neighbours, a call whose callee is missing, decorators, calls in default values and in f-strings.
BROKEN_CALLS = [
    "x = f(a.b(c), g(\n",
    "def h(:\n    return k(m(\n\nclass C(Base(\n    y = z()\n",
    "@deco(arg())\ndef f(p=default(1), *q):\n    return f'{fmt(p)}' + (lambda: inner(q))()\n",
    "a.b(c)(d).e(f)\nif (t := g()): h(\nelse: i()\n",
    "print(obj.method(1, 2)[0].attr(x=y()))\n)\n]\n" + "w(" * 30 + "\n",
    "for i in range(n()):\n    try: go(i)\n    except E(): stop()\n    finally: end(\n",
]


@pytest.mark.parametrize("granularity", ["statement", "named"])
def test_call_sites_match_the_walk_up_on_real_and_broken_code(granularity):
    """The same on every Python file of this repository (thousands of calls) and on trees that
    tree-sitter recovered from errors."""
    from repomem.languages.registry import language_named
    from repomem.languages.syntax import walk_tree
    from repomem.languages.treesitter import parse
    from tests.parity.reference import reference_call_owners

    language = language_named("python")
    sources = [path.read_bytes() for path in sorted(REPOSITORY.glob("repomem/**/*.py"))] + \
        [text.encode() for text in BROKEN_CALLS]
    calls_seen = 0
    for source in sources:
        root = parse("python", source).root_node
        kept = walk_tree(root, language, granularity, source.count(b"\n"), len(source))
        _, _, calls = kept.symbols.finish(root, kept.kept_index, kept.class_scope)
        assert [(c.node, c.hops) for c in calls] == reference_call_owners(root, kept.kept_index)
        calls_seen += len(calls)
    assert calls_seen > 5000


@pytest.mark.parametrize("strong", [1, 8, 256])
def test_bounded_top_k_is_the_whole_products_top_k(synthetic_repo, monkeypatch, strong):
    """The retrieval path reads a row of W only where a bound on s_rel reaches the K-th best: it
    must give what the whole product gives, the same ids in the same order and the same float64
    scores, for cursors' masks, every K, anchors, and after edits (W's delta part in use)."""
    service = RepoService.open(synthetic_repo, Config())
    assert isinstance(service, RepoService)
    service.ensure_index()
    index = service.index
    assert index is not None
    monkeypatch.setattr(scoring._RelationRows, "STRONG", strong)
    monkeypatch.setattr(scoring._RelationRows, "cheaper_whole", lambda self, n_rows: False)
    rows_read: list[int] = []

    def counted(indptr, cols, values, rows, x):
        rows_read.append(rows.size)
        return scoring_rows_times(indptr, cols, values, rows, x)

    scoring_rows_times = scoring.rows_times
    monkeypatch.setattr(scoring, "rows_times", counted)
    for name in ["lib/part1/mod4.py", "lib/part0/mod3.py"]:  # W gains a delta part
        text = (synthetic_repo / name).read_text(encoding="utf-8") + "\n\ndef late(q):\n    return func4_0(q)\n"
        source = SourceFile(name, "python", text, content_digest(text.encode()), len(text.encode()), 1)
        apply_changes(index, [source], [])
    assert index.w_delta.nnz > 0
    compared = 0
    for path in ["lib/part1/mod4.py", "lib/part0/mod3.py", "lib/part2/mod8.py"]:
        text = (synthetic_repo / path).read_text(encoding="utf-8")
        for line in range(1, text.count("\n"), 5):
            cursor = locate(synthetic_repo, path, text, line, None)
            excluded, unlisted = service.view().cursor_masks(cursor)
            query = "\n".join(text.splitlines()[max(0, line - 10):line])
            for k, anchored, alpha in [(1, 0, 0.5), (5, 1, 0.5), (10, 1, 0.5), (10, 3, 2.0), (40, 0, 0.5),
                                       (5, -1, 1e-6), (5, 1, -0.5)]:
                scores = score_fragments(index, query, alpha, excluded, None, unlisted)
                whole = top_fragments(index, scores, k, anchored)
                assert best_fragments(index, query, alpha, k, anchored, excluded, None, unlisted) == whole
                compared += 1
    assert compared > 100
    # Not vacuous: with the strong rows in the bound, most queries read few rows of W exactly.
    if strong == 256:
        assert np.median(rows_read) < index.n_fragments / 4, (np.median(rows_read), index.n_fragments)


def test_bounded_top_k_with_bm25_below_zero(tmp_path):
    """BM25 goes below 0 where the average idf does (two fragments sharing most words): the
    bounded top K is still the whole product's (a bound that added a negative weak part lost it)."""
    write_repo(tmp_path / "two", {"a.py": "from b import f\n\ndef g(x):\n    return f(x)\n",
                                  "b.py": "from a import g\n\ndef f(x):\n    return g(x)\n"})
    index = open_index(tmp_path / "two", Config())
    scores = score_fragments(index, "return f(x)", 0.5)
    assert (scores.s_ind < 0).all() and (scores.s_env != 0).any()
    for k, anchored in [(1, 0), (2, 0), (5, 1)]:
        assert best_fragments(index, "return f(x)", 0.5, k, anchored) == top_fragments(index, scores, k, anchored)


def test_anchored_ranking_keeps_bm25s_best_first(synthetic_repo):
    """prompt.anchor_matches: the N best by s_ind come first (in s_ind order), then the rest by
    s_rel, checked against a plain sort of every offered fragment."""
    index = open_index(synthetic_repo, Config())
    for query in QUERIES:
        scores = score_fragments(index, query, alpha=2.0)
        offered = [i for i in range(index.n_fragments) if not np.isnan(scores.s_rel[i])]
        by_ind = sorted(offered, key=lambda i: (-scores.s_ind[i], i))
        by_rel = sorted(offered, key=lambda i: (-scores.s_rel[i], i))
        assert [f.fragment for f in top_fragments(index, scores, k=10, anchored=0)] == by_rel[:10]
        for anchored in (1, 3):
            anchors = by_ind[:anchored]
            expected = anchors + [i for i in by_rel if i not in anchors][: 10 - anchored]
            assert [f.fragment for f in top_fragments(index, scores, k=10, anchored=anchored)] == expected
        assert [f.fragment for f in top_fragments(index, scores, k=2, anchored=5)] == by_ind[:2]
    # Not vacuous: at alpha 2 the environment moves some query's BM25 best off first place.
    moved = 0
    for query in QUERIES:
        scores = score_fragments(index, query, alpha=2.0)
        paper, anchored = top_fragments(index, scores, k=1), top_fragments(index, scores, k=1, anchored=1)
        moved += paper[0].fragment != anchored[0].fragment
    assert moved > 0


def test_fragrel_as_published_ignores_the_anchor_and_the_similarity_order(synthetic_repo):
    config = with_overrides(Config(), prompt={"anchor_matches": 1})
    service = RepoService.open(synthetic_repo, config)
    assert isinstance(service, RepoService) and not hasattr(service.ensure_index(), "kind")
    index = service.index
    moved = [q for q in QUERIES if top_fragments(index, score_fragments(index, q, alpha=2.0), k=1)[0].fragment
             != top_fragments(index, score_fragments(index, q, alpha=2.0), k=1, anchored=1)[0].fragment]
    assert moved  # a query whose BM25 best match eq. 10 moves off first place
    query = moved[0]
    paper = [f.fragment for f in service.view().retrieve(query, 10, 2.0, anchored=0)]
    assert paper == [f.fragment for f in top_fragments(index, score_fragments(index, query, alpha=2.0), k=10)]
    assert [f.fragment for f in service.view().retrieve(query, 10, 2.0)][0] != paper[0]  # the config's anchor

    class Words:  # token counts only; request() never generates
        name, template, context_tokens = "words", None, 4096

        def count(self, text):
            return len(text.split())

    engine = CompletionEngine(service, Words(), config)
    path = max(sorted(synthetic_repo.rglob("*.py")), key=lambda p: p.stat().st_size)
    text = path.read_text()
    cursor = locate(synthetic_repo, str(path.relative_to(synthetic_repo)), text, 2, None)
    assert engine.request(cursor, "fragrel", order="similarity").order == "similarity"
    assert engine.request(cursor, "fragrel-paper", order="similarity").order == "score"
    assert engine.request(cursor, "fragrel-paper", order="stable").order == "stable"


def _top_k_reference(values: np.ndarray, k: int) -> list[int]:
    return sorted(range(len(values)), key=lambda i: (-values[i], i))[:k]


@pytest.mark.parametrize("seed", range(6))
def test_top_k_matches_a_full_sort_ties_included(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    # Few distinct values: ties at the k-th place are the rule, not the exception.
    values = rng.integers(0, 7, size=n).astype(np.float64) if seed % 2 else rng.random(n)
    for k in (1, 3, 10, n, n + 5):
        assert top_k_positions(values, k).tolist() == _top_k_reference(values, k), (n, k)
    ascending = np.sort(values)  # every value replaces a kept one: the slow case stays exact
    assert top_k_positions(ascending, 10).tolist() == _top_k_reference(ascending, 10)
    offered = rng.random(n) < 0.6
    offered_ids = np.flatnonzero(offered)
    for k in (0, 1, 3, 10, n + 5):
        expected = offered_ids[_top_k_reference(values[offered_ids], k)].tolist()
        assert top_k_offered(values, offered, k).tolist() == expected, (n, k)


@pytest.mark.parametrize("seed", range(6))
def test_largest_positions_is_the_top_k_as_a_set_ties_included(seed):
    """The heap the bound's strong entries come from keeps the same set as the full sort."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 600))
    values = rng.integers(0, 7, size=n).astype(np.float64) if seed % 2 else rng.random(n)
    for values_in in (values, np.sort(values), np.sort(values)[::-1].copy()):
        for k in (1, 2, 10, 256, n, n + 5):
            kept = sorted(largest_positions(values_in, k).tolist())
            assert kept == sorted(_top_k_reference(values_in, k)), (n, k)


@pytest.mark.parametrize("granularity", ["statement", "named"])
def test_window_cover_matches_every_node_against_every_window(granularity):
    """The kernel visits only the nodes starting inside a window; the reference tries them all.
    Real files of this repository (classes, decorators, blank runs, long functions), then the same
    nodes in a shuffled order, where the kernel cannot rely on walk order and scans them all."""
    from repomem.config import FragmentConfig
    from repomem.index.fragments import file_fragments, window_bounds
    from repomem.index.kernels.windows import cover_windows
    from repomem.languages.parsed import FileSyntax
    from repomem.languages.syntax import extract_syntax

    root = Path(__file__).resolve().parents[2] / "repomem"
    paths = sorted(root.rglob("*.py"))[:: 3 if granularity == "named" else 1]
    rng = np.random.default_rng(0)
    for path in paths:
        syntax = extract_syntax(path.name, "python", path.read_text(), granularity)
        fragments = file_fragments(syntax, FragmentConfig())
        found = zip(fragments.cover_window.tolist(), fragments.cover_node.tolist(), fragments.cover_weight.tolist())
        assert list(found) == reference_cover(syntax, fragments.starts, fragments.ends), path
        if syntax.n_nodes < 3:
            continue
        order = np.concatenate([[0], 1 + rng.permutation(syntax.n_nodes - 1)])  # the root stays first
        new_id = np.empty_like(order)
        new_id[order] = np.arange(order.shape[0])
        parent = np.where(syntax.parent[order] >= 0, new_id[np.maximum(syntax.parent[order], 0)], -1).astype(np.int32)
        shuffled = FileSyntax(path=syntax.path, language=syntax.language, parent=parent,
                              start_line=syntax.start_line[order], end_line=syntax.end_line[order],
                              length=syntax.length[order], line_chars=syntax.line_chars)
        starts, ends = window_bounds(shuffled.line_chars, FragmentConfig())
        window, node, weight = cover_windows(shuffled.parent, shuffled.start_line, shuffled.end_line,
                                             shuffled.length.astype(np.int64), shuffled.line_chars.astype(np.int64),
                                             starts, ends)
        assert list(zip(window.tolist(), node.tolist(), weight.tolist())) == reference_cover(shuffled, starts, ends)


def test_secret_masking_equals_each_pattern_run_over_the_whole_text():
    """`mask_secrets` skips what cannot match (files without a key's literal, lines without "://",
    name runs without a secret word's literal): the result must equal running every pattern over
    every position, on this repository's source and on text planted with each shape."""
    from repomem.index.secrets import mask_secrets
    from tests.parity.reference import reference_mask_secrets

    root = Path(__file__).resolve().parents[2]
    texts = [path.read_text(encoding="utf-8") for path in sorted(root.glob("[rt]*/**/*.py"))]
    keys = ["AKIA" + "Q3EXAMPLE7Z2KXMP", "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
            "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "sk-proj-" + "Zx81QpLm29VbNc74TyRu0Ws5",
            "xoxb-" + "1234-abcd-5678",
            "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"]
    planted = [
        "postgres://admin:9fK2pX7qLmN4vB8wR1tY6zH3@db:5432/app",  # the first line
        "x = 1\nurl='redis://u:pw-Zq8kL2vN9@h' ; mysql://root:[REDACTED]@h\nhttps://example.com/a:b@c",
        *(f"x = 1\n{name} = '{key}'\n" for name, key in zip(["AWS_KEY", "token", "k", "api_key", "s", "jwt"], keys)),
        "_postgres://u:9fK2pX7qLm@h\nok",  # no word boundary before the scheme: not a URL password
        "no newline at the end: ftp://a:b1c2d3e4@host",
        "monkey = 'aB3dE5fG7hJ9kL1mQ' ; keys.api_key='aB3dE5fG7hJ9kL1mQ'; passport='aB3dE5fG7hJ9kL1m'",
        "İstanbul PASSWORD = 'Zq8#kL2$vN9@xR4!' and api_key = 'aB3dE5fG7hJ9kL1mQ'",  # lower() grows the text
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow" + "A" * 60 + "\n-----END RSA PRIVATE KEY-----\nsk-" + "a" * 19,
        "task-" + "b" * 30 + " ask-" + "c" * 30 + " sk-" + "d" * 30 + "\nAKIA" + "2" * 15 + " XAKIA" + "2" * 16,
        # unquoted, concatenated, credential schemes, look-up defaults, a value holding a secret name
        "export DB_PASS=9fK2pX7qLmN4vB8w\npassword: aB3dE5fG7hJ9kL1m\ntoken = process.env.TOKEN || 'Zq8kL2vN9xR4aB3d'",
        'API_KEY = ("9fK2pX7q"\n    "LmN4vB8w") ; h = {"Authorization": "Bearer aB3dE5fG7hJ9kL1mQ"}',
        'key = os.getenv("SECRET", "Zq8kL2vN9xR4aB3d") ; secret = "password=aB3dE5fG7hJ9kL1m"',
        "hook = 'https://hooks.slack.com/services/T0AB12CD3/B0EF45GH6/" + "aB3dE5fG7hJ9kL1mQ2w3E4r5" + "'",
        'dsn := "app:9fK2pX7qLmN4vB8w@tcp(db:3306)/shop"\n'
        "curl -u deploy:aB3dE5fG7hJ9kL1m https://ci --password Zq8kL2vN9xR4",
        # token runs: providers, an unlisted prefix, an escaped one, an unnamed argument, wordy runs kept
        "glrt-" + "aB3dE5fG7hJ9kL1mQ2w3 x=SG." + "aB3dE5fG7hJ9kL1mQ2w3E4."
        + "aB3dE5fG7hJ9kL1mQ2w3E4r5T6y7U8i9O0pAsDfGhJ" + "\nacme_live_" + "aB3dE5fG7hJ9kL1mQ2w3E4r5"
        + ' "x\\nAKIA' + "ABCDEFGHIJKLMNOP" + '" f(a, "Zq8kL2vN9xR4aB3dE5fG")'
        + " CLOJARS_" + "z83o3x9ewq666uiy80tx1rwagemff0wn" + " ImproperlyConfiguredErrorHandler",
        # a key block without its END line, a PuTTY key's private lines, URL users, a SAS, mysql -p
        "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBk" + "aB3dE5fG7hJ9kL1mQ2w3E4r5" + "\n\nx = 1\n"
        "Private-Lines: 2\n" + "AAAAIQ" + "aB3dE5fG7hJ9kL1mQ2w3E4r5" + "\n"
        + "AAAAIQ" + "Zq8kL2vN9xR4aB3dE5fG7hJ9" + "\n"
        "u = 'https://" + "3f9a0c7e12b4" * 3 + "d1c2@github.com/a' ; v = 'HTTPS://u:" + "Zq8kL2vN9x" + "@h'\n"
        "b = 'https://a.blob.core.windows.net/c?sv=2022-11-02&sig=" + "aB3dE5fG7hJ9kL1mQ2w3E4r5%3D" + "'\n"
        "mysqldump -uroot -p" + "Zq8kL2vN9xR4" + " shop > dump.sql",
        # values told by their place (a multiple assignment, a login call), other string forms
        "user, password = 'app', '" + "Zq8kL2vN9xR4aB3d" + "'\n  a, b = 1, 2\nftp.login('app', '" + "aB3dE5fG7hJ9kL1m"
        + "') ; c = connect(h, 'root', '" + "Zq8kL2vN9xR4" + "')\nlocal api_key = [==[" + "aB3dE5fG7hJ9kL1m" + "]==]"
        + "\nPassword = @'" + "Zq8kL2vN9xR4aB3d" + "',",
        # a YAML block's lines, values being typed, SQL's, sshpass's and PowerShell's passwords
        "webhookSecret: |\n  " + "Zq8kL2vN9xR4aB3d" + "\n  " + "aB3dE5fG7hJ9kL1m" + "\n\n  x\nnext: 1\n"
        'password = "Zq8\nDB_TOKEN=\'a\nkey = "Zq8\nmysql -u root -p\'' + "Zq8kL2vN9xR4" + "' shop\n"
        "SET PASSWORD FOR 'app'@'%' = '" + "Zq8kL2vN9xR4aB3d" + "'; sshpass -p " + "aB3dE5fG7hJ9kL1m" + " ssh h\n"
        "$p = ConvertTo-SecureString '" + "Zq8kL2vN9xR4aB3d" + "' -AsPlainText -Force ; curl -uci:"
        + "aB3dE5fG7hJ9kL1m",
        # a Kubernetes Secret after another document, in a Helm template; JSON Web Keys, private and public
        "kind: ConfigMap\ndata:\n  a: " + "Zq8kL2vN9xR4aB3d" + "\n---\n{{- if .Values.on }}\nkind: Secret\ndata:\n"
        "  b: " + "aB3dE5fG7hJ9kL1m" + "\n  c: {{ .Values.c | b64enc }}\n  d: |\n    x\n    y\nmetadata:\n  name: s\n",
        'private = {"kty": "EC", "x": "MFMX_u1nQLm9dCXcsD3gS_Ck8h4K3D6", "d": "' + "aB3dE5fG7hJ9kL1m" + '"}\n'
        '{"kty": "RSA", "n": "MFMX_u1nQLm9dCXcsD3gS_Ck8h4K3D6-9oIrVdRtROWoM7O4Tg8n-fepELa2aDSA_JG6764Xm_dZNA9s9sH5gQ",'
        ' "e": "AQAB"} ; jwk.JWK(kty="oct", k="' + "Zq8kL2vN9xR4" + '")\n{"kty": "EC", "d": "a", "x": "'
        + "MFMX_u1nQLm9dCXcsD3gS_Ck8h4K3D6" + '"} {"kty": "EC", "x": "' + "MFMX_u1nQLm9dCXcsD3gS_Ck8h4K3D6" + '"}',
        # a registry login's -p, a literal piped into ConvertTo-SecureString, a JWK in YAML, a Secret as JSON
        "docker login -u ci -p " + "Zq8kL2vN9xR4aB3d" + " r.io && docker run -p 8080:80 x\nhelm registry login r -p '"
        + "aB3dE5fG7hJ9kL1m" + "'\n$s = '" + "Zq8kL2vN9xR4aB3d" + "' | ConvertTo-SecureString -AsPlainText\n"
        "ssh -p 22 h ; podman login -p \"Zq8\nkeys:\n  - kty: RSA\n    n: MFMX_u1nQLm9dCXcsD3gS_Ck8h4K3D6\n    d: "
        + "aB3dE5fG7hJ9kL1m" + "\n  - kty: EC\n    x: MFMX_u1nQLm9dCXcsD3gS_Ck8h4K3D6\nother: 1\n",
        '{"apiVersion": "v1", "data": {"a": "' + "Zq8kL2vN9xR4aB3d" + '", "b": "{{ .Values.b }}"}, "kind": "Secret",'
        ' "metadata": {"name": "s", "labels": {"x": "y"}}}\n[{"kind": "ConfigMap", "data": {"c": "'
        + "aB3dE5fG7hJ9kL1m" + '"}}, {\'kind\': \'Secret\', \'stringData\': {\'d\': \'x\'}}]',
    ]
    masked_any = 0
    for text in texts + planted:
        expected = reference_mask_secrets(text)
        assert mask_secrets(text) == expected, text[:200]
        masked_any += expected[1] > 0
    assert masked_any >= len(planted) - 1  # the planted texts do hold secrets (all but the near misses)


def test_token_runs_found_by_byte_search_equal_a_regex_over_the_runs():
    """`candidate_runs` finds the long runs by substring search over a byte translation and counts
    their changes of kind by byte pairs; the runs it keeps must equal a regex over the runs, each
    read character by character: on this repository's source and on random text mixing token
    characters, separators, other characters and AWS heads (overlapping, at a run's edges, cut by
    its end)."""
    import random

    from repomem.index.secret_tokens import MIN_RUN, candidate_runs
    from tests.parity.reference import reference_candidate_runs

    texts = [path.read_text(encoding="utf-8") for path in sorted(REPOSITORY.glob("[rt]*/**/*.py"))]
    rng = random.Random(7)
    pieces = ["A", "AKIA", "AKIAKIA", "A3T", "ASIA", "ABIA", "ACCA", "Q", "z", "7", "_", "-", ".", ":", "~",
              " ", "\n", "é", "€", "'", "x" * MIN_RUN, "AB" * 9, "a1" * 10, "Zq8kL2vN9xR4aB3dE5fG"]
    for _ in range(400):
        texts.append("".join(rng.choice(pieces) for _ in range(rng.randint(0, 60))))
    texts += ["", "A" * (MIN_RUN - 1), "A" * MIN_RUN, "AKIA" + "B" * (MIN_RUN - 4), "B" * (MIN_RUN - 3) + "A3T",
              "B" * (MIN_RUN - 2) + "A3T", "é" + "aB3dE5fG7hJ9kL1mQ2w3" + "é"]
    kept = 0
    for text in texts:
        expected = reference_candidate_runs(text)
        assert candidate_runs(text) == expected, text[:200]
        kept += len(expected)
    assert kept > 1000


@pytest.mark.parametrize("granularity", ["statement", "named"])
def test_the_syntax_walk_keeps_what_visiting_every_child_keeps(granularity: str):
    """`walk_tree` leaves unpushed the children that could only be popped to no effect; the kept
    nodes, their class scopes and the symbols must equal a walk that visits each of them, on this
    repository's source, broken code (ERROR nodes) and a language with statements in expressions."""
    import sys

    from repomem.languages.registry import language_named, language_of
    from repomem.languages.syntax import walk_tree
    from repomem.languages.treesitter import parse
    from tests.parity.reference import reference_kept_tree

    root = Path(__file__).resolve().parents[2]
    texts = [("python", path.read_text(encoding="utf-8")) for path in sorted(root.glob("[rt]*/**/*.py"))]
    texts = texts[:: 4 if granularity == "named" else 1]
    texts += [
        ("python", "def f(:\n    return g(\nclass\nif x:\n    import os\n    def h(): pass\nelse:\n    y = [\n"),
        # An ERROR node under a statement, holding a block (found by mutating this repository's files).
        ("python", "    def assigned(match: re.Match) -> str:\n        :onlocal found\n"
                   "        value = match[\"secret\"]\n"
                   "        if not _looks_random(value, min_length, min_entropy):\n            return match.group(0)"),
        ("python", "class A(B):\n    @dec\n    def m(self):\n        try:\n            pass\n        except E as e:\n"
                   "            raise\n        finally:\n            return lambda: (yield)\nmatch p:\n    case 1:\n"
                   "        from . import x as y\n"),
        ("javascript", "function f(x) {\n  const g = () => { if (x) { return 1; } };\n  return [1].map(function (y) {"
                       "\n    while (y) { y--; }\n    return y;\n  });\n}\n"),
        # Statements and watched nodes deep inside expressions: closures in arguments, anonymous
        # classes, nested assignments, block expressions, and broken code.
        ("javascript", "exports.a = exports.b = function () { return 1; };\n"
                       "module.exports = { m() { if (x) { y(); } }, k: class extends B { f = () => { g(); } } };\n"
                       "const t = `${(() => { for (const i of a) { h(i); } })()}`;\nfoo(bar(function ( {\n"),
        ("typescript", "export const f = <T,>(x: T): T => { try { return g(x); } catch (e) { throw e; } };\n"
                       "enum E { A, B }\ninterface I { m(): void }\nnamespace N { export function h() { f(1); } }\n"),
        ("go", "package p\n\nfunc f() {\n\tgo func() { defer func() { recover() }(); g() }()\n"
               "\tx := map[string]func(){\"a\": func() { if true { h() } }}\n\t_ = x\n}\nfunc (s *S) m( {\n"),
        ("rust", "fn f() -> i32 {\n    let x = { let y = 1; y + 1 };\n"
                 "    let c = |a| { if a { g() } else { match a { _ => 0 } } };\n"
                 "    v.iter().map(|i| loop { break i; }).sum::<i32>() + unsafe { h() }\n}\n"
                 "impl T for S { fn m(&self) { macro_rules! m { () => {} } } }\nfn broken( {\n"),
        ("java", "class A {\n  void m() {\n    Runnable r = () -> { if (x) { g(); } };\n"
                 "    new Thread(new Runnable() { public void run() { h(); } }).start();\n"
                 "    int[] a = switch (k) { case 1 -> { yield 2; } default -> 3; };\n  }\n  void broken( {\n}\n"),
    ]
    if granularity == "statement":  # the hand-checked repositories of the language tests, whole
        from tests.unit import test_lang_go, test_lang_java, test_lang_javascript, test_lang_rust

        for module in (test_lang_go, test_lang_java, test_lang_javascript, test_lang_rust):
            for path, text in module.FILES.items():
                name = language_of(path)
                if name is not None and language_named(name).statements_in_expressions:
                    texts.append((name, text))
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 20_000))  # the reference recurses once per tree level
    try:
        for language_name, text in texts:
            language = language_named(language_name)
            source = text.encode("utf-8")
            tree_root = parse(language.name, source).root_node
            last_line = max(text.count("\n") - (1 if text.endswith("\n") else 0), 0)
            kept = walk_tree(tree_root, language, granularity, last_line, len(source))
            ours = (kept.parents, kept.starts, kept.ends, kept.lengths, kept.class_scope,
                    tuple(kept.symbols.definitions) if kept.symbols else (),
                    tuple(kept.symbols.imports) if kept.symbols else ())
            assert ours == reference_kept_tree(tree_root, language, granularity, last_line, len(source)), text[:80]
    finally:
        sys.setrecursionlimit(old_limit)
