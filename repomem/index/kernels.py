"""Compiled inner loops (numba): window covering, bounded Dijkstra, fragment relations.

Every function here is pure: arrays in, arrays out. They release the GIL so callers can run
chunks on several threads. Exact Python references live in the tests.
"""

from __future__ import annotations

import numpy as np
from numba import njit


def warm_up() -> None:
    """Load the compiled-kernel machinery (numba's first call in a process costs ~0.3 s, later
    ones load their cached code in milliseconds). A cold build does it on a thread while the
    files are listed, so the parse workers it forks next inherit it instead of each paying it."""
    top_k_positions(np.zeros(2), 1)


@njit(cache=True, nogil=True)
def add_posting_sums(indptr, indices, data, first_doc, live, tokens, frequencies):
    """One postings segment (CSC by term: indptr (n_terms + 1,), indices / data (nnz,), document
    ids relative to first_doc) added into tokens (n_docs,): the counts each document holds, and
    frequencies (n_terms,): how many live documents hold each term. The caller has checked the
    bounds (index/integrity.py); one pass, where numpy took five over Django's postings."""
    for term in range(indptr.shape[0] - 1):
        for entry in range(indptr[term], indptr[term + 1]):
            document = indices[entry] + first_doc
            tokens[document] += data[entry]
            if live[document]:
                frequencies[term] += 1


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
    # was quadratic (Django's 9,002-line file 112 -> 0.5 ms; all its files 0.7 -> 0.04 s).
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
                    out_window = _grow(out_window, capacity)
                    out_node = _grow(out_node, capacity)
                    out_weight = _grow(out_weight, capacity)
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
                    out_window = _grow(out_window, capacity)
                    out_node = _grow(out_node, capacity)
                    out_weight = _grow(out_weight, capacity)
                out_window[count] = w
                out_node[count] = node
                out_weight[count] = 0
                count += 1
            partial[node] += line_chars[line]
        for slot in range(touched_first, count):
            out_weight[slot] = partial[out_node[slot]]
            partial[out_node[slot]] = 0
    return out_window[:count].copy(), out_node[:count].copy(), out_weight[:count].copy()


@njit(cache=True, nogil=True)
def _grow(array, capacity):
    """A copy of `array` with room for `capacity` items (output buffers double as they fill)."""
    bigger = np.empty(capacity, dtype=array.dtype)
    bigger[: array.shape[0]] = array
    return bigger


