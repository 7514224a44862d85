"""Fragments: sliding windows over each file and the syntax nodes covering them.

Windows are RepoCoder's centred ones (DESIGN.md section 6): for i in 0, stride, 2*stride, ...
the window is lines [max(0, i - window/2), min(n, i + window/2)); identical windows merge and
blank windows are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from repomem.config import FragmentConfig
from repomem.kernels import cover_windows
from repomem.syntax import FileSyntax


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


def assemble_fragments(
    per_file: Sequence[tuple[int, int, FileFragments]], n_fragments: int, node_offset: np.ndarray
) -> FragmentTable:
    """Lay files' fragments out at their ids; `per_file` holds (file id, first fragment id, data).

    Ids not covered (fragments of replaced files) get no nodes and belong to file -1. Node
    indices become global through the graph's node offsets.
    """
    file = np.full(n_fragments, -1, dtype=np.int32)
    start = np.zeros(n_fragments, dtype=np.int32)
    end = np.zeros(n_fragments, dtype=np.int32)
    count = np.zeros(n_fragments, dtype=np.int64)
    slot_frag, slot_node, slot_weight = [], [], []
    for file_id, first, fragments in per_file:
        n = fragments.starts.shape[0]
        file[first : first + n] = file_id
        start[first : first + n] = fragments.starts
        end[first : first + n] = fragments.ends
        count[first : first + n] = np.bincount(fragments.cover_window, minlength=n)
        slot_frag.append(fragments.cover_window.astype(np.int64) + first)
        slot_node.append(fragments.cover_node.astype(np.int64) + node_offset[file_id])
        slot_weight.append(fragments.cover_weight.astype(np.float64))
    frag = np.concatenate(slot_frag) if slot_frag else np.zeros(0, dtype=np.int64)
    nodes = np.concatenate(slot_node) if slot_node else np.zeros(0, dtype=np.int64)
    weights = np.concatenate(slot_weight) if slot_weight else np.zeros(0)
    order = np.argsort(frag, kind="stable")
    indptr = np.zeros(n_fragments + 1, dtype=np.int64)
    np.cumsum(count, out=indptr[1:])
    totals = np.bincount(frag, weights=weights, minlength=n_fragments)
    return FragmentTable(file, start, end, indptr, nodes[order], weights[order], totals)
