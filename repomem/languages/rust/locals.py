"""Rust names bound inside function bodies (parameters, `let`, closure parameters, `for`, `if let` /
`while let` and match-arm patterns, nested `fn` items), kept as byte ranges: a call of a plain
name bound there calls the local, never the module item or import of that name. Only plain names
matter: a path's first segment (`a::f`) lives in the type namespace, which locals do not shadow.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from repomem.languages.treesitter import Node, text_of

BINDING_TYPES = frozenset({"let_declaration", "for_expression", "let_condition", "match_arm", "closure_expression"})
_CONDITIONAL_TYPES = frozenset({"if_expression", "while_expression"})
# Inside a pattern these name a type, a path or a constant to match against, not a new binding.
_NOT_BINDING_FIELDS = frozenset({"type", "condition"})
_NOT_BINDING_TYPES = frozenset({"scoped_identifier", "generic_type", "type_identifier", "scoped_type_identifier",
                                "field_identifier"})


class LocalName(NamedTuple):
    scope_start: int  # bytes of the region the name is bound in
    scope_end: int
    visible_from: int  # byte from which the name is bound (after its `let`)


def pattern_names(pattern: Node | None) -> Iterator[str]:
    """Names a pattern binds: `x`, `mut x`, `ref x`, `(a, b)`, `Some(x)`, `S { x, y: z }`, `x @ ..`."""
    if pattern is None:
        return
    stack = [pattern]
    while stack:
        node = stack.pop()
        if node.type in ("identifier", "shorthand_field_identifier"):
            yield text_of(node)
            continue
        if node.type in _NOT_BINDING_TYPES:
            continue
        for index, child in enumerate(node.children):
            if child.is_named and node.field_name_for_child(index) not in _NOT_BINDING_FIELDS:
                stack.append(child)


def _parameter_patterns(parameters: Node | None) -> Iterator[Node]:
    if parameters is None:
        return
    for child in parameters.named_children:
        if child.type == "parameter":
            pattern = child.child_by_field_name("pattern")
            if pattern is not None:
                yield pattern
        elif child.type not in ("self_parameter", "variadic_parameter", "attribute_item", "line_comment",
                                "block_comment"):
            yield child  # a closure parameter without a type is the pattern itself


def _enclosing(node: Node, types: frozenset[str] | tuple[str, ...], steps: int = 64) -> Node | None:
    parent = node.parent
    while parent is not None and parent.type not in types and steps > 0:
        parent, steps = parent.parent, steps - 1
    return parent if parent is not None and parent.type in types else None


class LocalNames:
    """The local names of one file, by name."""

    def __init__(self) -> None:
        self._by_name: dict[str, list[LocalName]] = {}

    def _add(self, names: Iterator[str] | list[str], scope: Node | None, visible_from: int) -> None:
        if scope is None:
            return
        for name in names:
            if name and name != "_":
                self._by_name.setdefault(name, []).append(LocalName(scope.start_byte, scope.end_byte, visible_from))

    def add_function(self, node: Node, in_function: bool) -> None:
        """A function's parameters; a function nested in a body is itself a local of that block."""
        for pattern in _parameter_patterns(node.child_by_field_name("parameters")):
            self._add(pattern_names(pattern), node, node.start_byte)
        if in_function:
            block = _enclosing(node, ("block",))
            if block is not None:
                self._add([text_of(node.child_by_field_name("name"))], block, block.start_byte)

    def add_binding(self, node: Node) -> None:
        """Names bound by one of BINDING_TYPES."""
        node_type = node.type
        if node_type == "closure_expression":
            for pattern in _parameter_patterns(node.child_by_field_name("parameters")):
                self._add(pattern_names(pattern), node, node.start_byte)
        elif node_type == "let_declaration":
            self._add(pattern_names(node.child_by_field_name("pattern")), _enclosing(node, ("block",)), node.end_byte)
        elif node_type == "let_condition":
            scope = _enclosing(node, _CONDITIONAL_TYPES, steps=4) or node.parent
            self._add(pattern_names(node.child_by_field_name("pattern")), scope, node.end_byte)
        else:  # for_expression, match_arm: bound in the whole node (the pattern comes first)
            self._add(pattern_names(node.child_by_field_name("pattern")), node, node.start_byte)

    def is_local(self, name: str, at_byte: int) -> bool:
        """Whether `name` is bound by a local at `at_byte`."""
        return any(local.scope_start <= at_byte < local.scope_end and local.visible_from <= at_byte
                   for local in self._by_name.get(name, ()))
