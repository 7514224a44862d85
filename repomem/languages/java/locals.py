"""Java names that hold values, with the type they were declared with: locals and parameters (as
byte ranges of the scope that sees them) and fields (per class). A call `x.m()` whose `x` is one of
them calls a method of that type, never a class or import named `x`.

A name's type is kept as written (`Store`, `a.b.Store`, `Outer.Inner`; type arguments dropped) and
resolved later, in the file's context, by the call resolver. Names whose type cannot name a class
of the repository (primitives, arrays, lambda parameters, `var` without `new`) keep "" and their
calls are left out.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from repomem.languages.treesitter import Node, text_of

# Nodes whose extent bounds the locals declared in them (a local's scope is the rest of its block).
_SCOPE_TYPES = frozenset({
    "block", "constructor_body", "switch_block", "for_statement", "enhanced_for_statement", "catch_clause",
    "try_with_resources_statement", "lambda_expression", "method_declaration", "constructor_declaration",
    "compact_constructor_declaration", "if_statement", "while_statement", "switch_rule",
})
# Declarations of names inside method bodies (and record components, which are fields).
DECLARING_TYPES = frozenset({
    "local_variable_declaration", "formal_parameter", "spread_parameter", "catch_formal_parameter",
    "enhanced_for_statement", "resource", "lambda_expression", "instanceof_expression", "type_pattern",
    "field_declaration", "constant_declaration",
})


class LocalName(NamedTuple):
    scope_start: int  # bytes of the node the name is visible in
    scope_end: int
    visible_from: int
    type_name: str  # declared type as written, "" when no class of the repository can be its type


def type_name(node: Node | None) -> str:
    """`Store` / `a.b.Store` / `Outer.Inner` for a class type (type arguments dropped); "" for
    primitives, arrays, `var` and anything else."""
    if node is not None and node.type == "generic_type":
        node = node.named_children[0] if node.named_children else None
    if node is None or node.type not in ("type_identifier", "scoped_type_identifier"):
        return ""
    written = "".join(text_of(node).split())
    if "<" in written or "@" in written or written == "var":
        return ""  # type arguments or annotations inside a qualified type: not worth parsing
    return written


def _declared_type(type_node: Node | None, declarator: Node | None) -> str:
    """The type a declarator's name holds: the written type, or for `var x = new C()` C."""
    if declarator is not None and declarator.child_by_field_name("dimensions") is not None:
        return ""  # `Foo x[]`: an array
    if type_node is not None and text_of(type_node) == "var" and declarator is not None:
        value = declarator.child_by_field_name("value")
        if value is not None and value.type == "object_creation_expression":
            return type_name(value.child_by_field_name("type"))
        return ""
    return type_name(type_node)


def _scope_of(node: Node) -> Node | None:
    parent = node.parent
    while parent is not None and parent.type not in _SCOPE_TYPES:
        parent = parent.parent
    return parent


class ValueNames:
    """One file's locals and fields, filled as the walk meets their declarations."""

    def __init__(self) -> None:
        self._locals: dict[str, list[LocalName]] = defaultdict(list)
        self._fields: dict[str, dict[str, str]] = defaultdict(dict)  # qualified class -> field -> type

    def _add_local(self, name: str, scope: Node | None, visible_from: int, declared: str) -> None:
        if name and scope is not None:
            self._locals[name].append(LocalName(scope.start_byte, scope.end_byte, visible_from, declared))

    def add(self, node: Node, class_scope: str) -> None:
        """Names one node of DECLARING_TYPES declares (`class_scope`: the class it sits in)."""
        kind = node.type
        if kind in ("field_declaration", "constant_declaration"):
            type_node = node.child_by_field_name("type")
            for declarator in node.children_by_field_name("declarator"):
                name = text_of(declarator.child_by_field_name("name"))
                if name and class_scope:
                    self._fields[class_scope].setdefault(name, _declared_type(type_node, declarator))
        elif kind == "local_variable_declaration":
            type_node, scope = node.child_by_field_name("type"), _scope_of(node)
            for declarator in node.children_by_field_name("declarator"):
                self._add_local(text_of(declarator.child_by_field_name("name")), scope, declarator.start_byte,
                                _declared_type(type_node, declarator))
        elif kind in ("formal_parameter", "spread_parameter"):
            self._add_parameter(node, class_scope)
        elif kind == "catch_formal_parameter":
            types = next((c for c in node.named_children if c.type == "catch_type"), None)
            caught = [] if types is None else types.named_children
            self._add_local(text_of(node.child_by_field_name("name")), _scope_of(node), node.start_byte,
                            type_name(caught[0]) if len(caught) == 1 else "")
        elif kind in ("enhanced_for_statement", "resource"):
            self._add_local(text_of(node.child_by_field_name("name")), node if kind != "resource" else _scope_of(node),
                            node.start_byte, type_name(node.child_by_field_name("type")))
        elif kind == "lambda_expression":
            parameters = node.child_by_field_name("parameters")
            names = [parameters] if parameters is not None and parameters.type == "identifier" else (
                [] if parameters is None or parameters.type != "inferred_parameters" else parameters.named_children)
            for name in names:
                self._add_local(text_of(name), node, node.start_byte, "")
        elif kind == "instanceof_expression":
            self._add_local(text_of(node.child_by_field_name("name")), _scope_of(node), node.start_byte,
                            type_name(node.child_by_field_name("right")))
        elif kind == "type_pattern" and len(node.named_children) == 2:
            written, name = node.named_children
            self._add_local(text_of(name), _scope_of(node), node.start_byte, type_name(written))

    def _add_parameter(self, node: Node, class_scope: str) -> None:
        holder = node.parent.parent if node.parent is not None else None  # formal_parameters' owner
        if node.type == "spread_parameter":  # `T... rest` is an array
            declarator = next((c for c in node.named_children if c.type == "variable_declarator"), None)
            name, declared = text_of(None if declarator is None else declarator.child_by_field_name("name")), ""
        else:
            name = text_of(node.child_by_field_name("name"))
            declared = _declared_type(node.child_by_field_name("type"), node)
        if holder is not None and holder.type == "record_declaration":
            if name and class_scope:  # the record's own scope: its components are its fields
                self._fields[class_scope].setdefault(name, declared)
            return
        self._add_local(name, holder, node.start_byte, declared)

    def local(self, name: str, at_byte: int) -> LocalName | None:
        """The innermost declaration of `name` in scope at `at_byte`, None if none is."""
        best: LocalName | None = None
        for local in self._locals.get(name, ()):
            if local.scope_start <= at_byte < local.scope_end and local.visible_from <= at_byte and (
                    best is None or (local.scope_start, local.visible_from) > (best.scope_start, best.visible_from)):
                best = local
        return best

    def field(self, name: str, enclosing_class: str, innermost_only: bool = False) -> str | None:
        """The declared type of a field of the enclosing class (then of the classes around it, unless
        `innermost_only`: `this.f`); None when none of them declares `name`."""
        scope = enclosing_class
        while scope:
            fields = self._fields.get(scope)
            if fields is not None and name in fields:
                return fields[name]
            if innermost_only:
                return None
            scope = scope.rpartition(".")[0]
        return None
