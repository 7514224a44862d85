"""The fragment relation matrix W: graph relation (eq. 8) and context-structure relation (eq. 7).

W is symmetric, has an empty diagonal (eq. 9 sums over j != i) and keeps only w_ij at or above
`relation_cutoff`, so a query costs one sparse matrix-vector product.
"""

from __future__ import annotations

import math
import queue
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.sparse as sp

from repomem.config import GraphConfig, RelationConfig
from repomem.index.fragments import FragmentTable
from repomem.index.graph import CodeGraph
from repomem.index.kernels import (
    COST_TOLERANCE,
    exit_costs,
    most_common_cost,
    relation_rows,
    relation_scratch,
    tree_anchors,
)

ProgressCallback = Callable[[int], None]


def cost_limit(strength_cutoff: float) -> float:
    return -math.log(strength_cutoff) + COST_TOLERANCE


def node_fragment_index(fragments: FragmentTable, n_nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Transpose of the fragment -> node incidence: (indptr, fragment ids, weights) per node."""
    frag_of_slot = np.repeat(np.arange(fragments.size, dtype=np.int64), np.diff(fragments.indptr))
    order = np.argsort(fragments.nodes, kind="stable")
    indptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(fragments.nodes, minlength=n_nodes), out=indptr[1:])
    return indptr, frag_of_slot[order], fragments.weights[order]


def graph_relation_entries(
    rows: np.ndarray,
    fragments: FragmentTable,
    graph: CodeGraph,
    live: np.ndarray,
    graph_config: GraphConfig,
    relation_config: RelationConfig,
    progress: ProgressCallback | None = None,
    keep: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Eq. 8 entries (row, col, w) for fragment `rows` against every live fragment, pairs of one
    file scaled by `relation_config.same_file_weight`.

    At most `keep` strongest entries per row when keep > 0. Also returns each row's entry bar
    (shape (len(rows),)): its weakest kept value if truncated, else the relation cutoff.
    """
    indptr, indices, costs = graph.csr()
    queued_cost = most_common_cost(costs)
    node_indptr, node_frags, node_weights = node_fragment_index(fragments, graph.n_nodes)
    limit = cost_limit(graph_config.strength_cutoff)
    if relation_config.same_file_weight == 0.0:
        # Only other files count: searches start at the nodes a file is left through (kernels).
        # Anchors and exit costs are needed for the rows' own files only (an edit: one file's nodes).
        portal = graph.portals()
        step = -math.log(graph_config.syntax_weight)
        files = fragments.file[rows] if rows.shape[0] else np.zeros(1, dtype=np.int64)
        first, end = int(graph.node_offset[files.min()]), int(graph.node_offset[files.max() + 1])
        anchor, anchor_cost = tree_anchors(graph.syntax_parent, portal, step, first, end)
        exit_cost = exit_costs(graph.syntax_parent, portal, step, first, end)
    else:
        anchor, anchor_cost = np.arange(graph.n_nodes, dtype=np.int64), np.zeros(graph.n_nodes)
        exit_cost = np.zeros(graph.n_nodes)
    # An edited file's rows stay on one thread: its windows share most search starts, which a
    # second chunk would search again (two threads measured no faster on Django's models.py).
    workers = max(1, relation_config.workers) if rows.shape[0] > 512 else 1
    # Big builds: chunks small enough for a live progress bar; updates: one chunk.
    chunk = min(256, max(8, -(-rows.shape[0] // workers)))
    chunks = [rows[i : i + chunk] for i in range(0, rows.shape[0], chunk)]
    heap_capacity = max(1024, 2 * indices.shape[0] + 1)
    frag_file = fragments.file.astype(np.int64)
    # One scratch set per thread, handed from chunk to chunk.
    scratch: queue.SimpleQueue = queue.SimpleQueue()
    for _ in range(min(workers, len(chunks))):
        scratch.put(relation_scratch(graph.n_nodes, fragments.size, heap_capacity))

    def run(part: np.ndarray):
        buffers = scratch.get()
        try:
            result = relation_rows(
                part.astype(np.int64), fragments.indptr, fragments.nodes, fragments.weights, fragments.totals,
                node_indptr, node_frags, node_weights, live,
                indptr, indices, costs, queued_cost, limit, graph_config.max_reach,
                relation_config.relation_cutoff, keep,
                frag_file, relation_config.same_file_weight, graph.node_offset, anchor, anchor_cost, exit_cost,
                *buffers,
            )
        finally:
            scratch.put(buffers)
        if not result[4]:
            raise RuntimeError("Dijkstra heap overflow")  # cannot happen: capacity >= 2 * edges
        if progress is not None:
            progress(int(part.shape[0]))
        # Row and column ids as int32 while the chunks wait to be joined (Django: 2.5M entries).
        return result[0].astype(np.int32), result[1].astype(np.int32), result[2], result[3]

    if workers == 1 or len(chunks) <= 1:
        results = [run(part) for part in chunks]
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(run, chunks))
    if not results:
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0), np.zeros(0)
    columns = [list(column) for column in zip(*results)]
    del results
    rows_out, cols_out, values_out, bars_out = (joined(column) for column in columns)
    return rows_out, cols_out, values_out, bars_out


def joined(parts: list[np.ndarray]) -> np.ndarray:
    """np.concatenate(parts) that lets go of each part once it is copied (the list ends empty):
    the chunks and the whole are not resident together (a cold build's entries)."""
    out = np.empty(sum(part.shape[0] for part in parts), dtype=parts[0].dtype)
    at = 0
    parts.reverse()
    while parts:
        part = parts.pop()
        out[at : at + part.shape[0]] = part
        at += part.shape[0]
        del part
    return out


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


def relation_entries(
    rows: np.ndarray,
    fragments: FragmentTable,
    graph: CodeGraph,
    live: np.ndarray,
    graph_config: GraphConfig,
    relation_config: RelationConfig,
    progress: ProgressCallback | None = None,
    keep: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The configured relation's strongest entries for `rows`: (row, col, w, entry bar per row).

    Graph (eq. 8), context (eq. 7), or their elementwise max; each row keeps its
    `max_relations_per_fragment` largest entries (or `keep`; 0 keeps all), and its bar is the
    weakest one kept (the relation cutoff when the row was not full).
    """
    kind = relation_config.kind
    if keep is None:
        keep = relation_config.max_relations_per_fragment
    if kind == "graph":
        # The kernel already keeps each row's `keep` strongest and knows their bars: sorting 2.5M
        # entries again took 1 s of Django's cold build (the parity tests check both ways agree).
        return graph_relation_entries(rows, fragments, graph, live, graph_config, relation_config, progress, keep)
    parts = []
    if kind == "graph+context":
        parts.append(graph_relation_entries(rows, fragments, graph, live, graph_config, relation_config,
                                            progress, keep)[:3])
    elif progress is not None:
        progress(int(rows.shape[0]))
    parts.append(context_relation_entries(rows, fragments, live, relation_config))
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
    return r, c, v, bars


def strongest_per_row(
    rows: np.ndarray, cols: np.ndarray, values: np.ndarray, limit: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep each row's `limit` largest entries (ties broken by column id)."""
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
    """Smallest value a new entry needs to enter each row's top list, shape (size,)."""
    threshold = np.full(size, cutoff)
    if limit <= 0 or rows.shape[0] == 0:
        return threshold
    counts = np.bincount(rows, minlength=size)
    full = counts >= limit
    # rows/values come from strongest_per_row: each row's last kept entry is its smallest.
    last = np.zeros(size, dtype=np.int64)
    np.maximum.at(last, rows, np.arange(rows.shape[0]))
    threshold[full] = np.maximum(values[last[full]], cutoff)
    return threshold


def symmetric_union(
    rows: np.ndarray, cols: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Entries plus their transposes; a pair present twice keeps its larger value."""
    r = np.concatenate([rows, cols])
    c = np.concatenate([cols, rows])
    v = np.concatenate([values, values])
    order = np.lexsort((-v, c, r))
    r, c, v = r[order], c[order], v[order]
    first = np.ones(r.shape[0], dtype=bool)
    first[1:] = (r[1:] != r[:-1]) | (c[1:] != c[:-1])
    return r[first], c[first], v[first]


def symmetric_matrix(one_sided: sp.csr_matrix) -> sp.csr_matrix:
    """`symmetric_union` of a square matrix's entries as a canonical CSR matrix, for a whole build
    (the matrix built from distinct (row, col) pairs: scipy sums duplicates).

    scipy's elementwise maximum of the matrix and its transpose takes 0.1 s on Django's 2.5M
    entries where sorting the triplets took 2.3 s.
    """
    matrix = one_sided.maximum(one_sided.T.tocsr()).tocsr()
    matrix.sort_indices()
    return matrix
