"""Which files call into which: the reverse of the per-file call rows, kept up to date by updates.

An edit needs the files that call into the files it changed (their call rows point at nodes
that moved); scanning every call row of the repository for them cost too much of an edit
(docs/measurements.md#an-edit).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np


class CallerMap:
    """target file -> the files with at least one call row into it (`parsed.call_array` rows)."""

    def __init__(self, calls: Mapping[int, np.ndarray]) -> None:
        self._callers: dict[int, set[int]] = {}
        for source, rows in calls.items():
            for target in np.unique(rows[:, 2]).tolist():
                self._callers.setdefault(target, set()).add(source)

    def callers_of(self, targets: Iterable[int]) -> set[int]:
        out: set[int] = set()
        for target in targets:
            out.update(self._callers.get(target, ()))
        return out

    def replace(self, old_rows: np.ndarray, new_rows: np.ndarray, n_files: int) -> None:
        """Some files' call rows went from `old_rows` to `new_rows` (every row of those files, shape
        (n, 5) each; file ids below `n_files`)."""
        before = set(np.unique(old_rows[:, 0] * n_files + old_rows[:, 2]).tolist())
        after = set(np.unique(new_rows[:, 0] * n_files + new_rows[:, 2]).tolist())
        for pair in before - after:
            callers = self._callers.get(pair % n_files)
            if callers is not None:
                callers.discard(pair // n_files)
        for pair in after - before:
            self._callers.setdefault(pair % n_files, set()).add(pair // n_files)


def rows_of(arrays: Iterable[np.ndarray | None]) -> np.ndarray:
    """Call rows of several files as one int64 array, shape (n, 5)."""
    present = [a for a in arrays if a is not None and a.shape[0]]
    return np.concatenate(present) if present else np.zeros((0, 5), dtype=np.int64)
