"""Go's symbols: definitions, import bindings and call sites, collected during the syntax walk.

- Definitions: functions; methods (scope: the receiver's type name); type declarations (struct,
  interface, any named type) as "class", their embedded types as bases. A type alias
  `type A = other.B` keeps its target as the one base, marked with ALIAS_MARK, so the resolver
  follows it like a re-export.
- Imports: `import "a/b/c"` binds `c` (the path's last element, see packages.default_name),
  `import x "a/b/c"` binds `x`, `import . "a/b/c"` binds "." (its exported names join the file's);
  blank imports bind nothing and are left out.
- Calls: `F()`, `pkg.F()`, `recv.M()` and explicit instantiations `F[int]()`. A call through the
  method's receiver is written with the receiver's type (`s.Get` in a method of Store becomes
  `Store.Get`); a call whose first name is another local (parameter, variable) calls a value and
  is left out, so a parameter named like an imported package never reaches the import.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from repomem.languages.go.locals import DECLARING_TYPES, FUNCTION_TYPES, LocalNames
from repomem.languages.go.packages import default_name
from repomem.languages.parsed import CallSites, Definition, ImportBinding
from repomem.languages.symbol_scaffold import CollectedSymbols, MemberChain, call_rows
from repomem.languages.treesitter import Node, capture_nodes, text_of

LANGUAGE_NAME = "go"  # tree-sitter-language-pack grammar
ALIAS_MARK = "="  # a base starting with it is a type alias's target
DOT_IMPORT = "."  # the local name of `import . "path"`
CALL_QUERY = """
(call_expression function: [(identifier) (selector_expression)] @callee)
(type_conversion_expression type: (generic_type type: [(type_identifier) (qualified_type)] @callee))
"""
# `a.b.c`: an identifier, a qualified type or a selector chain of names.
_CHAIN = MemberChain(re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"), "selector_expression",
                     "operand", "field", None, frozenset({"identifier"}))


class GoSymbols(CollectedSymbols):
    """One file's definitions, imports and local names as the walk meets them, then its calls."""

    watched_types = frozenset({"function_declaration", "method_declaration", "func_literal", "type_spec",
                               "type_alias", "import_spec", *DECLARING_TYPES})

    def __init__(self) -> None:
        super().__init__()
        self.locals = LocalNames()

    def enter(self, node: Node, kept_index: int, scope: str, in_function: bool) -> tuple[str, bool]:
        node_type = node.type
        if node_type in FUNCTION_TYPES:
            receiver_type = self.locals.add_function(node)
            if node_type != "func_literal":
                name = text_of(node.child_by_field_name("name"))
                if name:
                    self.definitions.append(Definition(kept_index, name, "function", receiver_type, in_function, ()))
                return receiver_type, True
            return scope, True
        if node_type in ("type_spec", "type_alias"):
            name = text_of(node.child_by_field_name("name"))
            if name:
                self.definitions.append(Definition(kept_index, name, "class", "", in_function, _bases(node)))
        elif node_type == "import_spec":
            binding = _import(node)
            if binding is not None:
                self.imports.append(binding)
        elif in_function or node_type not in ("var_spec", "const_spec"):
            self.locals.add_declaration(node)  # package-level var / const are no locals
        return scope, in_function

    def finish(self, root: Node, kept_index: dict[int, int], class_scope: Sequence[str]
               ) -> tuple[tuple[Definition, ...], tuple[ImportBinding, ...], CallSites]:
        return self.symbols(call_rows(capture_nodes(LANGUAGE_NAME, CALL_QUERY, root, "callee"), kept_index,
                                      class_scope, lambda node, _: self._callee(node), {}))

    def _callee(self, node: Node) -> str | None:
        """The dotted callee as the resolver reads it, None for a call of a local value."""
        dotted = dotted_name(node)
        if dotted is None:
            return None
        first, dot, rest = dotted.partition(".")
        local = self.locals.innermost(first, node.start_byte)
        if local is None:
            return dotted
        if local.receiver_type and rest:
            return f"{local.receiver_type}.{rest}"
        return None


def dotted_name(node: Node) -> str | None:
    """'a.b.c' for an identifier, a qualified type or a selector chain of names; None otherwise
    (a call on a call's result, an index, a type assertion)."""
    return _CHAIN.dotted_name(node)


def _type_name(node: Node | None) -> str:
    """`T` / `pkg.T` of a type expression (pointers and type arguments dropped), "" otherwise."""
    while node is not None and node.type in ("pointer_type", "generic_type"):
        node = node.child_by_field_name("type") if node.type == "generic_type" else (
            node.named_children[0] if node.named_children else None)
    if node is None or node.type not in ("type_identifier", "qualified_type"):
        return ""
    return text_of(node).replace(" ", "")


def _bases(node: Node) -> tuple[str, ...]:
    """Embedded types of a struct or interface (their methods are promoted), or an alias's target."""
    body = node.child_by_field_name("type")
    if node.type == "type_alias":
        target = _type_name(body)
        return (ALIAS_MARK + target,) if target else ()
    if body is None:
        return ()
    if body.type == "struct_type":
        fields = next((c for c in body.named_children if c.type == "field_declaration_list"), None)
        embedded = [] if fields is None else [
            field.child_by_field_name("type") for field in fields.named_children
            if field.type == "field_declaration" and field.child_by_field_name("name") is None]
    elif body.type == "interface_type":
        embedded = [element.named_children[0] for element in body.named_children
                    if element.type == "type_elem" and len(element.named_children) == 1]
    else:
        return ()
    return tuple(name for name in map(_type_name, embedded) if name)


def _import(node: Node) -> ImportBinding | None:
    path_node = node.child_by_field_name("path")
    path = text_of(path_node).strip("\"`")
    if not path:
        return None
    alias = node.child_by_field_name("name")
    if alias is None:
        return ImportBinding(default_name(path), path, "")
    if alias.type == "blank_identifier":
        return None
    return ImportBinding(DOT_IMPORT if alias.type == "dot" else text_of(alias), path, "")
