"""The `repomem` command run as a user runs it: a separate process, its exit code and stderr."""

from __future__ import annotations

import atexit
import json
import locale
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

TIMEOUT_S = 300


def _command_environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "REPOMEM_DEBUG"}


def run_exec(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m repomem ARGS` started from nothing: for what the interpreter's start decides."""
    return subprocess.run([sys.executable, "-m", "repomem", *args], capture_output=True, text=True,
                          cwd=cwd, env=_command_environment(), timeout=TIMEOUT_S)


def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    """`repomem ARGS` as a process of its own, forked from a zygote that imported the command once
    (tests/cli_zygote.py): the same code from `main()` on, without ~2 s of start a command. `env`:
    the whole environment (as subprocess's), by default this one without REPOMEM_DEBUG."""
    zygote = _idle_zygote()
    with tempfile.TemporaryDirectory(prefix="repomem-cli-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        try:
            answer = zygote.ask({"args": list(args), "cwd": str(cwd or Path.cwd()), "out": str(out), "err": str(err),
                                 "env": env or _command_environment(), "timeout_s": timeout})
        finally:
            _IDLE.append(zygote)
        if answer.get("timeout"):
            raise subprocess.TimeoutExpired(["repomem", *args], timeout)
        encoding = locale.getpreferredencoding(False)
        return subprocess.CompletedProcess(["repomem", *args], answer["returncode"],
                                           out.read_text(encoding=encoding), err.read_text(encoding=encoding))


class _Zygote:
    def __init__(self) -> None:
        root = Path(__file__).resolve().parent.parent
        self.process = subprocess.Popen([sys.executable, "-m", "tests.cli_zygote"], cwd=root,
                                        env=_command_environment(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)
        if self._answer().get("ready") is not True:
            raise RuntimeError("the CLI zygote did not start")

    def _answer(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the CLI zygote exited ({self.process.wait()})")
        return json.loads(line)

    def ask(self, request: dict) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)


_IDLE: list[_Zygote] = []  # zygotes not running a command; list.pop/append are atomic across threads
_ALL: list[_Zygote] = []


def _idle_zygote() -> _Zygote:
    try:
        return _IDLE.pop()
    except IndexError:
        zygote = _Zygote()
        _ALL.append(zygote)
        return zygote


@atexit.register
def _close_zygotes() -> None:
    for zygote in _ALL:
        zygote.close()


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


def run_at_a_terminal(args: list[str], env: dict[str, str], cwd: Path,
                      timeout: float = TIMEOUT_S) -> tuple[int, str, str]:
    """`python -m repomem ARGS` from nothing with its standard error on a pseudo-terminal, as a
    person's shell runs it: (exit status, stdout, what the terminal showed)."""
    main, terminal = os.openpty()
    try:
        process = subprocess.Popen([sys.executable, "-m", "repomem", *args], stdout=subprocess.PIPE,
                                   stderr=terminal, stdin=subprocess.DEVNULL, env=env, cwd=cwd)
        os.close(terminal)
        shown = bytearray()
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                break
            if not chunk:
                break
            shown += chunk
        stdout, _ = process.communicate(timeout=timeout)
    finally:
        os.close(main)
    return process.returncode, stdout.decode(), shown.decode(errors="replace")
