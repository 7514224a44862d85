"""Call sites taken from a file's last version where an edit cannot have changed them.

After an incremental parse (`reparse.TreeMemo`) the new text differs from the old one only inside
one span, which also holds every node whose structure changed (tree-sitter's changed ranges). When
the kept nodes are the same (every one under the same parent), the smallest kept node around that
span holds every call site that may differ: a call site outside it has the same callee text, the
same path up to its kept node (the nodes on it enclose the kept node or lie beside it, untouched),
so the same owner, hops and class scope. Its calls are captured again; the rest are the old rows,
in the same order. The tests compare every call site with a parse from nothing, keystroke after
keystroke (tests/unit/test_reparse.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from repomem.languages.treesitter import Node


@dataclass(frozen=True)
class KnownCalls:
    """One version's call sites: its kept nodes' parents, each call site's callee start byte and
    row (node, hops, callee, enclosing class), in document order."""

    parents: list[int]
    starts: list[int]
    rows: list[tuple[int, int, str, str]]


@dataclass(frozen=True)
class CallReuse:
    """The last version's call sites (`known`) and the span [first, end) of the new text whose call
    sites are captured again; old bytes after it moved by `delta`."""

    known: KnownCalls
    first: int
    end: int
    delta: int


def call_reuse(before: object, changed: tuple[int, int, int] | None, parents: list[int], root: Node,
               kept_index: dict[int, int]) -> CallReuse | None:
    """What the new version may take from `before` (a `KnownCalls`, or anything else: nothing),
    given the changed span (start, end, delta) of its parse and its kept nodes; None when the
    kept nodes differ or the span is unknown."""
    if changed is None or not isinstance(before, KnownCalls) or before.parents != parents:
        return None
    start, end, delta = changed
    node: Node | None = root.descendant_for_byte_range(start, max(start, end))
    while node is not None and (node.id not in kept_index or node.start_byte > start or node.end_byte < end):
        node = node.parent
    if node is None:
        return None
    return CallReuse(before, node.start_byte, node.end_byte, delta)