# Path costs this close are one cost level: products such as 0.8^3 * 0.5^9 hit a cutoff exactly,
# and float sums of -ln w differ in the last bits between paths and implementations.
COST_TOLERANCE = 1e-9


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
def bounded_dijkstra(row_start, row_end, indices, costs, source, limit, max_settled, dist, settled, stamp,
                     heap_cost, heap_node, reached, prune_first, prune_end, exit_cost, exit_first, queued_cost,
                     queue_cost, queue_node, distinct_neighbours):
    """Shortest costs from `source` up to `limit` (costs = -ln w, so strength = exp(-cost)).

    A node's neighbours are indices[row_start[node]:row_end[node]] with step costs at the same
    slots (a CSR's indptr[:-1] and indptr[1:], or the rows of `edit_graph.EditGraph`, which
    patches a node's row in place or moves it when an edit changes its edges; a step of inf
    cost is a freed slot, never taken).

    With `max_settled` > 0, keeps at most that many nodes, and only whole cost levels (costs
    within `COST_TOLERANCE` tie): when the cap falls inside a level, that level is left out.
    Nodes settle strongest first, so what is left out is weaker than everything kept, and which
    nodes are kept does not depend on the order of the queues.

    Nodes in [prune_first, prune_end) (the source's own file, whose nodes the caller does not
    want) are entered only while they can still lead out: cost so far + `exit_cost[node - exit_first]`
    (the cheapest way from that node to one with a non-syntax edge) within `limit`. That drops only
    dead ends, so every node outside the range keeps its exact cost.

    Two queues: edges whose cost is exactly `queued_cost` (the graph's most common edge cost,
    see `most_common_cost`: syntax edges, ~86% of Django's) go through a FIFO, every other edge
    through a binary heap. Nodes settle in cost order, so what they push over one fixed cost is
    pushed in cost order too: the FIFO is sorted without sorting, and the next node to settle is
    the cheaper of the two heads. Same costs as a heap alone, half the time on Django.

    A level the cap will cut is not settled at all: when the next node starts a new level (its
    cost clear of the last kept one's) and the nodes already queued at that level, counted
    exactly, overflow the cap, the search stops. The cap would cut the whole level anyway, so the
    nodes kept are the same; on Django 63% of searches reach the cap and 30% of the nodes they
    settled were then cut. (Zero-cost edges can only add to a level, so the count never overstates.)

    A node with more neighbours than the cap has room left (a definition called from thousands of
    places) need not queue the levels the cap will cut: when its neighbours at one edge cost,
    with those at its cheaper costs, would take the settled count past the cap, the search is
    bound to stop on reaching that level (every one of them settles before it or waits in it), so
    neither they nor its dearer neighbours are queued and the search stops there (`stop_cost`).
    Same nodes kept as queueing them all; needs `distinct_neighbours` (no parallel edges, as in a
    deduplicated graph: each neighbour counted once). On sympy + SQLAlchemy + networkx this was
    1.1 billion heap pushes for 102 million nodes settled.

    `dist`/`settled` are per-node scratch arrays tagged by `stamp`, so nothing is cleared
    between calls. Writes the settled nodes to `reached` in settling order (cost ascending) and
    returns how many there are; their costs are in `dist`. `queue_cost`/`queue_node` hold the
    FIFO (as long as the heap arrays).
    """
    size = _heap_push(heap_cost, heap_node, 0, 0.0, source)
    head = 0
    tail = 0
    dist[source] = 0.0
    settled[source] = -stamp  # negative = seen, positive = settled
    n_reached = 0
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
        if (max_settled > 0 and n_reached > 0 and cost > dist[reached[n_reached - 1]] + 4 * COST_TOLERANCE
                and n_reached + 1 + (tail - head) + size > max_settled
                and _level_overflows(cost, n_reached, max_settled, settled, dist, stamp, heap_cost, heap_node,
                                     size, queue_cost, queue_node, head, tail)):
            break
        if n_reached == max_settled and max_settled > 0:
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
        if distinct_neighbours and max_settled > 0 and row_end[node] - row_start[node] > max_settled - n_reached:
            skip_from = _cut_level(row_start, row_end, indices, costs, node, cost, limit, max_settled - n_reached,
                                   dist, settled, stamp, prune_first, prune_end, exit_cost, exit_first)
            stop_cost = min(stop_cost, skip_from)
        for edge in range(row_start[node], row_end[node]):
            other = indices[edge]
            step = costs[edge]
            candidate = cost + step
            if candidate >= skip_from - COST_TOLERANCE or not _may_enter(
                    other, candidate, limit, settled, stamp, prune_first, prune_end, exit_cost, exit_first):
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
def _may_enter(other, candidate, limit, settled, stamp, prune_first, prune_end, exit_cost, exit_first):
    """Whether a search may reach `other` at `candidate`: not settled yet, within `limit`, and
    not a dead end of the source's own file (see bounded_dijkstra)."""
    if settled[other] == stamp or candidate > limit:
        return False
    return not (prune_first <= other < prune_end and candidate + exit_cost[other - exit_first] > limit)


@njit(cache=True, nogil=True)
def _cut_level(row_start, row_end, indices, costs, node, cost, limit, room, dist, settled, stamp, prune_first,
               prune_end, exit_cost, exit_first):
    """The cost of the first level of `node`'s neighbours that the cap must cut, or inf.

    Counts the neighbours a search settling `node` (at `cost`) would queue or finds queued at
    each step cost, cheapest step first: the first level where those counts, summed, exceed
    `room` (the nodes the cap still takes) cannot be reached whole, so the search stops there.
    Steps within COST_TOLERANCE of 0 join `node`'s own level and are never cut; more than 16
    distinct step costs (none in practice: the edge kinds have a handful) give inf.
    """
    steps = np.empty(16, dtype=np.float64)
    counts = np.zeros(16, dtype=np.int64)
    n_steps = 0
    for edge in range(row_start[node], row_end[node]):
        other = indices[edge]
        step = costs[edge]
        candidate = cost + step
        if not _may_enter(other, candidate, limit, settled, stamp, prune_first, prune_end, exit_cost, exit_first):
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
    order = np.argsort(steps[:n_steps])
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
def _level_overflows(cost, n_reached, max_settled, settled, dist, stamp, heap_cost, heap_node, size, queue_cost,
                     queue_node, head, tail):
    """Whether the node just taken (at `cost`) and the distinct nodes queued within COST_TOLERANCE
    of it would take the settled count past `max_settled`. A queued entry counts when its node is
    seen but not settled and the entry holds the node's current cost (a node has one such entry:
    an entry is only pushed below the node's current cost)."""
    room = max_settled - n_reached - 1  # after the node just taken
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
    decides the speed, and a full count of Django's 724k costs took 30 ms (an edit's budget).
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


