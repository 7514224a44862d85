"""RepoService: the one object the CLI, the language server and the evaluator talk to.

It owns a repository's index in memory and its life cycle: load it (or build it), keep it
current with the files on disk and with unsaved editor buffers, save it atomically, checkpoint and
roll it back. What a request reads (the text the index was built from, secrets masked; retrieval
and its explanation; the code graph's read-only symbol handle for the prompt levers) is a
`RepoView` the service makes per request (`view`, repomem/repo_view.py): nothing outside this
module reads `RepoService.index`, and prompt levers never see the service.

The parse pool that reads and analyses files lives in repomem/index/parse_pool.py, the memory
strategies' stores in repomem/memory/stores.py (`RepoService.memories`). Expected failures come
back as `Failure` values.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG
from typing import Any

import numpy as np

from repomem.allocator import fix_heap_thresholds, large_blocks_mapped, release_free_memory
from repomem.config import Config, IndexConfig, load_config, with_overrides
from repomem.cyclic_gc import rarer_collections
from repomem.embeddings.embedder import TextEmbedder
from repomem.embeddings.window_embeddings import DenseWindows, WindowEmbeddings
from repomem.embeddings.window_embeddings import store_key as window_store_key
from repomem.failures import Failure, FailureKind
from repomem.index.index_folder import (
    IndexFolderRefused,
    check_index_link,
    claim_index_folder,
    foreign_folder,
    index_dir,
    index_outside_repo,
)
from repomem.index.indexed_files import analyze_file
from repomem.index.kernels import warm_up
from repomem.index.parse_pool import PARALLEL_MIN_FILES, analyze_sources, read_and_analyze, read_candidate
from repomem.index.relations import WindowVectors
from repomem.index.repo_index import RepoIndex, StructureUnavailable, apply_changes, build_index
from repomem.index.scan import (
    Candidate,
    Skipped,
    SourceFile,
    excluded_reason,
    judge_names,
    list_candidates,
    printable_path,
    read_source,
    secret_reason,
    source_from_bytes,
)
from repomem.index.scan_memo import listed_names, listing_inputs
from repomem.index.snapshot_check import SnapshotSummary, snapshot_as_written, snapshot_summary, unchanged_since
from repomem.index.snapshot_load import load_index
from repomem.index.snapshot_save import save_index
from repomem.index.tree_watch import FULL_SCAN_EVERY_S, TreeWatch
from repomem.kernel_compile import compile_kernels_once
from repomem.languages.registry import language_of
from repomem.memory.stores import MemoryStores
from repomem.positions import Cursor, locate, read_text_file, relative_to_root
from repomem.progress import NoProgress, Progress
from repomem.repo_view import RepoView, same_file_groups


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
    # The index in memory is newer than the one on disk: its save failed (a full disk) and the
    # caller asked to answer from memory then (`unsaved_ok`); `warning` says why.
    unsaved: bool = False


def written_what(error: OSError) -> str:
    """An index write's OSError for a person: the reason and the path it concerns."""
    reason = error.strerror or str(error)
    # A rename's error names the scratch file it moved first and the place it went second: the
    # place is what is in the way (a folder where the index writes a file).
    where = error.filename2 or error.filename
    return f"{reason} ({where})" if where else reason


def _summary_report(root: Path, summary: SnapshotSummary, seconds: float) -> IndexReport:
    """The report of an index known unchanged, from its manifest alone (what ensure_index would
    report after loading it)."""
    return IndexReport(
        root=root,
        files=len(summary.files),
        fragments=summary.live_fragments,
        nodes=summary.nodes,
        edges=summary.edges,
        seconds=seconds,
        index_bytes=_directory_bytes(summary.snapshot),
        action="unchanged",
        reason="",
        changed=0,
        removed=0,
        skipped=summary.skipped,
        masked=summary.masked,
        over_node_limit=summary.over_node_limit,
    )


def _directory_bytes(path: Path) -> int:
    total = 0
    for item in path.rglob("*"):
        try:
            if item.is_file():
                total += item.stat().st_size
        except OSError:
            continue
    return total


class EmbedderUnavailable(Exception):
    """Eq. 6 needs the embedding model and it cannot be had: the index is left as it was."""

    def __init__(self, failure: Failure):
        super().__init__(failure.message)
        self.failure = failure


# Inode change times are the file system's clock, in ticks of a few milliseconds: a file changed as
# a scan began may read as changed just before it.
SCAN_CLOCK_SLACK_NS = 50_000_000


