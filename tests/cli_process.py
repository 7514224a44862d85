"""The `repomem` command run as a user runs it: a separate process, its exit code and stderr."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "REPOMEM_DEBUG"}
    return subprocess.run([sys.executable, "-m", "repomem", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def assert_user_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("repomem: error: ")
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def model_children(pid: int) -> list[int]:
    """The model's child processes (repomem.backends.llama_child) of process `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid
                    and b"repomem.backends.llama_child" in (entry / "cmdline").read_bytes()):
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie has exited)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def framed(message: dict) -> bytes:
    """A JSON-RPC message as the language server protocol frames it on a stream."""
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_framed(stream) -> dict | None:
    """The next framed message from a socket's reader, None when the server closed it."""
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        if not line.strip():
            break
        key, _, value = line.decode().partition(":")
        if key.strip().lower() == "content-length":
            length = int(value)
    return json.loads(stream.read(length))
