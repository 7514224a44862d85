"""RepoService: the one object the CLI, the language server and the evaluator talk to.

It owns a repository's index in memory and answers questions about it:

- the index's life cycle: load it (or build it), keep it current with the files on disk and with
  unsaved editor buffers, save it atomically, checkpoint and roll it back;
- retrieval: the top K fragments for a query or a cursor, their explanation, and the small
  questions the prompt levers and the memory strategies ask of the index (each a method named
  for what its caller needs: nothing outside this module reads `RepoService.index`);
- the text the index was built from (editor buffer or disk), secrets masked.

The parse pool that reads and analyses files lives in repomem/index/parse_pool.py, the memory
strategies' stores in repomem/memory/stores.py (`RepoService.memories`). Expected failures come
back as `Failure` values.
"""

from __future__ import annotations

import dataclasses
import pickle
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from repomem.allocator import release_free_memory
from repomem.config import Config, load_config
from repomem.cyclic_gc import rarer_collections
from repomem.failures import Failure, FailureKind
from repomem.index.index_folder import index_dir, index_outside_repo
from repomem.index.kernels import warm_up
from repomem.index.parse_pool import analyze_sources, read_and_analyze, read_candidate
from repomem.index.repo_index import RepoIndex, StructureUnavailable, apply_changes, build_index
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
from repomem.index.snapshot_load import load_index
from repomem.index.snapshot_save import save_index
from repomem.languages.registry import language_of
from repomem.memory.stores import MemoryStores
from repomem.positions import Cursor, locate, read_text_file, relative_to_root, text_before_cursor
from repomem.progress import NoProgress, Progress
from repomem.retrieval.definitions import reachable_definitions, signature_span, window_holding
from repomem.retrieval.imported_usage import usage_windows
from repomem.retrieval.scope import repository_imports
from repomem.retrieval.scoring import (
    Lift,
    ScoredFragment,
    best_fragments,
    score_fragments,
    scored_fragments,
    strongest_lifts,
    top_fragments,
)
from repomem.retrieval.shared_callees import shared_callee_sites
from repomem.retrieval.signatures import called_signature, imported_signatures


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
class IndexedFile:
    """One file of the index, as a caller choosing files (a benchmark's cursors) sees it."""

    path: str
    language: str
    fragments: int  # windows of its current text


@dataclass(frozen=True)
class Retrieval:
    cursor: Cursor
    query_first_line: int  # 0-based
    fragments: tuple[ScoredFragment, ...]
    alpha: float
    k: int
    timings_ms: dict[str, float]


def written_what(error: OSError) -> str:
    """An index write's OSError for a person: the reason and the path it concerns."""
    reason = error.strerror or str(error)
    return f"{reason} ({error.filename})" if error.filename else reason


