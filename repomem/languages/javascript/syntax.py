"""JavaScript / TypeScript / TSX symbols: definitions, import bindings and call sites, collected
during the syntax walk (one collector class for the three grammars).

- Definitions: function declarations; module-level `const f = () => ...` / `function` expressions
  and `exports.f = ...`; classes (declarations and `const C = class ...`) with their methods and
  arrow-function fields (scope: the class), their `extends` target as the one base; TypeScript
  interfaces, type aliases and enums as "class". An anonymous default export is named DEFAULT.
- Imports and exports: see imports.py (ES modules, `require`, TypeScript's `import x = require`).
- Calls: `f()`, `ns.f()`, `this.m()`, `super.m()`, `new C()`, and JSX elements `<Comp />` (a
  component is called when it renders). A call whose first name is declared locally (parameter,
  variable, nested function) calls a value and is left out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from repomem.languages.javascript import imports
from repomem.languages.javascript.imports import DEFAULT, export_row
from repomem.languages.javascript.locals import (
    BLOCK_TYPES,
    FUNCTION_TYPES,
    LocalScopes,
    parameter_names,
    pattern_names,
)
from repomem.languages.parsed import CallSites, Definition, ImportBinding
from repomem.languages.symbol_scaffold import CollectedSymbols, MemberChain, call_rows
from repomem.languages.treesitter import Node, capture_nodes, text_of

CLASS_TYPES = frozenset({"class_declaration", "abstract_class_declaration", "class"})
TYPE_TYPES = frozenset({"interface_declaration", "type_alias_declaration", "enum_declaration"})
FIELD_TYPES = frozenset({"field_definition", "public_field_definition"})
VARIABLE_TYPES = frozenset({"lexical_declaration", "variable_declaration"})
FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function"})
_CALLS = """
(call_expression function: [(identifier) (member_expression)] @callee)
(new_expression constructor: [(identifier) (member_expression)] @callee)
"""
_JSX_CALLS = """
(jsx_opening_element name: [(identifier) (member_expression)] @callee)
(jsx_self_closing_element name: [(identifier) (member_expression)] @callee)
"""
# `a.b.c`: a name or a member chain of names starting at a name, `this` or `super`.
_CHAIN = MemberChain(re.compile(r"[A-Za-z_$][\w$]*(?:\.#?[A-Za-z_$][\w$]*)*"), "member_expression", "object",
                     "property", frozenset({"property_identifier", "private_property_identifier"}),
                     frozenset({"identifier", "this", "super"}))


class JavaScriptSymbols(CollectedSymbols):
    """One file's definitions, imports and local names as the walk meets them, then its calls."""

    watched_types = frozenset({
        *FUNCTION_TYPES, *BLOCK_TYPES, *CLASS_TYPES, *TYPE_TYPES, *FIELD_TYPES, *VARIABLE_TYPES,
        "import_statement", "export_statement", "assignment_expression",
    })

    def __init__(self, grammar: str) -> None:
        super().__init__()
        self.grammar = grammar
        self.scopes = LocalScopes()
        # Class expressions named by what they are assigned to (`const C = class {}`), by node id.
        self._class_names: dict[int, str] = {}

    def enter(self, node: Node, kept_index: int, scope: str, in_function: bool) -> tuple[str, bool]:
        self.scopes.advance(node)
        node_type = node.type
        if node_type in FUNCTION_TYPES:
            return self._function(node, kept_index, scope, in_function)
        if node_type in BLOCK_TYPES:
            self.scopes.open(node, is_function=False)
            declared = node.child_by_field_name("left" if node_type == "for_in_statement" else "parameter")
            self.scopes.declare(pattern_names(declared))
        elif node_type in CLASS_TYPES:
            return self._class(node, kept_index, scope, in_function)
        elif node_type in TYPE_TYPES:
            name = text_of(node.child_by_field_name("name"))
            if name:
                self.definitions.append(Definition(kept_index, name, "class", scope, in_function, ()))
        elif node_type in FIELD_TYPES:
            name = text_of(node.child_by_field_name("property") or node.child_by_field_name("name"))
            value = node.child_by_field_name("value")
            if scope and name and value is not None and value.type in FUNCTION_VALUES:
                self.definitions.append(Definition(kept_index, name, "function", scope, in_function, ()))
        elif node_type in VARIABLE_TYPES:
            self._variables(node, kept_index, in_function)
        elif node_type == "import_statement":
            self.imports.extend(imports.import_bindings(node))
        elif node_type == "export_statement":
            self._export(node, kept_index, scope, in_function)
        elif node_type == "assignment_expression" and self.scopes.at_module_level and not in_function:
            self._commonjs_export(node, kept_index)
        return scope, in_function

    def _function(self, node: Node, kept_index: int, scope: str, in_function: bool) -> tuple[str, bool]:
        name_node = node.child_by_field_name("name")
        name = text_of(name_node)
        node_type = node.type
        if node_type in ("function_declaration", "generator_function_declaration") and name:
            nested = in_function or not self.scopes.at_module_level  # unreachable by name from outside
            self.scopes.declare([name])  # a nested function is a local of its block
            self.definitions.append(Definition(kept_index, name, "function", "", nested, ()))
        elif node_type == "method_definition" and scope and name_node is not None and name_node.type in (
                "property_identifier", "private_property_identifier") and _in_class_body(node):
            self.definitions.append(Definition(kept_index, name, "function", scope, in_function, ()))
        self.scopes.open(node, is_function=True)
        self.scopes.declare(parameter_names(node))
        return scope, True

    def _class(self, node: Node, kept_index: int, scope: str, in_function: bool) -> tuple[str, bool]:
        name = text_of(node.child_by_field_name("name")) or self._class_names.pop(node.id, "")
        if not name:
            return "", in_function  # an anonymous class expression: its methods are nobody's
        nested = in_function or not self.scopes.at_module_level
        if node.type != "class":
            self.scopes.declare([name])
        self.definitions.append(Definition(kept_index, name, "class", scope, nested, _bases(node)))
        return (f"{scope}.{name}" if scope else name), in_function

    def _variables(self, node: Node, kept_index: int, in_function: bool) -> None:
        declarators = [d for d in node.named_children if d.type == "variable_declarator"]
        if not self.scopes.at_module_level:
            for declarator in declarators:
                self.scopes.declare(pattern_names(declarator.child_by_field_name("name")),
                                    function_wide=node.type == "variable_declaration")
            return
        if in_function:
            return
        for declarator in declarators:
            name_node, value = declarator.child_by_field_name("name"), declarator.child_by_field_name("value")
            name = text_of(name_node) if name_node is not None and name_node.type == "identifier" else ""
            if name and value is not None and value.type in FUNCTION_VALUES:
                self.definitions.append(Definition(kept_index, name, "function", "", False, ()))
            elif name and value is not None and value.type == "class":
                self._class_names[value.id] = name
            else:
                self.imports.extend(imports.require_bindings(declarator))

    def _export(self, node: Node, kept_index: int, scope: str, in_function: bool) -> None:
        self.imports.extend(imports.export_bindings(node))
        value = node.child_by_field_name("value")
        if value is None or not imports.is_default_export(node):
            return
        if value.type in FUNCTION_VALUES:
            self.definitions.append(Definition(kept_index, DEFAULT, "function", scope, in_function, ()))
        elif value.type == "class" and value.child_by_field_name("name") is None:
            self._class_names[value.id] = DEFAULT

    def _commonjs_export(self, node: Node, kept_index: int) -> None:
        exported = imports.commonjs_export_name(node.child_by_field_name("left"))
        value = node.child_by_field_name("right")
        if exported is None or value is None:
            return
        if value.type == "identifier":
            self.imports.append(export_row(exported, "", text_of(value)))
        elif value.type in FUNCTION_VALUES:
            named = text_of(value.child_by_field_name("name"))
            self.definitions.append(Definition(kept_index, named or exported, "function", "", False, ()))
            if named and named != exported:
                self.imports.append(export_row(exported, "", named))
        elif value.type == "class":
            if value.child_by_field_name("name") is None:
                self._class_names[value.id] = exported
            else:
                self.imports.append(export_row(exported, "", text_of(value.child_by_field_name("name"))))
        elif value.type == "object" and exported == DEFAULT:
            self.imports.extend(_object_exports(value))

    def finish(self, root: Node, kept_index: dict[int, int], class_scope: Sequence[str]
               ) -> tuple[tuple[Definition, ...], tuple[ImportBinding, ...], CallSites]:
        placed: dict[int, tuple[int, int]] = {}  # node id -> (kept index, parent steps to it)
        queries = [_CALLS] + ([_JSX_CALLS] if self.grammar != "typescript" else [])
        calls = [row for query in queries
                 for row in call_rows(capture_nodes(self.grammar, query, root, "callee"), kept_index, class_scope,
                                      lambda node, _: self._callee(node), placed)]
        calls.sort(key=lambda row: (row[0], row[1], row[2]))
        return self.symbols(calls)

    def _callee(self, node: Node) -> str | None:
        """The dotted callee, None for a call of a local value or of an HTML element."""
        dotted = dotted_name(node)
        if dotted is None:
            return None
        first = dotted.split(".", 1)[0]
        if node.type == "identifier" and node.parent is not None and node.parent.type.startswith("jsx_") \
                and not first[:1].isupper():
            return None  # <div>: an intrinsic element, not a component
        if first in ("this", "super"):
            return dotted
        return None if self.scopes.shadows(first, node.start_byte) else dotted


