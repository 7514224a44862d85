"""Bounded Dijkstra over the code graph and where its searches start (numba).

Costs are -ln w of the edge weights, so the cheapest path is the strongest: strength = exp(-cost).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

# Path costs this close are one cost level: products such as 0.8^3 * 0.5^9 hit a cutoff exactly,
# and float sums of -ln w differ in the last bits between paths and implementations.
COST_TOLERANCE = 1e-9


class GraphRows(NamedTuple):
    """The code graph as a search walks it. Node u's neighbours are indices[row_start[u]:row_end[u]],
    their step costs at the same slots of `costs`: a CSR's indptr[:-1] and indptr[1:], or the rows
    of `edit_graph.EditGraph`, which patches a node's row in place or moves it when an edit changes
    its edges (a step of inf cost is a freed slot, never taken)."""

    row_start: np.ndarray  # int64, shape (n_nodes,)
    row_end: np.ndarray  # int64, shape (n_nodes,)
    indices: np.ndarray  # int64, shape (n_slots,): neighbour node ids
    costs: np.ndarray  # float64, shape (n_slots,): step costs -ln w, inf for a freed slot
    queued_cost: float  # the step cost the FIFO takes (`most_common_cost`); NaN: the heap takes all
    distinct_neighbours: bool  # no parallel edges (a deduplicated graph): a hub's cut levels may be skipped


class SearchLimits(NamedTuple):
    """How far a search goes: the graph settings, in the units the search counts in."""

    limit: float  # largest path cost kept: -ln(graph.strength_cutoff) + COST_TOLERANCE
    max_reach: int  # graph.max_reach: most nodes one search keeps (whole cost levels only); 0 = no cap


class SearchScratch(NamedTuple):
    """One thread's search buffers, reused across searches: nothing is cleared between them, the
    per-node arrays are tagged by the search's stamp instead."""

    dist: np.ndarray  # float64, shape (n_nodes,): cost of each node seen by the search of `stamp`
    settled: np.ndarray  # int, shape (n_nodes,): stamp once settled, -stamp while only seen
    reached: np.ndarray  # int, shape (n_nodes,): settled nodes in settling order (cost ascending)
    heap_cost: np.ndarray  # float64, shape (capacity,): binary heap of (cost, node) ...
    heap_node: np.ndarray  # int, shape (capacity,)
    queue_cost: np.ndarray  # float64, shape (capacity,): ... and the FIFO of `queued_cost` steps
    queue_node: np.ndarray  # int, shape (capacity,)


class PrunedSpan(NamedTuple):
    """Nodes a search enters only while they can still lead out: [prune_first, prune_end) (the
    source's own file; an empty span prunes nothing), with the cheapest tree walk from node u to a
    portal at exit_cost[u - exit_first] (`exit_costs`)."""

    prune_first: int
    prune_end: int
    exit_cost: np.ndarray  # float64, shape (span,): costs -ln w
    exit_first: int  # the node exit_cost[0] belongs to


@njit(cache=True, nogil=True)
def _heap_push(heap_cost, heap_node, size, cost, node):
    i = size
    heap_cost[i] = cost
    heap_node[i] = node
    while i > 0:
        up = (i - 1) >> 1
        if heap_cost[up] <= heap_cost[i]:
            break
        heap_cost[up], heap_cost[i] = heap_cost[i], heap_cost[up]
        heap_node[up], heap_node[i] = heap_node[i], heap_node[up]
        i = up
    return size + 1


@njit(cache=True, nogil=True)
def _heap_pop(heap_cost, heap_node, size):
    size -= 1
    heap_cost[0] = heap_cost[size]
    heap_node[0] = heap_node[size]
    i = 0
    while True:
        left = 2 * i + 1
        if left >= size:
            break
        child = left
        if left + 1 < size and heap_cost[left + 1] < heap_cost[left]:
            child = left + 1
        if heap_cost[i] <= heap_cost[child]:
            break
        heap_cost[child], heap_cost[i] = heap_cost[i], heap_cost[child]
        heap_node[child], heap_node[i] = heap_node[i], heap_node[child]
        i = child
    return size


