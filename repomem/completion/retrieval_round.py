"""One round's query, as every retriever takes it, and the BM25 ranking the retrievers share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from repomem.completion.model_calls import MemoryModel
from repomem.failures import Failure
from repomem.positions import Cursor
from repomem.repo_view import RepoView
from repomem.retrieval.scoring import ScoredFragment


class RetrievalFailed(Exception):
    """A retriever that cannot retrieve at all (its model cannot be had): the request fails with
    `failure` instead of going on with no context as if none were relevant."""

    def __init__(self, failure: Failure):
        super().__init__(failure.message)
        self.failure = failure


@dataclass(frozen=True)
class RoundQuery:
    cursor: Cursor
    text: str  # the query window (round 2 of RepoCoder: the window slid over the draft)
    alpha: float
    excluded: np.ndarray | None
    unlisted: np.ndarray | None
    model: MemoryModel | None = None  # strategies that ask the model while retrieving (issue 14)
    # BM25's best matches kept at the head of eq. 10's ranking (None: prompt.anchor_matches; the
    # engine asks 0, the paper's ranking, unless the strategy uses the anchored-match lever).
    anchored: int | None = None

    def offers(self, fragment: int) -> bool:
        """Whether the caller's masks let this fragment be shown (not excluded nor unlisted)."""
        return not any(_holds(mask, fragment) for mask in (self.excluded, self.unlisted))


def _holds(mask: np.ndarray | None, fragment: int) -> bool:
    if mask is None or mask.size == 0:
        return False
    if mask.dtype == bool:
        return fragment < mask.shape[0] and bool(mask[fragment])
    return bool(np.any(mask == fragment))


def bm25_within(view: RepoView, query: RoundQuery, files: set[str] | None, k: int,
                leave_out: frozenset[str] = frozenset()) -> list[ScoredFragment]:
    """The best `k` windows by BM25 (alpha 0) among `files` (None: every file) but those of
    `leave_out`, with the query's own masks (leakage rule, caller's exclusions) and the cursor's
    (visible lines)."""
    excluded = query.excluded
    if files is not None or leave_out:
        left_out = view.fragments_of_files(set(leave_out))  # bool, shape (n_fragments,)
        inside = ~left_out if files is None else view.fragments_of_files(files) & ~left_out
        outside = np.flatnonzero(~inside)  # fragment ids, as retrieve_at takes them
        if excluded is not None:
            caller = np.flatnonzero(excluded) if excluded.dtype == bool else excluded.astype(np.int64)
            outside = np.union1d(outside, caller)
        excluded = outside
    found = view.retrieve_at(query.cursor, k=k, query=query.text, alpha=0.0, excluded=excluded,
                                unlisted=query.unlisted)
    return list(found.fragments)
