"""Parses that start from a file's previous tree: an edited buffer is parsed again incrementally.

tree-sitter reuses the subtrees an edit did not touch when it is told where the text changed
(`Tree.edit`) and handed the old tree: a line typed into a file is parsed several times faster
than the whole file from nothing (docs/measurements.md#an-edit). The tree it returns is the one
a fresh parse makes: the tests compare every kept node, symbol and call site after
random edits against fresh parses.

The edit is found by comparing the old and new bytes: their common prefix and common suffix
bound one replaced span, which describes any change, a keystroke or a whole new file, exactly
(a distant second change only makes the span wider and the reuse smaller).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from repomem.languages.treesitter import Tree, parse, parser_for


def common_prefix_length(old: bytes, new: bytes) -> int:
    """Bytes the two strings share from their start."""
    n = min(len(old), len(new))
    if old[:n] == new[:n]:
        return n
    differs = np.frombuffer(old, dtype=np.uint8, count=n) != np.frombuffer(new, dtype=np.uint8, count=n)
    return int(np.argmax(differs))


def common_suffix_length(old: bytes, new: bytes, limit: int) -> int:
    """Bytes the two strings share at their end, at most `limit` (what the prefix left of the
    shorter one, so that prefix and suffix never overlap)."""
    if limit <= 0:
        return 0
    old_tail = np.frombuffer(old, dtype=np.uint8)[len(old) - limit:][::-1]
    new_tail = np.frombuffer(new, dtype=np.uint8)[len(new) - limit:][::-1]
    differs = old_tail != new_tail
    return limit if not differs.any() else int(np.argmax(differs))


def _point(text: bytes, offset: int) -> tuple[int, int]:
    """(row, byte column) of a byte offset, as tree-sitter counts them."""
    return text.count(b"\n", 0, offset), offset - (text.rfind(b"\n", 0, offset) + 1)


def edited_tree(tree: Tree, old: bytes, new: bytes) -> Tree:
    """`tree` (a parse of `old`) told of the one span in which `new` differs, in place."""
    edited_span(tree, old, new)
    return tree


def edited_span(tree: Tree, old: bytes, new: bytes) -> tuple[int, int]:
    """`edited_tree`'s work; returns the span [start, end) of `new` that replaced old bytes."""
    start = common_prefix_length(old, new)
    suffix = common_suffix_length(old, new, min(len(old), len(new)) - start)
    old_end, new_end = len(old) - suffix, len(new) - suffix
    tree.edit(start_byte=start, old_end_byte=old_end, new_end_byte=new_end, start_point=_point(old, start),
              old_end_point=_point(old, old_end), new_end_point=_point(new, new_end))
    return start, new_end


@dataclass(frozen=True)
class Reparse:
    """How a parse from the last tree of a path differs from that tree: the span [start, end) of
    the new text holding every byte that changed and every node whose structure did (tree-sitter's
    changed ranges); old bytes after it moved by `delta`. `before`: what the analysis of the old
    text left with the memo (`TreeMemo.attach`), None when it left nothing."""

    start: int
    end: int
    delta: int
    before: object


class TreeMemo:
    """The last parse of a few paths (least recently parsed dropped first), which the next parse
    of the same path starts from. An index keeps one for its edits; a cold build keeps none (it
    parses each file once)."""

    def __init__(self, capacity: int = 8) -> None:
        self.capacity = capacity
        # (path, language) -> (source, its tree, what its analysis attached)
        self._trees: OrderedDict[tuple[str, str], tuple[bytes, Tree, object]] = OrderedDict()
        self._reparses: dict[tuple[str, str], tuple[bytes, Reparse]] = {}  # the last parse's, by its source
        self._lock = threading.Lock()  # the language server edits on one thread, a refresh on another

    def parse(self, path: str, language: str, source: bytes, fresh_if_error: bool = False) -> Tree:
        """`source` parsed from the path's last tree where the memo has one. `fresh_if_error`: a
        tree with a syntax error is parsed again from nothing. tree-sitter's error recovery can
        reuse an old subtree a fresh parse would not, and only then (docs/measurements.md#an-edit,
        counted over random edits), so a saved file is indexed exactly as a full scan indexes it,
        while an editor's keystrokes, which pass through errors at every other key, keep the
        incremental tree."""
        key = (path, language)
        with self._lock:
            previous = self._trees.pop(key, None)
            self._reparses.pop(key, None)
        reparse = None
        if previous is None:
            tree = parse(language, source)
        else:
            old_source, old_tree, attached = previous
            # The old tree is this memo's alone (no node of it outlives the analysis that made
            # it), so it is edited in place rather than copied.
            start, end = edited_span(old_tree, old_source, source)
            tree = parser_for(language).parse(source, old_tree)
            if fresh_if_error and tree.root_node.has_error:
                tree = parse(language, source)
            else:
                for changed in old_tree.changed_ranges(tree):
                    start, end = min(start, changed.start_byte), max(end, changed.end_byte)
                reparse = Reparse(start, end, len(source) - len(old_source), attached)
        with self._lock:
            self._trees[key] = (source, tree, None)
            if reparse is not None:
                self._reparses[key] = (source, reparse)
            while len(self._trees) > self.capacity:
                dropped, _ = self._trees.popitem(last=False)
                self._reparses.pop(dropped, None)
        return tree

    def reparse_of(self, path: str, language: str, source: bytes) -> Reparse | None:
        """How the last parse of `source` at this path differed from the tree before (None: it was
        parsed from nothing, or `source` is not what was parsed last)."""
        with self._lock:
            found = self._reparses.get((path, language))
        return found[1] if found is not None and found[0] is source else None

    def attach(self, path: str, language: str, source: bytes, value: object) -> None:
        """Keep `value` (an analysis of `source`) with the last tree of the path, for the analysis
        of the next version (`Reparse.before`); nothing when `source` is not what was parsed last."""
        with self._lock:
            held = self._trees.get((path, language))
            if held is not None and held[0] is source:
                self._trees[(path, language)] = (source, held[1], value)

    def __len__(self) -> int:
        return len(self._trees)
