"""The repository index: files, fragments, BM25 postings and the relation matrix W.

Ids are stable and append-only: a changed file's old fragments are marked dead and its new ones
get fresh ids at the end, so W and the postings only grow by small deltas between compactions.
W = W_base (built in one go) + W_delta (entries of fragments added since), both symmetric.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from repomem.allocator import release_free_memory
from repomem.config import Config
from repomem.index.bm25 import BM25Stats, TermSegment, build_segment, compute_stats, document_frequencies
from repomem.index.caller_map import CallerMap, rows_of
from repomem.index.calls import CallResolution, resolves_calls
from repomem.index.edit_graph import EditGraph
from repomem.index.fragments import CoverEntries, FileFragments, FragmentTable, file_fragments, fragment_table
from repomem.index.graph import CodeGraph, DirectoryLayout, SyntaxEdges, build_graph, directory_layout, syntax_edges
from repomem.index.kernels.csr import row_slots, rows_times
from repomem.index.kernels.selection import strongest_in_row_runs
from repomem.index.relations import (
    relation_entries,
    row_thresholds,
    strongest_per_row,
    symmetric_matrix,
    symmetric_union,
)
from repomem.index.scan import SourceFile
from repomem.index.search_graph import SearchGraph
from repomem.index.split_product import RowBlocks
from repomem.index.tokens import LineTokens, line_tokens
from repomem.languages.parsed import FileSyntax, call_array
from repomem.languages.syntax import extract_syntax
from repomem.progress import NoProgress, Progress


def stored_weights(values: np.ndarray) -> np.ndarray:
    """W's weights as the index keeps them: rounded to float32 (7 significant digits of a weight in
    [1e-3, 1]), the precision they are saved at (half the bytes on disk), and held as float64, so
    a fresh index and a loaded one are the same and scipy's product runs on one dtype (its
    mixed float32 x float64 product copies the whole matrix per query: 10 ms instead of 4 on
    Django; a numba loop over float32 weights took 7)."""
    return values.astype(np.float32).astype(np.float64)


class StructureUnavailable(Exception):
    """The per-file structure of a loaded index could not be read (snapshot pruned or damaged)."""


@dataclass(frozen=True)
class FileRecord:
    path: str
    language: str
    digest: str
    size: int
    mtime_ns: int  # 0 for an unsaved editor buffer: the next refresh compares digests
    first_fragment: int
    n_fragments: int
    masked: int = 0  # secrets masked in the indexed text (repomem.index.secrets)
    # More kept syntax nodes than graph.max_file_nodes: searched as text, outside the code graph.
    over_node_limit: bool = False


@dataclass(frozen=True)
class FileAnalysis:
    """Everything the index keeps of one file, computed without touching the index."""

    syntax: FileSyntax
    fragments: FileFragments
    tokens: LineTokens  # the file's BM25 tokens by line (a window's tokens are its lines')

    def window_term_ids(self, vocabulary: dict[str, int]) -> list[np.ndarray]:
        return self.tokens.window_term_ids(vocabulary, self.fragments.starts, self.fragments.ends)


def analyze_file(source: SourceFile, config: Config) -> FileAnalysis:
    syntax = extract_syntax(source.path, source.language, source.text, config.graph.granularity,
                            config.graph.max_file_nodes)
    fragments = file_fragments(syntax, config.fragments)
    return FileAnalysis(syntax, fragments, line_tokens(source.text, config.bm25))


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
    # Persistence bookkeeping (see store.py): which full build the base files belong to.
    base_id: str = ""
    base_segments: int = 1
    base_files: set[int] = field(default_factory=set)
    snapshot: Path | None = None
    structure_loader: Callable[[], None] | None = None  # fills syntax / fragments / calls lazily
    _resolver: CallResolution | None = None
    _cover: CoverEntries | None = None
    _cover_changes: list[tuple[np.ndarray, CoverEntries]] = field(default_factory=list)  # not yet in _cover
    _layout: DirectoryLayout | None = None
    _syntax_edges: SyntaxEdges | None = None
    _path_ids: dict[str, int] | None = None
    _callers: CallerMap | None = None  # who calls into each file, made at the first edit
    _w_blocks: RowBlocks | None = None
    # w_base @ live (base rows), kept across edits: an edit changes few of its rows (see live_rowsum).
    _base_rowsum: tuple[sp.csr_matrix, np.ndarray] | None = None
    # The code graph with stable node ids that edits search (made at the first edit, then synced).
    _edit_graph: EditGraph | None = None

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
        if self._path_ids is None:
            self._path_ids = {f.path: i for i, f in enumerate(self.files) if f is not None}
        return self._path_ids.get(path)

    def record(self, path: str) -> FileRecord | None:
        file_id = self.file_id(path)
        return None if file_id is None else self.files[file_id]

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
        if self._resolver is None:
            self._resolver = CallResolution(self.syntax, self.config.graph)
        return self._resolver

    def graph(self, deduplicate: bool = True) -> CodeGraph:
        self.ensure_structure()
        paths = tuple(None if s is None else s.path for s in self.syntax)
        if self._layout is None or self._layout.paths != paths:
            self._layout = directory_layout(paths)
        # Kept between calls: an edit changes one file's syntax edges and shifts the rest.
        self._syntax_edges = syntax_edges(self.syntax, self._syntax_edges)
        return build_graph(self.syntax, self.all_calls(), self.config.graph, deduplicate, self._layout,
                           self._syntax_edges)

    def prepare_edits(self) -> None:
        """Make now what the first edit of a loaded index would: the per-file structure, the call
        resolver and caller map, the graph kept between edits, and the compiled kernels an edit
        runs (loaded from numba's cache on first use). Django: ~1.1 s that a language server spends
        after loading, before its first keystroke instead of on it."""
        try:
            self.ensure_structure()
        except StructureUnavailable:
            return  # left to the first edit, which reports it as the service does
        self.resolver()
        self.callers_of(())
        for segment in self.segments:
            segment.doc_terms(np.zeros(0, dtype=np.int64))  # the by-document copy an edit reads
        # A small file analysed and its postings made, then dropped: the kernels of both.
        text = "import os\n\n\ndef warm(path):\n    return os.path.join(path, 'x')\n"
        analysis = analyze_file(SourceFile("warm.py", "python", text, "", len(text), 0), self.config)
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
            r, c, v, _ = _relation_rows(self, rows[self.live[rows]], NoProgress(), keep=0, full=False)
            strongest_in_row_runs(r, c, v, max(1, self.config.relations.max_relations_per_fragment))
            symmetric_union(r, c, v)

    def edit_graph(self) -> EditGraph:
        """The graph an edit's relation rows search, brought to the index's current files."""
        self.ensure_structure()
        # Not held while it syncs: a sync that raises half-way leaves no half-synced graph behind
        # (the next edit builds one whole).
        graph, self._edit_graph = self._edit_graph, None
        if graph is None or not graph.sync(self):
            graph = None  # a graph that could not follow goes before the new one is made
            graph = EditGraph(self)
        self._edit_graph = graph
        return graph

    def callers_of(self, file_ids: Iterable[int]) -> set[int]:
        """Files with a call into any of `file_ids`."""
        if self._callers is None:
            self._callers = CallerMap(self.calls)
        return self._callers.callers_of(file_ids)

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
        if self._callers is not None:
            self._callers.replace(old, rows_of(changes.values()), len(self.files))
        if self._edit_graph is not None:
            self._edit_graph.calls_replaced.update(changes)

    def all_calls(self) -> np.ndarray:
        """Every call edge, shape (n, 5) (see parsed.call_array)."""
        parts = [edges for edges in self.calls.values() if edges.shape[0]]
        return np.concatenate(parts) if parts else np.zeros((0, 5), dtype=np.int64)

    def cover_entries(self) -> CoverEntries:
        if self._cover is not None and self._cover_changes:
            # Edits since the entries were last read, applied in one pass (edits search the
            # graph kept between them, which does not read these).
            changes, self._cover_changes = self._cover_changes, []
            dead = np.concatenate([d for d, _ in changes])
            added = CoverEntries.joined([a for _, a in changes])
            self._cover = self._cover.replaced(dead, added.without(dead))
        if self._cover is None:
            self._cover_changes = []
            self.ensure_structure()
            self._cover = CoverEntries.of_files([
                (file_id, record.first_fragment, fragments)
                for file_id, (record, fragments) in enumerate(zip(self.files, self.file_fragments))
                if record is not None and fragments is not None
            ])
        return self._cover

    def fragment_table(self, graph: CodeGraph) -> FragmentTable:
        return fragment_table(self.cover_entries(), self.fragment_file, self.fragment_start, self.fragment_end,
                              graph.node_offset)

    def relation_times(self, x: np.ndarray) -> np.ndarray:
        """W @ x (base + delta) for x of shape (n_fragments,), float64."""
        out = np.zeros(self.n_fragments)
        n_base = self.w_base.shape[0]
        self._base_blocks().times(x[:n_base], out)
        if self.w_delta.nnz:
            out += self.w_delta @ x
        return out

    def _base_blocks(self) -> RowBlocks:
        """w_base as row blocks for a parallel product (rebuilt when w_base is replaced)."""
        blocks = self._w_blocks
        if blocks is None or blocks.matrix is not self.w_base:
            settings = self.config.relations
            parts = settings.product_threads if self.w_base.nnz >= settings.parallel_product_entries else 1
            blocks = self._w_blocks = RowBlocks(self.w_base, max(1, parts))
        return blocks

    def relation_matrix(self) -> sp.csr_matrix:
        """W as one matrix over all fragment ids (base padded, plus delta)."""
        n = self.n_fragments
        base = self.w_base.copy()
        base.resize((n, n))
        return (base + self.w_delta).tocsr()



def _relation_rows(
    index: RepoIndex, rows: np.ndarray, progress: Progress, keep: int | None = None, full: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    graph: CodeGraph | SearchGraph
    if full or index.config.relations.kind == "context":
        graph = index.graph(deduplicate=full)
        if full:
            index.graph_nodes, index.graph_edges = graph.n_nodes, int(graph.edge_a.shape[0])
        table = index.fragment_table(graph)
    else:
        # An edit: the graph kept between edits, which pays for the files changed only.
        edit = index.edit_graph()
        graph, table = edit.view(), edit.fragment_table(index)
    progress.start("relations", int(rows.shape[0]))
    return relation_entries(
        rows, table, graph, index.live, index.config.graph, index.config.relations, progress.advance, keep
    )


def build_index(
    root: Path,
    config: Config,
    sources: Sequence[SourceFile],
    skipped: Sequence[tuple[str, str]] = (),
    progress: Progress | None = None,
    analyses: Sequence[FileAnalysis] | None = None,
) -> RepoIndex:
    """A complete index of `sources` (already read and filtered by the scan).

    `sources` and `analyses` (in the order of `sources` sorted by path), when they are lists,
    are emptied once read: the texts and the BM25 tokens by line (Django: 25 + 40 MB) are not
    resident during the relation phase, the cold build's peak.
    """
    progress = progress or NoProgress()
    consumed = [sources, analyses]
    sources = sorted(sources, key=lambda s: s.path)
    if analyses is None:
        progress.start("parsing", len(sources))
        analyses = []
        for source in sources:
            analyses.append(analyze_file(source, config))
            progress.advance()
    records: list[FileRecord | None] = []
    first = 0
    for source, analysis in zip(sources, analyses):
        n = int(analysis.fragments.starts.shape[0])
        records.append(FileRecord(source.path, source.language, source.digest, source.size,
                                  source.mtime_ns, first, n, source.masked, analysis.syntax.over_node_limit))
        first += n
    n_fragments = first
    vocabulary: dict[str, int] = {}
    doc_terms = [terms for a in analyses for terms in a.window_term_ids(vocabulary)]
    segment = build_segment(0, doc_terms, len(vocabulary))
    live = np.ones(n_fragments, dtype=bool)
    doc_len = np.fromiter((t.shape[0] for t in doc_terms), dtype=np.int64, count=n_fragments)
    del doc_terms  # Django: 7.6M term ids, not needed past the segment (the relations need the room)
    syntax, file_fragments = [a.syntax for a in analyses], [a.fragments for a in analyses]
    fragment_start = np.concatenate([a.fragments.starts for a in analyses] or [np.zeros(0, np.int32)])
    fragment_end = np.concatenate([a.fragments.ends for a in analyses] or [np.zeros(0, np.int32)])
    for given in consumed:
        if isinstance(given, list):
            given.clear()
    del sources, analyses
    df = document_frequencies(segment, len(vocabulary), live)
    index = RepoIndex(
        root=root,
        config=config,
        files=records,
        syntax=syntax,
        file_fragments=file_fragments,
        live=live,
        fragment_file=np.concatenate(
            [np.full(r.n_fragments, i, dtype=np.int32) for i, r in enumerate(records) if r is not None]
            or [np.zeros(0, dtype=np.int32)]
        ),
        fragment_start=fragment_start,
        fragment_end=fragment_end,
        vocabulary=vocabulary,
        segments=[segment],
        doc_len=doc_len,
        df=df,
        stats=compute_stats(df, doc_len, live, config.bm25),
        w_base=sp.csr_matrix((n_fragments, n_fragments)),
        w_delta=sp.csr_matrix((n_fragments, n_fragments)),
        delta_entries=(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)),
        thresholds=np.zeros(n_fragments),
        rowsum=np.zeros(n_fragments),
        calls={},
        skipped=list(skipped),
        base_files=set(range(len(records))),
    )
    resolver = index.resolver()
    progress.start("calls", sum(1 for s in index.syntax if resolves_calls(s)))
    for file_id, syntax in enumerate(index.syntax):
        if resolves_calls(syntax):
            index.calls[file_id] = call_array(resolver.resolve_file(file_id))
            progress.advance()
    all_rows = np.arange(n_fragments, dtype=np.int64)
    rows, cols, values, bars = _relation_rows(index, all_rows, progress)
    release_free_memory()  # the searches' scratch and pair lists, before W is made (the peak)
    index.thresholds = bars
    values[:] = values.astype(np.float32)  # stored_weights in place: no second float64 copy
    entries = [rows, cols, values]
    del rows, cols, values  # the entries are not resident beside the matrix made of them
    index.w_base = symmetric_matrix(entries, n_fragments)
    index.rowsum = index.relation_times(np.ones(n_fragments))
    return index


def _segment_rows_terms(segment: TermSegment, doc_ids: np.ndarray) -> np.ndarray:
    """Term ids present in the given documents of a segment (one entry per document and term)."""
    local = doc_ids - segment.first_doc
    local = local[(local >= 0) & (local < segment.tf.shape[0])]
    return segment.doc_terms(local)


def apply_changes(
    index: RepoIndex,
    changed: Sequence[SourceFile],
    removed: Sequence[str],
    analyses: Sequence[FileAnalysis] | None = None,
) -> list[int]:
    """Replace, add and remove files in place; returns the ids of the new fragments.

    Touches only what the change reaches: the new fragments' postings and W rows (plus their
    mirrored entries), the changed files' call edges and those of files importing them. Paths
    routed *through* a changed file between two other files keep their old strength until the
    next compaction (`repomem index --full`).
    """
    config = index.config
    index.ensure_structure()
    if analyses is None:
        analyses = [analyze_file(source, config) for source in changed]
    resolver = index.resolver()
    touched_files: set[int] = set()
    dead: list[np.ndarray] = []

    def retire(file_id: int) -> None:
        record = index.files[file_id]
        assert record is not None
        ids = np.arange(record.first_fragment, record.first_fragment + record.n_fragments)
        dead.append(ids)

    removed_modules: set[str] = set()
    gone_calls: dict[int, np.ndarray | None] = {}  # files whose call rows go (removed, or no resolution)
    for path in removed:
        file_id = index.file_id(path)
        if file_id is None:
            continue
        module = resolver.module_of(file_id)
        if module is not None:
            removed_modules.add(module)
        retire(file_id)
        index.files[file_id] = None
        if index._path_ids is not None:
            index._path_ids.pop(path, None)
        index.syntax[file_id] = None
        index.file_fragments[file_id] = None
        gone_calls[file_id] = None
        resolver.forget(file_id)
        touched_files.add(file_id)
        index.base_files.discard(file_id)

    new_docs: list[np.ndarray] = []
    new_ids: list[np.ndarray] = []
    first = index.n_fragments
    new_file_of: list[np.ndarray] = []
    new_cover: list[tuple[int, int, FileFragments]] = []
    new_starts: list[np.ndarray] = []
    new_ends: list[np.ndarray] = []
    # Old -> new node of each definition, per modified file whose symbols kept their shape.
    node_moves: dict[int, np.ndarray] = {}
    same_symbols = not removed
    for source, analysis in zip(changed, analyses):
        file_id = index.file_id(source.path)
        if file_id is None:
            file_id = len(index.files)
            if index._path_ids is not None:
                index._path_ids[source.path] = file_id
            index.files.append(None)
            index.syntax.append(None)
            index.file_fragments.append(None)
            same_symbols = False
        else:
            retire(file_id)
            moves = definition_moves(index.syntax[file_id], analysis.syntax)
            if moves is None:
                same_symbols = False
            else:
                node_moves[file_id] = moves
        n = int(analysis.fragments.starts.shape[0])
        index.files[file_id] = FileRecord(source.path, source.language, source.digest, source.size,
                                          source.mtime_ns, first, n, source.masked,
                                          analysis.syntax.over_node_limit)
        index.syntax[file_id] = analysis.syntax
        index.file_fragments[file_id] = analysis.fragments
        resolver.learn(file_id, analysis.syntax)
        if not resolver.covers(file_id):
            gone_calls[file_id] = None
        touched_files.add(file_id)
        index.base_files.discard(file_id)
        new_docs.extend(analysis.window_term_ids(index.vocabulary))
        new_ids.append(np.arange(first, first + n, dtype=np.int64))
        new_cover.append((file_id, first, analysis.fragments))
        new_file_of.append(np.full(n, file_id, dtype=np.int32))
        new_starts.append(analysis.fragments.starts)
        new_ends.append(analysis.fragments.ends)
        first += n

    dead_ids = np.concatenate(dead) if dead else np.zeros(0, dtype=np.int64)
    newly_dead = dead_ids[index.live[dead_ids]]
    added = np.concatenate(new_ids) if new_ids else np.zeros(0, dtype=np.int64)
    n_added = int(added.shape[0])
    n_total = index.n_fragments + n_added

    # -- BM25: subtract replaced documents, append a segment for the new ones ------------------
    n_terms = len(index.vocabulary)
    df = np.zeros(n_terms, dtype=np.int64)
    df[: index.df.shape[0]] = index.df
    if newly_dead.size:
        # One count over every segment's dead terms (a count per segment, each the vocabulary's
        # length, grew with every edit's segment).
        low, high = int(newly_dead.min()), int(newly_dead.max())
        terms = [_segment_rows_terms(segment, newly_dead) for segment in index.segments
                 if segment.first_doc <= high and low < segment.first_doc + segment.tf.shape[0]]
        if terms:
            df -= np.bincount(np.concatenate(terms), minlength=n_terms)[:n_terms]
    live = np.concatenate([index.live, np.ones(n_added, dtype=bool)])
    live[dead_ids] = False
    if n_added:
        segment = build_segment(index.n_fragments, new_docs, n_terms)
        index.segments.append(segment)
        df += document_frequencies(segment, n_terms, live)
    index.doc_len = np.concatenate([index.doc_len, np.fromiter((d.shape[0] for d in new_docs), dtype=np.int64,
                                                               count=n_added)])
    index.df = df
    index.live = live
    index.fragment_file = np.concatenate([index.fragment_file, *new_file_of])
    index.fragment_file[dead_ids] = -1
    if index._cover is not None:
        index._cover_changes.append((newly_dead, CoverEntries.of_files(new_cover)))
    index.fragment_start = np.concatenate([index.fragment_start, *new_starts])
    index.fragment_end = np.concatenate([index.fragment_end, *new_ends])
    index.stats = compute_stats(df, index.doc_len, live, config.bm25)

    # -- calls: the changed files and the files that import them -------------------------------

    def with_calls(file_ids: Iterable[int]) -> set[int]:
        return {i for i in file_ids if resolves_calls(index.syntax[i])}

    index.replace_calls(gone_calls)
    if same_symbols:
        # Edits inside bodies: other files resolve to the same definitions, which only moved.
        moved = np.zeros(len(index.files), dtype=bool)
        moved[list(node_moves)] = True
        remapped: dict[int, np.ndarray | None] = {}
        for file_id in index.callers_of(node_moves) - touched_files:
            edges = index.calls[file_id]
            into = np.flatnonzero(moved[edges[:, 2]])
            if into.size:
                edges = edges.copy()
                for row in into.tolist():
                    edges[row, 3] = node_moves[int(edges[row, 2])][edges[row, 3]]
                remapped[file_id] = edges
        index.replace_calls(remapped)
        affected = with_calls(touched_files)
    else:
        affected = with_calls(touched_files | resolver.dependents(touched_files, removed_modules))
        affected.update(index.callers_of(touched_files))
    index.replace_calls({file_id: call_array(resolver.resolve_file(file_id)) for file_id in affected})

    # -- W: rows of the new fragments, mirrored into the rows they enter -----------------------
    thresholds = np.concatenate([index.thresholds, np.full(n_added, config.relations.relation_cutoff)])
    old_rows, old_cols, old_values = index.delta_entries
    keep_old = live[old_rows] & live[old_cols]
    old_rows, old_cols, old_values = old_rows[keep_old], old_cols[keep_old], old_values[keep_old]
    if n_added:
        limit = config.relations.max_relations_per_fragment
        n_old = index.n_fragments - n_added
        rows, cols, values, _ = _relation_rows(index, added, NoProgress(), keep=0, full=False)
        top_rows, top_cols, top_values = strongest_per_row(rows, cols, values, limit)
        thresholds[added] = row_thresholds(top_rows, top_values, n_total, limit,
                                           config.relations.relation_cutoff)[added]
        # W is the union of every row's top list: an old fragment also takes a new neighbour
        # that beats its weakest kept relation.
        enters_old = (cols < n_old) & (values >= thresholds[cols])
        rows, cols, values = symmetric_union(
            np.concatenate([top_rows, rows[enters_old]]),
            np.concatenate([top_cols, cols[enters_old]]),
            np.concatenate([top_values, values[enters_old]]),
        )
        old_rows = np.concatenate([old_rows, rows])
        old_cols = np.concatenate([old_cols, cols])
        old_values = np.concatenate([old_values, values])
    old_values = stored_weights(old_values)
    index.delta_entries = (old_rows, old_cols, old_values)
    index.w_delta = sp.csr_matrix((old_values, (old_rows, old_cols)), shape=(n_total, n_total))
    index.thresholds = thresholds
    index.rowsum = _live_rowsum(index, newly_dead)
    index.generation += 1
    return added.tolist()


def definition_moves(old: FileSyntax | None, new: FileSyntax) -> np.ndarray | None:
    """Map old node -> new node of each definition when a file kept its symbols' shape.

    The shape is what other files' call resolution depends on: definitions (scope, name, kind,
    nesting, bases) in order and imports. None when it changed (dependents must be re-resolved).
    """
    if old is None or old.language != new.language or not resolves_calls(new):
        return None

    def shape(syntax: FileSyntax):
        return [(d.scope, d.name, d.kind, d.in_function, d.bases) for d in syntax.definitions]

    if shape(old) != shape(new) or old.imports != new.imports:
        return None
    moves = np.full(old.n_nodes, -1, dtype=np.int64)
    for before, after in zip(old.definitions, new.definitions):
        moves[before.node] = after.node
    return moves


def _live_rowsum(index: RepoIndex, newly_dead: np.ndarray | None = None) -> np.ndarray:
    """sum_j W_ij over live j, for every fragment id.

    The base part (w_base @ live) is kept between edits: when `newly_dead` fragments are all an
    edit changed about it, only the rows holding them (W is symmetric: their neighbours) are
    summed again, in stored order, so the result is what the whole product gives (Django: 4 ms of
    every edit became ~0.2)."""
    base = index.w_base
    n_base = base.shape[0]
    live = index.live.astype(np.float64)
    kept = index._base_rowsum
    if kept is None or kept[0] is not base or newly_dead is None:
        base_sum = np.zeros(n_base)
        index._base_blocks().times(live[:n_base], base_sum)
    else:
        base_sum = kept[1].copy()
        dead = newly_dead[newly_dead < n_base]
        if dead.size:
            slots = row_slots(base.indptr[dead].astype(np.int64), base.indptr[dead + 1].astype(np.int64))
            touched = np.unique(base.indices[slots])
            base_sum[touched] = rows_times(base.indptr, base.indices, base.data, touched.astype(np.int64),
                                           live[:n_base])
    index._base_rowsum = (base, base_sum)
    out = np.zeros(index.n_fragments)
    out[:n_base] = base_sum
    if index.w_delta.nnz:
        out += index.w_delta @ live
    return out
