"""One process at a time for a step every process on this machine would otherwise repeat (compiling
the index kernels, timing the embedded model's layer files): an exclusive flock on a file beside
what the step writes. The kernel drops it when its holder dies."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

POLL_S = 0.2  # how often a waiting process tries the lock again


@contextlib.contextmanager
def machine_lock(path: Path, waiting: Callable[[], None], wait_s: float) -> Iterator[bool]:
    """Hold an exclusive lock on `path`, calling `waiting` once if another process holds it; after
    `wait_s` seconds of waiting, go on without it (the step then runs twice, never wrongly). No
    lock where there is no flock, or where `path` cannot be opened. Yields whether the lock is
    held (a step that removes what a dead holder left may do so only then)."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        yield False
        return
    try:
        handle = open(path, "a+b")  # noqa: SIM115 - held across the yield
    except OSError:
        yield False
        return
    with handle:
        deadline = time.monotonic() + wait_s
        told = False
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    yield False
                    return
                if not told:
                    waiting()
                    told = True
                time.sleep(POLL_S)
        try:
            yield True
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
