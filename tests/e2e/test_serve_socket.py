"""`repomem serve --tcp` and `--socket` as another local user would try them (issue 15, item 3):
a TCP client without the user's token gets one error answer and a closed connection, the server
goes on listening, and only the token's holder gets a session; a Unix socket is its owner's (0600)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from repomem.config import ServerConfig
from repomem.lsp import listen
from tests.cli_process import assert_user_error, framed, free_port, read_framed, run
from tests.repos import copy_example


def _initialize(conn: socket.socket, root: Path, options: dict) -> tuple[dict | None, bool]:
    """The answer to `initialize`, and whether the server closed the connection after it."""
    conn.sendall(framed({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                         "params": {"capabilities": {}, "rootUri": root.as_uri(), "initializationOptions": options}}))
    conn.settimeout(30)
    stream = conn.makefile("rb")
    answer = read_framed(stream)
    while answer is not None and "method" in answer:  # log messages before the answer
        answer = read_framed(stream)
    conn.settimeout(1)
    try:
        closed = stream.read(1) == b""
    except TimeoutError:
        closed = False
    return answer, closed


def _end_session(conn: socket.socket) -> None:
    conn.sendall(framed({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
    conn.sendall(framed({"jsonrpc": "2.0", "method": "exit"}))


class Server:
    def __init__(self, root: Path, config_home: Path, *args: str):
        env = {**{k: v for k, v in os.environ.items() if k != "REPOMEM_DEBUG"}, "XDG_CONFIG_HOME": str(config_home)}
        self.process = subprocess.Popen([sys.executable, "-m", "repomem", "serve", *args], cwd=root, env=env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        self.stderr: list[str] = []
        listening = threading.Event()

        def read() -> None:
            for line in self.process.stderr:
                self.stderr.append(line)
                if "listening on" in line:
                    listening.set()

        threading.Thread(target=read, daemon=True).start()
        assert listening.wait(60), "".join(self.stderr)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        assert not any("Traceback" in line for line in self.stderr), "".join(self.stderr)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return copy_example(tmp_path_factory.mktemp("serve-socket") / "shop")


def test_tcp_admits_only_the_holder_of_the_token(workspace: Path, tmp_path: Path):
    port = free_port()
    server_process = Server(workspace, tmp_path / "config", "--tcp", str(port))
    try:
        token_file = tmp_path / "config" / "repomem" / "serve-token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
        token = token_file.read_text().strip()
        assert len(token) >= listen.MIN_TOKEN_CHARS

        for options, reason in (({}, "no token"), ({"token": "x" * len(token)}, "wrong token"),
                                ({"token": token[:-1]}, "wrong token")):
            with socket.create_connection(("127.0.0.1", port)) as conn:
                answer, closed = _initialize(conn, workspace, options)
            assert answer["error"]["code"] == -32600 and reason in answer["error"]["message"], answer
            assert "result" not in answer and closed
        assert server_process.process.poll() is None  # still listening

        with socket.create_connection(("127.0.0.1", port)) as conn:
            answer, closed = _initialize(conn, workspace, {"token": token, "debounceMs": 0})
            assert "capabilities" in answer["result"] and not closed, answer
            _end_session(conn)
            assert server_process.process.wait(timeout=60) == 0
    finally:
        server_process.stop()
    assert sum("was refused" in line for line in server_process.stderr) == 3


def test_a_unix_socket_is_its_owners_and_is_removed_at_the_end(workspace: Path, tmp_path: Path):
    path = tmp_path / "repomem.sock"
    server_process = Server(workspace, tmp_path / "config", "--socket", str(path))
    try:
        assert stat.S_ISSOCK(path.lstat().st_mode) and stat.S_IMODE(path.lstat().st_mode) == 0o600
        assert_user_error(run("serve", "--socket", str(path)), "another server is listening")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(str(path))
            answer, closed = _initialize(conn, workspace, {"debounceMs": 0})
            assert "capabilities" in answer["result"] and not closed, answer
            _end_session(conn)
            assert server_process.process.wait(timeout=60) == 0
    finally:
        server_process.stop()
    assert not path.exists()
    assert not (tmp_path / "config").exists()  # a Unix socket needs no token


def test_two_clients_at_once_on_one_socket_one_is_served_the_other_refused(workspace: Path, tmp_path: Path):
    """Two editors connecting to one `serve --socket` together: the first admitted is served, the
    other gets an error answer naming why and a closed connection (or, once the server stopped
    listening, no socket to connect to); the server neither crashes nor mixes the two."""
    path = tmp_path / "repomem.sock"
    server_process = Server(workspace, tmp_path / "config", "--socket", str(path))
    conns = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(2)]
    try:
        for conn in conns:
            conn.connect(str(path))
        answers: list[tuple[dict | None, bool]] = [(None, True)] * 2

        def initialize(number: int) -> None:
            try:
                answers[number] = _initialize(conns[number], workspace, {"debounceMs": 0})
            except OSError as error:  # reset: refused without a word
                answers[number] = ({"error": {"message": f"reset: {error}"}}, True)

        threads = [threading.Thread(target=initialize, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        served = [n for n, (answer, _) in enumerate(answers) if answer is not None and "result" in answer]
        assert len(served) == 1, answers
        refused, closed = answers[1 - served[0]]
        assert closed and "another client is being served" in refused["error"]["message"], refused
        late = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with pytest.raises((FileNotFoundError, ConnectionRefusedError)), late:  # a third finds nobody listening
            late.connect(str(path))
        _end_session(conns[served[0]])
        assert server_process.process.wait(timeout=60) == 0
    finally:
        for conn in conns:
            conn.close()
        server_process.stop()
    assert sum("another client is being served" in line for line in server_process.stderr) == 1, server_process.stderr


def test_token_files_others_can_read_are_refused(tmp_path: Path):
    token_file = tmp_path / "token"
    token_file.write_text("a-long-enough-token-of-the-user\n")
    token_file.chmod(0o644)
    assert_user_error(run("serve", "--tcp", str(free_port()), "--token-file", str(token_file)),
                      "can be read by other users", "chmod 600")
    token_file.chmod(0o600)
    token_file.write_text("short\n")
    assert_user_error(run("serve", "--tcp", str(free_port()), "--token-file", str(token_file)), "at least")
    (tmp_path / "not-a-socket").write_text("keep me")
    assert_user_error(run("serve", "--socket", str(tmp_path / "not-a-socket")), "not a socket")
    assert (tmp_path / "not-a-socket").read_text() == "keep me"
    assert_user_error(run("serve", "--socket", str(tmp_path / "s.sock"), "--token-file", str(token_file)),
                      "goes with --tcp")


def test_a_silent_client_is_refused_after_the_admission_timeout():
    """A client that connects and says nothing cannot hold an authentication slot for long."""
    ours, theirs = socket.socketpair()
    started = time.monotonic()
    try:
        with pytest.raises(listen.Refused, match="no initialize within 0.3 s"):
            listen.read_initialize(ours, ServerConfig(auth_timeout_s=0.3))
    finally:
        ours.close()
        theirs.close()
    assert time.monotonic() - started < 5
