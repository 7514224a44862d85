"""Adapter for tree-sitter and tree-sitter-language-pack: the only module that imports them.

Grammars come from tree-sitter-language-pack below 1.0, which ships them compiled inside the
wheel (1.x downloads grammars at run time, which fails offline).
"""

from __future__ import annotations

import operator
from functools import cache

import tree_sitter
from tree_sitter_language_pack import get_language, get_parser

Node = tree_sitter.Node
Tree = tree_sitter.Tree


@cache
def parser_for(language: str) -> tree_sitter.Parser:
    return get_parser(language)  # type: ignore[arg-type]


@cache
def _query(language: str, source: str) -> tree_sitter.Query:
    return tree_sitter.Query(get_language(language), source)  # type: ignore[arg-type]


# tree-sitter's kind id of ERROR nodes ((TSSymbol)-1), outside the grammar's own ids.
ERROR_KIND_ID = 65535


@cache
def node_kind_names(language: str) -> tuple[str, ...]:
    """Each kind id's type name in `language`'s grammar (`Node.kind_id` indexes it)."""
    grammar = get_language(language)  # type: ignore[arg-type]
    return tuple(grammar.node_kind_for_id(kind_id) or "" for kind_id in range(grammar.node_kind_count))


def text_of(node: Node | None) -> str:
    """A node's source text ("" for no node), undecodable bytes replaced."""
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", errors="replace")


def parse(language: str, source: bytes) -> Tree:
    """Parse UTF-8 bytes; tree-sitter recovers from syntax errors, so this never fails."""
    return parser_for(language).parse(source)


_START_BYTE = operator.attrgetter("start_byte")
_END_BYTE = operator.attrgetter("end_byte")


def capture_nodes(language: str, query_source: str, root: Node, name: str,
                  byte_range: tuple[int, int] | None = None) -> list[Node]:
    """Nodes captured under `name` by a tree-sitter query, in document order (an enclosing node
    before the nodes it holds). tree-sitter's captures come in match order, which changed from one
    parse of a file to the next (docs/measurements.md#parsing-and-analysis), and the order is
    saved with the index's call sites: sorted, the same code writes the same index.
    `byte_range` (start, end): only the matches that meet those bytes."""
    cursor = tree_sitter.QueryCursor(_query(language, query_source))
    if byte_range is not None:
        cursor.set_byte_range(*byte_range)
    captures = cursor.captures(root)
    # By (start, -end) in two stable sorts on C-level keys: a Python key function per node cost
    # a quarter of this function (docs/measurements.md#parsing-and-analysis).
    by_end = sorted(captures.get(name, []), key=_END_BYTE, reverse=True)
    return sorted(by_end, key=_START_BYTE)


def nearest_kept(node: Node | None, kept_index: dict[int, int], placed: dict[int, tuple[int, int]]
                 ) -> tuple[int, int]:
    """(kept index of `node`'s nearest kept ancestor-or-self, parent steps up to it), remembered
    for every node passed (tree-sitter's `parent` costs the node's depth). The symbol collectors
    place each call site on its kept node with it."""
    path: list[int] = []
    while node is not None and node.id not in kept_index and node.id not in placed:
        path.append(node.id)
        node = node.parent
    if node is None:
        owner_index, hops = 0, 0  # above the root (never: the root is kept): count as the root
    elif node.id in kept_index:
        owner_index, hops = kept_index[node.id], 0
    else:
        owner_index, hops = placed[node.id]
    for distance, node_id in enumerate(reversed(path), start=1):
        placed[node_id] = (owner_index, hops + distance)
    return owner_index, hops + len(path)
