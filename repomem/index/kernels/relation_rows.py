"""Rows of the fragment relation matrix W (eq. 8) from bounded searches (numba).

Three steps, which a caller may also run apart: `number_starts`, `search_bands`, `assemble_rows`;
`relation_rows` runs them in one call.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from repomem.index.kernels.buffers import grow
from repomem.index.kernels.selection import strongest_of_row
from repomem.index.kernels.shortest_paths import PrunedSpan, SearchScratch, bounded_dijkstra


class FragmentCover(NamedTuple):
    """Which graph nodes cover which fragments, both ways (eq. 8's len_k and L_i).

    By fragment (CSR): fragment i's nodes are nodes[indptr[i]:indptr[i + 1]] with their lengths
    in `weights`. By node (its transpose, `csr.invert_incidence`): node u's fragments are
    node_frags[node_indptr[u]:node_indptr[u + 1]], in fragment order, lengths in `node_weights`.
    """

    indptr: np.ndarray  # int64, shape (n_frags + 1,)
    nodes: np.ndarray  # int64, shape (n_cover,): graph node ids
    weights: np.ndarray  # float64, shape (n_cover,): len_k, characters of node k inside fragment i
    totals: np.ndarray  # float64, shape (n_frags,): L_i, the sum of fragment i's weights
    file: np.ndarray  # int64, shape (n_frags,): each fragment's file id
    live: np.ndarray  # bool, shape (n_frags,): fragments W may point to
    node_indptr: np.ndarray  # int64, shape (n_nodes + 1,)
    node_frags: np.ndarray  # int64, shape (n_cover,): fragment ids
    node_weights: np.ndarray  # float64, shape (n_cover,): len_k again, in node order


class RelationRules(NamedTuple):
    """The relation settings a row obeys (relation.*), under their setting names."""

    relation_cutoff: float  # smallest w_ij kept
    keep: int  # most entries a row keeps (the strongest); 0 or less: all
    same_file_weight: float  # factor on pairs of one file; 0: they are not searched at all


class StartAnchors(NamedTuple):
    """Where the searches of one call's rows start, and what of their own file they prune.

    Covers the nodes [span_first, span_first + span) only: the rows' files' nodes (an edit's, or
    the whole graph's). With `same_file_weight` 0, node k searches from anchor[k - span_first] at
    an offset of anchor_cost[k - span_first] (`shortest_paths.tree_anchors`) and prunes its own
    file's dead ends (`exit_cost`, `shortest_paths.exit_costs`); file f's syntax nodes are
    [block_start[f], block_end[f]). Otherwise every node is its own anchor at offset 0.
    """

    span_first: int
    anchor: np.ndarray  # int64, shape (span,): graph node ids
    anchor_cost: np.ndarray  # float64, shape (span,): cost -ln w from the node up to its anchor
    exit_cost: np.ndarray  # float64, shape (span,): cheapest walk to a portal of the node's file
    block_start: np.ndarray  # int64, shape (n_files,)
    block_end: np.ndarray  # int64, shape (n_files,)


class NumberedStarts(NamedTuple):
    """The distinct search starts of a call's rows (`number_starts`); start k is starts[k]."""

    starts: np.ndarray  # int64, shape (n_starts,): graph node ids
    start_file: np.ndarray  # int64, shape (n_starts,): the file whose nodes the start's search prunes
    budgets: np.ndarray  # float64, shape (n_budgets,): distinct cost budgets, descending, budgets[0] = limit
    most_slots: int  # the most nodes any row has


class BandSums(NamedTuple):
    """What each start reached, summed per fragment and budget band (`search_bands`): start k's
    sums of band b are pair_frag/pair_value[band_first[k, b]:band_end[k, b]]."""

    band_first: np.ndarray  # int64, shape (n_starts, n_budgets)
    band_end: np.ndarray  # int64, shape (n_starts, n_budgets)
    pair_frag: np.ndarray  # int32, shape (n_pairs,): fragment ids
    pair_value: np.ndarray  # float64, shape (n_pairs,): sum over the fragment's reached nodes l of len_l Dis


class RelationScratch(NamedTuple):
    """One thread's buffers for `relation_rows` (`relation_scratch`), reused across calls, so a cold
    build neither re-allocates nor re-faults graph-sized arrays per chunk. A call leaves them ready
    for the next one."""

    search: SearchScratch  # the searches' own (graph- and heap-sized)
    source_slot: np.ndarray  # int64, shape (n_nodes,): number of each search start, -1 elsewhere
    acc: np.ndarray  # float64, shape (n_frags,): sums being gathered, 0 elsewhere
    touched: np.ndarray  # int64, shape (n_frags,): fragments acc holds, in arrival order
    is_touched: np.ndarray  # bool, shape (n_frags,)
    row_cols: np.ndarray  # int64, shape (n_frags,): one row's entries before the top-`keep` choice
    row_vals: np.ndarray  # float64, shape (n_frags,)
    stamp_box: np.ndarray  # int32, shape (1,): the last search stamp used in `search.settled`


@njit(cache=True, nogil=True)
def relation_rows(rows, cover, graph, limits, rules, anchors, scratch):
    """Rows of W (eq. 8) for the fragments in `rows` (int64, shape (n_rows,)), over `cover` (a
    `FragmentCover`), `graph` (a `shortest_paths.GraphRows`) within `limits` (a
    `shortest_paths.SearchLimits`), by `rules` (a `RelationRules`), searches starting as `anchors`
    (a `StartAnchors`) say, in `scratch` (a `RelationScratch`).

    w_ij = sum_k sum_l len_k len_l Dis(k, l) / (L_i L_j), k over nodes of fragment i, l over
    nodes of fragment j, Dis = exp(-shortest cost) when the cost is within `limit`.
    Pairs of one file (`cover.file`) are scaled by `same_file_weight` before the cutoff and the
    top-`keep` choice, so a row's slots go to the relations that count.

    Each distinct search start is searched once (neighbouring windows share half their nodes).
    When `same_file_weight` is 0, only other files' nodes count, and a node k searches from
    `anchor[k]` instead (see `tree_anchors`): Dis(k, l) = exp(-anchor_cost[k]) Dis(anchor, l),
    keeping the anchor's nodes whose cost is within limit - anchor_cost[k]; the search also skips
    its own file's dead ends (`exit_cost`, see `bounded_dijkstra`). Otherwise every node is its
    own anchor. Each start's reached nodes are summed per fragment and budget band as they are walked; a
    row's nodes that share a start read those sums once per band, with the summed weight of the
    row's nodes whose budget covers the band.

    Only live fragments j != i with w_ij >= relation_cutoff are returned, at most `keep` per row (the
    largest, ties to the lower column id; all when keep <= 0), as (row, col, value) arrays, plus
    each row's entry bar: the smallest kept value when the row is full (`keep` entries or more),
    else `relation_cutoff`; and whether the heap was big enough (False: nothing else is returned).

    Three steps, which a caller may also run apart (an edit's searches on two threads):
    `number_starts`, `search_bands` over the starts, `assemble_rows`.
    """
    numbered = number_starts(rows, cover, limits, rules, anchors, scratch.source_slot)
    starts, budgets = numbered.starts, numbered.budgets
    band_first = np.zeros((starts.shape[0], budgets.shape[0]), dtype=np.int64)
    band_end = np.zeros((starts.shape[0], budgets.shape[0]), dtype=np.int64)
    pair_frag, pair_value, ok = search_bands(
        np.arange(starts.shape[0]), numbered, cover, graph, limits, rules, anchors, scratch, band_first, band_end)
    if not ok:
        scratch.source_slot[starts] = -1
        return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64), np.zeros(0, np.float64),
                False)
    out_row, out_col, out_val, bars = assemble_rows(
        rows, cover, limits, rules, anchors, numbered, BandSums(band_first, band_end, pair_frag, pair_value), scratch)
    scratch.source_slot[starts] = -1
    return out_row, out_col, out_val, bars, True


