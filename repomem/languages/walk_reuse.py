"""Kept nodes taken from a file's last walk where an edit cannot have changed them.

After an incremental parse (`reparse.TreeMemo`) the new text differs from the old one only inside
one span [start, end), which also holds every node whose structure changed (tree-sitter's changed
ranges). A node wholly before the span (it ends before `start`) or wholly after it (it starts after
`end`) has the same text and the same subtree as an old node at the same bytes (moved by the
length change `delta` when after). The syntax walk (`syntax.walk_tree`) of such a node, met with
the same class scope and the same "inside a function" as the old one, gives what the old walk gave
for it: the same kept nodes in the same order, under the same parents relative to it, the same
lengths, lines moved by the change in line count when after, the same definitions and imports.
So the walk copies them from the last version instead of visiting the subtree again: on a large
file most of the walk (docs/measurements.md#an-edit).

What the copy cannot give is each inner node's tree-sitter id (`KeptTree.kept_index` holds the
copied subtree's top node only): capturing call sites inside a copied subtree needs a whole walk,
which `syntax.extract_syntax` then makes. The tests compare every kept node, symbol and call site
after random edits and keystroke after keystroke with a parse from nothing
(tests/unit/test_reparse.py).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from repomem.languages.parsed import Definition, ImportBinding


@dataclass(frozen=True)
class KnownWalk:
    """One version's walk, as `syntax.walk_tree` records it for the next one: per kept node (in
    walk order) its parent, lines, length, bytes, class scope and whether it sits in a function,
    the definitions and imports the walk collected in order with the kept node each came from
    (`import_owners`; a definition's own `node`), and how many of each came before each kept node."""

    parents: np.ndarray  # int32, shape (n_kept,)
    starts: list[int]  # first line
    ends: list[int]  # last line
    lengths: list[int]  # bytes
    start_bytes: list[int]
    end_bytes: list[int]
    class_scope: list[str]
    in_function: list[bool]
    definitions: list[Definition]
    imports: list[ImportBinding]
    import_owners: list[int]
    definitions_before: list[int]  # definitions collected before kept node k was visited
    imports_before: list[int]
    last_line: int  # the version's last line (0-based): lines after the span move by the difference


class WalkReuse:
    """What the walk of a new version may copy from `known` (the last one's), given the span
    [start, end) of the new text that holds every change, old bytes after it moved by `delta`, and
    the new version's last line."""

    def __init__(self, known: KnownWalk, start: int, end: int, delta: int, last_line: int):
        self.known = known
        self.start, self.end, self.delta = start, end, delta
        self.line_shift = last_line - known.last_line

    def old_node(self, start_byte: int, end_byte: int, scope: str, inside_function: bool) -> int | None:
        """The old kept node a new kept node at these bytes, met with this scope, copies; None
        when it touches the span or has no such counterpart."""
        if end_byte < self.start:
            first, last = start_byte, end_byte
        elif start_byte > self.end:
            first, last = start_byte - self.delta, end_byte - self.delta
        else:
            return None
        # Kept nodes in walk order start at non-decreasing bytes (a node before its children and
        # its later siblings); among nested nodes with the same bytes (a block holding one
        # statement) the outermost, which the walk meets first, comes first.
        known = self.known
        starts = known.start_bytes
        old = bisect.bisect_left(starts, first)
        while old < len(starts) and starts[old] == first and known.end_bytes[old] != last:
            old += 1
        if (old == len(starts) or starts[old] != first or known.class_scope[old] != scope
                or known.in_function[old] != inside_function):
            return None
        return old

    def holds_span(self, start_byte: int, end_byte: int) -> bool:
        """A node at these (new) bytes holds the whole span: its children outside the span are
        copied; under a node that only touches the span they lie where the edit's call sites
        are captured again (call_reuse.py), which needs their ids, so they are walked."""
        return start_byte <= self.start and end_byte >= self.end
