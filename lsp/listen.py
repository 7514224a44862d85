"""`repomem serve --tcp PORT` and `repomem serve --socket PATH`: the language server on a socket.

A language server reads the user's repositories and, through its model settings, can send their
code elsewhere, so a socket must not let another local user drive it:

- `--tcp PORT` listens on 127.0.0.1 only and admits a client whose `initialize` carries the
  user's token in `initializationOptions.token`. The token lives in a file only its owner can read
  (created 0600 on first use: `$XDG_CONFIG_HOME/repomem/serve-token`, or `--token-file`); a file
  other users can read is refused, as ssh refuses a readable key.
- `--socket PATH` is a Unix socket created 0600, and a peer whose uid is not ours (SO_PEERCRED)
  is closed before it says anything.

One client is served at a time. A refused client, or one that sends no admissible `initialize`
within `AUTH_TIMEOUT_S`, is closed and the server goes on listening; the first admitted session
ends the server when it ends, as pygls's own TCP server does.
"""

from __future__ import annotations

import hmac
import os
import secrets
import socket
import stat
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from repomem.failures import Failure
from repomem.lsp.framing import complain

AUTH_TIMEOUT_S = 10.0  # seconds a socket client has to send an admissible `initialize`
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
            raise ListenError(Failure("bad-token-file", f"cannot create the token file {path}: "
                                                        f"{error.strerror or error}")) from None
        with os.fdopen(descriptor, "w") as out:
            out.write(token + "\n")
        complain(f"created the token file {path} (mode 0600)")
        return token
    except OSError as error:
        raise ListenError(Failure("bad-token-file", f"cannot read {path}: {error.strerror or error}")) from None
    if not stat.S_ISREG(info.st_mode):
        raise ListenError(Failure("bad-token-file", f"the token file {path} is not a regular file"))
    if info.st_uid != os.getuid():
        raise ListenError(Failure("bad-token-file", f"the token file {path} belongs to another user"))
    if info.st_mode & 0o077:
        raise ListenError(Failure("bad-token-file", f"the token file {path} can be read by other users "
                                                    f"(mode {stat.S_IMODE(info.st_mode):04o}); run chmod 600 on it"))
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise ListenError(Failure("bad-token-file", f"cannot read {path}: {error}")) from None
    if len(token) < MIN_TOKEN_CHARS or any(character.isspace() for character in token):
        raise ListenError(Failure("bad-token-file", f"the token file {path} must hold one token of at least "
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
            raise ListenError(Failure("bad-option", f"{path} exists and is not a socket; not replacing it"))
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()  # a socket nobody listens on: left by a server that died
        else:
            raise ListenError(Failure("serve-failed", f"another server is listening on {path}"))
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


Session = Callable[[BinaryIO, SocketWriter, Callable[[dict[str, Any]], str | None]], int | None]


def serve_socket(listener: Listener, session: Session) -> int:
    """Accept clients one at a time until one is admitted; that session's exit code."""
    listener.sock.listen(1)
    complain(f"listening on {listener.description}")
    try:
        while True:
            conn, _ = listener.sock.accept()
            code = _serve_client(listener, conn, session)
            if code is not None:
                return code
    finally:
        listener.sock.close()
        if listener.unix_path is not None:
            listener.unix_path.unlink(missing_ok=True)


def _serve_client(listener: Listener, conn: socket.socket, session: Session) -> int | None:
    with conn:
        if listener.unix_path is not None:
            uid = peer_uid(conn)
            if uid is not None and uid != os.getuid():
                complain(f"a client of uid {uid} was refused (the socket is its owner's)")
                return None
        conn.settimeout(AUTH_TIMEOUT_S)  # until `initialize` is admitted
        by_token = token_admission(listener.token) if listener.token is not None else None

        def admit(params: dict[str, Any]) -> str | None:
            refusal = by_token(params) if by_token is not None else None
            if refusal is None:
                conn.settimeout(None)  # admitted: an editor may stay idle for hours
            return refusal

        with conn.makefile("rb") as stream:
            return session(stream, SocketWriter(conn), admit)
