"""The code graph of one repository (docs/design.md section 2) as typed edge lists and a CSR.

Node numbering: every file's kept syntax nodes, file after file (offsets in `node_offset`), then
one node per file, then one node per directory (the repository root is directory "").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from repomem.config import GraphConfig
from repomem.index.kernels.csr import symmetric_csr
from repomem.languages.parsed import FileSyntax

SYNTAX, DIRECTORY, FILE_ROOT, CALL = 0, 1, 2, 3


@dataclass(frozen=True)
class CodeGraph:
    n_nodes: int
    node_offset: np.ndarray  # int64, shape (n_files + 1,): first syntax node of each file
    file_node: np.ndarray  # int64, shape (n_files,): the file node of each file
    directories: tuple[str, ...]  # directory of each directory node, in node order
    edge_a: np.ndarray  # int64, shape (n_edges,), undirected edges, deduplicated, a < b
    edge_b: np.ndarray  # int64
    edge_weight: np.ndarray  # float64, the strongest edge between a and b
    edge_kind: np.ndarray  # int8, SYNTAX / DIRECTORY / FILE_ROOT / CALL
    edge_cost: np.ndarray  # float64, -ln edge_weight (the search's step cost)
    # int64, shape (n_nodes,): each syntax node's kept parent (a lower id: files number their nodes in
    # pre-order), -1 for syntax roots, file and directory nodes.
    syntax_parent: np.ndarray
    # No two edges join the same pair (deduplicated): the searches may then count a node's
    # neighbours to skip the levels their cap cuts (kernels.shortest_paths.bounded_dijkstra).
    distinct_edges: bool = True

    def portals(self) -> np.ndarray:
        """bool, shape (n_nodes,): nodes with an edge that is not a syntax edge (file roots, call
        sites, called definitions, file and directory nodes); every path out of a file passes one."""
        crossing = self.edge_kind != SYNTAX
        portal = np.zeros(self.n_nodes, dtype=bool)
        portal[self.edge_a[crossing]] = True
        portal[self.edge_b[crossing]] = True
        return portal

    def csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Symmetric adjacency with costs -ln w: (indptr, indices, costs)."""
        # Zero-cost edges (weight 1.0) stay: this CSR is never fed to scipy, which drops zeros.
        return symmetric_csr(self.n_nodes, self.edge_a, self.edge_b, self.edge_cost)


def directory_chain(path: str) -> list[str]:
    """Folders from the root down to the file's own folder: 'a/b/c.py' -> ['', 'a', 'a/b']."""
    parts = path.split("/")[:-1]
    return [""] + ["/".join(parts[: i + 1]) for i in range(len(parts))]


@dataclass(frozen=True)
class DirectoryLayout:
    """The folder tree of a set of files; it changes only when files are added or removed."""

    paths: tuple[str | None, ...]  # by file id, None for removed files
    directories: tuple[str, ...]  # directory node order
    dir_pairs: np.ndarray  # int64, shape (n, 2): parent folder, sub-folder (directory indices)
    live_files: np.ndarray  # int64, ids of present files
    file_dir: np.ndarray  # int64, folder index of each present file


def directory_layout(paths: Sequence[str | None]) -> DirectoryLayout:
    directory_ids: dict[str, int] = {}
    dir_edges: list[tuple[int, int]] = []
    file_dir: list[int] = []
    live_files: list[int] = []
    for index, path in enumerate(paths):
        if path is None:
            continue
        live_files.append(index)
        previous = -1
        for folder in directory_chain(path):
            if folder not in directory_ids:
                directory_ids[folder] = len(directory_ids)
                if previous >= 0:
                    dir_edges.append((previous, directory_ids[folder]))
            previous = directory_ids[folder]
        file_dir.append(previous)
    return DirectoryLayout(
        paths=tuple(paths),
        directories=tuple(sorted(directory_ids, key=directory_ids.__getitem__)),
        dir_pairs=np.asarray(dir_edges, dtype=np.int64).reshape(-1, 2),
        live_files=np.asarray(live_files, dtype=np.int64),
        file_dir=np.asarray(file_dir, dtype=np.int64),
    )


