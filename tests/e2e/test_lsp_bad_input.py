"""The language server's share of the bad-input matrix, over stdio with raw bytes (a well-behaved
LSP client library cannot send a wrong Content-Length): each case gets the specified JSON-RPC error
or an empty answer, one stderr line at most and no traceback, and the server answers the next
request. The index still loads afterwards."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lsp.server import SHUTDOWN_DRAIN_S
from repomem.config import load_config
from repomem.failures import Failure
from repomem.index.snapshot_load import load_index
from tests.cli_process import alive, framed, free_port, model_children, read_framed
from tests.http_servers import answer_json, serve_http
from tests.repos import copy_example

SETTINGS = {"maxNewTokens": 4, "maxPromptTokens": 256, "debounceMs": 0, "answerWithinMs": 120000}


class RawClient:
    """Bytes in, parsed frames out (on a reader thread)."""

    def __init__(self, root: Path, env: dict[str, str] | None = None):
        self.process = subprocess.Popen([sys.executable, "-m", "repomem", "serve"], cwd=root, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.messages: queue.Queue[dict] = queue.Queue()
        self.logs: list[str] = []  # every window/logMessage, as it arrives
        self.warnings: list[str] = []  # those of them of type Warning
        self.shown: list[str] = []  # every window/showMessage
        self.stderr: list[str] = []
        self._next_id = 1000
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        out = self.process.stdout
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    return
                if not line.strip():
                    break
                key, _, value = line.decode().partition(":")
                headers[key.strip().lower()] = value.strip()
            message = json.loads(out.read(int(headers["content-length"])))
            if message.get("method") == "window/logMessage":
                self.logs.append(message["params"]["message"])
                if message["params"]["type"] == 2:
                    self.warnings.append(message["params"]["message"])
            elif message.get("method") == "window/showMessage":
                self.shown.append(message["params"]["message"])
            self.messages.put(message)

    def _read_stderr(self) -> None:
        for line in self.process.stderr:
            self.stderr.append(line.decode("utf-8", "replace"))

    def raw(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def request(self, method: str, params: dict | None = None) -> int:
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params or {}})
        return self._next_id

    def notify(self, method: str, params: dict) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def answer(self, message_id: int | None, timeout_s: float = 60.0, required: bool = True) -> dict | None:
        """The response to `message_id` (None: the next error without an id); other messages skipped."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                message = self.messages.get(timeout=0.1)
            except queue.Empty:
                continue
            if "method" in message:
                continue  # a notification or a request from the server (progress, log)
            if message.get("id") == message_id:
                return message
        if required:
            pytest.fail(f"no answer to {message_id}; stderr: {''.join(self.stderr[-5:])}")
        return None

    def alive(self, probes: int = 3) -> None:
        """The server still answers: an unknown method gets MethodNotFound (a body longer than its
        Content-Length swallows the start of the next message, so a second probe may be needed)."""
        for _ in range(probes):
            probe = self.request("repomem/noSuchMethod")
            answer = self.answer(probe, timeout_s=5, required=False)
            if answer is not None:
                assert answer["error"]["code"] == -32601, answer
                assert self.process.poll() is None
                return
        pytest.fail(f"the server stopped answering; stderr: {''.join(self.stderr[-5:])}")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return copy_example(tmp_path_factory.mktemp("lsp-bad") / "shop")


def _initialize(client: RawClient, workspace: Path, options: dict = SETTINGS) -> None:
    answer = client.answer(client.request("initialize", {"capabilities": {}, "rootUri": workspace.as_uri(),
                                                         "initializationOptions": options}))
    assert "capabilities" in answer["result"], answer
    client.notify("initialized", {})