class RepoService:
    def __init__(self, root: Path, config: Config, warnings: Sequence[str] = ()):
        fix_heap_thresholds()  # before a build's arrays (allocator.py)
        self.root = root
        self.config = config
        self.warnings = list(warnings)
        self.index: RepoIndex | None = None  # read here only (tests/unit/test_layout.py)
        self._buffers: dict[str, str] = {}
        # The settings and the index are asked anew at each call: an editor replaces `config`,
        # a rebuild or a rollback replaces `index`.
        # Window embeddings (strategy "dense"): the model, loaded at the first need, and the
        # ranking of the current index's windows, remade when an edit or a build replaces it.
        self._embedder: TextEmbedder | None = None
        self._dense: tuple[RepoIndex, int, DenseWindows] | None = None
        self._embeddings: WindowEmbeddings | None = None  # the window embeddings kept, as last read or made
        self._embeddings_unsaved = False
        # Files indexed from an unsaved editor buffer while eq. 6 is on, whose windows have no
        # vectors and so no semantic relations yet: the save re-indexes them with vectors.
        self._without_vectors: set[str] = set()
        # A resident process's watch on the tree (watch_tree): a refresh then reads what it saw,
        # and stats the files indexed through a symbolic link (a write reports the target's name).
        self._watch: TreeWatch | None = None
        self._watch_wanted = False  # watch_tree was asked for: a watch that could not be made anew is retried
        # When the last full refresh `file_changed` made began (time.time_ns()): files whose inode has
        # not changed since were judged by it.
        self._full_scan_began_ns = 0
        self._linked: set[str] = set()
        self._scanned_links: set[str] = set()  # of the last scan (list_candidates)
        self._same_files: dict[str, tuple[str, ...]] = {}  # their same_file_groups
        self._scanned_at = 0.0  # time.monotonic() of the last full refresh while watching
        self.update_cut_off = False  # ensure_index was stopped midway (see there)
        self._replaced_floor = 0  # fragments replaced that needs_compaction does not count (hold_compaction_floor)
        self.memories = MemoryStores(self._loaded_index, lambda: self.config.memory,
                                     lambda path: self.view().file_lines(path),
                                     lambda: index_dir(self.root, self.config))

    @classmethod
    def open(cls, root: Path, config: Config | None = None,
             overrides: dict[str, Any] | None = None) -> RepoService | Failure:
        """The service of the repository at `root`, with `config` or the one its settings files
        give (`overrides`, "section.key" -> a checked value, over them: the command line's)."""
        if not root.exists():
            return Failure(FailureKind.MISSING_REPO, f"{root}: no such folder")
        if not root.is_dir():
            return Failure(FailureKind.NOT_A_FOLDER, f"{root} is not a folder")
        root = root.resolve()
        warnings: list[str] = []
        if config is None:
            config, warnings = load_config(root, overrides=overrides)
        default_name = IndexConfig().dir_name
        if config.index.dir_name != default_name and not config.index.cache_dir \
                and foreign_folder(root / config.index.dir_name):
            # A bad value is a warning and the default, as for every other setting (every command
            # failed on it before).
            warnings.append(f"config index.dir_name={config.index.dir_name!r} names {root / config.index.dir_name}, "
                            f"which is not a repomem index (repomem only writes in folders it created); "
                            f"default {default_name!r} kept")
            config = with_overrides(config, index={"dir_name": default_name})
        if index_outside_repo(root, config):
            inside = root / config.index.dir_name
            read_only = f"the index folder {inside}" if inside.is_dir() else str(root)
            warnings.append(f"{read_only} is read-only: the index lives in {index_dir(root, config)}")
        pointer = index_dir(root, config) / "CURRENT"
        if pointer.is_dir() and not pointer.is_symlink():
            warnings.append(f"{pointer} is a folder, not the index pointer: the index is rebuilt and the folder "
                            "moved aside")
        return cls(root, config, warnings)

    # -- indexing ------------------------------------------------------------------------------

    def _read(self, candidate: Candidate) -> SourceFile | Skipped:
        return read_candidate(self.root, candidate, self._buffers, self.config.scan)

    def _scan(self) -> tuple[list[Candidate], list[Skipped]]:
        """The repository's files as they are now; the names' part from the memo while the folders
        are as they were (index/scan_memo.py)."""
        listing = listed_names(self.root, self.config.scan, index_dir(self.root, self.config))
        links: list[str] = []
        found = list_candidates(self.root, self.config.scan, listing, links)
        if set(links) != self._scanned_links:
            self._scanned_links = set(links)
            self._same_files = same_file_groups(self.root, self._scanned_links)
        return found

    def _full_build(self, progress: Progress) -> RepoIndex:
        self._embedder_for_relations()
        self._without_vectors.clear()  # a build embeds every window, buffers' included
        warming = threading.Thread(target=warm_up, name="warm-kernels", daemon=True)
        warming.start()
        candidates, skipped = self._scan()
        candidates += self._buffers_off_the_disk({c.path for c in candidates})
        if self._watch is not None:
            self._linked = set(self._scanned_links)
        warming.join()  # before the parse workers fork: no thread may be mid-compile then
        with rarer_collections(self.config.index.gc_young_threshold):  # the workers inherit it
            sources, analyses, unreadable = read_and_analyze(self.root, candidates, self._buffers, self.config,
                                                             progress)
            reasons = [(s.path, s.reason) for s in (*skipped, *unreadable)]
            return build_index(self.root, self.config, sources, reasons, progress, analyses,
                               self._window_vectors(embed=True, progress=progress))

    def _buffers_off_the_disk(self, listed: set[str]) -> list[Candidate]:
        """The open buffers whose files the scan did not list (new, not saved yet; deleted on
        disk): an update keeps them indexed from their text, and a full build dropped them for
        good (a compaction, `--full`)."""
        found = []
        for path, text in self._buffers.items():
            language = language_of(path)
            if path in listed or language is None or excluded_reason(path, self.config.scan) is not None \
                    or secret_reason(self.root, path, self.config.scan) is not None:
                continue
            found.append(Candidate(path, language, len(text.encode("utf-8", "surrogatepass")), 0))
        return found

    def _refresh(self, index: RepoIndex, progress: Progress,
                 scan: tuple[list[Candidate], list[Skipped]] | None = None) -> tuple[int, int, int]:
        """Bring `index` up to date with the disk (and open buffers); `scan`: list_candidates' answer
        when the caller has it already.

        Returns (changed, removed, restamped): restamped files were touched without changing.
        """
        candidates, skipped = scan if scan is not None else self._scan()
        present = {c.path for c in candidates}
        changed, unreadable, restamped = self._changed_sources(index, candidates)
        unreadable_paths = {s.path for s in unreadable}
        # An open editor buffer stays indexed from its text even when its file is gone from the disk.
        removed = [r.path for r in index.files if r is not None and r.path not in self._buffers
                   and (r.path not in present or r.path in unreadable_paths)]
        index.skipped = [(s.path, s.reason) for s in (*skipped, *unreadable)]
        self._apply(index, changed, removed, progress)
        self._linked = self._scanned_links - unreadable_paths if self._watch is not None else set()
        self._scanned_at = time.monotonic()
        return len(changed), len(removed), restamped

    def _changed_sources(self, index: RepoIndex, candidates: list[Candidate]
                         ) -> tuple[list[SourceFile], list[Skipped], int]:
        """Of `candidates`, the files whose bytes differ from the index's, those that could not be
        read, and how many were touched without changing (their new stat is kept)."""
        restamped = 0
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
                    index.files[file_id] = record._replace(size=candidate.size, mtime_ns=candidate.mtime_ns)
                    restamped += 1
                continue
            changed.append(result)
        return changed, unreadable, restamped

    def _apply(self, index: RepoIndex, changed: list[SourceFile], removed: list[str], progress: Progress) -> None:
        if changed or removed:
            self._embedder_for_relations()  # before the index changes: a failure leaves it whole
            # The first update after a load makes the structure, the resolver's tables and the
            # kept graph (many objects that live on): rarer collections, as for a build.
            with rarer_collections(self.config.index.gc_young_threshold):
                self._apply_changes(index, changed, removed, progress)

    def _apply_changes(self, index: RepoIndex, changed: list[SourceFile], removed: list[str],
                       progress: Progress) -> None:
        index.ensure_structure()
        progress.start("updating", len(changed) + len(removed))
        # A few files (a save, a checkout of a branch near this one) are parsed from their
        # last trees where the index keeps them (its edit memo), as an editor's buffer is: a
        # resident process re-reading a saved file then parses and captures calls again only
        # where it changed; a file left with a syntax error is parsed from nothing, as a full
        # scan parses it (`TreeMemo.parse`). Many go to the worker pool.
        if len(changed) < PARALLEL_MIN_FILES:
            trees = index.edit_trees()
            analyses = [analyze_file(source, self.config, trees, fresh_if_error=True) for source in changed]
        else:
            analyses = analyze_sources(changed, self.config, NoProgress())
        apply_changes(index, changed, removed, analyses, self._window_vectors(embed=True, progress=progress))
        self._without_vectors.difference_update(source.path for source in changed)
        progress.advance(len(changed) + len(removed))

    def watch_tree(self) -> bool:
        """Watch the repository's folders from now on (a resident process: index/tree_watch.py), so
        that a refresh reads only what changed; then bring the loaded index up to date with what
        changed before the watch began. True when that changed the index (it is not saved here).
        Without inotify, or past its limits, every refresh stays a full scan."""
        if self.index is None or self._watch is not None:
            return False
        if not self._start_watch():
            return False
        self._watch_wanted = True
        changed, removed, _ = self._refresh(self.index, NoProgress())  # and the links among its files
        return bool(changed or removed)

    def _never_scanned_folder(self, name: str) -> bool:
        """Whether the scan skips every folder named `name`, wherever it is (scan.excluded_dirs)."""
        scan = self.config.scan
        return name in scan.excluded_dirs or name.endswith(scan.excluded_dir_suffixes)

    def _start_watch(self) -> bool:
        """A watch of the folders and rule files the scan's names depend on now."""
        inputs = listing_inputs(self.root, self.config.scan)
        if inputs is None:
            return False
        folders, rule_files = inputs
        own = str(index_dir(self.root, self.config))  # the index's own writes change no scan
        self._watch = TreeWatch.start(str(self.root), folders, rule_files, own, self._never_scanned_folder)
        return self._watch is not None

    @property
    def loaded_files(self) -> int:
        """Files in the loaded index (0 when none is loaded)."""
        return self.index.n_live_files if self.index is not None else 0

    @property
    def watching(self) -> bool:
        return self._watch is not None

    @property
    def watch_fileno(self) -> int | None:
        """The watch's descriptor, readable when something changed (None without a watch). Read
        from any thread: the watch it names may be made anew (and the descriptor closed) meanwhile."""
        watch = self._watch
        return None if watch is None else watch.fileno()

    def stop_watching(self) -> None:
        self._watch_wanted = False
        if self._watch is not None:
            self._watch.close()
            self._watch = None
            self._linked = set()

    def _refresh_watched(self, index: RepoIndex, progress: Progress) -> tuple[int, int, int] | None:
        """_refresh's answer from the watch alone, when the names it saw come and go are files the
        index holds and still finds, or names the scan would not keep: those files re-stat'ed and
        re-read, the rest as they were (what a full scan would find, since only a write moves a
        file's size or time, and only an entry change its name). None when only a full scan can
        tell (a folder or rule file changed, a new name the scan would keep or report, a file gone
        or unreadable, no watch, or the last full scan is FULL_SCAN_EVERY_S old). Files an editor
        buffer overlays are left as the buffer has them."""
        if self._watch is None:
            if self._watch_wanted:
                self._start_watch()  # it could not be made anew at the last full scan: again, before this one
            return None
        seen = self._watch.look()
        if seen.rewatch:
            # Watched anew before the full scan the caller makes: the names depend on other
            # folders and files now (an ignore rule removed, folders made while the kernel's queue
            # overflowed, a rule file's folder made again, the tree replaced), and the watch set up
            # before would miss their changes for good (its cost: docs/measurements.md#through-the-daemon).
            self._watch.close()
            self._watch = None
            self._start_watch()
            return None
        if seen.names or time.monotonic() - self._scanned_at > FULL_SCAN_EVERY_S:
            return None
        # A name the index does not hold that the scan would keep or report (an editor's swap, lock
        # or backup file has no grammar: neither): only a scan can judge it against the ignore rules.
        new_names = sorted(path for path in seen.entries if index.record(path) is None and path not in self._buffers)
        if new_names and any(judge_names(new_names, self.config.scan)):
            return None
        skipped = {path for path, _ in index.skipped}
        candidates: list[Candidate] = []
        lost: list[Skipped] = []  # held files made unreadable without a write
        # Files written or whose name came and went (an editor's save by rename, a checkout), and
        # every file indexed through a link (its target's write names the target), stat'ed as the
        # scan does: a link followed, a file as it is.
        for path in sorted(seen.written.union(seen.entries, self._linked).difference(self._buffers)):
            record = index.record(path)
            if record is None:
                if path in skipped:
                    return None  # too large or unreadable before: a full scan judges it again
                continue  # judged out by its name (no grammar, excluded, ignored): its bytes change nothing
            try:
                stat = os.stat(self.root / path) if path in self._linked else os.lstat(self.root / path)
            except OSError:
                return None  # gone: the scan says how (git still lists a tracked file: "unreadable")
            if not S_ISREG(stat.st_mode) or stat.st_size > self.config.scan.max_file_bytes:
                return None
            candidate = Candidate(path, record.language, stat.st_size, stat.st_mtime_ns)
            if path in seen.written and not os.access(self.root / path, os.R_OK):
                # Made unreadable (chmod 000) with the size and time it had: a full scan trusts that
                # stat and kept the old text, where a full build skips the file. Read it now, so it
                # leaves the index and is listed as skipped for the build's reason.
                read = self._read(candidate)
                if isinstance(read, Skipped):
                    lost.append(read)
                    continue
            candidates.append(candidate)
        changed, unreadable, restamped = self._changed_sources(index, candidates)
        if unreadable:
            return None
        removed = [skipped.path for skipped in lost]
        if removed:
            index.skipped = [entry for entry in index.skipped if entry[0] not in removed] + \
                [(skipped.path, skipped.reason) for skipped in lost]
        self._apply(index, changed, removed, progress)
        return len(changed), len(removed), restamped

    def read_disk_changes(self) -> tuple[int, int] | Failure:
        """What the watch saw change on disk, indexed in memory (not saved): (files changed,
        removed). A resident process that keeps editor buffers (the language server) calls it before
        each retrieval: nothing seen costs one read of the watch; only files written re-reads those;
        names changed, a full scan (buffers stay as they are). (0, 0) without an index or a watch."""
        if self.index is None or not self._watch_wanted:
            return 0, 0
        try:
            watched = self._refresh_watched(self.index, NoProgress())
            changed, removed, _ = watched if watched is not None else self._refresh(self.index, NoProgress())
        except EmbedderUnavailable as error:
            return error.failure
        except StructureUnavailable as error:
            return Failure(FailureKind.DAMAGED_INDEX, f"index structure unreadable ({error})")
        return changed, removed

    def ensure_index(self, progress: Progress | None = None, full: bool = False,
                     save: bool = True, structure: bool = False, load: bool = True,
                     unsaved_ok: bool = False) -> IndexReport | Failure:
        """Load, update or build the index, save it if anything changed (and `save`), and report
        (`_ensure_index`). `update_cut_off` stays True when it was stopped midway (an exception, a
        KeyboardInterrupt: a resident process's client hung up): the index in memory may then be
        half updated and what the watch saw read, and a resident process lets go of this service."""
        self.update_cut_off = True
        with large_blocks_mapped():
            report = self._ensure_index(progress, full, save, structure, load, unsaved_ok)
        self.update_cut_off = False
        return report

    def _ensure_index(self, progress: Progress | None = None, full: bool = False,
                      save: bool = True, structure: bool = False, load: bool = True,
                      unsaved_ok: bool = False) -> IndexReport | Failure:
        """Load, update or build the index, save it if anything changed (and `save`), and report.

        `structure`: also read a loaded index's per-file structure now (a command that will need it
        anyway), so that a damaged one is rebuilt here rather than failing halfway through.
        `load`: False when the caller needs only the report (`repomem index`): an index on disk that
        is known unchanged (snapshot_check) is then reported from its manifest, not loaded.
        `unsaved_ok`: a command that came for an answer (`retrieve`, `complete`) gets it from the
        index in memory when writing the index fails (a full disk), with a warning; the index on
        disk stays the one before (a save is written whole or not at all)."""
        progress = progress or NoProgress()
        compile_kernels_once(progress)  # a first run on this machine: its own step, not a stalled bar
        started = time.perf_counter()
        directory = index_dir(self.root, self.config)
        try:
            # Before anything is read there: an index folder linked out of the repository is
            # neither written nor read (another project's index, sealed by this user's key too).
            check_index_link(directory, self.root)
        except IndexFolderRefused as error:
            return Failure(FailureKind.INDEX_WRITE, f"cannot use the index in {directory}: {error}")
        reason = "--full requested" if full else ""
        warning = ""
        index: RepoIndex | None = None
        restamped = 0
        reskipped = False
        unsaved = False
        summary = None if full or self.index is not None or self._buffers else snapshot_summary(self.root, self.config)
        scan = None if summary is None else self._scan()  # one scan for both
        known_unchanged = scan is not None and unchanged_since(summary, *scan, self.config.index.compact_ratio,
                                                               self._read)
        # Reported without a load only when every byte of it checks out, as a load would check them.
        if (known_unchanged and not load and not self.config.index.window_embeddings
                and snapshot_as_written(summary)):
            return _summary_report(self.root, summary, time.perf_counter() - started)
        # Known unchanged, but the snapshot's files are not the ones written (the tree copied with
        # its index, a backup restored: other inodes): the load checks every byte, and a save records
        # the files as they are now; unsaved, every later command loaded the whole index again.
        copied = known_unchanged and summary is not None and not snapshot_as_written(summary)
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
                if save:
                    # Before the build, not after it: an index folder repomem cannot have (a file in
                    # its place, a folder that is not repomem's, no right to create it) fails now,
                    # as the save would once every file was parsed.
                    claim_index_folder(directory, self.root)
                index = self._full_build(progress)
                action, changed, removed = "built", index.n_live_files, 0
            else:
                restamped = 0
                try:
                    if structure:
                        index.ensure_structure()
                    # Known unchanged from the same manifest a moment ago: no second scan.
                    same = known_unchanged and summary is not None and index.snapshot == summary.snapshot
                    # The scan is this moment's only for the snapshot it was compared with.
                    scanned = scan if summary is not None and index.snapshot == summary.snapshot else None
                    watched = None if same or scanned is not None else self._refresh_watched(index, progress)
                    skipped_before = list(index.skipped)
                    changed, removed, restamped = (0, 0, 0) if same else watched if watched is not None \
                        else self._refresh(index, progress, scanned)
                    # A file newly skipped (a binary, a secret, a file over the size limit) changes
                    # nothing indexed, but the index on disk must say so: the next command's
                    # no-change check compares the skipped files too, and found them differ forever.
                    reskipped = index.skipped != skipped_before
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
            if save and (action != "unchanged" or index.snapshot is None or restamped or reskipped or copied):
                try:
                    save_index(index, directory, index.snapshot)
                except OSError as error:
                    if not unsaved_ok or isinstance(error, IndexFolderRefused):  # the folder is wrong, not full
                        raise
                    unsaved = True
                    warning = (f"cannot write the index in {directory}: {written_what(error)}; answered from "
                               "the index in memory (the one on disk is unchanged)")
            if save:
                saved = self._save_embeddings()  # eq. 6's, embedded during the build or update
                if isinstance(saved, Failure):
                    return saved
        except EmbedderUnavailable as error:
            return error.failure
        except OSError as error:
            return Failure(FailureKind.INDEX_WRITE, f"cannot write the index in {directory}: {written_what(error)}")
        replaced, self.index = self.index, index
        if action == "built":
            del replaced  # the index a compaction replaced, freed before the pages go back
            release_free_memory()  # what the build freed, back to the system (a server lives on)
        if self.config.index.window_embeddings:
            embedded = self.update_window_embeddings(progress)
            if isinstance(embedded, Failure):
                return embedded
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
            unsaved=unsaved,
        )

    def needs_compaction(self) -> bool:
        """Whether edits since the last full build have left the loaded index more dead fragments
        than index.compact_ratio allows (False without an index): time to rebuild it. Fragments
        replaced before `hold_compaction_floor` do not count: a rebuild would replace them again."""
        if self.index is None:
            return False
        return self._needs_compaction(self.index, self._replaced_floor)

    def hold_compaction_floor(self) -> None:
        """The fragments replaced so far are the index's own state, not churn: the editor's unsaved
        buffers overlaid right after a rebuild (a rebuild reads the disk, so it overlays them again;
        past index.compact_ratio of a small repository, the server rebuilt without end)."""
        index = self.index
        self._replaced_floor = 0 if index is None else max(index.n_fragments - index.w_base.shape[0], 0)

    def _needs_compaction(self, index: RepoIndex, floor: int = 0) -> bool:
        n_base = index.w_base.shape[0]
        if n_base == 0:
            return index.n_fragments > floor
        replaced = index.n_fragments - n_base - floor
        return replaced > self.config.index.compact_ratio * n_base

    # -- the loaded index ------------------------------------------------------------------------

    @property
    def index_loaded(self) -> bool:
        """Whether an index is loaded (`ensure_index` ran, or one was installed)."""
        return self.index is not None

    @property
    def index_version(self) -> tuple[int, tuple[tuple[str, str], ...]] | None:
        """What tells the loaded index apart from itself before a change: its generation (each
        change of its files bumps it) and the files it lists as skipped; None with none loaded."""
        return None if self.index is None else (self.index.generation, tuple(self.index.skipped))

    @property
    def snapshot_on_disk(self) -> bool:
        """Whether the snapshot the loaded index came from (or was last saved as) is still on the
        disk; true with no index loaded or none saved yet."""
        return self.index is None or self.index.snapshot is None or self.index.snapshot.is_dir()

    def _loaded_index(self) -> RepoIndex:
        assert self.index is not None, "call ensure_index first"
        return self.index

    def prepare_for_edits(self) -> None:
        """Load now what the first edit of the index would (its structure, call tables, edit graph
        and kernels): a server does it before the index is shared. Raises what the loading meets.
        Rarer collections while it makes them, as for a build (repomem/cyclic_gc.py)."""
        with rarer_collections(self.config.index.gc_young_threshold), large_blocks_mapped():
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
        self._replaced_floor = 0

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
        if self.index.record(path) is None and all(entry[0] != path for entry in self.index.skipped) \
                and os.path.lexists(self.root / path) and judge_names([path], self.config.scan)[0]:
            # A name the index does not hold, with a grammar: only the scan can judge it against the
            # ignore rules (a client reports events for ignored files too: a generated _version.py,
            # a build folder), and reading it here indexed what a full build leaves out. The watch
            # saw it made and asks for that scan; without one, a full refresh, but not again for a
            # file the last one already judged (its inode unchanged since that scan began: ctime,
            # which no tool sets back): a checkout or a build writing many ignored files sends an
            # event each, and a scan each was a scan of the repository per file.
            try:
                if self._watch_wanted:
                    read = self.read_disk_changes()
                elif not self._judged_by_last_refresh(path):
                    began = time.time_ns()
                    read = self._refresh(self.index, NoProgress())
                    self._full_scan_began_ns = began
                else:
                    read = None
            except EmbedderUnavailable as error:
                return error.failure
            except StructureUnavailable as error:
                return Failure(FailureKind.DAMAGED_INDEX, f"index structure unreadable ({error})")
            if isinstance(read, Failure):
                return read
            if self.index.record(path) is None:
                return Failure(FailureKind.NOT_INDEXED, f"{printable_path(path)}: not indexed (not listed by "
                                                        "the scan: ignored, or skipped)")
            return None
        return self._update_one(path)

    def _judged_by_last_refresh(self, path: str) -> bool:
        """Whether the last full refresh `file_changed` made began after `path`'s inode last changed
        (ctime, which no tool sets back), so that refresh listed or left out the file as it is."""
        try:
            changed_ns = os.lstat(self.root / path).st_ctime_ns
        except OSError:
            return False
        return changed_ns < self._full_scan_began_ns - SCAN_CLOCK_SLACK_NS

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
        # What the index says it skipped follows the file too (a binary file made text, or text
        # made binary, was listed as it was until the next refresh).
        skipped = [entry for entry in self.index.skipped if entry[0] != path]
        if isinstance(source, Skipped) and source.reason != "no such file":
            skipped.append((path, source.reason))
        self.index.skipped = skipped
        try:
            if isinstance(source, Skipped):
                if record is not None:
                    apply_changes(self.index, [], [path], window_vectors=self._window_vectors(embed=False))
                return None if source.reason == "no such file" else Failure(FailureKind.NOT_INDEXED,
                                                                            f"{path}: {source.reason}")
            # A file read from the disk (saved, changed under the watch) is embedded for eq. 6
            # as an update's are; an unsaved buffer's windows wait for its save, which re-indexes
            # them even when the disk now holds the very text the buffer had (its digest unchanged:
            # the windows kept no semantic relations until the next full build).
            embed = text is None
            unrelated = embed and path in self._without_vectors and self.config.relations.semantic_neighbours > 0
            if record is None or record.digest != source.digest or unrelated:
                apply_changes(self.index, [source], [], window_vectors=self._window_vectors(embed=embed))
                if embed or self.config.relations.semantic_neighbours <= 0:
                    self._without_vectors.discard(path)
                else:
                    self._without_vectors.add(path)
        except StructureUnavailable as error:
            self.index = None
            return Failure(FailureKind.DAMAGED_INDEX, f"index structure unreadable ({error}); rebuild it")
        except Exception as error:  # noqa: BLE001 - a bug: the half-made edit must not be kept
            # An edit stopped halfway leaves arrays of different lengths (the fragments appended,
            # W and its thresholds not): the next query's kernels read past their ends and the
            # language server crashed. Let go of it; the caller rebuilds.
            self.index = None
            return Failure(FailureKind.DAMAGED_INDEX, f"the index could not take the edit of {path} "
                                                      f"({error.__class__.__name__}: {error}); it is rebuilt")
        return None

    # -- what a request reads ------------------------------------------------------------------

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

    def view(self, config: Config | None = None) -> RepoView:
        """What one request may read of the repository (repomem/repo_view.py), with `config` (the
        request's) or the service's own; made anew per request, as an edit replaces the index."""
        return RepoView(self.root, config or self.config, self.index, self._raw_text, self.memories,
                        self.dense_windows, self._same_files)

    # -- window embeddings (strategy "dense") ----------------------------------------------------

    def update_window_embeddings(self, progress: Progress | None = None) -> int | Failure:
        """Embed the windows of the indexed files that have no vectors yet, keep them in the index
        folder (repomem/embeddings/window_embeddings.py) and return how many were embedded."""
        updated = self._updated_embeddings(progress or NoProgress())
        return updated if isinstance(updated, Failure) else updated[1]

    def dense_windows(self) -> DenseWindows | Failure:
        """The current index's windows for ranking by cosine; the first call after a build or an
        edit embeds what has no vector yet."""
        index = self._loaded_index()
        if self._dense is not None and self._dense[0] is index and self._dense[1] == index.generation:
            return self._dense[2]
        updated = self._updated_embeddings(NoProgress())
        if isinstance(updated, Failure):
            return updated
        embedder = self._text_embedder()
        if isinstance(embedder, Failure):
            return embedder
        vectors, known = updated[0].matrix(index)
        windows = DenseWindows(vectors, known, lambda text: embedder.embed([text])[0])
        self._dense = (index, index.generation, windows)
        return windows

    def _embedder_for_relations(self) -> None:
        """Eq. 6 on: the embedding model loaded before a build or an update begins (raises
        EmbedderUnavailable), so one that cannot be had stops it before the index changes."""
        if self.config.relations.semantic_neighbours > 0:
            embedder = self._text_embedder()
            if isinstance(embedder, Failure):
                raise EmbedderUnavailable(embedder)

    def _text_embedder(self) -> TextEmbedder | Failure:
        if self._embedder is None:
            loaded = TextEmbedder.load()
            if isinstance(loaded, Failure):
                return loaded
            self._embedder = loaded
        return self._embedder

    def _updated_embeddings(self, progress: Progress) -> tuple[WindowEmbeddings, int] | Failure:
        kept = self._embedding_store(self._loaded_index(), progress)
        saved = self._save_embeddings()
        return saved if isinstance(saved, Failure) else kept

    def _embedding_store(self, index: RepoIndex, progress: Progress | None,
                         embed: bool = True) -> tuple[WindowEmbeddings, int] | Failure:
        """The window embeddings kept for this repository, with the windows of `index` that had no
        vector embedded (`embed`), and how many were. Kept in memory between calls; written to
        the index folder by `_save_embeddings` (during a first build the folder is not an index
        yet, and repomem writes only into its own index folders)."""
        key = window_store_key(self.config)
        if self._embeddings is None or self._embeddings.key != key:
            self._embeddings = WindowEmbeddings.load(index_dir(self.root, self.config), key)
        store = self._embeddings
        missing = store.missing_files(index) if embed else []
        if not missing:
            return store, 0
        embedder = self._text_embedder()
        if isinstance(embedder, Failure):
            return embedder
        progress = progress or NoProgress()
        named = sum(index.files[f].n_fragments for f in missing)  # type: ignore[union-attr]
        progress.start("embedding windows", named)
        embedded = store.update(index, lambda path: self.view().file_lines(path), lambda: embedder,
                                progress.advance)
        progress.advance(named - embedded)  # windows whose text had a vector already
        self._embeddings_unsaved = True
        self._dense = None
        return store, embedded

    def _save_embeddings(self) -> None | Failure:
        if self._embeddings is None or not self._embeddings_unsaved:
            return None
        directory = index_dir(self.root, self.config)
        try:
            self._embeddings.save(directory)
        except OSError as error:
            return Failure(FailureKind.INDEX_WRITE,
                           f"cannot write the window embeddings in {directory}: {written_what(error)}")
        self._embeddings_unsaved = False
        return None

    def _window_vectors(self, embed: bool, progress: Progress | None = None
                        ) -> Callable[[RepoIndex], WindowVectors] | None:
        """Eq. 6's windows' embeddings for a build or an edit (None when relations.semantic_neighbours
        is off): the files read from disk are embedded first (`embed`); an unsaved editor buffer's
        windows are not (seconds a keystroke), so they relate by eq. 6 once saved and re-indexed."""
        if self.config.relations.semantic_neighbours <= 0:
            return None

        def vectors(index: RepoIndex) -> WindowVectors:
            kept = self._embedding_store(index, progress, embed)
            if isinstance(kept, Failure):  # the model was loaded before the build began (ensure_index)
                return np.zeros((index.n_fragments, 0), dtype=np.float32), np.zeros(index.n_fragments, dtype=bool)
            return kept[0].matrix(index)

        return vectors

    def _raw_text(self, path: str) -> str:
        text = self._buffers.get(path)
        if text is None:
            read = read_text_file(self.root / path)
            text = "" if isinstance(read, Failure) else read
        return text
