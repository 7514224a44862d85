"""One process-wide pool of helper threads for the parts of a query or an edit that run at once.

The kernels handed to it release the GIL (numba `nogil`, scipy's CSR product), so on two cores the
caller's part and a helper's run side by side. A pool started once: a thread started per call cost
more than a small part saves (docs/measurements.md#a-query). One pool per CPU priority of the
threads that call it: a helper thread is started by its caller and inherits its nice value
(`repomem.thread_priority`), so a build running at a low priority never leaves its helpers to
the edits a user waits for, nor the other way round.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from repomem.thread_priority import thread_nice

Result = TypeVar("Result")

_pools: dict[int, ThreadPoolExecutor] = {}  # the callers' nice value -> their pool
_pools_lock = threading.Lock()


def _helpers() -> ThreadPoolExecutor:
    nice = thread_nice()
    with _pools_lock:
        pool = _pools.get(nice)
        if pool is None:
            suffix = f"-nice{nice}" if nice else ""
            pool = _pools[nice] = ThreadPoolExecutor(max_workers=3, thread_name_prefix=f"repomem-helper{suffix}")
        return pool


def run_parts(parts: Sequence[Callable[[], Result]]) -> list[Result]:
    """Each part's result, in order: the first part on the calling thread, the others on helpers.
    Every helper's part is waited for, even when the caller's raises, so no part outlives the call
    (they write into the caller's arrays)."""
    pending = [_helpers().submit(part) for part in parts[1:]]
    try:
        first = [parts[0]()] if parts else []
    finally:
        for future in pending:
            future.exception()  # waits; a helper's error is raised below
    return first + [future.result() for future in pending]
