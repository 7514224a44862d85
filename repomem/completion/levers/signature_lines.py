"""Compact signatures of the repository functions and classes a file imports.

The names in scope (names_in_scope.py) tell a small model which function to call; on the dev set it then
named the right one more often, yet exact match did not move, because the arguments were what it
missed (docs/eval-history.md, third round). A definition's parameter names and defaults are what an
argument list is written from, and the code graph's import edges already say which definition
each imported name is. These lines put them beside the import header, one short line each:

    def _precision_recall_reduce(stat, tp, fp, tn, fn, average, multidim_average="global"): ...
    class BinaryStatScores(threshold=0.5, multidim_average="global", ignore_index=None, ...): ...

Annotations are dropped (they cost most of the tokens), defaults kept, `self`/`cls` dropped;
a class shows its `__init__`'s parameters. The definition blocks (definition_blocks.py) and the
entity memory show a definition's header lines (`signature_span`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from repomem.config import BM25Config
from repomem.index.tokens import tokenize
from repomem.languages.parsed import Definition
from repomem.retrieval.symbol_view import SymbolView

_WORD = re.compile(r"[^\W\d]\w*")  # a name in any script (in ASCII: [A-Za-z_][A-Za-z_0-9]*)
_OPENING = {"(": ")", "[": "]", "{": "}"}
_CLOSING = set(_OPENING.values())


def header_end(lines: Sequence[str], start: int, last: int) -> int:
    """Line after the header starting at `start`: through the first line whose code ends in ':'."""
    line = start
    while line <= last and not lines[line].split("#", 1)[0].rstrip().endswith(":"):
        line += 1
    return min(line + 1, last + 1)


def signature_span(lines: list[str], start: int, end: int, max_lines: int) -> tuple[int, int]:
    """[start, stop) of a definition's header (through the line ending in ':'), its docstring's
    first line and, for a class, its __init__ header when it comes early; at most max_lines lines
    (a class with __init__: twice that)."""
    last = min(end, len(lines) - 1)
    stop = header_end(lines, start, last)
    if stop <= last and lines[stop].strip().startswith(('"""', "'''", 'r"""', "r'''")):
        stop += 1
    cap = max_lines
    if lines[start].lstrip().startswith("class "):
        for number in range(stop, min(last + 1, start + 2 * max_lines)):
            if lines[number].lstrip().startswith("def __init__"):
                stop, cap = header_end(lines, number, last), 2 * max_lines
                break
    return start, max(min(stop, start + cap), start + 1)


def _top_level_split(text: str, separator: str) -> list[str]:
    """`text` split at `separator` characters outside brackets and string literals."""
    parts, depth, quote, current = [], 0, "", []
    index = 0
    while index < len(text):
        char = text[index]
        if quote:
            current.append(char)
            if char == "\\" and index + 1 < len(text):
                current.append(text[index + 1])
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
            current.append(char)
        elif char in _OPENING:
            depth += 1
            current.append(char)
        elif char in _CLOSING:
            depth -= 1
            current.append(char)
        elif char == separator and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    parts.append("".join(current))
    return parts


def parameter_list(header: str) -> str | None:
    """The parameters of a `def` header (its text, possibly over several lines, through the
    closing parenthesis) without annotations, `self`/`cls` dropped, defaults kept, one space
    after each comma; None when the header has no complete parameter list."""
    opening = header.find("(")
    if opening < 0:
        return None
    depth, quote, closing = 0, "", -1
    for position in range(opening, len(header)):
        char = header[position]
        if quote:
            if char == quote and header[position - 1] != "\\":
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in _OPENING:
            depth += 1
        elif char in _CLOSING:
            depth -= 1
            if depth == 0:
                closing = position
                break
    if closing < 0:
        return None
    parameters = []
    for raw in _top_level_split(header[opening + 1 : closing], ","):
        code = " ".join(line.split("#", 1)[0] for line in raw.split("\n")).strip()
        if not code:
            continue
        assigned = _top_level_split(code, "=")
        name = _top_level_split(assigned[0], ":")[0].strip()
        default = "=".join(assigned[1:]).strip()
        parameters.append(f"{name}={' '.join(default.split())}" if default else name)
    if parameters and parameters[0] in ("self", "cls"):
        parameters = parameters[1:]
    return ", ".join(parameters)


def _header_text(lines: Sequence[str], start: int, last: int, max_lines: int) -> str:
    """Lines of a header from `start` through the first whose code ends in ':' (at most
    max_lines + 1 lines)."""
    return "\n".join(lines[start : min(header_end(lines, start, last), start + max_lines + 1)])


