"""Adapter for pygls: `repomem serve`, a language server giving inline completions.

Thin typed handlers over `CompletionSession` (repomem/lsp_session.py), which owns the
RepoService, the index and the model and runs only on `model_worker`, one thread: the event loop
never waits on the model, so the server keeps answering while it generates.

- Start-up: `initialize` reads the settings (initializationOptions), `initialized` starts the
  index on its own thread with `$/progress` reports, and opens the model on the model thread.
  Until the index is ready completions come from the open file alone.
- Open buffers are what retrieval and prompts see: each change is remembered and overlaid on the
  index right before the next retrieval. Saves and watched-file events re-index from disk and
  persist the index; so does the server's own watch of the repository's folders (inotify, read
  before each retrieval), for changes the client does not report.
- Which request reaches the model and which answer reaches the editor is decided in one place,
  `CompletionScheduler` (lsp/scheduler.py): caches, debounce, joining an identical request,
  superseding, cancelling, the answer budget and dropping answers for a document that moved on.
- Items replace the word being typed (lsp/items.py).
- Failures are an empty answer plus `window/logMessage`; bad settings a `window/showMessage`;
  readiness (index and model in) or a failure to get there one `window/showMessage`. A
  notification whose params do not fit is dropped with one `window/logMessage` (Warning) naming
  the method and the fault (lsp/framing.py), once per method and fault.
- A "document" whose URI is a folder (a client that opened a directory, as netrw or a file tree
  can) is no text to complete: it is ignored until closed, with one log line, and completions in it
  are empty (it was completed as plain text, and indexed as a file at the folder's path).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import itertools
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from repomem.config import Config, ServerConfig, problem_lines, read_settings, resolved_config
from repomem.failures import Failure, FailureKind
from repomem.index.scan import normalize_newlines
from repomem.lsp import disk_events
from repomem.lsp.client_quirks import lenient_converter
from repomem.lsp.documents import ProtocolLinesProtocol
from repomem.lsp.framing import MessageLoop, SessionWriter, complain, quiet_pygls_logs
from repomem.lsp.items import ACCEPT_COMMAND, completion_item, inline_item, typed_word
from repomem.lsp.next_line import enter_at_end
from repomem.lsp.scheduler import CompletionAsk, CompletionScheduler, Outcome, Scheduled
from repomem.lsp.session import CompletionAnswer, CompletionSession, EditorRequest, settle_replaced_index
from repomem.lsp.settings import session_config, settings_after_change
from repomem.repository_root import too_wide_to_index
from repomem.thread_priority import lower_thread_priority, thread_nice

if TYPE_CHECKING:
    from repomem.backends.llama_process import StartedAhead

EXPLAIN_COMMAND = "repomem.explain"
ACCEPT_NOTIFICATION = "repomem/didAccept"
REJECT_NOTIFICATION = "repomem/didReject"
# params {textDocument: {uri}, position}: where the editor's cursor now rests (sent by the shipped
# editor set-ups after a short idle); the server may start the completion there speculatively.
CURSOR_NOTIFICATION = "repomem/didMoveCursor"
POSITION_SHAPE = "{textDocument: {uri}, position: {line, character}}"  # a custom message's params
MAX_SHOWN_CHARS = 80  # of a bad value, in a log line
SHUTDOWN_DRAIN_S = 5.0  # at most this long, `shutdown` waits for the model thread's queue
EXIT_GRACE_S = 1.0  # at most this long, the process waits at exit for the model thread's call to return
UINTEGER_MAX = 2**31 - 1  # LSP's uinteger: a Position's line and character
UNPAIRED_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str decoded from JSON, a pair is one code point
LOG_LEVELS = {"error": types.MessageType.Error, "warning": types.MessageType.Warning,
              "info": types.MessageType.Info, "log": types.MessageType.Log}


MAX_SAID = 1000  # entries of a set of things said once (documents, faults): a bound on its memory


def uri_to_path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def names_a_folder(uri: str) -> bool:
    """Whether `uri` is a file: URI of a folder on this machine."""
    if not uri.startswith("file:"):
        return False
    try:
        return uri_to_path(uri).is_dir()
    except (OSError, ValueError):
        return False


def field(value: Any, *names: str) -> Any:
    """`value.a.b` for JSON that arrives as dicts or as attribute objects (custom messages)."""
    for name in names:
        if value is None:
            return None
        value = value.get(name) if isinstance(value, dict) else getattr(value, name, None)
    return value


class LspProgress:
    """core Progress -> `$/progress` work-done reports, throttled, sent from any thread."""

    def __init__(self, server: RepomemServer, token: str, title: str, interval_ms: int):
        self._server = server
        self._token = token
        self._title = title
        self._interval_s = interval_ms / 1000
        self._stage = ""
        self._total = 1
        self._done = 0
        self._last_sent = 0.0
        self._began = False
        # The client's answer to the token's creation: None while it is awaited (the work runs
        # meanwhile: a client that never answered held the index back for the whole session).
        self._accepted: bool | None = None
        self._opened: str | None = None  # the message `open` was given, kept until the answer
        self._ended = False
        self._lock = threading.Lock()

    def answered(self, accepted: bool) -> None:
        """The client accepted the token, or refused it: reports begin (with `open`'s message, if
        the work opened meanwhile), or never."""
        with self._lock:
            self._accepted = accepted
            if accepted and self._opened is not None and not self._ended and not self._began:
                self._begin(self._opened)

    def open(self, message: str) -> None:
        with self._lock:
            self._opened = message
            if self._accepted and not self._began:
                self._begin(message)

    def _begin(self, message: str) -> None:
        self._began = True
        self._server.call_from_thread(self._server.work_done_progress.begin, self._token,
                                      types.WorkDoneProgressBegin(title=self._title, message=message,
                                                                  percentage=0, cancellable=False))

    def start(self, stage: str, total: int) -> None:
        self._stage, self._total, self._done = stage, max(total, 1), 0
        self._send(force=True)

    def advance(self, units: int = 1) -> None:
        self._done += units
        self._send()

    def _send(self, force: bool = False) -> None:
        now = time.monotonic()
        if not self._began or (not force and now - self._last_sent < self._interval_s):  # began: accepted
            return
        self._last_sent = now
        percentage = min(100, int(100 * self._done / self._total))
        self._server.call_from_thread(self._server.work_done_progress.report, self._token,
                                      types.WorkDoneProgressReport(message=self._stage, percentage=percentage))

    def end(self, message: str) -> None:
        with self._lock:
            self._ended = True
            if self._began:
                self._server.call_from_thread(self._server.work_done_progress.end, self._token,
                                              types.WorkDoneProgressEnd(message=message))


class Readiness:
    """Says once, with `window/showMessage`, that the server is ready (index and model in) or
    what keeps it from being so; later rebuilds and model restarts only log."""

    def __init__(self, show: Callable[[str, str], None]):
        self._show = show
        self._lock = threading.Lock()
        self._index: str | None = None  # what the index said, once it is in
        self._model: str | None = None
        self._said = False

    def index_in(self, summary: str) -> None:
        with self._lock:
            self._index = summary
        self._maybe_ready()

    def model_in(self, summary: str) -> None:
        with self._lock:
            self._model = summary
        self._maybe_ready()

    def failed(self, message: str) -> None:
        with self._lock:
            if self._said:
                return
            self._said = True
        self._show("error", message)

    def _maybe_ready(self) -> None:
        with self._lock:
            if self._said or self._index is None or self._model is None:
                return
            self._said = True
        self._show("info", f"ready ({self._index}; model {self._model})")


class RepomemServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("repomem", server_version(), protocol_cls=ProtocolLinesProtocol,
                         converter_factory=lenient_converter)
        self.session: CompletionSession | None = None
        # The embedded model's child, started by `repomem serve` before this module was imported
        # (lsp/model_ahead.py); the session's first model open takes it or stops it.
        self.model_ahead: StartedAhead | None = None
        self.options: Any = None  # initializationOptions, applied once the workspace is known
        self.settings_in_force: Any = None  # what apply_options last applied
        self.model_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="repomem-model")
        self.loop: asyncio.AbstractEventLoop | None = None
        self.scheduler = CompletionScheduler(self.run_model, 0.0, 1.0, 1, self.log)
        self.readiness = Readiness(self.show)
        self.answers_generation = 0
        self.surrogates_replaced: set[str] = set()  # uris whose unpaired surrogates were logged
        self.outside_said: set[str] = set()  # uris outside the workspace folder whose empty answers were logged
        self.unopened_said: set[str] = set()  # uris whose changes were ignored (never opened), logged once
        self.folders_opened: set[str] = set()  # uris (percent-decoded) of folders opened as documents, ignored
        self.bad_params_said: set[tuple[str, str]] = set()  # (method, fault) of dropped notifications, logged
        # The version the scheduler knows an open document's text by: a number of the server's for
        # each text it receives (didOpen, didChange). The client's own version numbers may repeat (a
        # client that never bumps them, or starts again lower): a change under the same number left
        # the generation for the old text running, and its answer went to the moved-on document.
        self.text_versions: dict[str, int] = {}
        self.next_text_version = itertools.count(1)
        # Ends the running session's message loop (lsp/framing.py), which replaces pygls's own: pygls's
        # loop watches the private BaseServer._stop_event, which has no public setter.
        self.session_stop = threading.Event()

    # -- plumbing --------------------------------------------------------------------------------

    def call_from_thread(self, function: Callable[..., Any], *args: Any) -> None:
        """Run `function` on the event loop (pygls writes to the client from there only)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            function(*args)
        else:
            loop.call_soon_threadsafe(function, *args)

    def log(self, level: str, message: str) -> None:
        self.call_from_thread(self.window_log_message,
                              types.LogMessageParams(type=LOG_LEVELS.get(level, types.MessageType.Info),
                                                     message=f"repomem: {message}"))

    def bad_params(self, method: str, fault: str) -> None:
        """A notification whose params do not fit `method` was dropped: one warning in the client's
        log per method and fault (a client sends the same malformed message at every keystroke)."""
        if (method, fault) in self.bad_params_said or len(self.bad_params_said) >= MAX_SAID:
            return
        self.bad_params_said.add((method, fault))
        self.log("warning", f"{method} dropped: its params do not fit the protocol: {fault}")

    def show(self, level: str, message: str) -> None:
        self.call_from_thread(self.window_show_message,
                              types.ShowMessageParams(type=LOG_LEVELS.get(level, types.MessageType.Info),
                                                      message=f"repomem: {message}"))

    async def on_model_thread(self, function: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.model_worker, function, *args)

    def relative(self, uri: str) -> str | None:
        if self.session is None or not uri.startswith("file:"):
            return None
        try:
            return uri_to_path(uri).resolve().relative_to(self.session.root).as_posix()
        except (ValueError, OSError):
            return None

    def ask_at(self, uri: str, position: types.Position) -> CompletionAsk | None:
        """The request at a position of an open document of the workspace, or None."""
        path = self.relative(uri)
        if path is None:
            if self.session is not None and uri not in self.outside_said and len(self.outside_said) < 1000:
                self.outside_said.add(uri)  # said once a document: its answers are empty
                self.log("info", f"{uri} is outside the workspace folder {self.session.root}: repomem completes "
                                 "the files of that folder only")
            return None
        if not self.is_open(uri):
            # Not opened by the client: pygls would read the disk here, in the event loop (a
            # missing file is an exception, a named pipe blocks forever). No answer instead.
            return None
        document = self.workspace.get_text_document(uri)
        text = self.document_text(uri)
        lines = text.split("\n")
        if not 0 <= position.line < len(lines):
            return None
        # A copy: pygls moves a character past the line's end onto its last character in place,
        # and the items' ranges are made from the client's position (`return com|` then got the
        # completion one character early, the typed `m` left after it).
        line = lines[position.line]
        if position.character >= document.position_codec.client_num_units(line):
            character = len(line)  # at or past the line's end (in the client's units): its end
        else:
            server_position = document.position_from_client_units(types.Position(position.line, position.character))
            character = min(server_position.character, len(line))
        return self.ask_in(uri, path, self.text_versions.get(uri), text, position.line, character)

    def in_background(self, function: Callable[..., Any], *args: Any) -> None:
        """`function(*args)` on the model's thread, nothing waiting for it; what it raises is
        logged (it vanished with its future: an index edit that failed there went unseen, and the
        half-made index crashed the next query). RuntimeError: the server is exiting."""
        def said(future: Any) -> None:
            error = None if future.cancelled() else future.exception()
            if error is not None:
                self.log("error", f"{getattr(function, '__name__', 'a task')} failed: "
                                  f"{error.__class__.__name__}: {error}")

        self.model_worker.submit(function, *args).add_done_callback(said)

    def is_open(self, uri: str) -> bool:
        """Whether the client opened `uri` (pygls keeps documents by their URI percent-decoded:
        `my%20shop` is `my shop` there, and a raw look-up missed every document of such a folder)."""
        return unquote(uri) in self.workspace.text_documents

    def index_installed(self) -> None:
        """On the event loop, when an index is in where none was (the first, or one rebuilt after
        damage): answers given before, from the open file alone, are not given again at the same
        cursor; a request from here on does not join a generation that started before."""
        self.answers_generation += 1

    def ask_in(self, uri: str, path: str, version: int | None, text: str, line: int, character: int,
               prefix_only: bool = False, below: bool = False) -> CompletionAsk:
        """The request at (line, character) of `text` in this server's answers generation
        (CompletionAsk.at)."""
        return CompletionAsk.at(uri, version, path, text, line, character, self.answers_generation, prefix_only, below)

    def document_text(self, uri: str) -> str:
        """An open document's text as the server uses it: newlines normalized, and each unpaired
        UTF-16 surrogate (JSON carries one, as "\\ud800"; UTF-8 cannot encode it, so indexing the
        buffer, and with it every document's retrieval, failed) replaced with U+FFFD, which keeps
        every position: one code point, one UTF-16 unit, three UTF-8 bytes, as the surrogate.
        The replacement is logged once per opening of the document."""
        text = normalize_newlines(self.workspace.get_text_document(uri).source)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = UNPAIRED_SURROGATE.sub("\ufffd", text)
            if uri not in self.surrogates_replaced:
                self.surrogates_replaced.add(uri)
                self.log("warning", f"{uri} holds unpaired UTF-16 surrogates (invalid text); completing it "
                                    "with U+FFFD in their place")
        return text

    async def run_model(self, ask: CompletionAsk, stop: threading.Event,
                        written: Callable[[str], None]) -> CompletionAnswer:
        """The scheduler's way to the model: the request on the model thread, stopped by `stop`,
        telling `written` what it has written so far."""
        assert self.session is not None
        request = EditorRequest(ask.state.path, ask.text, ask.line, ask.character, cancelled=stop.is_set,
                                prefix_only=ask.prefix_only, below=ask.below, written=written)
        return await self.on_model_thread(self.session.complete, request)

    def stop_model(self) -> None:
        """The session is ending: pending generations stop, no model opens again, and the model's
        child process is killed, so that a call stuck in it returns now rather than at its deadline."""
        if self.session is not None:
            self.session.stop_model()

    def apply_options(self, options: Any) -> None:
        """New client settings, applied to the session (on the model thread, which owns it)."""
        assert self.session is not None
        # Kept as repomem's own object (unwrapped from a "repomem" key): Neovim 0.12 sends the same
        # settings wrapped at initialize and bare in its first change, which read as a change and
        # stopped and reconfigured everything for nothing.
        self.settings_in_force = settings_after_change(options, None)
        for problem in self.session.configure(options):
            self.show("warning", problem)

    def schedule_with(self, config: Config) -> None:
        """On the event loop: the scheduler takes its settings (timings, caches) from `config`."""
        server = config.server
        self.scheduler.configure(server.debounce_ms / 1000, server.answer_within_ms / 1000,
                                 server.completion_cache_entries, server.warm_after_ms / 1000, server.type_through,
                                 server.warm_new_function, server.line_ahead and config.completion.continue_lines)

    # -- long work with work-done progress -------------------------------------------------------

    def with_progress(self, title: str, work: Callable[[LspProgress], None]) -> None:
        """Run `work(progress)` on a thread of its own, reporting `$/progress` under a
        server-created token when the client accepts one."""
        assert self.session is not None
        token = f"repomem-{title.split()[-1]}-{time.monotonic_ns()}"
        progress = LspProgress(self, token, f"repomem: {title}", self.session.config.server.progress_interval_ms)

        def created(future: Any) -> None:
            try:
                accepted = not future.cancelled() and future.exception() is None
            except Exception:  # noqa: BLE001 - whatever the client answered, the work goes on without reports
                accepted = False
            progress.answered(accepted)

        if field(self.client_capabilities, "window", "work_done_progress"):
            self.work_done_progress.create(token).add_done_callback(created)
        else:
            progress.answered(False)
        threading.Thread(target=work, args=(progress,), daemon=True, name=f"repomem-{title}").start()

    def start_indexing(self) -> None:
        session = self.session
        assert session is not None

        def run(progress: LspProgress) -> None:
            # This thread ends with the build: its priority, and its workers', need no restoring.
            if lower_thread_priority(session.config.server.index_nice):
                self.log("info", f"indexing at a lower CPU priority than completions (nice {thread_nice()})")
            progress.open("loading the index")
            try:
                index = session.build_index(progress)
            except Exception as error:  # an index that cannot be built leaves in-file completion  # noqa: BLE001
                index = Failure(FailureKind.INDEX, f"{error.__class__.__name__}: {error}")
            if isinstance(index, Failure):
                progress.end("failed")
                message = f"no index ({index.message}); completing from the open file only"
                self.log("error", message)
                self.readiness.failed(message)
                return
            progress.end("done")
            # Answers made without an index (the open file alone) are stale once one is in; those
            # of the index a compaction replaces are not (it holds the same files).
            answered_without = not session.index_ready.is_set()
            try:
                self.model_worker.submit(session.install_index, index).result()
                # The old index let go: its garbage collected, the new one out of later collections
                # (a walk of it would stall an edit or a completion every few dozen edits). On the
                # model's thread: a collection holds Python's lock throughout, and this thread,
                # at its lower priority, could hold it long while the model takes the cores. What the
                # old index freed goes back to the system (a compaction left it mapped).
                self.model_worker.submit(settle_replaced_index).result()
            except RuntimeError:  # the server is exiting (exit arrived while the index was built)
                return
            if answered_without:
                self.call_from_thread(self.index_installed)
            self.log("info", "ready")
            self.readiness.index_in(f"{index.n_live_files} files indexed")

        self.with_progress("indexing", run)

    def persist_later(self) -> None:
        """The index written to disk after what the model thread is doing now (called on it)."""
        session = self.session
        assert session is not None
        try:
            self.in_background(session.persist)
        except RuntimeError:  # the server is exiting: the index stays as the last save left it
            pass

    def start_model(self) -> None:
        """Open the model on the model thread (it loads while the index builds)."""
        session = self.session
        assert session is not None

        def load() -> None:
            engine = session.ensure_engine()
            if engine is None:
                self.readiness.failed(f"model unavailable ({session.backend_problem}); no completions until it "
                                      f"loads (retried every {session.config.server.backend_retry_s:g} s)")
            else:
                self.readiness.model_in(session.backend.name if session.backend is not None else "")

        def run(progress: LspProgress) -> None:
            progress.open("starting the model")
            try:
                self.model_worker.submit(load).result()
            except RuntimeError:  # the server is exiting
                return
            finally:
                progress.end("done")

        self.with_progress("model", run)

    def shutdown(self) -> None:
        """pygls's shutdown (its thread pool, its listening server), and the end of our message loop."""
        self.session_stop.set()
        super().shutdown()

    @property
    def client_capabilities(self) -> types.ClientCapabilities | None:
        """pygls's public property, or None before `initialize` (the protocol sets it there, so
        pygls's own raises AttributeError until then)."""
        return getattr(self.protocol, "client_capabilities", None)


