"""`repomem serve --tcp PORT` and `repomem serve --socket PATH`: the language server on a socket.

A language server reads the user's repositories and, through its model settings, can send their
code elsewhere, so a socket must not let another local user drive it:

- `--tcp PORT` listens on 127.0.0.1 only and admits a client whose `initialize` carries the
  user's token in `initializationOptions.token`. The token lives in a file only its owner can read
  (created 0600 on first use: `$XDG_CONFIG_HOME/repomem/serve-token`, or `--token-file`); a file
  other users can read is refused, as ssh refuses a readable key.
- `--socket PATH` is a Unix socket created 0600, and a peer whose uid is not ours (SO_PEERCRED)
  is closed before it says anything.

Clients authenticate side by side, each on a thread of its own, and a client that has not sent an
admissible `initialize` within `server.auth_timeout_s` of connecting (however it spreads its bytes)
is closed: a silent or byte-at-a-time client keeps nobody else out. A refused client is closed and
the server goes on listening. The first client admitted is served, alone: the server stops
listening, and that session ends the server when it ends, as pygls's own TCP server does.
"""

from __future__ import annotations

import hmac
import io
import json
import os
import secrets
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from repomem.config import ServerConfig
from repomem.failures import Failure, FailureKind
from repomem.lsp.framing import HEADER, INVALID_REQUEST, complain, frame

ACCEPT_POLL_S = 0.1  # the accept loop's wait between looks at whether a client was admitted
RECEIVE_BYTES = 65536  # one read while authenticating
REFUSAL_SEND_S = 1.0  # seconds to write a refused client its error answer
TOKEN_BYTES = 32  # random bytes in a generated token (URL-safe base64: 43 characters)
MIN_TOKEN_CHARS = 16  # a token file holding less is refused: too easy to guess


class ListenError(Exception):
    """The socket cannot be opened as asked; carries the Failure the CLI prints."""

    def __init__(self, failure: Failure):
        super().__init__(failure.message)
        self.failure = failure


@dataclass
class Listener:
    sock: socket.socket
    description: str  # for the start-up line: where, and how a client gets in
    token: str | None  # TCP: the token a client must present; Unix socket: None (file permissions)
    unix_path: Path | None = None


def default_token_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "repomem" / "serve-token"


def load_or_create_token(path: Path) -> str:
    """The token in `path`, created (0600, its folder 0700) when missing."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        token = secrets.token_urlsafe(TOKEN_BYTES)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError as error:
            raise ListenError(Failure(FailureKind.BAD_TOKEN_FILE, f"cannot create the token file {path}: "
                                                                  f"{error.strerror or error}")) from None
        with os.fdopen(descriptor, "w") as out:
            out.write(token + "\n")
        complain(f"created the token file {path} (mode 0600)")
        return token
    except OSError as error:
        raise ListenError(Failure(FailureKind.BAD_TOKEN_FILE,
                                  f"cannot read {path}: {error.strerror or error}")) from None
    if not stat.S_ISREG(info.st_mode):
        raise ListenError(Failure(FailureKind.BAD_TOKEN_FILE, f"the token file {path} is not a regular file"))
    if info.st_uid != os.getuid():
        raise ListenError(Failure(FailureKind.BAD_TOKEN_FILE, f"the token file {path} belongs to another user"))
    if info.st_mode & 0o077:
        raise ListenError(Failure(FailureKind.BAD_TOKEN_FILE,
                                  f"the token file {path} can be read by other users "
                                  f"(mode {stat.S_IMODE(info.st_mode):04o}); run chmod 600 on it"))
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise ListenError(Failure(FailureKind.BAD_TOKEN_FILE, f"cannot read {path}: {error}")) from None
    if len(token) < MIN_TOKEN_CHARS or any(character.isspace() for character in token):
        raise ListenError(Failure(FailureKind.BAD_TOKEN_FILE, f"the token file {path} must hold one token of at least "
                                                              f"{MIN_TOKEN_CHARS} characters and no spaces"))
    return token


def token_admission(token: str) -> Callable[[dict[str, Any]], str | None]:
    expected = token.encode("utf-8")

    def admit(params: dict[str, Any]) -> str | None:
        options = params.get("initializationOptions")
        given = options.get("token") if isinstance(options, dict) else None
        if not isinstance(given, str):
            return "no token in initializationOptions.token"
        if not hmac.compare_digest(given.encode("utf-8"), expected):
            return "wrong token"
        return None

    return admit


def tcp_listener(port: int, token_file: Path | None) -> Listener:
    token_path = token_file or default_token_path()
    token = load_or_create_token(token_path)
    sock = socket.create_server(("127.0.0.1", port))  # loopback only; OSError: taken, or not ours
    return Listener(sock, f"127.0.0.1:{port}; clients send the token in {token_path} as "
                          "initializationOptions.token", token)


def unix_listener(path: Path) -> Listener:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is not None:
        if not stat.S_ISSOCK(info.st_mode):
            raise ListenError(Failure(FailureKind.BAD_OPTION, f"{path} exists and is not a socket; not replacing it"))
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # a socket nobody listens on: left by a server that died
        else:
            raise ListenError(Failure(FailureKind.SERVE_FAILED, f"another server is listening on {path}"))
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)  # the socket file is created 0600: only its owner may connect
    try:
        sock.bind(str(path))
    finally:
        os.umask(previous)
    return Listener(sock, f"{path} (owner only)", None, path)


def peer_uid(conn: socket.socket) -> int | None:
    """The uid of a Unix-socket peer (Linux SO_PEERCRED), None where the platform has no such option."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    _pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return uid


