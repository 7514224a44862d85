"""How each strategy's `retriever` (repomem.strategies) finds fragments for one round.

A retriever takes the request's view of the repository (repomem/repo_view.py) and one round's
query and returns fragments, best first. Adding a way of retrieving is one function here (or a
module of its own) and one entry in RETRIEVERS.
"""

from __future__ import annotations

from collections.abc import Callable

from repomem.completion.memory_retrievers import entity_walk, gist_lookup, memory_walk
from repomem.completion.retrieval_round import RetrievalFailed, RoundQuery, bm25_within
from repomem.failures import Failure
from repomem.repo_view import RepoView
from repomem.retrieval.scoring import ScoredFragment

__all__ = ["RETRIEVERS", "RetrievalFailed", "Retriever", "RoundQuery"]

Retriever = Callable[[RepoView, RoundQuery], list[ScoredFragment]]


def current_file_only(view: RepoView, query: RoundQuery) -> list[ScoredFragment]:
    return []


def sparse_windows(view: RepoView, query: RoundQuery) -> list[ScoredFragment]:
    """BM25 over the index's windows, re-weighted by eq. 10 when alpha > 0."""
    if not view.index_loaded:
        return []
    found = view.retrieve_at(query.cursor, query=query.text, alpha=query.alpha, excluded=query.excluded,
                                unlisted=query.unlisted, anchored=query.anchored)
    return list(found.fragments)


def dense_windows(view: RepoView, query: RoundQuery) -> list[ScoredFragment]:
    """RepoCoder's dense retriever: windows ranked by the cosine of their embedding with the
    query's (all-MiniLM-L6-v2, repomem/embeddings/embedder.py); the request fails when the embedding
    model cannot be had."""
    if not view.index_loaded:
        return []
    found = view.retrieve_dense(query.cursor, query.text, excluded=query.excluded, unlisted=query.unlisted)
    if isinstance(found, Failure):
        raise RetrievalFailed(found)
    return found


def summary_tree_walk(view: RepoView, query: RoundQuery) -> list[ScoredFragment]:
    """HAT: walk the summary tree best-first from the root to the files whose summaries match the
    query best, then rank only their windows (and the current file's) by BM25."""
    if not view.index_loaded:
        return []
    settings = view.config.retrieval
    walk = view.memories.summary_tree().walk(query.text, view.config.bm25, settings.summary_walk_files,
                                                settings.summary_walk_steps, frozenset({query.cursor.path}))
    return bm25_within(view, query, {path for path, _ in walk.files} | {query.cursor.path}, settings.top_k)


RETRIEVERS: dict[str, Retriever] = {
    "none": current_file_only,
    "sparse": sparse_windows,
    "dense": dense_windows,  # RepoCoder's dense setting
    "summary-tree": summary_tree_walk,
    "memory-walk": memory_walk,  # MemWalker
    "gist-lookup": gist_lookup,  # ReadAgent
    "entity-walk": entity_walk,  # QRMeM
}