@njit(cache=True, nogil=True)
def number_starts(rows, cover, limits, rules, anchors, source_slot):
    """The distinct search starts of `rows` (see `relation_rows`), numbered in `source_slot` (by
    graph node, -1 everywhere on entry; the caller sets the starts back to -1 when done), as a
    `NumberedStarts`.

    Budgets: a node k of a row counts the nodes its start reached within limit - offset(k). The
    offsets are whole numbers of syntax steps (tree_anchors), so a chunk has a handful of
    distinct budgets (Django: at most 7); a reached node's band is the last budget its cost is
    still within.
    """
    frag_indptr, frag_nodes, frag_file = cover.indptr, cover.nodes, cover.file
    span_first, anchor, anchor_cost = anchors.span_first, anchors.anchor, anchors.anchor_cost
    limit = limits.limit
    # Pairs of one file weigh same_file_weight; at 0 (the default) they can never pass the cutoff
    # (> 0), so they are not collected: in big files most of a search stays in its own file.
    skip_own_file = rules.same_file_weight == 0.0
    budgets = np.empty(8, dtype=np.float64)
    budgets[0] = limit
    n_budgets = np.int64(1)  # int64, not a literal: a literal compiles _add_budget once more
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
                    starts = grow(starts, 2 * n_sources)
                    start_file = grow(start_file, 2 * n_sources)
                starts[n_sources] = start
                start_file[n_sources] = frag_file[i]  # a start is a node of its row's file
                n_sources += 1
            offset = anchor_cost[node - span_first] if skip_own_file else 0.0
            if offset <= limit:
                n_budgets = _add_budget(budgets, n_budgets, limit - offset)
                if n_budgets > budgets.shape[0] - 1:
                    budgets = grow(budgets, 2 * budgets.shape[0])
    return NumberedStarts(starts[:n_sources].copy(), start_file[:n_sources].copy(), budgets[:n_budgets].copy(),
                          most_slots)