@njit(cache=True, nogil=True)
def bounded_dijkstra(graph, limits, scratch, source, stamp, pruned):
    """Shortest costs from `source` up to `limits.limit` (costs = -ln w, so strength = exp(-cost))
    over `graph` (a `GraphRows`).

    With `limits.max_reach` > 0, keeps at most that many nodes, and only whole cost levels (costs
    within `COST_TOLERANCE` tie): when the cap falls inside a level, that level is left out.
    Nodes settle strongest first, so what is left out is weaker than everything kept, and which
    nodes are kept does not depend on the order of the queues.

    Nodes of `pruned` (a `PrunedSpan`: the source's own file, whose nodes the caller does not
    want) are entered only while they can still lead out: cost so far + `exit_cost[node - exit_first]`
    (the cheapest way from that node to one with a non-syntax edge) within `limit`. That drops only
    dead ends, so every node outside the range keeps its exact cost.

    Two queues: edges whose cost is exactly `graph.queued_cost` (the graph's most common edge cost,
    see `most_common_cost`: syntax edges, most of them) go through a FIFO, every other edge
    through a binary heap. Nodes settle in cost order, so what they push over one fixed cost is
    pushed in cost order too: the FIFO is sorted without sorting, and the next node to settle is
    the cheaper of the two heads. Same costs as a heap alone, in less time
    (docs/measurements.md#graph-and-relations).

    A level the cap will cut is not settled at all: when the next node starts a new level (its
    cost clear of the last kept one's) and the nodes already queued at that level, counted
    exactly, overflow the cap, the search stops. The cap would cut the whole level anyway, so the
    nodes kept are the same (how often searches reach the cap and how much they settled in vain:
    docs/measurements.md#graph-and-relations). (Zero-cost edges can only add to a level, so the count never overstates.)

    A node with more neighbours than the cap has room left (a definition called from thousands of
    places) need not queue the levels the cap will cut: when its neighbours at one edge cost,
    with those at its cheaper costs, would take the settled count past the cap, the search is
    bound to stop on reaching that level (every one of them settles before it or waits in it), so
    neither they nor its dearer neighbours are queued and the search stops there (`stop_cost`).
    Same nodes kept as queueing them all; needs `graph.distinct_neighbours` (no parallel edges, as in a
    deduplicated graph: each neighbour counted once). On sympy + SQLAlchemy + networkx this was
    1.1 billion heap pushes for 102 million nodes settled.

    `scratch` (a `SearchScratch`): `dist`/`settled` are per-node arrays tagged by `stamp`, so
    nothing is cleared between calls. Writes the settled nodes to `reached` in settling order (cost
    ascending) and returns how many there are (-1: the heap or FIFO was too small); their costs are
    in `dist`.
    """
    row_start, row_end, indices, costs, queued_cost, distinct_neighbours = graph
    limit, max_reach = limits
    dist, settled, reached, heap_cost, heap_node, queue_cost, queue_node = scratch
    size = _heap_push(heap_cost, heap_node, np.int64(0), 0.0, source)
    head = np.int64(0)  # int64, not a literal 0: a literal compiles the helpers it reaches once more
    tail = np.int64(0)
    dist[source] = 0.0
    settled[source] = -stamp  # negative = seen, positive = settled
    n_reached = np.int64(0)
    stop_cost = np.inf  # the first level a hub showed the cap will cut (see above)
    while size > 0 or head < tail:
        if head < tail and (size == 0 or queue_cost[head] < heap_cost[0]):
            cost = queue_cost[head]
            node = queue_node[head]
            head += 1
        else:
            cost = heap_cost[0]
            node = heap_node[0]
            size = _heap_pop(heap_cost, heap_node, size)
        if settled[node] == stamp or cost > dist[node]:
            continue
        if cost >= stop_cost - COST_TOLERANCE:
            break  # the level a hub's neighbours fill past the cap: nothing there or beyond is kept
        if (max_reach > 0 and n_reached > 0 and cost > dist[reached[n_reached - 1]] + 4 * COST_TOLERANCE
                and n_reached + 1 + (tail - head) + size > max_reach
                and _level_overflows(cost, n_reached, max_reach, scratch, stamp, size, head, tail)):
            break
        if n_reached == max_reach and max_reach > 0:
            # The cap is reached and `node` would be the next to settle. If it ties with the last
            # one kept, the cap cuts a cost level (a folder's thousand files tie): which of them
            # made the cut would depend on queue order, so the whole level goes.
            level = dist[reached[n_reached - 1]] - COST_TOLERANCE
            if cost <= level + 2 * COST_TOLERANCE:
                while n_reached > 0 and dist[reached[n_reached - 1]] >= level:
                    n_reached -= 1
            break
        settled[node] = stamp
        reached[n_reached] = node
        n_reached += 1
        skip_from = np.inf
        if distinct_neighbours and max_reach > 0 and row_end[node] - row_start[node] > max_reach - n_reached:
            skip_from = _cut_level(graph, scratch, pruned, node, cost, limit, max_reach - n_reached, stamp)
            stop_cost = min(stop_cost, skip_from)
        for edge in range(row_start[node], row_end[node]):
            other = indices[edge]
            step = costs[edge]
            candidate = cost + step
            if candidate >= skip_from - COST_TOLERANCE or not _may_enter(other, candidate, limit, settled, stamp,
                                                                          pruned):
                continue
            if settled[other] != -stamp or candidate < dist[other]:
                settled[other] = -stamp
                dist[other] = candidate
                if step == queued_cost:
                    if tail == queue_cost.shape[0]:
                        return -1
                    queue_cost[tail] = candidate
                    queue_node[tail] = other
                    tail += 1
                else:
                    if size == heap_cost.shape[0]:
                        return -1  # heap too small; the caller retries with a bigger one
                    size = _heap_push(heap_cost, heap_node, size, candidate, other)
    return n_reached


