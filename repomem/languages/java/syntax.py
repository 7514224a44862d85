"""Java's symbols: definitions, import bindings and call sites, collected during the syntax walk.

- Definitions: classes, interfaces, enums, records and annotation types as "class" (nested ones
  scoped by the qualified outer class, `extends` / `implements` types as bases, the superclass
  first); methods and constructors as "function" scoped by their class. Members of anonymous
  classes count as inside a function (no name reaches them).
- Imports: the file's `package a.b;` travels as a binding whose local name is PACKAGE_MARK;
  `import a.b.C;` binds C (module a.b, name C); `import static a.b.C.m;` binds m (module a.b.C);
  `import a.b.*;` and `import static a.b.C.*;` have the name WILDCARD and the module's last
  element as local name (the word names in scope look for in the import line).
- Calls: `m()`, `this.m()`, `super.m()`, `C.m()` and `a.b.C.m()`, `new C()` (written NEW + "C"),
  method references `C::m` / `C::new`. A call through a local, a parameter or a field is written
  with that name's declared type (`store.get()` with `Store store` becomes `Store.get`); a value
  of no usable type (a primitive, an array, a lambda parameter) gives no call site, so a local
  named like a class never reaches the class.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from repomem.languages.java.locals import DECLARING_TYPES, ValueNames, type_name
from repomem.languages.parsed import CallSites, Definition, ImportBinding
from repomem.languages.symbol_scaffold import CollectedSymbols, MemberChain, call_rows
from repomem.languages.treesitter import Node, capture_nodes, text_of

LANGUAGE_NAME = "java"  # tree-sitter-language-pack grammar
PACKAGE_MARK = "@package"  # local name of the binding that carries the package declaration
WILDCARD = "*"  # name of an on-demand import's binding
NEW = "new "  # prefix of an instance creation's callee
CLASS_TYPES = frozenset({"class_declaration", "interface_declaration", "enum_declaration", "record_declaration",
                         "annotation_type_declaration"})
METHOD_TYPES = frozenset({"method_declaration", "constructor_declaration", "compact_constructor_declaration"})
CALL_QUERY = """
(method_invocation) @call
(object_creation_expression) @call
(method_reference) @call
"""
# `a.b.c`: an identifier or a field-access chain of names.
_CHAIN = MemberChain(re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*"), "field_access", "object", "field",
                     frozenset({"identifier"}), frozenset({"identifier"}))


class JavaSymbols(CollectedSymbols):
    """One file's definitions, imports and value names as the walk meets them, then its calls."""

    watched_types = frozenset({"package_declaration", "import_declaration", "object_creation_expression",
                               *CLASS_TYPES, *METHOD_TYPES, *DECLARING_TYPES})

    def __init__(self) -> None:
        super().__init__()
        self.values = ValueNames()

    def enter(self, node: Node, kept_index: int, scope: str, in_function: bool) -> tuple[str, bool]:
        node_type = node.type
        if node_type in CLASS_TYPES:
            name = text_of(node.child_by_field_name("name"))
            if not name:
                return scope, in_function
            self.definitions.append(Definition(kept_index, name, "class", scope, in_function, _bases(node)))
            return (f"{scope}.{name}" if scope else name), in_function
        if node_type in METHOD_TYPES:
            name = text_of(node.child_by_field_name("name"))
            if name:
                self.definitions.append(Definition(kept_index, name, "function", scope, in_function, ()))
            return scope, True
        if node_type == "object_creation_expression":
            # An anonymous class body: its methods are reached through the value, never by name.
            has_body = any(child.type == "class_body" for child in node.named_children)
            return scope, in_function or has_body
        if node_type == "package_declaration":
            package = next((c for c in node.named_children if c.type in ("identifier", "scoped_identifier")), None)
            if package is not None:
                self.imports.append(ImportBinding(PACKAGE_MARK, _dotted_text(package), ""))
        elif node_type == "import_declaration":
            binding = _import(node)
            if binding is not None:
                self.imports.append(binding)
        else:
            self.values.add(node, scope)
            if node_type == "lambda_expression":
                return scope, True
        return scope, in_function

    def finish(self, root: Node, kept_index: dict[int, int], class_scope: Sequence[str]
               ) -> tuple[tuple[Definition, ...], tuple[ImportBinding, ...], CallSites]:
        # The capture is the whole call: its own kept node places it.
        return self.symbols(call_rows(capture_nodes(LANGUAGE_NAME, CALL_QUERY, root, "call"), kept_index,
                                      class_scope, self._callee, {}, anchor=lambda call: call))

    def _callee(self, call: Node, enclosing: str) -> str | None:
        """The dotted callee as the resolver reads it; None when the call reaches nothing it can name."""
        if call.type == "object_creation_expression":
            created = type_name(call.child_by_field_name("type"))
            return NEW + created if created else None
        if call.type == "method_reference":
            parts = call.named_children
            if not parts:
                return None
            if call.children[-1].type == "new":  # `C::new`
                created = type_name(parts[0]) or (dotted_name(parts[0]) or "")
                return NEW + created if created else None
            if len(parts) < 2 or parts[-1].type != "identifier":
                return None
            return self._member_call(parts[0], text_of(parts[-1]), call.start_byte, enclosing)
        name = text_of(call.child_by_field_name("name"))
        receiver = call.child_by_field_name("object")
        if receiver is None:
            return name or None
        return self._member_call(receiver, name, call.start_byte, enclosing) if name else None

    def _member_call(self, receiver: Node, name: str, at_byte: int, enclosing: str) -> str | None:
        receiver_type = receiver.type
        if receiver_type in ("this", "super"):
            return f"{receiver_type}.{name}"
        if receiver_type == "field_access":
            owner, field = receiver.child_by_field_name("object"), receiver.child_by_field_name("field")
            if owner is not None and field is not None and owner.type == "this":  # `this.f.m()`
                declared = self.values.field(text_of(field), enclosing, innermost_only=True)
                return f"{declared}.{name}" if declared else None
            if owner is not None and field is not None and field.type == "this":  # `Outer.this.m()`
                return f"{text_of(owner)}.{name}" if owner.type == "identifier" else None
        dotted = dotted_name(receiver)
        if dotted is None:
            return None  # a call on a call's result, a literal, an array element, ...
        first, _, rest = dotted.partition(".")
        local = self.values.local(first, at_byte)
        declared = local.type_name if local is not None else self.values.field(first, enclosing)
        if declared is None:
            return f"{dotted}.{name}"  # a class (simple or qualified) or a name nothing declares
        return f"{declared}.{name}" if declared and not rest else None