class SocketWriter:
    """pygls's writer interface over a socket: whole messages (sendall), one writer at a time
    (handlers answer from worker threads)."""

    def __init__(self, conn: socket.socket):
        self.conn = conn
        self.lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self.lock:
            self.conn.sendall(data)

    def close(self) -> None:
        self.conn.close()


class Refused(Exception):
    """Why a client is not admitted; `message_id`: its `initialize`'s id, when it sent one (the
    refusal is then its error answer)."""

    def __init__(self, reason: str, message_id: Any = None):
        super().__init__(reason)
        self.reason = reason
        self.message_id = message_id


class ReplayedStream(io.RawIOBase):
    """A connection's bytes as the session reads them: first those read while authenticating
    (the `initialize` and whatever the client sent right after it), then the socket's."""

    def __init__(self, head: bytes, conn: socket.socket):
        self._head = memoryview(head)
        self._conn = conn

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._head:
            count = min(len(buffer), len(self._head))
            buffer[:count] = self._head[:count]
            self._head = self._head[count:]
            return count
        return self._conn.recv_into(buffer)


Session = Callable[[BinaryIO, SocketWriter], int]


def read_initialize(conn: socket.socket, config: ServerConfig) -> tuple[dict[str, Any], bytes]:
    """The client's first message, which must be `initialize`, and every byte read so far. It must
    arrive whole within `auth_timeout_s` of this call, however the client spreads its bytes.
    Raises Refused."""
    deadline = time.monotonic() + config.auth_timeout_s
    received = bytearray()

    def receive() -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise Refused(f"no initialize within {config.auth_timeout_s:g} s")
        conn.settimeout(remaining)
        try:
            chunk = conn.recv(RECEIVE_BYTES)
        except TimeoutError:
            raise Refused(f"no initialize within {config.auth_timeout_s:g} s") from None
        except OSError as error:
            raise Refused(f"the connection failed ({error.__class__.__name__})") from None
        if not chunk:
            raise Refused("the client closed the connection before initialize")
        received.extend(chunk)

    while (header_end := received.find(b"\r\n\r\n")) < 0:
        if len(received) > config.max_initialize_bytes:
            raise Refused("no message header in the first bytes")
        receive()
    lengths = [match[1].strip() for line in bytes(received[:header_end]).split(b"\r\n")
               if (match := HEADER.search(line)) is not None]
    if len(lengths) != 1 or not lengths[0].isdigit():
        raise Refused("the first message has no readable Content-Length")
    body_end = header_end + 4 + int(lengths[0])
    if body_end > config.max_initialize_bytes:
        raise Refused(f"a first message of {int(lengths[0])} bytes (more than {config.max_initialize_bytes})")
    while len(received) < body_end:
        receive()
    try:
        message = json.loads(bytes(received[header_end + 4:body_end]))
    except ValueError:
        raise Refused("the first message is not JSON") from None
    message_id = message.get("id") if isinstance(message, dict) else None
    if not isinstance(message, dict) or message.get("method") != "initialize" or message_id is None:
        raise Refused("the first message is not initialize", message_id)
    return message, bytes(received)


