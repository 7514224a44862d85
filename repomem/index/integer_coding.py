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


def narrowest_integer_dtype(values: np.ndarray, original: np.dtype,
                            value_range: tuple[int, int] | None = None) -> np.dtype:
    """The narrowest integer dtype that holds `values` (or the values from `value_range`'s low to
    its high) and casts safely to `original`."""
    if value_range is not None:
        low, high = value_range
    else:
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


# Entries coded at a time by `delta_range` and `delta_by_row_into`: a chunk of differences in the
# array's own dtype is resident, not a copy of the whole array beside its narrowed one (a cold
# build's save codes W's and the postings' ids: docs/measurements.md#memory-of-a-cold-build).
DELTA_CHUNK = 1 << 20


def _delta_chunks(values: np.ndarray, pointer: np.ndarray):
    """The differences within each row of `values` (rows split by `pointer`), in the array's own
    integer dtype, in pieces of DELTA_CHUNK entries: (first entry, piece). The first entry of each
    row stays absolute. Rows need not be sorted: a decreasing step is a negative difference (and
    the dtype's arithmetic wraps the same way both ways, `undelta_by_row` sums in it, so even
    extreme values come back exactly)."""
    row_starts = pointer[:-1][np.diff(pointer) > 0].astype(np.int64, copy=False)  # ascending
    for first in range(0, values.shape[0], DELTA_CHUNK):
        end = min(first + DELTA_CHUNK, values.shape[0])
        coded = np.empty(end - first, dtype=values.dtype)
        behind = max(first - 1, 0)
        np.subtract(values[max(first, 1) : end], values[behind : end - 1], out=coded[first == 0 :])
        starts = row_starts[np.searchsorted(row_starts, first) : np.searchsorted(row_starts, end)]
        coded[starts - first] = values[starts]  # a row's first entry stays absolute (the array's too)
        yield first, coded


def delta_range(values: np.ndarray, pointer: np.ndarray) -> tuple[int, int]:
    """The smallest and largest difference of `values` by row (`_delta_chunks`; (0, 0) for none)."""
    low = high = 0
    for first, coded in _delta_chunks(values, pointer):
        low = int(coded.min()) if first == 0 else min(low, int(coded.min()))
        high = int(coded.max()) if first == 0 else max(high, int(coded.max()))
    return low, high


def delta_by_row_into(values: np.ndarray, pointer: np.ndarray, out: np.ndarray) -> None:
    """`out[:]` = the differences of `values` by row (`_delta_chunks`), in `out`'s dtype, which
    holds every difference (`delta_range`): the cast is exact."""
    for first, coded in _delta_chunks(values, pointer):
        out[first : first + coded.shape[0]] = coded


def undelta_by_row(coded: np.ndarray, pointer: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Inverse of `delta_by_row_into`: each row's running sum, in the array's own integer `dtype` (sums
    that wrap around are still exact modulo 2**bits, and every original value fits in it). One
    kernel pass over the entries: numpy's running sum over all of them less the sum reached before
    each row began took ~3x as long on a load's postings (docs/measurements.md#index-load)."""
    out = np.empty(coded.shape[0], dtype=dtype)
    running_sums_by_row(coded.astype(dtype, copy=False), pointer.astype(np.int64, copy=False), out)
    return out
