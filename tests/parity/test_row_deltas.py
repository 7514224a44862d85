"""Rows coded by differences (repomem/index/integer_coding.py) come back exactly, extreme values and
wrapping sums included, against a row-by-row running sum."""

from __future__ import annotations

import numpy as np
import pytest

from repomem.index.integer_coding import delta_by_row, undelta_by_row


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