@njit(cache=True, nogil=True)
def _strongest_of_row(cols, values, keep):
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
def relation_rows(
    rows, frag_indptr, frag_nodes, frag_weights, frag_totals,
    node_indptr, node_frags, node_weights, live,
    row_start, row_end, indices, costs, queued_cost, limit, max_settled, cutoff, keep, distinct_neighbours,
    frag_file, same_file_weight, block_start, block_end, span_first, anchor, anchor_cost, exit_cost,
    dist, settled, reached, heap_cost, heap_node, queue_cost, queue_node, source_slot, acc, touched, is_touched,
    row_cols, row_vals, stamp_box,
):
    """Rows of W (eq. 8) for the fragments in `rows`.

    w_ij = sum_k sum_l len_k len_l Dis(k, l) / (L_i L_j), k over nodes of fragment i, l over
    nodes of fragment j, Dis = exp(-shortest cost) when the cost is within `limit`.
    Pairs of one file (`frag_file`, shape (n_frags,)) are scaled by `same_file_weight` before the
    cutoff and the top-`keep` choice, so a row's slots go to the relations that count.

    Each distinct search start is searched once (neighbouring windows share half their nodes).
    When `same_file_weight` is 0, only other files' nodes count, and a node k searches from
    `anchor[k]` instead (see `tree_anchors`): Dis(k, l) = exp(-anchor_cost[k]) Dis(anchor, l),
    keeping the anchor's nodes whose cost is within limit - anchor_cost[k]; the search also skips
    its own file's dead ends (`exit_cost`, see `bounded_dijkstra`). File f's syntax nodes are
    [block_start[f], block_end[f]) (shapes (n_files,)). Otherwise every node is its own anchor.
    `anchor`, `anchor_cost` and `exit_cost` cover the nodes [span_first, span_first + len) only,
    which hold every node of `rows` (their files' nodes: an edit's, or the whole graph's).
    The graph's rows are `row_start`/`row_end` into `indices`/`costs` (see `bounded_dijkstra`).
    Each start's reached nodes are summed per fragment and budget band as they are walked; a
    row's nodes that share a start read those sums once per band, with the summed weight of the
    row's nodes whose budget covers the band.

    Only live fragments j != i with w_ij >= cutoff are returned, at most `keep` per row (the
    largest, ties to the lower column id; all when keep <= 0), as (row, col, value) arrays, plus
    each row's entry bar: the smallest kept value when the row is full (`keep` entries or more),
    else `cutoff`.

    Three steps, which a caller may also run apart (an edit's searches on two threads):
    `number_starts`, `search_bands` over the starts, `assemble_rows`.

    Scratch (see `relation_scratch`; one set per thread, reused across calls, so a cold build
    neither re-allocates nor re-faults graph-sized arrays per chunk): `dist`, `settled`,
    `reached`, `source_slot` by graph node, `heap_cost`/`heap_node`, `queue_cost`/`queue_node`,
    `acc`, `touched`, `is_touched`, `row_cols`, `row_vals` by fragment, and `stamp_box` (shape
    (1,)), the last search stamp used in `settled`. A call leaves them ready for the next one.
    """
    # Pairs of one file weigh same_file_weight; at 0 (the default) they can never pass the cutoff
    # (> 0), so they are not collected: in big files most of a search stays in its own file.
    skip_own_file = same_file_weight == 0.0
    starts, start_file, budgets, most_slots = number_starts(
        rows, frag_indptr, frag_nodes, frag_file, anchor, anchor_cost, span_first, skip_own_file, limit, source_slot)
    band_first = np.zeros((starts.shape[0], budgets.shape[0]), dtype=np.int64)
    band_end = np.zeros((starts.shape[0], budgets.shape[0]), dtype=np.int64)
    pair_frag, pair_value, ok = search_bands(
        np.arange(starts.shape[0]), starts, start_file, budgets, node_indptr, node_frags, node_weights, live,
        row_start, row_end, indices, costs, queued_cost, limit, max_settled, distinct_neighbours, frag_file,
        skip_own_file, block_start, block_end, span_first, exit_cost, dist, settled, reached, heap_cost, heap_node,
        queue_cost, queue_node, acc, touched, is_touched, stamp_box, band_first, band_end)
    if not ok:
        source_slot[starts] = -1
        return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64), np.zeros(0, np.float64),
                False)
    out_row, out_col, out_val, bars = assemble_rows(
        rows, frag_indptr, frag_nodes, frag_weights, frag_totals, frag_file, same_file_weight, limit, cutoff, keep,
        span_first, anchor, anchor_cost, source_slot, budgets, most_slots, band_first, band_end, pair_frag,
        pair_value, acc, touched, is_touched, row_cols, row_vals)
    source_slot[starts] = -1
    return out_row, out_col, out_val, bars, True