# Starts searched one after another before their reached nodes are summed (`search_bands`).
SEARCHES_PER_SUM = 16


@njit(cache=True, nogil=True)
def search_bands(which, numbered, cover, graph, limits, rules, anchors, scratch, band_first, band_end):
    """Search from starts[k] for each k in `which` (a `NumberedStarts`' numbers) and sum what each
    reaches per fragment and band.

    Per start and band: the reached other-file fragments j with sum_l len_l Dis(start, l) over
    the start's reached nodes l of j in that band, as the slice band_first[k, b]:band_end[k, b]
    of the returned (pair_frag, pair_value). Summed per fragment over the search's nodes in
    settling order (cost order, so bands come one after the other): neighbouring statements share
    windows, so this is a fraction of the (node, fragment) pairs it replaces, which two rows then
    read again (they took half the build's CPU: docs/measurements.md#graph-and-relations).

    `SEARCHES_PER_SUM` searches run first, each one's other-file nodes and costs copied out in
    settling order, and then their sums are made, into pair lists grown beforehand for the batch's
    (node, fragment) entries: the same sums in the same order as summing each search's nodes right
    after it, in a quarter less time (docs/measurements.md#an-edit). Writes only rows `which` of
    band_first/band_end, so callers may search disjoint sets of starts on several threads, each
    with its own scratch. Returns (pair_frag, pair_value, ok); ok is False when the heap was too
    small.
    """
    starts, start_file = numbered.starts, numbered.start_file
    block_start, block_end = anchors.block_start, anchors.block_end
    skip_own_file = rules.same_file_weight == 0.0
    dist, reached, stamp_box = scratch.search.dist, scratch.search.reached, scratch.stamp_box
    pair_frag = np.empty(1024, dtype=np.int32)  # fragment ids: half the bytes
    pair_value = np.empty(1024, dtype=np.float64)
    n_pairs = np.int64(0)  # int64, not a literal 0: a literal compiles _band_sums once more
    # One batch's other-file nodes as their searches settled them, start after start.
    found_node = np.empty(4096, dtype=np.int32)
    found_cost = np.empty(4096, dtype=np.float64)
    found_end = np.empty(SEARCHES_PER_SUM, dtype=np.int64)
    for first in range(0, which.shape[0], SEARCHES_PER_SUM):
        batch = which[first : first + SEARCHES_PER_SUM]
        n_found = np.int64(0)
        n_entries = np.int64(0)  # (node, fragment) entries of the batch's nodes: the most pairs they make
        for at in range(batch.shape[0]):
            k = batch[at]
            stamp = stamp_box[0] + 1
            stamp_box[0] = stamp
            prune_first = block_start[start_file[k]] if skip_own_file else 0
            prune_end = block_end[start_file[k]] if skip_own_file else 0
            n_reached = bounded_dijkstra(graph, limits, scratch.search, starts[k], stamp,
                                         PrunedSpan(prune_first, prune_end, anchors.exit_cost, anchors.span_first))
            if n_reached < 0:
                return pair_frag[:0].copy(), pair_value[:0].copy(), False
            if n_found + n_reached > found_node.shape[0]:
                capacity = max(2 * found_node.shape[0], n_found + n_reached)
                found_node = grow(found_node, capacity)
                found_cost = grow(found_cost, capacity)
            for t in range(n_reached):
                node = reached[t]
                if prune_first <= node < prune_end:
                    continue  # the source's own file: its fragments are all own-file pairs
                found_node[n_found] = node
                found_cost[n_found] = dist[node]
                n_found += 1
                n_entries += cover.node_indptr[node + 1] - cover.node_indptr[node]
            found_end[at] = n_found
        if n_pairs + n_entries > pair_frag.shape[0]:
            capacity = max(2 * pair_frag.shape[0], n_pairs + n_entries)
            pair_frag = grow(pair_frag, capacity)
            pair_value = grow(pair_value, capacity)
        begin = 0
        for at in range(batch.shape[0]):
            n_pairs = _band_sums(batch[at], found_node, found_cost, begin, found_end[at], numbered, cover,
                                 rules, scratch, band_first, band_end, pair_frag, pair_value, n_pairs)
            begin = found_end[at]
    return pair_frag[:n_pairs].copy(), pair_value[:n_pairs].copy(), True


