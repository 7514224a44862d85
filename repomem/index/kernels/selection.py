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
    return _top_k(values, None, k)


@njit(cache=True, nogil=True)
def top_k_offered(values, offered, k):
    """`top_k_positions` among the positions where `offered` (bool, shape (n,)) holds: fewer than
    k where fewer are offered. Positions stay those of `values`, where masking the others with
    -inf cost a pass and an array of n."""
    return _top_k(values, offered, k)


@njit(cache=True, nogil=True)
def _top_k(values, offered, k):
    """The k slots' pass; `offered` None: every position (numba compiles that case without the test)."""
    n = values.shape[0]
    k = max(0, min(k, n))
    slot_pos = np.empty(k, dtype=np.int64)
    slot_val = np.empty(k, dtype=np.float64)
    if k == 0:
        return slot_pos
    filled = 0
    worst = 0
    for i in range(n):
        if offered is not None and not offered[i]:
            continue
        value = values[i]
        if filled < k:
            slot_pos[filled] = i
            slot_val[filled] = value
            filled += 1
            if filled < k:
                continue
        elif value > slot_val[worst]:  # equal: the kept one has the lower position and stays
            slot_pos[worst] = i
            slot_val[worst] = value
        else:
            continue
        # The worst slot: smallest value, and of equal values the highest position.
        worst = 0
        for s in range(1, k):
            if slot_val[s] < slot_val[worst] or (slot_val[s] == slot_val[worst] and slot_pos[s] > slot_pos[worst]):
                worst = s
    # Insertion sort of the filled slots by (value descending, position ascending).
    for a in range(1, filled):
        pos = slot_pos[a]
        val = slot_val[a]
        b = a - 1
        while b >= 0 and (slot_val[b] < val or (slot_val[b] == val and slot_pos[b] > pos)):
            slot_pos[b + 1] = slot_pos[b]
            slot_val[b + 1] = slot_val[b]
            b -= 1
        slot_pos[b + 1] = pos
        slot_val[b + 1] = val
    return slot_pos[:filled]


@njit(cache=True, nogil=True)
def largest_positions(values, k):
    """Positions of the k largest of `values` (float64, shape (n,), no NaN), in no set order; of
    equal values the lower positions. A heap of k slots whose root is the worst one kept (smallest
    value, of equal values the highest position): one pass, and a sift only where a value beats the
    root, where np.argpartition over a query's scores (one per fragment) took ~0.45 ms for k = 256."""
    n = values.shape[0]
    k = min(k, n)
    slot_pos = np.empty(k, dtype=np.int64)
    slot_val = np.empty(k, dtype=np.float64)
    for i in range(k):  # sift up: later positions of equal value are the worse ones
        child = i
        while child > 0:
            parent = (child - 1) // 2
            if slot_val[parent] < values[i] or (slot_val[parent] == values[i] and slot_pos[parent] > i):
                break
            slot_pos[child] = slot_pos[parent]
            slot_val[child] = slot_val[parent]
            child = parent
        slot_pos[child] = i
        slot_val[child] = values[i]
    for i in range(k, n):
        value = values[i]
        if not value > slot_val[0]:  # equal: the kept one has the lower position and stays
            continue
        parent = 0
        while True:  # sift down from the root: move the worse child up while it is worse than `value`
            child = 2 * parent + 1
            if child >= k:
                break
            right = child + 1
            if right < k and (slot_val[right] < slot_val[child]
                              or (slot_val[right] == slot_val[child] and slot_pos[right] > slot_pos[child])):
                child = right
            if slot_val[child] > value or (slot_val[child] == value and slot_pos[child] < i):
                break
            slot_pos[parent] = slot_pos[child]
            slot_val[parent] = slot_val[child]
            parent = child
        slot_pos[parent] = i
        slot_val[parent] = value
    return slot_pos


@njit(cache=True, nogil=True)
def strongest_of_row(cols, values, keep):
    """One row's `keep` largest entries (at least `keep` given): (bool mask, the keep-th largest
    value). Every larger value, then values equal to it by column id (one column twice: the
    earlier first), so the order of distinct entries never decides. Two selections, not a sort;
    not numba's np.partition and np.argsort, whose generic code took ~11 s of a first run's
    compilation."""
    count = values.shape[0]
    bar = kth_smallest(values, count - keep)
    kept = values > bar
    needed = keep - int(kept.sum())
    tied = np.flatnonzero(values == bar)
    if needed >= tied.shape[0]:
        kept[tied] = True
    elif needed > 0:
        tied_cols = cols[tied]
        last_col = kth_smallest(tied_cols, needed - 1)  # the needed-th lowest column id among the ties
        for at in range(tied.shape[0]):
            if tied_cols[at] < last_col:
                kept[tied[at]] = True
                needed -= 1
        for at in range(tied.shape[0]):
            if needed > 0 and tied_cols[at] == last_col:
                kept[tied[at]] = True
                needed -= 1
    return kept, bar


@njit(cache=True, nogil=True)
def kth_smallest(values, k):
    """The k-th smallest of `values` (0-based; shape (n,), k < n, no NaN): the value np.sort(values)[k]
    holds, found by quickselect on a copy (Hoare's partition around the median of three)."""
    work = values.copy()
    low, high = 0, work.shape[0] - 1
    while low < high:
        middle = (low + high) >> 1
        first, centre, last = work[low], work[middle], work[high]
        if first > centre:
            first, centre = centre, first
        pivot = centre if centre < last else (last if first < last else first)
        i, j = low, high
        while i <= j:
            while work[i] < pivot:
                i += 1
            while work[j] > pivot:
                j -= 1
            if i <= j:
                work[i], work[j] = work[j], work[i]
                i += 1
                j -= 1
        if k <= j:
            high = j
        elif k >= i:
            low = i
        else:
            return work[k]  # between the two parts: every value there equals the pivot
    return work[k]


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
            strongest = strongest_of_row(cols[start:end], values[start:end], keep)[0]
            for at in range(count):  # a loop: an array slice assigned compiles numba's shape-error
                kept[start + at] = strongest[at]  # message, ~3 s of a first run (buffers.grow)
        start = end
    return kept
