"""Python's cyclic garbage collector during a full build.

A full build makes millions of container objects that live on (symbol tuples, dict entries, syntax
node wrappers) and few cycles. With Python's default thresholds (700 allocations, then 10 and 10)
the collector runs every few hundred allocations and regularly walks the whole young heap, a
measurable share of the per-file analysis's CPU, while the cold build's wall moved less than this
host's noise (see docs/measurements.md#parsing-and-analysis). Collections are
made rarer for the build only, and the forked parse workers inherit the setting; the thresholds are
put back after.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

OLDER_GENERATIONS = (50, 100)  # collections of the younger generation between older ones


@contextmanager
def rarer_collections(young_threshold: int) -> Iterator[None]:
    """Collect the youngest generation after `young_threshold` allocations (0 = leave Python's
    thresholds alone) while the block runs; the previous thresholds afterwards."""
    if young_threshold <= 0:
        yield
        return
    previous = gc.get_threshold()
    gc.set_threshold(young_threshold, *OLDER_GENERATIONS)
    try:
        yield
    finally:
        gc.set_threshold(*previous)