@njit(cache=True, nogil=True)
def _band_sums(k, nodes, costs, first, end, numbered, cover, rules, scratch, band_first, band_end, pair_frag,
               pair_value, n_pairs):
    """Start k's sums per fragment and band (see `search_bands`) from the other-file nodes its
    search settled, nodes[first:end] in settling order at costs[first:end], appended to the pair
    lists (which have room for them); returns the new count."""
    budgets = numbered.budgets
    node_indptr, node_frags, node_weights = cover.node_indptr, cover.node_frags, cover.node_weights
    live, frag_file = cover.live, cover.file
    own_file = numbered.start_file[k]
    skip_own_file = rules.same_file_weight == 0.0
    acc, touched, is_touched = scratch.acc, scratch.touched, scratch.is_touched
    # Nodes settle in cost order and whole levels share a cost: exp once per level (4% of
    # a cold build's relation rows), the same value as per node.
    level_cost = -1.0
    strength = 0.0
    band = budgets.shape[0] - 1
    n_touched = np.int64(0)
    for t in range(first, end):
        node = nodes[t]
        cost = costs[t]
        if cost != level_cost:
            level_cost = cost
            strength = np.exp(-cost)
            if cost > budgets[band]:
                # Costs only grow: the band's sums are complete.
                n_pairs = _band_pairs(acc, touched, is_touched, n_touched, pair_frag, pair_value, n_pairs)
                band_first[k, band] = n_pairs - n_touched
                band_end[k, band] = n_pairs
                n_touched = np.int64(0)
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
        n_pairs = _band_pairs(acc, touched, is_touched, n_touched, pair_frag, pair_value, n_pairs)
        band_first[k, band] = n_pairs - n_touched
        band_end[k, band] = n_pairs
    return n_pairs


