"""The steps of an index edit (`repo_index.apply_changes`), in the order it runs them.

1. `drop_removed_files`: removed files leave the index (their fragments are retired);
2. `place_changed_files`: changed and new files get their records and analyses, and their new
   fragments fresh ids at the end (an edited file's old ones are retired);
3. `retire_and_append_fragments`: the fragment arrays drop the retired ids and take the new ones;
4. `patch_postings`: BM25 loses the retired documents and gains a segment of the new ones;
5. `patch_calls`: call edges of the changed files and of the files whose calls they reach;
6. `patch_relations`: W's rows of the new fragments, mirrored into the rows they enter;
7. `RepoIndex.live_rowsum`: W's row sums, from the base sums kept between edits.

The first two steps fill a `FileChanges`, which the others read. Each step changes the index
through its public fields and methods: what the index derives and keeps is its own to update.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from repomem.index.bm25 import TermSegment, appended_segment, build_segment, compute_stats, document_frequencies
from repomem.index.calls import CallResolution, resolves_calls
from repomem.index.fragments import FileFragments
from repomem.index.index_state import RepoIndex, stored_weights
from repomem.index.indexed_files import FileAnalysis, FileRecord
from repomem.index.relations import WindowVectors, row_thresholds, strongest_per_row, symmetric_union
from repomem.index.scan import SourceFile
from repomem.languages.parsed import FileSyntax, call_array, symbol_shape
from repomem.progress import NoProgress


@dataclass
class FileChanges:
    """What the file steps changed, for the steps after them. Fragment ids are int64 arrays."""

    first_new: int  # the first new fragment id (the index's fragment count before the edit)
    touched_files: set[int] = field(default_factory=set)  # removed, edited or new
    removed_modules: set[str] = field(default_factory=set)  # module names of the removed files
    gone_calls: dict[int, None] = field(default_factory=dict)  # files whose call rows go
    # Old -> new node of each definition, per edited file (-1: it went or changed, when the
    # file's symbols did not keep their shape).
    node_moves: dict[int, np.ndarray] = field(default_factory=dict)
    same_symbols: bool = True  # no removal asked, no file added, and every edited file kept its shape
    # Otherwise, the names whose lookups in the touched files may answer differently (None: any
    # may, e.g. a language that does not say): only files that may ask for one are resolved again.
    changed_names: set[str] | None = field(default_factory=set)
    retired: list[np.ndarray] = field(default_factory=list)  # the fragment ids of the old versions
    new_docs: list[np.ndarray] = field(default_factory=list)  # term ids of each new fragment
    new_cover: list[tuple[int, int, FileFragments]] = field(default_factory=list)  # (file, first id, windows)
    new_file_of: list[np.ndarray] = field(default_factory=list)  # int32 file id per new fragment
    new_starts: list[np.ndarray] = field(default_factory=list)  # int32 first line per new fragment
    new_ends: list[np.ndarray] = field(default_factory=list)  # int32 line after the last
    new_ids: list[np.ndarray] = field(default_factory=list)

    def retire(self, record: FileRecord) -> None:
        """The fragments of a file's old version are retired."""
        self.retired.append(np.arange(record.first_fragment, record.first_fragment + record.n_fragments))

    @property
    def dead(self) -> np.ndarray:
        """Every retired id (some may have died in an earlier edit), in the order retired."""
        return np.concatenate(self.retired) if self.retired else np.zeros(0, dtype=np.int64)

    @property
    def added(self) -> np.ndarray:
        """The new fragment ids, ascending."""
        return np.concatenate(self.new_ids) if self.new_ids else np.zeros(0, dtype=np.int64)


def drop_removed_files(index: RepoIndex, removed: Sequence[str], resolver: CallResolution,
                       changes: FileChanges) -> None:
    """Removed files leave the index and the resolver; their fragments are retired, their call
    rows go, and their modules are noted (files importing them are resolved again)."""
    if removed:
        changes.same_symbols = False  # any removal asked for, even of a path the index lacks
    for path in removed:
        file_id = index.file_id(path)
        if file_id is None:
            continue
        module = resolver.module_of(file_id)
        if module is not None:
            changes.removed_modules.add(module)
        old = index.syntax[file_id]
        _note_changed_names(changes, None if old is None else resolver.changed_names(old, None))
        if old is not None:
            changes.node_moves[file_id] = np.full(old.n_nodes, -1, dtype=np.int64)  # rows into it go
        record = index.files[file_id]
        assert record is not None
        changes.retire(record)
        index.remove_file(file_id)
        changes.gone_calls[file_id] = None
        resolver.forget(file_id)
        changes.touched_files.add(file_id)


