"""Definitions the cursor's file reaches through import and call edges, as context to add.

FragRel's relations only re-rank windows that BM25 already scored; an API call's definition often
scores low against the lines before the call (how often it reached the prompt:
docs/repoeval-devset.md#definition-blocks). This module uses the same code graph to add context instead: the
functions and classes the file imports or calls in other files, ranked by the share of the words
of their names (as defined and as imported) that the query shows (subword tokens, as BM25 sees
them), then by whether the file already calls them, then by import order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from repomem.config import BM25Config
from repomem.index.repo_index import RepoIndex
from repomem.index.tokens import tokenize
from repomem.languages.parsed import Definition


@dataclass(frozen=True)
class DefinitionSite:
    file_id: int
    path: str
    name: str
    kind: str  # "function" | "class"
    start_line: int  # 0-based, the def / class line
    end_line: int  # 0-based, inclusive: the definition's last line
    fragment: int  # a live window holding the def line
    score: float


def _definition_at(index: RepoIndex, file_id: int, node: int) -> Definition | None:
    syntax = index.syntax[file_id]
    if syntax is None:
        return None
    return next((d for d in syntax.definitions if d.node == node), None)


def window_holding(index: RepoIndex, file_id: int, line: int) -> int | None:
    """A live window of the file holding a 0-based line (the first by id), or None."""
    record = index.files[file_id]
    if record is None:
        return None
    ids = np.arange(record.first_fragment, record.first_fragment + record.n_fragments)
    hold = ids[(index.fragment_start[ids] <= line) & (index.fragment_end[ids] > line) & index.live[ids]]
    return int(hold[0]) if hold.size else None


def reachable_definitions(index: RepoIndex, path: str, query: str, bm25: BM25Config, limit: int
                          ) -> list[DefinitionSite]:
    """Up to `limit` definitions in other files that `path` imports or calls, best first."""
    resolved = index.resolved_file(path) if limit > 0 else None
    if resolved is None:
        return []
    file_id, syntax, resolution = resolved
    # (file, node) -> (definition, order, called, names the file knows it by)
    found: dict[tuple[int, int], tuple[Definition, int, bool, frozenset[str]]] = {}
    for order, binding in enumerate(syntax.imports):
        if not binding.name:
            continue  # `import module`: its functions show up through the calls below
        target = resolution.resolve_name(file_id, binding.local)
        if target is not None and target[0] != file_id:
            found.setdefault((target[0], target[1].node), (target[1], order, False, frozenset({binding.local})))
    calls = index.calls.get(file_id)
    if calls is not None:
        for target_file, target_node in {(int(r[2]), int(r[3])) for r in calls}:
            if target_file == file_id:
                continue
            definition = _definition_at(index, target_file, target_node)
            if definition is None:
                continue
            previous = found.get((target_file, target_node))
            order = previous[1] if previous else len(syntax.imports) + target_node
            found[(target_file, target_node)] = (definition, order, True, previous[3] if previous else frozenset())
    words = set(tokenize(query, bm25))
    sites = []
    for (target_file, node), (definition, order, called, aliases) in found.items():
        target_syntax = index.syntax[target_file]
        record = index.files[target_file]
        if target_syntax is None or record is None:
            continue
        start, end = int(target_syntax.start_line[node]), int(target_syntax.end_line[node])
        fragment = window_holding(index, target_file, start)
        if fragment is None:
            continue
        parts = set(tokenize(" ".join({definition.name, *aliases}), bm25))
        overlap = len(parts & words) / max(len(parts), 1)
        score = overlap + (0.5 if called else 0.0) - order * 1e-6
        sites.append(DefinitionSite(target_file, record.path, definition.name, definition.kind, start, end,
                                    fragment, score))
    sites.sort(key=lambda s: -s.score)
    return sites[:limit]


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