@njit(cache=True, nogil=True)
def number_starts(rows, frag_indptr, frag_nodes, frag_file, anchor, anchor_cost, span_first, skip_own_file, limit,
                  source_slot):
    """The distinct search starts of `rows` (see `relation_rows`), numbered in `source_slot` (by
    graph node, -1 everywhere on entry; the caller sets the starts back to -1 when done).

    Returns (start nodes by number, int64; the file of each, whose nodes its search prunes;
    the distinct budgets, descending, the first `limit`; the most nodes any row has).
    Budgets: a node k of a row counts the nodes its start reached within limit - offset(k). The
    offsets are whole numbers of syntax steps (tree_anchors), so a chunk has a handful of
    distinct budgets (Django: at most 7); a reached node's band is the last budget its cost is
    still within.
    """
    budgets = np.empty(8, dtype=np.float64)
    budgets[0] = limit
    n_budgets = 1
    starts = np.empty(64, dtype=np.int64)
    start_file = np.empty(64, dtype=np.int64)
    n_sources = 0
    most_slots = 0
    for r in range(rows.shape[0]):
        i = rows[r]
        most_slots = max(most_slots, frag_indptr[i + 1] - frag_indptr[i])
        for slot in range(frag_indptr[i], frag_indptr[i + 1]):
            node = frag_nodes[slot]
            start = anchor[node - span_first] if skip_own_file else node
            if source_slot[start] < 0:
                source_slot[start] = n_sources
                if n_sources == starts.shape[0]:
                    starts = _grow(starts, 2 * n_sources)
                    start_file = _grow(start_file, 2 * n_sources)
                starts[n_sources] = start
                start_file[n_sources] = frag_file[i]  # a start is a node of its row's file
                n_sources += 1
            offset = anchor_cost[node - span_first] if skip_own_file else 0.0
            if offset <= limit:
                n_budgets = _add_budget(budgets, n_budgets, limit - offset)
                if n_budgets > budgets.shape[0] - 1:
                    budgets = _grow(budgets, 2 * budgets.shape[0])
    return starts[:n_sources].copy(), start_file[:n_sources].copy(), budgets[:n_budgets].copy(), most_slots


@njit(cache=True, nogil=True)
def search_bands(which, starts, start_file, budgets, node_indptr, node_frags, node_weights, live,
                 row_start, row_end, indices, costs, queued_cost, limit, max_settled, distinct_neighbours, frag_file,
                 skip_own_file, block_start, block_end, span_first, exit_cost, dist, settled, reached, heap_cost,
                 heap_node, queue_cost, queue_node, acc, touched, is_touched, stamp_box, band_first, band_end):
    """Search from starts[k] for each k in `which` and sum what each reaches per fragment and band.

    Per start and band: the reached other-file fragments j with sum_l len_l Dis(start, l) over
    the start's reached nodes l of j in that band, as the slice band_first[k, b]:band_end[k, b]
    of the returned (pair_frag, pair_value). Summed per fragment while the search's nodes are
    walked (in cost order, so bands come one after the other): neighbouring statements share
    windows, so this is a fraction of the (node, fragment) pairs it replaces, which two rows then
    read again (Django: 6.6 of 12.3 CPU-seconds were those pairs). Writes only rows `which` of
    band_first/band_end, so callers may search disjoint sets of starts on several threads, each
    with its own scratch. Returns (pair_frag, pair_value, ok); ok is False when the heap was too
    small.
    """
    stamp = stamp_box[0]
    n_budgets = budgets.shape[0]
    pair_capacity = 1024
    pair_frag = np.empty(pair_capacity, dtype=np.int32)  # fragment ids: half the bytes
    pair_value = np.empty(pair_capacity, dtype=np.float64)
    n_pairs = 0
    for at in range(which.shape[0]):
        k = which[at]
        start = starts[k]
        own_file = start_file[k]
        stamp += 1
        prune_first = block_start[own_file] if skip_own_file else 0
        prune_end = block_end[own_file] if skip_own_file else 0
        n_reached = bounded_dijkstra(
            row_start, row_end, indices, costs, start, limit, max_settled, dist, settled, stamp, heap_cost,
            heap_node, reached, prune_first, prune_end, exit_cost, span_first, queued_cost, queue_cost,
            queue_node, distinct_neighbours,
        )
        if n_reached < 0:
            stamp_box[0] = stamp
            return pair_frag[:0].copy(), pair_value[:0].copy(), False
        # Nodes settle in cost order and whole levels share a cost: exp once per level (4% of
        # a cold build's relation rows), the same value as per node.
        level_cost = -1.0
        strength = 0.0
        band = n_budgets - 1
        n_touched = 0
        for t in range(n_reached):  # settling order: costs ascending
            node = reached[t]
            if prune_first <= node < prune_end:
                continue  # the source's own file: its fragments are all own-file pairs
            cost = dist[node]
            if cost != level_cost:
                level_cost = cost
                strength = np.exp(-cost)
                if cost > budgets[band]:
                    # Costs only grow: the band's sums are complete.
                    n_pairs, pair_frag, pair_value = _flush_band(
                        acc, touched, is_touched, n_touched, pair_frag, pair_value, n_pairs)
                    band_first[k, band] = n_pairs - n_touched
                    band_end[k, band] = n_pairs
                    n_touched = 0
                    while band >= 0 and cost > budgets[band]:
                        band -= 1
                    if band < 0:
                        break  # beyond every budget (no node of these rows has `limit`)
            for s in range(node_indptr[node], node_indptr[node + 1]):
                j = node_frags[s]
                if not live[j] or (skip_own_file and frag_file[j] == own_file):
                    continue
                if not is_touched[j]:
                    is_touched[j] = True
                    touched[n_touched] = j
                    n_touched += 1
                acc[j] += node_weights[s] * strength
        if band >= 0:
            n_pairs, pair_frag, pair_value = _flush_band(
                acc, touched, is_touched, n_touched, pair_frag, pair_value, n_pairs)
            band_first[k, band] = n_pairs - n_touched
            band_end[k, band] = n_pairs
    stamp_box[0] = stamp
    return pair_frag[:n_pairs].copy(), pair_value[:n_pairs].copy(), True


