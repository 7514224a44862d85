"""Child processes that end with their parent: a killed CLI or language server leaves nothing behind.

On Linux the kernel sends SIGTERM to the child when its parent dies (PR_SET_PDEATHSIG); on every
platform a daemon thread also watches the parent id and ends the process when it changes. Used by
the model's child process and by the indexing workers (a `kill -9` of `repomem index --full` left
its parse workers running). Standard library only: the model's child must not import numba.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # linux/prctl.h
PARENT_POLL_S = 1.0


def die_with_parent(parent: int) -> None:
    """End this process when `parent` (the pid that started it) goes away."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # already gone before we got here
        os._exit(0)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
