"""The language server's message loop: LSP base-protocol framing that survives a bad client.

pygls's own loop (pygls.io_.run_async) logs a traceback for a body that is not JSON and answers
nothing, and after one wrong `Content-Length` it never finds a header again: the rest of the
session is lost. This loop reads the same frames and hands the same messages to pygls's protocol,
but:

- a header is found anywhere on its line, so the stream resynchronises after a body that was
  shorter or longer than its `Content-Length` said;
- a body that is not JSON is answered with a JSON-RPC parse error (-32700), a message that is not a
  JSON-RPC request or notification with an invalid-request error (-32600), a request sent before
  `initialize` with ServerNotInitialized (-32002) and one after `shutdown` with InvalidRequest, as
  the specification asks (pygls itself ends the process at `exit`: 0 after `shutdown`, else 1);
- a `Content-Length` that is missing, unreadable or larger than `max_message_bytes` drops that
  message, never the session;
- every one of these is one line on stderr, never a traceback;
- once the client's end is gone (closed by `exit`, or the client went away: a broken pipe, a
  reset connection), what the server still sends is dropped (SessionWriter). pygls logged each
  such message with its traceback and then tried to show the client the error, which failed the
  same way: an editor killed mid-completion left two tracebacks in its log, an `exit` without
  `shutdown` while a completion ran left 25 "Error sending data" lines.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Callable
from typing import Any

HEADER = re.compile(rb"Content-Length:[ \t]*([^\r\n]*?)[ \t]*\r?\n?$", re.IGNORECASE)
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
SERVER_NOT_INITIALIZED = -32002
INTERNAL_ERROR = -32603
# Before `initialize`, only these may come (the client may also give up and exit).
ALLOWED_BEFORE_INITIALIZE = frozenset({"initialize", "exit"})


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class OneLineFormatter(logging.Formatter):
    """pygls logs a traceback for a message it cannot deserialise; the user gets one line."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage().splitlines()[0]  # some records carry a formatted traceback in the text
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text += f" ({error.__class__.__name__}: {str(error).splitlines()[0] if str(error) else ''})"
        return f"repomem serve: {text}"


def quiet_pygls_logs() -> None:
    """pygls's warnings and errors as one line each on stderr (full tracebacks under REPOMEM_DEBUG)."""
    if os.environ.get("REPOMEM_DEBUG"):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter())
    logger = logging.getLogger("pygls")
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.WARNING)


def complain(text: str) -> None:
    try:
        sys.stderr.write(f"repomem serve: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr went with the client that read it
        pass


class SessionWriter:
    """pygls's writer interface over the client's writer, which drops what is sent once the client's
    end is gone: after `close` (pygls's `exit`), or after a write found it gone (said once)."""

    def __init__(self, writer: Any):
        self._writer = writer
        self._lock = threading.Lock()
        self.gone = False

    def write(self, data: bytes) -> None:
        if self.gone:
            return
        try:
            self._writer.write(data)
        except (OSError, ValueError) as error:  # BrokenPipeError, ConnectionResetError; ValueError: closed
            with self._lock:
                first, self.gone = not self.gone, True
            if first:
                complain(f"the client is gone ({error.__class__.__name__}): what the server had left to send "
                         "was dropped")

    def close(self) -> Any:
        self.gone = True
        return self._writer.close()


class MessageLoop:
    def __init__(self, protocol: Any, write: Callable[[bytes], Any], max_message_bytes: int):
        self.protocol = protocol
        self.write = write
        self.max_message_bytes = max_message_bytes
        self.initialized = False
        self.shut_down = False

    def error(self, message_id: Any, code: int, text: str) -> None:
        self.write(frame({"jsonrpc": "2.0", "id": message_id, "error": {"code": code, "message": text}}))

    def handle(self, body: bytes) -> None:
        try:
            raw = json.loads(body)
        except ValueError as error:
            complain(f"a message that is not JSON was dropped ({error})")
            self.error(None, PARSE_ERROR, f"Parse error: {error}")
            return
        message_id = raw.get("id") if isinstance(raw, dict) else None
        method = raw.get("method") if isinstance(raw, dict) else None
        if not isinstance(raw, dict) or raw.get("jsonrpc") != "2.0" or (
                method is None and "result" not in raw and "error" not in raw) or (
                method is not None and not isinstance(method, str)):
            complain("a message that is not JSON-RPC 2.0 was dropped")
            self.error(message_id, INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message")
            return
        if not self.initialized and method is not None and method not in ALLOWED_BEFORE_INITIALIZE:
            if message_id is not None:
                self.error(message_id, SERVER_NOT_INITIALIZED, f"{method} before initialize")
            return
        if self.shut_down and method is not None and method != "exit":
            if message_id is not None:  # LSP: requests after shutdown are InvalidRequest
                self.error(message_id, INVALID_REQUEST, f"{method} after shutdown")
            return
        if method == "initialize":
            self.initialized = True
        if method == "shutdown":
            self.shut_down = True
        try:
            message = json.loads(body, object_hook=self.protocol.structure_message)
            self.protocol.handle_message(message)
        except Exception as error:  # a message pygls cannot take must not end the session  # noqa: BLE001
            complain(f"cannot handle {method or 'a response'}: {error.__class__.__name__}: {error}")
            if message_id is not None and method is not None:
                code = getattr(error, "code", None)  # pygls's JsonRpcException (InvalidParams: -32602)
                self.error(message_id, code if isinstance(code, int) else INTERNAL_ERROR,
                           f"{error.__class__.__name__}: {error}".splitlines()[0])

    async def run(self, stop: threading.Event, reader: Any) -> None:
        length: int | None = None
        unreadable = False
        while not stop.is_set():
            line = await reader.readline()
            if not line:
                return  # the client closed the stream
            match = HEADER.search(line)
            if match is not None:
                if line[: match.start()].strip():
                    complain("bytes before a header were skipped (a body longer or shorter than its Content-Length)")
                value = match[1].strip()
                length, unreadable = (int(value), False) if value.isdigit() else (None, True)
                continue
            if line.strip():
                continue  # another header (Content-Type), or bytes of a broken message
            if length is None:
                if unreadable:
                    complain("a message with an unreadable Content-Length was dropped")
                unreadable = False
                continue
            if length > self.max_message_bytes:
                complain(f"a message of {length} bytes (more than {self.max_message_bytes}) was dropped")
                length = None
                continue
            body = await reader.readexactly(length)
            length = None
            if not body:
                return
            self.handle(body)
            await asyncio.sleep(0)  # let the handlers this message scheduled run
