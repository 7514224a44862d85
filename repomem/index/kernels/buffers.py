"""Output buffers of a length known only at the end: they double as they fill (numba)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def grow(array, capacity):
    """A copy of `array` with room for `capacity` items (output buffers double as they fill)."""
    bigger = np.empty(capacity, dtype=array.dtype)
    bigger[: array.shape[0]] = array
    return bigger
