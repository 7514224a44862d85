"""The code graph kept between edits, so an edit pays for what it changed and not for the repository.

A whole graph (`graph.build_graph`) numbers every file's syntax nodes back to back: an edit that
adds one node to a file shifts every later id, and rebuilding the edge list, the adjacency, the
fragment table and the node -> fragment index cost half of an edit (docs/measurements.md#an-edit).
Here ids are stable instead:

- an edited file's nodes get new ids at the end of the numbering; its old ids are dead (no
  edges, never reached) until the next rebuild;
- a node whose edges change (the file node, call sites and called definitions) gets its row
  written again at the end of the adjacency arrays, the old slots left unused;
- fragments already have stable ids (new ones are appended), so the fragment table and the node
  -> fragment index only grow by the new fragments' entries and the new nodes' rows.

Files added or removed get or lose their file node and the folders only they kept, as
`graph.directory_layout` would make them. The graph it holds is `build_graph(deduplicate=False)`
of the index as last synced, renumbered (a parity test compares the two edge for edge). Enough
dead nodes or unused slots rebuild it whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from repomem.config import Config, GraphConfig
from repomem.index.caller_map import rows_of
from repomem.index.fragments import FileFragments, FragmentTable
from repomem.index.graph import CALL, DIRECTORY, FILE_ROOT, CodeGraph, call_edges, directory_chain, step_cost
from repomem.index.indexed_files import FileRecord
from repomem.index.kernels.csr import row_slots
from repomem.index.kernels.row_patching import AdjacencySlots, EntriesByNode, patch_rows
from repomem.index.search_graph import SearchGraph, search_graph
from repomem.index.search_memo import SearchMemory
from repomem.languages.parsed import FileSyntax

# Rebuild whole once dead nodes pass this share of the ids, or unused slots this share of the
# adjacency arrays: the searches' scratch is sized by ids, their heap by slots.
REBUILD_DEAD_SHARE = 0.25
REBUILD_UNUSED_SHARE = 0.5
GROWTH = 1.5  # arrays grow to this multiple of what they must hold, so appends are amortised
# What a graph built whole reserves, as a multiple of its size: the room the edits until the next
# rebuild use. Nodes by id: up to 1 / (1 - REBUILD_DEAD_SHARE) of the live ones; adjacency slots:
# up to 1 / (1 - REBUILD_UNUSED_SHARE) of those in use; the fragment table and the node ->
# fragment entries grow with every edit's fragments until the index is compacted
# (index.compact_ratio of the fragments). Reserved as zeros, pages the kernel maps when first
# written: room not used costs address space, not memory. A growth copies every node array
# (megabytes each, freshly faulted): a stall of the edit that meets it (docs/measurements.md#an-edit).
NODE_ROOM = 1.0 / (1.0 - REBUILD_DEAD_SHARE) + 0.05
SLOT_ROOM = 1.0 / (1.0 - REBUILD_UNUSED_SHARE) + 0.05
FRAGMENT_ROOM = 1.5


class FollowedIndex(Protocol):
    """What the graph reads of the index it follows (`index_state.RepoIndex` is one): its files by
    id with their syntax, windows and call rows, its fragment arrays, and who calls whom."""

    config: Config
    files: list[FileRecord | None]
    syntax: list[FileSyntax | None]
    file_fragments: list[FileFragments | None]
    calls: dict[int, np.ndarray]
    fragment_file: np.ndarray
    fragment_start: np.ndarray
    fragment_end: np.ndarray

    @property
    def n_fragments(self) -> int: ...

    def graph(self, deduplicate: bool = True) -> CodeGraph: ...

    def fragment_table(self, graph: CodeGraph) -> FragmentTable: ...

    def callers_of(self, file_ids: Iterable[int]) -> set[int]: ...


def _with_room(array: np.ndarray, room: float) -> np.ndarray:
    """A copy of `array` with room for `room` times its items (the edits then append in place):
    zeros, so the room is not touched until written."""
    out = np.zeros(int(array.shape[0] * room) + 16, dtype=array.dtype)
    out[: array.shape[0]] = array
    return out


def _room(array: np.ndarray, needed: int) -> np.ndarray:
    """`array` when it holds `needed` items, else a copy with room for GROWTH times as many."""
    if array.shape[0] >= needed:
        return array
    bigger = np.zeros(int(needed * GROWTH) + 16, dtype=array.dtype)
    bigger[: array.shape[0]] = array
    return bigger


@dataclass(frozen=True)
class _Edges:
    """Undirected edges (a, b, cost), int64 / int64 / float64, shape (n,) each."""

    a: np.ndarray
    b: np.ndarray
    cost: np.ndarray

    @staticmethod
    def join(parts: list[_Edges]) -> _Edges:
        if not parts:
            return _Edges(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
        return _Edges(*(np.concatenate(column) for column in zip(*((p.a, p.b, p.cost) for p in parts))))

    def directed(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Both directions as (node, other, cost), sorted by node (stable)."""
        node = np.concatenate([self.a, self.b])
        other = np.concatenate([self.b, self.a])
        cost = np.concatenate([self.cost, self.cost])
        order = np.argsort(node, kind="stable")
        return node[order], other[order], cost[order]