def _wait_until_ready(client: RawClient, timeout_s: float = 240.0) -> None:
    """Until the server logs `repomem: ready` (its index is built)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            message = client.messages.get(timeout=0.1)
        except queue.Empty:
            continue
        if message.get("method") == "window/logMessage" and "repomem: ready" in message["params"]["message"]:
            return
    pytest.fail("the server never became ready")


@pytest.fixture(scope="module")
def client(workspace: Path):
    client = RawClient(workspace)
    _initialize(client, workspace)
    _wait_until_ready(client)
    yield client
    client.process.kill()
    client.process.wait()
    assert not any("Traceback" in line for line in client.stderr), "".join(client.stderr)
    config, _ = load_config(workspace)
    index = load_index(workspace, config)
    assert not isinstance(index, Failure) and index.n_live_files > 0, index


def _inline_params(uri: str, line: int, character: int) -> dict:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character},
            "context": {"triggerKind": 2}}


def test_a_request_before_initialize_is_server_not_initialized(workspace: Path):
    client = RawClient(workspace)
    try:
        uri = (workspace / "shop" / "report.py").as_uri()
        answer = client.answer(client.request("textDocument/inlineCompletion", _inline_params(uri, 8, 11)))
        assert answer["error"]["code"] == -32002
        client.notify("textDocument/didOpen", {})  # a notification before initialize is dropped
        _initialize(client, workspace)
        client.alive()
    finally:
        client.process.kill()
        client.process.wait()
    assert not any("Traceback" in line for line in client.stderr), "".join(client.stderr)


def test_a_workspace_that_is_the_home_folder_is_not_indexed(tmp_path: Path, model_path: str):
    """A client with no project for a stray file gives its folder, the home folder say (lsp-mode
    guessing a root, VS Code opened on ~): the server says so and indexes nothing there, as the
    command line refuses to."""
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    (home / "notes" / "scratch.py").write_text("def scratch():\n    return 1\n")
    env = {**os.environ, "HOME": str(home), "REPOMEM_CACHE": str(Path(model_path).parent.parent)}
    client = RawClient(home, env)
    try:
        _initialize(client, home)
        deadline = time.monotonic() + 60
        while not any("home folder" in line for line in client.shown) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert any("is your home folder: nothing indexed" in line for line in client.shown), client.shown
        client.alive()
        assert not (home / ".repomem").exists()
    finally:
        client.process.kill()
        client.process.wait()
    assert not any("Traceback" in line for line in client.stderr), "".join(client.stderr)


@pytest.mark.parametrize("kind, data", [
    ("a body that is not JSON", b'Content-Length: 17\r\n\r\n{"jsonrpc": "2.0"'),
    ("a Content-Length shorter than the body", b'Content-Length: 20\r\n\r\n{"jsonrpc": "2.0", "id": 5, "method": "x"}'),
    ("a Content-Length longer than the body", b'Content-Length: 60\r\n\r\n{"jsonrpc": "2.0", "id": 6, "method": "x"}'),
    ("an unreadable Content-Length", b'Content-Length: lots\r\n\r\n{"jsonrpc": "2.0", "id": 7, "method": "x"}'),
    ("no Content-Length at all", b'Content-Type: application/json\r\n\r\n{"jsonrpc": "2.0"}'),
    ("a huge Content-Length", b'Content-Length: 99999999999\r\n\r\n{"jsonrpc": "2.0", "id": 8}'),
    ("JSON that is not JSON-RPC", b'Content-Length: 6\r\n\r\n[1, 2]'),
    ("a request without a method name", b'Content-Length: 28\r\n\r\n{"jsonrpc": "2.0", "id": 9}  '),
    ("binary garbage", b"\x00\xff\xfe garbage \r\n\r\n"),
])
def test_broken_frames_never_end_the_session(client: RawClient, kind: str, data: bytes):
    client.raw(data)
    client.alive()  # the next well-formed request is answered (a too-long body may swallow one more)


def test_invalid_params_are_an_error_answer(client: RawClient):
    answer = client.answer(client.request("textDocument/inlineCompletion", {"position": {"line": "x"}}))
    assert "error" in answer, answer
    client.alive()


def test_vscode_languageclients_own_inline_context_is_answered(client: RawClient, workspace: Path):
    """vscode-languageclient 9 passes VS Code's inline completion context unconverted: trigger kind
    0 and a range as a two-element list (lsp/client_quirks.py). Refused as invalid params, VS Code
    showed no ghost text once its suggest widget was open (tests/e2e/test_vscode.py found it)."""
    report = workspace / "shop" / "report.py"
    uri = report.as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                            "text": report.read_text()}})
    at = {"line": 8, "character": 11}
    answer = client.answer(client.request("textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": at,
        "context": {"triggerKind": 0, "selectedCompletionInfo": {"range": [at, at], "text": "compute_tax"}}}),
        timeout_s=120)
    items = answer.get("result", {}).get("items")
    assert items and items[0]["insertText"].startswith("compute"), answer
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})


def test_documents_and_positions_that_do_not_exist_get_empty_answers(client: RawClient, workspace: Path):
    unopened = (workspace / "shop" / "never_opened.py").as_uri()
    answer = client.answer(client.request("textDocument/inlineCompletion", _inline_params(unopened, 0, 0)))
    assert answer.get("result", {}).get("items") == [], answer
    report = workspace / "shop" / "report.py"
    uri = report.as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                            "text": report.read_text()}})
    for line, character in ((999, 0), (-1, 0)):
        answer = client.answer(client.request("textDocument/inlineCompletion", _inline_params(uri, line, character)))
        assert "error" in answer or answer["result"]["items"] == [], answer
    # A character past the line's end means the line's end (LSP 3.17, Position).
    answer = client.answer(client.request("textDocument/inlineCompletion", _inline_params(uri, 8, 999)))
    assert "result" in answer, answer
    # An edit whose range lies past the end of the document.
    client.notify("textDocument/didChange", {
        "textDocument": {"uri": uri, "version": 2},
        "contentChanges": [{"range": {"start": {"line": 500, "character": 3}, "end": {"line": 900, "character": 0}},
                            "text": "x = 1\n"}]})
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 3},
                                             "contentChanges": [{"range": "nonsense", "text": 5}]})
    client.alive()


def test_a_change_to_a_document_not_open_is_logged_once_and_ignored(client: RawClient, workspace: Path):
    """A didChange for a document the client never opened (or closed already) has nothing to apply
    to: pygls raised KeyError, which editors show as an "Error in server" pop-up at every keystroke.
    It is ignored, with one log line per document."""
    shown = len(client.shown)
    on_disk = (workspace / "shop" / "pricing.py").as_uri()  # never opened
    closed = (workspace / "shop" / "closed_then_changed.py").as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": closed, "languageId": "python", "version": 1,
                                                            "text": "x = 1\n"}})
    client.notify("textDocument/didClose", {"textDocument": {"uri": closed}})
    for uri in (on_disk, closed):
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                                 "contentChanges": [{"text": "y = 2\n"}]})
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 3}, "contentChanges": [
            {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "z"}]})
    client.alive()
    _wait_for_log(client, closed)
    assert not [line for line in client.shown[shown:] if "Error in server" in line], client.shown[shown:]
    ignored = [line for line in client.logs if "never opened (or closed): ignored" in line]
    assert len(ignored) == 2 and on_disk in ignored[0] and closed in ignored[1], ignored


def test_notifications_whose_params_do_not_fit_are_logged_once_and_dropped(client: RawClient, workspace: Path):
    """A notification whose params have the wrong type was dropped with no word in the client's
    log (two vague stderr lines for the protocol's own, nothing for repomem/didMoveCursor): one
    warning names the method and the fault, once however often the client sends it, and the server
    serves on."""
    report = workspace / "shop" / "report.py"
    uri = report.as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                            "text": report.read_text()}})
    stderr = len(client.stderr)
    expected = {
        "textDocument/didChange": "params.contentChanges: expected an array, got 5",
        "textDocument/didOpen": "params.textDocument.text: missing",
        "repomem/didMoveCursor": "position: expected {line, character}, got 'here'",
    }
    for _ in range(3):
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": 5})
        client.notify("textDocument/didOpen", {"textDocument": {
            "uri": (workspace / "shop" / "no_text.py").as_uri(), "languageId": "python", "version": 1}})
        client.notify("repomem/didMoveCursor", {"textDocument": {"uri": uri}, "position": "here"})
    client.alive()
    for method, fault in expected.items():
        _wait_for_log(client, f"{method} dropped", timeout_s=10)
        said = [line for line in client.warnings if line.startswith(f"repomem: {method} dropped") and fault in line]
        assert len(said) == 1, [line for line in client.warnings if method in line]
    assert not [line for line in client.stderr[stderr:] if "deserialize" in line or "dropped" in line], \
        client.stderr[stderr:]
    answer = client.answer(client.request("textDocument/inlineCompletion", _inline_params(uri, 8, 11)), timeout_s=120)
    assert answer["result"]["items"], answer  # the document was left as opened, and is completed
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})


def test_a_request_whose_params_do_not_fit_is_answered_with_the_fault(client: RawClient):
    stderr = len(client.stderr)
    answer = client.answer(client.request("textDocument/inlineCompletion", {
        "textDocument": {"uri": "file:///x.py"}, "position": {"line": "x", "character": 0},
        "context": {"triggerKind": 2}}))
    assert answer["error"]["code"] == -32602, answer
    assert "params.position" in answer["error"]["message"] and "'x'" in answer["error"]["message"], answer
    client.alive()
    time.sleep(0.2)
    said = [line for line in client.stderr[stderr:] if "unknown method" not in line]
    assert len(said) == 1 and "textDocument/inlineCompletion" in said[0], said


def test_a_folder_opened_as_a_document_is_ignored_with_one_line(client: RawClient, workspace: Path):
    """A client that opens a directory (file:///.../shop) as a text document: it was completed as
    plain text (and indexed as a file at the folder's path). It is ignored until closed, said once;
    completions in it are empty."""
    folder = (workspace / "shop").as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": folder, "languageId": "python", "version": 1,
                                                            "text": "def square(x):\n    return "}})
    client.notify("textDocument/didChange", {"textDocument": {"uri": folder, "version": 2},
                                             "contentChanges": [{"text": "def cube(x):\n    return "}]})
    answer = client.answer(client.request("textDocument/inlineCompletion", _inline_params(folder, 1, 11)),
                           timeout_s=120)
    assert answer["result"]["items"] == [], answer
    client.notify("textDocument/didSave", {"textDocument": {"uri": folder}})
    client.notify("textDocument/didClose", {"textDocument": {"uri": folder}})
    client.alive()
    _wait_for_log(client, f"{folder} is a folder", timeout_s=10)
    said = [line for line in client.logs if f"{folder} " in line or f"{folder}," in line]
    assert len(said) == 1 and "is a folder, not a file: ignored" in said[0], said
    assert (workspace / "shop" / "report.py").is_file()  # the folder and its files are as they were


def test_a_2_mb_buffer_and_200_rapid_edits(client: RawClient, workspace: Path):
    big = workspace / "shop" / "big.py"
    text = "".join(f"def function_{i}(value):\n    return value + {i}\n\n" for i in range(40_000))
    assert len(text) > 2_000_000
    uri = big.as_uri()
    started = time.monotonic()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                            "text": text}})
    answer = client.answer(client.request("workspace/executeCommand", {
        "command": "repomem.explain",
        "arguments": [{"textDocument": {"uri": uri}, "position": {"line": 3, "character": 4}}]}), timeout_s=120)
    # More than scan.max_file_bytes: the buffer is not indexed, the answer says so or ranks the rest.
    assert "result" in answer, answer
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert time.monotonic() - started < 120
    report = workspace / "shop" / "report.py"
    uri = report.as_uri()
    lines = report.read_text().split("\n")
    for version in range(4, 204):
        lines.append(f"# edit {version}")
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                 "contentChanges": [{"text": "\n".join(lines)}]})
    last_line = len(lines) - 1
    answer = client.answer(client.request("workspace/executeCommand", {
        "command": "repomem.explain",
        "arguments": [{"textDocument": {"uri": uri}, "position": {"line": last_line, "character": 0}}]}))
    assert "result" in answer and answer["result"] is not None, answer  # the last line exists: every edit landed
    client.alive()


@pytest.mark.parametrize("shutdown_first, code", [(True, 0), (False, 1)])
def test_life_cycle_follows_the_specification(workspace: Path, shutdown_first: bool, code: int):
    """shutdown before initialize is ServerNotInitialized; requests after shutdown are
    InvalidRequest; exit ends the process with 0 after shutdown, 1 without."""
    client = RawClient(workspace)
    try:
        early = client.answer(client.request("shutdown"))
        assert early["error"]["code"] == -32002, early
        _initialize(client, workspace)
        if shutdown_first:
            assert client.answer(client.request("shutdown")).get("result", "missing") is None
            late = client.answer(client.request("repomem/noSuchMethod"))
            assert late["error"]["code"] == -32600, late
        client.notify("exit", {})
        assert client.process.wait(timeout=30) == code
    finally:
        if client.process.poll() is None:
            client.process.kill()
            client.process.wait()
    assert not any("Traceback" in line for line in client.stderr), "".join(client.stderr)


# -- issue 34: faults that outlived their cause ------------------------------------------------------


def _wait_for_log(client: RawClient, needle: str, timeout_s: float = 240.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not any(needle in line for line in client.logs):
        if time.monotonic() > deadline or client.process.poll() is not None:
            pytest.fail(f"no log message with {needle!r}: {client.logs}; stderr: {''.join(client.stderr[-5:])}")
        time.sleep(0.1)


def _open_copy_of_report(client: RawClient, workspace: Path, name: str) -> str:
    """A new open document holding report.py's text, whose line 8 (0-based) ends at `return `."""
    uri = (workspace / "shop" / name).as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                            "text": (workspace / "shop" / "report.py").read_text()}})
    return uri


