"""Rust's symbols: definitions, import bindings and call sites, collected during the syntax walk.

Scopes are Rust paths inside the file: each inline `mod m { ... }` adds "m::", and the `impl` or
`trait` a function sits in adds its type's name. So a method of `Store` has scope "Store", one in
`mod tests { impl Store { .. } }` "tests::Store", a free function in `mod tests` "tests::", one at
the file's top "". Call sites carry the same string as their enclosing class (module prefix, then
the impl's type: what `Self` and the module's names mean there).

- Definitions: `fn` (free, in `impl` blocks including trait impls, in traits, in `extern` blocks)
  as "function"; `struct`, `enum`, `union`, `trait` and `type` aliases as "class". A trait's bases
  are its supertraits; an alias keeps its target as its one base, marked with ALIAS_MARK, so the
  resolver follows it like a re-export.
- Imports: uses.py.
- Calls: `f()`, `a::f()`, `crate::a::f::<T>()`, `Type::new()`, `<T as Trait>::m()` and
  `self.m()` (written "Self::m"); the same shapes inside macro arguments (`assert_eq!(f(1), 2)`),
  read from the macro's tokens. A plain name bound by a local (parameter, `let`, closure, pattern,
  nested fn) calls the local and is left out; method calls on other receivers are left out too
  (no type inference).
"""

from __future__ import annotations

from collections.abc import Sequence

from repomem.languages.parsed import CallSites, Definition, ImportBinding
from repomem.languages.rust.locals import BINDING_TYPES, LocalNames
from repomem.languages.rust.uses import MAX_SEGMENTS, PATH_SEPARATOR, extern_crate_binding, path_segments, use_bindings
from repomem.languages.symbol_scaffold import CollectedSymbols, call_rows
from repomem.languages.treesitter import Node, capture_nodes, nearest_kept, text_of

LANGUAGE_NAME = "rust"  # tree-sitter-language-pack grammar
ALIAS_MARK = "="  # a base starting with it is a type alias's target
SELF_TYPE = "Self"
CALL_QUERY = """
(call_expression function: [(identifier) (scoped_identifier) (field_expression) (generic_function)] @callee)
(macro_invocation (token_tree) @tokens)
"""
_FUNCTION_TYPES = frozenset({"function_item", "function_signature_item"})
_TYPE_TYPES = frozenset({"struct_item", "enum_item", "union_item", "trait_item", "type_item"})
_PATH_TOKENS = frozenset({"identifier", "crate", "self", "super"})


def split_scope(scope: str) -> tuple[str, str]:
    """(inline module prefix, type name) of a scope or enclosing-class string: "a::b::S" ->
    ("a::b::", "S"), "a::" -> ("a::", ""), "S" -> ("", "S")."""
    cut = scope.rfind(PATH_SEPARATOR)
    return (scope[:cut + 2], scope[cut + 2:]) if cut >= 0 else ("", scope)


def type_path(node: Node | None, depth: int = 0) -> str:
    """`a::S` for a type (`S`, `a::S`, `S<T>`, `&mut S`, `a::S<T>`), "" for what names no type path.
    `depth`: the path parts read already; a path of more than MAX_SEGMENTS names nothing (as in
    `path_segments`), so a generated `a::a::...::f()` thousands deep is no recursion error."""
    if depth > MAX_SEGMENTS:
        return ""
    while node is not None and node.type in ("generic_type", "reference_type", "pointer_type"):
        node = node.child_by_field_name("type")
    if node is None:
        return ""
    if node.type in ("type_identifier", "identifier"):
        return text_of(node)
    if node.type == "scoped_type_identifier":
        path = _expression_path(node.child_by_field_name("path"), depth + 1)
        name = text_of(node.child_by_field_name("name"))
        return f"{path}{PATH_SEPARATOR}{name}" if path and name else ""
    return ""


def _expression_path(node: Node | None, depth: int = 0) -> str:
    """The path a callee's or type's path part spells, generic arguments dropped ("" for none, and
    for a path of more than MAX_SEGMENTS parts: `depth`, the parts read already)."""
    if node is None or depth > MAX_SEGMENTS:
        return ""
    if node.type in ("generic_type", "bracketed_type"):
        inner = node.named_children[0] if node.type == "bracketed_type" and node.named_children else node
        if inner.type == "qualified_type":  # <S as Trait>: the type's own impls hold the method
            inner = inner.child_by_field_name("type")
        return type_path(inner, depth)
    if node.type == "scoped_identifier":
        inner_path = node.child_by_field_name("path")
        name = text_of(node.child_by_field_name("name"))
        if inner_path is None:
            return PATH_SEPARATOR + name
        head = _expression_path(inner_path, depth + 1)
        return f"{head}{PATH_SEPARATOR}{name}" if head and name else ""
    if node.type == "scoped_type_identifier":
        return type_path(node, depth)
    segments = path_segments(node)
    return PATH_SEPARATOR.join(segments) if segments else ""


