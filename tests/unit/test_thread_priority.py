"""Background work at a lower CPU priority: one thread, what it starts, and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from repomem.index.helper_threads import run_parts
from repomem.thread_priority import MOST_NICE, lower_thread_priority, thread_nice

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own nice value is Linux's")


def _in_thread(work):
    """`work()`'s result, run on a thread of its own (which ends with it, as the index build's does)."""
    box: list = []

    def run() -> None:
        try:
            box.append(("result", work()))
        except BaseException as error:  # noqa: BLE001 - raised again on the test's thread
            box.append(("error", error))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    kind, value = box[0]
    if kind == "error":
        raise value
    return value


def _room_to_lower(steps: int) -> int:
    """This thread's nice value, made low enough to lower it `steps` (the fast tier's workers run
    at 19 beside the editor tests, tests/conftest.py: only a privileged user can go back up)."""
    if thread_nice() + steps > MOST_NICE:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 0)
        except OSError:
            pytest.skip("this thread runs at the lowest priority and may not go back up")
    return thread_nice()


def test_a_lowered_thread_takes_what_it_starts_and_leaves_the_others():
    main_before = thread_nice()

    def lowered():
        before = _room_to_lower(5)
        assert lower_thread_priority(5)
        mine = thread_nice()
        assert mine == before + 5
        # A process it forks (the parse workers) and the helper threads it calls on.
        child = subprocess.run([sys.executable, "-c", "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"],
                               capture_output=True, text=True, check=True)
        helpers = run_parts([thread_nice, thread_nice, thread_nice])
        return mine, int(child.stdout), helpers

    mine, child, helpers = _in_thread(lowered)
    assert child == mine
    assert helpers == [mine, mine, mine]
    # The thread that did not lower itself, and the helpers it calls on, keep their priority.
    assert thread_nice() == main_before
    assert run_parts([thread_nice, thread_nice]) == [main_before, main_before]


def test_nothing_is_lowered_for_zero_or_past_the_lowest_priority():
    assert _in_thread(lambda: (lower_thread_priority(0), thread_nice())) == (False, thread_nice())

    def at_the_floor():
        lower_thread_priority(MOST_NICE)
        return lower_thread_priority(3), thread_nice()

    assert _in_thread(at_the_floor) == (False, MOST_NICE)