def _in_files(file_ids: np.ndarray, moving: np.ndarray) -> np.ndarray:
    """np.isin(file_ids, moving); one comparison for the usual edit's one file (isin's set-up
    is most of its time on a few thousand rows)."""
    return file_ids == moving[0] if moving.shape[0] == 1 else np.isin(file_ids, moving)


def _same_tree(old: FileSyntax | None, new: FileSyntax | None) -> bool:
    """Whether two versions of a file keep the same syntax nodes under the same parents (its graph
    block has the same edges, whatever its lines and lengths)."""
    return old is not None and new is not None and np.array_equal(old.parent, new.parent)


def _multiset_difference(old: np.ndarray, new: np.ndarray, moving: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which rows of `old` are not in `new` and which of `new` not in `old`, counted with
    multiplicity (bool masks): a row with an end in a `moving` file is never the same."""
    old_moves = _in_files(old[:, 0], moving) | _in_files(old[:, 2], moving)
    new_moves = _in_files(new[:, 0], moving) | _in_files(new[:, 2], moving)
    if np.array_equal(old[~old_moves], new[~new_moves]):
        # The usual edit: the other rows are the same rows in the same order (callers' rows into
        # a changed file were rewritten, the rest copied), so no sort is needed.
        return old_moves, new_moves
    n_old = old.shape[0]
    both = np.concatenate([old, new])
    label = np.concatenate([np.zeros(n_old, np.int8), np.ones(new.shape[0], np.int8)])
    order = np.lexsort((label, *both.T[::-1]))
    ordered = both[order]
    first = np.ones(ordered.shape[0], dtype=bool)
    first[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    group = np.cumsum(first) - 1
    # Within a group the old rows come first: the k-th old row is matched when k < the new count.
    is_old = label[order] == 0
    n_groups = int(group[-1]) + 1 if group.size else 0
    olds = np.bincount(group, weights=is_old.astype(np.float64), minlength=n_groups).astype(np.int64)
    news = np.bincount(group, weights=(~is_old).astype(np.float64), minlength=n_groups).astype(np.int64)
    rank = np.arange(ordered.shape[0]) - np.flatnonzero(first)[group]
    matched = np.where(is_old, rank < news[group], rank - olds[group] < olds[group])
    stays = np.zeros(both.shape[0], dtype=bool)
    stays[order] = matched
    differs = ~stays | np.concatenate([old_moves, new_moves])
    return differs[:n_old], differs[n_old:]


class EditGraph:
    """The graph of `index` as of the last `sync`, with stable node ids (see the module's doc)."""

    def __init__(self, index: FollowedIndex) -> None:
        graph = index.graph(deduplicate=False)
        table = index.fragment_table(graph)
        whole = search_graph(graph, table)
        self.config: GraphConfig = index.config.graph
        self.syntax: list[FileSyntax | None] = list(index.syntax)
        # id() of each of `syntax`, int64 (n_files,): a sync compares the index's with these.
        self.syntax_ids = np.fromiter(map(id, self.syntax), dtype=np.int64, count=len(self.syntax))
        self.calls: dict[int, np.ndarray] = dict(index.calls)
        # Files whose call rows the index replaced since the last sync (`note_replaced_calls`: the
        # index tells, from the only method that changes its call rows once built).
        self.calls_replaced: set[int] = set()
        # What the last edit's searches found (`search_memo`): kept by a sync only while the graph
        # stays the same but for one file's new ids.
        self.searches = SearchMemory()
        # -- nodes (arrays by node id, `n_nodes` of them in use) --
        self.n_nodes = graph.n_nodes
        self.n_dead = 0
        self.row_start = _with_room(whole.row_start, NODE_ROOM)
        self.row_end = _with_room(whole.row_end, NODE_ROOM)
        self.syntax_parent = _with_room(graph.syntax_parent, NODE_ROOM)
        self.dead = _with_room(np.zeros(graph.n_nodes, dtype=bool), NODE_ROOM)
        # A node is a portal when it has a file-root or directory edge, or any call edge.
        fixed_portal = np.zeros(graph.n_nodes, dtype=bool)
        structural = (graph.edge_kind == FILE_ROOT) | (graph.edge_kind == DIRECTORY)
        fixed_portal[graph.edge_a[structural]] = True
        fixed_portal[graph.edge_b[structural]] = True
        self.fixed_portal = _with_room(fixed_portal, NODE_ROOM)
        calls = graph.edge_kind == CALL
        self.call_degree = _with_room((np.bincount(graph.edge_a[calls], minlength=graph.n_nodes)
                                       + np.bincount(graph.edge_b[calls], minlength=graph.n_nodes)).astype(np.int64),
                                      NODE_ROOM)
        self.portal = _with_room(whole.portal, NODE_ROOM)
        self.node_indptr = _with_room(whole.node_indptr, NODE_ROOM)
        self.node_frags = _with_room(whole.node_frags, FRAGMENT_ROOM)
        self.node_weights = _with_room(whole.node_weights, FRAGMENT_ROOM)
        self.n_node_entries = int(whole.node_frags.shape[0])
        # -- adjacency slots --
        self.indices, self.costs = _with_room(whole.indices, SLOT_ROOM), _with_room(whole.costs, SLOT_ROOM)
        self.n_slots = whole.n_slots
        self.unused_slots = 0
        # -- files --
        self.block_start = graph.node_offset[:-1].copy()
        self.block_end = graph.node_offset[1:].copy()
        self.file_node = graph.file_node.copy()
        self.paths: list[str | None] = [None if record is None else record.path for record in index.files]
        # -- folders: each one's node, and how many present files lie under it (at 0 it goes) --
        dir_base = int(graph.node_offset[-1]) + len(index.files)
        self.dir_node = {name: dir_base + at for at, name in enumerate(graph.directories)}
        self.dir_files: dict[str, int] = {}
        for path in self.paths:
            for folder in directory_chain(path) if path is not None else ():
                self.dir_files[folder] = self.dir_files.get(folder, 0) + 1
        # -- fragments (the table of every fragment id, `n_frags` of them) --
        self.n_frags = table.size
        self.frag_indptr = _with_room(table.indptr, FRAGMENT_ROOM)
        self.frag_nodes = _with_room(table.nodes, FRAGMENT_ROOM)
        self.frag_weights = _with_room(table.weights, FRAGMENT_ROOM)
        self.n_frag_entries = int(table.nodes.shape[0])
        self.frag_totals = _with_room(table.totals, FRAGMENT_ROOM)

    # -- reading ---------------------------------------------------------------------------------

    def view(self) -> SearchGraph:
        n = self.n_nodes
        return SearchGraph(
            n_nodes=n, row_start=self.row_start[:n], row_end=self.row_end[:n],
            indices=self.indices, costs=self.costs, block_start=self.block_start, block_end=self.block_end,
            syntax_parent=self.syntax_parent[:n], portal=self.portal[:n],
            node_indptr=self.node_indptr[: n + 1], node_frags=self.node_frags, node_weights=self.node_weights,
            distinct_edges=False, n_slots=self.n_slots,
        )

    def fragment_table(self, index: FollowedIndex) -> FragmentTable:
        n = self.n_frags
        return FragmentTable(index.fragment_file, index.fragment_start, index.fragment_end,
                             self.frag_indptr[: n + 1], self.frag_nodes[: self.n_frag_entries],
                             self.frag_weights[: self.n_frag_entries], self.frag_totals[:n])

    def follows(self, index: FollowedIndex) -> bool:
        """Whether `sync` may bring this graph to `index`: the same settings, file ids only added
        (a removed file keeps its id, its syntax gone), and not so many dead nodes or unused
        slots that a rebuild is due."""
        return (index.config.graph == self.config and len(index.files) >= len(self.syntax)
                and self.n_dead <= REBUILD_DEAD_SHARE * self.n_nodes
                and self.unused_slots <= REBUILD_UNUSED_SHARE * self.n_slots)

    # -- syncing ---------------------------------------------------------------------------------

    def note_replaced_calls(self, file_ids: Iterable[int]) -> None:
        """The index replaced these files' call rows: the next `sync` compares them."""
        self.calls_replaced.update(file_ids)

    def sync(self, index: FollowedIndex) -> bool:
        """Bring the graph to `index` (its files' syntax and calls, its fragments); False when the
        change is not one this graph can follow (then it must be rebuilt: see `follows`). The
        searches' memo (`searches`) stays only when the graph stayed the same but for new ids of
        the memo's file."""
        memo, self.searches.memo = self.searches.memo, None
        if not self.follows(index):
            return False
        self._add_file_ids(len(index.files))
        # Which files changed: a new syntax object (an edit or a new file makes one; a removal
        # leaves None).
        now = np.fromiter(map(id, index.syntax), dtype=np.int64, count=len(index.syntax))
        touched_files = np.flatnonzero(now != self.syntax_ids).tolist()
        if any((index.syntax[f] is None) != (index.files[f] is None) for f in touched_files):
            return False
        changed = [f for f in touched_files if index.syntax[f] is not None]  # edited or new
        removed = [f for f in touched_files if index.syntax[f] is None]
        appended = sum(index.files[f].n_fragments for f in changed)  # type: ignore[union-attr]
        if any(index.files[f].first_fragment < self.n_frags for f in changed) \
                or self.n_frags + appended != index.n_fragments:  # type: ignore[union-attr]
            return False
        first_new_node = self.n_nodes
        # Files whose call rows may differ: those the index said it replaced (`calls_replaced`),
        # the changed files and their callers (whose rows point at nodes that moved). A file that
        # called a changed one when this graph last synced either still does (the index's caller
        # map has it) or had its rows replaced since (`calls_replaced` has it).
        recalled = self.calls_replaced | set(touched_files)
        recalled.update(index.callers_of(touched_files))
        recalled_files = sorted(recalled)
        old_rows = rows_of([self.calls.get(g) for g in recalled_files])
        new_rows = rows_of([index.calls.get(g) for g in recalled_files])
        # Calls that stay (same files and nodes, neither end in a changed file) stay in the rows.
        moving = np.asarray(touched_files, dtype=np.int64)
        old_go, new_come = _multiset_difference(old_rows, new_rows, moving)

        # Edges that go, at the old ids; the changed files' old nodes then die, new ones come.
        old_calls = self._call_edges(old_rows[old_go])
        swept = self._remove_files(removed)  # live nodes that had an edge to a removed file's
        structure = self._add_files([f for f in changed if self.file_node[f] < 0], index)
        self._move_blocks(touched_files, index)
        new_calls = self._call_edges(new_rows[new_come])
        added = _Edges.join([*self._block_edges(changed, index), *structure, new_calls])
        # An edge to a dead node goes with it (the node's row is swept): only edges between live
        # nodes are listed to drop, but both ends' rows are patched.
        both_live = ~(self.dead[old_calls.a] | self.dead[old_calls.b])
        dropped = _Edges(old_calls.a[both_live], old_calls.b[both_live], old_calls.cost[both_live])
        nodes = np.unique(np.concatenate([old_calls.a, old_calls.b, self.file_node[changed], swept,
                                          added.a, added.b]))
        nodes = nodes[~self.dead[nodes]]
        if not self._patch(nodes, dropped, added):
            return False
        np.subtract.at(self.call_degree, old_calls.a, 1)
        np.subtract.at(self.call_degree, old_calls.b, 1)
        np.add.at(self.call_degree, new_calls.a, 1)
        np.add.at(self.call_degree, new_calls.b, 1)
        self.portal[nodes] = self.fixed_portal[nodes] | (self.call_degree[nodes] > 0)
        self._append_fragments(sorted(changed, key=lambda f: index.files[f].first_fragment),  # type: ignore
                               index, first_new_node)
        for g in recalled_files:
            if g in index.calls:
                self.calls[g] = index.calls[g]
            else:
                self.calls.pop(g, None)
        if memo is not None and not removed and not structure and set(touched_files) <= {memo.file} \
                and _same_tree(self.syntax[memo.file], index.syntax[memo.file]) \
                and np.array_equal(old_rows, new_rows):
            # Call rows name nodes by their place in their file: equal rows are the same edges.
            self.searches.memo = memo
        for f in touched_files:
            self.syntax[f] = index.syntax[f]
        self.syntax_ids[touched_files] = now[touched_files]
        self.calls_replaced = set()
        return True

    def _call_edges(self, rows: np.ndarray) -> _Edges:
        source, target, weight = call_edges(rows, self.block_start, self.config)
        return _Edges(source, target, step_cost(weight))

    def _move_blocks(self, changed: list[int], index: FollowedIndex) -> None:
        """Kill the changed files' nodes and give those still present new ones at the end."""
        at = self._new_nodes(sum(0 if index.syntax[f] is None else index.syntax[f].n_nodes  # type: ignore
                                 for f in changed))
        for f in changed:
            old_first, old_end = int(self.block_start[f]), int(self.block_end[f])
            self._kill(np.arange(old_first, old_end))
            syntax = index.syntax[f]
            if syntax is None:  # removed
                self.block_start[f] = self.block_end[f] = 0
                continue
            n = syntax.n_nodes
            parent = syntax.parent.astype(np.int64)
            self.syntax_parent[at : at + n] = np.where(parent >= 0, parent + at, -1)
            if n:
                self.fixed_portal[at] = True  # the file-root edge
            self.block_start[f], self.block_end[f] = at, at + n
            at += n

    def _new_nodes(self, count: int) -> int:
        """Room for `count` nodes at the end of the ids, blank (live, no edges); returns the first."""
        first = self.n_nodes
        end = first + count
        for name in ("row_start", "row_end", "syntax_parent", "dead", "fixed_portal", "call_degree", "portal"):
            setattr(self, name, _room(getattr(self, name), end))
        self.node_indptr = _room(self.node_indptr, end + 1)
        self.row_start[first:end] = 0
        self.row_end[first:end] = 0
        self.syntax_parent[first:end] = -1
        self.dead[first:end] = False
        self.fixed_portal[first:end] = False
        self.call_degree[first:end] = 0
        self.portal[first:end] = False
        self.n_nodes = end
        return first

    def _kill(self, nodes: np.ndarray) -> None:
        """Nodes die: their rows empty (their slots unused), no portal."""
        self.dead[nodes] = True
        # A freed slot (inf) was counted unused when it was freed.
        slots = row_slots(self.row_start[nodes], self.row_end[nodes])
        self.unused_slots += int(np.isfinite(self.costs[slots]).sum())
        self.row_end[nodes] = self.row_start[nodes]
        self.portal[nodes] = False
        self.n_dead += int(nodes.shape[0])

    def _add_file_ids(self, n_files: int) -> None:
        """Per-file state for file ids the index added since (no nodes yet)."""
        extra = n_files - len(self.syntax)
        if extra <= 0:
            return
        self.syntax.extend([None] * extra)
        self.syntax_ids = np.concatenate([self.syntax_ids, np.full(extra, id(None), dtype=np.int64)])
        self.paths.extend([None] * extra)
        self.block_start = np.concatenate([self.block_start, np.zeros(extra, dtype=np.int64)])
        self.block_end = np.concatenate([self.block_end, np.zeros(extra, dtype=np.int64)])
        self.file_node = np.concatenate([self.file_node, np.full(extra, -1, dtype=np.int64)])

    def _remove_files(self, removed: list[int]) -> np.ndarray:
        """Removed files' file nodes die, and folders no present file lies under any more; returns
        the live folder nodes whose rows held an edge to one of them (their blocks die with
        `_move_blocks`)."""
        if not removed:
            return np.zeros(0, dtype=np.int64)
        dying: list[int] = []
        swept: list[int] = []
        for f in removed:
            path = self.paths[f]
            if path is None or self.file_node[f] < 0:
                continue  # never had nodes here (added and removed between two syncs)
            dying.append(int(self.file_node[f]))
            self.file_node[f] = -1
            self.paths[f] = None
            for folder in directory_chain(path):
                self.dir_files[folder] -= 1
                if self.dir_files[folder] == 0:
                    dying.append(self.dir_node.pop(folder))
                    del self.dir_files[folder]
                else:
                    swept.append(self.dir_node[folder])
        self._kill(np.asarray(dying, dtype=np.int64))
        return np.asarray(swept, dtype=np.int64)

    def _add_files(self, added: list[int], index: FollowedIndex) -> list[_Edges]:
        """New files' file nodes and the folders not in the graph yet, with their directory edges
        (a folder's edge to its parent, a file's to its folder), as `directory_layout` makes them."""
        folder_cost = step_cost(self.config.directory_weight)
        pairs: list[tuple[int, int]] = []
        for f in added:
            record = index.files[f]
            assert record is not None
            self.paths[f] = record.path
            self.file_node[f] = node = self._new_nodes(1)
            self.fixed_portal[node] = True
            parent = -1
            for folder in directory_chain(record.path):
                if folder not in self.dir_node:
                    self.dir_node[folder] = self._new_nodes(1)
                    self.fixed_portal[self.dir_node[folder]] = True
                    if parent >= 0:
                        pairs.append((parent, self.dir_node[folder]))
                self.dir_files[folder] = self.dir_files.get(folder, 0) + 1
                parent = self.dir_node[folder]
            pairs.append((node, parent))
        if not pairs:
            return []
        a, b = np.asarray(pairs, dtype=np.int64).T
        return [_Edges(a, b, np.full(a.shape[0], folder_cost))]

    def _block_edges(self, changed: list[int], index: FollowedIndex) -> list[_Edges]:
        """The new nodes' syntax edges (child -> kept parent) and file-root edges."""
        syntax_cost = step_cost(self.config.syntax_weight)
        root_cost = step_cost(self.config.file_root_weight)
        out = []
        for f in changed:
            syntax = index.syntax[f]
            assert syntax is not None
            at = int(self.block_start[f])
            child = at + np.arange(1, syntax.n_nodes, dtype=np.int64)
            parent = at + syntax.parent[1:].astype(np.int64)
            out.append(_Edges(child, parent, np.full(child.shape[0], syntax_cost)))
            if syntax.n_nodes:
                out.append(_Edges(self.file_node[[f]], np.asarray([at], dtype=np.int64), np.full(1, root_cost)))
        return out

    def _patch(self, nodes: np.ndarray, dropped: _Edges, added: _Edges) -> bool:
        drop_node, drop_other, drop_cost = dropped.directed()
        add_node, add_other, add_cost = added.directed()
        # Every listed node is among `nodes` (the touched live nodes): each one's entries are the
        # run between two consecutive positions.
        drop_first = np.searchsorted(drop_node, np.append(nodes, self.n_nodes), side="left")
        add_first = np.searchsorted(add_node, np.append(nodes, self.n_nodes), side="left")
        # Room for the worst case: every touched row moves to the end.
        needed = self.n_slots + int((self.row_end[nodes] - self.row_start[nodes]).sum()) + add_node.shape[0]
        self.indices = _room(self.indices, needed)
        self.costs = _room(self.costs, needed)
        slots = AdjacencySlots(self.row_start, self.row_end, self.indices, self.costs)
        self.n_slots, unmatched, unused = patch_rows(
            slots, self.n_slots, self.dead, nodes,
            EntriesByNode(drop_first, drop_other, drop_cost), EntriesByNode(add_first, add_other, add_cost))
        self.unused_slots += unused
        return unmatched == 0

    def _append_fragments(self, files: list[int], index: FollowedIndex, first_new_node: int) -> None:
        """The new fragments' rows of the fragment table and the new nodes' rows of the node ->
        fragment index (both only grow: fragment ids and the new node ids are above all others)."""
        parts = []
        for f in files:
            record, fragments = index.files[f], index.file_fragments[f]
            assert record is not None and fragments is not None
            parts.append((fragments.cover_window.astype(np.int64) + record.first_fragment,
                          fragments.cover_node.astype(np.int64) + self.block_start[f],
                          fragments.cover_weight.astype(np.float64)))
        if parts:
            fragment, node, weight = (np.concatenate(column) for column in zip(*parts))
        else:
            fragment, node, weight = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        order = np.argsort(fragment, kind="stable")
        fragment, node, weight = fragment[order], node[order], weight[order]
        n_old, n_new = self.n_frags, index.n_fragments
        counts = np.bincount(fragment - n_old, minlength=n_new - n_old)
        self.frag_indptr = _room(self.frag_indptr, n_new + 1)
        self.frag_indptr[n_old + 1 : n_new + 1] = self.frag_indptr[n_old] + np.cumsum(counts)
        self.frag_totals = _room(self.frag_totals, n_new)
        self.frag_totals[n_old:n_new] = np.bincount(fragment - n_old, weights=weight, minlength=n_new - n_old)
        entries = self.n_frag_entries + fragment.shape[0]
        self.frag_nodes = _room(self.frag_nodes, entries)
        self.frag_weights = _room(self.frag_weights, entries)
        self.frag_nodes[self.n_frag_entries : entries] = node
        self.frag_weights[self.n_frag_entries : entries] = weight
        self.n_frag_entries = entries
        self.n_frags = n_new
        # Node-major, fragments in order within a node (as `invert_incidence`). The new nodes (the
        # files' blocks, new file and folder nodes) are the ids from `first_new_node` on.
        first, end = first_new_node, self.n_nodes
        by_node = np.argsort(node, kind="stable")
        counts = np.bincount(node - first, minlength=end - first)
        self.node_indptr[first + 1 : end + 1] = self.node_indptr[first] + np.cumsum(counts)
        entries = self.n_node_entries + node.shape[0]
        self.node_frags = _room(self.node_frags, entries)
        self.node_weights = _room(self.node_weights, entries)
        self.node_frags[self.n_node_entries : entries] = fragment[by_node]
        self.node_weights[self.n_node_entries : entries] = weight[by_node]
        self.n_node_entries = entries