class RustSymbols(CollectedSymbols):
    """One file's definitions, imports and local names as the walk meets them, then its calls."""

    watched_types = frozenset({*_FUNCTION_TYPES, *_TYPE_TYPES, "impl_item", "mod_item", "use_declaration",
                               "extern_crate_declaration", *BINDING_TYPES})

    def __init__(self) -> None:
        super().__init__()
        self.locals = LocalNames()

    def enter(self, node: Node, kept_index: int, scope: str, in_function: bool) -> tuple[str, bool]:
        node_type = node.type
        if node_type in _FUNCTION_TYPES:
            self.locals.add_function(node, in_function)
            name = text_of(node.child_by_field_name("name"))
            if name:
                self.definitions.append(Definition(kept_index, name, "function", scope, in_function, ()))
            return scope, True
        prefix = split_scope(scope)[0]
        if node_type in _TYPE_TYPES:
            name = text_of(node.child_by_field_name("name"))
            if name:
                self.definitions.append(Definition(kept_index, name, "class", prefix, in_function, _bases(node)))
            return (prefix + name if node_type == "trait_item" else scope), in_function
        if node_type == "impl_item":
            return prefix + type_path(node.child_by_field_name("type")).rpartition(PATH_SEPARATOR)[2], in_function
        if node_type == "mod_item":
            return prefix + text_of(node.child_by_field_name("name")) + PATH_SEPARATOR, in_function
        if node_type == "use_declaration":
            self.imports.extend(use_bindings(node, prefix))
        elif node_type == "extern_crate_declaration":
            binding = extern_crate_binding(node, prefix)
            if binding is not None:
                self.imports.append(binding)
        else:
            self.locals.add_binding(node)
        return scope, in_function

    def finish(self, root: Node, kept_index: dict[int, int], class_scope: Sequence[str]
               ) -> tuple[tuple[Definition, ...], tuple[ImportBinding, ...], CallSites]:
        placed: dict[int, tuple[int, int]] = {}  # node id -> (kept index, parent steps to it)
        calls = call_rows(capture_nodes(LANGUAGE_NAME, CALL_QUERY, root, "callee"), kept_index, class_scope,
                          lambda node, _: self._callee(node), placed)
        for tokens in capture_nodes(LANGUAGE_NAME, CALL_QUERY, root, "tokens"):
            if tokens.parent is None or tokens.parent.type != "macro_invocation":
                continue
            callees = self._token_callees(tokens)
            if callees:
                owner_index, hops = nearest_kept(tokens.parent, kept_index, placed)
                calls.extend((owner_index, hops, callee, class_scope[owner_index]) for callee in callees)
        return self.symbols(calls)

    def _callee(self, node: Node) -> str | None:
        """The callee path as the resolver reads it; None for a local's or another value's call."""
        if node.type == "generic_function":
            node = node.child_by_field_name("function")
            if node is None:
                return None
        if node.type == "identifier":
            name = text_of(node)
            return None if self.locals.is_local(name, node.start_byte) else name
        if node.type == "field_expression":
            receiver, field = node.child_by_field_name("value"), node.child_by_field_name("field")
            if receiver is None or receiver.type != "self" or field is None or field.type != "field_identifier":
                return None
            return SELF_TYPE + PATH_SEPARATOR + text_of(field)
        if node.type == "scoped_identifier":
            return _expression_path(node) or None
        return None

    def _token_callees(self, tokens: Node) -> list[str]:
        """Calls written in a macro's arguments: a path or `self.name` right before a `( ... )`
        token tree; nested token trees too. Not after `fn` (a definition) or another `.` receiver."""
        found: list[str] = []
        stack = [tokens]
        while stack:
            tree = stack.pop()
            children = tree.children
            for index, child in enumerate(children):
                if child.type != "token_tree" or (index > 0 and children[index - 1].type == "#"):
                    continue  # an attribute's `#[cfg(..)]` holds no calls
                stack.append(child)
                if index == 0 or child.child_count == 0 or child.children[0].type != "(":
                    continue
                callee = self._callee_before(children, index)
                if callee:
                    found.append(callee)
        return found

    def _callee_before(self, children: list[Node], end: int) -> str | None:
        segments: list[str] = []
        index = end - 1
        if children[index].type == ">":  # turbofish `f::<T>(..)`: skip to its `::<`
            depth = 0
            while index >= 0:
                depth += {">": 1, "<": -1}.get(children[index].type, 0)
                index -= 1
                if depth == 0:
                    break
            if index < 0 or children[index].type != "::":
                return None
            index -= 1
        while index >= 0 and children[index].type in _PATH_TOKENS:
            segments.append(text_of(children[index]))
            if index == 0 or children[index - 1].type != "::":
                index -= 1
                break
            index -= 2
        if not segments:
            return None
        before = children[index].type if index >= 0 else ""
        segments.reverse()
        if before == "fn":
            return None
        if before == ".":
            receiver = children[index - 1].type if index >= 1 else ""
            if len(segments) == 1 and receiver == "self" and (index < 2 or children[index - 2].type != "."):
                return SELF_TYPE + PATH_SEPARATOR + segments[0]
            return None
        if len(segments) == 1 and self.locals.is_local(segments[0], children[end].start_byte):
            return None
        if before == "::":  # `::a::f(..)`: another crate, explicitly
            segments.insert(0, "")
        return PATH_SEPARATOR.join(segments)


def _bases(node: Node) -> tuple[str, ...]:
    """A trait's supertraits, or a type alias's target (marked)."""
    if node.type == "type_item":
        target = type_path(node.child_by_field_name("type"))
        return (ALIAS_MARK + target,) if target else ()
    if node.type != "trait_item":
        return ()
    bounds = node.child_by_field_name("bounds")
    if bounds is None:
        return ()
    return tuple(path for path in map(type_path, bounds.named_children) if path)
