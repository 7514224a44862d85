"""Functions that call what the cursor's function calls: usage found through call edges.

An API completion calls a repository function that the visible code has not called yet. Other
functions that already call the same repository functions as the cursor's function (resolved
through the code graph's call edges, not matched by name) tend to go on the same way, so the
lines after their last shared call are a usage example of what comes next. BM25 sees only words:
a helper called `load` in ten modules is ten different functions to the call edges and one word to
BM25.

A function's score is the sum, over the distinct repository functions it shares with the cursor's
function, of log(1 + n_functions / n_callers): a callee few functions call says more than a helper
every function calls.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from repomem.index.repo_index import RepoIndex
from repomem.languages.parsed import FileSyntax

# call rows (source file, source node, target file, target node, hops): parsed.call_array
_SOURCE_FILE, _SOURCE_NODE, _TARGET_FILE, _TARGET_NODE = 0, 1, 2, 3


@dataclass(frozen=True)
class SharedCalleeSite:
    path: str
    function_line: int  # 0-based def line of the calling function
    last_shared_line: int  # 0-based line of its last call to a shared callee
    function_end: int  # 0-based, inclusive: the function's last line
    shared: int  # distinct callees it shares with the cursor's function
    score: float


def _functions(syntax: FileSyntax) -> list[tuple[int, int, int]]:
    """(start line, end line inclusive, node) of the file's functions, outermost first."""
    out = [(int(syntax.start_line[d.node]), int(syntax.end_line[d.node]), d.node)
           for d in syntax.definitions if d.kind == "function"]
    return sorted(out)


def _innermost(functions: list[tuple[int, int, int]], line: int) -> tuple[int, int, int] | None:
    """The innermost function holding 0-based `line`; None at module or class level."""
    holding = [f for f in functions if f[0] <= line <= f[1]]
    return max(holding, key=lambda f: f[0]) if holding else None


def callee_keys(rows: np.ndarray, n_files: int) -> np.ndarray:
    """One int64 key per call row's target (file, node), shape (n,)."""
    return rows[:, _TARGET_NODE] * n_files + rows[:, _TARGET_FILE]


def cursor_function_rows(index: RepoIndex, file_id: int, syntax: FileSyntax, function_line: int, line: int
                         ) -> np.ndarray:
    """The call rows of the cursor's function (the one holding 0-based `function_line`; the whole
    file at module level, `function_line` -1) whose call sites lie above 0-based `line`, (n, 5)."""
    rows = index.calls.get(file_id)
    if rows is None or not rows.shape[0]:
        return np.zeros((0, 5), dtype=np.int64)
    function = _innermost(_functions(syntax), function_line) if function_line >= 0 else None
    first = function[0] if function is not None else 0
    site_lines = syntax.start_line[rows[:, _SOURCE_NODE]]
    return rows[(site_lines >= first) & (site_lines < line)]


def shared_callee_sites(index: RepoIndex, path: str, function_line: int, line: int, limit: int,
                        min_shared: int = 1) -> list[SharedCalleeSite]:
    """Up to `limit` functions of the repository, best first, that call repository functions the
    cursor's function (the one whose def is on 0-based `function_line` of `path`) calls above
    0-based `line`; none at module level, for a file whose language resolves no calls, or when
    nothing is shared by `min_shared` callees. The def line, not the cursor's line, names the
    function: the syntax of a buffer cut at the cursor ends its function above the cursor."""
    resolved = index.resolved_file(path) if limit > 0 and function_line >= 0 else None
    if resolved is None:
        return []
    file_id, syntax, _ = resolved
    cursor_function = _innermost(_functions(syntax), function_line)
    if cursor_function is None:
        return []
    visible = cursor_function_rows(index, file_id, syntax, function_line, line)
    if not visible.shape[0]:
        return []
    n_files = len(index.syntax)
    wanted = np.unique(callee_keys(visible, n_files))
    all_rows = index.all_calls()
    sharing = all_rows[np.isin(callee_keys(all_rows, n_files), wanted)]
    # calling function -> {callee key: last line calling it}
    callers: dict[tuple[int, int], dict[int, int]] = {}
    functions_of: dict[int, list[tuple[int, int, int]]] = {}
    for source_file, source_node, key in _rows_with_keys(sharing, n_files):
        other = index.syntax[source_file]
        if other is None:
            continue
        if source_file not in functions_of:
            functions_of[source_file] = _functions(other)
        site_line = int(other.start_line[source_node])
        caller = _innermost(functions_of[source_file], site_line)
        if caller is None or (source_file == file_id and caller[0] == cursor_function[0]):
            continue
        calls = callers.setdefault((source_file, caller[0]), {})
        calls[key] = max(calls.get(key, -1), site_line)
    if not callers:
        return []
    n_callers = {key: 0 for key in wanted.tolist()}
    for calls in callers.values():
        for key in calls:
            n_callers[key] += 1
    n_functions = sum(len(s.definitions) for s in index.syntax if s is not None) or 1
    weight = {key: math.log(1 + n_functions / count) for key, count in n_callers.items() if count}
    sites = []
    for (source_file, start), calls in callers.items():
        if len(calls) < min_shared:
            continue
        other = index.syntax[source_file]
        end = next(f[1] for f in functions_of[source_file] if f[0] == start)
        sites.append(SharedCalleeSite(other.path, start, max(calls.values()), end, len(calls),
                                      sum(weight[key] for key in calls)))
    sites.sort(key=lambda s: (-s.score, s.path, s.function_line))
    return sites[:limit]


def _rows_with_keys(rows: np.ndarray, n_files: int) -> Iterator[tuple[int, int, int]]:
    keys = callee_keys(rows, n_files)
    for row, key in zip(rows.tolist(), keys.tolist()):
        yield row[_SOURCE_FILE], row[_SOURCE_NODE], key
