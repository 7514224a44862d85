"""The repository index as held in memory: files, fragments, BM25 postings and the relation matrix W.

Ids are stable and append-only: a changed file's old fragments are marked dead and its new ones
get fresh ids at the end, so W and the postings only grow by small deltas between compactions.
W = W_base (built in one go) + W_delta (entries of fragments added since), both symmetric.

`repo_index.build_index` makes a `RepoIndex` whole and `repo_index.apply_changes` edits it (its
steps are in `index_edit`); what an edit must change that the index derives and keeps (the path
ids, the cover entries, the base row sums) changes through this class's own methods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from repomem.allocator import release_free_memory
from repomem.config import Config
from repomem.index.bm25 import BM25Stats, TermSegment, build_segment
from repomem.index.caller_map import CallerMap, rows_of
from repomem.index.calls import CallResolution
from repomem.index.edit_graph import EditGraph
from repomem.index.fragments import CoverEntries, FileFragments, FragmentTable, fragment_table
from repomem.index.graph import CodeGraph, DirectoryLayout, SyntaxEdges, build_graph, directory_layout, syntax_edges
from repomem.index.indexed_files import FileAnalysis, FileRecord, warmed_file_analysis
from repomem.index.kernels.csr import row_slots, rows_times
from repomem.index.kernels.selection import strongest_in_row_runs
from repomem.index.relations import WindowVectors, relation_entries, symmetric_union
from repomem.index.search_graph import SearchGraph, search_graph
from repomem.index.search_memo import SearchMemory
from repomem.index.split_product import RowBlocks
from repomem.languages.parsed import FileSyntax
from repomem.languages.reparse import TreeMemo
from repomem.progress import NoProgress, Progress


def stored_weights(values: np.ndarray) -> np.ndarray:
    """W's weights as the index keeps them: rounded to float32 (7 significant digits of a weight in
    [1e-3, 1]), the precision they are saved at (half the bytes on disk), and held as float64, so
    a fresh index and a loaded one are the same and scipy's product runs on one dtype (its
    mixed float32 x float64 product copies the whole matrix per query, and a numba loop over
    float32 weights was slower too: docs/measurements.md#a-query)."""
    return values.astype(np.float32).astype(np.float64)


class StructureUnavailable(Exception):
    """The per-file structure of a loaded index could not be read (snapshot pruned or damaged)."""


@dataclass
class DerivedCaches:
    """What an index derives from its own fields and keeps between uses, each made on first use
    (None until then). Only the index's own methods read or change them: an edit tells the index
    what it changed (`remove_file`, `add_file_id`, `note_replaced_fragments`, `replace_calls`,
    `live_rowsum`) and the index brings each one along or lets it be made again."""

    path_ids: dict[str, int] | None = None  # path -> file id of the present files
    resolver: CallResolution | None = None
    # The windows' syntax-node cover, and the edits not yet applied to it: (dead fragment ids,
    # the new fragments' entries) per edit, applied at the next read.
    cover: CoverEntries | None = None
    cover_changes: list[tuple[np.ndarray, CoverEntries]] = field(default_factory=list)
    layout: DirectoryLayout | None = None
    syntax_edges: SyntaxEdges | None = None
    callers: CallerMap | None = None  # who calls into each file, made at the first edit
    w_blocks: RowBlocks | None = None  # w_base as row blocks, for a parallel product
    # w_base @ live (base rows), kept across edits: an edit changes few of its rows (see live_rowsum).
    base_rowsum: tuple[sp.csr_matrix, np.ndarray] | None = None
    # The code graph with stable node ids that edits search (made at the first edit, then synced).
    edit_graph: EditGraph | None = None
    trees: TreeMemo | None = None  # the edited files' last parses, which their next edit starts from

    def __getstate__(self) -> dict:
        """All but the trees: tree-sitter's trees cannot be pickled (a checkpoint of an index that
        an edit had updated, which every evaluation takes, failed); a copy's next edit of a file
        parses it from nothing."""
        return {**self.__dict__, "trees": None}


