"""FragRel scoring (eqs. 9-10): s_ind by BM25, s_env through W, s_rel, top-K.

Fragments the caller must not see (the RepoEval leakage rule, the caller's own visible window)
are excluded both as candidates and as neighbours: their s_ind feeds no s_env and their
relation weight leaves the denominator of eq. 9.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from repomem.index.bm25 import score_query
from repomem.index.kernels.csr import rows_times
from repomem.index.kernels.environment import add_rows_scaled, relation_bounds
from repomem.index.kernels.selection import largest_positions, top_k_offered, top_k_positions
from repomem.index.repo_index import RepoIndex
from repomem.index.tokens import tokenize


@dataclass(frozen=True)
class ScoredFragment:
    fragment: int  # fragment id
    path: str
    start_line: int  # 0-based, first line
    end_line: int  # 0-based, line after the last
    s_ind: float
    s_env: float
    s_rel: float
    # Shown instead of the lines [start_line, end_line): a summary or gist of them (the memory
    # strategies' compressed context). None: the lines themselves.
    text: str | None = None


@dataclass(frozen=True)
class Scores:
    """Per-fragment scores, shape (n_fragments,) each; excluded or dead fragments are NaN in s_rel."""

    s_ind: np.ndarray
    s_env: np.ndarray
    s_rel: np.ndarray
    environment: bool = True  # False: the time budget ran out before eq. 9, s_env is all 0


@dataclass(frozen=True)
class Lift:
    """The neighbour j that adds most to fragment i's environment score (eq. 9): largest w_ij * s_ind_j."""

    fragment: int  # j
    path: str
    start_line: int  # 0-based
    end_line: int  # line after the last
    weight: float  # w_ij, the fragment relation (eq. 8)
    s_ind: float  # s_ind_j
    share: float  # w_ij * s_ind_j / sum_j w_ij * s_ind_j: its part of s_env_i


def query_terms(index: RepoIndex, query_text: str) -> list[int]:
    term_id = index.vocabulary.get
    return [i for i in map(term_id, tokenize(query_text, index.config.bm25)) if i is not None]


def _live_ids(index: RepoIndex, chosen: np.ndarray | None) -> np.ndarray:
    """A bool mask or an id array as sorted live fragment ids."""
    if chosen is None or not chosen.size:
        return np.zeros(0, dtype=np.int64)
    if chosen.dtype == bool:
        return np.flatnonzero(chosen & index.live)
    ids = np.unique(chosen.astype(np.int64))
    return ids[index.live[ids]]


def score_fragments(index: RepoIndex, query_text: str, alpha: float, excluded: np.ndarray | None = None,
                    deadline: float | None = None, unlisted: np.ndarray | None = None) -> Scores:
    """Eqs. 9-10 for every fragment.

    `excluded` (bool mask or id array): fragments that must not be seen at all, neither offered nor
    feeding a neighbour's s_env (text the caller may not know, e.g. lines after a RepoEval hole).
    `unlisted`: fragments only kept off the result (the prompt shows them already); their s_ind
    still feeds their neighbours' s_env, so the code around the cursor lifts what it relates to.

    `deadline` (a time.perf_counter() value): if the BM25 pass ends after it, eq. 9 is skipped
    and s_rel = s_ind (plain BM25 ranking), flagged by `Scores.environment = False`.
    """
    s_ind, usable, excluded_ids = _independent_scores(index, query_text, excluded)
    environment = deadline is None or time.perf_counter() <= deadline
    return _all_scores(index, s_ind, _offered(index, usable, unlisted), excluded_ids,
                       alpha if environment else 0.0, environment)


def _all_scores(index: RepoIndex, s_ind: np.ndarray, offered: np.ndarray, excluded_ids: np.ndarray,
                alpha: float, environment: bool) -> Scores:
    s_env = np.zeros(index.n_fragments)
    if alpha != 0.0:
        s_env = _environment(index.relation_times(s_ind), _relation_mass(index, excluded_ids))
    s_rel = s_ind + alpha * s_env
    return Scores(s_ind, s_env, np.where(offered, s_rel, np.nan), environment)