def place_changed_files(index: RepoIndex, changed: Sequence[SourceFile], analyses: Sequence[FileAnalysis],
                        resolver: CallResolution, changes: FileChanges) -> None:
    """Changed and new files take their records and analyses, and the resolver learns them; an
    edited file's old fragments are retired and every file's new ones get the next ids (its words
    join the vocabulary)."""
    first = changes.first_new
    for source, analysis in zip(changed, analyses):
        file_id = index.file_id(source.path)
        if file_id is None:
            file_id = index.add_file_id(source.path)
            changes.same_symbols = False
            _note_changed_names(changes, resolver.changed_names(None, analysis.syntax))
        else:
            record = index.files[file_id]
            assert record is not None
            changes.retire(record)
            old = index.syntax[file_id]
            moves = definition_moves(old, analysis.syntax)
            if moves is None:
                changes.same_symbols = False
                _note_changed_names(changes, None if old is None else resolver.changed_names(old, analysis.syntax))
                if old is not None:
                    changes.node_moves[file_id] = surviving_definitions(old, analysis.syntax)
            else:
                changes.node_moves[file_id] = moves
        n = int(analysis.fragments.starts.shape[0])
        index.set_file(file_id, FileRecord(source.path, source.language, source.digest, source.size,
                                           source.mtime_ns, first, n, source.masked,
                                           analysis.syntax.over_node_limit), analysis)
        resolver.learn(file_id, analysis.syntax)
        if not resolver.covers(file_id):
            changes.gone_calls[file_id] = None
        changes.touched_files.add(file_id)
        changes.new_docs.extend(analysis.window_term_ids(index.vocabulary))
        changes.new_ids.append(np.arange(first, first + n, dtype=np.int64))
        changes.new_cover.append((file_id, first, analysis.fragments))
        changes.new_file_of.append(np.full(n, file_id, dtype=np.int32))
        changes.new_starts.append(analysis.fragments.starts)
        changes.new_ends.append(analysis.fragments.ends)
        first += n


def retire_and_append_fragments(index: RepoIndex, changes: FileChanges) -> np.ndarray:
    """The fragment arrays (live, file, lines) drop the retired ids and take the new fragments;
    returns the ids that were live until now (int64), which the postings and row sums subtract."""
    dead = changes.dead
    newly_dead = dead[index.live[dead]]
    n_added = int(changes.added.shape[0])
    live = np.concatenate([index.live, np.ones(n_added, dtype=bool)])
    live[dead] = False
    index.live = live
    index.fragment_file = np.concatenate([index.fragment_file, *changes.new_file_of])
    index.fragment_file[dead] = -1
    index.note_replaced_fragments(newly_dead, changes.new_cover)
    index.fragment_start = np.concatenate([index.fragment_start, *changes.new_starts])
    index.fragment_end = np.concatenate([index.fragment_end, *changes.new_ends])
    return newly_dead


def patch_postings(index: RepoIndex, changes: FileChanges, newly_dead: np.ndarray) -> None:
    """BM25: the retired documents' terms leave the document frequencies, a segment of the new
    documents is appended, and the lengths and statistics follow (the fragments already moved)."""
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
    n_added = len(changes.new_docs)
    if n_added:
        segment = build_segment(changes.first_new, changes.new_docs, n_terms)
        index.segments.append(segment)
        df += document_frequencies(segment, n_terms, index.live)
        appended_segment(index.segments, index.base_segments, index.live)
    index.doc_len = np.concatenate([index.doc_len, np.fromiter((d.shape[0] for d in changes.new_docs),
                                                               dtype=np.int64, count=n_added)])
    index.df = df
    index.stats = compute_stats(df, index.doc_len, index.live, index.config.bm25, before=index.stats)


def _note_changed_names(changes: FileChanges, names: frozenset[str] | None) -> None:
    """Add one file's changed names (None: any name may have changed)."""
    if names is None or changes.changed_names is None:
        changes.changed_names = None
    else:
        changes.changed_names |= names


def patch_calls(index: RepoIndex, changes: FileChanges, resolver: CallResolution) -> None:
    """Call edges: the removed files' and unresolved languages' rows go; the changed files and the
    files whose calls may now resolve differently are resolved again. The other files' rows into
    the edited files follow their definitions' new nodes: all of them when every edited file kept
    its symbols' shape (a change inside bodies), else those of the files that may ask for none of
    the changed names (a function typed into a module many files import re-resolves none of them;
    see docs/measurements.md#an-edit)."""
    touched = changes.touched_files

    def with_calls(file_ids: Iterable[int]) -> set[int]:
        return {i for i in file_ids if resolves_calls(index.syntax[i])}

    index.replace_calls(changes.gone_calls)
    callers = index.callers_of(touched) - touched
    if changes.same_symbols:
        # Edits inside bodies: other files resolve to the same definitions, which only moved.
        remapped, unfollowed = _follow_moves(index, callers, changes.node_moves)
        affected = with_calls(touched) | unfollowed
    else:
        names = None if changes.changed_names is None else frozenset(changes.changed_names)
        dependents = with_calls(resolver.affected_by(touched, names, changes.removed_modules)) - touched
        if names is None:
            remapped, unfollowed = {}, callers
        else:
            remapped, unfollowed = _follow_moves(index, callers - dependents, changes.node_moves)
        affected = with_calls(touched) | dependents | unfollowed
    index.replace_calls(remapped)
    index.replace_calls({file_id: call_array(resolver.resolve_file(file_id)) for file_id in affected})


