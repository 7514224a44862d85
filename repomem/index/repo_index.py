"""The repository index made whole (`build_index`) or edited in place (`apply_changes`).

The index itself, its fields and queries, is `index_state.RepoIndex`; an edit's steps are in
`index_edit`. The names other modules know the index by are exported from here too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from repomem.allocator import release_free_memory
from repomem.config import Config
from repomem.index.bm25 import TermSegment, build_segment, compute_stats, document_frequencies
from repomem.index.calls import CallResolution, resolves_calls
from repomem.index.helper_threads import run_parts
from repomem.index.index_edit import (
    FileChanges,
    drop_removed_files,
    patch_calls,
    patch_postings,
    patch_relations,
    place_changed_files,
    retire_and_append_fragments,
)
from repomem.index.index_state import RepoIndex, StructureUnavailable
from repomem.index.indexed_files import FileAnalysis, FileRecord, analyze_file
from repomem.index.relations import WindowVectors, symmetric_matrix
from repomem.index.scan import SourceFile
from repomem.languages.parsed import call_array
from repomem.progress import NoProgress, Progress

__all__ = ["FileAnalysis", "FileRecord", "RepoIndex", "StructureUnavailable", "analyze_file", "apply_changes",
           "build_index"]


def build_index(
    root: Path,
    config: Config,
    sources: Sequence[SourceFile],
    skipped: Sequence[tuple[str, str]] = (),
    progress: Progress | None = None,
    analyses: Sequence[FileAnalysis] | None = None,
    window_vectors: Callable[[RepoIndex], WindowVectors] | None = None,
) -> RepoIndex:
    """A complete index of `sources` (already read and filtered by the scan); `window_vectors`:
    the windows' embeddings once they are known, for eq. 6 (relations.semantic_neighbours).

    `sources` and `analyses` (in the order of `sources` sorted by path), when they are lists,
    are emptied once read: the texts and the BM25 tokens by line are not resident during the
    relation phase, the cold build's peak (docs/measurements.md#memory-of-a-cold-build).
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
    live = np.ones(n_fragments, dtype=bool)
    syntax, file_fragments = [a.syntax for a in analyses], [a.fragments for a in analyses]
    fragment_start = np.concatenate([a.fragments.starts for a in analyses] or [np.zeros(0, np.int32)])
    fragment_end = np.concatenate([a.fragments.ends for a in analyses] or [np.zeros(0, np.int32)])
    for given in consumed:
        if isinstance(given, list):
            given.clear()
    del sources, analyses

    def postings() -> tuple[TermSegment, np.ndarray, np.ndarray]:
        segment = build_segment(0, doc_terms, len(vocabulary))
        doc_len = np.fromiter((t.shape[0] for t in doc_terms), dtype=np.int64, count=n_fragments)
        doc_terms.clear()  # not needed past the segment: the relations need the room
        return segment, doc_len, document_frequencies(segment, len(vocabulary), live)

    def resolved_calls() -> tuple[dict[int, np.ndarray], CallResolution]:
        resolver = CallResolution(syntax, config.graph)
        progress.start("calls", sum(1 for s in syntax if resolves_calls(s)))
        calls = {}
        for file_id, file_syntax in enumerate(syntax):
            if resolves_calls(file_syntax):
                calls[file_id] = call_array(resolver.resolve_file(file_id))
                progress.advance()
        return calls, resolver

    # The calls resolved here while a helper thread builds the postings: each is one core's work
    # (the postings kernel releases the GIL), and they were the longest stretch of a cold build
    # with one core idle (docs/measurements.md#parsing-and-analysis).
    (calls, resolver), (segment, doc_len, df) = run_parts([resolved_calls, postings])
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
        calls=calls,
        skipped=list(skipped),
        base_files=set(range(len(records))),
    )
    # The resolver's tables are not kept: they were resident through the relation searches, a cold
    # build's peak of memory, and the first edit or call-based prompt makes them again
    # (docs/measurements.md#memory-of-a-cold-build).
    del resolver
    all_rows = np.arange(n_fragments, dtype=np.int64)
    # The weights as W keeps them (index_state.stored_weights), held as float32 until W is made.
    rows, cols, values, bars = index.relation_rows(all_rows, progress, window_vectors=window_vectors, stored=True)
    release_free_memory()  # the searches' scratch and pair lists, before W is made (the peak)
    index.thresholds = bars
    entries = [rows, cols, values]
    del rows, cols, values  # the entries are not resident beside the matrix made of them
    index.w_base = symmetric_matrix(entries, n_fragments)
    index.rowsum = index.relation_times(np.ones(n_fragments))
    return index


def apply_changes(
    index: RepoIndex,
    changed: Sequence[SourceFile],
    removed: Sequence[str],
    analyses: Sequence[FileAnalysis] | None = None,
    window_vectors: Callable[[RepoIndex], WindowVectors] | None = None,
) -> list[int]:
    """Replace, add and remove files in place; returns the ids of the new fragments.

    Touches only what the change reaches: the new fragments' postings and W rows (plus their
    mirrored entries), the changed files' call edges and those of files importing them. Paths
    routed *through* a changed file between two other files keep their old strength until the
    next compaction (`repomem index --full`). The steps are `index_edit`'s.
    """
    index.ensure_structure()
    if analyses is None:
        trees = index.edit_trees()
        analyses = [analyze_file(source, index.config, trees) for source in changed]
    resolver = index.resolver()
    changes = FileChanges(first_new=index.n_fragments)
    drop_removed_files(index, removed, resolver, changes)
    place_changed_files(index, changed, analyses, resolver, changes)
    newly_dead = retire_and_append_fragments(index, changes)
    patch_postings(index, changes, newly_dead)
    patch_calls(index, changes, resolver)
    patch_relations(index, changes, window_vectors)
    index.rowsum = index.live_rowsum(newly_dead)
    index.generation += 1
    return changes.added.tolist()
