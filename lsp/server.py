"""Adapter for pygls: `repomem serve`, a language server giving inline completions.

Thin typed handlers over `CompletionSession` (repomem/lsp_session.py), which owns the
RepoService, the index and the model and runs only on `model_worker`, one thread: the event loop
never waits on the model, so the server keeps answering while it generates.

- Start-up: `initialize` reads the settings (initializationOptions), `initialized` starts the
  index on its own thread with `$/progress` reports, and opens the model on the model thread.
  Until the index is ready completions come from the open file alone.
- Open buffers are what retrieval and prompts see: each change is remembered and overlaid on the
  index right before the next retrieval. Saves and watched-file events re-index from disk and
  persist the index.
- Latency: an LRU cache and a forward-typing cache answer without the model; otherwise a request
  waits `debounce_ms` and starts only if no newer one came for its document. A newer request or
  `$/cancelRequest` stops a running generation between tokens.
- Failures are an empty answer plus `window/logMessage`; bad settings a `window/showMessage`.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from repomem.config import ServerConfig, load_config
from repomem.failures import Failure
from repomem.index.scan import normalize_newlines
from repomem.lsp.cache import CachedCompletion, CompletionCache, CursorState, ForwardTypingCache
from repomem.lsp.framing import MessageLoop, SessionRefused, complain, quiet_pygls_logs
from repomem.lsp.session import CompletionAnswer, CompletionSession, EditorRequest

EXPLAIN_COMMAND = "repomem.explain"
ACCEPT_COMMAND = "repomem.didAccept"  # also a command, so an item's `command` can report acceptance
ACCEPT_NOTIFICATION = "repomem/didAccept"
REJECT_NOTIFICATION = "repomem/didReject"
LOG_LEVELS = {"error": types.MessageType.Error, "warning": types.MessageType.Warning,
              "info": types.MessageType.Info, "log": types.MessageType.Log}


def uri_to_path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def field(value: Any, *names: str) -> Any:
    """`value.a.b` for JSON that arrives as dicts or as attribute objects (custom messages)."""
    for name in names:
        if value is None:
            return None
        value = value.get(name) if isinstance(value, dict) else getattr(value, name, None)
    return value


class LspProgress:
    """core Progress -> `$/progress` work-done reports, throttled, sent from any thread."""

    def __init__(self, server: RepomemServer, token: str, interval_ms: int):
        self._server = server
        self._token = token
        self._interval_s = interval_ms / 1000
        self._stage = ""
        self._total = 1
        self._done = 0
        self._last_sent = 0.0
        self._began = False
        self.enabled = True

    def open(self, message: str) -> None:
        if self.enabled:
            self._began = True
            self._server.call_from_thread(self._server.work_done_progress.begin, self._token,
                                          types.WorkDoneProgressBegin(title="repomem: indexing", message=message,
                                                                      percentage=0, cancellable=False))

    def start(self, stage: str, total: int) -> None:
        self._stage, self._total, self._done = stage, max(total, 1), 0
        self._send(force=True)

    def advance(self, units: int = 1) -> None:
        self._done += units
        self._send()

    def _send(self, force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or not self._began or (not force and now - self._last_sent < self._interval_s):
            return
        self._last_sent = now
        percentage = min(100, int(100 * self._done / self._total))
        self._server.call_from_thread(self._server.work_done_progress.report, self._token,
                                      types.WorkDoneProgressReport(message=self._stage, percentage=percentage))

    def end(self, message: str) -> None:
        if self._began:
            self._server.call_from_thread(self._server.work_done_progress.end, self._token,
                                          types.WorkDoneProgressEnd(message=message))


class RepomemServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("repomem", "0.1.0")
        self.session: CompletionSession | None = None
        self.options: Any = None  # initializationOptions, applied once the workspace is known
        self.model_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="repomem-model")
        self.loop: asyncio.AbstractEventLoop | None = None
        self.newest_request: dict[str, int] = {}  # document uri -> number of its newest request
        self.request_counter = 0
        self.cache = CompletionCache(1)
        self.forward = ForwardTypingCache()
        self.settings_generation = 0
        self.completion_of_state: dict[str, str] = {}  # uri -> id of the completion shown at its current state

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

    def document_state(self, uri: str, position: types.Position) -> tuple[str, str, int, int, CursorState] | None:
        """(path, text, line, character in code points, CursorState) for a position, or None."""
        path = self.relative(uri)
        if path is None:
            return None
        if uri not in self.workspace.text_documents:
            # Not opened by the client: pygls would read the disk here, in the event loop (a
            # missing file is an exception, a named pipe blocks forever). No answer instead.
            return None
        document = self.workspace.get_text_document(uri)
        text = normalize_newlines(document.source)
        lines = text.split("\n")
        if not 0 <= position.line < len(lines):
            return None
        server_position = document.position_from_client_units(position)
        character = min(server_position.character, len(lines[position.line]))
        offset = sum(len(line) + 1 for line in lines[: position.line]) + character
        return path, text, position.line, character, CursorState.of(path, text, offset, self.settings_generation)

    def apply_options(self, options: Any) -> None:
        """New client settings (on the model thread); caches keyed by the old ones go stale."""
        assert self.session is not None
        for problem in self.session.configure(options):
            self.show("warning", problem)
        server = self.session.config.server
        self.settings_generation += 1
        self.cache = CompletionCache(server.completion_cache_entries)
        self.forward.clear()

    # -- the index, on its own thread ------------------------------------------------------------

    def start_indexing(self) -> None:
        session = self.session
        assert session is not None
        token = f"repomem-index-{time.monotonic_ns()}"
        progress = LspProgress(self, token, session.config.server.progress_interval_ms)

        def run() -> None:
            progress.open("loading the index")
            try:
                index = session.build_index(progress)
            except Exception as error:  # an index that cannot be built leaves in-file completion  # noqa: BLE001
                index = Failure("index", f"{error.__class__.__name__}: {error}")
            if isinstance(index, Failure):
                progress.end("failed")
                self.log("error", f"no index ({index.message}); completing from the open file only")
                return
            progress.end("done")
            try:
                self.model_worker.submit(session.install_index, index).result()
            except RuntimeError:  # the server is exiting (exit arrived while the index was built)
                return
            self.log("info", "ready")

        def begin() -> None:
            threading.Thread(target=run, daemon=True, name="repomem-index").start()

        def created(future: Any) -> None:
            if future.cancelled() or future.exception() is not None:
                progress.enabled = False  # the client refused the token: index without reports
            begin()

        if field(self.client_capabilities, "window", "work_done_progress"):
            self.work_done_progress.create(token).add_done_callback(created)
        else:
            progress.enabled = False
            begin()

    @property
    def client_capabilities(self) -> types.ClientCapabilities | None:
        return getattr(self.protocol, "client_capabilities", None)


server = RepomemServer()


# -- life cycle ------------------------------------------------------------------------------------


@server.feature(types.INITIALIZE)
def initialize(ls: RepomemServer, params: types.InitializeParams) -> None:
    ls.loop = asyncio.get_running_loop()
    ls.options = params.initialization_options


@server.feature(types.INITIALIZED)
def initialized(ls: RepomemServer, params: types.InitializedParams) -> None:
    root = ls.workspace.root_path
    if not root or not Path(root).is_dir():
        ls.log("warning", "no workspace folder: nothing to index, no completions")
        return
    root_path = Path(root).resolve()
    base_config, warnings = load_config(root_path)
    for warning in warnings:
        ls.show("warning", warning)
    ls.session = CompletionSession(root_path, base_config, ls.log)
    ls.session.on_index_lost = lambda: ls.call_from_thread(ls.start_indexing)
    ls.session.on_index_churned = lambda: ls.call_from_thread(ls.start_indexing)
    ls.apply_options(ls.options)
    ls.model_worker.submit(ls.session.ensure_engine)  # the model loads while the index builds
    ls.start_indexing()
    if field(ls.client_capabilities, "workspace", "did_change_watched_files", "dynamic_registration"):
        ls.client_register_capability(types.RegistrationParams(registrations=[types.Registration(
            id="repomem-watched-files", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[types.FileSystemWatcher(glob_pattern="**/*")]),
        )]))


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(ls: RepomemServer, params: types.DidChangeConfigurationParams) -> None:
    if ls.session is not None:
        await ls.on_model_thread(ls.apply_options, params.settings)


# -- documents -------------------------------------------------------------------------------------


def _buffer_changed(ls: RepomemServer, uri: str) -> None:
    path = ls.relative(uri)
    if path is not None and ls.session is not None:
        ls.session.buffer_changed(path, normalize_newlines(ls.workspace.get_text_document(uri).source))


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: RepomemServer, params: types.DidOpenTextDocumentParams) -> None:
    _buffer_changed(ls, params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: RepomemServer, params: types.DidChangeTextDocumentParams) -> None:
    _buffer_changed(ls, params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: RepomemServer, params: types.DidSaveTextDocumentParams) -> None:
    path = ls.relative(params.text_document.uri)
    if path is not None and ls.session is not None:
        ls.model_worker.submit(ls.session.buffer_saved, path)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: RepomemServer, params: types.DidCloseTextDocumentParams) -> None:
    path = ls.relative(params.text_document.uri)
    ls.newest_request.pop(params.text_document.uri, None)
    ls.completion_of_state.pop(params.text_document.uri, None)
    if path is not None and ls.session is not None:
        ls.forward.forget(path)
        ls.model_worker.submit(ls.session.buffer_closed, path)


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def did_change_watched_files(ls: RepomemServer, params: types.DidChangeWatchedFilesParams) -> None:
    paths = [path for change in params.changes if (path := ls.relative(change.uri)) is not None]
    if paths and ls.session is not None:
        ls.model_worker.submit(ls.session.files_changed, paths)


# -- completions -------------------------------------------------------------------------------------


async def completion_text(ls: RepomemServer, uri: str, position: types.Position) -> str:
    """The completion at a position ("" when there is none), through the caches and the model."""
    state = ls.document_state(uri, position)
    if state is None or ls.session is None:
        return ""
    path, text, line, character, cursor_state = state
    cached = ls.cache.get(cursor_state)
    if cached is not None:
        ls.forward.remember(cursor_state, cached)  # shown again: typing on from here reuses it
    else:
        cached = ls.forward.continuation(cursor_state)
    if cached is not None:
        ls.completion_of_state[uri] = cached.completion_id
        return cached.text
    ls.request_counter += 1
    number = ls.newest_request[uri] = ls.request_counter
    await asyncio.sleep(ls.session.config.server.debounce_ms / 1000)
    if ls.newest_request.get(uri) != number:
        return ""  # superseded while waiting: the newer request answers
    stop = threading.Event()
    request = EditorRequest(path, text, line, character,
                                cancelled=lambda: stop.is_set() or ls.newest_request.get(uri) != number)
    try:
        answer: CompletionAnswer = await ls.on_model_thread(ls.session.complete, request)
    except asyncio.CancelledError:  # $/cancelRequest: stop the model between tokens
        stop.set()
        raise
    except Exception as error:  # noqa: BLE001 - whatever happens, the server answers
        ls.log("error", f"completion failed: {error.__class__.__name__}: {error}")
        return ""
    if answer.finish_reason == "cancelled":
        return ""
    if answer.shown is not None:
        completion = CachedCompletion(answer.text, answer.shown.completion_id)
        ls.cache.put(cursor_state, completion)
        ls.forward.remember(cursor_state, completion)
        ls.completion_of_state[uri] = completion.completion_id
    return answer.text


@server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION)
async def inline_completion(ls: RepomemServer, params: types.InlineCompletionParams) -> types.InlineCompletionList:
    text = await completion_text(ls, params.text_document.uri, params.position)
    if not text:
        return types.InlineCompletionList(items=[])
    completion_id = ls.completion_of_state.get(params.text_document.uri)
    return types.InlineCompletionList(items=[types.InlineCompletionItem(
        insert_text=text, range=types.Range(params.position, params.position),
        command=types.Command(title="repomem: accepted", command=ACCEPT_COMMAND, arguments=[completion_id]),
    )])


@server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[".", "(", " "]))
async def completion(ls: RepomemServer, params: types.CompletionParams) -> types.CompletionList:
    """Fallback for clients without inline completion: one item carrying the whole completion."""
    text = await completion_text(ls, params.text_document.uri, params.position)
    if not text:
        return types.CompletionList(is_incomplete=True, items=[])
    completion_id = ls.completion_of_state.get(params.text_document.uri)
    item = types.CompletionItem(
        label=text.strip().split("\n")[0][:60] or text, kind=types.CompletionItemKind.Snippet,
        detail="repomem", insert_text=text, data={"id": completion_id},
        text_edit=types.TextEdit(types.Range(params.position, params.position), text),
        command=types.Command(title="repomem: accepted", command=ACCEPT_COMMAND, arguments=[completion_id]),
    )
    return types.CompletionList(is_incomplete=True, items=[item])


# -- explain and feedback ------------------------------------------------------------------------------


@server.command(EXPLAIN_COMMAND)
async def explain(ls: RepomemServer, *arguments: Any) -> dict:
    """Arguments: one TextDocumentPositionParams-shaped object
    `{"textDocument": {"uri": ...}, "position": {"line": ..., "character": ...}}` (0-based)."""
    target = arguments[0] if arguments else None
    uri = field(target, "textDocument", "uri")
    line, character = field(target, "position", "line"), field(target, "position", "character")
    if not isinstance(uri, str) or not isinstance(line, int) or not isinstance(character, int):
        return {"error": "expected {textDocument: {uri}, position: {line, character}}", "fragments": []}
    state = ls.document_state(uri, types.Position(line=line, character=character))
    if state is None or ls.session is None:
        return {"error": f"{uri} is not an open document of this workspace", "fragments": []}
    path, text, line, character, cursor_state = state
    cached = ls.cache.get(cursor_state) or ls.forward.continuation(cursor_state)
    try:
        return await ls.on_model_thread(ls.session.explain, path, text, line, character,
                                        cached.completion_id if cached else None)
    except Exception as error:  # noqa: BLE001
        ls.log("error", f"explain failed: {error.__class__.__name__}: {error}")
        return {"error": str(error), "fragments": []}


def _feedback(ls: RepomemServer, event: str, completion_id: Any) -> None:
    if ls.session is None:
        return
    if not isinstance(completion_id, str):
        ls.log("warning", f"{event}: expected a completion id, got {completion_id!r}")
        return
    ls.model_worker.submit(ls.session.record_feedback, event, completion_id)


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
    """pygls's stdio server with repomem's message loop (lsp/framing.py) in place of its own; the
    exit code: 0 after shutdown + exit or a closed stream, 1 for an exit without shutdown."""
    from pygls.io_ import StdoutWriter

    code = run_session(ls, stdin, StdoutWriter(stdout))
    return 0 if code is None else code


def run_session(ls: RepomemServer, stream: BinaryIO, writer: Any,
                admit: Callable[[dict[str, Any]], str | None] | None = None) -> int | None:
    """One client's session over a byte stream: its exit code, or None when `admit` refused the
    client (or the stream failed) before `initialize` was accepted; the server then lives on for
    the next client. A session that was admitted ends the server when it ends, as pygls's does."""
    from pygls.io_ import StdinAsyncReader

    quiet_pygls_logs()
    ls._stop_event = threading.Event()
    reader = StdinAsyncReader(stream, ls.thread_pool)
    ls.protocol.set_writer(writer)
    loop = MessageLoop(ls.protocol, writer.write, ServerConfig().max_message_bytes, admit)
    code: int | None = 0
    try:
        asyncio.run(loop.run(ls._stop_event, reader))
    except SessionRefused:
        code = None
    except (BrokenPipeError, ConnectionResetError):
        complain("the client closed the connection")
    except OSError as error:  # a socket client that sent nothing in time
        complain(f"the connection failed: {error.__class__.__name__}: {error}")
    except KeyboardInterrupt:
        pass
    except SystemExit as stop:  # pygls's `exit` handler: 0 after shutdown, else 1 (LSP 3.17)
        code = stop.code if isinstance(stop.code, int) else 1
    finally:
        # A socket client refused or gone before `initialize` leaves nothing to shut down; the
        # server lives on for the next one.
        admitted = admit is None or (loop.initialized and code is not None)
        if admitted:
            ls.shutdown()
    return code if admitted else None


def serve(tcp_port: int | None = None, socket_path: Path | None = None, token_file: Path | None = None) -> int:
    """stdio by default; `--tcp PORT` (loopback, clients need the token) or `--socket PATH`
    (a Unix socket only its owner can open)."""
    if tcp_port is None and socket_path is None:
        return serve_stdio(server, protocol_stdin(), protocol_stdout())
    from repomem.lsp.listen import serve_socket, tcp_listener, unix_listener

    listener = tcp_listener(tcp_port, token_file) if tcp_port is not None else unix_listener(socket_path)
    return serve_socket(listener, lambda stream, writer, admit: run_session(server, stream, writer, admit))
