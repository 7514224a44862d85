"""An edit's changes to the adjacency rows kept between edits, in place where they fit (numba)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def patch_rows(row_start, row_end, indices, costs, n_slots, dead, nodes, drop_first, drop_other, drop_cost,
               add_first, add_other, add_cost):
    """Change the adjacency rows of `nodes` (distinct) in place where they have room.

    Node nodes[t] loses its entries to `dead` nodes and one entry per (other, cost) in
    drop_other/drop_cost[drop_first[t]:drop_first[t + 1]]: their cost becomes inf (a search
    never steps over it). It gains the entries in add_other/add_cost[add_first[t]:add_first[t + 1]]
    in those slots; when it gains more than it has, the row moves to the end of `indices`/`costs`
    from slot `n_slots` (the caller made room for every added entry and every moved row).
    Returns (slots in use, drops that matched no entry: 0 unless the lists disagree with the rows,
    the change in slots holding no entry).
    """
    unmatched = 0
    unused = 0
    for t in range(nodes.shape[0]):
        node = nodes[t]
        start, end = row_start[node], row_end[node]
        free = 0
        for slot in range(start, end):
            if costs[slot] == np.inf:
                free += 1
            elif dead[indices[slot]]:
                costs[slot] = np.inf
                free += 1
                unused += 1
        for d in range(drop_first[t], drop_first[t + 1]):
            found = False
            for slot in range(start, end):
                if costs[slot] == drop_cost[d] and indices[slot] == drop_other[d]:
                    costs[slot] = np.inf
                    free += 1
                    unused += 1
                    found = True
                    break
            if not found:
                unmatched += 1
        n_add = add_first[t + 1] - add_first[t]
        if n_add > free:
            # Too few free slots: the kept entries and the added ones move to the end.
            moved = n_slots
            for slot in range(start, end):
                if costs[slot] != np.inf:
                    indices[n_slots] = indices[slot]
                    costs[n_slots] = costs[slot]
                    n_slots += 1
            unused += (end - start) - free  # the old slots left behind (free ones counted already)
            for a in range(add_first[t], add_first[t + 1]):
                indices[n_slots] = add_other[a]
                costs[n_slots] = add_cost[a]
                n_slots += 1
            row_start[node] = moved
            row_end[node] = n_slots
            continue
        slot = start
        for a in range(add_first[t], add_first[t + 1]):
            while costs[slot] != np.inf:
                slot += 1
            indices[slot] = add_other[a]
            costs[slot] = add_cost[a]
            unused -= 1
    return n_slots, unmatched, unused
