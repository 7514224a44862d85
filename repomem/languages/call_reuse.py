"""Call sites taken from a file's last version where an edit cannot have changed them.

After an incremental parse (`reparse.TreeMemo`) the new text differs from the old one only inside
one span, which also holds every node whose structure changed (tree-sitter's changed ranges). The
smallest kept node around that span that starts before it, K, holds every call site that may
differ: a call site outside it has the same callee text and the same path up to its kept node (the
nodes on it enclose K or lie beside it, untouched), so the same hops and class scope, and the same
owner once renumbered: the kept nodes are numbered in walk order, so those before K keep their
numbers and those after K's subtree move by the change in its size. That holds when the kept nodes
outside K's subtree are the same under the same parents in both versions, which is checked;
otherwise every call site is captured again. K's call sites are captured again; the rest are the
old rows, in the same order. The tests compare every call site with a parse from nothing, after
random edits and keystroke after keystroke (tests/unit/test_reparse.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from repomem.languages.reparse import Reparse
from repomem.languages.treesitter import Node


@dataclass(frozen=True)
class KnownCalls:
    """One version's call sites: its kept nodes' parents, each call site's callee start byte and
    row (node, hops, callee, enclosing class), in document order."""

    parents: np.ndarray  # int32, shape (n_kept,)
    starts: list[int]
    rows: list[tuple[int, int, str, str]]


@dataclass(frozen=True)
class CallReuse:
    """The last version's call sites (`known`) and the span [first, end) of the new text whose call
    sites are captured again; old bytes after it moved by `delta`, and old kept nodes from
    `moved_from` on (those after K's subtree) by `shift`."""

    known: KnownCalls
    first: int
    end: int
    delta: int
    moved_from: int
    shift: int


def call_reuse(reparse: Reparse | None, parents: np.ndarray, root: Node, kept_index: dict[int, int]
               ) -> CallReuse | None:
    """What the new version may take from the last one (`reparse.before`, when a `KnownCalls`),
    given how its parse differed (`reparse`) and its kept nodes' parents; None when it was parsed
    from nothing or the kept nodes outside K's subtree differ."""
    before = None if reparse is None else reparse.before
    if reparse is None or not isinstance(before, KnownCalls):
        return None
    start, end, delta = reparse.start, reparse.end, reparse.delta
    node: Node | None = root.descendant_for_byte_range(start, max(start, end))
    # K starts before the span (or is the root): a kept node starting where the span starts may be
    # a new one, or an old one's neighbour, and the numbering up to K must be the old one's.
    while node is not None and (node.id not in kept_index or node.start_byte > start or node.end_byte < end
                                or (node.start_byte == start and kept_index[node.id] != 0)):
        node = node.parent
    if node is None:
        return None
    k = kept_index[node.id]
    old = before.parents
    if k >= old.shape[0] or not np.array_equal(parents[: k + 1], old[: k + 1]):
        return None
    old_end, new_end = _subtree_end(old, k), _subtree_end(parents, k)
    shift = new_end - old_end
    if parents.shape[0] - new_end != old.shape[0] - old_end:
        return None
    # After K's subtree: the same nodes, their parents before K or after its subtree (moved).
    tail = old[old_end:]
    if not np.array_equal(parents[new_end:], np.where(tail >= old_end, tail + shift, tail)):
        return None
    return CallReuse(before, node.start_byte, node.end_byte, delta, old_end, shift)


def _subtree_end(parents: np.ndarray, k: int) -> int:
    """The end of kept node k's subtree in walk order: the first later node whose parent comes
    before k (a node's parent comes before it; a subtree is one run)."""
    outside = np.flatnonzero(parents[k + 1 :] < k)
    return k + 1 + int(outside[0]) if outside.shape[0] else int(parents.shape[0])