@njit(cache=True, nogil=True)
def assemble_rows(rows, frag_indptr, frag_nodes, frag_weights, frag_totals, frag_file, same_file_weight, limit,
                  cutoff, keep, span_first, anchor, anchor_cost, source_slot, budgets, most_slots, band_first,
                  band_end, pair_frag, pair_value, acc, touched, is_touched, row_cols, row_vals):
    """The rows of W from the starts' band sums (see `relation_rows`): (row, col, value, bars)."""
    skip_own_file = same_file_weight == 0.0
    n_budgets = budgets.shape[0]
    capacity = 1024
    out_row = np.empty(capacity, dtype=np.int64)
    out_col = np.empty(capacity, dtype=np.int64)
    out_val = np.empty(capacity, dtype=np.float64)
    bars = np.full(rows.shape[0], cutoff)
    count = 0
    # One row's nodes as (start, band of its budget, weight), sorted by start.
    group_start = np.empty(max(most_slots, 1), dtype=np.int64)
    group_band = np.empty(max(most_slots, 1), dtype=np.int64)
    group_weight = np.empty(max(most_slots, 1), dtype=np.float64)
    band_weight = np.zeros(n_budgets, dtype=np.float64)  # of one start: summed weights per budget
    band_count = np.zeros(n_budgets, dtype=np.int64)
    for r in range(rows.shape[0]):
        i = rows[r]
        n_group = 0
        for slot in range(frag_indptr[i], frag_indptr[i + 1]):
            node = frag_nodes[slot]
            offset = anchor_cost[node - span_first] if skip_own_file else 0.0
            if offset > limit:
                continue
            k = source_slot[anchor[node - span_first] if skip_own_file else node]
            budget = limit - offset
            own_band = 0
            while budgets[own_band] != budget:
                own_band += 1
            at = n_group  # insertion sort by start: a window has a handful of nodes
            while at > 0 and group_start[at - 1] > k:
                group_start[at] = group_start[at - 1]
                group_band[at] = group_band[at - 1]
                group_weight[at] = group_weight[at - 1]
                at -= 1
            group_start[at] = k
            group_band[at] = own_band
            group_weight[at] = frag_weights[slot] * np.exp(-offset)
            n_group += 1
        n_touched = 0
        first = 0
        while first < n_group:
            k = group_start[first]
            end = first
            while end < n_group and group_start[end] == k:
                band_weight[group_band[end]] += group_weight[end]
                band_count[group_band[end]] += 1
                end += 1
            # A node whose budget is band d's counts the reached nodes of bands d and up: the
            # weight of band b is the running sum over d <= b.
            weight = 0.0
            counted = 0
            for b in range(n_budgets):
                weight += band_weight[b]
                counted += band_count[b]
                band_weight[b] = 0.0
                band_count[b] = 0
                if counted == 0:
                    continue
                for p in range(band_first[k, b], band_end[k, b]):
                    j = pair_frag[p]
                    if not is_touched[j]:
                        is_touched[j] = True
                        touched[n_touched] = j
                        n_touched += 1
                    acc[j] += weight * pair_value[p]
            first = end
        n_row = 0
        for t in range(n_touched):
            j = touched[t]
            value = acc[j] / (frag_totals[i] * frag_totals[j])
            if frag_file[j] == frag_file[i]:
                value *= same_file_weight
            acc[j] = 0.0
            is_touched[j] = False
            if j == i or value < cutoff:
                continue
            row_cols[n_row] = j
            row_vals[n_row] = value
            n_row += 1
        kept = np.ones(n_row, dtype=np.bool_)
        if keep > 0 and n_row >= keep:
            # The keep-th largest value is the row's bar: a new entry must beat it to enter.
            kept, bar = _strongest_of_row(row_cols[:n_row], row_vals[:n_row], keep)
            bars[r] = bar
        while count + n_row > capacity:
            capacity *= 2
            out_row = _grow(out_row, capacity)
            out_col = _grow(out_col, capacity)
            out_val = _grow(out_val, capacity)
        for t in range(n_row):
            if kept[t]:
                out_row[count] = i
                out_col[count] = row_cols[t]
                out_val[count] = row_vals[t]
                count += 1
    return out_row[:count].copy(), out_col[:count].copy(), out_val[:count].copy(), bars


