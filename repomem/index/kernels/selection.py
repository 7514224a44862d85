"""The k largest entries of a list or of each row (numba): a query's top K, a relation row's top list.
Ties go to the lower position or column id, so the order the entries came in never decides."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def top_k_positions(values, k):
    """Positions of the k largest of `values` (float64, shape (n,), no NaN), best first; equal
    values in position order. One pass keeping k slots (k is ~10: a query's top K), where a full
    partition of 50k scores cost 0.5 ms."""
    n = values.shape[0]
    k = min(k, n)
    slot_pos = np.empty(k, dtype=np.int64)
    slot_val = np.empty(k, dtype=np.float64)
    worst = 0
    for i in range(n):
        value = values[i]
        if i < k:
            slot_pos[i] = i
            slot_val[i] = value
        elif value > slot_val[worst]:  # equal: the kept one has the lower position and stays
            slot_pos[worst] = i
            slot_val[worst] = value
        else:
            continue
        if i >= k - 1:
            # The worst slot: smallest value, and of equal values the highest position.
            worst = 0
            for s in range(1, k):
                if slot_val[s] < slot_val[worst] or (slot_val[s] == slot_val[worst] and slot_pos[s] > slot_pos[worst]):
                    worst = s
    # Insertion sort of the k slots by (value descending, position ascending).
    for a in range(1, k):
        pos = slot_pos[a]
        val = slot_val[a]
        b = a - 1
        while b >= 0 and (slot_val[b] < val or (slot_val[b] == val and slot_pos[b] > pos)):
            slot_pos[b + 1] = slot_pos[b]
            slot_val[b + 1] = slot_val[b]
            b -= 1
        slot_pos[b + 1] = pos
        slot_val[b + 1] = val
    return slot_pos


@njit(cache=True, nogil=True)
def strongest_of_row(cols, values, keep):
    """One row's `keep` largest entries (at least `keep` given): (bool mask, the keep-th largest
    value). Every larger value, then values equal to it by column id, so the order the entries
    came in never decides. A partition, not a sort."""
    count = values.shape[0]
    bar = np.partition(values, count - keep)[count - keep]
    kept = values > bar
    needed = keep - int(kept.sum())
    tied = np.flatnonzero(values == bar)
    for position in np.argsort(cols[tied])[:needed]:
        kept[tied[position]] = True
    return kept, bar


@njit(cache=True, nogil=True)
def strongest_in_row_runs(rows, cols, values, keep):
    """Which entries are among their row's `keep` largest (ties to the lower column id), for
    entries whose rows come in runs (each row's entries next to each other, as relation rows come
    out). bool, shape (n,). A partition per row where a sort of all entries took 2.5 ms an edit."""
    n = rows.shape[0]
    kept = np.zeros(n, dtype=np.bool_)
    start = 0
    while start < n:
        end = start + 1
        while end < n and rows[end] == rows[start]:
            end += 1
        count = end - start
        if count <= keep:
            kept[start:end] = True
        else:
            kept[start:end] = strongest_of_row(cols[start:end], values[start:end], keep)[0]
        start = end
    return kept
