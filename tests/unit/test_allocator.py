"""repomem.allocator: freed heap memory goes back to the operating system (glibc), also after the
language server installs a compacted index (a compaction every few hundred edits)."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable

import numpy as np
import pytest

from repomem.allocator import release_free_memory
from repomem.lsp.session import settle_replaced_index

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")


def resident_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def freed_by(release: Callable[[], object]) -> float:
    """MB of resident memory `release` gives back of ~79 MB of heap blocks just freed."""
    # 64 KB blocks come from the heap (below glibc's mmap threshold); a block kept after them
    # stops the heap's own trim at its top, so only malloc_trim can hand the pages back.
    blocks = [np.ones(8192) for _ in range(1200)]  # every page touched
    fence = np.ones(8192)
    del blocks
    before = resident_mb()
    release()
    after = resident_mb()
    assert fence.sum() == 8192
    return before - after


def test_freed_heap_pages_are_returned():
    assert freed_by(release_free_memory) > 40
    assert release_free_memory()


def test_settling_a_replaced_index_gives_its_freed_memory_back():
    # What an old index leaves when the server installs a compacted one: glibc kept it mapped, and
    # the server's memory crept up by a few hundred MB over a day of edits
    # (scripts/soak_edit_session.py).
    try:
        dropped = freed_by(settle_replaced_index)
    finally:
        gc.unfreeze()  # the test process's objects back in the collector's reach
    assert dropped > 40
