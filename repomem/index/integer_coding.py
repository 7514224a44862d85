"""Integer arrays made small for disk: each in the narrowest dtype that holds its values, sparse
index arrays first as differences within each row (snapshot_files.write_npz stores them so).

Column and document ids grow along each row of a sparse matrix, so their differences are small;
term counts and line numbers are small already. Decoding gives back the arrays exactly.
"""

from __future__ import annotations

import numpy as np

from repomem.index.kernels.csr import running_sums_by_row

# Tried in this order, narrowest first; only those that cast back to the array's own dtype
# without loss are used, so a decoded array can always be cast back.
_INTEGER_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16,
                                               np.uint32, np.int32, np.uint64, np.int64))


def narrowest_integer_dtype(values: np.ndarray, original: np.dtype) -> np.dtype:
    """The narrowest integer dtype that holds `values` and casts safely to `original`."""
    low, high = (int(values.min()), int(values.max())) if values.size else (0, 0)
    for candidate in _INTEGER_DTYPES:
        limits = np.iinfo(candidate)
        if limits.min <= low and high <= limits.max and np.can_cast(candidate, original, "safe"):
            return candidate
    return original


def check_row_pointer(pointer: np.ndarray, entries: int, name: str) -> None:
    """A CSR/CSC index pointer that splits exactly `entries` values into rows (ValueError if not)."""
    if pointer.ndim != 1 or pointer.dtype.kind not in "iu" or pointer.size == 0:
        raise ValueError(f"{name}: row pointer is not a non-empty integer vector")
    if int(pointer[0]) != 0 or int(pointer[-1]) != entries:
        raise ValueError(f"{name}: row pointer ends at {int(pointer[-1])}, not at its {entries} entries")
    if not bool((np.diff(pointer) >= 0).all()):
        raise ValueError(f"{name}: row pointer goes backwards")


def delta_by_row(values: np.ndarray, pointer: np.ndarray) -> np.ndarray:
    """Differences within each row, in the array's own integer dtype; the first entry of each row
    stays absolute. Rows need not be sorted: a decreasing step is a negative difference (and the
    dtype's arithmetic wraps the same way both ways, `undelta_by_row` sums in it, so even extreme
    values come back exactly). No int64 copy: a full build's save was its peak of memory."""
    coded = np.empty_like(values)
    coded[:1] = values[:1]
    np.subtract(values[1:], values[:-1], out=coded[1:])
    row_starts = pointer[:-1][np.diff(pointer) > 0]
    coded[row_starts] = values[row_starts]
    return coded


def undelta_by_row(coded: np.ndarray, pointer: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Inverse of `delta_by_row`: each row's running sum, in the array's own integer `dtype` (sums
    that wrap around are still exact modulo 2**bits, and every original value fits in it). One
    kernel pass over the entries: numpy's running sum over all of them less the sum reached before
    each row began took ~3x as long on a load's postings (docs/measurements.md#index-load)."""
    out = np.empty(coded.shape[0], dtype=dtype)
    running_sums_by_row(coded.astype(dtype, copy=False), pointer.astype(np.int64, copy=False), out)
    return out
