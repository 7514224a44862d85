"""RepoService: the one object the CLI, the language server and the evaluator talk to.

It owns a repository's index in memory: loads it (or builds it), keeps it current with the
files on disk and with unsaved editor buffers, saves it atomically, and answers retrievals.
Expected failures come back as `Failure` values.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import pickle
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from repomem.allocator import release_free_memory
from repomem.child_processes import die_with_parent
from repomem.config import Config, ScanConfig, load_config
from repomem.cyclic_gc import rarer_collections
from repomem.failures import Failure, FailureKind
from repomem.index.batch import AnalysisBatch, pack_analyses, unpack_analyses
from repomem.index.kernels import warm_up
from repomem.index.repo_index import (
    FileAnalysis,
    RepoIndex,
    StructureUnavailable,
    analyze_file,
    apply_changes,
    build_index,
)
from repomem.index.scan import (
    Candidate,
    Skipped,
    SourceFile,
    excluded_reason,
    list_candidates,
    printable_path,
    read_source,
    secret_reason,
    source_from_bytes,
)
from repomem.index.secrets import mask_secrets
from repomem.index.store import index_dir, index_outside_repo, load_index, save_index
from repomem.languages.parsed import FileSyntax
from repomem.languages.registry import language_of
from repomem.memory.entities import EntityMemory
from repomem.memory.gists import GistMemory
from repomem.memory.summary_tree import SummaryTree
from repomem.memory.written_summaries import WrittenSummaries
from repomem.positions import Cursor, locate, read_text_file, relative_to_root, text_before_cursor
from repomem.progress import NoProgress, Progress
from repomem.retrieval.definitions import reachable_definitions, signature_span
from repomem.retrieval.scope import repository_imports
from repomem.retrieval.scoring import (
    Lift,
    ScoredFragment,
    score_fragments,
    scored_fragments,
    strongest_lifts,
    top_fragments,
)
from repomem.retrieval.signatures import called_signature, imported_signatures

# Below this many files a worker pool costs more than it saves.
PARALLEL_MIN_FILES = 64


@dataclass(frozen=True)
class IndexReport:
    root: Path
    files: int
    fragments: int  # live fragments
    nodes: int
    edges: int
    seconds: float
    index_bytes: int
    action: str  # "built", "updated", "unchanged"
    reason: str  # why a full build happened ("" otherwise)
    changed: int  # files added or modified in this run
    removed: int
    skipped: tuple[tuple[str, str], ...]
    masked: tuple[tuple[str, int], ...] = ()  # (path, secrets masked) of files holding any
    over_node_limit: tuple[str, ...] = ()  # files searched as text only (graph.max_file_nodes)
    # Said once to the user: the index on disk was not trusted (not sealed here, or damaged) and
    # was rebuilt ("" otherwise). A missing, old-format or re-configured index is no news.
    warning: str = ""


@dataclass(frozen=True)
class Retrieval:
    cursor: Cursor
    query_first_line: int  # 0-based
    fragments: tuple[ScoredFragment, ...]
    alpha: float
    k: int
    timings_ms: dict[str, float]


def _analyze_chunk(args: tuple[list[SourceFile], Config]) -> list[FileAnalysis]:
    sources, config = args
    return [analyze_file(source, config) for source in sources]


def read_candidate(
    root: Path, candidate: Candidate, buffers: dict[str, str], config: ScanConfig,
) -> SourceFile | Skipped:
    """A file as the index sees it: the editor's unsaved buffer if one is open, else the disk."""
    buffer = buffers.get(candidate.path)
    if buffer is not None:
        return source_from_bytes(candidate.path, candidate.language, buffer.encode("utf-8"), 0, config)
    return read_source(root, candidate, config)


