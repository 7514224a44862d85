"""Eq. 9 for the few fragments a top K can hold (numba): the part of W @ s_ind that a query's
strongest fragments make, and the bound on s_rel it gives every fragment (exact rows of W:
csr.rows_times)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def add_rows_scaled(indptr, cols, values, rows, scale, out):
    """out[c] += A[r, c] * scale[r] for each listed row r of a CSR matrix A: for a symmetric A, the
    part of A @ x that the listed entries of x make (x_r = scale[r], the others taken as 0)."""
    for r in range(rows.shape[0]):
        row = rows[r]
        factor = scale[r]
        # Unsigned positions: no wrap-around test per entry (kernels/postings.add_bm25_scores).
        for slot in range(np.uint64(indptr[row]), np.uint64(indptr[row + 1])):
            out[np.uint64(cols[slot])] += values[slot] * factor


# error_model="numpy": no zero-divisor check per fragment (the divisor is tested above 1e-300).
@njit(cache=True, nogil=True, error_model="numpy")
def relation_bounds(s_ind, strong_part, denominator, offered, alpha, weak_bar):
    """Upper bounds on s_rel_i = s_ind_i + alpha * s_env_i (eqs. 9-10, alpha > 0), shape (n,),
    -inf where fragment i is not offered. s_env_i is a weighted mean of its usable neighbours'
    s_ind: the strong ones' part is `strong_part_i / denominator_i`, and every other one is at
    most `weak_bar`."""
    n = s_ind.shape[0]
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        if not offered[i]:
            out[i] = -np.inf
        elif denominator[i] > 1e-300:
            part = strong_part[i]
            # Most fragments neighbour no strong one: 0 / d is 0 exactly, and the division was
            # most of this loop's time.
            out[i] = s_ind[i] + alpha * ((part / denominator[i] if part != 0.0 else 0.0) + weak_bar)
        else:
            out[i] = s_ind[i]  # no usable neighbour: s_env is 0
    return out