def test_a_lone_surrogate_in_one_buffer_leaves_the_other_documents_completing(client: RawClient, workspace: Path):
    """A buffer holding an unpaired UTF-16 surrogate ("\\ud800": JSON carries it, UTF-8 cannot
    encode it) failed the overlay of the open buffers on the index, and with it the completions of
    every document. The server completes with U+FFFD in the surrogate's place (same positions) and
    says so once per document."""
    broken = (workspace / "shop" / "surrogates.py").as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": broken, "languageId": "python", "version": 1,
                                                            "text": "NAME = '\ud800'\n"}})
    client.notify("textDocument/didChange", {"textDocument": {"uri": broken, "version": 2}, "contentChanges": [
        {"range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}},
         "text": "OTHER = '\udfff'\nvalue = NA"}]})
    neighbour = _open_copy_of_report(client, workspace, "report_neighbour.py")
    answer = client.answer(client.request("textDocument/inlineCompletion", _inline_params(neighbour, 8, 11)),
                           timeout_s=180)
    assert answer["result"]["items"], answer
    in_broken = client.answer(client.request("textDocument/inlineCompletion", _inline_params(broken, 2, 10)),
                              timeout_s=180)
    assert "result" in in_broken, in_broken
    explained = client.answer(client.request("workspace/executeCommand", {
        "command": "repomem.explain", "arguments": [{"textDocument": {"uri": broken},
                                                     "position": {"line": 1, "character": 9}}]}))
    assert "error" not in explained["result"], explained
    replaced = [line for line in client.logs if "unpaired UTF-16 surrogate" in line]
    assert len(replaced) == 1 and broken in replaced[0], replaced
    client.alive()


