"""`use` declarations (and `extern crate`) as import bindings.

A binding is ImportBinding(local, module, name): `use crate::a::{f, g as h};` gives
("f", "crate::a", "f") and ("h", "crate::a", "g"); `use crate::a::{self};` gives ("a", "crate", "a");
`use super::*;` gives ("super", "super", "*"): a glob, named by its module's last segment (the word
its statement shows, which names in scope look for) and marked by name "*". A path written with a
leading `::` (another crate, explicitly) keeps an empty first segment: "::serde". Inside an inline
`mod m { ... }` the local carries the module's prefix, "m::f", as definitions' scopes do (syntax.py).
"""

from __future__ import annotations

from repomem.languages.parsed import ImportBinding
from repomem.languages.treesitter import Node, text_of

GLOB = "*"
PATH_SEPARATOR = "::"
_SEGMENT_TYPES = frozenset({"identifier", "crate", "self", "super", "metavariable"})
MAX_SEGMENTS = 32


def path_segments(node: Node | None) -> list[str] | None:
    """['crate', 'a', 'f'] for a path node, with '' first for a leading `::`; None for what is no
    plain path (a macro's metavariable path, generic arguments are handled by the caller)."""
    segments: list[str] = []
    while node is not None and node.type == "scoped_identifier" and len(segments) <= MAX_SEGMENTS:
        segments.append(text_of(node.child_by_field_name("name")))
        node = node.child_by_field_name("path")
    if node is None:
        segments.append("")  # `::a::b`
    elif node.type in _SEGMENT_TYPES:
        segments.append(text_of(node))
    else:
        return None
    return segments[::-1] if len(segments) <= MAX_SEGMENTS else None


def _binding(prefix: str, local: str, path: list[str]) -> ImportBinding | None:
    if not path or not local or local == "_" or not path[-1]:
        return None
    return ImportBinding(prefix + local, PATH_SEPARATOR.join(path[:-1]), path[-1])


def use_bindings(declaration: Node, prefix: str) -> list[ImportBinding]:
    """The bindings of one `use` declaration inside the module that `prefix` names in its file."""
    found: list[ImportBinding] = []
    stack: list[tuple[Node, list[str]]] = [(declaration.child_by_field_name("argument"), [])]
    while stack:
        node, above = stack.pop()
        if node is None:
            continue
        node_type = node.type
        if node_type in ("identifier", "scoped_identifier", "crate", "super", "metavariable"):
            path = path_segments(node)
            if path is not None:
                found.append(_binding(prefix, path[-1], above + path))
        elif node_type == "self":  # `{self}`: the module the list is in
            if above:
                found.append(_binding(prefix, above[-1], above))
        elif node_type == "use_as_clause":
            path = path_segments(node.child_by_field_name("path"))
            alias = text_of(node.child_by_field_name("alias"))
            if path is not None:
                full = above + (path if path != ["self"] else [])
                found.append(_binding(prefix, alias, full))
        elif node_type == "use_wildcard":
            inner = next((c for c in node.named_children if c.type != "use_wildcard"), None)
            path = above + (path_segments(inner) or []) if inner is not None else above
            if path:
                found.append(ImportBinding(prefix + (path[-1] or GLOB), PATH_SEPARATOR.join(path), GLOB))
        elif node_type == "scoped_use_list":
            inner_path = node.child_by_field_name("path")
            path = path_segments(inner_path) if inner_path is not None else []
            if path is not None:
                stack.append((node.child_by_field_name("list"), above + path))
        elif node_type == "use_list":
            for child in reversed(node.named_children):
                stack.append((child, above))
    return [binding for binding in found if binding is not None]


def extern_crate_binding(declaration: Node, prefix: str) -> ImportBinding | None:
    """`extern crate foo as bar;` binds `bar` to the crate `foo`, like `use foo as bar;`."""
    name = text_of(declaration.child_by_field_name("name"))
    alias = text_of(declaration.child_by_field_name("alias")) or name
    return _binding(prefix, alias, [name]) if name and name != "self" else None
