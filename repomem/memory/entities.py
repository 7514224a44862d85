"""QRMeM adapted to code: an entity memory read from the code graph.

Entities are the repository's definitions (functions and classes outside function bodies);
they relate through the index's call edges (who calls whom) and import bindings. From the names
at the cursor the strategy looks up their definitions (through the file's own imports first, then
by name, nearest folder first), gathers them as evidence, asks the model whether that is enough
(one reflection) and, if not, looks up the name the model asks for or expands one hop: the
definitions the evidence calls and the places that call it (usage sites).

This module is the memory and its steps, over the index alone; the retriever
(repomem/completion/memory_retrievers.py) runs the reflection loop with the model.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

from repomem.index.repo_index import RepoIndex
from repomem.prompt_names import one_line

# String literals (triple-quoted first) and comments: names in prose say nothing about the code.
_STRINGS = r'"""(?s:.*?)"""|\'\'\'(?s:.*?)\'\'\'|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\''
# Brace languages' block comments and JavaScript's template strings, beside their `//` line comments.
_SLASH_EXTRAS = r"|/\*(?s:.*?)\*/|`(?:\\.|[^`\\])*`"
# Keywords of the brace languages (Go, Rust, Java, C, JavaScript): no name to look up.
_BRACE_KEYWORDS = frozenset({
    "const", "let", "var", "function", "func", "fn", "return", "if", "else", "for", "while", "do", "switch",
    "case", "default", "break", "continue", "new", "this", "null", "nil", "undefined", "true", "false",
    "package", "import", "export", "from", "struct", "interface", "type", "enum", "impl", "pub", "mut", "use",
    "mod", "match", "static", "public", "private", "protected", "class", "extends", "implements", "void",
    "async", "await", "try", "catch", "finally", "throw", "throws", "go", "defer", "chan", "select", "range",
    "self", "Self", "super", "where", "loop", "in", "of", "typeof", "instanceof", "int", "char", "long",
})


def _prose(comment: str) -> re.Pattern[str]:
    """String literals and comments of a language whose line comments start with `comment`."""
    pattern = _PROSE_BY_COMMENT.get(comment)
    if pattern is None:
        opener, _, closer = comment.partition(" ")  # a block comment's opener and closer (registry)
        extras = _SLASH_EXTRAS if comment == "//" else ""
        remark = f"{re.escape(opener)}(?s:.*?){re.escape(closer)}" if closer else f"{re.escape(opener)}[^\n]*"
        pattern = re.compile(f"{_STRINGS}|{remark}{extras}")
        _PROSE_BY_COMMENT[comment] = pattern
    return pattern


_PROSE_BY_COMMENT: dict[str, re.Pattern[str]] = {}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
# Names too common to say anything about where to look (Python builtins a cursor shows often).
_COMMON = frozenset({"self", "cls", "None", "True", "False", "print", "len", "range", "str", "int", "float",
                     "dict", "list", "set", "tuple", "isinstance", "super", "object", "type", "bool", "open",
                     "enumerate", "zip", "map", "filter", "sorted", "min", "max", "sum", "any", "all", "getattr",
                     "setattr", "hasattr", "Exception", "ValueError", "TypeError", "KeyError", "args", "kwargs"})


@dataclass(frozen=True)
class Entity:
    file_id: int
    node: int  # file-local node of the def / class statement
    name: str
    path: str
    start_line: int  # 0-based
    end_line: int  # 0-based, inclusive


@dataclass(frozen=True)
class Usage:
    """A place that calls an entity."""

    entity: Entity
    file_id: int
    path: str
    line: int  # 0-based line of the call


def names_at_cursor(code: str, limit: int, comment: str = "#") -> list[str]:
    """Dotted names in `code` outside strings and comments (`comment`: the language's line comment;
    with `//` block comments and template strings too), the nearest to the cursor (the end) first,
    without keywords and common builtins; at most `limit`."""
    found: list[str] = []
    brace = comment != "#"
    for match in reversed(list(_NAME.finditer(_prose(comment).sub(" ", code)))):
        name = match.group()
        head = name.split(".")[0]
        if (keyword.iskeyword(head) or (brace and head in _BRACE_KEYWORDS) or name in _COMMON
                or name in found):
            continue
        if head in ("self", "cls") and "." in name:
            name = name.split(".", 1)[1]
            if name in found:
                continue
        found.append(name)
        if len(found) == limit:
            break
    return found


class EntityMemory:
    """Definitions by name, and the call edges between them, of one state of the index."""

    def __init__(self, index: RepoIndex):
        index.ensure_structure()
        self.index = index
        self.by_name: dict[str, list[tuple[int, int]]] = {}
        for file_id, syntax in enumerate(index.syntax):
            if syntax is None or index.files[file_id] is None:
                continue
            for definition in syntax.definitions:
                if not definition.in_function:
                    self.by_name.setdefault(definition.name, []).append((file_id, definition.node))
        self.calls = index.all_calls()  # (n, 5): source file, source node, target file, target node, hops

    def entity(self, file_id: int, node: int) -> Entity | None:
        syntax = self.index.syntax[file_id]
        record = self.index.files[file_id]
        if syntax is None or record is None or node >= syntax.start_line.shape[0]:
            return None
        name = next((d.name for d in syntax.definitions if d.node == node), None)
        if name is None:
            return None
        return Entity(file_id, node, name, record.path, int(syntax.start_line[node]), int(syntax.end_line[node]))

    def look_up(self, name: str, from_path: str, limit: int = 1) -> list[Entity]:
        """Definitions a (dotted) name at `from_path` names: through the file's imports first,
        else every definition of its last part, those in the nearest folder first."""
        from_id = self.index.file_id(from_path)
        if from_id is not None:
            resolution = self.index.resolver()
            if resolution.covers(from_id):
                target = resolution.resolve_name(from_id, name)
                if target is not None and target[0] != from_id:
                    found = self.entity(target[0], target[1].node)
                    if found is not None:
                        return [found]
        short = name.rsplit(".", 1)[-1]
        candidates = [e for e in (self.entity(f, n) for f, n in self.by_name.get(short, ())) if e is not None
                      and e.path != from_path]
        candidates.sort(key=lambda e: (-_shared_folders(e.path, from_path), e.path, e.start_line))
        return candidates[:limit]

    def callees(self, entity: Entity, limit: int) -> list[Entity]:
        """Definitions `entity` calls (its call sites lie inside its lines), in call order."""
        syntax = self.index.syntax[entity.file_id]
        rows = self.calls[self.calls[:, 0] == entity.file_id]
        if syntax is None or not rows.shape[0]:
            return []
        lines = syntax.start_line[rows[:, 1]]
        inside = rows[(lines >= entity.start_line) & (lines <= entity.end_line)]
        out: list[Entity] = []
        for target_file, target_node in dict.fromkeys((int(r[2]), int(r[3])) for r in inside):
            if (target_file, target_node) == (entity.file_id, entity.node):
                continue
            found = self.entity(target_file, target_node)
            if found is not None:
                out.append(found)
                if len(out) == limit:
                    break
        return out

    def usages(self, entity: Entity, limit: int, outside: str = "") -> list[Usage]:
        """Places that call `entity` (not in file `outside`), in file order."""
        rows = self.calls[(self.calls[:, 2] == entity.file_id) & (self.calls[:, 3] == entity.node)]
        out: list[Usage] = []
        for source_file, source_node in dict.fromkeys((int(r[0]), int(r[1])) for r in rows):
            syntax = self.index.syntax[source_file]
            record = self.index.files[source_file]
            if syntax is None or record is None or record.path == outside:
                continue
            out.append(Usage(entity, source_file, record.path, int(syntax.start_line[source_node])))
            if len(out) == limit:
                break
        return out


def _shared_folders(a: str, b: str) -> int:
    parts_a, parts_b = a.split("/")[:-1], b.split("/")[:-1]
    shared = 0
    for x, y in zip(parts_a, parts_b):
        if x != y:
            break
        shared += 1
    return shared


def reflection_question(code_path: str, code: str, evidence: list[str]) -> str:
    """The reflection step: is what was found enough, or which name to look up next."""
    lines = [f"Code is being written in {one_line(code_path)}. Its last lines:", "```", code.rstrip("\n"), "```",
             "Found in the repository so far:"]
    lines += [f"{number}. {item}" for number, item in enumerate(evidence, start=1)] or ["(nothing)"]
    lines.append('Is this enough to write the next line? Answer "yes", or "no" and the one name to look up next.')
    return "\n".join(lines)


def asked_name(answer: str | None, known: set[str] | dict) -> str | None:
    """The name the answer asks for, among those the memory knows: one quoted (`` `load_config` ``)
    first, then one shaped like code (`load_config`, `Settings.get`, `fn2`, `loadConfig`), else the
    last one named. Answers are sentences (`no, need to check load_config`), and plain words
    (`check`, `name`, `get`) are often also a method somewhere in the repository."""
    text = answer or ""
    names = [match for match in _NAME.finditer(text)
             if match.group().lower() not in ("yes", "no")
             and (match.group() in known or match.group().rsplit(".", 1)[-1] in known)]
    if not names:
        return None
    quoted = [match for match in names if match.start() > 0 and text[match.start() - 1] in "`'\"*"]
    shaped = [match for match in names if _CODE_SHAPED.search(match.group())]
    return (quoted or shaped or names[-1:])[0].group()


# A name no English word looks like: an underscore, a dot, a digit, or a capital after its first letter.
_CODE_SHAPED = re.compile(r"[_.\d]|.[A-Z]")