def definition_signature(lines: Sequence[str], kind: str, name: str, start: int, end: int,
                         max_header_lines: int = 24) -> str | None:
    """One line for a function (`def name(params): ...`) or a class (`class Name(params): ...`
    with its __init__'s parameters, or without parameters when it has no __init__ of its own) whose
    definition spans lines [start, end] (0-based, inclusive) of `lines`."""
    last = min(end, len(lines) - 1)
    if start > last:
        return None
    if kind == "function":
        parameters = parameter_list(_header_text(lines, start, last, max_header_lines))
        return None if parameters is None else f"def {name}({parameters}): ..."
    body_indent = None
    for number in range(start + 1, last + 1):
        stripped = lines[number].lstrip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(lines[number]) - len(stripped)
        body_indent = indent if body_indent is None else body_indent
        if indent == body_indent and stripped.startswith("def __init__("):
            parameters = parameter_list(_header_text(lines, number, last, max_header_lines))
            return None if parameters is None else f"class {name}({parameters}): ..."
    return f"class {name}: ..."


def _fit(line: str, max_chars: int) -> str:
    """`line` (`kind name(p1, p2, ...): ...`) with trailing parameters replaced by `...` until it
    holds at most max_chars characters (whole parameters only; at least the name is kept)."""
    if len(line) <= max_chars:
        return line
    head, _, rest = line.partition("(")
    parameters = _top_level_split(rest[: -len("): ...")], ",")
    while parameters and len(f"{head}({', '.join([*parameters, ' ...'])}): ...") > max_chars:
        parameters.pop()
    return f"{head}({', '.join(p.strip() for p in [*parameters, '...'])}): ..."


def imported_signatures(symbols: SymbolView, path: str, shown_imports: str, visible: str, limit: int,
                        max_chars: int, lines_of: Callable[[str], Sequence[str]], bm25: BM25Config
                        ) -> list[str]:
    """Signature lines of up to `limit` repository functions and classes that the import
    statements `shown_imports` bind in file `path`. Names the visible code already uses (a word
    of `visible`: the model sees the call, or the name is a base class) are left out; the rest
    are ranked by the share of their name's subword tokens that the visible code shows (what the
    code is about), functions before classes on ties, then in import order. Lines are cut to
    `max_chars` characters at a parameter boundary."""
    resolved = symbols.resolved_file(path) if limit > 0 else None
    if resolved is None:
        return []
    file_id, syntax, resolution = resolved
    words = set(_WORD.findall(shown_imports))
    used = set(_WORD.findall(visible))
    visible_tokens = set(tokenize(visible, bm25))
    # (rank key, name, file, definition): ranked before any target file is read (each read costs
    # a file's text and its secret masking; only the chosen few are read).
    candidates: list[tuple[tuple[float, int, int], str, int, Definition]] = []
    seen: set[tuple[int, int]] = set()
    for order, binding in enumerate(syntax.imports):
        if not binding.name or binding.local not in words or binding.local in used:
            continue
        target = resolution.resolve_name(file_id, binding.local)
        if target is None or target[0] == file_id or (target[0], target[1].node) in seen:
            continue
        seen.add((target[0], target[1].node))
        parts = set(tokenize(binding.local, bm25))
        overlap = len(parts & visible_tokens) / max(len(parts), 1)
        candidates.append(((-overlap, 0 if target[1].kind == "function" else 1, order), binding.local, *target))
    out: list[str] = []
    for _, name, target_file, definition in sorted(candidates, key=lambda c: c[0]):
        if len(out) >= limit:
            break
        line = _signature_in(symbols, target_file, definition, name, lines_of, max_chars)
        if line is not None:
            out.append(line)
    return out


def _signature_in(symbols: SymbolView, file_id: int, definition: Definition, shown_name: str,
                  lines_of: Callable[[str], Sequence[str]], max_chars: int) -> str | None:
    syntax, record = symbols.syntax(file_id), symbols.record(file_id)
    if syntax is None or record is None:
        return None
    node = definition.node
    line = definition_signature(lines_of(record.path), definition.kind, shown_name,
                                int(syntax.start_line[node]), int(syntax.end_line[node]))
    return None if line is None else _fit(line, max_chars)


_CALLED = re.compile(r"([^\W\d]\w*(?:\.[^\W\d]\w*)*)\s*\(")


def called_signature(symbols: SymbolView, path: str, code: str, max_chars: int,
                     lines_of: Callable[[str], Sequence[str]]) -> tuple[str, str] | None:
    """(name, signature line) of the first name `code` calls that file `path` reaches through its
    imports (a name it imports, or an attribute of a module it imports) and that is defined in
    another file of the repository; None when there is none. `self.` / `cls.` calls are methods of
    the file's own classes and are skipped."""
    resolved = symbols.resolved_file(path)
    if resolved is None:
        return None
    file_id, _, resolution = resolved
    for dotted in _CALLED.findall(code):
        if dotted.split(".", 1)[0] in ("self", "cls", "super"):
            continue
        target = resolution.resolve_name(file_id, dotted)
        if target is None or target[0] == file_id:
            continue
        name = dotted.rsplit(".", 1)[-1]
        line = _signature_in(symbols, target[0], target[1], name, lines_of, max_chars)
        if line is not None:
            return name, line
    return None
