"""repomem.allocator: freed heap memory goes back to the operating system (glibc), also after the
language server installs a compacted index (a compaction every few hundred edits), and a whole
index made or read leaves no freed holes behind."""

from __future__ import annotations

import gc
import os
import subprocess
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


# Run in a fresh process: glibc maps a block only where its free lists hold none large enough, and
# a test worker's heap may hold such a free chunk from the tests before.
_MAPPED_BLOCKS = """
import ctypes
import numpy as np
from repomem.allocator import fix_heap_thresholds, large_blocks_mapped


class MallocInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


libc = ctypes.CDLL("libc.so.6")
if not hasattr(libc, "mallinfo2"):  # glibc before 2.33
    print("no mallinfo2")
    raise SystemExit(0)
libc.mallinfo2.restype = MallocInfo2


def mapped_bytes():
    return int(libc.mallinfo2().hblkhd)  # bytes of blocks that are mappings of their own


assert fix_heap_thresholds()
size = 2 << 20
before = mapped_bytes()
outside = np.ones(size // 8)
assert mapped_bytes() - before < size
with large_blocks_mapped():
    with large_blocks_mapped():
        pass
    mapped = mapped_bytes()
    inside = np.ones(size // 8)
    assert mapped_bytes() - mapped >= size
after = mapped_bytes()
again = np.ones(size // 8)
assert mapped_bytes() - after < size
assert outside.sum() == inside.sum() == again.sum()
print("ok")
"""


def test_large_blocks_are_mapped_only_while_a_whole_index_is_made_or_read():
    """Inside `large_blocks_mapped` a 2 MiB block is a mapping of its own (freed, it goes back to
    the system at once: a build's temporaries left freed holes in the heap, a cold build's peak and
    a loaded index's size); outside it comes from the heap as it does once glibc's own threshold
    has risen (an edit's arrays, reused from edit to edit), and nesting keeps the inner setting."""
    clean = {k: v for k, v in os.environ.items() if k not in _USER_SETTINGS}
    run = subprocess.run([sys.executable, "-c", _MAPPED_BLOCKS], env=clean, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    if run.stdout.strip() == "no mallinfo2":
        pytest.skip("glibc before 2.33 has no mallinfo2 to read the mapped blocks from")
    assert run.stdout.strip() == "ok"


_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


def test_a_users_own_malloc_settings_are_left_alone():
    script = "from repomem.allocator import fix_heap_thresholds; print(fix_heap_thresholds())"
    for env, expected in (({}, "True"), ({"MALLOC_TRIM_THRESHOLD_": "131072"}, "False"),
                          ({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536"}, "False")):
        clean = {k: v for k, v in os.environ.items() if k not in _USER_SETTINGS}
        run = subprocess.run([sys.executable, "-c", script], env={**clean, **env}, capture_output=True, text=True,
                             check=True)
        assert run.stdout.strip() == expected
