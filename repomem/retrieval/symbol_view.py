"""A read-only handle on the index's code graph: the questions prompt levers ask of it.

Levers read the graph the index keeps (each file's definitions and imports, resolved call edges,
which windows hold a line) and never change it. This handle offers those reads and nothing else:
arrays come back read-only, records and syntax are frozen values, and there is no way from here to
the index's writing methods (`set_file`, `replace_calls`, ...). It is made for one request
(repomem/repo_view.py) and must not outlive the index it was made from.

Call rows are `parsed.call_array`'s: (source file, source node, target file, target node, hops).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from repomem.index.calls import CallResolution
from repomem.index.index_state import RepoIndex
from repomem.index.indexed_files import FileRecord
from repomem.languages.parsed import FileSyntax

# columns of a call row (parsed.call_array)
SOURCE_FILE, SOURCE_NODE, TARGET_FILE, TARGET_NODE = 0, 1, 2, 3

# (start line, end line inclusive, node) of a function, as `functions` lists them
FunctionSpan = tuple[int, int, int]


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


def functions(syntax: FileSyntax) -> list[FunctionSpan]:
    """(start line, end line inclusive, node) of the file's functions, outermost first."""
    out = [(int(syntax.start_line[d.node]), int(syntax.end_line[d.node]), d.node)
           for d in syntax.definitions if d.kind == "function"]
    return sorted(out)


def innermost(spans: list[FunctionSpan], line: int) -> FunctionSpan | None:
    """The innermost function holding 0-based `line`; None at module or class level."""
    holding = [f for f in spans if f[0] <= line <= f[1]]
    return max(holding, key=lambda f: f[0]) if holding else None


class SymbolView:
    """Read-only questions about files, definitions, imports and call edges of one index."""

    def __init__(self, index: RepoIndex):
        self._index = index

    # -- files ---------------------------------------------------------------------------------

    @property
    def n_files(self) -> int:
        """File ids run from 0 to n_files - 1 (removed files keep their id, empty)."""
        return len(self._index.files)

    def file_id(self, path: str) -> int | None:
        return self._index.file_id(path)

    def record(self, file_id: int) -> FileRecord | None:
        return self._index.files[file_id]

    def syntax(self, file_id: int) -> FileSyntax | None:
        self._index.ensure_structure()
        return self._index.syntax[file_id]

    def syntaxes(self) -> Iterator[FileSyntax]:
        """Every present file's syntax, by file id."""
        self._index.ensure_structure()
        return (s for s in self._index.syntax if s is not None)

    def resolved_file(self, path: str) -> tuple[int, FileSyntax, CallResolution] | None:
        """A file's id and syntax with the call resolution covering it; None for an unknown path or
        a language that resolves no names."""
        return self._index.resolved_file(path)

    # -- call edges ----------------------------------------------------------------------------

    def calls_of(self, file_id: int) -> np.ndarray | None:
        """The file's call rows, shape (n, 5), read-only; None when it has none recorded."""
        self._index.ensure_structure()
        rows = self._index.calls.get(file_id)
        return None if rows is None else _read_only(rows)

    def all_calls(self) -> np.ndarray:
        """Every call row, shape (n, 5)."""
        self._index.ensure_structure()
        return _read_only(self._index.all_calls())

    def callee_keys(self, rows: np.ndarray) -> np.ndarray:
        """One int64 key per call row's target (file, node), shape (n,)."""
        return rows[:, TARGET_NODE] * self.n_files + rows[:, TARGET_FILE]

    def calls_above(self, file_id: int, syntax: FileSyntax, function_line: int, line: int) -> np.ndarray:
        """The call rows of the cursor's function (the one holding 0-based `function_line`; the
        whole file at module level, `function_line` -1) whose call sites lie above 0-based
        `line`, shape (n, 5)."""
        rows = self.calls_of(file_id)
        if rows is None or not rows.shape[0]:
            return np.zeros((0, 5), dtype=np.int64)
        function = innermost(functions(syntax), function_line) if function_line >= 0 else None
        first = function[0] if function is not None else 0
        site_lines = syntax.start_line[rows[:, SOURCE_NODE]]
        return rows[(site_lines >= first) & (site_lines < line)]

    # -- windows -------------------------------------------------------------------------------

    def live_windows_holding(self, file_id: int, line: int) -> np.ndarray:
        """Ids of the file's live windows holding 0-based `line`, in id order (int64)."""
        index = self._index
        record = index.files[file_id]
        if record is None:
            return np.zeros(0, dtype=np.int64)
        ids = np.arange(record.first_fragment, record.first_fragment + record.n_fragments)
        return ids[(index.fragment_start[ids] <= line) & (index.fragment_end[ids] > line) & index.live[ids]]

    def window_holding(self, file_id: int, line: int) -> int | None:
        """A live window of the file holding a 0-based line (the first by id), or None."""
        holding = self.live_windows_holding(file_id, line)
        return int(holding[0]) if holding.size else None

    def windows_overlapping(self, path: str, first_line: int, last_line: int) -> np.ndarray:
        """Ids of the file's windows, live or not, overlapping lines [first_line, last_line] (0-based)."""
        index = self._index
        file_id = index.file_id(path)
        if file_id is None:
            return np.zeros(0, dtype=np.int64)
        record = index.files[file_id]
        assert record is not None
        ids = np.arange(record.first_fragment, record.first_fragment + record.n_fragments)
        starts, ends = index.fragment_start[ids], index.fragment_end[ids]
        return ids[(starts <= last_line) & (ends > first_line)]

    def all_live(self, fragments: np.ndarray) -> bool:
        """Whether every fragment id in `fragments` is a live window."""
        return bool(self._index.live[fragments].all())

    @property
    def n_fragments(self) -> int:
        return self._index.n_fragments
