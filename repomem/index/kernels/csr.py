"""Compressed sparse rows (numba): built from edge lists, sorted, mirrored, trimmed, transposed, read."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def symmetric_csr(n_nodes, edge_a, edge_b, edge_cost):
    """Adjacency lists of an undirected edge list by counting sort: (indptr, indices, costs)."""
    degree = np.zeros(n_nodes + 1, dtype=np.int64)
    for e in range(edge_a.shape[0]):
        degree[edge_a[e] + 1] += 1
        degree[edge_b[e] + 1] += 1
    indptr = np.cumsum(degree)
    fill = indptr[:-1].copy()
    indices = np.empty(indptr[-1], dtype=np.int64)
    costs = np.empty(indptr[-1], dtype=np.float64)
    for e in range(edge_a.shape[0]):
        a = edge_a[e]
        b = edge_b[e]
        indices[fill[a]] = b
        costs[fill[a]] = edge_cost[e]
        fill[a] += 1
        indices[fill[b]] = a
        costs[fill[b]] = edge_cost[e]
        fill[b] += 1
    return indptr, indices, costs


@njit(cache=True, nogil=True)
def _column_slot(indptr, cols, row, col):
    """Position of `col` in `row` of a CSR matrix whose rows are sorted by column, else -1."""
    low, high = indptr[row], indptr[row + 1]
    while low < high:
        middle = (low + high) >> 1
        if cols[middle] < col:
            low = middle + 1
        else:
            high = middle
    return low if low < indptr[row + 1] and cols[low] == col else -1


@njit(cache=True, nogil=True)
def sort_rows_by_column(indptr, cols, values):
    """Sort each CSR row's entries by column, in place (no column twice in a row, so any sort gives
    the same rows). Rows of up to 64 entries (a relation row's top list) by insertion, longer ones
    by heapsort: neither allocates, and numba's np.argsort compiled for seconds on a first run."""
    for row in range(indptr.shape[0] - 1):
        first, end = indptr[row], indptr[row + 1]
        if end - first > 64:
            _heapsort_by_column(cols, values, first, end)
            continue
        for at in range(first + 1, end):
            col, value = cols[at], values[at]
            to = at
            while to > first and cols[to - 1] > col:
                cols[to], values[to] = cols[to - 1], values[to - 1]
                to -= 1
            cols[to], values[to] = col, value


@njit(cache=True, nogil=True)
def _heapsort_by_column(cols, values, first, end):
    """cols[first:end] sorted ascending in place, values[first:end] moved with them."""
    n = end - first
    for top in range(n // 2 - 1, -1, -1):
        _sift_down(cols, values, first, top, n)
    for last in range(n - 1, 0, -1):
        cols[first], cols[first + last] = cols[first + last], cols[first]
        values[first], values[first + last] = values[first + last], values[first]
        _sift_down(cols, values, first, 0, last)


@njit(cache=True, nogil=True)
def _sift_down(cols, values, first, parent, size):
    """Restore the max-heap of cols[first:first + size] below `parent` (values follow their column)."""
    col, value = cols[first + parent], values[first + parent]
    while True:
        child = 2 * parent + 1
        if child >= size:
            break
        if child + 1 < size and cols[first + child + 1] > cols[first + child]:
            child += 1
        if cols[first + child] <= col:
            break
        cols[first + parent], values[first + parent] = cols[first + child], values[first + child]
        parent = child
    cols[first + parent], values[first + parent] = col, value


@njit(cache=True, nogil=True)
def sort_row_range_by_column(indptr, cols, values, first_row, end_row):
    """`sort_rows_by_column` on rows [first_row, end_row) alone: two threads sort two ranges."""
    sort_rows_by_column(indptr[first_row:end_row + 1], cols, values)


# max(A, A^T) of a square CSR matrix A (rows sorted by column, values > 0) in three passes, the
# result allocated at its exact size and nothing else graph-sized made (scipy's maximum held A, A^T
# and an unpruned result of both at once: docs/measurements.md#memory-of-a-cold-build):
# `mark_mirrored` finds the pairs A has both ways and counts, per row, the pairs only A^T has;
# `place_mirror_only` puts those at the tail of their row; `merge_mirrored_rows` merges each row
# of A with its tail. The first and the last pass are per row, so two threads take a range each
# (relations._symmetric_max).


@njit(cache=True, nogil=True)
def mark_mirrored(indptr, cols, mirrored, only_mirrored, first_row, end_row):
    """For the rows [first_row, end_row): mirrored[slot] = whether the pair at `slot` is also in A
    the other way round (a binary search each), and only_mirrored[col] += 1 for each pair that is
    not (`only_mirrored` is this range's own count, int64 of the matrix's size)."""
    for row in range(first_row, end_row):
        for slot in range(indptr[row], indptr[row + 1]):
            col = cols[slot]
            if _column_slot(indptr, cols, col, row) >= 0:
                mirrored[slot] = True
            else:
                mirrored[slot] = False
                only_mirrored[col] += 1


@njit(cache=True, nogil=True)
def place_mirror_only(indptr, cols, values, mirrored, out_indptr, only_mirrored, out_cols, out_values):
    """The pairs only A^T has go to the tail of their row, in ascending column order (the rows
    are scanned in order): one pass over A, scattered by column."""
    fill = out_indptr[1:] - only_mirrored
    for row in range(indptr.shape[0] - 1):
        for slot in range(indptr[row], indptr[row + 1]):
            col = cols[slot]
            if not mirrored[slot]:
                out_cols[fill[col]] = row
                out_values[fill[col]] = values[slot]
                fill[col] += 1


@njit(cache=True, nogil=True)
def merge_mirrored_rows(indptr, cols, values, mirrored, out_indptr, only_mirrored, out_cols, out_values,
                        first_row, end_row):
    """Rows [first_row, end_row) of max(A, A^T): A's row (sorted) merged from the front with the
    pairs only A^T has, already at the row's tail. The write position never passes the tail's
    read position, so nothing unread is overwritten; a row writes only its own slots."""
    for row in range(first_row, end_row):
        write = out_indptr[row]
        tail, tail_end = out_indptr[row + 1] - only_mirrored[row], out_indptr[row + 1]
        for slot in range(indptr[row], indptr[row + 1]):
            col = cols[slot]
            while tail < tail_end and out_cols[tail] < col:
                out_cols[write] = out_cols[tail]
                out_values[write] = out_values[tail]
                write += 1
                tail += 1
            value = values[slot]
            if mirrored[slot]:
                value = max(value, values[_column_slot(indptr, cols, col, row)])
            out_cols[write] = col
            out_values[write] = value
            write += 1
        while tail < tail_end:
            out_cols[write] = out_cols[tail]
            out_values[write] = out_values[tail]
            write += 1
            tail += 1


@njit(cache=True, nogil=True)
def upper_triangle(indptr, indices, data):
    """(indptr, indices, float32 data) of a CSR matrix's entries above the diagonal, allocated at
    their exact size (a count pass first): no array as long as the whole matrix is made."""
    n_rows = indptr.shape[0] - 1
    out_indptr = np.zeros(n_rows + 1, dtype=indptr.dtype)
    for row in range(n_rows):
        kept = 0
        for slot in range(indptr[row], indptr[row + 1]):
            if indices[slot] > row:
                kept += 1
        out_indptr[row + 1] = out_indptr[row] + kept
    out_indices = np.empty(out_indptr[n_rows], dtype=indices.dtype)
    out_data = np.empty(out_indptr[n_rows], dtype=np.float32)
    at = 0
    for row in range(n_rows):
        for slot in range(indptr[row], indptr[row + 1]):
            if indices[slot] > row:
                out_indices[at] = indices[slot]
                out_data[at] = data[slot]
                at += 1
    return out_indptr, out_indices, out_data


@njit(cache=True, nogil=True)
def symmetric_from_upper(indptr, indices, data):
    """The symmetric CSR matrix (float64 data, sorted columns) whose strict upper triangle is the
    given one (`upper_triangle`'s output). Zeros are dropped, as scipy's sum U + U.T drops them.
    Two passes over the triangle, allocating only the result: the first counts each row's entries;
    the second walks the rows in order, and by the time it reaches a row every entry below that
    row's diagonal (gathered from the rows above it, in row order, so already sorted) is in place,
    so the row's own upper entries follow them, while each is also put into its column's row as
    that row's next lower entry. As fast as scipy's sum and transpose without their temporaries (a
    load's peak is lower), and one pass fewer over the triangle than gathering the lower entries first
    (docs/measurements.md#index-load). int64 row pointers (the caller
    narrows them). Raises ValueError if a row's columns are not increasing and above the row (a
    damaged index: the result would not be sorted, nor the matrix saved)."""
    n_rows = indptr.shape[0] - 1
    degree = np.zeros(n_rows + 1, dtype=np.int64)
    for row in range(n_rows):
        previous = row
        for slot in range(indptr[row], indptr[row + 1]):
            if indices[slot] <= previous:
                raise ValueError("W's stored triangle is not strictly upper with increasing columns")
            previous = indices[slot]
            if data[slot] != 0:
                degree[row + 1] += 1
                degree[indices[slot] + 1] += 1
    out_indptr = np.cumsum(degree)
    out_indices = np.empty(out_indptr[n_rows], dtype=indices.dtype)
    out_data = np.empty(out_indptr[n_rows], dtype=np.float64)
    fill = out_indptr[:-1].astype(np.int64)  # by row: where its next entry goes
    for row in range(n_rows):
        own = fill[row]  # past the row's lower entries, all placed by the rows above
        for slot in range(indptr[row], indptr[row + 1]):
            value = data[slot]
            if value != 0:
                column = indices[slot]
                out_indices[own] = column
                out_data[own] = value
                own += 1
                out_indices[fill[column]] = row  # row < column: a lower entry of row `column`
                out_data[fill[column]] = value
                fill[column] += 1
    return out_indptr, out_indices, out_data


@njit(cache=True, nogil=True)
def invert_incidence(indptr, nodes, weights, n_nodes):
    """Transpose of a fragment -> node incidence (CSR: `indptr` by fragment, `nodes`, `weights`):
    (indptr by node, fragment ids, weights), each node's fragments in fragment order. A counting
    sort: a stable argsort took too much of every edit (docs/measurements.md#an-edit)."""
    node_indptr = np.zeros(n_nodes + 1, dtype=np.int64)
    for slot in range(nodes.shape[0]):
        node_indptr[nodes[slot] + 1] += 1
    for node in range(n_nodes):
        node_indptr[node + 1] += node_indptr[node]
    fill = node_indptr[:-1].copy()
    out_frags = np.empty(nodes.shape[0], dtype=np.int64)
    out_weights = np.empty(nodes.shape[0], dtype=weights.dtype)
    for fragment in range(indptr.shape[0] - 1):
        for slot in range(indptr[fragment], indptr[fragment + 1]):
            node = nodes[slot]
            out_frags[fill[node]] = fragment
            out_weights[fill[node]] = weights[slot]
            fill[node] += 1
    return node_indptr, out_frags, out_weights


@njit(cache=True, nogil=True)
def row_slots(starts, ends):
    """Every slot of the rows [starts[i], ends[i]) of a CSR-like array, end to end (int64)."""
    total = 0
    for i in range(starts.shape[0]):
        total += ends[i] - starts[i]
    out = np.empty(total, dtype=np.int64)
    at = 0
    for i in range(starts.shape[0]):
        for slot in range(starts[i], ends[i]):
            out[at] = slot
            at += 1
    return out


@njit(cache=True, nogil=True)
def rows_times(indptr, indices, data, rows, x):
    """(A @ x)[rows] for a CSR matrix A, each row summed in stored order (as scipy's product)."""
    out = np.zeros(rows.shape[0])
    for at in range(rows.shape[0]):
        row = rows[at]
        total = 0.0
        # Unsigned positions: no wrap-around test per entry (kernels/postings.add_bm25_scores).
        for slot in range(np.uint64(indptr[row]), np.uint64(indptr[row + 1])):
            total += data[slot] * x[np.uint64(indices[slot])]
        out[at] = total
    return out


@njit(cache=True, nogil=True)
def running_sums_by_row(coded, pointer, out):
    """out[k] = the sum of `coded` from the start of k's row through k, in `out`'s integer dtype
    (the inverse of a delta coding by row). Summed in int64 and stored by truncation, which is the
    dtype's own wrapping arithmetic modulo 2**bits (a uint64 entry is taken by its bits). `pointer`:
    int64 row starts, checked by the caller (integer_coding.check_row_pointer)."""
    for row in range(pointer.shape[0] - 1):
        running = np.int64(0)
        for slot in range(pointer[row], pointer[row + 1]):
            running += np.int64(coded[slot])
            out[slot] = running
