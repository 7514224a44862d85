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


def summary_tree_walk(service: RepoService, query: RoundQuery) -> list[ScoredFragment]:
    """HAT: walk the summary tree best-first from the root to the files whose summaries match the
    query best, then rank only their windows (and the current file's) by BM25."""
    if service.index is None:
        return []
    settings = service.config.retrieval
    walk = service.summary_tree().walk(query.text, service.config.bm25, settings.summary_walk_files,
                                       settings.summary_walk_steps)
    reached = {path for path, _ in walk.files} | {query.cursor.path}
    outside = np.flatnonzero(~service.fragments_of_files(reached))  # fragment ids, as retrieve_at takes them
    if query.excluded is not None:
        caller = np.flatnonzero(query.excluded) if query.excluded.dtype == bool else query.excluded.astype(np.int64)
        outside = np.union1d(outside, caller)
    found = service.retrieve_at(query.cursor, query=query.text, alpha=0.0, excluded=outside, unlisted=query.unlisted)
    return list(found.fragments)


RETRIEVERS: dict[str, Retriever] = {
    "none": current_file_only,
    "sparse": sparse_windows,
    "summary-tree": summary_tree_walk,
}