@njit(cache=True, nogil=True)
def _add_budget(budgets, n_budgets, budget):
    """Insert `budget` into the first `n_budgets` of `budgets` (distinct, descending) unless there."""
    at = 0
    while at < n_budgets and budgets[at] > budget:
        at += 1
    if at < n_budgets and budgets[at] == budget:
        return n_budgets
    for move in range(n_budgets, at, -1):
        budgets[move] = budgets[move - 1]
    budgets[at] = budget
    return n_budgets + 1


@njit(cache=True, nogil=True)
def _flush_band(acc, touched, is_touched, n_touched, pair_frag, pair_value, n_pairs):
    """Append the band's summed fragments (touched[:n_touched], values in acc) to the pair lists
    and clear them from acc; returns the new count and the lists (grown when full)."""
    if n_pairs + n_touched > pair_frag.shape[0]:
        capacity = max(2 * pair_frag.shape[0], n_pairs + n_touched)
        pair_frag = _grow(pair_frag, capacity)
        pair_value = _grow(pair_value, capacity)
    for t in range(n_touched):
        j = touched[t]
        pair_frag[n_pairs] = j
        pair_value[n_pairs] = acc[j]
        n_pairs += 1
        acc[j] = 0.0
        is_touched[j] = False
    return n_pairs, pair_frag, pair_value


def relation_scratch(n_graph: int, n_frags: int, heap_capacity: int) -> tuple[np.ndarray, ...]:
    """Fresh scratch for `relation_rows`, in its argument order (after `exit_cost`). Graph-sized
    arrays are int32 (node ids and search stamps stay far below 2^31) to halve what a thread holds;
    np.empty pages are only made resident where a search writes."""
    return (
        np.empty(n_graph, dtype=np.float64),  # dist
        np.zeros(n_graph, dtype=np.int32),  # settled: search stamp, negative while only seen
        np.empty(n_graph, dtype=np.int32),  # reached
        np.empty(heap_capacity, dtype=np.float64),  # heap_cost
        np.empty(heap_capacity, dtype=np.int32),  # heap_node
        np.empty(heap_capacity, dtype=np.float64),  # queue_cost
        np.empty(heap_capacity, dtype=np.int32),  # queue_node
        np.full(n_graph, -1, dtype=np.int64),  # source_slot
        np.zeros(n_frags, dtype=np.float64),  # acc
        np.empty(n_frags, dtype=np.int64),  # touched
        np.zeros(n_frags, dtype=np.bool_),  # is_touched
        np.empty(n_frags, dtype=np.int64),  # row_cols
        np.empty(n_frags, dtype=np.float64),  # row_vals
        np.zeros(1, dtype=np.int32),  # stamp_box
    )


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


@njit(cache=True, nogil=True)
def add_bm25_scores(indptr, indices, counts, first_doc, terms, term_weights, doc_len, k1, norm_scale,
                    length_scale, scores):
    """BM25 Okapi of one postings segment (CSC: documents of each term) into `scores`.

    scores[d] += term_weights[t] * tf (k1 + 1) / (tf + norm_scale + length_scale * doc_len[d]),
    for each query term t (term_weights = occurrences in the query * idf), in the order given.
    """
    n_terms = indptr.shape[0] - 1
    for position in range(terms.shape[0]):
        term = terms[position]
        if term >= n_terms:
            continue
        weight = term_weights[position]
        for slot in range(indptr[term], indptr[term + 1]):
            doc = indices[slot] + first_doc
            freq = np.float64(counts[slot])
            scores[doc] += weight * (freq * (k1 + 1.0)) / (freq + norm_scale + length_scale * doc_len[doc])


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
    """Sort each CSR row's entries by column, in place (no column twice in a row). Rows of up to
    64 entries (a relation row's top list) by insertion, which allocates nothing."""
    for row in range(indptr.shape[0] - 1):
        first, end = indptr[row], indptr[row + 1]
        if end - first > 64:
            order = np.argsort(cols[first:end])
            cols[first:end] = cols[first:end][order]
            values[first:end] = values[first:end][order]
            continue
        for at in range(first + 1, end):
            col, value = cols[at], values[at]
            to = at
            while to > first and cols[to - 1] > col:
                cols[to], values[to] = cols[to - 1], values[to - 1]
                to -= 1
            cols[to], values[to] = col, value