def _in_class_body(method: Node) -> bool:
    parent = method.parent
    return parent is not None and parent.type == "class_body"


def _bases(node: Node) -> tuple[str, ...]:
    """The class it extends, when written as a (dotted) name; `implements` adds no code."""
    for heritage in node.named_children:
        if heritage.type != "class_heritage":
            continue
        for part in heritage.named_children:
            target = part.child_by_field_name("value") if part.type == "extends_clause" else part
            if part.type == "implements_clause" or target is None:
                continue
            dotted = dotted_name(target)
            return (dotted,) if dotted is not None else ()
    return ()


def _object_exports(value: Node) -> list[ImportBinding]:
    """`module.exports = {a, b: c}`: the names the object exports and the local names behind them."""
    rows = []
    for part in value.named_children:
        if part.type == "shorthand_property_identifier":
            rows.append(export_row(text_of(part), "", text_of(part)))
        elif part.type == "pair":
            key, target = part.child_by_field_name("key"), part.child_by_field_name("value")
            if target is not None and target.type == "identifier":
                rows.append(export_row(text_of(key), "", text_of(target)))
    return rows


def dotted_name(node: Node) -> str | None:
    """'a.b.c' for a name or a member chain of names starting at a name, `this` or `super`
    (optional chaining `a?.b` reads as `a.b`); None otherwise (calls, subscripts, literals)."""
    return _CHAIN.dotted_name(node)
