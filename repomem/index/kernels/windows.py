"""The syntax nodes that cover each window of one file (numba; docs/design.md section 3)."""

from __future__ import annotations

import numpy as np
from numba import njit

from repomem.index.kernels.buffers import grow


@njit(cache=True, nogil=True)
def cover_windows(parent, start_line, end_line, length, line_chars, window_starts, window_ends):
    """Nodes covering each window of one file (docs/design.md section 3).

    A window [a, b) (0-based lines, b exclusive) is covered by its maximal fully contained
    nodes (weight = node length in bytes) plus, for each remaining non-blank line, the innermost
    node holding that line (weight = non-whitespace characters of such lines).
    Returns (window index, node index, weight) triples as three int arrays, sorted by window.
    """
    n_nodes = parent.shape[0]
    n_lines = line_chars.shape[0]
    owner = np.zeros(n_lines, dtype=np.int32)
    for node in range(n_nodes):  # pre-order: later (deeper) nodes overwrite their ancestors
        for line in range(max(start_line[node], 0), min(end_line[node], n_lines - 1) + 1):
            owner[line] = node
    capacity = 64 + 8 * window_starts.shape[0]
    out_window = np.empty(capacity, dtype=np.int32)
    out_node = np.empty(capacity, dtype=np.int32)
    out_weight = np.empty(capacity, dtype=np.int64)
    count = 0
    covered = np.zeros(n_lines, dtype=np.bool_)
    partial = np.zeros(n_nodes, dtype=np.int64)
    # A window holds only nodes starting inside it. Walk order is document order, so start lines
    # never decrease and those nodes are one run of indices, found by a pointer that only moves
    # forward (windows sorted by first line): about linear, where every node against every window
    # was quadratic (docs/measurements.md#parsing-and-analysis).
    # Any other order: all nodes, as before.
    in_order = True
    for node in range(1, n_nodes):
        if start_line[node] < start_line[node - 1]:
            in_order = False
            break
    for w in range(1, window_starts.shape[0]):
        if window_starts[w] < window_starts[w - 1]:
            in_order = False
            break
    first_candidate = 0
    for w in range(window_starts.shape[0]):
        a = window_starts[w]
        b = window_ends[w]
        for line in range(a, b):
            covered[line] = False
        if in_order:
            while first_candidate < n_nodes and start_line[first_candidate] < a:
                first_candidate += 1
        for node in range(first_candidate if in_order else 0, n_nodes):
            if in_order and start_line[node] > b - 1:
                break
            if start_line[node] >= a and end_line[node] <= b - 1:
                p = parent[node]
                if p >= 0 and start_line[p] >= a and end_line[p] <= b - 1:
                    continue
                if count == capacity:
                    capacity *= 2
                    out_window = grow(out_window, capacity)
                    out_node = grow(out_node, capacity)
                    out_weight = grow(out_weight, capacity)
                out_window[count] = w
                out_node[count] = node
                out_weight[count] = max(length[node], 1)
                count += 1
                for line in range(start_line[node], end_line[node] + 1):
                    covered[line] = True
        touched_first = count
        for line in range(a, b):
            if covered[line] or line_chars[line] == 0:
                continue
            node = owner[line]
            if partial[node] == 0:
                if count == capacity:
                    capacity *= 2
                    out_window = grow(out_window, capacity)
                    out_node = grow(out_node, capacity)
                    out_weight = grow(out_weight, capacity)
                out_window[count] = w
                out_node[count] = node
                out_weight[count] = 0
                count += 1
            partial[node] += line_chars[line]
        for slot in range(touched_first, count):
            out_weight[slot] = partial[out_node[slot]]
            partial[out_node[slot]] = 0
    return out_window[:count].copy(), out_node[:count].copy(), out_weight[:count].copy()