def server_version() -> str:
    """The version the server tells its clients (serverInfo): the installed package's, which
    pyproject.toml sets, so no second literal can drift from it."""
    try:
        return importlib.metadata.version("repomem")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that is not installed
        import repomem

        return str(getattr(repomem, "__version__", "0+unknown"))


server = RepomemServer()


# -- life cycle ------------------------------------------------------------------------------------


@server.feature(types.INITIALIZE)
def initialize(ls: RepomemServer, params: types.InitializeParams) -> None:
    ls.loop = asyncio.get_running_loop()
    ls.options = params.initialization_options
    ls.protocol.use_protocol_lines()


@server.feature(types.INITIALIZED)
def initialized(ls: RepomemServer, params: types.InitializedParams) -> None:
    root = ls.workspace.root_path
    if not root:
        # LSP 3.17 deprecates rootUri for workspaceFolders: a client may send the folders alone.
        root = next((str(uri_to_path(folder.uri)) for folder in ls.workspace.folders.values()
                     if folder.uri.startswith("file:")), None)
    ahead, ls.model_ahead = ls.model_ahead, None
    if not root or not Path(root).is_dir():
        if ahead is not None:
            ahead.discard()
        ls.show("warning", "no workspace folder: nothing to index, no completions (open a file inside a repository)")
        return
    root_path = Path(root).resolve()
    too_wide = too_wide_to_index(root_path)
    if too_wide:
        # A client with no project for a stray file gives its folder (lsp-mode guessing a root,
        # VS Code opened on ~): indexing all of it is never what is meant, and the CLI refuses it.
        if ahead is not None:
            ahead.discard()
        ls.show("warning", f"the workspace folder {root_path} is {too_wide}: nothing indexed, no completions "
                           "(open a project's folder)")
        return
    settings = read_settings(root_path)
    for warning in problem_lines(resolved_config(settings, "lsp").problems):
        ls.show("warning", warning)
    ls.session = CompletionSession(root_path, settings, ls.log, ahead)
    ls.session.on_index_lost = lambda: ls.call_from_thread(ls.start_indexing)
    ls.session.on_index_churned = lambda: ls.call_from_thread(ls.start_indexing)
    ls.session.on_disk_changed = ls.persist_later
    # Answers cached before the disk changed the index are stale (as after an index installed), and
    # the watch is read as the disk changes, not at the next request (lsp/disk_events.py).
    ls.session.on_index_changed = lambda: ls.call_from_thread(ls.index_installed)
    disk_events.start(ls.session.watch_fileno, lambda: ls.model_worker.submit(ls.session.read_disk).result(),
                      ls.session_stop, ls.log)
    ls.apply_options(ls.options)
    ls.schedule_with(ls.session.config)
    ls.start_model()  # the model loads while the index builds
    ls.start_indexing()
    if field(ls.client_capabilities, "workspace", "did_change_watched_files", "dynamic_registration"):
        ls.client_register_capability(types.RegistrationParams(registrations=[types.Registration(
            id="repomem-watched-files", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[types.FileSystemWatcher(glob_pattern="**/*")]),
        )]))


