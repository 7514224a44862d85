"""The C allocator, through ctypes: give freed memory back to the operating system.

A full build allocates and frees a few hundred megabytes of arrays (relation rows, postings,
the matrices' intermediate copies). glibc keeps much of what was freed mapped for reuse, so a
long-lived process (the language server, the evaluator) would keep the build's peak as its
resident size (what trimming gives back: docs/measurements.md#memory-of-a-cold-build).
Elsewhere (macOS, musl) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import lru_cache


@lru_cache(maxsize=1)
def _malloc_trim():
    if not sys.platform.startswith("linux"):
        return None
    for name in ("libc.so.6", ctypes.util.find_library("c")):  # the first without running ldconfig
        try:
            return ctypes.CDLL(name).malloc_trim
        except (OSError, AttributeError, TypeError):  # not glibc (TypeError: no name found)
            continue
    return None


def release_free_memory() -> bool:
    """Return free heap pages to the operating system; False where the allocator cannot."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
