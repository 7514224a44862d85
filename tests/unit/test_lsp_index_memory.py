"""The language server's memory across index replacements (a compaction every few hundred edits)."""

from __future__ import annotations

import gc
import os
import sys

import numpy as np
import pytest

from repomem.lsp.session import settle_replaced_index


def resident_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_settling_a_replaced_index_gives_its_freed_memory_back():
    # What an old index leaves when the server installs a compacted one: heap blocks freed
    # under a block still in use, which glibc keeps mapped (scripts/soak_edit_session.py: the
    # server's memory crept up by a few hundred MB over a day of edits). 64 KB blocks come
    # from the heap (below glibc's mmap threshold); the fence stops the heap's own trim.
    old_index = [np.ones(8192) for _ in range(1200)]  # ~79 MB, every page touched
    fence = np.ones(8192)
    del old_index
    before = resident_mb()
    try:
        settle_replaced_index()
    finally:
        gc.unfreeze()  # the test process's objects back in the collector's reach
    after = resident_mb()
    assert before - after > 40, (before, after)
    assert fence.sum() == 8192