@dataclass(frozen=True)
class SyntaxEdges:
    """Every file's syntax edges (child -> kept parent) in global node ids, file after file: the
    bulk of the graph (docs/measurements.md#graph-and-relations), which an edit changes in one file
    only."""

    files: tuple[FileSyntax | None, ...]  # the syntax objects these edges were made of
    sizes: np.ndarray  # int64, shape (n_files,): syntax nodes of each file (0 when removed)
    node_offset: np.ndarray  # int64, shape (n_files + 1,)
    child: np.ndarray  # int64, shape (n_edges,)
    parent: np.ndarray  # int64, shape (n_edges,)
    edge_offset: np.ndarray  # int64, shape (n_files + 1,): each file's slice of child / parent
    # int64, shape (n_files,): id() of each syntax object (they stay alive in `files`, so an equal
    # id is the same object): which files changed is one array comparison, not a Python loop.
    object_ids: np.ndarray


# An edit of more files than this rebuilds the syntax edges instead of splicing them.
SPLICE_MAX_FILES = 64


def syntax_edges(files: Sequence[FileSyntax | None], previous: SyntaxEdges | None = None) -> SyntaxEdges:
    """The files' syntax edges; from `previous` (made of the same number of files) by replacing
    the files whose syntax object changed and shifting the others' ids, when few did."""
    files = tuple(files)
    object_ids = np.fromiter(map(id, files), dtype=np.int64, count=len(files))
    if previous is not None and len(previous.files) == len(files):
        changed = np.flatnonzero(object_ids != previous.object_ids).tolist()
        if not changed:
            return previous
        if len(changed) <= SPLICE_MAX_FILES:
            return _spliced(files, previous, changed, object_ids)
    sizes = np.fromiter((0 if f is None else f.n_nodes for f in files), dtype=np.int64, count=len(files))
    node_offset = np.zeros(len(files) + 1, dtype=np.int64)
    np.cumsum(sizes, out=node_offset[1:])
    present = [f for f in files if f is not None and f.n_nodes]
    parents = np.concatenate([f.parent for f in present]).astype(np.int64) if present else np.zeros(0, np.int64)
    local = np.arange(parents.shape[0], dtype=np.int64) - np.repeat(node_offset[:-1], sizes)
    first = np.repeat(node_offset[:-1], sizes)
    not_root = local > 0  # every node but each file's root (local index 0) links to its parent
    edge_counts = np.maximum(sizes - 1, 0)
    edge_offset = np.zeros(len(files) + 1, dtype=np.int64)
    np.cumsum(edge_counts, out=edge_offset[1:])
    return SyntaxEdges(files, sizes, node_offset, (first + local)[not_root], (first + parents)[not_root],
                       edge_offset, object_ids)


def _spliced(files: tuple[FileSyntax | None, ...], previous: SyntaxEdges, changed: list[int],
             object_ids: np.ndarray) -> SyntaxEdges:
    sizes = previous.sizes.copy()
    for i in changed:
        sizes[i] = 0 if files[i] is None else files[i].n_nodes  # type: ignore[union-attr]
    node_offset = np.zeros(len(files) + 1, dtype=np.int64)
    np.cumsum(sizes, out=node_offset[1:])
    edge_offset = np.zeros(len(files) + 1, dtype=np.int64)
    np.cumsum(np.maximum(sizes - 1, 0), out=edge_offset[1:])
    child_parts: list[np.ndarray] = []
    parent_parts: list[np.ndarray] = []
    unchanged_from = 0  # files [unchanged_from, i) between two changed files shift by one amount
    for i in [*changed, len(files)]:
        if i > unchanged_from:
            shift = node_offset[unchanged_from] - previous.node_offset[unchanged_from]
            a, b = previous.edge_offset[unchanged_from], previous.edge_offset[i]
            child_parts.append(previous.child[a:b] + shift)
            parent_parts.append(previous.parent[a:b] + shift)
        if i < len(files) and files[i] is not None and sizes[i] > 1:
            syntax = files[i]
            assert syntax is not None
            local = np.arange(1, syntax.n_nodes, dtype=np.int64)
            child_parts.append(node_offset[i] + local)
            parent_parts.append(node_offset[i] + syntax.parent[1:].astype(np.int64))
        unchanged_from = i + 1
    return SyntaxEdges(files, sizes, node_offset, np.concatenate(child_parts), np.concatenate(parent_parts),
                       edge_offset, object_ids)


def step_cost(weight: float | np.ndarray) -> np.ndarray:
    """A search's step cost along edges of `weight`: -ln w, float64 (one formula, so a graph built
    whole and one kept between edits hold the same bits). A weight that underflowed to 0 (a call
    thousands of expression levels deep: syntax_weight ** hops) costs +inf, a step never taken."""
    with np.errstate(divide="ignore"):
        return -np.log(np.asarray(weight, dtype=np.float64))


