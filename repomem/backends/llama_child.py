"""Entry point of the model's child process: llama-cpp-python's OpenAI-compatible server, tied to
its parent's life.

`python -m repomem.backends.llama_child <llama_cpp.server arguments>`. The child must not outlive
repomem (a killed CLI or language server would leave a 500 MB process holding a port): on Linux the
kernel sends it SIGTERM when the parent dies (PR_SET_DEATHSIG); everywhere, a thread watches the
parent id and exits when it changes. Nothing of repomem's engine is imported here, numba included:
llama.cpp's CUDA build and numba's LLVM cannot share a process.
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


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        except (OSError, AttributeError):
            pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main() -> None:
    _die_with_parent(int(os.environ.get("REPOMEM_PARENT_PID", os.getppid())))
    from llama_cpp.server.__main__ import main as serve

    sys.argv = ["llama_cpp.server", *sys.argv[1:]]
    serve()


if __name__ == "__main__":
    main()
