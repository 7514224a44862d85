"""W @ x on two threads: a CSR matrix as row blocks that share its arrays.

scipy's CSR product releases the GIL, so the blocks run at once: two row halves on two threads
beat one product (docs/measurements.md#a-query). Splitting
costs no copy of the data or index arrays, only each block's row pointers (n_rows + 1 integers).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import scipy.sparse as sp

from repomem.index.helper_threads import run_parts


class RowBlocks:
    """`matrix` cut into `parts` row blocks of about equal entries, multiplied in parallel."""

    def __init__(self, matrix: sp.csr_matrix, parts: int):
        self.matrix = matrix
        indptr = matrix.indptr
        n_rows, n_cols = matrix.shape
        # Row boundaries where the running entry count crosses each 1/parts share of the entries.
        targets = (np.arange(1, parts) * indptr[-1]) // parts
        cuts = sorted({0, *np.searchsorted(indptr, targets).tolist(), n_rows})  # no empty blocks
        self.rows: list[tuple[int, int]] = list(zip(cuts[:-1], cuts[1:]))
        self.blocks = [_row_block(matrix, a, b) for a, b in self.rows]

    def times(self, x: np.ndarray, out: np.ndarray) -> None:
        """out[:n_rows] = matrix @ x (the first block on the calling thread, the others on helpers)."""
        if not self.rows:
            return  # no rows (a repository with nothing to index)
        products = run_parts([partial(block.__matmul__, x) for block in self.blocks])
        for (start, end), product in zip(self.rows, products):
            out[start:end] = product


def _row_block(matrix: sp.csr_matrix, first: int, end: int) -> sp.csr_matrix:
    """Rows [first, end) of `matrix` as a CSR matrix over views of its arrays. Built through the
    constructor, scipy copies a slice whose base is much larger (its `prune`), which kept a second
    copy of most of W resident (Django: tens of MB) and raised a cold build's peak of memory."""
    indptr = matrix.indptr
    block = sp.csr_matrix((end - first, matrix.shape[1]), dtype=matrix.dtype)
    block.indptr = (indptr[first : end + 1] - indptr[first]).astype(matrix.indices.dtype)
    block.indices = matrix.indices[indptr[first] : indptr[end]]
    block.data = matrix.data[indptr[first] : indptr[end]]
    return block