def call_edges(calls: np.ndarray, block_start: np.ndarray, config: GraphConfig
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Call rows (see `parsed.call_array`, shape (n, 5)) as graph edges (source node, target
    node, weight), file f's syntax nodes starting at block_start[f]. The call expression sits
    `hops` syntax edges below its kept node: the contracted edge carries the product of the
    weights along that path. A call inside the node it calls (recursion on the def line) would be
    a loop: the only edges that can be one, and they are left out."""
    source = block_start[calls[:, 0]] + calls[:, 1]
    target = block_start[calls[:, 2]] + calls[:, 3]
    no_loop = source != target
    weight = config.call_weight * config.syntax_weight ** calls[:, 4].astype(np.float64)
    return source[no_loop], target[no_loop], weight[no_loop]


def build_graph(
    files: Sequence[FileSyntax | None],
    calls: np.ndarray,
    config: GraphConfig,
    deduplicate: bool = True,
    layout: DirectoryLayout | None = None,
    syntax: SyntaxEdges | None = None,
) -> CodeGraph:
    """`files[i]` is file i's syntax, None for a removed file (it keeps its index, no nodes).

    `calls`: call edges as rows of `resolve.call_array`, shape (n_calls, 5).
    `deduplicate=False` keeps parallel edges (a call edge along a syntax edge, two calls between the
    same statements): shortest paths are the same, and an update skips the sort.
    `layout`: the files' folder tree if already known (see `directory_layout`; made of these files'
    paths: it is not checked again); `syntax`: their syntax edges if already known (see `syntax_edges`).
    """
    n_files = len(files)
    syntax = syntax_edges(files, syntax)  # `syntax` itself when it was made of these files
    node_offset = syntax.node_offset
    n_syntax = int(node_offset[-1])
    file_node = n_syntax + np.arange(n_files, dtype=np.int64)

    if layout is None:
        layout = directory_layout(tuple(None if f is None else f.path for f in files))
    dir_base = n_syntax + n_files
    n_nodes = dir_base + len(layout.directories)

    parts_a: list[np.ndarray] = []
    parts_b: list[np.ndarray] = []
    parts_w: list[np.ndarray] = []
    parts_k: list[np.ndarray] = []
    parts_c: list[np.ndarray] = []

    def add(a: np.ndarray, b: np.ndarray, weight: float | np.ndarray, kind: int) -> None:
        parts_a.append(a.astype(np.int64, copy=False))
        parts_b.append(b.astype(np.int64, copy=False))
        weights = np.asarray(weight, dtype=np.float64)
        parts_w.append(np.broadcast_to(weights, a.shape).copy())
        # One logarithm per kind's weight, not per edge (docs/measurements.md#an-edit).
        parts_c.append(np.broadcast_to(step_cost(weights), a.shape).copy())
        parts_k.append(np.full(a.shape[0], kind, dtype=np.int8))

    live = layout.live_files
    syntax_parent = np.full(n_nodes, -1, dtype=np.int64)
    add(syntax.child, syntax.parent, config.syntax_weight, SYNTAX)
    syntax_parent[syntax.child] = syntax.parent
    add(file_node[live], node_offset[live], config.file_root_weight, FILE_ROOT)
    add(dir_base + layout.dir_pairs[:, 0], dir_base + layout.dir_pairs[:, 1], config.directory_weight, DIRECTORY)
    add(file_node[live], dir_base + layout.file_dir, config.directory_weight, DIRECTORY)
    if calls.shape[0]:
        add(*call_edges(calls, node_offset, config), CALL)

    a = np.concatenate(parts_a)
    b = np.concatenate(parts_b)
    weight = np.concatenate(parts_w)
    kind = np.concatenate(parts_k)
    cost = np.concatenate(parts_c)
    low, high = np.minimum(a, b), np.maximum(a, b)
    directories = layout.directories
    if not deduplicate:
        return CodeGraph(n_nodes, node_offset, file_node, directories, low, high, weight, kind, cost, syntax_parent,
                         distinct_edges=False)
    # Deduplicate undirected pairs keeping the strongest edge (scipy would sum duplicates).
    order = np.lexsort((-weight, high, low))
    low, high, weight, kind, cost = low[order], high[order], weight[order], kind[order], cost[order]
    first = np.ones(low.shape[0], dtype=bool)
    first[1:] = (low[1:] != low[:-1]) | (high[1:] != high[:-1])
    return CodeGraph(
        n_nodes=n_nodes,
        node_offset=node_offset,
        file_node=file_node,
        directories=directories,
        edge_a=low[first],
        edge_b=high[first],
        edge_weight=weight[first],
        edge_kind=kind[first],
        edge_cost=cost[first],
        syntax_parent=syntax_parent,
    )