@pytest.mark.parametrize("shutdown_first", [True, False])
def test_exit_ends_the_server_at_once_while_a_model_call_is_stuck(workspace: Path, shutdown_first: bool):
    """`exit` waited for a model call stuck in the model's process (~50 s). Here the model's real
    child process is stopped with SIGSTOP, a real hang (a stopped process answers nothing), while a
    completion waits on it: the server and its child must be gone within 3 s of shutdown / exit."""
    client = RawClient(workspace)
    child = None
    try:
        _initialize(client, workspace, {**SETTINGS, "answerWithinMs": 1000})
        _wait_for_log(client, "model ready")
        (child,) = model_children(client.process.pid)
        os.kill(child, signal.SIGSTOP)
        uri = _open_copy_of_report(client, workspace, "report_stuck.py")
        pending = client.answer(client.request("textDocument/completion", {
            "textDocument": {"uri": uri}, "position": {"line": 8, "character": 11}}))
        assert pending["result"].get("itemDefaults", {}).get("data") == {"pending": True}, pending
        started = time.monotonic()
        if shutdown_first:
            assert client.answer(client.request("shutdown"), timeout_s=5).get("result", "missing") is None
        client.notify("exit", {})
        assert client.process.wait(timeout=60) == (0 if shutdown_first else 1)
        assert time.monotonic() - started < 3
        assert not alive(child)
    finally:
        if client.process.poll() is None:
            client.process.kill()
            client.process.wait()
        if child is not None and alive(child):
            os.kill(child, signal.SIGKILL)
    assert not any("Traceback" in line for line in client.stderr), "".join(client.stderr)