def _dotted_text(node: Node) -> str:
    return "".join(text_of(node).split())


def dotted_name(node: Node) -> str | None:
    """'a.b.c' for an identifier or a field-access chain of names; None otherwise."""
    return _CHAIN.dotted_name(node)


def _type_list(holder: Node | None) -> list[str]:
    """Class types named by a superclass / super_interfaces / extends_interfaces node."""
    if holder is None:
        return []
    found: list[str] = []
    for child in holder.named_children:
        if child.type == "type_list":
            found.extend(type_name(item) for item in child.named_children)
        else:
            found.append(type_name(child))
    return [name for name in found if name]


def _bases(node: Node) -> tuple[str, ...]:
    """The superclass, then the interfaces (their default methods are inherited too)."""
    bases = _type_list(node.child_by_field_name("superclass"))
    bases += _type_list(node.child_by_field_name("interfaces"))
    bases += _type_list(next((c for c in node.named_children if c.type == "extends_interfaces"), None))
    return tuple(bases)


def _import(node: Node) -> ImportBinding | None:
    path_node = next((c for c in node.named_children if c.type in ("identifier", "scoped_identifier")), None)
    if path_node is None:
        return None
    path = _dotted_text(path_node)
    if any(child.type == "asterisk" for child in node.named_children):
        return ImportBinding(path.rpartition(".")[2], path, WILDCARD)
    module, _, name = path.rpartition(".")
    return ImportBinding(name, module, name) if module and name else None
