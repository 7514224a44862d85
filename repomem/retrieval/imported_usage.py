"""Usage of what the file imports and has not called yet, found through call edges.

An API completion mostly calls a repository function the file imports (names in scope put the name
in the prompt) but that the code before the cursor has not called: the model knows the name, not
how it is called. The windows elsewhere in the repository that call exactly those definitions
(resolved call edges into them, not the same words) are the usage to copy; BM25 then picks among
them the one most like the code before the cursor.
"""

from __future__ import annotations

import numpy as np

from repomem.index.repo_index import RepoIndex
from repomem.retrieval.shared_callees import callee_keys, cursor_function_rows

# call rows (source file, source node, target file, target node, hops): parsed.call_array
_SOURCE_FILE, _SOURCE_NODE, _TARGET_FILE, _TARGET_NODE = 0, 1, 2, 3


def imported_not_called(index: RepoIndex, path: str, function_line: int, line: int) -> np.ndarray:
    """Keys (callee_keys) of the repository definitions in other files that `path`'s imports bind
    and that its function on `function_line` has not called above 0-based `line`; shape (n,)."""
    resolved = index.resolved_file(path)
    if resolved is None:
        return np.zeros(0, dtype=np.int64)
    file_id, syntax, resolution = resolved
    n_files = len(index.syntax)
    keys = set()
    for binding in syntax.imports:
        target = resolution.resolve_name(file_id, binding.local)
        if target is not None and target[0] != file_id and not target[1].in_function:
            keys.add(target[1].node * n_files + target[0])
    called = cursor_function_rows(index, file_id, syntax, function_line, line)
    keys -= set(callee_keys(called, n_files).tolist())
    return np.asarray(sorted(keys), dtype=np.int64)


def usage_windows(index: RepoIndex, path: str, function_line: int, line: int) -> np.ndarray:
    """Ids of live windows holding a call to a definition `imported_not_called` gives, in id order."""
    wanted = imported_not_called(index, path, function_line, line)
    if not wanted.size:
        return np.zeros(0, dtype=np.int64)
    rows = index.all_calls()
    rows = rows[np.isin(callee_keys(rows, len(index.syntax)), wanted)]
    windows: set[int] = set()
    for source_file, source_node in rows[:, [_SOURCE_FILE, _SOURCE_NODE]].tolist():
        record, syntax = index.files[source_file], index.syntax[source_file]
        if record is None or syntax is None:
            continue
        site = int(syntax.start_line[source_node])
        ids = np.arange(record.first_fragment, record.first_fragment + record.n_fragments)
        holding = ids[(index.fragment_start[ids] <= site) & (index.fragment_end[ids] > site) & index.live[ids]]
        windows.update(holding.tolist())
    return np.asarray(sorted(windows), dtype=np.int64)
