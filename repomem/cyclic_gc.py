"""Python's cyclic garbage collector during a full build, and in processes that keep an index.

A full build makes millions of container objects that live on (symbol tuples, dict entries, syntax
node wrappers) and few cycles. With Python's default thresholds (700 allocations, then 10 and 10)
the collector runs every few hundred allocations and regularly walks the whole young heap, a
measurable share of the per-file analysis's CPU, while the cold build's wall moved less than this
host's noise (see docs/measurements.md#parsing-and-analysis). Collections are
made rarer for the build only, and the forked parse workers inherit the setting; the thresholds are
put back after.

A process that keeps an index loaded (the language server, the daemon) holds its objects for
long, and each collection of the oldest generation walks all of them: a stall of whatever edit or
completion it lands in (docs/measurements.md#an-edit). Once an index is in place, its objects are
moved out of the collector's reach (`settle_long_lived`).
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


def settle_long_lived() -> None:
    """Collect everything once, then keep every object alive now out of later collections
    (gc.freeze): what the process keeps for long (its index) is walked no more. Called after an
    index is put in place and the one it replaced let go: unfrozen first, so the old index's
    garbage (cycles included) is collected here and not kept frozen. Objects frozen are still
    freed when no longer referenced; only cycles among them wait for the next call."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
