"""A process that has imported the `repomem` command once and forks a fresh child per command.

Each `repomem ...` the tests run is then a real process of its own (its own exit code, file
descriptors, environment, working folder, atexit handlers and interpreter shutdown), without paying
the interpreter's start, about 1 s of imports and numba's first-kernel set-up (~0.6 s) every time:
the end-to-end tests run hundreds of commands. `tests/cli_process.run` talks to it; `run_exec`
there still starts `python -m repomem` from nothing, for the tests about the start itself.

Protocol, one JSON object a line: the test writes {"args", "cwd", "env", "out", "err",
"timeout_s"} on this process's stdin; it answers {"returncode"} (negative: killed by that signal)
or {"timeout": true} on its stdout. It serves one command at a time; the test side keeps a pool.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from typing import NoReturn

# What the commands import lazily, imported here once so that children inherit it.
WARM_MODULES = ("repomem.cli.main", "repomem.cli.service_setup", "repomem.cli.eval_commands",
                "repomem.cli.summarise_command", "repomem.cli.config_command", "repomem.service")


def _warm() -> None:
    import importlib

    import numpy as np

    for name in WARM_MODULES:
        importlib.import_module(name)
    from repomem.index.kernels.csr import row_slots

    # The first cached kernel a process loads sets numba's CPU target up: done once, here.
    row_slots(np.zeros(1, np.int64), np.ones(1, np.int64))


def _run_child(request: dict) -> NoReturn:
    """In the forked child: become the command's process, then run it as `python -m repomem` does."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # gettempdir() read TMPDIR once, in this zygote
    stdin = os.open(os.devnull, os.O_RDONLY)
    out = os.open(request["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(request["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for fd, target in ((stdin, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv = [os.path.join(os.path.dirname(sys.modules["repomem"].__file__), "__main__.py"), *request["args"]]
    from repomem.cli.main import entry

    entry()  # as `python -m repomem`: never returns; an exception propagates (traceback, status 1)


def _wait(pid: int, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return {"returncode": os.waitstatus_to_exitcode(status)}
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return {"timeout": True}
        time.sleep(0.005)


def serve() -> int | None:
    """The zygote's loop; returns the command's exit status in a child, None when the tests are done."""
    _warm()
    requests, answers = sys.stdin.buffer, sys.stdout
    answers.write(json.dumps({"ready": True}) + "\n")
    answers.flush()
    for line in requests:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            return _run_child(request)
        answers.write(json.dumps(_wait(pid, request["timeout_s"])) + "\n")
        answers.flush()
    return None


if __name__ == "__main__":
    sys.exit(serve())
