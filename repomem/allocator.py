"""The C allocator, through ctypes: give freed memory back to the operating system, and keep it
from holding on to what a build freed.

A full build allocates and frees a few hundred megabytes of arrays (relation rows, postings,
the matrices' intermediate copies). glibc keeps much of what was freed mapped for reuse, so a
long-lived process (the language server, the evaluator) would keep the build's peak as its
resident size (what trimming gives back: docs/measurements.md#memory-of-a-cold-build).
Elsewhere (macOS, musl) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

# mallopt's parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# Blocks under this many bytes come from the heap, as they do once glibc's own threshold has risen
# to its ceiling; the heap's free top is returned once it exceeds TRIM_THRESHOLD bytes.
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 4 << 20
# While a whole index is made or read (`large_blocks_mapped`): blocks of this many bytes and more
# are mapped, so each goes back to the system when freed.
WHOLE_INDEX_MMAP_THRESHOLD = 1 << 20
# Set by a user to tune glibc: left as they are.
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


@lru_cache(maxsize=1)
def _libc():
    if not sys.platform.startswith("linux"):
        return None
    for name in ("libc.so.6", ctypes.util.find_library("c")):  # the first without running ldconfig
        try:
            libc = ctypes.CDLL(name)
            libc.malloc_trim, libc.mallopt  # noqa: B018 - glibc's, or not glibc
            return libc
        except (OSError, AttributeError, TypeError):  # not glibc (TypeError: no name found)
            continue
    return None


def _malloc_trim():
    libc = _libc()
    return None if libc is None else libc.malloc_trim


@lru_cache(maxsize=1)
def fix_heap_thresholds() -> bool:
    """Fix glibc's thresholds for this process (once; False where they were left alone).

    glibc raises its mmap threshold to the size of each large block freed (up to 32 MiB) and its
    trim threshold to twice that, so after a build's first large temporaries are freed the later
    ones come from the heap, and up to 64 MiB freed at the heap's top stays resident, part of a
    cold build's peak (docs/measurements.md#memory-of-a-cold-build). Fixed, blocks come from where
    they did after that rise, and the heap's free top goes back past TRIM_THRESHOLD.
    """
    libc = _libc()
    if libc is None or any(os.environ.get(name) for name in _USER_SETTINGS):
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(_M_TRIM_THRESHOLD,
                                                                                      TRIM_THRESHOLD))


_mapping_lock = threading.Lock()
_mapping_depth = [0]  # callers inside `large_blocks_mapped`, on any thread


@contextmanager
def large_blocks_mapped() -> Iterator[None]:
    """Blocks of WHOLE_INDEX_MMAP_THRESHOLD bytes and more mapped while inside, for making or
    reading a whole index: its many large temporaries (parts read and decoded, relation rows, a
    save's coded copies) then leave no freed holes in the heap beside what is kept, and a loaded,
    prepared index is smaller by a tenth. glibc maps a block only where its free lists hold none
    large enough, so this lowers what is kept, not guaranteed. The setting is the process's: an
    edit made on another thread meanwhile (a language server editing while it builds in the
    background) pays its large arrays' first touches, as every edit did when the setting was the
    process's for good (docs/measurements.md#memory-of-a-cold-build)."""
    libc = _libc()
    if not fix_heap_thresholds() or libc is None:
        yield
        return
    entered = False
    try:
        with _mapping_lock:
            _mapping_depth[0] += 1
            entered = True
            if _mapping_depth[0] == 1:
                libc.mallopt(_M_MMAP_THRESHOLD, WHOLE_INDEX_MMAP_THRESHOLD)
        yield
    finally:
        if entered:
            with _mapping_lock:
                _mapping_depth[0] -= 1
                if _mapping_depth[0] == 0:
                    libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def release_free_memory() -> bool:
    """Return free heap pages to the operating system; False where the allocator cannot."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
