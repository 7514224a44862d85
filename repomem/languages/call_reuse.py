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
    walk: object = None  # the version's recorded walk (walk_reuse.KnownWalk), which the next walk copies from


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


def call_reuse(reparse: Reparse | None, parents: np.ndarray, root: Node, kept_index: dict[int, int],
               callee_types: frozenset[str] = frozenset(), containers: frozenset[str] = frozenset()
               ) -> CallReuse | None:
    """What the new version may take from the last one (`reparse.before`, when a `KnownCalls`),
    given how its parse differed (`reparse`) and its kept nodes' parents; None when it was parsed
    from nothing or the kept nodes outside K's subtree differ. `callee_types`: the node types a
    callee is made of; K is never one of them (with every named node kept, K was once a part of
    a callee, `register_lookup` in `F.register_lookup(x)`: the call site starts before K, and its
    row kept the old name). `containers`: the node types whose named children are statements,
    where the span's own statements may be all that is captured again (`_statements_around`)."""
    before = None if reparse is None else reparse.before
    if reparse is None or not isinstance(before, KnownCalls):
        return None
    start, end, delta = reparse.start, reparse.end, reparse.delta
    old = before.parents
    node: Node | None = root.descendant_for_byte_range(start, max(start, end))
    while True:
        # K starts before the span (or is the root): a kept node starting where the span starts
        # may be a new one, or an old one's neighbour, and the numbering up to K must be the old one's.
        while node is not None and (node.id not in kept_index or node.start_byte > start or node.end_byte < end
                                    or (node.start_byte == start and kept_index[node.id] != 0)
                                    or node.type in callee_types):
            node = node.parent
        if node is None:
            return None
        found = _reuse_under(node, kept_index[node.id], start, end, kept_index, parents, old,
                             node.type in containers)
        if found is not None:
            first, last, moved_from, shift = found
            return CallReuse(before, first, last, delta, moved_from, shift)
        # The smallest K may be the wrong one: with a definition deleted whole, the common prefix
        # runs on into the next one's `def `, and K is that next definition. Any kept node around
        # K holds the span too: the next one up is tried, up to the root.
        node = node.parent


def _reuse_under(node: Node, k: int, start: int, end: int, kept_index: dict[int, int], parents: np.ndarray,
                 old: np.ndarray, holds_statements: bool) -> tuple[int, int, int, int] | None:
    """With K = `node` (kept index `k`): the bytes captured again, `moved_from` and `shift`
    (`CallReuse`'s), or None when the kept nodes outside K's subtree differ. `holds_statements`:
    K is a statement container, whose children are tried first (`_statements_around`)."""
    if k >= old.shape[0] or not np.array_equal(parents[: k + 1], old[: k + 1]):
        return None
    region = _statements_around(node, k, start, end, kept_index, parents, old) if holds_statements else None
    if region is not None:
        return region
    old_end, new_end = subtree_end(old, k), subtree_end(parents, k)
    shift = new_end - old_end
    if parents.shape[0] - new_end != old.shape[0] - old_end:
        return None
    # After K's subtree: the same nodes, their parents before K or after its subtree (moved).
    tail = old[old_end:]
    if not np.array_equal(parents[new_end:], np.where(tail >= old_end, tail + shift, tail)):
        return None
    return node.start_byte, node.end_byte, old_end, shift


def _statements_around(node: Node, k: int, start: int, end: int, kept_index: dict[int, int], parents: np.ndarray,
                       old: np.ndarray) -> tuple[int, int, int, int] | None:
    """K's call sites narrowed to its kept children that touch the span [start, end) (a statement
    added to a module or a long block: K is the whole file or function, its other statements
    untouched): (first byte, end byte, `moved_from`, `shift`), or None where that does not hold.

    K is a statement container (a module, a block): the span is in its body, so K's header and
    those of the nodes around it are the old ones (a class's name gives its calls their enclosing
    class: with every named node kept, a class has kept children, its name among them, and a class
    renamed kept its calls' old class when classes were tried). It holds when every named child
    of K is kept or a comment (no call site then sits on K itself, each lies in one child), and the
    kept nodes before the first touching child and after the last one's subtree are the old ones
    under the same parents: those children are then new text or reparsed, and every other child is
    an old one with its old call sites (the argument of the module docstring, one level down). No
    child touching the span (whole statements deleted, blanks or comments edited): the kept nodes
    around the span must be the old ones, and only the span is captured again (it holds no call
    site)."""
    touching = []
    following = None  # K's first kept child after the span
    for child in node.named_children:
        if child.id not in kept_index:
            if "comment" in child.type:
                continue
            return None  # an error node, or an expression K owns: K is captured whole
        if child.start_byte <= end and child.end_byte >= start:
            touching.append(child)
        elif following is None and child.start_byte > end:
            following = child
    if touching:
        first = kept_index[touching[0].id]
        new_end = subtree_end(parents, kept_index[touching[-1].id])
        captured = min(start, touching[0].start_byte), max(end, touching[-1].end_byte)
    else:  # statements deleted whole, or blanks and comments edited: nothing new to capture
        first = new_end = kept_index[following.id] if following is not None else subtree_end(parents, k)
        captured = start, end
    old_end = int(old.shape[0]) - (int(parents.shape[0]) - new_end)
    if old_end < first or not np.array_equal(parents[:first], old[:first]):
        return None
    shift = new_end - old_end
    new_tail, old_tail = parents[new_end:], old[old_end:]
    # After the children: the same nodes, hanging off nodes before them or after them, never inside.
    if ((old_tail >= first) & (old_tail < old_end)).any() or ((new_tail >= first) & (new_tail < new_end)).any():
        return None
    if not np.array_equal(new_tail, np.where(old_tail >= old_end, old_tail + shift, old_tail)):
        return None
    return *captured, old_end, shift


def subtree_end(parents: np.ndarray, k: int) -> int:
    """The end of kept node k's subtree in walk order: the first later node whose parent comes
    before k (a node's parent comes before it; a subtree is one run)."""
    outside = np.flatnonzero(parents[k + 1 :] < k)
    return k + 1 + int(outside[0]) if outside.shape[0] else int(parents.shape[0])
