"""Output buffers of a length known only at the end: they double as they fill (numba)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def grow(array, capacity):
    """A copy of `array` with room for `capacity` items (output buffers double as they fill)."""
    bigger = np.empty(capacity, dtype=array.dtype)
    # Item by item: assigning the array to a slice makes numba compile its shape-mismatch error,
    # whose message formatting (str, repr, concatenation) cost ~3 s of a first run's compiling.
    for at in range(array.shape[0]):
        bigger[at] = array[at]
    return bigger