class _ListsItsModelThenHangs(http.server.BaseHTTPRequestHandler):
    """A served model that answers its model list, then nothing (a hung vLLM): the fault is the
    server's, so a real HTTP server that does not answer is the real thing."""

    release = threading.Event()

    def do_GET(self):  # noqa: N802
        body = json.dumps({"data": [{"id": "hung-model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):  # noqa: N802
        self.release.wait(120)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def _served_by(model: type, workspace: Path) -> Iterator[tuple[RawClient, str]]:
    """A server started in `workspace` and the URL of a served `model` (a handler class holding back
    its answers until its `release` is set); both gone afterwards, and no traceback was printed."""
    model.release.clear()
    served, url = serve_http(model)
    client = RawClient(workspace)
    try:
        yield client, url
    finally:
        model.release.set()
        served.shutdown()
        if client.process.poll() is None:
            client.process.kill()
            client.process.wait()
    assert not any("Traceback" in line for line in client.stderr), "".join(client.stderr)


def test_exit_does_not_wait_for_a_served_model_that_hangs(workspace: Path):
    """No child to kill: the process ends without waiting for the model thread's call."""
    with _served_by(_ListsItsModelThenHangs, workspace) as (client, url):
        _initialize(client, workspace, {**SETTINGS, "answerWithinMs": 1000, "endpoint": url})
        _wait_for_log(client, "model ready")
        uri = _open_copy_of_report(client, workspace, "report_hung.py")
        pending = client.answer(client.request("textDocument/completion", {
            "textDocument": {"uri": uri}, "position": {"line": 8, "character": 11}}))
        assert pending["result"].get("itemDefaults", {}).get("data") == {"pending": True}, pending
        started = time.monotonic()
        client.notify("exit", {})
        assert client.process.wait(timeout=60) == 1
        assert time.monotonic() - started < 3


def _no_send_errors(stderr: str) -> None:
    """What pygls printed for each message it could not send: a traceback, or "Error sending data"
    lines, one per message and per error message about it."""
    assert "Traceback" not in stderr and "Error sending data" not in stderr and "Failed to report" not in stderr, stderr


def test_exit_without_shutdown_while_a_completion_runs_prints_nothing_about_its_answer(workspace: Path):
    """`exit` (no `shutdown`) while an inline completion waits on the model: pygls closes the
    output, then the completion's answer and its log line were sent to it, each failure logged and
    reported to the client, which failed again: 25 "Error sending data" lines on stderr."""
    with _served_by(_ListsItsModelThenHangs, workspace) as (client, url):
        _initialize(client, workspace, {**SETTINGS, "answerWithinMs": 60000, "endpoint": url})
        _wait_for_log(client, "model ready")
        uri = _open_copy_of_report(client, workspace, "report_exit_running.py")
        running = client.request("textDocument/inlineCompletion", _inline_params(uri, 8, 11))
        time.sleep(1.0)  # the request reaches the model server and waits there
        assert client.answer(running, timeout_s=0.5, required=False) is None
        client.notify("exit", {})
        assert client.process.wait(timeout=30) == 1
        time.sleep(0.5)  # stderr read to its end
        _no_send_errors("".join(client.stderr))


def test_a_client_that_goes_away_mid_completion_leaves_one_line(workspace: Path, tmp_path: Path):
    """The editor killed while a completion waits (its pipes closed): the answer, and the log lines
    after it, met a broken pipe; each was a traceback on stderr. Now one line says the client is
    gone, and the server ends when its input does, its model call left behind."""
    _ListsItsModelThenHangs.release.clear()
    served, url = serve_http(_ListsItsModelThenHangs)
    errors = tmp_path / "stderr.txt"
    with errors.open("wb") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "repomem", "serve"], cwd=workspace, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=stderr)
    try:
        def send(message: dict) -> None:
            process.stdin.write(framed({"jsonrpc": "2.0", **message}))
            process.stdin.flush()

        send({"id": 1, "method": "initialize", "params": {"capabilities": {}, "rootUri": workspace.as_uri(),
              "initializationOptions": {**SETTINGS, "answerWithinMs": 1000, "endpoint": url}}})
        send({"method": "initialized", "params": {}})
        while "model ready" not in json.dumps(read_framed(process.stdout) or {"model ready": "(closed)"}):
            pass
        report = workspace / "shop" / "report.py"
        uri = (workspace / "shop" / "report_gone.py").as_uri()
        send({"method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": report.read_text()}}})
        send({"id": 2, "method": "textDocument/completion", "params": {
            "textDocument": {"uri": uri}, "position": {"line": 8, "character": 11}}})
        process.stdout.close()  # the client is gone: its pending answer (after 1 s) meets a broken pipe
        time.sleep(2.5)
        process.stdin.close()
        assert process.wait(timeout=30) == 0
    finally:
        _ListsItsModelThenHangs.release.set()
        served.shutdown()
        if process.poll() is None:
            process.kill()
            process.wait()
    text = errors.read_text()
    _no_send_errors(text)
    assert text.count("the client is gone") == 1, text


