"""Imported usage: how the repository calls what the file imports and has not called yet.

The name an API completion needs is usually in scope already (the file imports it); what the model
lacks is a call of it to copy. Windows elsewhere that call exactly those definitions (resolved call
edges), BM25's best of them for the round's query, join the candidates
at `prompt.imported_usage_position`: up to `prompt.imported_usages` of them. Off by default.
"""

from __future__ import annotations

import numpy as np

from repomem.completion.levers.base import PromptLever
from repomem.config import Config
from repomem.positions import Cursor
from repomem.repo_view import RepoView
from repomem.retrieval.scoring import ScoredFragment
from repomem.retrieval.symbol_view import SOURCE_FILE, SOURCE_NODE, SymbolView


class ImportedUsage(PromptLever):
    name = "imported-usage"

    @classmethod
    def applies(cls, config: Config) -> bool:
        return config.prompt.imported_usages > 0

    def candidates(self, fragments: list[ScoredFragment]) -> list[ScoredFragment]:
        round = self.round
        settings = round.config.prompt
        request = round.request
        found = imported_usage_blocks(round.view, request.cursor, round.context.definition_line,
                                      round.context.query, request.excluded, request.unlisted,
                                      settings.imported_usages)
        have = {f.fragment for f in found}
        rest = [f for f in fragments if f.fragment not in have]
        position = min(settings.imported_usage_position, len(rest))
        return [*rest[:position], *found, *rest[position:]]


def imported_usage_blocks(view: RepoView, cursor: Cursor, function_line: int, query: str,
                          excluded: np.ndarray | None, unlisted: np.ndarray | None, count: int
                          ) -> list[ScoredFragment]:
    """Up to `count` windows, BM25's best for `query` first, among those that call a repository
    definition the cursor's file imports and its function (def on 0-based `function_line`) has
    not called above the cursor; the cursor's masks apply."""
    symbols = view.symbols
    if symbols is None or count <= 0:
        return []
    usage = usage_windows(symbols, cursor.path, function_line, cursor.line)
    if not usage.size:
        return []
    hidden, unlisted = view.cursor_masks(cursor, excluded, unlisted)
    others = np.ones(symbols.n_fragments, dtype=bool)
    others[usage] = False
    others[hidden] = True
    return [f for f in view.retrieve(query, count, 0.0, others, unlisted) if f.s_ind > 0]


def imported_not_called(symbols: SymbolView, path: str, function_line: int, line: int) -> np.ndarray:
    """Keys (callee_keys) of the repository definitions in other files that `path`'s imports bind
    and that its function on `function_line` has not called above 0-based `line`; shape (n,)."""
    resolved = symbols.resolved_file(path)
    if resolved is None:
        return np.zeros(0, dtype=np.int64)
    file_id, syntax, resolution = resolved
    n_files = symbols.n_files
    keys = set()
    for binding in syntax.imports:
        target = resolution.resolve_name(file_id, binding.local)
        if target is not None and target[0] != file_id and not target[1].in_function:
            keys.add(target[1].node * n_files + target[0])
    called = symbols.calls_above(file_id, syntax, function_line, line)
    keys -= set(symbols.callee_keys(called).tolist())
    return np.asarray(sorted(keys), dtype=np.int64)


def usage_windows(symbols: SymbolView, path: str, function_line: int, line: int) -> np.ndarray:
    """Ids of live windows holding a call to a definition `imported_not_called` gives, in id order."""
    wanted = imported_not_called(symbols, path, function_line, line)
    if not wanted.size:
        return np.zeros(0, dtype=np.int64)
    rows = symbols.all_calls()
    rows = rows[np.isin(symbols.callee_keys(rows), wanted)]
    windows: set[int] = set()
    for source_file, source_node in rows[:, [SOURCE_FILE, SOURCE_NODE]].tolist():
        syntax = symbols.syntax(source_file)
        if symbols.record(source_file) is None or syntax is None:
            continue
        windows.update(symbols.live_windows_holding(source_file, int(syntax.start_line[source_node])).tolist())
    return np.asarray(sorted(windows), dtype=np.int64)
