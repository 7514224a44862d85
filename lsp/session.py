"""The language server's state and blocking work, free of pygls: one repository, one model.

Everything here runs on the server's single model thread (`RepomemServer.model_worker`), so the
RepoService, its index and the backend are only ever touched by that thread; the event loop
hands over plain values (paths, texts, positions) and gets plain values back. The one exception,
`build_index`, runs on its own thread over a separate RepoService and hands its finished index
over with `install_index` (on the model thread).

Failures become an empty answer plus a log line (`log`), never an exception out of here.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repomem.allocator import release_free_memory
from repomem.backends.base import Backend, backend_broken
from repomem.backends.factory import open_backend
from repomem.completion.engine import Completion, CompletionEngine
from repomem.config import Config, SettingsRead, settings_given
from repomem.cyclic_gc import settle_long_lived
from repomem.failures import Failure, FailureKind
from repomem.index.index_folder import index_dir
from repomem.index.repo_index import RepoIndex
from repomem.lsp.feedback import FeedbackLog, ShownCompletion, ShownCompletions
from repomem.lsp.settings import backend_changed, client_problem_line, session_config
from repomem.positions import locate
from repomem.progress import Progress
from repomem.records import fragment_record, lift_record
from repomem.service import IndexReport, RepoService
from repomem.strategies import strategy_named

if TYPE_CHECKING:
    from repomem.backends.llama_process import StartedAhead

# log(level, message): level is one of "error", "warning", "info", "log" (window/logMessage types).
LogSink = Callable[[str, str], None]


@dataclass(frozen=True)
class EditorRequest:
    path: str  # repository-relative
    text: str  # the document as the editor has it, newlines normalized
    line: int  # 0-based
    character: int  # 0-based, in code points
    cancelled: Callable[[], bool]  # polled before the model starts and between its tokens
    prefix_only: bool = False  # CompletionAsk.prefix_only
    below: bool = False  # CompletionAsk.below: answered only by continuing the prompt of the answer above
    # Told, between tokens, the text written after the cursor so far (polled on the model thread).
    written: Callable[[str], None] | None = None


@dataclass(frozen=True)
class CompletionAnswer:
    text: str  # "" = nothing to offer
    shown: ShownCompletion | None
    finish_reason: str  # "stop" | "length" | "cancelled" | "deadline" | "failed" | "unavailable"
    generated_tokens: int = 0
    seconds: float = 0.0


EMPTY_FAILED = CompletionAnswer("", None, "failed")
MAX_REFUSALS_SAID = 1000  # files whose refusal is remembered as said (a bound on what a session keeps)


def settle_replaced_index() -> None:
    """After an index is installed and the one it replaced let go (on the model thread): the old
    one's garbage collected and the new one kept out of later collections (`settle_long_lived`),
    then what the old one freed given back to the system. glibc kept it mapped: a long session
    compacts every few hundred edits, and the server held the old index's size on top of its own,
    creeping up with each compaction (scripts/soak_edit_session.py measures it)."""
    settle_long_lived()
    release_free_memory()


def alpha_for(config: Config) -> float:
    """The eq. 10 alpha the configured strategy ranks with (0 for BM25-only strategies)."""
    strategy = strategy_named(config.completion.strategy)
    return strategy.alpha(config.retrieval.alpha) if strategy is not None else 0.0


def completion_timings(request: EditorRequest, result: Completion) -> str:
    """One line per answered completion for the client's log (window/logMessage, type Log: an
    editor's LSP log, VS Code's output channel): where the time went, so a slow answer can be
    told apart as retrieval, prompt building, or the model, and the model's part as prompt tokens
    it read (those not served from its cache) or tokens it wrote."""
    timings = result.timings_ms
    generation = result.generation
    return (f"completion at {request.path}:{request.line + 1}:{request.character + 1}: "
            f"retrieve {timings.get('retrieve', 0.0):.0f} ms, prompt {timings.get('prompt', 0.0):.0f} ms, "
            f"model {timings.get('generate', 0.0):.0f} ms ({generation.prompt_tokens} prompt tokens, "
            f"{generation.cached_tokens} from its cache, {generation.completion_tokens} written, "
            f"{generation.finish_reason})")


class CompletionSession:
    def __init__(self, root: Path, settings: SettingsRead | Config, log: LogSink, ahead: StartedAhead | None = None):
        self.root = root
        # The model's child started by `repomem serve` before the server's imports (model_ahead):
        # the first open takes it when it is the model these settings want, else stops it.
        self._ahead = ahead
        # The user's config and repomem.toml as read (or a Config built by the caller), resolved
        # for the "lsp" surface at each change of the client's settings.
        self.settings_read = settings if isinstance(settings, SettingsRead) else settings_given(settings)
        # The one config of every request, the engine's and the service's alike (_use).
        self.config, self.client_settings, _ = session_config(self.settings_read, {})
        self.log = log
        self.service = RepoService(root, self.config)
        self.backend: Backend | None = None
        self.engine: CompletionEngine | None = None
        self._backend_failed_at: float | None = None
        self.backend_problem = ""  # why the model last failed to open
        self.shown = ShownCompletions(self.config.server.shown_completions)
        self.open_buffers: dict[str, str] = {}  # path -> latest text, written by the event loop
        # path -> the kind of the last refusal of a cursor there that was logged: a file refused
        # (a minified line, too large) is said once, not at every keystroke's request.
        self._refusals_said: dict[str, str] = {}
        self._dirty: set[str] = set()  # buffers the index overlay has not seen yet
        # Open buffers, least recently changed or asked in first (guarded by _dirty_lock): only the
        # last server.indexed_buffers are overlaid on the index, the others are kept as text.
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._overlaid: set[str] = set()  # open buffers whose current text the index holds
        self._dirty_lock = threading.Lock()
        self.index_ready = threading.Event()
        # Called (on the model thread) when the index turns out damaged; the server rebuilds it.
        self.on_index_lost: Callable[[], None] = lambda: None
        # Called (on the model thread) when buffer edits have grown the index past its compaction
        # ratio: ids only grow, so every keystroke's re-indexed file leaves dead fragments behind.
        # The server rebuilds in the background; the current index keeps answering meanwhile.
        self.on_index_churned: Callable[[], None] = lambda: None
        # Called (on the model thread) when changes on disk were indexed before a retrieval: the
        # server queues `persist` behind the request, so the snapshot is written after the answer.
        self.on_disk_changed: Callable[[], None] = lambda: None
        # Called (on the model thread) when files changed on disk (other than open buffers) changed
        # the index: answers cached before are stale (a checkout renamed what they call).
        self.on_index_changed: Callable[[], None] = lambda: None
        self._rebuilding = False
        self._feedback: FeedbackLog | None = None
        self.stopped = False  # the session is ending: no generation starts, no model opens

    # -- settings --------------------------------------------------------------------------------

    def configure(self, options: Any) -> list[str]:
        """Apply client settings; returns the problems, worded for window/showMessage."""
        config, self.client_settings, problems = session_config(self.settings_read, options, self.client_settings)
        reopen = backend_changed(self.config, config)
        if reopen and self.backend is not None:
            self.backend.close()
            self.backend = None
        self._backend_failed_at = None
        self._use(config, self.backend)
        return [client_problem_line(problem) for problem in problems]

    def _use(self, config: Config, backend: Backend | None) -> None:
        """Make `config` the one config of the requests from now on: the service and the engine are
        handed the same object, never a copy to be kept equal."""
        self.config = config
        self.service.config = config
        previous = self.engine
        self.engine = CompletionEngine(self.service, backend, config) if backend is not None else None
        if self.engine is not None and previous is not None and previous.backend is backend:
            self.engine.answered_after(previous)

    @property
    def feedback(self) -> FeedbackLog:
        """The accept / reject log: one object (and one lock) per file, rebuilt only when the
        configured path changes."""
        configured = self.config.server.feedback_log
        path = Path(configured).expanduser() if configured else index_dir(self.root, self.config) / "feedback.jsonl"
        if self._feedback is None or self._feedback.path != path:
            self._feedback = FeedbackLog(path)
        return self._feedback

    # -- model ---------------------------------------------------------------------------------

    def ensure_engine(self) -> CompletionEngine | None:
        """The engine, opening the backend if needed; after a failure, retried every
        server.backend_retry_s seconds rather than at every keystroke."""
        if self.engine is not None:
            return self.engine
        if self.stopped:
            return None
        if (self._backend_failed_at is not None
                and time.monotonic() - self._backend_failed_at < self.config.server.backend_retry_s):
            return None
        ahead, self._ahead = self._ahead, None
        backend = open_backend(self.config, ahead=ahead)
        if isinstance(backend, Failure):
            self._backend_failed_at = time.monotonic()
            self.backend_problem = backend.message
            self.log("error", f"model unavailable: {backend.message}")
            return None
        self._backend_failed_at = None
        self.backend = backend
        self._use(self.config, backend)
        started = getattr(backend, "start_seconds", None)
        self.log("info", f"model ready: {backend.name}" + (f" (started in {started:.1f} s)" if started else ""))
        return self.engine

    def stop_model(self) -> None:
        """From any thread, when the server exits: the model's child process (the embedded model)
        is killed, so that a call waiting on it returns now, and no model opens after it."""
        self.stopped = True
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.discard()
        backend = self.backend
        kill = getattr(backend, "kill", None)
        if kill is not None:
            kill()

    def drop_backend(self, retry_at_once: bool = False) -> None:
        """Forget a backend that failed mid-call: the next request opens it again (at once, or after
        server.backend_retry_s)."""
        if self.backend is not None:
            try:
                self.backend.close()
            except Exception:  # closing a broken backend must not fail the server  # noqa: BLE001
                pass
        self.backend = None
        self.engine = None
        self._backend_failed_at = None if retry_at_once else time.monotonic()

    # -- index ---------------------------------------------------------------------------------

    def build_index(self, progress: Progress) -> RepoIndex | Failure:
        """Load, update or build the index on a separate RepoService (runs on its own thread)."""
        builder = RepoService(self.root, self.config)
        report = builder.ensure_index(progress, structure=True)  # a damaged structure: rebuilt now
        if isinstance(report, Failure):
            return report
        if report.warning:
            self.log("warning", report.warning)
        self.log("info", _report_line(report))
        # Before the index is shared: the first keystroke then does not load the structure, the
        # call tables, the kept edit graph and the edit kernels (docs/measurements.md#index-load).
        # Only a head start: if it fails, the first edit does the same work (and reports what it
        # meets).
        try:
            builder.prepare_for_edits()
        except Exception as error:  # noqa: BLE001
            self.log("warning", f"index not prepared for edits ({error.__class__.__name__}: {error}); "
                                "the first edit prepares it")
        return builder.hand_over_index()

    def install_index(self, index: RepoIndex) -> None:
        """Make a freshly built index current; open buffers are overlaid on it again."""
        self.service.install_index(index)
        self._rebuilding = False
        if self.backend is not None:  # the stable-order memo holds fragment ids of the old index
            self._use(self.config, self.backend)
        with self._dirty_lock:
            self._overlaid.clear()  # built from the disk: every buffer is overlaid again
        self._watch_disk()
        self.index_ready.set()
        self.sync_buffers(rebuilt=True)

    def _watch_disk(self) -> None:
        """Watch the tree for the new index (server.watch_disk); what changed on disk while it was
        being built is indexed now."""
        self.service.stop_watching()
        try:
            if self.config.server.watch_disk and self.service.watch_tree():
                self.on_index_changed()  # (the engine was made anew with the index: install_index)
                self.on_disk_changed()
        except Exception as error:  # a watch that cannot start costs the watch, never the index  # noqa: BLE001
            self.service.stop_watching()
            self.log("warning", f"no watch of the repository's folders ({error.__class__.__name__}: {error})")
            return
        if self.config.server.watch_disk and not self.service.watching:
            self.log("info", "no watch of the repository's folders (not Linux, or past fs.inotify.max_user_watches): "
                             "changes on disk reach the index through saves and the client's file events only")

    def _read_disk(self) -> None:
        """Index what the watch saw change on disk since the last look (nothing to do: ~10 µs)."""
        try:
            read = self.service.read_disk_changes()
        except Exception as error:  # the completion goes on without the watch  # noqa: BLE001
            self.service.stop_watching()
            self.log("warning", f"the watch of the repository's folders stopped ({error.__class__.__name__}: "
                                f"{error}); changes on disk reach the index through saves and file events")
            return
        if isinstance(read, Failure):
            self.log("warning", f"changes on disk not indexed: {read.message}")
        elif read != (0, 0):
            self.log("info", f"changes on disk indexed: {read[0]} files changed, {read[1]} removed")
            self._disk_changed_index(read[0] + read[1])
            self.on_disk_changed()

    def _disk_changed_index(self, files: int) -> None:
        """Files on disk (not open buffers) changed `files` files of the index: answers cached
        before are stale (on_index_changed); after more than one (a checkout, a stash, a pull), so
        are the blocks order "stable" keeps for each function (completion/warm_prefix.py), which
        renewed the old windows and never retrieved the branch's new files while the cursor stayed
        in the function. One file written (a formatter, a generator) keeps them, as an edit of
        another buffer does: a new prompt start costs the model the whole prompt again."""
        if files > 1 and self.backend is not None:
            self._use(self.config, self.backend)
        self.on_index_changed()

    def read_disk(self) -> None:
        """Index what the watch saw as it happens (lsp/disk_events.py), not at the next request:
        the next completion then neither waits for a checkout's files nor is answered from a cache
        of answers the checkout made stale."""
        if self.service.index_loaded and not self.stopped:
            self._read_disk()

    def watch_fileno(self) -> int | None:
        """The descriptor of the watch of the repository's folders (None without one); any thread."""
        return self.service.watch_fileno

    def persist(self) -> None:
        """Write the index as it is now (after changes on disk were indexed)."""
        if self.service.index_loaded:
            self._report(self.service.save())

    def buffer_changed(self, path: str, text: str) -> None:
        """Called on the event loop: remember the text; the model thread indexes it when next needed."""
        self.open_buffers[path] = text
        with self._dirty_lock:
            self._dirty.add(path)
            self._recent[path] = None
            self._recent.move_to_end(path)

    def _asked_in(self, path: str) -> None:
        """A request in an open buffer makes it recent: overlaid again if it was left out."""
        with self._dirty_lock:
            if path in self._recent:
                self._recent.move_to_end(path)

    def sync_buffers(self, rebuilt: bool = False) -> None:
        """Overlay the most recent open buffers that changed, or were left out, on the index (before
        retrieval reads it), and take older ones off it. Each overlay costs ~200 KB (the file's
        fragments, tokens and graph) and ~30 ms; thousands of open buffers cost gigabytes and
        minutes. Buffers left out are retrieved as the disk has them. `rebuilt`: the index was
        just built from the disk, and what these overlays replace is no churn to compact."""
        if not self.service.index_loaded:
            return
        self._read_disk()
        limit = max(self.config.server.indexed_buffers, 1)
        with self._dirty_lock:
            recent = list(self._recent)[-limit:]
            paths = sorted(path for path in recent if path in self._dirty or path not in self._overlaid)
            stale = sorted(self._overlaid.difference(recent))
            self._dirty = set()
            self._overlaid.difference_update(stale)
            self._overlaid.update(paths)
        for path in stale:
            self._report(self.service.drop_buffer(path))
        for path in paths:
            text = self.open_buffers.get(path)
            if text is None:
                continue
            result = self.service.set_buffer(path, text)
            if isinstance(result, Failure) and result.kind == FailureKind.DAMAGED_INDEX:
                self._index_lost(result)
                return
            if isinstance(result, Failure) and result.kind not in (FailureKind.NOT_INDEXED, FailureKind.NO_INDEX):
                self.log("warning", result.message)
        if rebuilt:
            self.service.hold_compaction_floor()
        if not self._rebuilding and self.service.needs_compaction():
            self._rebuilding = True
            self.on_index_churned()

    def buffer_closed(self, path: str) -> None:
        """Called on the event loop, as the document closes: its text is forgotten at once, and the
        model thread takes it off the index later (`drop_closed_buffer`). Forgotten there, a close
        and a reopen on their way while the model was busy (VS Code changing a file's language
        sends both) lost the reopened text: the close, run after the open, took it away."""
        self.open_buffers.pop(path, None)
        with self._dirty_lock:
            self._dirty.discard(path)
            self._recent.pop(path, None)

    def drop_closed_buffer(self, path: str) -> None:
        """On the model thread, after `buffer_closed`: the disk's text counts again in the index,
        unless the document was opened again meanwhile (its new text is overlaid instead)."""
        if path in self.open_buffers:
            return
        with self._dirty_lock:
            self._overlaid.discard(path)
        if self.service.index_loaded:
            self._report(self.service.drop_buffer(path))

    def buffer_saved(self, path: str) -> None:
        """The disk has the buffer's text now: index it from disk and persist the index."""
        with self._dirty_lock:
            self._dirty.discard(path)
            if path in self._recent:
                self._overlaid.add(path)  # the index holds its text, from the disk
        if not self.service.index_loaded:
            return
        self._report(self.service.drop_buffer(path))
        self._report(self.service.file_changed(path))
        self._report(self.service.save())

    def files_changed(self, paths: list[str]) -> None:
        """File-watcher events: re-index those files from disk (open buffers still win), persist
        what changed. Only then: the snapshot a save writes is itself a change a client's watcher
        reports (lsp-mode watches the index folder too), and saving for those reports again wrote
        snapshots twenty times a second, for ever."""
        if not self.service.index_loaded:
            return
        before = self.service.index_version
        changed = 0
        for path in paths:
            version = self.service.index_version
            self._report(self.service.file_changed(path))
            changed += self.service.index_version != version
        if self.service.index_version != before:
            self._disk_changed_index(changed)
            self._report(self.service.save())

    def _report(self, result: None | Failure) -> None:
        if isinstance(result, Failure) and result.kind == FailureKind.DAMAGED_INDEX:
            self._index_lost(result)
        elif isinstance(result, Failure) and result.kind != FailureKind.NOT_INDEXED:
            self.log("warning", result.message)

    def _index_lost(self, failure: Failure) -> None:
        """The service let go of its index (unreadable, or an edit it could not take): completions
        come from the open file until the rebuild is in."""
        self.index_ready.clear()
        self.log("error", f"{failure.message}; completing from the open file until it is rebuilt")
        self.on_index_lost()

    # -- completion ----------------------------------------------------------------------------

    def complete(self, request: EditorRequest) -> CompletionAnswer:
        if request.cancelled() or self.stopped:
            return CompletionAnswer("", None, "cancelled")
        self._asked_in(request.path)
        self.sync_buffers()
        cursor = locate(self.root, request.path, request.text, request.line + 1, request.character + 1,
                        self.service.config.scan)
        if isinstance(cursor, Failure):
            if self._refusals_said.get(request.path) != cursor.kind and len(self._refusals_said) < MAX_REFUSALS_SAID:
                self._refusals_said[request.path] = cursor.kind
                self.log("warning", cursor.message)
            return EMPTY_FAILED
        self._refusals_said.pop(request.path, None)  # refused again later: said again
        engine = self.ensure_engine()
        if engine is None:
            return CompletionAnswer("", None, "unavailable")
        if request.below and not engine.continues(cursor):
            return CompletionAnswer("", None, "cancelled")  # a whole prompt to read: not worth a guess
        try:
            result = engine.complete(cursor, cancel=request.cancelled, prefix_only=request.prefix_only,
                                     written=request.written)
            if isinstance(result, Failure) and result.kind == FailureKind.MODEL_CRASHED:
                # The model's child process died: start a new one now (no retry delay) and answer
                # this request with it, unless a newer request already replaced this one.
                self.log("warning", f"{result.message}; restarting the model")
                self.drop_backend(retry_at_once=True)
                if request.cancelled():
                    return CompletionAnswer("", None, "cancelled")
                engine = self.ensure_engine()
                if engine is None:
                    return CompletionAnswer("", None, "unavailable")
                result = engine.complete(cursor, cancel=request.cancelled, prefix_only=request.prefix_only,
                                         written=request.written)
        except Exception as error:  # a crashing model call must not take the server down  # noqa: BLE001
            self.log("error", f"completion failed ({error.__class__.__name__}: {error}); the model is reopened "
                              "at the next request")
            self.drop_backend()
            return EMPTY_FAILED
        if isinstance(result, Failure):
            self.log("warning", f"no completion: {result.message}")
            if backend_broken(result):
                self.log("warning", "the model is reopened at the next request")
                self.drop_backend()
            return EMPTY_FAILED
        generation = result.generation
        if generation.finish_reason == "cancelled":
            self.log("log", f"generation cancelled after {generation.completion_tokens} tokens "
                            f"({generation.seconds:.2f} s)")
            return CompletionAnswer("", None, "cancelled", generation.completion_tokens, generation.seconds)
        self.log("log", completion_timings(request, result))
        shown = self._shown(request, result)
        return CompletionAnswer(result.text, shown, generation.finish_reason, generation.completion_tokens,
                                generation.seconds)

    def _shown(self, request: EditorRequest, result: Completion) -> ShownCompletion | None:
        if not result.text:
            return None
        shown = ShownCompletion(
            completion_id=self.shown.new_id(), path=request.path, line=request.line, character=request.character,
            text=result.text, strategy=result.strategy, backend=self.backend.name if self.backend else "",
            fragments=result.fragments, in_prompt=result.prompt.fragment_ids,
        )
        self.shown.add(shown)
        return shown

    # -- explain and feedback -----------------------------------------------------------------

    def explain(self, path: str, text: str, line: int, character: int, completion_id: str | None) -> dict:
        """The fragments behind a position: those of the completion shown there if known, else a
        fresh top K; each with s_ind, s_env, s_rel and the neighbour that lifted it most."""
        self._asked_in(path)
        self.sync_buffers()
        cursor = locate(self.root, path, text, line + 1, character + 1, self.service.config.scan)
        if isinstance(cursor, Failure):
            return {"error": cursor.message, "fragments": []}
        shown = self.shown.get(completion_id) if completion_id else None
        answer: dict[str, Any] = {
            "path": path, "line": line, "character": character, "strategy": self.config.completion.strategy,
            "alpha": alpha_for(self.config), "completion_id": shown.completion_id if shown else None,
            "completion": shown.text if shown else None, "index_ready": self.service.index_loaded,
            "fragments": [],
        }
        if not self.service.index_loaded:
            return answer
        ids = [f.fragment for f in shown.fragments] if shown else None
        explained = self.service.view().explain(cursor, alpha_for(self.config), ids)
        answer["fragments"] = [_explained_json(rank, fragment, lift, shown)
                               for rank, (fragment, lift) in enumerate(explained, start=1)]
        return answer

    def record_feedback(self, event: str, completion_id: str) -> None:
        shown = self.shown.get(completion_id)
        if shown is None:
            self.log("warning", f"{event}: unknown or expired completion id {completion_id!r}")
            return
        self._report(self.feedback.append(event, shown))


def _explained_json(rank: int, fragment, lift, shown: ShownCompletion | None) -> dict:
    """One fragment as `repomem retrieve --json` shows it, plus the neighbour that lifted it most."""
    in_prompt = fragment.fragment in shown.in_prompt if shown is not None else None
    return {**fragment_record(fragment, rank, in_prompt=in_prompt),
            "lifted_by": None if lift is None else lift_record(lift)}


def _report_line(report: IndexReport) -> str:
    what = f"index {report.action}: {report.files} files, {report.fragments} fragments in {report.seconds:.1f} s"
    return what + (f" ({report.reason})" if report.reason else "")

