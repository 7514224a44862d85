"""The formats of a snapshot's files: arrays (a zip of .npy members), JSON (gzipped), and text.

Every file is created new in the snapshot folder its writer just made, owner-only and never
through a link (`create_private_file`), and fsynced before the snapshot is renamed into place.

Array files: most of an index is integers far narrower than their int32/int64 arrays. Each array
is written as integer_coding makes it (narrowed, sparse index arrays delta coded by row) and the
zip is deflated at level 1 (sizes and times: docs/measurements.md#index-on-disk; W's float32
values barely compress and are most of what is left). CODEC_MEMBER records, per array, its dtype in
memory and the pointer array its rows are delta coded by, so reading gives back the arrays exactly
as they were written.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import time
import zipfile
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from repomem.index.integer_coding import check_row_pointer, delta_by_row, narrowest_integer_dtype, undelta_by_row
from repomem.regular_files import read_regular


def create_private_file(path: Path, mode: str):
    """A new file in a snapshot folder this writer just made, readable by its owner only (0600:
    index files hold the repository's tokens); O_EXCL | O_NOFOLLOW: never an existing file or link."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                         0o600)
    return os.fdopen(descriptor, mode, **({} if "b" in mode else {"encoding": "utf-8"}))


CODEC_MEMBER = "__codec__"  # the array file's member that says how the others are coded


def write_npz(path: Path, arrays: dict[str, np.ndarray], deltas: dict[str, str] | None = None,
              stored: tuple[str, ...] = ()) -> None:
    """Write `arrays` as a zip of .npy members, readable with `read_npz`.

    `deltas` maps an index array's name to its row pointer's name (`indices` -> `indptr` of a
    CSR/CSC matrix): that array is stored as differences within each row. Members named in `stored`
    are written without deflate (float arrays that shrink little for the time it takes)."""
    deltas = deltas or {}
    for name, pointer_name in deltas.items():
        if pointer_name in deltas or arrays[name].ndim != 1 or arrays[name].dtype.kind not in "iu":
            raise ValueError(f"{name}: only a 1-d integer array can be delta coded, by an uncoded pointer")
        check_row_pointer(np.asarray(arrays[pointer_name]), arrays[name].shape[0], name)
    codec = {name: {"dtype": np.asarray(array).dtype.str, "delta": deltas.get(name)} for name, array in arrays.items()}

    def coded(name: str) -> np.ndarray:
        array = np.asarray(arrays[name])
        pointer_name = deltas.get(name)
        if pointer_name is not None:
            array = delta_by_row(array, np.asarray(arrays[pointer_name]))
        if array.dtype.kind in "iu":  # bool and float arrays are written as they are
            array = array.astype(narrowest_integer_dtype(array, array.dtype), copy=False)
        return array

    with create_private_file(path, "wb") as handle:
        with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            with archive.open(f"{CODEC_MEMBER}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.frombuffer(json.dumps(codec).encode("utf-8"), dtype=np.uint8))
            for name in arrays:
                entry: str | zipfile.ZipInfo = f"{name}.npy"  # deflated, as the archive says
                if name in stored:
                    entry = zipfile.ZipInfo(f"{name}.npy", date_time=time.localtime()[:6])
                    entry.compress_type = zipfile.ZIP_STORED
                # One coded copy alive at a time: a full build's save was its peak of memory.
                with archive.open(entry, "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, coded(name), allow_pickle=False)
        handle.flush()
        os.fsync(handle.fileno())


def _read_codec(stored: dict[str, np.ndarray]) -> dict[str, tuple[np.dtype, str | None]]:
    """Each array's dtype in memory and delta pointer; ValueError/KeyError if the member is damaged."""
    try:
        codec = json.loads(stored.pop(CODEC_MEMBER).tobytes().decode("utf-8"))
        entries = {name: (np.dtype(entry["dtype"]), entry["delta"]) for name, entry in codec.items()}
        if entries.keys() != stored.keys():
            raise ValueError("array codec and stored arrays disagree")
        for name, (original, pointer_name) in entries.items():
            array = stored[name]
            if original.kind not in "biuf" or (pointer_name is None and not np.can_cast(array.dtype, original)):
                raise ValueError(f"{name}: stored as {array.dtype}, cannot be {original}")
            if pointer_name is not None and (array.dtype.kind not in "iu" or array.ndim != 1
                                             or original.kind not in "iu" or entries[pointer_name][1] is not None):
                raise ValueError(f"{name}: delta coding recorded for an array that cannot have it")
    except (TypeError, AttributeError, UnicodeDecodeError) as error:  # JSON of the wrong shape
        raise ValueError(f"array codec unreadable: {error.__class__.__name__}: {error}") from error
    return entries


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of a file written by `write_npz`, as it was in memory.

    Bad data raises what the callers treat as a damaged index: zipfile.BadZipFile (also for a torn
    deflate stream), ValueError, KeyError, OSError or EOFError."""
    return arrays_from(read_regular(path), path.name)


def arrays_from(data: bytes, name: str) -> dict[str, np.ndarray]:
    """`read_npz` of a file's bytes (read once: checked against the manifest's digest first)."""
    stored: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for member in archive.namelist():
                with archive.open(member) as handle:
                    stored[member.removesuffix(".npy")] = np.lib.format.read_array(handle, allow_pickle=False)
    except zlib.error as error:
        raise zipfile.BadZipFile(f"{name}: {error}") from error
    entries = _read_codec(stored)
    arrays: dict[str, np.ndarray] = {}
    for name, (original, pointer_name) in entries.items():
        if pointer_name is None:
            arrays[name] = stored[name].astype(original, copy=False)
    for name, (original, pointer_name) in entries.items():
        if pointer_name is not None:
            pointer = arrays[pointer_name]
            check_row_pointer(pointer, stored[name].shape[0], name)
            arrays[name] = undelta_by_row(stored[name], pointer, original)
    return arrays


def write_json_gz(path: Path, members: Iterable[tuple[str, Any]]) -> None:
    """A JSON object of `members` (key, value), gzip level 1: symbol tables are names and numbers
    (docs/measurements.md#index-on-disk). Written member by member: the whole text (and the objects behind
    it) at once were tens of MB at a full build's peak of memory, its save."""
    encode = json.JSONEncoder(separators=(",", ":")).encode
    with create_private_file(path, "wb") as handle:
        with gzip.GzipFile(fileobj=handle, mode="wb", compresslevel=1, mtime=0) as packed:
            separator = "{"
            for key, value in members:
                packed.write(f"{separator}{encode(key)}:{encode(value)}".encode())
                separator = ","
            packed.write(b"{}" if separator == "{" else b"}")
        handle.flush()
        os.fsync(handle.fileno())


def read_json_gz(path: Path) -> Any:
    """The JSON value of a file written by `write_json_gz`."""
    return json_from(read_regular(path))


def json_from(data: bytes) -> Any:
    """`read_json_gz` of a file's bytes (read once: checked against the manifest's digest first)."""
    return json.loads(gzip.decompress(data).decode("utf-8"))


def write_bytes(path: Path, data: bytes) -> None:
    """A new file (the manifest), fsynced."""
    with create_private_file(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