class Admissions:
    """Connections authenticated side by side, each on a thread of its own and within
    `auth_timeout_s`, so that a silent or trickling client keeps nobody else out. The first client
    admitted is served; one admitted after it is refused."""

    def __init__(self, listener: Listener, config: ServerConfig):
        self._by_token = token_admission(listener.token) if listener.token is not None else None
        self._unix = listener.unix_path is not None
        self._config = config
        self._slots = threading.BoundedSemaphore(config.pending_clients)
        self._lock = threading.Lock()
        self._admitted: tuple[socket.socket, bytes] | None = None
        self.admitted = threading.Event()

    def authenticate(self, conn: socket.socket) -> None:
        if not self._slots.acquire(blocking=False):
            complain(f"a client was refused: {self._config.pending_clients} clients are authenticating already")
            conn.close()
            return
        threading.Thread(target=self._authenticate, args=(conn,), name="repomem-authenticate", daemon=True).start()

    def take(self) -> tuple[socket.socket, bytes]:
        """The admitted client's connection and the bytes read from it (once `admitted` is set)."""
        assert self._admitted is not None
        return self._admitted

    def _authenticate(self, conn: socket.socket) -> None:
        try:
            if self._unix:
                uid = peer_uid(conn)
                if uid is not None and uid != os.getuid():
                    complain(f"a client of uid {uid} was refused (the socket is its owner's)")
                    conn.close()
                    return
            message, head = read_initialize(conn, self._config)
            params = message.get("params")
            refusal = self._by_token(params if isinstance(params, dict) else {}) if self._by_token else None
            if refusal is not None:
                raise Refused(refusal, message["id"])
            with self._lock:
                if self._admitted is not None:
                    raise Refused("another client is being served", message["id"])
                conn.settimeout(None)  # admitted: an editor may stay idle for hours
                self._admitted = (conn, head)
            self.admitted.set()
        except Refused as refused:
            complain(f"a client was refused: {refused.reason}")
            if refused.message_id is not None:
                try:
                    conn.settimeout(REFUSAL_SEND_S)
                    conn.sendall(frame({"jsonrpc": "2.0", "id": refused.message_id, "error": {
                        "code": INVALID_REQUEST, "message": f"initialize refused: {refused.reason}"}}))
                except OSError:
                    pass  # the client is gone already
            conn.close()
        finally:
            self._slots.release()


def _refuse_waiting(listener: Listener, admissions: Admissions) -> None:
    """Clients already connected but not yet accepted when another was admitted: closing the
    listener reset them with no word (a second editor saw a broken pipe). Each is taken and
    refused with its reason ("another client is being served") on its own thread."""
    listener.sock.setblocking(False)
    while True:
        try:
            conn, _ = listener.sock.accept()
        except OSError:  # BlockingIOError: nobody else is waiting
            return
        conn.setblocking(True)
        admissions.authenticate(conn)


def serve_socket(listener: Listener, session: Session, config: ServerConfig | None = None) -> int:
    """Accept clients until one is admitted, then stop listening and serve it; that session's exit
    code."""
    config = config or ServerConfig()
    admissions = Admissions(listener, config)
    listener.sock.listen(config.pending_clients)
    listener.sock.settimeout(ACCEPT_POLL_S)  # to notice an admission made on another thread
    complain(f"listening on {listener.description}")
    try:
        while not admissions.admitted.is_set():
            try:
                conn, _ = listener.sock.accept()
            except TimeoutError:
                continue
            admissions.authenticate(conn)
        _refuse_waiting(listener, admissions)
    finally:
        listener.sock.close()
        if listener.unix_path is not None:
            listener.unix_path.unlink(missing_ok=True)
    conn, head = admissions.take()
    with conn, io.BufferedReader(ReplayedStream(head, conn)) as stream:
        return session(stream, SocketWriter(conn))