@server.feature(types.SHUTDOWN)
async def shutdown(ls: RepomemServer, params: Any) -> None:
    """Finish what is queued on the model thread (an accept's log line, a save) before the reply:
    clients kill the server right after `exit` (Emacs 28's jsonrpc sends SIGKILL at once). No
    completion comes after `shutdown`, so the model stops first: a call stuck in it would hold
    the queue."""
    ls.scheduler.stop_all()
    ls.stop_model()
    try:
        await asyncio.wait_for(ls.on_model_thread(lambda: None), SHUTDOWN_DRAIN_S)
    except (TimeoutError, RuntimeError):  # a generation that would not stop, or the worker is gone
        ls.log("warning", f"shutting down with work still queued after {SHUTDOWN_DRAIN_S:g} s")


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(ls: RepomemServer, params: types.DidChangeConfigurationParams) -> None:
    # A change with nothing of repomem's keeps the settings in force (a change before, if any).
    in_force = ls.settings_in_force if ls.settings_in_force is not None else ls.options
    settings = settings_after_change(in_force, params.settings)
    if ls.session is not None and settings != ls.settings_in_force:
        # Answers for the old settings are stale from now on, even before the model thread (busy
        # with a generation, maybe) gets to apply the new ones: a request arriving meanwhile
        # must not join a generation running with the old settings.
        ls.answers_generation += 1
        ls.scheduler.stop_all()
        # The scheduler's settings apply from this notification on, in the client's order: a
        # request sent after it must not get the old answer budget because the model thread was
        # still busy (a generation stopping, a prompt being read) when it came. The same settings,
        # worked out here from the same files; the session's own are applied on its thread.
        ls.schedule_with(session_config(ls.session.settings_read, settings, ls.session.client_settings)[0])
        await ls.on_model_thread(ls.apply_options, settings)
        ls.schedule_with(ls.session.config)