@dataclass
class RepoIndex:
    root: Path
    config: Config
    files: list[FileRecord | None]  # by file id; None = removed
    syntax: list[FileSyntax | None]
    file_fragments: list[FileFragments | None]
    live: np.ndarray  # bool, shape (n_fragments,)
    fragment_file: np.ndarray  # int32, shape (n_fragments,), -1 for dead ids
    fragment_start: np.ndarray  # int32, first line (0-based)
    fragment_end: np.ndarray  # int32, line after the last
    vocabulary: dict[str, int]
    segments: list[TermSegment]
    doc_len: np.ndarray  # int64, shape (n_fragments,), tokens per fragment
    df: np.ndarray  # int64, shape (n_terms,), live documents per term
    stats: BM25Stats
    w_base: sp.csr_matrix  # shape (n_base, n_base)
    w_delta: sp.csr_matrix  # shape (n_fragments, n_fragments)
    delta_entries: tuple[np.ndarray, np.ndarray, np.ndarray]  # (rows, cols, values) of w_delta
    thresholds: np.ndarray  # float64, shape (n_fragments,): entry bar of each row's top list
    rowsum: np.ndarray  # float64, shape (n_fragments,): sum_j W_ij over live j
    # Outgoing call edges per file id (languages with call resolution), rows of parsed.call_array.
    calls: dict[int, np.ndarray]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    generation: int = 0  # bumped by each change; the store names snapshots after it
    graph_nodes: int = 0  # size of the code graph when W was last extended
    graph_edges: int = 0
    # Persistence bookkeeping (see snapshot_save.py): which full build the base files belong to.
    base_id: str = ""
    base_segments: int = 1
    base_files: set[int] = field(default_factory=set)
    snapshot: Path | None = None
    structure_loader: Callable[[], None] | None = None  # fills syntax / fragments / calls lazily
    _derived: DerivedCaches = field(default_factory=DerivedCaches, init=False, repr=False, compare=False)

    def ensure_structure(self) -> None:
        """Load the per-file syntax and windows (needed to update, not to query)."""
        if self.structure_loader is not None:
            loader, self.structure_loader = self.structure_loader, None
            loader()

    # -- shape ---------------------------------------------------------------------------------

    @property
    def n_fragments(self) -> int:
        return int(self.live.shape[0])

    @property
    def n_live_files(self) -> int:
        return sum(1 for f in self.files if f is not None)

    def file_id(self, path: str) -> int | None:
        derived = self._derived
        if derived.path_ids is None:
            derived.path_ids = {f.path: i for i, f in enumerate(self.files) if f is not None}
        return derived.path_ids.get(path)

    def record(self, path: str) -> FileRecord | None:
        file_id = self.file_id(path)
        return None if file_id is None else self.files[file_id]

    # -- files: what an edit changes -----------------------------------------------------------

    def remove_file(self, file_id: int) -> None:
        """The file leaves the index: its record, syntax and windows go (its id stays, empty), and
        it no longer belongs to the base build. Its fragments and calls are the caller's to retire."""
        record = self.files[file_id]
        assert record is not None
        self.files[file_id] = None
        self.syntax[file_id] = None
        self.file_fragments[file_id] = None
        self.base_files.discard(file_id)
        if self._derived.path_ids is not None:
            self._derived.path_ids.pop(record.path, None)

    def add_file_id(self, path: str) -> int:
        """A new file id for `path`, its record, syntax and windows empty until `set_file`."""
        file_id = len(self.files)
        if self._derived.path_ids is not None:
            self._derived.path_ids[path] = file_id
        self.files.append(None)
        self.syntax.append(None)
        self.file_fragments.append(None)
        return file_id

    def set_file(self, file_id: int, record: FileRecord, analysis: FileAnalysis) -> None:
        """The file's record, syntax and windows; an edited file no longer belongs to the base build."""
        self.files[file_id] = record
        self.syntax[file_id] = analysis.syntax
        self.file_fragments[file_id] = analysis.fragments
        self.base_files.discard(file_id)

    def note_replaced_fragments(self, dead: np.ndarray, added: list[tuple[int, int, FileFragments]]) -> None:
        """Fragment ids `dead` (int64) were retired and the windows of `added` (file id, first
        fragment id, windows) came: the cover entries, when made, take the change at their next
        read (edits search the graph kept between them, which does not read these)."""
        if self._derived.cover is not None:
            self._derived.cover_changes.append((dead, CoverEntries.of_files(added)))

    # -- call resolution and graphs ------------------------------------------------------------

    def resolved_file(self, path: str) -> tuple[int, FileSyntax, CallResolution] | None:
        """A file's id and syntax with the call resolution covering it; None for an unknown path or a
        language that resolves no names (what import- and call-based context needs)."""
        file_id = self.file_id(path)
        if file_id is None:
            return None
        self.ensure_structure()
        syntax = self.syntax[file_id]
        resolution = self.resolver()
        if syntax is None or not resolution.covers(file_id):
            return None
        return file_id, syntax, resolution

    def resolver(self) -> CallResolution:
        self.ensure_structure()
        if self._derived.resolver is None:
            self._derived.resolver = CallResolution(self.syntax, self.config.graph)
        return self._derived.resolver

    def edit_trees(self) -> TreeMemo:
        """The last parses of the files this index was edited for, which the next edit of the
        same file parses from (`reparse.TreeMemo`)."""
        if self._derived.trees is None:
            self._derived.trees = TreeMemo()
        return self._derived.trees

    def graph(self, deduplicate: bool = True) -> CodeGraph:
        self.ensure_structure()
        derived = self._derived
        paths = tuple(None if s is None else s.path for s in self.syntax)
        if derived.layout is None or derived.layout.paths != paths:
            derived.layout = directory_layout(paths)
        # Kept between calls: an edit changes one file's syntax edges and shifts the rest.
        derived.syntax_edges = syntax_edges(self.syntax, derived.syntax_edges)
        return build_graph(self.syntax, self.all_calls(), self.config.graph, deduplicate, derived.layout,
                           derived.syntax_edges)

    def forget_graph_inputs(self) -> None:
        """Let go of what the code graph was made from (the windows' node cover, the syntax edges,
        the folders' layout): a build's, resident at its save, its peak of memory otherwise
        (docs/measurements.md#memory-of-a-cold-build). The first graph made later (an edit's, or
        `prepare_edits`) makes them again, in ~0.1 s on a large repository."""
        derived = self._derived
        derived.cover, derived.cover_changes = None, []
        derived.syntax_edges = derived.layout = None

    def prepare_edits(self) -> None:
        """Make now what the first edit of a loaded index would: the per-file structure, the call
        resolver and caller map, the graph kept between edits, and the compiled kernels an edit
        runs (loaded from numba's cache on first use): time a language server spends after loading,
        before its first keystroke instead of on it (docs/measurements.md#index-load)."""
        try:
            self.ensure_structure()
        except StructureUnavailable:
            return  # left to the first edit, which reports it as the service does
        # The resolver, and what its languages keep to scope an edit's re-resolution (Python: which
        # names each file may ask for; docs/measurements.md#index-load).
        self.resolver().affected_by(set(), frozenset())
        self.callers_of(())
        for segment in self.segments:
            segment.doc_terms(np.zeros(0, dtype=np.int64))  # the by-document copy an edit reads
        # A small file analysed and its postings made, then dropped: the kernels of both.
        analysis = warmed_file_analysis(self.config)
        build_segment(0, analysis.window_term_ids({}), 1 << 16)
        rows_times(self.w_base.indptr, self.w_base.indices, self.w_base.data, np.zeros(0, dtype=np.int64),
                   np.zeros(self.w_base.shape[0]))
        if self.config.relations.kind == "context":
            return
        self.edit_graph()
        self.edit_graph()  # a sync with nothing to do: loads the row-patching kernel
        sizes = [(record.n_fragments, file_id) for file_id, record in enumerate(self.files)
                 if record is not None and record.n_fragments]
        if sizes:
            # Some rows of the file with the most windows, searched, kept to their top lists and
            # mirrored as an edit's are, then dropped: the edit's kernels.
            record = self.files[max(sizes)[1]]
            assert record is not None
            rows = np.arange(record.first_fragment, record.first_fragment + min(record.n_fragments, 32))
            r, c, v, _ = self.relation_rows(rows[self.live[rows]], NoProgress(), keep=0, full=False)
            strongest_in_row_runs(r, c, v, max(1, self.config.relations.max_relations_per_fragment))
            symmetric_union(r, c, v)

    def edit_graph(self) -> EditGraph:
        """The graph an edit's relation rows search, brought to the index's current files."""
        self.ensure_structure()
        # Not held while it syncs: a sync that raises half-way leaves no half-synced graph behind
        # (the next edit builds one whole).
        graph, self._derived.edit_graph = self._derived.edit_graph, None
        if graph is None or not graph.sync(self):
            graph = None  # a graph that could not follow goes before the new one is made
            graph = EditGraph(self)
        self._derived.edit_graph = graph
        return graph

    def callers_of(self, file_ids: Iterable[int]) -> set[int]:
        """Files with a call into any of `file_ids`."""
        if self._derived.callers is None:
            self._derived.callers = CallerMap(self.calls)
        return self._derived.callers.callers_of(file_ids)

    def replace_calls(self, changes: dict[int, np.ndarray | None]) -> None:
        """Set files' call rows (None: the file has none), keeping the caller map current."""
        if not changes:
            return
        old = rows_of(self.calls.get(file_id) for file_id in changes)
        for file_id, rows in changes.items():
            if rows is None:
                self.calls.pop(file_id, None)
            else:
                self.calls[file_id] = rows
        if self._derived.callers is not None:
            self._derived.callers.replace(old, rows_of(changes.values()), len(self.files))
        if self._derived.edit_graph is not None:
            self._derived.edit_graph.note_replaced_calls(changes)

    def all_calls(self) -> np.ndarray:
        """Every call edge, shape (n, 5) (see parsed.call_array)."""
        parts = [edges for edges in self.calls.values() if edges.shape[0]]
        return np.concatenate(parts) if parts else np.zeros((0, 5), dtype=np.int64)

    def cover_entries(self) -> CoverEntries:
        derived = self._derived
        if derived.cover is not None and derived.cover_changes:
            # Edits since the entries were last read, applied in one pass (edits search the
            # graph kept between them, which does not read these).
            changes, derived.cover_changes = derived.cover_changes, []
            dead = np.concatenate([d for d, _ in changes])
            added = CoverEntries.joined([a for _, a in changes])
            derived.cover = derived.cover.replaced(dead, added.without(dead))
        if derived.cover is None:
            derived.cover_changes = []
            self.ensure_structure()
            derived.cover = CoverEntries.of_files([
                (file_id, record.first_fragment, fragments)
                for file_id, (record, fragments) in enumerate(zip(self.files, self.file_fragments))
                if record is not None and fragments is not None
            ])
        return derived.cover

    def fragment_table(self, graph: CodeGraph) -> FragmentTable:
        return fragment_table(self.cover_entries(), self.fragment_file, self.fragment_start, self.fragment_end,
                              graph.node_offset)

    def relation_rows(
        self, rows: np.ndarray, progress: Progress, keep: int | None = None, full: bool = True,
        window_vectors: Callable[[RepoIndex], WindowVectors] | None = None, stored: bool = False,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Eq. 8 relations of fragment ids `rows` (int64) as (rows, cols, values, row bars), on the
        whole graph (`full`: a build, which records the graph's size and lets go of what the graph
        was made of, `forget_graph_inputs`) or on the graph kept between edits; `keep` and `stored`
        as `relations.relation_entries`. `window_vectors(index)`: the windows' embeddings, for eq. 6
        (asked only when relations.semantic_neighbours is on)."""
        graph: CodeGraph | SearchGraph
        memory: SearchMemory | None = None  # an edit's: what the last edit's searches found
        if full or self.config.relations.kind == "context":
            graph = self.graph(deduplicate=full)
            if full:
                self.graph_nodes, self.graph_edges = graph.n_nodes, int(graph.edge_a.shape[0])
            table = self.fragment_table(graph)
            if full:
                if self.config.relations.kind != "context":
                    # What the searches read of it: its edge lists are not resident beside them.
                    graph = search_graph(graph, table)
                self.forget_graph_inputs()  # made again by the first edit: not resident in the searches
                release_free_memory()  # the graph's making freed more than it keeps: not resident in the searches
        else:
            # An edit: the graph kept between edits, which pays for the files changed only.
            edit = self.edit_graph()
            graph, table, memory = edit.view(), edit.fragment_table(self), edit.searches
        progress.start("relations", int(rows.shape[0]))
        vectors = window_vectors(self) if window_vectors is not None and self.config.relations.semantic_neighbours \
            else None
        return relation_entries(
            rows, table, graph, self.live, self.config.graph, self.config.relations, progress.advance, keep, vectors,
            memory, stored,
        )

    # -- W -------------------------------------------------------------------------------------

    def relation_times(self, x: np.ndarray) -> np.ndarray:
        """W @ x (base + delta) for x of shape (n_fragments,), float64."""
        out = np.zeros(self.n_fragments)
        n_base = self.w_base.shape[0]
        self._base_blocks().times(x[:n_base], out)
        if self.w_delta.nnz:
            out += self.w_delta @ x
        return out

    def live_rowsum(self, newly_dead: np.ndarray | None = None) -> np.ndarray:
        """sum_j W_ij over live j, for every fragment id, float64, shape (n_fragments,).

        The base part (w_base @ live) is kept between edits: when `newly_dead` fragments are all an
        edit changed about it, only the rows holding them (W is symmetric: their neighbours) are
        summed again, in stored order, so the result is what the whole product gives (see
        docs/measurements.md#an-edit)."""
        base = self.w_base
        n_base = base.shape[0]
        live = self.live.astype(np.float64)
        kept = self._derived.base_rowsum
        if kept is None or kept[0] is not base or newly_dead is None:
            base_sum = np.zeros(n_base)
            self._base_blocks().times(live[:n_base], base_sum)
        else:
            base_sum = kept[1].copy()
            dead = newly_dead[newly_dead < n_base]
            if dead.size:
                slots = row_slots(base.indptr[dead].astype(np.int64), base.indptr[dead + 1].astype(np.int64))
                touched = np.unique(base.indices[slots])
                base_sum[touched] = rows_times(base.indptr, base.indices, base.data, touched.astype(np.int64),
                                               live[:n_base])
        self._derived.base_rowsum = (base, base_sum)
        out = np.zeros(self.n_fragments)
        out[:n_base] = base_sum
        if self.w_delta.nnz:
            out += self.w_delta @ live
        return out

    def _base_blocks(self) -> RowBlocks:
        """w_base as row blocks for a parallel product (rebuilt when w_base is replaced)."""
        blocks = self._derived.w_blocks
        if blocks is None or blocks.matrix is not self.w_base:
            settings = self.config.relations
            parts = settings.product_threads if self.w_base.nnz >= settings.parallel_product_entries else 1
            blocks = self._derived.w_blocks = RowBlocks(self.w_base, max(1, parts))
        return blocks

    def relation_matrix(self) -> sp.csr_matrix:
        """W as one matrix over all fragment ids (base padded, plus delta)."""
        n = self.n_fragments
        base = self.w_base.copy()
        base.resize((n, n))
        return (base + self.w_delta).tocsr()
