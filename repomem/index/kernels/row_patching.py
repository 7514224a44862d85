"""An edit's changes to the adjacency rows kept between edits, in place where they fit (numba)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit


class AdjacencySlots(NamedTuple):
    """The adjacency rows an edit patches, all changed in place: node u's neighbours are
    indices[row_start[u]:row_end[u]], their step costs at the same slots of `costs` (inf: a freed
    slot). The arrays have room past the slots in use for every added entry and every moved row."""

    row_start: np.ndarray  # int64, shape (n_nodes,)
    row_end: np.ndarray  # int64, shape (n_nodes,)
    indices: np.ndarray  # int64, shape (capacity,): neighbour node ids
    costs: np.ndarray  # float64, shape (capacity,): step costs -ln w, inf for a freed slot


class EntriesByNode(NamedTuple):
    """Entries listed per patched node: nodes[t]'s are (other, cost) at [first[t], first[t + 1])."""

    first: np.ndarray  # int64, shape (n_patched + 1,)
    other: np.ndarray  # int64, shape (n_entries,): neighbour node ids
    cost: np.ndarray  # float64, shape (n_entries,): step costs -ln w


@njit(cache=True, nogil=True)
def patch_rows(slots, n_slots, dead, nodes, dropped, added):
    """Change the adjacency rows of `nodes` (int64, distinct) in `slots` where they have room.

    Node nodes[t] loses its entries to `dead` nodes (bool, shape (n_nodes,)) and its entries in
    `dropped`: their cost becomes inf (a search never steps over it). It gains its entries in
    `added` in those slots; when it gains more than it has, the row moves to the end of the
    arrays, from slot `n_slots` (the first slot not in use).
    Returns (slots in use, drops that matched no entry: 0 unless the lists disagree with the rows,
    the change in slots holding no entry).
    """
    row_start, row_end, indices, costs = slots
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
        for d in range(dropped.first[t], dropped.first[t + 1]):
            found = False
            for slot in range(start, end):
                if costs[slot] == dropped.cost[d] and indices[slot] == dropped.other[d]:
                    costs[slot] = np.inf
                    free += 1
                    unused += 1
                    found = True
                    break
            if not found:
                unmatched += 1
        n_add = added.first[t + 1] - added.first[t]
        if n_add > free:
            # Too few free slots: the kept entries and the added ones move to the end.
            moved = n_slots
            for slot in range(start, end):
                if costs[slot] != np.inf:
                    indices[n_slots] = indices[slot]
                    costs[n_slots] = costs[slot]
                    n_slots += 1
            unused += (end - start) - free  # the old slots left behind (free ones counted already)
            for a in range(added.first[t], added.first[t + 1]):
                indices[n_slots] = added.other[a]
                costs[n_slots] = added.cost[a]
                n_slots += 1
            row_start[node] = moved
            row_end[node] = n_slots
            continue
        slot = start
        for a in range(added.first[t], added.first[t + 1]):
            while costs[slot] != np.inf:
                slot += 1
            indices[slot] = added.other[a]
            costs[slot] = added.cost[a]
            unused -= 1
    return n_slots, unmatched, unused
