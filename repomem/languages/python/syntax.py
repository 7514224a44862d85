"""Python's symbols: definitions, import bindings and call sites, collected during the syntax walk."""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

from repomem.languages.call_reuse import CallReuse
from repomem.languages.parsed import CallSites, Definition, ImportBinding
from repomem.languages.treesitter import Node, capture_nodes, nearest_kept

LANGUAGE_NAME = "python"  # tree-sitter-language-pack grammar
CLAUSE_TYPES = frozenset({
    "elif_clause", "else_clause", "except_clause", "except_group_clause", "finally_clause",
    "case_clause",
})
STRING_OR_COMMENT_TYPES = frozenset({"string", "string_content", "comment", "concatenated_string"})
CALL_QUERY = "(call function: [(identifier) (attribute)] @callee)"


class PythonSymbols:
    """One file's definitions and imports as the walk meets them, then its calls (SymbolCollector).

    Its call sites can be taken from the file's last version (`finish`'s `reuse`): a keystroke
    changes the calls of one statement, and the call query over a whole large file was most of
    an edit's analysis (docs/measurements.md#an-edit)."""

    watched_types = frozenset({"function_definition", "class_definition", "import_statement",
                               "import_from_statement"})
    reuses_calls = True
    callee_types = frozenset({"identifier", "attribute"})  # what CALL_QUERY captures, and its parts

    def __init__(self) -> None:
        self.definitions: list[Definition] = []
        self.imports: list[ImportBinding] = []
        # After `finish`: each call site's callee start byte and its row, in order (`KnownCalls`).
        self.call_starts: list[int] = []
        self.call_rows: list[tuple[int, int, str, str]] = []

    def enter(self, node: Node, kept_index: int, scope: str, in_function: bool) -> tuple[str, bool]:
        node_type = node.type
        if node_type in ("function_definition", "class_definition"):
            definition = _definition(node, kept_index, scope, in_function)
            if definition is not None:
                self.definitions.append(definition)
                if node_type == "class_definition":
                    return (f"{scope}.{definition.name}" if scope else definition.name), in_function
                return scope, True
        elif node_type in ("import_statement", "import_from_statement"):
            self.imports.extend(_imports(node))
        return scope, in_function

    def finish(self, root: Node, kept_index: dict[int, int], class_scope: Sequence[str],
               reuse: CallReuse | None = None) -> tuple[tuple[Definition, ...], tuple[ImportBinding, ...], CallSites]:
        """`reuse`: the last version's call sites and the bytes of this one that hold every call
        site that may differ (see `CallReuse`); the others are the last version's rows."""
        calls: list[tuple[int, int, str, str]] = []
        starts: list[int] = []
        # Each expression node's nearest kept ancestor and its distance in parent steps, found
        # once per node: tree-sitter's `parent` walks down from the root (cost ~ depth), so walking
        # every call up to its statement would cost calls * depth**2 on deeply nested expressions
        # (a 9 KB `f(f(...))` 3,000 deep took minutes); with the memo each call stops at the first
        # ancestor already placed.
        placed: dict[int, tuple[int, int]] = {}  # node id -> (kept index, parent steps to it)
        span = None if reuse is None else (reuse.first, reuse.end)
        for callee in capture_nodes(LANGUAGE_NAME, CALL_QUERY, root, "callee", span):
            if span is not None and not span[0] <= callee.start_byte < span[1]:
                continue  # a match that only meets the span: its call site is the last version's
            dotted = dotted_name(callee)
            if dotted is None:
                continue
            owner_index, hops = nearest_kept(callee.parent, kept_index, placed)
            calls.append((owner_index, hops, dotted, class_scope[owner_index]))
            starts.append(callee.start_byte)
        if reuse is not None:
            known = reuse.known
            before = bisect.bisect_left(known.starts, reuse.first)
            after = bisect.bisect_left(known.starts, reuse.end - reuse.delta)
            moved_from, shift = reuse.moved_from, reuse.shift
            calls = [*known.rows[:before], *calls,
                     *((owner + shift if owner >= moved_from else owner, hops, callee, scope)
                       for owner, hops, callee, scope in known.rows[after:])]
            starts = [*known.starts[:before], *starts, *(start + reuse.delta for start in known.starts[after:])]
        self.call_starts, self.call_rows = starts, calls
        return tuple(self.definitions), tuple(self.imports), CallSites.of_rows(calls)


def _text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", errors="replace")


MAX_DOTTED_PARTS = 32  # longer attribute chains are not resolvable calls anyway


_PLAIN_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def dotted_name(node: Node) -> str | None:
    """'a.b.c' for identifier / attribute chains of identifiers, else None (iterative: chains
    can be thousands of attributes long in generated code)."""
    if node.type in ("identifier", "attribute"):
        # Most callees are written plainly (`self.save`): their text is the answer, without a walk
        # down the chain. Text with anything else in it (spaces, calls, subscripts) is walked.
        text = node.text.decode("utf-8", errors="replace") if node.text is not None else ""
        if _PLAIN_DOTTED.fullmatch(text) and text.count(".") <= MAX_DOTTED_PARTS:
            return text
    parts: list[str] = []
    while node.type == "attribute":
        attr = node.child_by_field_name("attribute")
        obj = node.child_by_field_name("object")
        if obj is None or attr is None or len(parts) >= MAX_DOTTED_PARTS:
            return None
        parts.append(_text(attr))
        node = obj
    if node.type != "identifier":
        return None
    parts.append(_text(node))
    return ".".join(reversed(parts))


def _definition(node: Node, index: int, scope: str, inside_function: bool) -> Definition | None:
    name = _text(node.child_by_field_name("name"))
    if not name:
        return None
    if node.type == "class_definition":
        bases: list[str] = []
        superclasses = node.child_by_field_name("superclasses")
        if superclasses is not None:
            for argument in superclasses.named_children:
                dotted = dotted_name(argument)
                if dotted is not None:
                    bases.append(dotted)
        return Definition(index, name, "class", scope, inside_function, tuple(bases))
    return Definition(index, name, "function", scope, inside_function, ())


def _imports(node: Node) -> list[ImportBinding]:
    bindings: list[ImportBinding] = []
    if node.type == "import_statement":
        for item in node.children_by_field_name("name"):
            if item.type == "aliased_import":
                module = _text(item.child_by_field_name("name"))
                bindings.append(ImportBinding(_text(item.child_by_field_name("alias")), module, ""))
            else:
                module = _text(item)
                bindings.append(ImportBinding(module, module, ""))
        return bindings
    module = _text(node.child_by_field_name("module_name")).replace(" ", "")
    for item in node.children_by_field_name("name"):
        if item.type == "aliased_import":
            name = _text(item.child_by_field_name("name"))
            bindings.append(ImportBinding(_text(item.child_by_field_name("alias")), module, name))
        else:
            name = _text(item)
            bindings.append(ImportBinding(name, module, name))
    return bindings