@njit(cache=True, nogil=True, inline="always")
def _may_enter(other, candidate, limit, settled, stamp, pruned):
    """Whether a search may reach `other` at `candidate`: not settled yet, within `limit`, and
    not a dead end of the source's own file (`pruned`, see bounded_dijkstra)."""
    if settled[other] == stamp or candidate > limit:
        return False
    return not (pruned.prune_first <= other < pruned.prune_end
                and candidate + pruned.exit_cost[other - pruned.exit_first] > limit)


@njit(cache=True, nogil=True)
def _cut_level(graph, scratch, pruned, node, cost, limit, room, stamp):
    """The cost of the first level of `node`'s neighbours that the cap must cut, or inf.

    Counts the neighbours a search settling `node` (at `cost`) would queue or finds queued at
    each step cost, cheapest step first: the first level where those counts, summed, exceed
    `room` (the nodes the cap still takes) cannot be reached whole, so the search stops there.
    Steps within COST_TOLERANCE of 0 join `node`'s own level and are never cut; more than 16
    distinct step costs (none in practice: the edge kinds have a handful) give inf.
    """
    row_start, row_end, indices, costs = graph.row_start, graph.row_end, graph.indices, graph.costs
    dist, settled = scratch.dist, scratch.settled
    steps = np.empty(16, dtype=np.float64)
    counts = np.zeros(16, dtype=np.int64)
    n_steps = 0
    for edge in range(row_start[node], row_end[node]):
        other = indices[edge]
        step = costs[edge]
        candidate = cost + step
        if not _may_enter(other, candidate, limit, settled, stamp, pruned):
            continue
        if settled[other] == -stamp and dist[other] < candidate:
            continue  # already queued cheaper: settles at a lower level, if at all
        at = 0
        while at < n_steps and steps[at] != step:
            at += 1
        if at == n_steps:
            if n_steps == steps.shape[0]:
                return np.inf
            steps[at] = step
            n_steps += 1
        counts[at] += 1
    # The distinct steps (at most 16) in ascending order, by insertion: numba's np.argsort
    # compiled for seconds on a first run.
    order = np.arange(n_steps)
    for position in range(1, n_steps):
        moved = order[position]
        to = position
        while to > 0 and steps[order[to - 1]] > steps[moved]:
            order[to] = order[to - 1]
            to -= 1
        order[to] = moved
    total = 0
    for position in range(n_steps):
        at = order[position]
        total += counts[at]
        if total > room:
            if steps[at] <= COST_TOLERANCE:
                return np.inf
            return cost + steps[at]
    return np.inf


