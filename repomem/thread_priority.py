"""A thread's CPU priority: background work that yields the cores to the work a user waits for.

On Linux the nice value is a thread's own (sched(7)), and what a thread starts inherits it: the
threads it creates and the processes it forks (the index build's parse workers). A thread that
lowers its priority therefore takes the whole build with it, and the model's process, started by
another thread, keeps its own. Raising a priority again needs a privilege users lack
(RLIMIT_NICE), so only a thread that ends with its work should lower it, and a pool that outlives
a call keeps one set of threads per priority (`repomem.index.helper_threads`). Elsewhere the nice
value is the process's: nothing is changed there.
"""

from __future__ import annotations

import os
import sys
import threading

MOST_NICE = 19  # the lowest priority Linux gives (nice values run from -20 to 19)


def thread_nice() -> int:
    """This thread's nice value (0 where threads have none of their own)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    except OSError:
        return 0


def lower_thread_priority(increment: int) -> bool:
    """Run this thread (and what it starts from now on) `increment` nice steps lower, at most to
    19; whether its priority is now lower than before."""
    if increment <= 0 or not sys.platform.startswith("linux"):
        return False
    before = thread_nice()
    after = min(MOST_NICE, before + increment)
    if after == before:
        return False
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), after)
    except OSError:
        return False
    return thread_nice() == after