def test_a_new_answer_budget_holds_for_the_next_request_while_the_model_is_busy(workspace: Path):
    """The answer budget came into force only once the model thread had applied the new settings:
    a completion sent right after a workspace/didChangeConfiguration, while a generation held the
    model thread (here a served model that does not answer), still waited the old budget (Emacs
    in CI: an answer after 4.2 s where 100 ms was set). It is pending within the new one."""
    with _served_by(_ListsItsModelThenHangs, workspace) as (client, url):
        _initialize(client, workspace, {**SETTINGS, "endpoint": url})  # the budget: 120 s
        _wait_for_log(client, "model ready")
        uri = _open_copy_of_report(client, workspace, "report_budget.py")
        client.request("textDocument/inlineCompletion", _inline_params(uri, 8, 11))
        time.sleep(1.0)  # that request reaches the model server, which holds the model thread
        client.notify("workspace/didChangeConfiguration",
                      {"settings": {"repomem": {**SETTINGS, "endpoint": url, "answerWithinMs": 200}}})
        started = time.monotonic()
        pending = client.answer(client.request("textDocument/completion", {
            "textDocument": {"uri": uri}, "position": {"line": 8, "character": 11}}), timeout_s=30)
        assert pending["result"].get("itemDefaults", {}).get("data") == {"pending": True}, pending
        assert time.monotonic() - started < 10