def _read_and_analyze_chunk(
    args: tuple[Path, list[Candidate], dict[str, str], Config],
) -> list[tuple[SourceFile, FileAnalysis] | Skipped]:
    """Read, mask and analyze files where the parsing runs (both cores read: Django's 0.9 s of
    reading and masking no longer runs on one core before the parse). The index keeps no text,
    so a source travels back without it (17 MB less to pickle on Django)."""
    root, candidates, buffers, config = args
    out: list[tuple[SourceFile, FileAnalysis] | Skipped] = []
    for candidate in candidates:
        source = read_candidate(root, candidate, buffers, config.scan)
        if isinstance(source, Skipped):
            out.append(source)
        else:
            out.append((dataclasses.replace(source, text=""), analyze_file(source, config)))
    return out


def _in_chunks(function: Callable[[Any], list[Any]], items: Sequence[Any], make_args: Callable[[list[Any]], Any],
               config: Config, progress: Progress) -> list[Any]:
    """`function(make_args(part))` over parts of `items`, results end to end in order: on
    `config.index.workers` processes for large repositories, else here, item by item."""
    workers = max(1, config.index.workers)
    out: list[Any] = []
    if workers == 1 or len(items) < PARALLEL_MIN_FILES:
        for item in items:
            out.extend(function(make_args([item])))
            progress.advance()
        return out
    chunk = max(8, len(items) // (workers * 16))
    parts = [list(items[i : i + chunk]) for i in range(0, len(items), chunk)]
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=die_with_parent,
                             initargs=(os.getpid(),)) as pool:
        for part, results in zip(parts, pool.map(_packed_call, [(function, make_args(p)) for p in parts])):
            out.extend(_unpacked(results))
            progress.advance(len(part))
    return out


# A worker's results: each FileAnalysis (alone or the second of a pair) replaced by its position in
# one AnalysisBatch, which pickles as a few long arrays (repomem.index.batch).
_PackedResults = tuple[list[Any], AnalysisBatch]


def _packed_call(args: tuple[Callable[[Any], list[Any]], Any]) -> _PackedResults:
    """`function(function_args)` in a worker, its analyses packed (see `_unpacked`)."""
    function, function_args = args
    shells: list[Any] = []  # ("analysis", i), ("pair", first item, i) or ("item", anything else)
    analyses: list[FileAnalysis] = []
    for item in function(function_args):
        if isinstance(item, FileAnalysis):
            shells.append(("analysis", len(analyses)))
            analyses.append(item)
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], FileAnalysis):
            shells.append(("pair", item[0], len(analyses)))
            analyses.append(item[1])
        else:
            shells.append(("item", item))
    return shells, pack_analyses(analyses)


def _unpacked(results: _PackedResults) -> list[Any]:
    """The results `_packed_call` packed, in their order."""
    shells, batch = results
    analyses = unpack_analyses(batch)
    out: list[Any] = []
    for shell in shells:
        if shell[0] == "analysis":
            out.append(analyses[shell[1]])
        elif shell[0] == "pair":
            out.append((shell[1], analyses[shell[2]]))
        else:
            out.append(shell[1])
    return out


def analyze_sources(sources: Sequence[SourceFile], config: Config, progress: Progress) -> list[FileAnalysis]:
    """Parse and window files already read (an update's changed files)."""
    progress.start("parsing", len(sources))
    return _in_chunks(_analyze_chunk, sources, lambda part: (part, config), config, progress)


def read_and_analyze(
    root: Path, candidates: Sequence[Candidate], buffers: dict[str, str], config: Config, progress: Progress,
) -> tuple[list[SourceFile], list[FileAnalysis], list[Skipped]]:
    """Read, mask, parse and window every candidate (a full build), in path order: the sources
    (without their text), their analyses, and the files that could not be read."""
    progress.start("parsing", len(candidates))
    ordered = sorted(candidates, key=lambda c: c.path)
    results = _in_chunks(_read_and_analyze_chunk, ordered, lambda part: (root, part, buffers, config), config,
                         progress)
    sources, analyses, unreadable = [], [], []
    for result in results:
        if isinstance(result, Skipped):
            unreadable.append(result)
        else:
            sources.append(result[0])
            analyses.append(result[1])
    results.clear()
    return sources, analyses, unreadable