# -- documents -------------------------------------------------------------------------------------


def _buffer_changed(ls: RepomemServer, uri: str, rest: types.Position | None = None) -> None:
    """A new text for an open document; `rest`: where the edit left the cursor, if known."""
    ls.text_versions[uri] = next(ls.next_text_version)
    path = ls.relative(uri)
    if path is not None and ls.session is not None:
        ls.scheduler.document_changed(uri, ls.text_versions[uri], ls.ask_at(uri, rest) if rest is not None else None)
        ls.session.buffer_changed(path, ls.document_text(uri))


def _edit_end(ls: RepomemServer, uri: str, change: Any) -> types.Position | None:
    """Where an incremental change leaves the cursor: the end of its inserted text (client units)."""
    if not isinstance(change, types.TextDocumentContentChangePartial):
        return None
    codec = ls.workspace.get_text_document(uri).position_codec
    inserted = change.text.split("\n")
    start = change.range.start
    if len(inserted) == 1:
        return types.Position(line=start.line, character=start.character + codec.client_num_units(inserted[0]))
    return types.Position(line=start.line + len(inserted) - 1, character=codec.client_num_units(inserted[-1]))


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: RepomemServer, params: types.DidOpenTextDocumentParams) -> None:
    uri = params.text_document.uri
    if names_a_folder(uri):
        # No file's text: completed, it was plain text at the folder's path (and indexed as a file
        # there). Ignored until closed: its changes, saves and completions (empty, as not open).
        ls.workspace.remove_text_document(uri)
        if unquote(uri) not in ls.folders_opened:
            ls.folders_opened.add(unquote(uri))
            ls.log("warning", f"{uri} is a folder, not a file: ignored (no completions in it)")
        return
    _buffer_changed(ls, uri)
    if ls.session is not None:
        # Indexed now, while the user reads, instead of by the first completion in it: an opened
        # text that differs from the disk costs an edit (docs/editors.md#interactive-latency), the
        # same text a digest.
        try:
            ls.in_background(ls.session.sync_buffers)
        except RuntimeError:  # the server is exiting: no completion will need it
            pass


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: RepomemServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    if unquote(uri) in ls.folders_opened:
        return  # said at its didOpen
    if not ls.is_open(uri):
        # Nothing to apply it to (lsp/documents.py dropped it): reading on would take the disk's
        # text, in the event loop, for a buffer the client never showed the server.
        if uri not in ls.unopened_said and len(ls.unopened_said) < MAX_SAID:
            ls.unopened_said.add(uri)
            ls.log("warning", f"a change to {uri}, which the client never opened (or closed): ignored")
        return
    changes = params.content_changes
    _buffer_changed(ls, uri, _edit_end(ls, uri, changes[-1]) if changes else None)