@njit(cache=True, nogil=True)
def _band_pairs(acc, touched, is_touched, n_touched, pair_frag, pair_value, n_pairs):
    """Append the band's summed fragments (touched[:n_touched], values in acc) to the pair lists,
    which have room for them, and clear them from acc; returns the new count. (Returning the
    lists, grown when full, made numba count references to them on every call: the sums took
    twice as long.)"""
    for t in range(n_touched):
        j = touched[t]
        pair_frag[n_pairs] = j
        pair_value[n_pairs] = acc[j]
        n_pairs += 1
        acc[j] = 0.0
        is_touched[j] = False
    return n_pairs


@njit(cache=True, nogil=True)
def assemble_rows(rows, cover, limits, rules, anchors, numbered, sums, scratch):
    """The rows of W from the starts' band sums (`sums`, a `BandSums`; see `relation_rows`):
    (row, col, value, bars)."""
    frag_indptr, frag_nodes, frag_weights = cover.indptr, cover.nodes, cover.weights
    frag_totals, frag_file = cover.totals, cover.file
    limit = limits.limit
    cutoff, keep, same_file_weight = rules.relation_cutoff, rules.keep, rules.same_file_weight
    span_first, anchor, anchor_cost = anchors.span_first, anchors.anchor, anchors.anchor_cost
    budgets, most_slots = numbered.budgets, numbered.most_slots
    band_first, band_end, pair_frag, pair_value = sums
    source_slot, acc, touched, is_touched = scratch.source_slot, scratch.acc, scratch.touched, scratch.is_touched
    row_cols, row_vals = scratch.row_cols, scratch.row_vals
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
        n_touched = np.int64(0)
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
            kept, bar = strongest_of_row(row_cols[:n_row], row_vals[:n_row], keep)
            bars[r] = bar
        while count + n_row > capacity:
            capacity *= 2
            out_row = grow(out_row, capacity)
            out_col = grow(out_col, capacity)
            out_val = grow(out_val, capacity)
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


def relation_scratch(n_graph: int, n_frags: int, heap_capacity: int) -> RelationScratch:
    """Fresh scratch for `relation_rows`: `n_graph` nodes, `n_frags` fragments, heap and FIFO of
    `heap_capacity` entries each. Graph-sized arrays are int32 (node ids and search stamps stay far
    below 2^31) to halve what a thread holds; np.empty pages are only made resident where a search
    writes."""
    search = SearchScratch(
        dist=np.empty(n_graph, dtype=np.float64),
        settled=np.zeros(n_graph, dtype=np.int32),
        reached=np.empty(n_graph, dtype=np.int32),
        heap_cost=np.empty(heap_capacity, dtype=np.float64),
        heap_node=np.empty(heap_capacity, dtype=np.int32),
        queue_cost=np.empty(heap_capacity, dtype=np.float64),
        queue_node=np.empty(heap_capacity, dtype=np.int32),
    )
    return RelationScratch(
        search=search,
        source_slot=np.full(n_graph, -1, dtype=np.int64),
        acc=np.zeros(n_frags, dtype=np.float64),
        touched=np.empty(n_frags, dtype=np.int64),
        is_touched=np.zeros(n_frags, dtype=np.bool_),
        row_cols=np.empty(n_frags, dtype=np.int64),
        row_vals=np.empty(n_frags, dtype=np.float64),
        stamp_box=np.zeros(1, dtype=np.int32),
    )
