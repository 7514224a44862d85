"""BM25 Okapi over fragments, as sparse postings (bm25s-style), equal to rank-bm25's BM25Okapi.

Term frequencies live in segments: immutable CSC matrices (documents x terms) over a range of
fragment ids. An incremental update appends a segment and marks replaced fragments dead;
statistics (N, avgdl, df, idf) always cover live fragments only, so scores equal a fresh
BM25Okapi over the live fragments.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from repomem.config import BM25Config
from repomem.index.kernels.postings import (
    OkapiQuery,
    PostingsSegment,
    add_bm25_scores,
    joined_postings,
    term_postings,
)


@dataclass(frozen=True)
class TermSegment:
    first_doc: int  # fragment id of row 0
    tf: sp.csc_matrix  # shape (n_docs_in_segment, vocabulary size when built), int32 counts
    _by_doc: list = field(default_factory=list, compare=False, repr=False)  # cached CSR copy

    def doc_terms(self, local_docs: np.ndarray) -> np.ndarray:
        """Term ids present in the given segment rows (one entry per row and term; distinct rows)."""
        tf = self.tf
        if not self._by_doc and tf.nnz <= tf.shape[1]:
            # A segment with fewer postings than terms (an edit's): read its columns where they hold
            # the rows, rather than make a by-document copy, a pass over the whole vocabulary.
            wanted = np.zeros(tf.shape[0], dtype=bool)
            wanted[local_docs] = True
            at = np.flatnonzero(wanted[tf.indices])
            return (np.searchsorted(tf.indptr, at, side="right") - 1).astype(np.int64)
        if not self._by_doc:
            self._by_doc.append(self.tf.tocsr())
        by_doc = self._by_doc[0]
        parts = [by_doc.indices[by_doc.indptr[d] : by_doc.indptr[d + 1]] for d in local_docs.tolist()]
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)


@dataclass(frozen=True)
class BM25Stats:
    idf: np.ndarray  # float64, shape (n_terms,), rank-bm25's idf with the epsilon floor
    avgdl: float
    n_live: int
    # (df, idf before the floor, ln(df + 0.5)) these statistics came from: an edit that keeps the
    # number of live documents works out the idf of the terms whose df changed only, and one that
    # changes it reuses ln(df + 0.5) where df stayed (`compute_stats`).
    unfloored: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, compare=False, repr=False)
    # (document lengths, their scaled lengths): the last `scaled_lengths` answer, kept while the
    # same length array is asked about (an edit makes a new one, and new statistics).
    _scaled: list = field(default_factory=list, compare=False, repr=False)

    def scaled_lengths(self, doc_len: np.ndarray, config: BM25Config) -> np.ndarray:
        """k1 b / avgdl x each document's length, float64, shape (n_docs,): what every posting's
        denominator adds. Worked out once per index state, not once a query (one product per
        document and an allocation: docs/measurements.md#a-query)."""
        if self._scaled and self._scaled[0][0] is doc_len:
            return self._scaled[0][1]
        length_scale = config.k1 * config.b / self.avgdl if self.avgdl > 0 else 0.0
        scaled = length_scale * doc_len
        self._scaled[:] = [(doc_len, scaled)]
        return scaled


def build_segment(first_doc: int, doc_terms: Sequence[np.ndarray], n_terms: int) -> TermSegment:
    """`doc_terms[d]` holds the term ids of document first_doc + d (with repeats)."""
    doc_offsets = np.zeros(len(doc_terms) + 1, dtype=np.int64)
    np.cumsum(np.fromiter((t.shape[0] for t in doc_terms), dtype=np.int64, count=len(doc_terms)),
              out=doc_offsets[1:])
    terms = np.concatenate(doc_terms).astype(np.int32, copy=False) if doc_terms else np.zeros(0, dtype=np.int32)
    indptr, docs, counts = term_postings(terms, doc_offsets, n_terms)
    index_dtype = np.int32 if indptr[-1] < np.iinfo(np.int32).max else np.int64
    tf = sp.csc_matrix((len(doc_terms), n_terms), dtype=np.int32)
    tf.indptr, tf.indices, tf.data = indptr.astype(index_dtype), docs.astype(index_dtype, copy=False), counts
    tf.has_sorted_indices = True
    return TermSegment(first_doc, tf)


def joined_segment(segments: Sequence[TermSegment], live: np.ndarray) -> TermSegment:
    """Consecutive segments (each one's documents right after the one before's) as one, without
    the postings of dead documents. Scores are unchanged, bit for bit: a document lives in one
    segment either way and sums its terms in the query's order, and a dead one scores 0."""
    first = segments[0].first_doc
    n_docs = sum(segment.tf.shape[0] for segment in segments)
    n_terms = max(segment.tf.shape[1] for segment in segments)
    alive = [bool(live[s.first_doc : s.first_doc + s.tf.shape[0]].any()) for s in segments]
    if sum(alive) == 1:
        only = segments[alive.index(True)]
        if live[only.first_doc : only.first_doc + only.tf.shape[0]].all():
            # One segment holds every live document (typing into one file: the last version's
            # segment is all dead): its postings as they are, renumbered, no pass over the terms.
            return _rebased(only, first, n_docs, n_terms)
    return postings_joined(segments, live)


def postings_joined(segments: Sequence[TermSegment], live: np.ndarray) -> TermSegment:
    """`joined_segment` by the joining kernel, whatever lives where."""
    first = segments[0].first_doc
    n_docs = sum(segment.tf.shape[0] for segment in segments)
    n_terms = max(segment.tf.shape[1] for segment in segments)
    indptrs = np.empty((len(segments), n_terms + 1), dtype=np.int64)
    for row, segment in zip(indptrs, segments):
        own = segment.tf.indptr
        row[: own.shape[0]] = own
        row[own.shape[0]:] = own[-1]  # terms the segment never saw: no postings
    sizes = np.fromiter((segment.tf.nnz for segment in segments), dtype=np.int64, count=len(segments))
    entry_starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    docs = np.concatenate([segment.tf.indices.astype(np.int64) + (segment.first_doc - first) for segment in segments])
    counts = np.concatenate([segment.tf.data for segment in segments])
    indptr, kept_docs, kept_counts = joined_postings(indptrs, entry_starts, docs, counts, live[docs + first])
    index_dtype = np.int32 if indptr[-1] < np.iinfo(np.int32).max else np.int64
    tf = sp.csc_matrix((n_docs, n_terms), dtype=np.int32)
    tf.indptr, tf.indices, tf.data = indptr.astype(index_dtype), kept_docs.astype(index_dtype, copy=False), kept_counts
    tf.has_sorted_indices = True
    return TermSegment(first, tf)


def _rebased(segment: TermSegment, first: int, n_docs: int, n_terms: int) -> TermSegment:
    """`segment`'s postings in a segment of `n_docs` documents from `first` and `n_terms` terms:
    what `joined_segment` makes when the other segments hold no live document."""
    own = segment.tf
    indptr = np.empty(n_terms + 1, dtype=np.int64)
    indptr[: own.indptr.shape[0]] = own.indptr
    indptr[own.indptr.shape[0]:] = own.indptr[-1]  # terms the segment never saw: no postings
    index_dtype = np.int32 if indptr[-1] < np.iinfo(np.int32).max else np.int64
    tf = sp.csc_matrix((n_docs, n_terms), dtype=np.int32)
    tf.indptr = indptr.astype(index_dtype)
    tf.indices = (own.indices.astype(np.int64) + (segment.first_doc - first)).astype(index_dtype)
    tf.data = own.data.copy()
    tf.has_sorted_indices = True
    return TermSegment(first, tf)


def appended_segment(segments: list[TermSegment], first_kept: int, live: np.ndarray) -> None:
    """After an edit appended its segment: the newest segments past `first_kept` (the base's)
    joined while the one before the newest holds no more postings than it, like a binary counter.
    An editing session then keeps a few segments, not one per edit (each query visits every
    segment, and each holds pointers for the whole vocabulary: docs/measurements.md#an-edit);
    every posting is copied about log2(edits) times, and a file edited again leaves its old
    postings behind at the next join."""
    while len(segments) - first_kept >= 2 and segments[-2].tf.nnz <= segments[-1].tf.nnz:
        segments[-2:] = [joined_segment(segments[-2:], live)]


def document_frequencies(segment: TermSegment, n_terms: int, live: np.ndarray) -> np.ndarray:
    """How many live documents of the segment contain each term, shape (n_terms,)."""
    tf = segment.tf
    if live[segment.first_doc : segment.first_doc + tf.shape[0]].all():
        # All live (an edit's new segment): each posting is one document of its term.
        return _sized(np.diff(tf.indptr).astype(np.int64), n_terms)
    doc_ids = tf.indices + segment.first_doc
    alive = live[doc_ids]
    term_of_entry = np.repeat(np.arange(tf.shape[1], dtype=np.int64), np.diff(tf.indptr))
    return _sized(np.bincount(term_of_entry[alive], minlength=n_terms), n_terms)


def _sized(counts: np.ndarray, n_terms: int) -> np.ndarray:
    """Per-term counts cut or zero-padded to the vocabulary's size, shape (n_terms,)."""
    return counts[:n_terms] if counts.shape[0] > n_terms else np.pad(counts, (0, n_terms - counts.shape[0]))


def _changed_terms(df: np.ndarray, old_df: np.ndarray) -> np.ndarray:
    """Ids of the terms whose df differs from `old_df` (a vocabulary no longer than df's), new
    terms included."""
    return np.concatenate([np.flatnonzero(df[: old_df.shape[0]] != old_df), np.arange(old_df.shape[0], df.shape[0])])


def _log_frequencies(df: np.ndarray, present: np.ndarray, old_logs: np.ndarray | None,
                     changed: np.ndarray | None) -> np.ndarray:
    """ln(df + 0.5) of every present term, 0 for the others, shape (n_terms,): `old_logs` where a
    term's df stayed (the same arithmetic on the same number), worked out at `changed`. It depends
    on df alone, so an edit that changes the number of live documents, and with it every term's
    ln(N - df + 0.5), still reuses it: one logarithm a term instead of two
    (docs/measurements.md#an-edit)."""
    logs = np.zeros(df.shape[0])
    if old_logs is None or changed is None:
        logs[present] = np.log(df[present] + 0.5)
        return logs
    logs[: old_logs.shape[0]] = old_logs
    counted = changed[present[changed]]
    logs[changed] = 0.0
    logs[counted] = np.log(df[counted] + 0.5)
    return logs


def compute_stats(df: np.ndarray, doc_len: np.ndarray, live: np.ndarray, config: BM25Config,
                  before: BM25Stats | None = None) -> BM25Stats:
    """N, avgdl and rank-bm25's idf over the live documents, ln(N - df + 0.5) - ln(df + 0.5).
    `before`: the statistics this edit started from; when it kept the number of live documents (a
    line typed into a file), only the terms whose df changed get a new idf, and otherwise the
    terms whose df stayed keep their ln(df + 0.5): the values a whole pass gives (the same
    arithmetic on the same numbers), and the floor's average is summed over the same array."""
    n_live = int(np.count_nonzero(live))
    if n_live == 0:
        return BM25Stats(np.zeros(df.shape[0]), 0.0, 0)
    avgdl = float(doc_len[live].sum()) / n_live
    present = df > 0
    last = before.unfloored if before is not None and before.unfloored is not None \
        and before.unfloored[0].shape[0] <= df.shape[0] else None
    changed = _changed_terms(df, last[0]) if last is not None else None
    logs = _log_frequencies(df, present, last[2] if last is not None else None, changed)
    raw = np.zeros(df.shape[0])
    if last is not None and changed is not None and before is not None and before.n_live == n_live:
        old_raw = last[1]
        raw[: old_raw.shape[0]] = old_raw
        raw[changed] = 0.0
        counted = changed[present[changed]]
        raw[counted] = np.log(n_live - df[counted] + 0.5) - logs[counted]
    else:
        raw[present] = np.log(n_live - df[present] + 0.5) - logs[present]
    n_present = int(np.count_nonzero(present))
    average = float(raw[present].sum()) / n_present if n_present else 0.0
    idf = raw.copy()
    idf[present & (raw < 0)] = config.epsilon * average
    return BM25Stats(idf, avgdl, n_live, (df, raw, logs))


def score_query(
    query_terms: Iterable[int],
    segments: Sequence[TermSegment],
    stats: BM25Stats,
    doc_len: np.ndarray,
    live: np.ndarray,
    config: BM25Config,
) -> np.ndarray:
    """s_ind for every fragment id, shape (n_docs,); dead fragments score 0.

    Repeated query terms count once per occurrence, as rank-bm25's get_scores does.
    """
    n_docs = doc_len.shape[0]
    scores = np.zeros(n_docs)
    if stats.n_live == 0:
        return scores
    ids, counts = np.unique(np.fromiter(query_terms, dtype=np.int64), return_counts=True)
    norm_scale = config.k1 * (1.0 - config.b)
    term_weights = counts * stats.idf[ids]  # per query term: occurrences x idf
    query = OkapiQuery(ids, term_weights, config.k1, norm_scale, stats.scaled_lengths(doc_len, config))
    for segment in segments:
        tf = segment.tf
        add_bm25_scores(PostingsSegment(tf.indptr, tf.indices, tf.data, segment.first_doc), query, scores)
    scores[~live] = 0.0
    return scores
