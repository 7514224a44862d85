"""BM25 postings (numba): built from term ids, summed for the statistics, scored against a query."""

from __future__ import annotations

import numpy as np
from numba import njit


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