def _directory_bytes(path: Path) -> int:
    total = 0
    for item in path.rglob("*"):
        try:
            if item.is_file():
                total += item.stat().st_size
        except OSError:
            continue
    return total


class RepoService:
    def __init__(self, root: Path, config: Config, warnings: Sequence[str] = ()):
        self.root = root
        self.config = config
        self._summary_tree: SummaryTree | None = None  # built on first use (strategies "hat", "memwalker")
        self._gists: GistMemory | None = None  # built on first use (strategy "readagent")
        self._entities: tuple[object, EntityMemory] | None = None  # (state of the index, memory): "qrmem"
        self._written: WrittenSummaries | None = None  # with memory.summaries = "model"
        self.warnings = list(warnings)
        self.index: RepoIndex | None = None
        self._buffers: dict[str, str] = {}

    @classmethod
    def open(cls, root: Path, config: Config | None = None) -> RepoService | Failure:
        if not root.exists():
            return Failure("missing-repo", f"{root}: no such folder")
        if not root.is_dir():
            return Failure("not-a-folder", f"{root} is not a folder")
        root = root.resolve()
        warnings: list[str] = []
        if config is None:
            config, warnings = load_config(root)
        if index_outside_repo(root, config):
            warnings.append(f"{root} is read-only: its index lives in {index_dir(root, config)}")
        pointer = index_dir(root, config) / "CURRENT"
        if pointer.is_dir() and not pointer.is_symlink():
            warnings.append(f"{pointer} is a folder, not the index pointer: the index is rebuilt and the folder "
                            "moved aside")
        return cls(root, config, warnings)

    # -- indexing ------------------------------------------------------------------------------

    def _read(self, candidate: Candidate) -> SourceFile | Skipped:
        return read_candidate(self.root, candidate, self._buffers, self.config.scan)

    def _full_build(self, progress: Progress) -> RepoIndex:
        warming = threading.Thread(target=warm_up, name="warm-kernels", daemon=True)
        warming.start()
        candidates, skipped = list_candidates(self.root, self.config.scan)
        warming.join()  # before the parse workers fork: no thread may be mid-compile then
        with rarer_collections(self.config.index.gc_young_threshold):  # the workers inherit it
            sources, analyses, unreadable = read_and_analyze(self.root, candidates, self._buffers, self.config,
                                                             progress)
            reasons = [(s.path, s.reason) for s in (*skipped, *unreadable)]
            return build_index(self.root, self.config, sources, reasons, progress, analyses)

    def _refresh(self, index: RepoIndex, progress: Progress) -> tuple[int, int, int]:
        """Bring `index` up to date with the disk (and open buffers).

        Returns (changed, removed, restamped): restamped files were touched without changing.
        """
        restamped = 0
        candidates, skipped = list_candidates(self.root, self.config.scan)
        present = {c.path for c in candidates}
        changed: list[SourceFile] = []
        unreadable: list[Skipped] = []
        for candidate in candidates:
            record = index.record(candidate.path)
            in_buffer = candidate.path in self._buffers
            if (record is not None and not in_buffer and record.mtime_ns != 0
                    and record.size == candidate.size and record.mtime_ns == candidate.mtime_ns):
                continue
            result = self._read(candidate)
            if isinstance(result, Skipped):
                unreadable.append(result)
                continue
            if record is not None and record.digest == result.digest:
                if not in_buffer:  # touched but equal: remember the new stat, skip re-reading next time
                    file_id = index.file_id(candidate.path)
                    assert file_id is not None
                    index.files[file_id] = dataclasses.replace(record, size=candidate.size,
                                                               mtime_ns=candidate.mtime_ns)
                    restamped += 1
                continue
            changed.append(result)
        unreadable_paths = {s.path for s in unreadable}
        removed = [r.path for r in index.files
                   if r is not None and (r.path not in present or r.path in unreadable_paths)]
        index.skipped = [(s.path, s.reason) for s in (*skipped, *unreadable)]
        if changed or removed:
            index.ensure_structure()
            progress.start("updating", len(changed) + len(removed))
            apply_changes(index, changed, removed, analyze_sources(changed, self.config, NoProgress()))
            progress.advance(len(changed) + len(removed))
        return len(changed), len(removed), restamped

    def ensure_index(self, progress: Progress | None = None, full: bool = False,
                     save: bool = True, structure: bool = False) -> IndexReport | Failure:
        """Load, update or build the index, save it if anything changed (and `save`), and report.

        `structure`: also read a loaded index's per-file structure now (a command that will need it
        anyway), so that a damaged one is rebuilt here rather than failing halfway through."""
        progress = progress or NoProgress()
        started = time.perf_counter()
        directory = index_dir(self.root, self.config)
        reason = "--full requested" if full else ""
        warning = ""
        index: RepoIndex | None = None
        restamped = 0
        if not full:
            loaded = self.index if self.index is not None else load_index(self.root, self.config)
            if isinstance(loaded, Failure):
                reason = loaded.message if loaded.kind != FailureKind.NO_INDEX else "no index yet"
                if loaded.kind in (FailureKind.DAMAGED_INDEX, FailureKind.UNTRUSTED_INDEX):
                    warning = f"{loaded.message}; rebuilt it"
            else:
                index = loaded
        try:
            if index is None:
                index = self._full_build(progress)
                action, changed, removed = "built", index.n_live_files, 0
            else:
                restamped = 0
                try:
                    if structure:
                        index.ensure_structure()
                    changed, removed, restamped = self._refresh(index, progress)
                    if restamped and save:
                        index.ensure_structure()  # the save writes it (index/store.save_index)
                    action = "updated" if changed or removed else "unchanged"
                except StructureUnavailable as error:
                    reason = f"index structure unreadable ({error})"
                    warning = f"{reason}; rebuilt it"
                    changed, removed = 0, 0
                    index = self._full_build(progress)
                    action = "built"
                if action != "built" and self.needs_compaction(index):
                    reason = "many changes since the last full build"
                    index = self._full_build(progress)
                    action = "built"
            if save and (action != "unchanged" or index.snapshot is None or restamped):
                save_index(index, directory, index.snapshot)
            if action == "built":
                release_free_memory()  # what the build freed, back to the system (a server lives on)
        except OSError as error:
            return Failure("index-write", f"cannot write the index in {directory}: {error.strerror or error}")
        self.index = index
        return IndexReport(
            root=self.root,
            files=index.n_live_files,
            fragments=int(index.live.sum()),
            nodes=index.graph_nodes,
            edges=index.graph_edges,
            seconds=time.perf_counter() - started,
            index_bytes=_directory_bytes(index.snapshot) if index.snapshot is not None else 0,
            action=action,
            reason=reason,
            changed=changed,
            removed=removed,
            skipped=tuple(tuple(s) for s in index.skipped),  # type: ignore[misc]
            masked=tuple((r.path, r.masked) for r in index.files if r is not None and r.masked),
            over_node_limit=tuple(r.path for r in index.files if r is not None and r.over_node_limit),
            warning=warning,
        )

    def needs_compaction(self, index: RepoIndex) -> bool:
        n_base = index.w_base.shape[0]
        if n_base == 0:
            return index.n_fragments > 0
        replaced = index.n_fragments - n_base
        return replaced > self.config.index.compact_ratio * n_base

    # -- checkpoints -----------------------------------------------------------------------------

    def checkpoint(self) -> bytes | Failure:
        """The in-memory index as it is now, to come back to with `rollback`.

        Buffer updates are incremental: paths routed through a changed file keep their strength
        until the next full build (index/repo_index.apply_changes), so an index that overlaid and
        dropped a buffer differs slightly from one that never did. An evaluation rolls back after
        every task, so each task sees the index plus its own buffer only, whatever ran before."""
        if self.index is None:
            return Failure("no-index", "the index is not loaded")
        try:
            self.index.ensure_structure()
        except StructureUnavailable:
            # The structure is read lazily from the snapshot this index was loaded from; another
            # process saved newer ones meanwhile and pruned it (evaluations started side by side on
            # one repositories folder). The current snapshot, or a rebuild, has it.
            self.index = None
            report = self.ensure_index()
            if isinstance(report, Failure):
                return report
            assert self.index is not None
            try:
                self.index.ensure_structure()
            except StructureUnavailable as error:
                return Failure("damaged-index", f"index structure unreadable ({error}); rebuild it")
        return pickle.dumps(self.index, protocol=pickle.HIGHEST_PROTOCOL)

    def rollback(self, checkpoint: bytes) -> None:
        """Back to a `checkpoint`: its index, and no editor buffers."""
        self.index = pickle.loads(checkpoint)
        self._buffers.clear()

    # -- editor buffers ------------------------------------------------------------------------

    def set_buffer(self, path: str, text: str) -> None | Failure:
        """Index an unsaved editor buffer instead of the file on disk (in memory only)."""
        if self.index is None:
            return Failure("no-index", "the index is not loaded")
        self._buffers[path] = text
        return self._update_one(path)

    def drop_buffer(self, path: str) -> None | Failure:
        """Forget a buffer (closed or saved): the file on disk counts again."""
        if self._buffers.pop(path, None) is None or self.index is None:
            return None
        return self._update_one(path)

    def file_changed(self, path: str) -> None | Failure:
        """A file changed on disk (saved, created, deleted): re-index it unless a buffer overlays it."""
        if self.index is None or path in self._buffers:
            return None
        return self._update_one(path)

    def save(self) -> None | Failure:
        """Write the in-memory index as a new snapshot. Files indexed from buffers carry mtime 0,
        so the next load re-reads them from disk rather than trusting unsaved text."""
        if self.index is None:
            return Failure("no-index", "the index is not loaded")
        directory = index_dir(self.root, self.config)
        try:
            save_index(self.index, directory, self.index.snapshot)
        except OSError as error:
            return Failure("index-write", f"cannot write the index in {directory}: {error.strerror or error}")
        except StructureUnavailable as error:  # another process pruned the snapshot it would read
            self.index = None
            return Failure("damaged-index", f"index structure unreadable ({error}); rebuild it")
        return None

    def _update_one(self, path: str) -> None | Failure:
        """Re-index one file from its buffer or the disk (a vanished file leaves the index)."""
        assert self.index is not None
        reason = excluded_reason(path, self.config.scan) or secret_reason(self.root, path, self.config.scan)
        if reason is not None:
            return Failure("not-indexed", f"{printable_path(path)}: not indexed ({reason})")
        language = language_of(path)
        assert language is not None
        text = self._buffers.get(path)
        full = self.root / path
        if text is not None:
            source: SourceFile | Skipped = source_from_bytes(path, language, text.encode("utf-8"), 0,
                                                             self.config.scan)
        elif full.is_file():
            stat = full.stat()
            source = read_source(self.root, Candidate(path, language, stat.st_size, stat.st_mtime_ns),
                                 self.config.scan)
        else:
            source = Skipped(path, "no such file")
        record = self.index.record(path)
        try:
            if isinstance(source, Skipped):
                if record is not None:
                    apply_changes(self.index, [], [path])
                return None if source.reason == "no such file" else Failure("not-indexed", f"{path}: {source.reason}")
            if record is None or record.digest != source.digest:
                apply_changes(self.index, [source], [])
        except StructureUnavailable as error:
            self.index = None
            return Failure("damaged-index", f"index structure unreadable ({error}); rebuild it")
        return None

    # -- retrieval -----------------------------------------------------------------------------

    def cursor_at(self, file: Path, line: int, column: int | None) -> Cursor | Failure:
        """Check a 1-based FILE:LINE[:COL] against this repository."""
        relative = relative_to_root(self.root, file)
        if isinstance(relative, Failure):
            return relative
        text = self._buffers.get(relative)
        if text is None:
            read = read_text_file(self.root / relative)
            if isinstance(read, Failure):
                return read
            text = read
        return locate(self.root, relative, text, line, column, self.config.scan)

    def retrieve(
        self,
        query_text: str,
        k: int | None = None,
        alpha: float | None = None,
        excluded: np.ndarray | None = None,
        unlisted: np.ndarray | None = None,
        anchored: int | None = None,
    ) -> list[ScoredFragment]:
        """Top K for a query; `excluded` / `unlisted` as in scoring.score_fragments; `anchored`: BM25's
        best matches kept at the head of the list when alpha > 0 (None: prompt.anchor_matches)."""
        assert self.index is not None, "call ensure_index first"
        k = self.config.retrieval.top_k if k is None else k
        alpha = self.config.retrieval.alpha if alpha is None else alpha
        budget_ms = self.config.retrieval.time_budget_ms
        deadline = time.perf_counter() + budget_ms / 1000 if budget_ms > 0 else None
        scores = score_fragments(self.index, query_text, alpha, excluded, deadline, unlisted)
        anchored = self.config.prompt.anchor_matches if anchored is None else anchored
        return top_fragments(self.index, scores, k, anchored if alpha else 0)

    def explain(self, cursor: Cursor, alpha: float | None = None, fragments: Sequence[int] | None = None,
                excluded: np.ndarray | None = None,
                unlisted: np.ndarray | None = None) -> list[tuple[ScoredFragment, Lift | None]]:
        """Scores of `fragments` (default: the top K) for the cursor's query, each with the
        neighbour that lifted it most through W (no time budget: an explanation is exact)."""
        assert self.index is not None, "call ensure_index first"
        alpha = self.config.retrieval.alpha if alpha is None else alpha
        query, _ = text_before_cursor(cursor, self.config.retrieval.query_lines)
        excluded, unlisted = self.cursor_masks(cursor, excluded, unlisted)
        scores = score_fragments(self.index, query, alpha, excluded, None, unlisted)
        if fragments is None:
            chosen = top_fragments(self.index, scores, self.config.retrieval.top_k,
                                   self.config.prompt.anchor_matches if alpha else 0)
        else:
            live = [f for f in fragments if 0 <= f < self.index.n_fragments and self.index.live[f]]
            chosen = scored_fragments(self.index, scores, live)
        lifts = strongest_lifts(self.index, scores, [f.fragment for f in chosen])
        return list(zip(chosen, lifts))

    def visible_fragments(self, path: str, first_line: int, last_line: int) -> np.ndarray:
        """Ids of the file's fragments overlapping lines [first_line, last_line] (0-based)."""
        assert self.index is not None
        file_id = self.index.file_id(path)
        if file_id is None:
            return np.zeros(0, dtype=np.int64)
        record = self.index.files[file_id]
        assert record is not None
        ids = np.arange(record.first_fragment, record.first_fragment + record.n_fragments)
        starts, ends = self.index.fragment_start[ids], self.index.fragment_end[ids]
        return ids[(starts <= last_line) & (ends > first_line)]

    def cursor_masks(self, cursor: Cursor, excluded: np.ndarray | None = None,
                     unlisted: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(excluded, unlisted) fragment ids for a retrieval at `cursor` (see score_fragments).

        The current file's windows over the query lines are never offered: the prompt shows them.
        With `retrieval.visible_feed_environment` they still feed their neighbours' s_env (the
        environment starts at the cursor), otherwise they are excluded. `excluded` / `unlisted`
        add the caller's own (e.g. RepoEval's unseen lines, and its leakage rule).
        """
        _, first_line = text_before_cursor(cursor, self.config.retrieval.query_lines)
        visible = self.visible_fragments(cursor.path, first_line, cursor.line)
        excluded = np.zeros(0, dtype=np.int64) if excluded is None else excluded.astype(np.int64)
        unlisted = np.zeros(0, dtype=np.int64) if unlisted is None else unlisted.astype(np.int64)
        if self.config.retrieval.visible_feed_environment:
            return excluded, np.union1d(unlisted, visible)
        return np.union1d(excluded, visible), unlisted

    def retrieve_at(
        self,
        cursor: Cursor,
        k: int | None = None,
        alpha: float | None = None,
        exclude_visible: bool = True,
        *,
        query: str | None = None,
        excluded: np.ndarray | None = None,
        unlisted: np.ndarray | None = None,
        anchored: int | None = None,
    ) -> Retrieval:
        """Top K for a cursor: the query is the last lines before it (or `query`, e.g. RepoCoder's
        window slid over a draft); the masks are the cursor's own (see `cursor_masks`) plus
        `excluded` / `unlisted`."""
        started = time.perf_counter()
        window, first_line = text_before_cursor(cursor, self.config.retrieval.query_lines)
        if exclude_visible:
            excluded, unlisted = self.cursor_masks(cursor, excluded, unlisted)
        k = self.config.retrieval.top_k if k is None else k
        alpha = self.config.retrieval.alpha if alpha is None else alpha
        fragments = self.retrieve(window if query is None else query, k, alpha, excluded, unlisted, anchored)
        elapsed = (time.perf_counter() - started) * 1000
        return Retrieval(cursor, first_line, tuple(fragments), alpha, k, {"retrieve": elapsed})

    def definitions_at(self, cursor: Cursor, query: str, count: int, max_lines: int) -> list[ScoredFragment]:
        """Signature blocks (`max_lines` lines each at most) of up to `count` definitions the
        cursor's file imports or calls in other files, best first (retrieval/definitions.py). Each
        carries the id of the window holding its def line and s_rel = its rank score."""
        if self.index is None or count <= 0:
            return []
        out = []
        lines_of: dict[str, list[str]] = {}  # each file read once, however many of its definitions
        for site in reachable_definitions(self.index, cursor.path, query, self.config.bm25, count):
            if site.path not in lines_of:
                lines_of[site.path] = self.file_lines(site.path)
            lines = lines_of[site.path]
            start, stop = signature_span(lines, site.start_line, site.end_line, max_lines)
            out.append(ScoredFragment(site.fragment, site.path, start, stop, 0.0, 0.0, site.score))
        return out

    # -- what the prompt levers ask of the index (repomem/completion/levers/) -----------------

    def fragments_live(self, fragments: Sequence[int]) -> bool:
        """Whether every one of these fragment ids still names a live window of the index."""
        index = self.index
        return index is not None and all(0 <= f < index.n_fragments and index.live[f] for f in fragments)

    def repository_imports(self, path: str, lines: Sequence[str], prefixes: Sequence[str], before: int,
                           limit: int) -> list[tuple[int, int]]:
        """Line spans of `path`'s import statements above line `before` that bind repository code
        (the index's import edges), `limit` lines at most; [] without an index."""
        if self.index is None:
            return []
        return repository_imports(self.index, path, lines, prefixes, before, limit)

    def imported_signatures(self, path: str, shown_imports: str, visible: str, limit: int,
                            max_chars: int) -> list[str]:
        """Masked signature lines (`max_chars` each at most) of what `shown_imports` bind, leaving
        out names `visible` calls (retrieval/signatures.py)."""
        if self.index is None:
            return []
        lines = imported_signatures(self.index, path, shown_imports, visible, limit, max_chars,
                                    self.unmasked_lines, self.config.bm25)
        return [self.mask(line) for line in lines]

    def called_signature(self, path: str, code: str, max_chars: int) -> tuple[str, str] | None:
        """(name, signature line of `max_chars` at most, unmasked) of the first repository function
        or class `code` calls through `path`'s imports; None without an index or when none qualifies."""
        if self.index is None:
            return None
        return called_signature(self.index, path, code, max_chars, self.unmasked_lines)

    def summary_tree(self) -> SummaryTree:
        """The repository's summary tree (repomem/memory/summary_tree.py), brought up to date with
        the index: only files whose content changed since the last call are re-summarised, and
        the folders above them."""
        files, source = self._memory_sources()
        written = self.written_summaries()
        lookup = written.get if written is not None else None
        if self._summary_tree is None:
            self._summary_tree = SummaryTree.build(files, source, lookup)
        else:
            self._summary_tree.update(files, source, lookup)
        return self._summary_tree

    def gist_memory(self) -> GistMemory:
        """ReadAgent's pages and gists (repomem/memory/gists.py), re-paginated per changed file."""
        files, source = self._memory_sources()
        written = self.written_summaries()
        if self._gists is None or self._gists.page_lines != self.config.memory.page_lines:
            self._gists = GistMemory(self.config.memory.page_lines)
        self._gists.update(files, source, written.get if written is not None else None)
        return self._gists

    def entity_memory(self) -> EntityMemory:
        """QRMeM's entity memory (repomem/memory/entities.py), rebuilt when an indexed file changed."""
        assert self.index is not None, "call ensure_index first"
        state = (id(self.index), hash(frozenset((r.path, r.digest) for r in self.index.files if r is not None)))
        if self._entities is None or self._entities[0] != state:
            self._entities = (state, EntityMemory(self.index))
        return self._entities[1]

    def written_summaries(self) -> WrittenSummaries | None:
        """Model-written summaries when memory.summaries = "model" (re-read after `summarise`
        appended to them; the memories built from the old ones are rebuilt)."""
        if self.config.memory.summaries != "model":
            return None
        if self._written is None or not self._written.current():
            self._written = self.open_written_summaries()
            self._summary_tree = self._gists = None
        return self._written

    def open_written_summaries(self) -> WrittenSummaries:
        return WrittenSummaries.load(index_dir(self.root, self.config))

    def _memory_sources(self) -> tuple[dict[str, str], Callable[[str], tuple[FileSyntax | None, list[str]]]]:
        """(path -> content digest of every indexed file, path -> (syntax, masked lines))."""
        index = self.index
        assert index is not None, "call ensure_index first"
        index.ensure_structure()
        files = {r.path: r.digest for r in index.files if r is not None}

        def source(path: str) -> tuple[FileSyntax | None, list[str]]:
            file_id = index.file_id(path)
            return (index.syntax[file_id] if file_id is not None else None), self.file_lines(path)

        return files, source

    def fragments_of_files(self, paths: set[str]) -> np.ndarray:
        """Bool mask, shape (n_fragments,): fragments of the given files."""
        assert self.index is not None
        ids = [i for i in (self.index.file_id(p) for p in paths) if i is not None]
        return np.isin(self.index.fragment_file, np.asarray(ids, dtype=self.index.fragment_file.dtype))

    def fragment_text(self, fragment: ScoredFragment) -> str:
        """The fragment's lines as indexed (editor buffer or disk), or the summary it carries."""
        if fragment.text is not None:
            return fragment.text
        return self.span_text(fragment.path, fragment.start_line, fragment.end_line)

    def span_text(self, path: str, start_line: int, end_line: int) -> str:
        """Lines [start_line, end_line) (0-based) of a file, from its editor buffer or the disk."""
        return "\n".join(self.file_lines(path)[start_line:end_line])

    def file_lines(self, path: str) -> list[str]:
        """A file's lines as indexed: its editor buffer, else the disk ([] when unreadable)."""
        return self.mask(self._raw_text(path)).split("\n")

    def unmasked_lines(self, path: str) -> list[str]:
        """`file_lines` before secret masking, for a caller that masks the few lines it keeps
        (masking a whole file costs milliseconds; a signature is one line of it)."""
        return self._raw_text(path).split("\n")

    def _raw_text(self, path: str) -> str:
        text = self._buffers.get(path)
        if text is None:
            read = read_text_file(self.root / path)
            text = "" if isinstance(read, Failure) else read
        return text

    def mask(self, text: str) -> str:
        """`text` with secrets masked (as indexed): fragments and prompts never carry one."""
        scan = self.config.scan
        return mask_secrets(text, scan.secret_min_length, scan.secret_min_entropy)[0] if scan.mask_secrets else text
