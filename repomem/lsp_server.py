"""Adapter for pygls: `repomem serve`, a language server giving inline completions (first cut).

Thin handlers over RepoService and CompletionEngine. The index and the model load off the event
loop on `initialized`; until then completions come from the current file alone. Open buffers are
what retrieval and prompts see (they overlay the index); saves re-read the disk. Model calls run on
one worker thread, so the server keeps answering; a newer request for the same document cancels
the older one between tokens. Failures become an empty answer and a log message, never a dead
server.

Still to come (issue 4): configuration by initializationOptions / didChangeConfiguration,
$/progress, watched files, explain, accept/reject log, LRU and forward-typing caches.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from repomem.completion import CompletionEngine, open_backend
from repomem.failures import Failure
from repomem.positions import locate
from repomem.service import RepoService


def uri_to_path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


class RepomemServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("repomem", "0.1.0")
        self.service: RepoService | None = None
        self.engine: CompletionEngine | None = None
        self.ready = threading.Event()
        self.model_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="repomem-model")
        self.generation_of: dict[str, int] = {}  # document uri -> number of its newest request
        self.lock = threading.Lock()

    def log(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=f"repomem: {message}"))

    def load(self, root: Path) -> None:
        """Index and model, on a worker thread (minutes on a cold start)."""
        service = RepoService.open(root)
        if isinstance(service, Failure):
            self.log(service.message, types.MessageType.Error)
            return
        report = service.ensure_index()
        if isinstance(report, Failure):
            self.log(report.message, types.MessageType.Warning)
        backend = open_backend(service.config.completion)
        if isinstance(backend, Failure):
            self.log(backend.message, types.MessageType.Error)
            return
        with self.lock:
            self.service = service
            self.engine = CompletionEngine(service, backend)
        self.ready.set()
        self.log(f"ready: {backend.name}, {report.fragments if not isinstance(report, Failure) else 0} fragments")

    def relative(self, uri: str) -> str | None:
        if self.service is None:
            return None
        try:
            return uri_to_path(uri).resolve().relative_to(self.service.root).as_posix()
        except ValueError:
            return None

    def complete(self, uri: str, line: int, character: int, number: int) -> str:
        """Blocking: runs on the model worker. Returns "" when there is nothing to offer."""
        engine = self.engine
        if engine is None:
            return ""
        relative = self.relative(uri)
        if relative is None:
            return ""
        text = self.workspace.get_text_document(uri).source
        cursor = locate(engine.service.root, relative, text, line + 1, character + 1)
        if isinstance(cursor, Failure):
            self.log(cursor.message, types.MessageType.Warning)
            return ""
        result = engine.complete(cursor, cancel=lambda: self.generation_of.get(uri) != number)
        if isinstance(result, Failure):
            self.log(result.message, types.MessageType.Warning)
            return ""
        if result.generation.finish_reason == "cancelled":
            return ""
        return result.text


server = RepomemServer()


@server.feature(types.INITIALIZED)
def initialized(ls: RepomemServer, params: types.InitializedParams) -> None:
    root = ls.workspace.root_path
    if root:
        threading.Thread(target=ls.load, args=(Path(root),), daemon=True, name="repomem-load").start()
    else:
        ls.log("no workspace folder: nothing to index", types.MessageType.Warning)


def _sync_buffer(ls: RepomemServer, uri: str) -> None:
    if not ls.ready.is_set() or ls.service is None:
        return
    relative = ls.relative(uri)
    if relative is None:
        return
    result = ls.service.set_buffer(relative, ls.workspace.get_text_document(uri).source)
    if isinstance(result, Failure) and result.kind != "not-indexed":
        ls.log(result.message, types.MessageType.Warning)


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: RepomemServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.model_worker.submit(_sync_buffer, ls, params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: RepomemServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.model_worker.submit(_sync_buffer, ls, params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: RepomemServer, params: types.DidCloseTextDocumentParams) -> None:
    relative = ls.relative(params.text_document.uri)
    if relative is not None and ls.service is not None:
        ls.model_worker.submit(ls.service.drop_buffer, relative)


async def _completion_text(ls: RepomemServer, uri: str, position: types.Position) -> str:
    number = ls.generation_of.get(uri, 0) + 1
    ls.generation_of[uri] = number
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(ls.model_worker, ls.complete, uri, position.line, position.character, number)
    except Exception as error:  # a model crash must not kill the server
        ls.log(f"completion failed: {error.__class__.__name__}: {error}", types.MessageType.Error)
        return ""


@server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION)
async def inline_completion(ls: RepomemServer, params: types.InlineCompletionParams) -> types.InlineCompletionList:
    text = await _completion_text(ls, params.text_document.uri, params.position)
    items = [types.InlineCompletionItem(insert_text=text,
                                        range=types.Range(params.position, params.position))] if text else []
    return types.InlineCompletionList(items=items)


@server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[".", "(", " "]))
async def completion(ls: RepomemServer, params: types.CompletionParams) -> types.CompletionList:
    text = await _completion_text(ls, params.text_document.uri, params.position)
    if not text:
        return types.CompletionList(is_incomplete=True, items=[])
    item = types.CompletionItem(
        label=text.strip().split("\n")[0][:60] or text, kind=types.CompletionItemKind.Snippet,
        detail="repomem", insert_text=text,
        text_edit=types.TextEdit(types.Range(params.position, params.position), text),
    )
    return types.CompletionList(is_incomplete=True, items=[item])


def serve(tcp_port: int | None = None) -> None:
    if tcp_port is None:
        server.start_io()
    else:
        server.start_tcp("127.0.0.1", tcp_port)