@njit(cache=True, nogil=True)
def symmetric_max_csr(indptr, cols, values):
    """max(A, A^T) of a square CSR matrix A (rows sorted by column, values > 0), as CSR arrays
    (indptr int64, cols int32, values float64) with rows sorted by column.

    Counts each row's entries first (a pair present both ways once: a binary search for the
    mirror), so the result is allocated at its exact size and nothing else graph-sized is made:
    scipy's maximum held A, A^T and an unpruned result of both at once (Django: +70 MB at the
    cold build's peak). A row of the result merges A's row (sorted) with the pairs only A^T has,
    which arrive in ascending order as the rows are scanned: no sort.
    """
    n = indptr.shape[0] - 1
    count = np.zeros(n + 1, dtype=np.int64)
    only_mirrored = np.zeros(n, dtype=np.int64)
    mirrored = np.zeros(cols.shape[0], dtype=np.bool_)  # A has the pair both ways
    for row in range(n):
        for slot in range(indptr[row], indptr[row + 1]):
            col = cols[slot]
            count[row + 1] += 1
            if _column_slot(indptr, cols, col, row) < 0:
                count[col + 1] += 1
                only_mirrored[col] += 1
            else:
                mirrored[slot] = True
    out_indptr = np.cumsum(count)
    out_cols = np.empty(out_indptr[n], dtype=np.int32)
    out_values = np.empty(out_indptr[n], dtype=np.float64)
    # Pairs only A^T has go to the tail of their row, in ascending column order (rows scanned in order).
    fill = out_indptr[1:] - only_mirrored
    for row in range(n):
        for slot in range(indptr[row], indptr[row + 1]):
            col = cols[slot]
            if not mirrored[slot]:
                out_cols[fill[col]] = row
                out_values[fill[col]] = values[slot]
                fill[col] += 1
    # Merge from the front: A's row (from the input) with the tail. The write position never
    # passes the tail's read position, so nothing unread is overwritten.
    for row in range(n):
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
    return out_indptr, out_cols, out_values


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
def invert_incidence(indptr, nodes, weights, n_nodes):
    """Transpose of a fragment -> node incidence (CSR: `indptr` by fragment, `nodes`, `weights`):
    (indptr by node, fragment ids, weights), each node's fragments in fragment order. A counting
    sort: a stable argsort of Django's 318k slots took 5 ms of every edit."""
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
        for slot in range(indptr[row], indptr[row + 1]):
            total += data[slot] * x[indices[slot]]
        out[at] = total
    return out


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
            kept[start:end] = _strongest_of_row(cols[start:end], values[start:end], keep)[0]
        start = end
    return kept


@njit(cache=True, nogil=True)
def term_postings(terms, doc_offsets, n_terms):
    """Postings of documents given as term ids (`terms[doc_offsets[d]:doc_offsets[d + 1]]`, with
    repeats): CSC arrays by term (indptr int64, document ids int32 ascending, counts int32), each
    (term, document) once. Two counting passes over the tokens; scipy's COO route sorted 7.6M
    triplets (Django) and held three int32 copies of them."""
    n_docs = doc_offsets.shape[0] - 1
    last_doc = np.full(n_terms, -1, dtype=np.int64)
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    for doc in range(n_docs):
        for at in range(doc_offsets[doc], doc_offsets[doc + 1]):
            term = terms[at]
            if last_doc[term] != doc:
                last_doc[term] = doc
                indptr[term + 1] += 1
    for term in range(n_terms):
        indptr[term + 1] += indptr[term]
    fill = indptr[:-1].copy()
    last_slot = np.empty(n_terms, dtype=np.int64)
    last_doc[:] = -1
    docs = np.empty(indptr[n_terms], dtype=np.int32)
    counts = np.zeros(indptr[n_terms], dtype=np.int32)
    for doc in range(n_docs):
        for at in range(doc_offsets[doc], doc_offsets[doc + 1]):
            term = terms[at]
            if last_doc[term] != doc:
                last_doc[term] = doc
                last_slot[term] = fill[term]
                docs[fill[term]] = doc
                fill[term] += 1
            counts[last_slot[term]] += 1
    return indptr, docs, counts


@njit(cache=True, nogil=True)
def _word_byte(byte):
    """[A-Za-z0-9_]: a byte an identifier continues with."""
    return (97 <= byte <= 122) or (65 <= byte <= 90) or (48 <= byte <= 57) or byte == 95


@njit(cache=True, nogil=True)
def _fnv_slot(data, first, end, mask):
    """Hash table slot of the bytes data[first:end] (FNV-1a, 64 bits, masked)."""
    digest = np.uint64(14695981039346656037)
    for k in range(first, end):
        digest = (digest ^ np.uint64(data[k])) * np.uint64(1099511628211)
    return np.int64(digest & np.uint64(mask))