class _SlowModel(http.server.BaseHTTPRequestHandler):
    """A served model that lists itself at once and takes 30 s over anything else (a loaded GPU
    server): a completion stays running as long as the test needs, without the real model."""

    release = threading.Event()

    def do_GET(self):  # noqa: N802
        answer_json(self, {"data": [{"id": "slow-model"}]})

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.release.wait(30)
        try:
            answer_json(self, {"tokens": [1], "choices": [{"text": " x", "finish_reason": "length"}]})
        except OSError:
            pass  # the server hung up first, as it should

    def log_message(self, *args):
        pass


def test_the_settings_sent_again_bare_change_nothing_and_stop_no_completion(workspace: Path):
    """Neovim 0.12 sends its settings wrapped (`{"repomem": ...}`) at initialize and bare in its
    first didChangeConfiguration: the same settings, read as a change, stopped the completion
    running and reconfigured the session for nothing."""
    with _served_by(_SlowModel, workspace) as (client, url):
        settings = {**SETTINGS, "endpoint": url}
        _initialize(client, workspace, {"repomem": settings})
        _wait_for_log(client, "model ready")
        uri = _open_copy_of_report(client, workspace, "report_same_settings.py")
        running = client.request("textDocument/inlineCompletion", _inline_params(uri, 8, 11))
        time.sleep(1.0)  # the request reaches the model server and waits there
        client.notify("workspace/didChangeConfiguration", {"settings": settings})
        assert client.answer(running, timeout_s=2.0, required=False) is None  # still running
        _SlowModel.release.set()
        assert "result" in client.answer(running, timeout_s=30)  # answered once the model is


def test_a_change_under_the_version_number_in_force_stops_the_completion_for_the_old_text(workspace: Path):
    """Versions must increase (LSP 3.17), but a client may send the same number with every change:
    the change was taken for no change, so the generation for the old text ran on and its answer
    went to the client for a document that had moved on (a line inserted above the cursor)."""
    with _served_by(_SlowModel, workspace) as (client, url):
        _initialize(client, workspace, {**SETTINGS, "endpoint": url})
        _wait_for_log(client, "model ready")
        uri = _open_copy_of_report(client, workspace, "report_same_version.py")  # version 1
        running = client.request("textDocument/inlineCompletion", _inline_params(uri, 8, 11))
        time.sleep(1.0)  # the request reaches the model server and waits there
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 1}, "contentChanges": [
            {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
             "text": "# moved on\n"}]})
        # At once (the slow model holds it 30 s, the model's deadline ends it in a few seconds).
        answer = client.answer(running, timeout_s=2.5)
        assert answer["result"]["items"] == [], answer
        _SlowModel.release.set()
        moved = client.answer(client.request("textDocument/inlineCompletion", _inline_params(uri, 9, 11)),
                              timeout_s=30)
        assert "result" in moved, moved  # the moved-on text is completed