def best_fragments(index: RepoIndex, query_text: str, alpha: float, k: int, anchored: int = 0,
                   excluded: np.ndarray | None = None, deadline: float | None = None,
                   unlisted: np.ndarray | None = None) -> list[ScoredFragment]:
    """`top_fragments(score_fragments(...))`: the same fragments and the same float64 scores, with
    s_env worked out only where it can change the top K (alpha > 0; otherwise it is that call).

    s_env_i is a weighted mean of the s_ind_j of i's usable neighbours (eq. 9; W >= 0). Split s_ind
    into its few largest entries ("strong", their rows of W added in) and the rest, each at most
    the smallest strong one: then s_env_i <= (W s_strong)_i / d_i + max(0, that), a bound on
    s_rel_i that is tight where it matters. Exact rows of W are summed only for fragments whose
    bound reaches the K-th s_rel. The whole product was half of a query's time
    (docs/measurements.md#a-query).
    """
    s_ind, usable, excluded_ids = _independent_scores(index, query_text, excluded)
    environment = deadline is None or time.perf_counter() <= deadline
    offered = _offered(index, usable, unlisted)
    if alpha <= 0.0 or not environment:  # the bound needs alpha > 0 (alpha < 0: the whole product)
        scores = _all_scores(index, s_ind, offered, excluded_ids, alpha if environment else 0.0, environment)
        return top_fragments(index, scores, k, anchored)
    n_offered = int(np.count_nonzero(offered))
    if n_offered == 0 or k <= 0:
        return []
    # Positions are fragment ids here, so top_k_positions' ties go to the lower id, as in top_fragments.
    n_anchors = max(0, min(anchored, k, n_offered))
    anchors = top_k_offered(s_ind, offered, n_anchors)
    places = min(k, n_offered) - n_anchors
    rows = _RelationRows(index, s_ind, _relation_mass(index, excluded_ids))
    rest, rest_env = anchors[:0], np.zeros(0)
    if places > 0:
        bounds = rows.bounds(offered, alpha)
        bounds[anchors] = -np.inf
        # The K-th exact s_rel among the best bounds, then every fragment whose bound reaches it.
        first = np.sort(top_k_positions(bounds, min(n_offered - n_anchors, 2 * places)))
        first_rel = s_ind[first] + alpha * rows.environment(first)
        bar = first_rel[top_k_positions(first_rel, places)[-1]]
        needed = np.flatnonzero(bounds >= bar - 1e-9 * max(1.0, abs(bar)))  # the margin covers rounding
        if not np.isfinite(bar) or rows.cheaper_whole(needed.size):  # overflowing scores: no bound to trust
            scores = _all_scores(index, s_ind, offered, excluded_ids, alpha, True)
            return top_fragments(index, scores, k, anchored)
        needed_env = rows.environment(needed)
        best = top_k_positions(s_ind[needed] + alpha * needed_env, places)  # needed: sorted ids, ties to the lower
        rest, rest_env = needed[best], needed_env[best]
    chosen = np.concatenate([anchors, rest]).astype(np.int64)
    s_env = np.concatenate([rows.environment(anchors), rest_env])
    s_rel = s_ind[chosen] + alpha * s_env
    return [_scored(index, int(f), float(s_ind[f]), float(e), float(r)) for f, e, r in zip(chosen, s_env, s_rel)]


class _RelationRows:
    """Eq. 9 for chosen fragments from their own rows of W, and a bound on it for every fragment."""

    # Entries of s_ind whose rows of W are read for the bound. Fewer make a looser bound, so more
    # fragments get their exact rows (a few dozen more, each ~80 entries), but the selection and
    # the scatter of the strong rows cost less: docs/measurements.md#a-query.
    STRONG = 32

    def __init__(self, index: RepoIndex, s_ind: np.ndarray, denominator: np.ndarray):
        self.index, self.s_ind, self.denominator = index, s_ind, denominator

    def cheaper_whole(self, n_rows: int) -> bool:
        """Past a third of W's rows (about a third of its entries): the whole product, on its
        parallel blocks, costs less."""
        return n_rows > self.index.w_base.shape[0] / 3

    def environment(self, fragments: np.ndarray) -> np.ndarray:
        """s_env of `fragments` (ids), float64: the bits the whole product gives."""
        base, delta = self.index.w_base, self.index.w_delta
        ids = fragments.astype(np.int64)
        numerator = np.zeros(ids.size)
        in_base = ids < base.shape[0]
        numerator[in_base] = rows_times(base.indptr, base.indices, base.data, ids[in_base], self.s_ind)
        if delta.nnz:
            numerator += rows_times(delta.indptr, delta.indices, delta.data, ids, self.s_ind)
        return _environment(numerator, self.denominator[ids])

    def bounds(self, offered: np.ndarray, alpha: float) -> np.ndarray:
        """Upper bounds on every fragment's s_rel, shape (n_fragments,), -inf where not offered: the
        strongest entries of s_ind through their own rows of W, every other one at most the
        smallest of them (a weighted mean of the weak ones is at most that)."""
        s_ind = self.s_ind
        n_strong = min(self.STRONG, s_ind.size)
        strong = np.sort(largest_positions(s_ind, n_strong))
        # The weak ones' part of a mean is at most their share of the weight times their largest
        # s_ind, so at most max(0, that): BM25 goes below 0 where the average idf does.
        weak_bar = max(0.0, float(s_ind[strong].min())) if n_strong < s_ind.size else 0.0
        part = np.zeros(self.index.n_fragments)
        base, delta = self.index.w_base, self.index.w_delta
        in_base = strong[strong < base.shape[0]]
        # W is symmetric: row j of W is column j, so each strong row adds its s_ind_j to its neighbours.
        add_rows_scaled(base.indptr, base.indices, base.data, in_base, s_ind[in_base], part)
        if delta.nnz:
            add_rows_scaled(delta.indptr, delta.indices, delta.data, strong, s_ind[strong], part)
        return relation_bounds(s_ind, part, self.denominator, offered, alpha, weak_bar)


