"""Rows coded by differences (repomem/index/integer_coding.py) come back exactly, extreme values and
wrapping sums included, against a row-by-row running sum."""

from __future__ import annotations

import numpy as np
import pytest

from repomem.index import integer_coding
from repomem.index.integer_coding import delta_by_row_into, delta_range, undelta_by_row


def delta_by_row(values: np.ndarray, pointer: np.ndarray) -> np.ndarray:
    """The reference coding, the whole array at once: differences within each row in the array's
    own dtype, each row's first entry absolute (as the index wrote them before it coded a chunk at
    a time, and as every stored index holds them)."""
    coded = np.empty_like(values)
    coded[:1] = values[:1]
    np.subtract(values[1:], values[:-1], out=coded[1:])
    row_starts = pointer[:-1][np.diff(pointer) > 0]
    coded[row_starts] = values[row_starts]
    return coded


def _row_by_row(coded: np.ndarray, pointer: np.ndarray, dtype: np.dtype) -> np.ndarray:
    rows = [np.cumsum(coded[start:end].astype(dtype), dtype=dtype) for start, end in zip(pointer[:-1], pointer[1:])]
    return np.concatenate(rows) if rows else np.zeros(0, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64])
def test_rows_come_back_exactly(dtype):
    rng = np.random.default_rng(7)
    limits = np.iinfo(dtype)
    sizes = rng.integers(0, 9, size=200)
    sizes[:3] = 0  # empty rows first, and some later
    pointer = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    values = rng.integers(limits.min, limits.max, size=int(pointer[-1]), dtype=dtype, endpoint=True)
    values[:2] = [limits.min, limits.max][: values[:2].size]
    coded = delta_by_row(values, pointer)
    decoded = undelta_by_row(coded, pointer, np.dtype(dtype))
    assert decoded.dtype == dtype
    np.testing.assert_array_equal(decoded, values)
    np.testing.assert_array_equal(decoded, _row_by_row(coded, pointer, np.dtype(dtype)))


def test_a_narrower_stored_array_widens_to_its_dtype():
    pointer = np.asarray([0, 3, 3, 5], dtype=np.int32)
    values = np.asarray([5, 7, 100, -3, 4], dtype=np.int64)
    coded = delta_by_row(values, pointer).astype(np.int16)  # as the writer narrows it
    np.testing.assert_array_equal(undelta_by_row(coded, pointer, np.dtype(np.int64)), values)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64])
def test_differences_chunk_by_chunk_are_the_whole_arrays(monkeypatch, dtype):
    """What a save codes (snapshot_files.write_npz): the differences' range and the differences
    written into a narrower array, a chunk at a time, are `delta_by_row`'s; rows that span chunks,
    empty rows at a chunk's edge, a single entry and none."""
    monkeypatch.setattr(integer_coding, "DELTA_CHUNK", 7)
    rng = np.random.default_rng(11)
    limits = np.iinfo(dtype)
    for sizes in ([0], [1], [0, 7, 0, 0, 7, 1], rng.integers(0, 12, size=60)):
        pointer = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        values = rng.integers(limits.min, limits.max, size=int(pointer[-1]), dtype=dtype, endpoint=True)
        whole = delta_by_row(values, pointer)
        low, high = delta_range(values, pointer)
        assert (low, high) == ((int(whole.min()), int(whole.max())) if whole.size else (0, 0))
        out = np.empty(values.shape[0], dtype=dtype)
        delta_by_row_into(values, pointer, out)
        np.testing.assert_array_equal(out, whole)
    small = np.asarray([3, 5, 9, 2, 2, 4], dtype=np.int64)  # rows [3 5 9] [2 2 4]: differences fit int8
    pointer = np.asarray([0, 3, 6])
    assert delta_range(small, pointer) == (0, 4)
    narrowed = np.empty(6, dtype=np.int8)
    delta_by_row_into(small, pointer, narrowed)
    np.testing.assert_array_equal(narrowed, [3, 2, 4, 2, 0, 2])
