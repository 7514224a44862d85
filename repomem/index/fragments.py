"""Fragments: sliding windows over each file and the syntax nodes covering them.

Windows are RepoCoder's centred ones (docs/design.md section 6): for i in 0, stride, 2*stride, ...
the window is lines [max(0, i - window/2), min(n, i + window/2)); identical windows merge and
blank windows are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from repomem.config import FragmentConfig
from repomem.index.kernels.windows import cover_windows
from repomem.languages.parsed import FileSyntax


@dataclass(frozen=True)
class FileFragments:
    """Fragments of one file: windows and their covering nodes (file-local node indices)."""

    starts: np.ndarray  # int32, shape (n_windows,), first line, 0-based
    ends: np.ndarray  # int32, shape (n_windows,), line after the last one
    cover_window: np.ndarray  # int32, shape (n_cover,), window of each covering entry
    cover_node: np.ndarray  # int32, shape (n_cover,), file-local node index
    cover_weight: np.ndarray  # int64, shape (n_cover,), len_k of eq. 8


def window_bounds(line_chars: np.ndarray, config: FragmentConfig) -> tuple[np.ndarray, np.ndarray]:
    n_lines = int(line_chars.shape[0])
    half = config.window_lines // 2
    centres = np.arange(0, max(n_lines, 1), config.stride_lines, dtype=np.int64)
    starts = np.maximum(0, centres - half)
    ends = np.minimum(n_lines, centres + config.window_lines - half)
    keep = np.ones(starts.shape[0], dtype=bool)
    keep[1:] = (starts[1:] != starts[:-1]) | (ends[1:] != ends[:-1])
    starts, ends = starts[keep], ends[keep]
    prefix = np.concatenate([[0], np.cumsum(line_chars, dtype=np.int64)])
    non_blank = prefix[ends] - prefix[starts] > 0
    return starts[non_blank].astype(np.int32), ends[non_blank].astype(np.int32)


def file_fragments(syntax: FileSyntax, config: FragmentConfig) -> FileFragments:
    starts, ends = window_bounds(syntax.line_chars, config)
    window, node, weight = cover_windows(
        syntax.parent, syntax.start_line, syntax.end_line, syntax.length.astype(np.int64),
        syntax.line_chars.astype(np.int64), starts, ends,
    )
    return FileFragments(starts, ends, window, node, weight)


@dataclass(frozen=True)
class FragmentTable:
    """All fragments of a repository with their covering graph nodes (CSR, fragment-major)."""

    file: np.ndarray  # int32, shape (n,), file index
    start: np.ndarray  # int32, shape (n,), first line (0-based)
    end: np.ndarray  # int32, shape (n,), line after the last
    indptr: np.ndarray  # int64, shape (n + 1,)
    nodes: np.ndarray  # int64, shape (nnz,), global graph node
    weights: np.ndarray  # float64, shape (nnz,), len_k
    totals: np.ndarray  # float64, shape (n,), L_i = sum of len_k

    @property
    def size(self) -> int:
        return int(self.file.shape[0])


@dataclass(frozen=True)
class CoverEntries:
    """Fragment -> node incidence of a whole index, sorted by fragment id (shape (nnz,) each).

    Nodes are file-local so the entries survive renumbering of the graph; fragment ids only grow,
    so an update drops dead fragments' rows and appends new ones without re-sorting.
    """

    fragment: np.ndarray  # int64
    file: np.ndarray  # int64
    local_node: np.ndarray  # int64
    weight: np.ndarray  # float64, len_k

    @staticmethod
    def of_files(per_file: Sequence[tuple[int, int, FileFragments]]) -> CoverEntries:
        """Entries of files given as (file id, first fragment id, windows), in any order."""
        parts = [
            (f.cover_window.astype(np.int64) + first, np.full(f.cover_window.shape[0], file_id, dtype=np.int64),
             f.cover_node.astype(np.int64), f.cover_weight.astype(np.float64))
            for file_id, first, f in per_file
        ]
        if not parts:
            empty = np.zeros(0, dtype=np.int64)
            return CoverEntries(empty, empty, empty, np.zeros(0))
        fragment, file, local, weight = (np.concatenate(column) for column in zip(*parts))
        order = np.argsort(fragment, kind="stable")
        return CoverEntries(fragment[order], file[order], local[order], weight[order])

    @staticmethod
    def joined(parts: Sequence[CoverEntries]) -> CoverEntries:
        """Entries of several updates end to end (each update's ids above the one before's)."""
        if not parts:
            return CoverEntries.of_files([])
        return CoverEntries(*(np.concatenate([getattr(p, name) for p in parts])
                              for name in ("fragment", "file", "local_node", "weight")))

    def without(self, dead: np.ndarray) -> CoverEntries:
        """The entries of fragments not in `dead`."""
        keep = ~np.isin(self.fragment, dead)
        return CoverEntries(self.fragment[keep], self.file[keep], self.local_node[keep], self.weight[keep])

    def replaced(self, dead: np.ndarray, added: CoverEntries) -> CoverEntries:
        """Drop the entries of fragments `dead` (ids, any order) and append `added`, which holds
        only ids above every current one. Entries are sorted by fragment, so each dead fragment's
        are one run: the kept runs are copied once (a mask over every entry copied them twice and
        gathered a flag per entry; see docs/measurements.md#an-edit)."""
        dead = np.unique(dead)
        first = np.searchsorted(self.fragment, dead, side="left")
        end = np.searchsorted(self.fragment, dead, side="right")
        # Kept runs: from each dead run's end to the next dead run's start.
        starts = np.concatenate([[0], end])
        stops = np.concatenate([first, [self.fragment.shape[0]]])

        def kept(column: np.ndarray, extra: np.ndarray) -> np.ndarray:
            return np.concatenate([*(column[a:b] for a, b in zip(starts.tolist(), stops.tolist()) if b > a), extra])

        return CoverEntries(kept(self.fragment, added.fragment), kept(self.file, added.file),
                            kept(self.local_node, added.local_node), kept(self.weight, added.weight))


def fragment_table(
    entries: CoverEntries, file: np.ndarray, start: np.ndarray, end: np.ndarray, node_offset: np.ndarray
) -> FragmentTable:
    """The incidence as a CSR over fragment ids with global node ids from the graph's offsets."""
    n_fragments = int(file.shape[0])
    indptr = np.zeros(n_fragments + 1, dtype=np.int64)
    np.cumsum(np.bincount(entries.fragment, minlength=n_fragments), out=indptr[1:])
    nodes = node_offset[entries.file] + entries.local_node
    totals = np.bincount(entries.fragment, weights=entries.weight, minlength=n_fragments)
    return FragmentTable(file, start, end, indptr, nodes, entries.weight, totals)