@server.feature(CURSOR_NOTIFICATION)
def did_move_cursor(ls: RepomemServer, params: Any) -> None:
    fault = _position_fault(params)
    if fault is not None:
        ls.bad_params(CURSOR_NOTIFICATION, fault)
        return
    target = _document_position(params)
    ask = ls.ask_at(*target) if target is not None and ls.session is not None else None
    if ask is not None:
        ls.scheduler.cursor_rests(ask, reported=True)


def _document_position(value: Any) -> tuple[str, types.Position] | None:
    """(uri, position) of a TextDocumentPositionParams-shaped object from a custom message (dicts
    or attribute objects), or None when it is not one (`_position_fault` says why)."""
    if _position_fault(value) is not None:
        # (a negative line was a traceback in the answer: LSP positions are unsigned; one past
        # uinteger's range made Position raise: an "Error in server" pop-up for repomem/didMoveCursor)
        return None
    return field(value, "textDocument", "uri"), types.Position(line=field(value, "position", "line"),
                                                               character=field(value, "position", "character"))


def _position_fault(value: Any) -> str | None:
    """What keeps `value` from being a TextDocumentPositionParams (as `position.line: expected an
    unsigned integer, got 'x'`), or None when it is one."""
    def shown(wrong: Any) -> str:
        return repr(wrong)[:MAX_SHOWN_CHARS]

    uri = field(value, "textDocument", "uri")
    if not isinstance(uri, str):
        return f"textDocument.uri: expected a string, got {shown(uri)}"
    position = field(value, "position")
    numbers = {name: field(position, name) for name in ("line", "character")}
    if all(number is None for number in numbers.values()):
        return f"position: expected {{line, character}}, got {shown(position)}"
    for name, number in numbers.items():
        if not (isinstance(number, int) and not isinstance(number, bool) and 0 <= number <= UINTEGER_MAX):
            return f"position.{name}: expected an unsigned integer, got {shown(number)}"
    return None


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: RepomemServer, params: types.DidSaveTextDocumentParams) -> None:
    if unquote(params.text_document.uri) in ls.folders_opened:
        return
    path = ls.relative(params.text_document.uri)
    if path is not None and ls.session is not None:
        ls.in_background(ls.session.buffer_saved, path)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: RepomemServer, params: types.DidCloseTextDocumentParams) -> None:
    if unquote(params.text_document.uri) in ls.folders_opened:
        ls.folders_opened.discard(unquote(params.text_document.uri))
        return
    path = ls.relative(params.text_document.uri)
    ls.surrogates_replaced.discard(params.text_document.uri)
    ls.text_versions.pop(params.text_document.uri, None)
    ls.scheduler.document_closed(params.text_document.uri, path)
    if path is not None and ls.session is not None:
        ls.session.buffer_closed(path)
        ls.in_background(ls.session.drop_closed_buffer, path)


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def did_change_watched_files(ls: RepomemServer, params: types.DidChangeWatchedFilesParams) -> None:
    paths = [path for change in params.changes if (path := ls.relative(change.uri)) is not None]
    if paths and ls.session is not None:
        ls.in_background(ls.session.files_changed, paths)


