"""One file's syntax: the graph nodes its tree contributes, and (Python) its symbols.

Granularity (DESIGN.md section 2 leaves it open):
- "statement": the root, every statement / definition / clause and the blocks holding them.
  In Python every ancestor of a statement is such a node, so tree strengths between kept nodes
  equal those of the full named tree; expressions are contracted into their statement, and a
  call edge leaving an expression `h` edges deep weighs call_weight * syntax_weight**h.
- "named": every named node, the FragRel paper's reading (about 6x more nodes).
Either way the kept nodes form a tree (each kept node's parent is its nearest kept ancestor).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from repomem.treesitter import Node, capture_nodes, parse

# Node types whose named children are statements, per grammar family.
_CONTAINERS = frozenset({
    "module", "block", "program", "source_file", "translation_unit", "statement_block",
    "compound_statement", "class_body", "declaration_list", "field_declaration_list",
    "interface_body", "enum_body", "switch_body", "switch_block", "body_statement", "chunk",
    "template_body", "function_body", "namespace_body", "declaration_block",
})
_STATEMENT_SUFFIXES = ("_statement", "_definition", "_declaration", "_item")
_PYTHON_CLAUSES = frozenset({
    "elif_clause", "else_clause", "except_clause", "except_group_clause", "finally_clause",
    "case_clause",
})
_NEVER_KEPT = frozenset({"comment", "line_comment", "block_comment", "ERROR"})
_PYTHON_CALL_QUERY = "(call function: [(identifier) (attribute)] @callee)"


# Symbols are NamedTuples, not frozen dataclasses: an index of Django holds 220k of them and
# loading builds them all (a frozen dataclass constructs about 5x slower).
class Definition(NamedTuple):
    node: int  # file-local node index of the def / class statement
    name: str
    kind: str  # "function" | "class"
    scope: str  # "" at module level, "Outer" / "Outer.Inner" for methods and nested classes
    in_function: bool  # defined inside a function body (not reachable by name from outside)
    bases: tuple[str, ...]  # dotted base-class expressions (classes only)


class ImportBinding(NamedTuple):
    local: str  # the dotted name this binding makes available, e.g. "np" or "os.path"
    module: str  # imported module, relative ones keep their leading dots, e.g. "..pkg.mod"
    name: str  # "" for `import module`; else the imported attribute of `module`


class CallSite(NamedTuple):
    node: int  # file-local index of the innermost kept node holding the call
    hops: int  # syntax-tree edges from that kept node down to the call node
    callee: str  # dotted callee expression, e.g. "f", "self.save", "models.Model"
    enclosing_class: str  # qualified name of the nearest enclosing class, "" if none


@dataclass(frozen=True)
class FileSyntax:
    """Kept syntax nodes of one file, in pre-order (index 0 is the root).

    Arrays have shape (n_nodes,) unless noted; lines are 0-based and inclusive.
    """

    path: str
    language: str
    parent: np.ndarray  # int32, index of the nearest kept ancestor, -1 for the root
    start_line: np.ndarray  # int32
    end_line: np.ndarray  # int32, inclusive
    length: np.ndarray  # int32, node text length in bytes
    line_chars: np.ndarray  # int32, shape (n_lines,): non-whitespace characters per line
    definitions: tuple[Definition, ...] = ()
    imports: tuple[ImportBinding, ...] = ()
    calls: tuple[CallSite, ...] = ()

    @property
    def n_nodes(self) -> int:
        return int(self.parent.shape[0])

    @property
    def n_lines(self) -> int:
        return int(self.line_chars.shape[0])


def _is_kept(node: Node, parent_type: str, granularity: str, python: bool) -> bool:
    node_type = node.type
    if node_type in _NEVER_KEPT:
        return False
    if granularity == "named":
        return True
    if parent_type in _CONTAINERS or node_type in _CONTAINERS:
        return True
    if python:
        return node_type in _PYTHON_CLAUSES or node_type.endswith(("_definition", "_statement"))
    return node_type.endswith(_STATEMENT_SUFFIXES)


def _descend(node: Node, kept: bool, granularity: str, python: bool) -> bool:
    """Whether kept nodes can lie below `node`; Python statements never hide inside expressions."""
    if granularity == "named" or not python:
        return True
    return kept or node.type in _CONTAINERS or node.type == "ERROR"


def _end_row(node: Node) -> int:
    row, column = node.end_point
    start_row = node.start_point[0]
    return row - 1 if column == 0 and row > start_row else row


def split_lines(text: str) -> list[str]:
    """Lines as editors and RepoCoder count them: a final newline does not start another line."""
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def _line_chars(text: str) -> np.ndarray:
    """Characters of each line without its indentation and trailing blanks, shape (n_lines,)."""
    lines = split_lines(text)
    return np.fromiter((len(line.strip()) for line in lines), dtype=np.int32, count=len(lines))


def extract_syntax(path: str, language: str, text: str, granularity: str) -> FileSyntax:
    """Parse one file and collect its kept nodes (and Python symbols)."""
    source = text.encode("utf-8")
    tree = parse(language, source)
    python = language == "python"
    root = tree.root_node

    parents: list[int] = [-1]
    starts: list[int] = [0]
    ends: list[int] = [max(len(split_lines(text)) - 1, 0)]
    lengths: list[int] = [len(source)]
    kept_index: dict[int, int] = {root.id: 0}
    definitions: list[Definition] = []
    imports: list[ImportBinding] = []
    # Class scope of every kept node, to resolve self.m() later (only tracked for Python).
    class_scope: list[str] = [""]
    in_function: list[bool] = [False]

    # Explicit stack: (node, kept parent index, parent type, class scope, inside a function)
    stack: list[tuple[Node, int, str, str, bool]] = [
        (child, 0, root.type, "", False) for child in reversed(root.named_children)
    ]
    while stack:
        node, kept_parent, parent_type, scope, inside_function = stack.pop()
        kept = _is_kept(node, parent_type, granularity, python)
        own_index = kept_parent
        child_scope, child_in_function = scope, inside_function
        if kept:
            own_index = len(parents)
            parents.append(kept_parent)
            starts.append(node.start_point[0])
            ends.append(_end_row(node))
            lengths.append(node.end_byte - node.start_byte)
            kept_index[node.id] = own_index
            class_scope.append(scope)
            in_function.append(inside_function)
        if python:
            node_type = node.type
            if node_type in ("function_definition", "class_definition"):
                definition = _python_definition(node, own_index, scope, inside_function)
                if definition is not None:
                    definitions.append(definition)
                    if node_type == "class_definition":
                        child_scope = f"{scope}.{definition.name}" if scope else definition.name
                    else:
                        child_in_function = True
            elif node_type in ("import_statement", "import_from_statement"):
                imports.extend(_python_imports(node))
        if _descend(node, kept, granularity, python):
            node_type = node.type
            for child in reversed(node.named_children):
                stack.append((child, own_index, node_type, child_scope, child_in_function))

    calls: list[CallSite] = []
    if python:
        for callee in capture_nodes(language, _PYTHON_CALL_QUERY, root, "callee"):
            dotted = _dotted_name(callee)
            if dotted is None:
                continue
            owner = callee.parent
            hops = 0
            while owner is not None and owner.id not in kept_index:
                owner = owner.parent
                hops += 1
            owner_index = kept_index[owner.id] if owner is not None else 0
            calls.append(CallSite(owner_index, hops, dotted, class_scope[owner_index]))

    return FileSyntax(
        path=path,
        language=language,
        parent=np.asarray(parents, dtype=np.int32),
        start_line=np.asarray(starts, dtype=np.int32),
        end_line=np.asarray(ends, dtype=np.int32),
        length=np.asarray(lengths, dtype=np.int32),
        line_chars=_line_chars(text),
        definitions=tuple(definitions),
        imports=tuple(imports),
        calls=tuple(calls),
    )


def _text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", errors="replace")


MAX_DOTTED_PARTS = 32  # longer attribute chains are not resolvable calls anyway


def _dotted_name(node: Node) -> str | None:
    """'a.b.c' for identifier / attribute chains of identifiers, else None (iterative: chains
    can be thousands of attributes long in generated code)."""
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


def _python_definition(node: Node, index: int, scope: str, inside_function: bool) -> Definition | None:
    name = _text(node.child_by_field_name("name"))
    if not name:
        return None
    if node.type == "class_definition":
        bases: list[str] = []
        superclasses = node.child_by_field_name("superclasses")
        if superclasses is not None:
            for argument in superclasses.named_children:
                dotted = _dotted_name(argument)
                if dotted is not None:
                    bases.append(dotted)
        return Definition(index, name, "class", scope, inside_function, tuple(bases))
    return Definition(index, name, "function", scope, inside_function, ())


def _python_imports(node: Node) -> list[ImportBinding]:
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
