"""What the relation searches read of the code graph: adjacency rows, file blocks, node -> fragments.

One shape for both ways the graph is held: a whole build's CSR (rows back to back, files' nodes
in `CodeGraph.node_offset` order), and the graph kept between edits (`edit_graph.EditGraph`),
where an edited file's nodes move to the end of the numbering and a node whose edges changed has
its row rewritten at the end of the adjacency arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from repomem.index.fragments import FragmentTable
from repomem.index.graph import CodeGraph
from repomem.index.kernels.csr import invert_incidence


@dataclass(frozen=True)
class SearchGraph:
    n_nodes: int
    # int64, shape (n_nodes,): node u's neighbours are indices[row_start[u]:row_end[u]], their
    # step costs (-ln w) at the same slots of `costs` (float64).
    row_start: np.ndarray
    row_end: np.ndarray
    indices: np.ndarray
    costs: np.ndarray
    # int64, shape (n_files,): file f's syntax nodes are [block_start[f], block_end[f]).
    block_start: np.ndarray
    block_end: np.ndarray
    syntax_parent: np.ndarray  # int64, shape (n_nodes,): kept syntax parent, -1 for none
    portal: np.ndarray  # bool, shape (n_nodes,): the node has an edge that is not a syntax edge
    # Fragments covering each node (CSR by node, fragment order within a node): shapes
    # (n_nodes + 1,), (n_entries,) int64 fragment ids, (n_entries,) float64 len_k.
    node_indptr: np.ndarray
    node_frags: np.ndarray
    node_weights: np.ndarray
    # No two edges join the same pair: the searches may skip a hub's cut levels (kernels).
    distinct_edges: bool
    n_slots: int  # adjacency slots in use (rows and the gaps rewritten rows left): sizes the heap


def search_graph(graph: CodeGraph, fragments: FragmentTable) -> SearchGraph:
    """A whole graph's CSR and the transpose of its fragments' incidence."""
    indptr, indices, costs = graph.csr()
    node_indptr, node_frags, node_weights = invert_incidence(
        fragments.indptr, fragments.nodes, fragments.weights, graph.n_nodes)
    return SearchGraph(
        n_nodes=graph.n_nodes,
        row_start=indptr[:-1],
        row_end=indptr[1:],
        indices=indices,
        costs=costs,
        block_start=graph.node_offset[:-1],
        block_end=graph.node_offset[1:],
        syntax_parent=graph.syntax_parent,
        portal=graph.portals(),
        node_indptr=node_indptr,
        node_frags=node_frags,
        node_weights=node_weights,
        distinct_edges=graph.distinct_edges,
        n_slots=int(indices.shape[0]),
    )