# -- completions -------------------------------------------------------------------------------------


async def scheduled_completion(ls: RepomemServer, uri: str, position: types.Position,
                               answer_budget: bool = True) -> tuple[Scheduled, str, int, types.Position]:
    """The scheduler's answer at a position, the word typed before it, that word's length in the
    client's position units, and the position the answer is for (one past the line's end is its
    end: the items' ranges end there)."""
    ask = ls.ask_at(uri, position) if ls.session is not None else None
    if ask is None:
        return Scheduled(Outcome.DROPPED), "", 0, position
    word = typed_word(ask.line_text, ask.character)
    codec = ls.workspace.get_text_document(uri).position_codec
    at = types.Position(position.line, codec.client_num_units(ask.line_text[:ask.character]))
    return await ls.scheduler.complete(ask, answer_budget), word, codec.client_num_units(word), at


# Options given: pygls advertises inlineCompletionProvider only then, and clients that check it
# (Neovim 0.12's vim.lsp.inline_completion, vscode-languageclient) never asked without it.
@server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline_completion(ls: RepomemServer, params: types.InlineCompletionParams) -> types.InlineCompletionList:
    # No answer budget: an empty inline answer is final for the client (see lsp/scheduler.py).
    answer, word, units, at = await scheduled_completion(ls, params.text_document.uri, params.position,
                                                         answer_budget=False)
    if answer.outcome is not Outcome.ANSWERED or not answer.text:
        return types.InlineCompletionList(items=[])
    return types.InlineCompletionList(items=[inline_item(answer.text, word, at, units, answer.completion_id)])


