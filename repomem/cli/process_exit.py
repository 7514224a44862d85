"""The command's exit, without the interpreter's teardown.

Once a command has printed its answer, Python's own exit frees every module one by one (numpy,
scipy, numba and llvmlite, tree-sitter's languages): about 0.35 s on two cores, on every command,
after the user already has the answer. A command is done once its output is flushed, its threads
have finished and its exit handlers have run (child processes stopped, temporary folders removed),
so it stops the process there.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

# Python's own status when standard output cannot be flushed at exit (a closed pipe, a full disk).
EXIT_FLUSH_FAILED = 120


def exit_status(code: object) -> int:
    """`SystemExit.code` as the process's exit status, the way the interpreter maps it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def exit_now(status: int) -> NoReturn:
    """Finish what a normal exit finishes, then end the process with `status`."""
    # What the interpreter's exit does first, in its order: the threading module's own exit hooks
    # (a ThreadPoolExecutor's idle workers wait for one of them to stop), then each non-daemon
    # thread joined. Joining without the hooks waits for those workers for ever.
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            status = status or EXIT_FLUSH_FAILED
    os._exit(status)
