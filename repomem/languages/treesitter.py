"""Adapter for tree-sitter and tree-sitter-language-pack: the only module that imports them.

Grammars come from tree-sitter-language-pack below 1.0, which ships them compiled inside the
wheel (1.x downloads grammars at run time, which fails offline).
"""

from __future__ import annotations

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


def parse(language: str, source: bytes) -> Tree:
    """Parse UTF-8 bytes; tree-sitter recovers from syntax errors, so this never fails."""
    return parser_for(language).parse(source)


def capture_nodes(language: str, query_source: str, root: Node, name: str) -> list[Node]:
    """Nodes captured under `name` by a tree-sitter query, in document order (an enclosing node
    before the nodes it holds). tree-sitter's captures come in match order, which changed from one
    parse of a file to the next (14 of 16 files of django/db/models), and the order is saved with
    the index's call sites: sorted, the same code writes the same index."""
    captures = tree_sitter.QueryCursor(_query(language, query_source)).captures(root)
    return sorted(captures.get(name, []), key=lambda node: (node.start_byte, -node.end_byte))