def _fragment_ids(mask: np.ndarray | None) -> np.ndarray:
    """A caller's mask as fragment ids, int64: a boolean mask (one entry per fragment) or ids."""
    if mask is None:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(mask) if mask.dtype == bool else mask.astype(np.int64)


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
        self.warnings = list(warnings)
        self.index: RepoIndex | None = None  # read here only (tests/unit/test_layout.py)
        self._buffers: dict[str, str] = {}
        # The settings and the index are asked anew at each call: an editor replaces `config`,
        # a rebuild or a rollback replaces `index`.
        self.memories = MemoryStores(self._loaded_index, lambda: self.config.memory, self.file_lines,
                                     lambda: index_dir(self.root, self.config))

    @classmethod
    def open(cls, root: Path, config: Config | None = None) -> RepoService | Failure:
        if not root.exists():
            return Failure(FailureKind.MISSING_REPO, f"{root}: no such folder")
        if not root.is_dir():
            return Failure(FailureKind.NOT_A_FOLDER, f"{root} is not a folder")
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
                        index.ensure_structure()  # the save writes it (index/snapshot_save.py)
                    action = "updated" if changed or removed else "unchanged"
                except StructureUnavailable as error:
                    reason = f"index structure unreadable ({error})"
                    warning = f"{reason}; rebuilt it"
                    changed, removed = 0, 0
                    index = self._full_build(progress)
                    action = "built"
                if action != "built" and self._needs_compaction(index):
                    reason = "many changes since the last full build"
                    index = self._full_build(progress)
                    action = "built"
            if save and (action != "unchanged" or index.snapshot is None or restamped):
                save_index(index, directory, index.snapshot)
            if action == "built":
                release_free_memory()  # what the build freed, back to the system (a server lives on)
        except OSError as error:
            return Failure(FailureKind.INDEX_WRITE, f"cannot write the index in {directory}: {written_what(error)}")
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

    def needs_compaction(self) -> bool:
        """Whether edits since the last full build have left the loaded index more dead fragments
        than index.compact_ratio allows (False without an index): time to rebuild it."""
        return self.index is not None and self._needs_compaction(self.index)

    def _needs_compaction(self, index: RepoIndex) -> bool:
        n_base = index.w_base.shape[0]
        if n_base == 0:
            return index.n_fragments > 0
        replaced = index.n_fragments - n_base
        return replaced > self.config.index.compact_ratio * n_base

    # -- the loaded index ------------------------------------------------------------------------

    @property
    def index_loaded(self) -> bool:
        """Whether an index is loaded (`ensure_index` ran, or one was installed)."""
        return self.index is not None

    def _loaded_index(self) -> RepoIndex:
        assert self.index is not None, "call ensure_index first"
        return self.index

    def indexed_files(self) -> list[IndexedFile]:
        """Every file of the loaded index, in the index's order ([] without one)."""
        if self.index is None:
            return []
        return [IndexedFile(r.path, r.language, r.n_fragments) for r in self.index.files if r is not None]

    def prepare_for_edits(self) -> None:
        """Load now what the first edit of the index would (its structure, call tables, edit graph
        and kernels): a server does it before the index is shared. Raises what the loading meets."""
        self._loaded_index().prepare_edits()

    def hand_over_index(self) -> RepoIndex:
        """The loaded index, which this service lets go of: a service that built an index on
        another thread hands it to the one that answers (`install_index`, lsp/session.py)."""
        index = self._loaded_index()
        self.index = None
        return index

    def install_index(self, index: RepoIndex) -> None:
        """Answer from `index` (another service's `hand_over_index`) from now on."""
        self.index = index

    def index_for_measurement(self) -> RepoIndex:
        """The loaded index itself, for the scripts that measure its internals (an edit's phases,
        W's statistics, the reference pipeline): nothing else asks for it, a test holds the
        product to the questions above (tests/unit/test_layout.py)."""
        return self._loaded_index()

    # -- checkpoints -----------------------------------------------------------------------------

    def checkpoint(self) -> bytes | Failure:
        """The in-memory index as it is now, to come back to with `rollback`.

        Buffer updates are incremental: paths routed through a changed file keep their strength
        until the next full build (index/repo_index.apply_changes), so an index that overlaid and
        dropped a buffer differs slightly from one that never did. An evaluation rolls back after
        every task, so each task sees the index plus its own buffer only, whatever ran before."""
        if self.index is None:
            return Failure(FailureKind.NO_INDEX, "the index is not loaded")
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
                return Failure(FailureKind.DAMAGED_INDEX, f"index structure unreadable ({error}); rebuild it")
        return pickle.dumps(self.index, protocol=pickle.HIGHEST_PROTOCOL)

    def rollback(self, checkpoint: bytes) -> None:
        """Back to a `checkpoint`: its index, and no editor buffers."""
        self.index = pickle.loads(checkpoint)
        self._buffers.clear()

    # -- editor buffers ------------------------------------------------------------------------

    def set_buffer(self, path: str, text: str) -> None | Failure:
        """Index an unsaved editor buffer instead of the file on disk (in memory only)."""
        if self.index is None:
            return Failure(FailureKind.NO_INDEX, "the index is not loaded")
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
            return Failure(FailureKind.NO_INDEX, "the index is not loaded")
        directory = index_dir(self.root, self.config)
        try:
            save_index(self.index, directory, self.index.snapshot)
        except OSError as error:
            return Failure(FailureKind.INDEX_WRITE, f"cannot write the index in {directory}: {written_what(error)}")
        except StructureUnavailable as error:  # another process pruned the snapshot it would read
            self.index = None
            return Failure(FailureKind.DAMAGED_INDEX, f"index structure unreadable ({error}); rebuild it")
        return None

    def _update_one(self, path: str) -> None | Failure:
        """Re-index one file from its buffer or the disk (a vanished file leaves the index)."""
        assert self.index is not None
        reason = excluded_reason(path, self.config.scan) or secret_reason(self.root, path, self.config.scan)
        if reason is not None:
            return Failure(FailureKind.NOT_INDEXED, f"{printable_path(path)}: not indexed ({reason})")
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
                return None if source.reason == "no such file" else Failure(FailureKind.NOT_INDEXED,
                                                                            f"{path}: {source.reason}")
            if record is None or record.digest != source.digest:
                apply_changes(self.index, [source], [])
        except StructureUnavailable as error:
            self.index = None
            return Failure(FailureKind.DAMAGED_INDEX, f"index structure unreadable ({error}); rebuild it")
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
        anchored = self.config.prompt.anchor_matches if anchored is None else anchored
        return best_fragments(self.index, query_text, alpha, k, anchored if alpha else 0, excluded, deadline,
                              unlisted)

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
        excluded, unlisted = _fragment_ids(excluded), _fragment_ids(unlisted)
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

    def shared_callee_blocks(self, cursor: Cursor, function_line: int, excluded: np.ndarray | None,
                             unlisted: np.ndarray | None, count: int, lines: int, lines_before: int
                             ) -> list[ScoredFragment]:
        """Up to `count` blocks of `lines` lines at most from functions that call what the cursor's
        function (its def on 0-based `function_line`) calls above the cursor, best first
        (retrieval/shared_callees.py): each starts `lines_before` lines above the function's last
        shared call, stays inside the function, and
        carries the id of the window holding its first line and s_rel = the function's score. A
        block overlapping a window the cursor's masks hide (`cursor_masks`) is left out."""
        if self.index is None or count <= 0:
            return []
        hidden = np.union1d(*self.cursor_masks(cursor, excluded, unlisted))
        out = []
        for site in shared_callee_sites(self.index, cursor.path, function_line, cursor.line, count * 3):
            start = max(site.function_line, site.last_shared_line - lines_before)
            stop = min(site.function_end + 1, start + lines)
            covering = self.visible_fragments(site.path, start, stop - 1)
            file_id = self.index.file_id(site.path)
            holder = None if file_id is None else window_holding(self.index, file_id, start)
            if holder is None or np.isin(covering, hidden).any() or not self.index.live[covering].all():
                continue
            out.append(ScoredFragment(holder, site.path, start, stop, 0.0, 0.0, site.score))
            if len(out) == count:
                break
        return out

    def imported_usage_blocks(self, cursor: Cursor, function_line: int, query: str, excluded: np.ndarray | None,
                              unlisted: np.ndarray | None, count: int) -> list[ScoredFragment]:
        """Up to `count` windows, BM25's best for `query` first, among those that call a repository
        definition the cursor's file imports and its function (def on 0-based `function_line`) has
        not called above the cursor (retrieval/imported_usage.py); the cursor's masks apply."""
        if self.index is None or count <= 0:
            return []
        usage = usage_windows(self.index, cursor.path, function_line, cursor.line)
        if not usage.size:
            return []
        hidden, unlisted = self.cursor_masks(cursor, excluded, unlisted)
        others = np.ones(self.index.live.shape[0], dtype=bool)
        others[usage] = False
        others[hidden] = True
        return [f for f in self.retrieve(query, count, 0.0, others, unlisted) if f.s_ind > 0]

    def renewed_fragments(self, fragments: Sequence[ScoredFragment]) -> list[ScoredFragment] | None:
        """`fragments` as live windows of the index: each dead one (its file re-indexed, as an
        editor buffer is at every change) replaced by the live window over the same lines of the
        same file, scores kept; None when one has no such window (its file gone, or its lines now
        split otherwise)."""
        index = self.index
        if index is None:
            return None
        renewed = []
        for fragment in fragments:
            f = fragment.fragment
            if 0 <= f < index.n_fragments and index.live[f]:
                renewed.append(fragment)
                continue
            if fragment.text is not None:  # a summary is not a window of lines
                return None
            same = [int(g) for g in self.visible_fragments(fragment.path, fragment.start_line, fragment.start_line)
                    if index.fragment_end[g] == fragment.end_line and index.fragment_start[g] == fragment.start_line]
            if not same:
                return None
            renewed.append(dataclasses.replace(fragment, fragment=same[0]))
        return renewed

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

    # -- what the memory strategies and the evaluator ask of the index -----------------------------

    def live_window_holding(self, file_id: int, line: int) -> int | None:
        """A live window of the file (an index file id, as the entity memory names it) holding a
        0-based line, the first by id; None without one."""
        if self.index is None:
            return None
        return window_holding(self.index, file_id, line)

    def fragments_ending_after(self, path: str, line: int) -> np.ndarray:
        """Ids of the file's fragments that end after 0-based line `line` (the fragment's end is
        exclusive), in id order; none for a file the index lacks."""
        assert self.index is not None, "call ensure_index first"
        file_id = self.index.file_id(path)
        if file_id is None:
            return np.zeros(0, dtype=np.int64)
        record = self.index.files[file_id]
        assert record is not None
        ids = np.arange(record.first_fragment, record.first_fragment + record.n_fragments, dtype=np.int64)
        return ids[self.index.fragment_end[ids] > line]

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