@server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[".", "(", " "]))
async def completion(ls: RepomemServer, params: types.CompletionParams) -> types.CompletionList:
    """For clients without inline completion: one item carrying the whole completion. Always an
    incomplete list: the answer depends on every character typed, so clients must ask again."""
    answer, word, units, at = await scheduled_completion(ls, params.text_document.uri, params.position)
    if answer.outcome is Outcome.PENDING:
        # Still generating: clients ask again (isIncomplete); the shipped set-ups read the marker
        # to say "still working" rather than "no completion".
        return types.CompletionList(is_incomplete=True, items=[],
                                    item_defaults=types.CompletionItemDefaults(data={"pending": True}))
    if answer.outcome is not Outcome.ANSWERED or not answer.text:
        return types.CompletionList(is_incomplete=True, items=[])
    return types.CompletionList(is_incomplete=True, items=[
        completion_item(answer.text, word, at, units, answer.completion_id)])


# -- explain and feedback ------------------------------------------------------------------------------


@server.command(EXPLAIN_COMMAND)
async def explain(ls: RepomemServer, *arguments: Any) -> dict:
    """Arguments: one TextDocumentPositionParams-shaped object
    `{"textDocument": {"uri": ...}, "position": {"line": ..., "character": ...}}` (0-based)."""
    target = _document_position(arguments[0] if arguments else None)
    if target is None:
        return {"error": f"expected {POSITION_SHAPE}", "fragments": []}
    uri, position = target
    ask = ls.ask_at(uri, position)
    if ask is None or ls.session is None:
        return {"error": f"{uri} is not an open document of this workspace", "fragments": []}
    cached = ls.scheduler.cached(ask.state)
    try:
        answer = await ls.on_model_thread(ls.session.explain, ask.state.path, ask.text, ask.line, ask.character,
                                          cached.completion_id if cached else None)
        if isinstance(answer, dict) and "character" in answer:
            answer["character"] = position.character  # the client's units, as it asked (not code points)
        return answer
    except Exception as error:  # noqa: BLE001
        ls.log("error", f"explain failed: {error.__class__.__name__}: {error}")
        return {"error": str(error), "fragments": []}


def _feedback(ls: RepomemServer, event: str, completion_id: Any) -> None:
    if ls.session is None:
        return
    if not isinstance(completion_id, str):
        ls.log("warning", f"{event}: expected a completion id, got {completion_id!r}")
        return
    ls.in_background(ls.session.record_feedback, event, completion_id)
    if event == "accept" and ls.session.config.server.speculate_below:
        ask = _below_accepted(ls, completion_id)
        if ask is not None:
            ls.scheduler.speculate_below(ask)


def _below_accepted(ls: RepomemServer, completion_id: str) -> CompletionAsk | None:
    """Where Enter would leave the cursor after the accepted completion `completion_id`, when it
    ended a line of a document still open (lsp/next_line.py); else None."""
    shown = ls.session.shown.get(completion_id) if ls.session is not None else None
    uri = None if shown is None else next(
        (uri for uri in ls.workspace.text_documents if ls.relative(uri) == shown.path), None)
    if shown is None or uri is None:
        return None
    text = ls.document_text(uri)
    below = enter_at_end(text, shown.line + shown.text.count("\n"), shown.text.split("\n")[-1])
    if below is None:
        return None
    new_text, line, indent = below
    # Below: only a prompt continued from the accepted answer's (a few tokens) is worth a guess; one
    # built afresh would read the file after the cursor again. Prefix only: the accepted line sits
    # just before the file's cached rest, whose moved cells would not have seen it (the model then
    # wrote it again: docs/editors.md#interactive-latency).
    return ls.ask_in(uri, shown.path, ls.text_versions.get(uri), new_text, line, len(indent),
                     prefix_only=True, below=True)


