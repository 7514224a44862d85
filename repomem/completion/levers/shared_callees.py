"""Shared callees: usage of what comes next, found through the code graph's call edges.

The functions that already call the repository functions the cursor's function called above the
cursor (resolved call edges: the same definitions, not the same words) tend to call next what the
cursor's function is about to; a block from just above their last shared call shows the model that
usage to copy. BM25 sees only words: a helper called `load` in ten modules is ten different
functions to the call edges and one word to BM25. Up to `prompt.shared_callees` such blocks join the
candidates at `prompt.shared_callee_position`. Off by default.

A function's score is the sum, over the distinct repository functions it shares with the cursor's
function, of log(1 + n_functions / n_callers): a callee few functions call says more than a helper
every function calls.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from repomem.completion.levers.base import PromptLever
from repomem.config import Config
from repomem.positions import Cursor
from repomem.repo_view import RepoView
from repomem.retrieval.scoring import ScoredFragment
from repomem.retrieval.symbol_view import SOURCE_FILE, SOURCE_NODE, SymbolView, functions, innermost

# Lines shown above the last shared call: the call itself and what set up its arguments.
LINES_BEFORE_SHARED_CALL = 2


class SharedCallees(PromptLever):
    name = "shared-callees"

    @classmethod
    def applies(cls, config: Config) -> bool:
        return config.prompt.shared_callees > 0

    def candidates(self, fragments: list[ScoredFragment]) -> list[ScoredFragment]:
        round = self.round
        settings = round.config.prompt
        request = round.request
        found = shared_callee_blocks(round.view, request.cursor, round.context.definition_line, request.excluded,
                                     request.unlisted, settings.shared_callees, settings.shared_callee_lines,
                                     LINES_BEFORE_SHARED_CALL)
        if not found:
            return fragments
        shown = {(f.path, f.start_line) for f in found}
        rest = [f for f in fragments if (f.path, f.start_line) not in shown]
        position = min(settings.shared_callee_position, len(rest))
        return [*rest[:position], *found, *rest[position:]]


def shared_callee_blocks(view: RepoView, cursor: Cursor, function_line: int, excluded: np.ndarray | None,
                         unlisted: np.ndarray | None, count: int, lines: int, lines_before: int
                         ) -> list[ScoredFragment]:
    """Up to `count` blocks of `lines` lines at most from functions that call what the cursor's
    function (its def on 0-based `function_line`) calls above the cursor, best first: each starts
    `lines_before` lines above the function's last shared call, stays inside the function, and
    carries the id of the window holding its first line and s_rel = the function's score. A
    block overlapping a window the cursor's masks hide (`RepoView.cursor_masks`) is left out."""
    symbols = view.symbols
    if symbols is None or count <= 0:
        return []
    hidden = np.union1d(*view.cursor_masks(cursor, excluded, unlisted))
    out = []
    for site in shared_callee_sites(symbols, cursor.path, function_line, cursor.line, count * 3):
        start = max(site.function_line, site.last_shared_line - lines_before)
        stop = min(site.function_end + 1, start + lines)
        covering = symbols.windows_overlapping(site.path, start, stop - 1)
        file_id = symbols.file_id(site.path)
        holder = None if file_id is None else symbols.window_holding(file_id, start)
        if holder is None or np.isin(covering, hidden).any() or not symbols.all_live(covering):
            continue
        out.append(ScoredFragment(holder, site.path, start, stop, 0.0, 0.0, site.score))
        if len(out) == count:
            break
    return out


@dataclass(frozen=True)
class SharedCalleeSite:
    path: str
    function_line: int  # 0-based def line of the calling function
    last_shared_line: int  # 0-based line of its last call to a shared callee
    function_end: int  # 0-based, inclusive: the function's last line
    shared: int  # distinct callees it shares with the cursor's function
    score: float


def shared_callee_sites(symbols: SymbolView, path: str, function_line: int, line: int, limit: int,
                        min_shared: int = 1) -> list[SharedCalleeSite]:
    """Up to `limit` functions of the repository, best first, that call repository functions the
    cursor's function (the one whose def is on 0-based `function_line` of `path`) calls above
    0-based `line`; none at module level, for a file whose language resolves no calls, or when
    nothing is shared by `min_shared` callees. The def line, not the cursor's line, names the
    function: the syntax of a buffer cut at the cursor ends its function above the cursor."""
    resolved = symbols.resolved_file(path) if limit > 0 and function_line >= 0 else None
    if resolved is None:
        return []
    file_id, syntax, _ = resolved
    cursor_function = innermost(functions(syntax), function_line)
    if cursor_function is None:
        return []
    visible = symbols.calls_above(file_id, syntax, function_line, line)
    if not visible.shape[0]:
        return []
    wanted = np.unique(symbols.callee_keys(visible))
    all_rows = symbols.all_calls()
    sharing = all_rows[np.isin(symbols.callee_keys(all_rows), wanted)]
    # calling function -> {callee key: last line calling it}
    callers: dict[tuple[int, int], dict[int, int]] = {}
    functions_of: dict[int, list[tuple[int, int, int]]] = {}
    for source_file, source_node, key in _rows_with_keys(symbols, sharing):
        other = symbols.syntax(source_file)
        if other is None:
            continue
        if source_file not in functions_of:
            functions_of[source_file] = functions(other)
        site_line = int(other.start_line[source_node])
        caller = innermost(functions_of[source_file], site_line)
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
    n_functions = sum(len(s.definitions) for s in symbols.syntaxes()) or 1
    weight = {key: math.log(1 + n_functions / count) for key, count in n_callers.items() if count}
    sites = []
    for (source_file, start), calls in callers.items():
        if len(calls) < min_shared:
            continue
        other = symbols.syntax(source_file)
        end = next(f[1] for f in functions_of[source_file] if f[0] == start)
        sites.append(SharedCalleeSite(other.path, start, max(calls.values()), end, len(calls),
                                      sum(weight[key] for key in calls)))
    sites.sort(key=lambda s: (-s.score, s.path, s.function_line))
    return sites[:limit]


def _rows_with_keys(symbols: SymbolView, rows: np.ndarray) -> Iterator[tuple[int, int, int]]:
    keys = symbols.callee_keys(rows)
    for row, key in zip(rows.tolist(), keys.tolist()):
        yield row[SOURCE_FILE], row[SOURCE_NODE], key
