"""repomem.allocator: freed heap memory goes back to the operating system (glibc)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from repomem.allocator import release_free_memory


def resident_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_heap_pages_are_returned():
    # 64 KB blocks come from the heap (below glibc's mmap threshold); a block kept after them
    # stops the heap's own trim at its top, so only malloc_trim can hand the pages back.
    blocks = [np.ones(8192) for _ in range(1200)]  # ~79 MB, every page touched
    fence = np.ones(8192)
    del blocks
    before = resident_mb()
    assert release_free_memory()
    after = resident_mb()
    assert before - after > 40, (before, after)
    assert fence.sum() == 8192
