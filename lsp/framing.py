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
- a message whose params do not fit its method (`"contentChanges": 5`, a `didOpen` without its
  text) is named with what was wrong, where and what came instead: a request in its InvalidParams
  answer and on stderr, a notification (which has no answer) in the client's log
  (`window/logMessage`, Warning; once per method and fault: a client repeats a bad notification at
  every keystroke). pygls logged "Unable to deserialize message" and nothing of the fault, and a
  notification left no word in the client's log at all;
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

import cattrs

HEADER = re.compile(rb"Content-Length:[ \t]*([^\r\n]*?)[ \t]*\r?\n?$", re.IGNORECASE)
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
SERVER_NOT_INITIALIZED = -32002
INTERNAL_ERROR = -32603
# Before `initialize`, only these may come (the client may also give up and exit).
ALLOWED_BEFORE_INITIALIZE = frozenset({"initialize", "exit"})
MAX_FAULTS = 3  # the faults of one message's params named in its log line (and how many more)
MAX_VALUE_CHARS = 40  # of the value that came instead, in the log line
_PATH_STEP = re.compile(r"\.([A-Za-z0-9_]+)|\[(\d+)\]")
_CAUSES = (("invalid value for type, expected ", "expected "), ("required field missing", "missing"))
# cattrs's names of the Python types, as JSON names its values (other names are the protocol's types).
_JSON_TYPES = {"Sequence": "an array", "list": "an array", "int": "an integer", "str": "a string", "bool": "a boolean",
               "float": "a number", "dict": "an object", "Union": "one of the protocol's shapes for it"}


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


def _not_deserialize_noise(record: logging.LogRecord) -> bool:
    """pygls's "Unable to deserialize message" says nothing of what was wrong, and the message loop
    says it (`params_fault`)."""
    return not str(record.msg).startswith("Unable to deserialize message")


def quiet_pygls_logs() -> None:
    """pygls's warnings and errors as one line each on stderr (full tracebacks under REPOMEM_DEBUG)."""
    if os.environ.get("REPOMEM_DEBUG"):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter())
    handler.addFilter(_not_deserialize_noise)
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


def _camel(name: str) -> str:
    """An lsprotocol attribute name as the protocol's JSON spells it (`content_changes`: contentChanges)."""
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def params_fault(error: BaseException, message: dict[str, Any]) -> str | None:
    """What was wrong with `message` (the raw JSON) that pygls could not structure it, as
    `params.contentChanges: expected Sequence, got 5`, or None when `error` was no such fault."""
    cause = error.__cause__ if error.__cause__ is not None else error
    if not isinstance(cause, cattrs.BaseValidationError):
        return None
    faults = []
    for line in cattrs.transform_error(cause):
        what, _, where = line.rpartition(" @ ")
        for said, short in _CAUSES:
            if what.startswith(said):
                what = short + what[len(said):]
        if what.startswith("expected "):
            name = what.removeprefix("expected ")
            what = f"expected {_JSON_TYPES.get(name, f'a {name}')}"
        value: Any = message
        for name, index in _PATH_STEP.findall(where):
            if name and isinstance(value, dict) and _camel(name) in value:
                value = value[_camel(name)]
            elif index and isinstance(value, list) and int(index) < len(value):
                value = value[int(index)]
            else:
                value = _PATH_STEP  # not there (a missing field, or below a value of the wrong type)
                break
        path = _PATH_STEP.sub(lambda step: f".{_camel(step[1])}" if step[1] else step[0], where.removeprefix("$"))
        got = "" if value is _PATH_STEP or what == "missing" else f", got {repr(value)[:MAX_VALUE_CHARS]}"
        faults.append(f"{path.removeprefix('.') or 'the message'}: {what}{got}")
    more = f" (and {len(faults) - MAX_FAULTS} more)" if len(faults) > MAX_FAULTS else ""
    return "; ".join(faults[:MAX_FAULTS]) + more if faults else None


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


def _complain_dropped(method: str, fault: str) -> None:
    complain(f"{method} dropped: its params do not fit the protocol: {fault}")


class MessageLoop:
    """`bad_notification(method, fault)`: says that a notification whose params did not fit was
    dropped (the language server: in the client's log, once per method and fault)."""

    def __init__(self, protocol: Any, write: Callable[[bytes], Any], max_message_bytes: int,
                 bad_notification: Callable[[str, str], Any] = _complain_dropped):
        self.protocol = protocol
        self.write = write
        self.max_message_bytes = max_message_bytes
        self.bad_notification = bad_notification
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
            fault = params_fault(error, raw) if method is not None else None
            if fault is not None and message_id is None:
                self.bad_notification(method, fault)
                return
            if fault is not None:
                complain(f"{method}: invalid params: {fault}")
                self.error(message_id, INVALID_PARAMS, f"Invalid params: {fault}")
                return
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
