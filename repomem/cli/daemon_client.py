"""The command line's side of the resident process (`repomem daemon`, repomem/cli/daemon_server.py).

`repomem index`, `retrieve` and `complete` hand their arguments, working folder and environment to
a running daemon of the same user and the same repomem, which runs the command with the
repository's index (and the model) already in memory, and prints what it prints here. With no
daemon, or one that declines (another repomem installation, code changed since it started), the
command runs in this process as always.

This module imports only the standard library and repomem.cache: a forwarded command pays the interpreter's start
(~0.04 s), not the engine's imports (~1 s) nor repomem.cli.main's (~0.25 s).

Frames from the daemon: one byte of kind, four bytes of length (big-endian), the payload.
  b"o" / b"e": bytes for standard output / error; b"x": the exit status (payload: 4-byte signed);
  b"d": declined (payload: why, UTF-8), the command then runs here.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
from pathlib import Path

from repomem.cache import cache_problem, cache_root

# The commands a daemon runs; every other command (eval, model, serve, config, summarise) runs here.
FORWARDED = ("index", "retrieve", "complete")
# Set to anything but "" or "0": never use a daemon (tests, or a user who wants a fresh process).
OPT_OUT = "REPOMEM_NO_DAEMON"
# sun_path holds 108 bytes with its terminating zero.
MAX_SOCKET_PATH = 107
HEADER = struct.Struct(">cI")
STATUS = struct.Struct(">i")


def daemon_folder() -> Path:
    """Where the daemon's socket, lock and log live: the user cache (repomem.cache imports only
    the standard library too)."""
    return cache_root() / "daemon"


def socket_path() -> Path:
    return daemon_folder() / "socket"


def package_folder() -> str:
    """This repomem's package folder: a daemon answers only commands of the same installation."""
    return os.path.dirname(os.path.realpath(sys.modules["repomem"].__file__ or ""))


def connect(timeout_s: float | None = None) -> socket.socket | None:
    """A connection to this user's daemon, or None when none listens."""
    path = socket_path()
    if len(os.fsencode(str(path))) > MAX_SOCKET_PATH:
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout_s)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        return None
    return conn


def send_json(conn: socket.socket, message: dict) -> None:
    conn.sendall(json.dumps(message).encode("utf-8") + b"\n")


def read_frame(stream) -> tuple[bytes, bytes] | None:
    """(kind, payload), or None at the end of the stream."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    kind, length = HEADER.unpack(header)
    payload = stream.read(length)
    return None if len(payload) < length else (kind, payload)


def _terminal_columns() -> int | None:
    for fd in (2, 1):
        try:
            return os.get_terminal_size(fd).columns
        except OSError:
            continue
    return None


def forward(argv: list[str]) -> int | None:
    """Run `repomem ARGV` in the daemon: its exit status, or None when this process must run it."""
    if not argv or argv[0] not in FORWARDED or os.environ.get(OPT_OUT, "") not in ("", "0"):
        return None
    if cache_problem() is not None:
        return None  # the daemon's socket is in the cache: this process refuses the folder, in one line
    try:
        cwd = os.getcwd()
    except OSError:
        return None  # the working folder was removed: this process says so, as it always did
    if not _open_output():
        return None  # closed: the connection would take its descriptor and the answer go back to the daemon
    conn = connect()
    if conn is None:
        return None
    with conn:
        try:
            send_json(conn, {"argv": argv, "cwd": cwd, "env": dict(os.environ),
                             "package": package_folder(), "terminals": [os.isatty(1), os.isatty(2)],
                             "columns": _terminal_columns()})
        except OSError:
            return None  # it went away between the connect and the request: nothing ran
        stream = conn.makefile("rb")
        started = False
        try:
            while True:
                frame = read_frame(stream)
                if frame is None:
                    if not started:
                        return None  # it closed before running anything (stopping): run here
                    print("repomem: error: the daemon stopped during the command; see "
                          f"{daemon_folder() / 'log'}", file=sys.stderr)
                    return 1
                kind, payload = frame
                if kind == b"d":
                    return None
                started = True
                if kind == b"x":
                    return STATUS.unpack(payload)[0]
                try:
                    _write_all(1 if kind == b"o" else 2, payload)
                except BrokenPipeError:
                    raise
                except OSError as error:  # this terminal's output, not the daemon's connection
                    print(f"repomem: error: cannot write the output: {error.strerror or error}", file=sys.stderr)
                    return 1
        except KeyboardInterrupt:
            # Closing the connection tells the daemon to stop the command (it reads EOF).
            print("repomem: interrupted", file=sys.stderr)
            return 130
        except BrokenPipeError:
            return 141  # our reader went away (`| head -1`); the daemon sees the connection close
        except OSError as error:
            print(f"repomem: error: lost the daemon's connection ({error.strerror or error})", file=sys.stderr)
            return 1


def _open_output() -> bool:
    """Whether standard output and error are open: with one closed, the socket this process opens
    takes its number, and what the daemon sent for it went back into the daemon (a retrieve with
    `>&-` printed nothing and exited 0; run here, it says the output is closed)."""
    try:
        os.fstat(1)
        os.fstat(2)
    except OSError:
        return False
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