def _environment(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """Eq. 9: numerator / denominator, 0 where the denominator is 0 (no usable relation)."""
    return np.divide(numerator, denominator, out=np.zeros(numerator.size), where=denominator > 1e-300)


def _independent_scores(index: RepoIndex, query_text: str,
                        excluded: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(s_ind, usable, excluded ids): BM25 per fragment, 0 where not usable (dead or excluded)."""
    usable = index.live.copy()
    excluded_ids = _live_ids(index, excluded)
    usable[excluded_ids] = False
    s_ind = score_query(query_terms(index, query_text), index.segments, index.stats, index.doc_len,
                        index.live, index.config.bm25)  # a new array, 0 where not live
    s_ind[excluded_ids] = 0.0
    return s_ind, usable, excluded_ids


def _relation_mass(index: RepoIndex, excluded_ids: np.ndarray) -> np.ndarray:
    """Eq. 9's denominator for every fragment: sum_j W_ij over usable j (live, not excluded).
    Read only: with nothing excluded it is the index's own row sums, not a copy."""
    if not excluded_ids.size:
        return index.rowsum
    denominator = index.rowsum.copy()
    # W is symmetric: column sums over excluded ids are their row sums.
    n_base = index.w_base.shape[0]
    base_ids = excluded_ids[excluded_ids < n_base]
    if base_ids.size:
        denominator[:n_base] -= np.asarray(index.w_base[base_ids].sum(axis=0)).ravel()
    denominator -= np.asarray(index.w_delta[excluded_ids].sum(axis=0)).ravel()
    return denominator


def _offered(index: RepoIndex, usable: np.ndarray, unlisted: np.ndarray | None) -> np.ndarray:
    offered = usable.copy()
    offered[_live_ids(index, unlisted)] = False
    return offered


def strongest_lifts(index: RepoIndex, scores: Scores, fragments: Sequence[int]) -> list[Lift | None]:
    """For each fragment i, the neighbour with the largest w_ij * s_ind_j (None: nothing lifted it).

    Reads row i of W (base + delta) directly: a handful of sparse rows, no full matrix.
    """
    n_base = index.w_base.shape[0]
    out: list[Lift | None] = []
    for fragment in fragments:
        weights: dict[int, float] = {}
        rows = [(index.w_base, fragment)] if fragment < n_base else []
        rows.append((index.w_delta, fragment))
        for matrix, row in rows:
            start, end = matrix.indptr[row], matrix.indptr[row + 1]
            for column, value in zip(matrix.indices[start:end].tolist(), matrix.data[start:end].tolist()):
                if column != fragment:
                    weights[column] = weights.get(column, 0.0) + value
        contributions = {j: w * float(scores.s_ind[j]) for j, w in weights.items() if index.live[j]}
        total = sum(contributions.values())
        best = max(contributions, key=lambda j: (contributions[j], -j), default=None)
        if best is None or contributions[best] <= 0.0:
            out.append(None)
            continue
        record = index.files[int(index.fragment_file[best])]
        assert record is not None
        out.append(Lift(
            fragment=best, path=record.path, start_line=int(index.fragment_start[best]),
            end_line=int(index.fragment_end[best]), weight=weights[best], s_ind=float(scores.s_ind[best]),
            share=contributions[best] / total,
        ))
    return out


def top_fragments(index: RepoIndex, scores: Scores, k: int, anchored: int = 0) -> list[ScoredFragment]:
    """The k best usable fragments by s_rel, best first (ties: lower fragment id first).

    `anchored`: the first this-many places go to the best fragments by s_ind (BM25) whatever their
    s_rel, in s_ind order; the rest follow by s_rel. Relations then add to the lexical best match
    instead of displacing it (prompt.anchor_matches; 0 is the paper's ranking).
    """
    if k <= 0:
        return []
    candidates = ~np.isnan(scores.s_rel)
    anchors = top_k_offered(scores.s_ind, candidates, min(max(anchored, 0), k))
    candidates[anchors] = False
    rest = top_k_offered(scores.s_rel, candidates, k - anchors.size)
    return scored_fragments(index, scores, [*anchors.tolist(), *rest.tolist()])


def scored_fragments(index: RepoIndex, scores: Scores, fragments: Sequence[int]) -> list[ScoredFragment]:
    """The given fragment ids with their scores, in the given order."""
    return [_scored(index, fragment, float(scores.s_ind[fragment]), float(scores.s_env[fragment]),
                    float(scores.s_rel[fragment])) for fragment in fragments]


def _scored(index: RepoIndex, fragment: int, s_ind: float, s_env: float, s_rel: float) -> ScoredFragment:
    record = index.files[int(index.fragment_file[fragment])]
    assert record is not None
    return ScoredFragment(fragment=fragment, path=record.path, start_line=int(index.fragment_start[fragment]),
                          end_line=int(index.fragment_end[fragment]), s_ind=s_ind, s_env=s_env, s_rel=s_rel)
