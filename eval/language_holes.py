"""Line and API holes of a repository in a language other than Python (build.py keeps Python's own).

The rules follow Python's (build.py) with the language's registry entry in place of Python's
syntax:
- line holes: code lines, i.e. not blank, not starting with the language's line comment, not inside
  a comment or string that spans several lines (tree-sitter nodes of its `string_or_comment_types`);
  not the first line, not right after a blank line;
- API holes: one line each. A call site (`FileSyntax.calls`) that the language's call resolver
  (through `CallResolution`) resolves to a definition in another file of the repository, not
  nested in a function, whose statement (the call site's kept node) lies on one line holding the
  callee's last name. Python's API holes may span several lines (the whole call); these do not,
  because a brace language's statement can span a whole block.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from repomem.config import GraphConfig
from repomem.evaluation.holes import CalledDefinition, Hole, PythonFile
from repomem.index.calls import CallResolution
from repomem.languages.language import Language
from repomem.languages.parsed import Definition, FileSyntax
from repomem.languages.syntax import extract_syntax
from repomem.languages.treesitter import Node, parse

# Callees are dotted in some languages and `a::b` or `a->b` in others: the last name is what follows
# the last character that cannot be part of a name.
_NAME_SEPARATORS = re.compile(r"[^\w$]+")


def string_or_comment_lines(file: PythonFile, language: Language) -> set[int]:
    """0-based lines that are comment or string text rather than code.

    Of a node of the language's string or comment types: the lines after its first; its first line
    too when nothing but indentation precedes it there and it is a comment (`/* ...`, `/** doc`) or
    spans several lines (a raw string opening the line), but not `x := \\`...`.
    """
    root = parse(language.name, file.text.encode("utf-8")).root_node
    types = language.string_or_comment_types
    inside: set[int] = set()
    stack: list[Node] = [root]
    while stack:
        node = stack.pop()
        if node.type not in types:
            stack.extend(node.children)
            continue
        # Not descended into: a string's fragments lie on the lines already counted.
        first, last = node.start_point[0], node.end_point[0]
        inside.update(range(first + 1, last + 1))
        if first < len(file.lines) and (first != last or "comment" in node.type):
            before = file.lines[first].encode("utf-8")[: node.start_point[1]]
            if not before.strip():
                inside.add(first)
    return inside


def language_line_holes(file: PythonFile, language: Language) -> list[Hole]:
    """Eligible line holes of one file, by line (the module docstring gives the rule)."""
    not_code = string_or_comment_lines(file, language)
    comment = language.line_comment
    lines = file.lines
    holes: list[Hole] = []
    for lineno in range(1, len(lines)):
        code = lines[lineno].strip()
        if not code or code.startswith(comment) or not lines[lineno - 1].strip() or lineno in not_code:
            continue
        holes.append(Hole(file, lineno, lineno))
    return holes


def last_name(callee: str) -> str:
    return _NAME_SEPARATORS.split(callee.strip())[-1]


def language_api_holes(files: Sequence[PythonFile], language: Language, graph: GraphConfig = GraphConfig()
                       ) -> list[Hole]:
    """API holes of a repository, by path and line; one per line (the first call edge leaving the
    line, in the resolver's edge order, names the definition)."""
    syntaxes = [extract_syntax(file.path, language.name, file.text, "statement") for file in files]
    resolution = CallResolution(syntaxes, graph)
    definitions_at = [_definitions_by_node(syntax) for syntax in syntaxes]
    holes: list[Hole] = []
    for file_id, file in enumerate(files):
        syntax = syntaxes[file_id]
        callee_names: dict[tuple[int, int], set[str]] = {}
        for node, hops, callee, _ in syntax.calls.rows():
            callee_names.setdefault((node, hops), set()).add(last_name(callee))
        by_line: dict[int, Hole] = {}
        for edge in resolution.resolve_file(file_id):
            line = int(syntax.start_line[edge.source_node])
            if edge.target_file == file_id or line in by_line or line != int(syntax.end_line[edge.source_node]):
                continue
            target_syntax = syntaxes[edge.target_file]
            definition = definitions_at[edge.target_file].get(edge.target_node)
            if definition is None or definition.in_function:  # nested functions are no repository API
                continue
            names = callee_names.get((edge.source_node, edge.hops), set())
            called = _called_as(definition, target_syntax, names)
            if called is None or not re.search(rf"(?<![\w$]){re.escape(last_name(called.name))}(?![\w$])",
                                               file.lines[line]):
                continue
            by_line[line] = Hole(file, line, line, CalledDefinition(
                files[edge.target_file].path, int(target_syntax.start_line[called.node]), called.name, called.kind))
        holes.extend(by_line[line] for line in sorted(by_line))
    return holes


def _definitions_by_node(syntax: FileSyntax) -> dict[int, Definition]:
    found: dict[int, Definition] = {}
    for definition in syntax.definitions:
        found.setdefault(definition.node, definition)
    return found


def _called_as(definition: Definition, syntax: FileSyntax, callee_names: set[str]) -> Definition | None:
    """The definition the call names: itself when a callee at the call site ends with its name;
    its class when the callee names the class of a constructor (`new Client(...)` reaching
    `constructor`); None when no callee there names either (the edge came from another call)."""
    if definition.name in callee_names:
        return definition
    owner_name = definition.scope.rsplit(".", 1)[-1] if definition.scope else ""
    if owner_name and owner_name in callee_names:
        for candidate in syntax.definitions:
            qualified = f"{candidate.scope}.{candidate.name}" if candidate.scope else candidate.name
            if candidate.kind == "class" and qualified == definition.scope and not candidate.in_function:
                return candidate
    return None
