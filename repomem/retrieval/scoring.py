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
from repomem.index.kernels.selection import top_k_positions
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
    vocabulary = index.vocabulary
    return [vocabulary[t] for t in tokenize(query_text, index.config.bm25) if t in vocabulary]


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
    n = index.n_fragments
    usable = index.live.copy()
    excluded_ids = _live_ids(index, excluded)
    usable[excluded_ids] = False
    s_ind = score_query(query_terms(index, query_text), index.segments, index.stats, index.doc_len,
                        index.live, index.config.bm25)
    s_ind = np.where(usable, s_ind, 0.0)
    s_env = np.zeros(n)
    environment = deadline is None or time.perf_counter() <= deadline
    if alpha != 0.0 and environment:
        numerator = index.relation_times(s_ind)
        denominator = index.rowsum.copy()
        if excluded_ids.size:
            # W is symmetric: column sums over excluded ids are their row sums.
            n_base = index.w_base.shape[0]
            base_ids = excluded_ids[excluded_ids < n_base]
            if base_ids.size:
                denominator[:n_base] -= np.asarray(index.w_base[base_ids].sum(axis=0)).ravel()
            denominator -= np.asarray(index.w_delta[excluded_ids].sum(axis=0)).ravel()
        positive = denominator > 1e-300
        s_env[positive] = numerator[positive] / denominator[positive]
    s_rel = s_ind + alpha * s_env
    offered = usable.copy()
    offered[_live_ids(index, unlisted)] = False
    s_rel = np.where(offered, s_rel, np.nan)
    return Scores(s_ind, s_env, s_rel, environment)


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


def _best(candidates: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """The k candidates (sorted ids) with the largest values, best first (ties: lower id first)."""
    if k <= 0:
        return candidates[:0]
    return candidates[top_k_positions(np.ascontiguousarray(values, dtype=np.float64), k)]


def top_fragments(index: RepoIndex, scores: Scores, k: int, anchored: int = 0) -> list[ScoredFragment]:
    """The k best usable fragments by s_rel, best first (ties: lower fragment id first).

    `anchored`: the first this-many places go to the best fragments by s_ind (BM25) whatever their
    s_rel, in s_ind order; the rest follow by s_rel. Relations then add to the lexical best match
    instead of displacing it (prompt.anchor_matches; 0 is the paper's ranking).
    """
    candidates = np.flatnonzero(~np.isnan(scores.s_rel))
    if candidates.size == 0 or k <= 0:
        return []
    anchors = _best(candidates, scores.s_ind[candidates], min(anchored, k)) if anchored > 0 else candidates[:0]
    if anchors.size:
        keep = np.ones(candidates.size, dtype=bool)
        keep[np.searchsorted(candidates, anchors)] = False  # candidates are sorted ids (flatnonzero)
        candidates = candidates[keep]
    rest = _best(candidates, scores.s_rel[candidates], k - anchors.size)
    return scored_fragments(index, scores, [*anchors.tolist(), *rest.tolist()])


def scored_fragments(index: RepoIndex, scores: Scores, fragments: Sequence[int]) -> list[ScoredFragment]:
    """The given fragment ids with their scores, in the given order."""
    out = []
    for fragment in fragments:
        record = index.files[int(index.fragment_file[fragment])]
        assert record is not None
        out.append(ScoredFragment(
            fragment=fragment,
            path=record.path,
            start_line=int(index.fragment_start[fragment]),
            end_line=int(index.fragment_end[fragment]),
            s_ind=float(scores.s_ind[fragment]),
            s_env=float(scores.s_env[fragment]),
            s_rel=float(scores.s_rel[fragment]),
        ))
    return out