@njit(cache=True, nogil=True)
def rehash_words(size, word_first, word_end, word_bytes, n_words):
    """A new `known_words` table of `size` slots (a power of two) holding words 0..n_words-1."""
    table = np.full(size, -1, dtype=np.int64)
    for word in range(n_words):
        slot = _fnv_slot(word_bytes, word_first[word], word_end[word], size - 1)
        while table[slot] >= 0:
            slot = (slot + 1) & (size - 1)
        table[slot] = word
    return table


@njit(cache=True, nogil=True)
def count_words(data):
    """How many words `known_words` finds in `data` (the room it may need for new ones)."""
    n = data.shape[0]
    count = 0
    at = 0
    while at < n:
        byte = data[at]
        if (97 <= byte <= 122) or (65 <= byte <= 90) or byte == 95:
            count += 1
            at += 1
            while at < n and _word_byte(data[at]):
                at += 1
        elif 48 <= byte <= 57:
            count += 1
            at += 1
            while at < n and 48 <= data[at] <= 57:
                at += 1
        else:
            at += 1
    return count


@njit(cache=True, nogil=True)
def known_words(data, n_occurrences, table, word_first, word_end, word_bytes, n_words, n_bytes):
    """The words of UTF-8 text (uint8, shape (n,)) as tokens.py's `[A-Za-z_][A-Za-z0-9_]*|\\d+`
    finds them in ASCII (any other byte separates words), each as its id in a process-wide table.

    The table: `table` (int64, a power of two long, -1 = empty) maps FNV-1a hashes of a word's
    bytes to its id, probing linearly; word w's bytes are word_bytes[word_first[w]:word_end[w]].
    `n_occurrences` is `count_words(data)`. Words not seen before are added (ids n_words,
    n_words + 1, ...): the caller gives room for that many more words and n more bytes and keeps the
    table at most half full with them. Comparisons are byte by byte, so ids are exact.

    Returns (word id of each occurrence (int64, shape (n_occurrences,)), occurrences before each
    line (int64, shape (n_lines + 1,), lines split at "\\n"), the new count of words, of bytes).
    """
    n = data.shape[0]
    n_lines = 1
    for at in range(n):
        if data[at] == 10:
            n_lines += 1
    # Exactly as many as there are (a digit run and a word need no space between them: "1a 1a" holds
    # four words in five bytes, so n / 2 is no bound).
    occurrence = np.empty(n_occurrences, dtype=np.int64)
    line_words = np.zeros(n_lines + 1, dtype=np.int64)
    mask = table.shape[0] - 1
    n_found = 0
    line = 0
    at = 0
    while at < n:
        byte = data[at]
        if byte == 10:
            line += 1
            line_words[line] = n_found
            at += 1
            continue
        if (97 <= byte <= 122) or (65 <= byte <= 90) or byte == 95:
            end = at + 1
            while end < n and _word_byte(data[end]):
                end += 1
        elif 48 <= byte <= 57:
            end = at + 1
            while end < n and 48 <= data[end] <= 57:
                end += 1
        else:
            at += 1
            continue
        slot = _fnv_slot(data, at, end, mask)
        while True:
            word = table[slot]
            if word < 0:
                word = n_words
                table[slot] = word
                word_first[word] = n_bytes
                for k in range(at, end):
                    word_bytes[n_bytes] = data[k]
                    n_bytes += 1
                word_end[word] = n_bytes
                n_words += 1
                break
            first = word_first[word]
            if word_end[word] - first == end - at:
                same = True
                for k in range(end - at):
                    if word_bytes[first + k] != data[at + k]:
                        same = False
                        break
                if same:
                    break
            slot = (slot + 1) & mask
        occurrence[n_found] = word
        n_found += 1
        at = end
    line_words[n_lines] = n_found
    return occurrence[:n_found].copy(), line_words, n_words, n_bytes


@njit(cache=True, nogil=True)
def first_appearance_ids(tokens, local_of):
    """Tokens (int64 ids, shape (n,)) renumbered 0, 1, ... in order of first appearance: (local id
    of each token (int32, shape (n,)), the distinct ids in that order). `local_of` is -1 at every
    id on entry and on return (scratch indexed by id)."""
    local = np.empty(tokens.shape[0], dtype=np.int32)
    distinct = np.empty(tokens.shape[0], dtype=np.int64)
    n_distinct = 0
    for at in range(tokens.shape[0]):
        token = tokens[at]
        if local_of[token] < 0:
            local_of[token] = n_distinct
            distinct[n_distinct] = token
            n_distinct += 1
        local[at] = local_of[token]
    for k in range(n_distinct):
        local_of[distinct[k]] = -1
    return local, distinct[:n_distinct].copy()
