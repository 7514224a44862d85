"""BM25 postings (numba): built from term ids, summed for the statistics, scored against a query."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit


class PostingsSegment(NamedTuple):
    """One segment of the postings, CSC by term (a scipy csc_matrix's arrays): term t's documents
    are indices[indptr[t]:indptr[t + 1]] + first_doc, each holding the term counts[slot] times."""

    indptr: np.ndarray  # int32 or int64, shape (n_terms + 1,)
    indices: np.ndarray  # int32 or int64, shape (nnz,): document ids relative to first_doc
    counts: np.ndarray  # int32, shape (nnz,)
    first_doc: int  # fragment id of the segment's document 0


class OkapiQuery(NamedTuple):
    """A query as BM25 Okapi scores it (bm25.k1 and bm25.b folded into two scales)."""

    terms: np.ndarray  # int64, shape (n_query_terms,): distinct term ids
    term_weights: np.ndarray  # float64, shape (n_query_terms,): occurrences in the query x idf
    k1: float  # bm25.k1
    norm_scale: float  # k1 (1 - b)
    # float64, shape (n_docs,): k1 b / average document length x each document's tokens, the same
    # product per document for every posting of every query term: worked out once a query, where
    # each posting converting and scaling its document's length again was ~40% of the scatter.
    scaled_lengths: np.ndarray


@njit(cache=True, nogil=True)
def term_postings(terms, doc_offsets, n_terms):
    """Postings of documents given as term ids (`terms[doc_offsets[d]:doc_offsets[d + 1]]`, with
    repeats): CSC arrays by term (indptr int64, document ids int32 ascending, counts int32), each
    (term, document) once. Two counting passes over the tokens; scipy's COO route sorted every
    triplet and held three int32 copies of them (docs/measurements.md#parsing-and-analysis)."""
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
def joined_postings(indptrs, entry_starts, docs, counts, kept):
    """Postings of consecutive segments as one: for each term, every segment's documents in
    segment order (so still ascending), entries with kept[entry] False left out.

    indptrs: int64 (n_segments, n_terms + 1), each segment's pointers padded to the widest
    vocabulary (a term a segment never saw is empty); entry_starts: int64 (n_segments,), where each
    segment's entries begin in docs / counts / kept (all segments' entries end to end); docs:
    int64, documents numbered from the joined segment's first. Returns (indptr int64, docs int32,
    counts int32)."""
    n_segments, width = indptrs.shape
    n_terms = width - 1
    indptr = np.zeros(width, dtype=np.int64)
    for term in range(n_terms):
        held = 0
        for segment in range(n_segments):
            base = entry_starts[segment]
            for entry in range(base + indptrs[segment, term], base + indptrs[segment, term + 1]):
                if kept[entry]:
                    held += 1
        indptr[term + 1] = indptr[term] + held
    out_docs = np.empty(indptr[n_terms], dtype=np.int32)
    out_counts = np.empty(indptr[n_terms], dtype=np.int32)
    slot = 0
    for term in range(n_terms):
        for segment in range(n_segments):
            base = entry_starts[segment]
            for entry in range(base + indptrs[segment, term], base + indptrs[segment, term + 1]):
                if kept[entry]:
                    out_docs[slot] = docs[entry]
                    out_counts[slot] = counts[entry]
                    slot += 1
    return indptr, out_docs, out_counts


@njit(cache=True, nogil=True)
def add_posting_sums(segment, live, tokens, frequencies):
    """One postings segment (a `PostingsSegment`) added into tokens (n_docs,): the counts each
    document holds, and frequencies (n_terms,): how many live documents (live: bool, (n_docs,))
    hold each term. The caller has checked the bounds (index/integrity.py); one pass, where numpy
    took five over Django's postings."""
    indptr, indices, data, first_doc = segment
    base = np.uint64(first_doc)  # unsigned positions: no wrap-around test (see add_bm25_scores)
    for term in range(indptr.shape[0] - 1):
        for entry in range(np.uint64(indptr[term]), np.uint64(indptr[term + 1])):
            document = np.uint64(indices[entry]) + base
            tokens[document] += data[entry]
            if live[document]:
                frequencies[term] += 1


# error_model="numpy": no zero-divisor check per posting (the divisor is at least 1, a count).
@njit(cache=True, nogil=True, error_model="numpy")
def add_bm25_scores(segment, query, scores):
    """BM25 Okapi of one postings segment (a `PostingsSegment`) against `query` (an `OkapiQuery`)
    into `scores` (float64, shape (n_docs,)).

    scores[d] += term_weights[t] * tf (k1 + 1) / (tf + norm_scale + scaled_lengths[d]),
    for each query term t (term_weights = occurrences in the query * idf), in the order given.
    """
    indptr, indices, counts, first_doc = segment
    terms, term_weights, k1, norm_scale, scaled_lengths = query
    n_terms = indptr.shape[0] - 1
    # Unsigned positions: numba wraps a signed index that could be negative (a compare and an add
    # per access), and these are never negative (integrity.check_postings); about a quarter
    # of the kernel's time (docs/measurements.md#a-query).
    base = np.uint64(first_doc)
    for position in range(terms.shape[0]):
        term = terms[position]
        if term >= n_terms:
            continue
        weight = term_weights[position]
        for slot in range(np.uint64(indptr[term]), np.uint64(indptr[term + 1])):
            doc = np.uint64(indices[slot]) + base
            freq = np.float64(counts[slot])
            scores[doc] += weight * (freq * (k1 + 1.0)) / (freq + norm_scale + scaled_lengths[doc])