@njit(cache=True, nogil=True)
def _level_overflows(cost, n_reached, max_reach, scratch, stamp, size, head, tail):
    """Whether the node just taken (at `cost`) and the distinct nodes queued within COST_TOLERANCE
    of it would take the settled count past `max_reach`. A queued entry counts when its node is
    seen but not settled and the entry holds the node's current cost (a node has one such entry:
    an entry is only pushed below the node's current cost). `size` entries are in the heap,
    queue_cost/queue_node[head:tail] in the FIFO."""
    dist, settled, _, heap_cost, heap_node, queue_cost, queue_node = scratch
    room = max_reach - n_reached - 1  # after the node just taken
    level_end = cost + COST_TOLERANCE
    count = 0
    for at in range(head, tail):  # the FIFO is sorted: its level is a prefix
        if queue_cost[at] > level_end:
            break
        node = queue_node[at]
        if settled[node] == -stamp and dist[node] == queue_cost[at]:
            count += 1
            if count > room:
                return True
    # The heap's entries at the level: a subtree whose root costs more than the level end holds
    # nothing cheaper, so it is skipped whole. Scanning every entry cost as much as the search
    # itself where a node called from thousands of places had filled the heap (sympy: 2.4 billion
    # entries scanned for 102 million nodes settled).
    pending = np.empty(64, dtype=np.int64)  # right children still to visit: one per level of the heap
    n_pending = 0
    at = 0 if size > 0 else -1
    while at >= 0:
        if heap_cost[at] <= level_end:
            node = heap_node[at]
            if settled[node] == -stamp and dist[node] == heap_cost[at]:
                count += 1
                if count > room:
                    return True
            left = 2 * at + 1
            if left + 1 < size:
                pending[n_pending] = left + 1
                n_pending += 1
            if left < size:
                at = left
                continue
        if n_pending == 0:
            break
        n_pending -= 1
        at = pending[n_pending]
    return False


def most_common_cost(costs: np.ndarray) -> float:
    """The edge cost `bounded_dijkstra` queues in its FIFO (NaN, which no cost equals, for none).

    Read off at most 4,096 evenly spaced edges: any choice gives the same costs, this one only
    decides the speed, and a full count of a large graph's costs takes an edit's budget
    (docs/measurements.md#graph-and-relations).
    """
    if costs.shape[0] == 0:
        return float("nan")
    sample = costs[:: max(1, costs.shape[0] // 4096)]
    values, counts = np.unique(sample, return_counts=True)
    return float(values[np.argmax(counts)])


@njit(cache=True, nogil=True)
def tree_anchors(parent, portal, step_cost, first, end):
    """Where each syntax node's searches can start instead (exact when own-file pairs are unwanted).

    `parent` (int64, shape (n,)): kept syntax parent, -1 for roots and non-syntax nodes, numbered
    so that a parent comes before its children. `portal` (bool, shape (n,)): the node has an edge
    that is not a syntax edge (file root, call site, called definition). A node whose subtree holds
    no portal has one way out of its file: up through its parent, each step costing `step_cost`.
    So its strength to any node of another file is exp(-cost) times its anchor's, the nearest
    ancestor-or-self whose subtree holds a portal.
    Computed for the nodes [first, end) (whole files: parents stay within a file). Returns (anchor
    node, cost up to it), shapes (end - first,): entry t is node first + t's.
    """
    span = end - first
    holds = portal[first:end].copy()
    for t in range(span - 1, -1, -1):
        p = parent[first + t]
        if holds[t] and p >= 0:
            holds[p - first] = True
    anchor = np.arange(first, end)
    cost = np.zeros(span)
    for t in range(span):
        p = parent[first + t]
        if not holds[t] and p >= 0:
            anchor[t] = anchor[p - first]
            cost[t] = cost[p - first] + step_cost
    return anchor, cost


@njit(cache=True, nogil=True)
def exit_costs(parent, portal, step_cost, first, end):
    """Cheapest tree walk from each node to a portal of its own file (inf when there is none).

    Same inputs as `tree_anchors`: min over the subtree (bottom-up), then over the way through
    the parent (top-down). Shape (end - first,): entry t is node first + t's.
    """
    span = end - first
    best = np.empty(span)
    for t in range(span):
        best[t] = 0.0 if portal[first + t] else np.inf
    for t in range(span - 1, -1, -1):
        p = parent[first + t]
        if p >= 0 and best[t] + step_cost < best[p - first]:
            best[p - first] = best[t] + step_cost
    for t in range(span):
        p = parent[first + t]
        if p >= 0 and best[p - first] + step_cost < best[t]:
            best[t] = best[p - first] + step_cost
    return best