@pytest.mark.parametrize("method", ["textDocument/inlineCompletion", "textDocument/completion"])
def test_shutdown_while_a_completion_runs_is_answered_and_exit_is_clean(workspace: Path, method: str):
    """`shutdown` then `exit` sent while a completion waits on a slow served model (an inline
    request still in flight, or a completion whose answer is pending): shutdown is answered at once,
    the completion ends with the process, which exits 0 within a few seconds, no traceback."""
    with _served_by(_SlowModel, workspace) as (client, url):
        _initialize(client, workspace, {**SETTINGS, "answerWithinMs": 1000 if "inline" not in method else 60000,
                                        "endpoint": url})
        _wait_for_log(client, "model ready")
        uri = _open_copy_of_report(client, workspace, f"report_slow_{method.rsplit('/', 1)[1]}.py")
        running = client.request(method, _inline_params(uri, 8, 11))
        if "inline" not in method:
            pending = client.answer(running)
            assert pending["result"].get("itemDefaults", {}).get("data") == {"pending": True}, pending
        else:
            time.sleep(1.0)  # the request reaches the model server and waits there
            assert client.answer(running, timeout_s=0.5, required=False) is None
        started = time.monotonic()
        # The model is killed first (the endpoint's connection shut, as the embedded model's child
        # is killed), so the model thread is free at once, long before SHUTDOWN_DRAIN_S.
        answered = client.answer(client.request("shutdown"), timeout_s=SHUTDOWN_DRAIN_S + 3)
        assert answered.get("result", "missing") is None, answered
        assert time.monotonic() - started < 2.0
        client.notify("exit", {})
        assert client.process.wait(timeout=30) == 0
        assert time.monotonic() - started < 4.0


def test_a_silent_or_trickling_client_keeps_nobody_out_of_serve_tcp(workspace: Path, tmp_path: Path):
    """Clients were authenticated one at a time, each read allowed 10 s: a client that connected and
    said nothing held the listener for 10 s, one sending a byte every few seconds for ever. Each
    client now authenticates on its own, within server.auth_timeout_s in all."""
    port = free_port()
    auth_timeout_s = 2.0  # the user's setting (5 s by default): the test waits it out twice
    settings = tmp_path / "settings.toml"
    settings.write_text(f"[server]\nauth_timeout_s = {auth_timeout_s}\n")
    environment = {**{k: v for k, v in os.environ.items() if k != "REPOMEM_DEBUG"},
                   "XDG_CONFIG_HOME": str(tmp_path / "config"), "REPOMEM_CONFIG": str(settings)}
    process = subprocess.Popen([sys.executable, "-m", "repomem", "serve", "--tcp", str(port)], cwd=workspace,
                               env=environment, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    stderr: list[str] = []
    listening = threading.Event()

    def read_stderr() -> None:
        for line in process.stderr:
            stderr.append(line)
            if "listening on" in line:
                listening.set()

    threading.Thread(target=read_stderr, daemon=True).start()
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"capabilities": {}, "rootUri": workspace.as_uri(), "initializationOptions": {}}}
    stop_trickling = threading.Event()
    silent = trickler = None
    try:
        assert listening.wait(60), "".join(stderr)
        token = (tmp_path / "config" / "repomem" / "serve-token").read_text().strip()
        silent = socket.create_connection(("127.0.0.1", port))
        trickler = socket.create_connection(("127.0.0.1", port))
        connected = time.monotonic()

        def trickle() -> None:  # one byte every 0.25 s: a whole initialize would take a minute
            for byte in framed(initialize):
                if stop_trickling.wait(0.25):
                    return
                try:
                    trickler.sendall(bytes([byte]))
                except OSError:
                    return

        threading.Thread(target=trickle, daemon=True).start()
        time.sleep(0.5)  # both are connected and being read when the editor comes
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", port)) as editor:
            editor.sendall(framed({**initialize, "params": {**initialize["params"],
                                                             "initializationOptions": {"token": token}}}))
            editor.settimeout(30)
            stream = editor.makefile("rb")
            answer = read_framed(stream)
            while answer is not None and "method" in answer:
                answer = read_framed(stream)
            assert answer is not None and "capabilities" in answer["result"], answer
            assert time.monotonic() - started < 3  # before: 10 s behind the silent one, then for ever
            for late in (silent, trickler):  # closed when their time is up
                late.settimeout(auth_timeout_s + 5)
                try:
                    assert late.recv(1) == b""
                except ConnectionResetError:
                    pass
            assert time.monotonic() - connected < auth_timeout_s + 3
            editor.sendall(framed({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
            editor.sendall(framed({"jsonrpc": "2.0", "method": "exit"}))
            assert process.wait(timeout=60) == 0
    finally:
        stop_trickling.set()
        for late in (silent, trickler):
            if late is not None:
                late.close()
        if process.poll() is None:
            process.kill()
        process.wait()
    assert sum("no initialize within" in line for line in stderr) == 2, "".join(stderr)
    assert not any("Traceback" in line for line in stderr), "".join(stderr)