@server.command(ACCEPT_COMMAND)
def accept_command(ls: RepomemServer, *arguments: Any) -> None:
    _feedback(ls, "accept", arguments[0] if arguments else None)


@server.feature(ACCEPT_NOTIFICATION)
def did_accept(ls: RepomemServer, params: Any) -> None:
    _feedback(ls, "accept", field(params, "id"))


@server.feature(REJECT_NOTIFICATION)
def did_reject(ls: RepomemServer, params: Any) -> None:
    _feedback(ls, "reject", field(params, "id"))


def protocol_stdout() -> BinaryIO:
    """A private copy of stdout for the protocol; file descriptor 1 then points at stderr.

    llama-cpp-python silences model loading by pointing descriptors 1 and 2 at /dev/null for a
    while; protocol messages written meanwhile would vanish (seen: `$/progress` and log messages
    lost while the model loaded). Stray prints from libraries land on stderr instead of
    corrupting the protocol stream.
    """
    private = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return private


def protocol_stdin() -> BinaryIO:
    """A private reader of stdin for the protocol; `sys.stdin` then reads /dev/null.

    A full build forks parse workers, and every process multiprocessing starts closes
    `sys.stdin` first: closing a buffered reader takes its lock, which the fork copied held by
    the thread blocked reading the next message, so each worker hung before it parsed a file (a
    repository of 64 files or more, indexed by the language server, never became ready).
    """
    private = os.fdopen(os.dup(sys.stdin.fileno()), "rb")
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - the process's stdin from now on
    return private


def serve_stdio(ls: RepomemServer, stdin: BinaryIO, stdout: BinaryIO) -> int:
    """pygls's stdio server with repomem's message loop (lsp/framing.py) in place of its own."""
    from pygls.io_ import StdoutWriter

    return run_session(ls, stdin, StdoutWriter(stdout))


def run_session(ls: RepomemServer, stream: BinaryIO, writer: Any) -> int:
    """One client's session over a byte stream; it ends the server, as pygls's does. The exit code:
    0 after shutdown + exit or a closed stream, 1 for an exit without shutdown (LSP 3.17)."""
    from pygls.io_ import StdinAsyncReader

    quiet_pygls_logs()
    ls.session_stop = threading.Event()
    reader = StdinAsyncReader(stream, ls.thread_pool)
    writer = SessionWriter(writer)  # once the client is gone, what is left to send is dropped
    ls.protocol.set_writer(writer)
    loop = MessageLoop(ls.protocol, writer.write, ServerConfig().max_message_bytes, ls.bad_params)
    code = 0
    try:
        asyncio.run(loop.run(ls.session_stop, reader))
    except (BrokenPipeError, ConnectionResetError):
        complain("the client closed the connection")
    except OSError as error:
        complain(f"the connection failed: {error.__class__.__name__}: {error}")
    except KeyboardInterrupt:
        pass
    except SystemExit as stop:  # pygls's `exit` handler: 0 after shutdown, else 1 (LSP 3.17)
        code = stop.code if isinstance(stop.code, int) else 1
    finally:
        ls.stop_model()
        ls.shutdown()
    return code


def exit_code_without_waiting(ls: RepomemServer, code: int) -> int:
    """`code`, once the model thread is idle. A model call the server cannot stop (a served model
    that does not answer, a model still loading) would hold the process until its deadline, since
    Python waits for that thread at exit: after EXIT_GRACE_S the process ends without it."""
    try:
        idle = ls.model_worker.submit(lambda: None)
        idle.result(timeout=EXIT_GRACE_S)
    except RuntimeError:  # the model thread is shut down already
        pass
    except TimeoutError:
        complain(f"exiting with a model call still running after {EXIT_GRACE_S:g} s")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def serve(tcp_port: int | None = None, socket_path: Path | None = None, token_file: Path | None = None,
          model_ahead: StartedAhead | None = None) -> int:
    """stdio by default; `--tcp PORT` (loopback, clients need the token) or `--socket PATH`
    (a Unix socket only its owner can open). `model_ahead`: the model's child, already started."""
    server.model_ahead = model_ahead
    if tcp_port is None and socket_path is None:
        return exit_code_without_waiting(server, serve_stdio(server, protocol_stdin(), protocol_stdout()))
    from repomem.config import load_config
    from repomem.lsp.listen import serve_socket, tcp_listener, unix_listener

    # The listener's settings (server.auth_timeout_s, pending_clients) are the user's, read where
    # the server starts (a repository cannot set them); the defaults were used whatever they said.
    settings = load_config(Path.cwd(), "lsp")[0].server
    listener = tcp_listener(tcp_port, token_file) if tcp_port is not None else unix_listener(socket_path)
    return exit_code_without_waiting(server, serve_socket(listener, lambda stream, writer: run_session(
        server, stream, writer), settings))
