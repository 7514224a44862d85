"""How each strategy's `retriever` (repomem.strategies) finds fragments for one round.

A retriever takes the service and one round's query and returns fragments, best first. Adding
a way of retrieving is one function here (or a module of its own) and one entry in RETRIEVERS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from repomem.positions import Cursor
from repomem.retrieval.scoring import ScoredFragment
from repomem.service import RepoService


@dataclass(frozen=True)
class RoundQuery:
    cursor: Cursor
    text: str  # the query window (round 2 of RepoCoder: the window slid over the draft)
    alpha: float
    excluded: np.ndarray | None
    unlisted: np.ndarray | None


Retriever = Callable[[RepoService, RoundQuery], list[ScoredFragment]]


def current_file_only(service: RepoService, query: RoundQuery) -> list[ScoredFragment]:
    return []


def sparse_windows(service: RepoService, query: RoundQuery) -> list[ScoredFragment]:
    """BM25 over the index's windows, re-weighted by eq. 10 when alpha > 0."""
    if service.index is None:
        return []
    found = service.retrieve_at(query.cursor, query=query.text, alpha=query.alpha, excluded=query.excluded,
                                unlisted=query.unlisted)
    # Definitions the file reaches through its imports and calls come first (when configured):
    # compact, and what an API call needs.
    return [*service.definitions_at(query.cursor, query.text), *found.fragments]


RETRIEVERS: dict[str, Retriever] = {
    "none": current_file_only,
    "sparse": sparse_windows,
}
