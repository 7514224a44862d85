"""Go names declared inside function bodies (parameters, receivers, `:=`, local var / const, range
and type-switch variables), kept as byte ranges: a call whose first name is one of them calls a
value, never the package or imported function of that name."""

from __future__ import annotations

from typing import NamedTuple

from repomem.languages.treesitter import Node, text_of

# Nodes that open a scope for the names declared directly inside them (Go spec, "Blocks": each
# if / for / switch / select statement and each case is its own implicit block).
_SCOPE_TYPES = frozenset({
    "block", "if_statement", "for_statement", "expression_switch_statement", "type_switch_statement",
    "select_statement", "expression_case", "type_case", "default_case", "communication_case",
    "func_literal", "function_declaration", "method_declaration",
})
FUNCTION_TYPES = frozenset({"function_declaration", "method_declaration", "func_literal"})
DECLARING_TYPES = frozenset({"short_var_declaration", "var_spec", "const_spec", "range_clause", "receive_statement",
                             "type_switch_statement"})


class LocalName(NamedTuple):
    scope_start: int  # bytes of the block the name is declared in
    scope_end: int
    visible_from: int  # byte from which the name is in scope (after its declaration)
    receiver_type: str  # the method's receiver type when the name is its receiver, else ""


def receiver_type_name(type_node: Node | None) -> str:
    """`Store` for the receiver types `Store`, `*Store`, `Stack[T]`, `*Stack[T]`."""
    while type_node is not None and type_node.type in ("pointer_type", "generic_type", "parenthesized_type"):
        type_node = type_node.child_by_field_name("type") if type_node.type == "generic_type" else (
            type_node.named_children[0] if type_node.named_children else None)
    return text_of(type_node) if type_node is not None and type_node.type == "type_identifier" else ""


def _parameter_names(parameters: Node | None) -> list[str]:
    if parameters is None or parameters.type != "parameter_list":
        return []
    return [text_of(name) for declaration in parameters.named_children
            for name in declaration.children_by_field_name("name")]


def _declares(node: Node) -> bool:
    """Whether a range clause or receive statement declares its left side (`:=`), not assigns it."""
    return any(child.type == ":=" for child in node.children)


def _enclosing_scope(node: Node) -> Node | None:
    parent = node.parent
    while parent is not None and parent.type not in _SCOPE_TYPES:
        parent = parent.parent
    return parent


class LocalNames:
    """The local names of one file, by name."""

    def __init__(self) -> None:
        self._by_name: dict[str, list[LocalName]] = {}

    def _add(self, name: str, scope: Node, visible_from: int, receiver_type: str = "") -> None:
        if name and name != "_":
            self._by_name.setdefault(name, []).append(
                LocalName(scope.start_byte, scope.end_byte, visible_from, receiver_type))

    def add_function(self, node: Node) -> str:
        """A function, method or function literal's parameters and results; returns the receiver
        type of a method ("" otherwise)."""
        receiver_type = ""
        receiver = node.child_by_field_name("receiver")
        if receiver is not None and receiver.named_children:
            declaration = receiver.named_children[0]
            receiver_type = receiver_type_name(declaration.child_by_field_name("type"))
            for name in declaration.children_by_field_name("name"):
                self._add(text_of(name), node, node.start_byte, receiver_type)
        for field in ("parameters", "result"):
            for name in _parameter_names(node.child_by_field_name(field)):
                self._add(name, node, node.start_byte)
        return receiver_type

    def add_declaration(self, node: Node) -> None:
        """Names a statement inside a function body declares (DECLARING_TYPES)."""
        node_type = node.type
        if node_type == "type_switch_statement":
            alias = node.child_by_field_name("alias")
            names = [] if alias is None else alias.named_children
            scope, visible_from = node, (alias.end_byte if alias is not None else node.start_byte)
        else:
            if node_type in ("range_clause", "receive_statement") and not _declares(node):
                return
            if node_type in ("var_spec", "const_spec"):
                names = node.children_by_field_name("name")
            else:
                left = node.child_by_field_name("left")
                names = [] if left is None else left.named_children
            scope, visible_from = _enclosing_scope(node), node.end_byte
        if scope is None:
            return
        for name in names:
            if name.type == "identifier":
                self._add(text_of(name), scope, visible_from)

    def innermost(self, name: str, at_byte: int) -> LocalName | None:
        """The declaration of `name` in scope at `at_byte` (the innermost one), None if none is."""
        best: LocalName | None = None
        for local in self._by_name.get(name, ()):
            if local.scope_start <= at_byte < local.scope_end and local.visible_from <= at_byte and (
                    best is None or (local.scope_start, local.visible_from) > (best.scope_start, best.visible_from)):
                best = local
        return best