def _follow_moves(index: RepoIndex, files: Iterable[int],
                  node_moves: dict[int, np.ndarray]) -> tuple[dict[int, np.ndarray], set[int]]:
    """The call rows of `files` with their targets in moved files taken to the new nodes, and
    the files with a row into a definition that went (they must be resolved again)."""
    files = sorted(files)
    if not files:
        return {}, set()
    # Every file's rows at once (a module many files import has many callers; a loop over them
    # took a third of a millisecond an edit).
    parts = [index.calls[file_id] for file_id in files]
    bounds = np.cumsum([0, *(part.shape[0] for part in parts)])
    edges = np.concatenate(parts)
    moved = edges.copy()
    for target, moves in node_moves.items():
        rows = np.flatnonzero(edges[:, 2] == target)
        if rows.size:
            moved[rows, 3] = moves[edges[rows, 3]]
    owner = np.repeat(np.arange(len(files)), np.diff(bounds))
    lost = np.zeros(len(files), dtype=bool)
    lost[owner[moved[:, 3] < 0]] = True
    changed = np.zeros(len(files), dtype=bool)
    changed[owner[(moved != edges).any(axis=1)]] = True
    unfollowed = {files[i] for i in np.flatnonzero(lost).tolist()}
    remapped = {files[i]: moved[bounds[i] : bounds[i + 1]].copy() for i in np.flatnonzero(changed & ~lost).tolist()}
    return remapped, unfollowed


def patch_relations(index: RepoIndex, changes: FileChanges,
                    window_vectors: Callable[[RepoIndex], WindowVectors] | None = None) -> None:
    """W: entries with a retired end leave W_delta; the new fragments' rows are searched on the
    graph kept between edits, kept to their top lists, and mirrored (an old fragment also takes a
    new neighbour that beats its weakest kept relation); thresholds grow by the new rows' bars."""
    settings = index.config.relations
    added = changes.added
    n_added = int(added.shape[0])
    n_total = index.n_fragments
    live = index.live
    thresholds = np.concatenate([index.thresholds, np.full(n_added, settings.relation_cutoff)])
    old_rows, old_cols, old_values = index.delta_entries
    keep_old = live[old_rows] & live[old_cols]
    old_rows, old_cols, old_values = old_rows[keep_old], old_cols[keep_old], old_values[keep_old]
    if n_added:
        limit = settings.max_relations_per_fragment
        n_old = n_total - n_added
        rows, cols, values, _ = index.relation_rows(added, NoProgress(), keep=0, full=False,
                                                    window_vectors=window_vectors)
        top_rows, top_cols, top_values = strongest_per_row(rows, cols, values, limit)
        # The new ids are one run at the end, [n_old, n_total): their bars are counted on it alone.
        thresholds[n_old:] = row_thresholds(top_rows - n_old, top_values, n_added, limit, settings.relation_cutoff)
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


def definition_moves(old: FileSyntax | None, new: FileSyntax) -> np.ndarray | None:
    """Map old node -> new node of each definition when a file kept its symbols' shape.

    The shape is what other files' call resolution depends on: definitions (scope, name, kind,
    nesting, bases) in order and imports. None when it changed (dependents must be re-resolved).
    """
    if old is None or old.language != new.language or not resolves_calls(new):
        return None

    if symbol_shape(old) != symbol_shape(new):
        return None
    moves = np.full(old.n_nodes, -1, dtype=np.int64)
    for before, after in zip(old.definitions, new.definitions):
        moves[before.node] = after.node
    return moves


def surviving_definitions(old: FileSyntax, new: FileSyntax) -> np.ndarray:
    """Map old node -> new node of each definition that is still there, the same (scope, name,
    kind, nesting, bases) and the only one so in both versions; -1 for every other node."""
    def by_identity(syntax: FileSyntax) -> dict[tuple, list[int]]:
        nodes: dict[tuple, list[int]] = {}
        for d in syntax.definitions:
            nodes.setdefault((d.scope, d.name, d.kind, d.in_function, d.bases), []).append(d.node)
        return nodes

    moves = np.full(old.n_nodes, -1, dtype=np.int64)
    after = by_identity(new)
    for identity, nodes in by_identity(old).items():
        kept = after.get(identity)
        if len(nodes) == 1 and kept is not None and len(kept) == 1:
            moves[nodes[0]] = kept[0]
    return moves


def _segment_rows_terms(segment: TermSegment, doc_ids: np.ndarray) -> np.ndarray:
    """Term ids present in the given documents of a segment (one entry per document and term)."""
    local = doc_ids - segment.first_doc
    local = local[(local >= 0) & (local < segment.tf.shape[0])]
    return segment.doc_terms(local)
