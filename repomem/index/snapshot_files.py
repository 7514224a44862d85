"""The formats of a snapshot's files: arrays (a zip of .npy members), JSON (gzipped), and text.

Every file is created new in the snapshot folder its writer just made, owner-only and never
through a link (`create_private_file`), and fsynced before the snapshot is renamed into place.

Array files: most of an index is integers far narrower than their int32/int64 arrays. Each array
is written as integer_coding makes it (narrowed, sparse index arrays delta coded by row) and each
member deflated whole by libdeflate at level 1 (deflated_zip.py; sizes and times:
docs/measurements.md#index-on-disk; W's float32 values barely compress and are stored as they are).
CODEC_MEMBER records, per array, its dtype in memory and the pointer array its rows are delta coded
by, so reading gives back the arrays exactly as they were written.

JSON files: msgspec writes them, and reads them as the caller's schema says (its types checked).
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import os
import struct
import zipfile
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from repomem.index.deflated_zip import DeflateFailed, ZipWriter, gunzip, inflate
from repomem.index.integer_coding import (
    check_row_pointer,
    delta_by_row_into,
    delta_range,
    narrowest_integer_dtype,
    undelta_by_row,
)
from repomem.regular_files import read_regular


def create_private_file(path: Path, mode: str):
    """A new file in a snapshot folder this writer just made, readable by its owner only (0600:
    index files hold the repository's tokens); O_EXCL | O_NOFOLLOW: never an existing file or link."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                         0o600)
    return os.fdopen(descriptor, mode, **({} if "b" in mode else {"encoding": "utf-8"}))


_encode = msgspec.json.Encoder().encode
CODEC_MEMBER = "__codec__"  # the array file's member that says how the others are coded


def write_npz(path: Path, arrays: dict[str, np.ndarray], deltas: dict[str, str] | None = None,
              stored: tuple[str, ...] = (), consume: bool = False) -> None:
    """Write `arrays` as a zip of .npy members, readable with `read_npz`.

    `deltas` maps an index array's name to its row pointer's name (`indices` -> `indptr` of a
    CSR/CSC matrix): that array is stored as differences within each row. Members named in `stored`
    are written without deflate (float arrays that shrink little for the time it takes).
    `consume`: `arrays` is emptied as its members are written (a row pointer once the arrays coded
    by it are), so that what only it holds, a save's copy of W's upper triangle, goes as soon as it
    is on disk."""
    deltas = deltas or {}
    for name, pointer_name in deltas.items():
        if pointer_name in deltas or arrays[name].ndim != 1 or arrays[name].dtype.kind not in "iu":
            raise ValueError(f"{name}: only a 1-d integer array can be delta coded, by an uncoded pointer")
        check_row_pointer(np.asarray(arrays[pointer_name]), arrays[name].shape[0], name)
    codec = {name: {"dtype": np.asarray(array).dtype.str, "delta": deltas.get(name)} for name, array in arrays.items()}
    names = list(arrays)
    last_user = {pointer_name: max(names.index(name) for name in deltas if deltas[name] == pointer_name)
                 for pointer_name in set(deltas.values())}

    with create_private_file(path, "wb") as handle:
        archive = ZipWriter(handle)
        codec_bytes = np.frombuffer(json.dumps(codec).encode("utf-8"), dtype=np.uint8)
        archive.add(f"{CODEC_MEMBER}.npy", *_npy_pieces(codec_bytes))
        for at, name in enumerate(names):
            array = np.asarray(arrays[name])
            pointer_name = deltas.get(name)
            pointer = None if pointer_name is None else np.asarray(arrays[pointer_name])
            if name in stored and pointer is None and array.dtype.kind not in "iu":
                # Written from the array itself, uncopied (W's float weights, most of a base file).
                archive.add(f"{name}.npy", *_npy_pieces(array), deflated=False)
            else:
                # One coded copy alive at a time: a full build's save was its peak of memory.
                archive.add(f"{name}.npy", memoryview(_coded_member(array, pointer)), deflated=name not in stored)
            del array, pointer
            if consume:
                for done in names[: at + 1]:
                    if done in arrays and last_user.get(done, -1) <= at:
                        del arrays[done]
        archive.close()
        handle.flush()
        os.fsync(handle.fileno())


def _coded_member(array: np.ndarray, pointer: np.ndarray | None) -> np.ndarray:
    """`array`'s .npy member (uint8): its header, then its elements delta coded by row along
    `pointer` (when given) and narrowed (integers), in one buffer, the one copy made to write it
    (libdeflate compresses one buffer). The differences, their narrowed copy and the two joined
    were three, at a full build's peak of memory (docs/measurements.md#memory-of-a-cold-build)."""
    dtype = array.dtype
    if pointer is not None:
        dtype = narrowest_integer_dtype(array, array.dtype, delta_range(array, pointer))
    elif array.dtype.kind in "iu":  # bool and float arrays are written as they are
        dtype = narrowest_integer_dtype(array, array.dtype)
    header = _npy_header(dtype, array.shape)
    start = len(header)  # a multiple of 64 bytes: the elements are aligned
    member = np.empty(start + array.size * dtype.itemsize, dtype=np.uint8)
    member[:start] = np.frombuffer(header, dtype=np.uint8)
    elements = member[start:].view(dtype).reshape(array.shape)
    if pointer is not None:
        delta_by_row_into(array, pointer, elements)
    else:
        np.copyto(elements, array, casting="unsafe")  # narrowed: every value fits
    return member


def _npy_pieces(array: np.ndarray) -> tuple[bytes, memoryview]:
    """`array` as a .npy file's two parts: its header, then its elements in C order (a view)."""
    array = array if array.flags.c_contiguous else array.copy(order="C")  # (keeps a 0-d array 0-d)
    return _npy_header(array.dtype, array.shape), memoryview(array.reshape(-1).view(np.uint8))


def _npy_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """The .npy (format 1.0) header of a C-ordered array of `dtype` and `shape`."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                  "fortran_order": False, "shape": shape})
    return header.getvalue()


def _read_codec(stored: dict[str, np.ndarray], names: set[str]) -> dict[str, tuple[np.dtype, str | None]]:
    """Each read array's dtype in memory and delta pointer (`stored`: the arrays read, `names`: every
    array the file holds); ValueError/KeyError if the member is damaged."""
    try:
        codec = json.loads(stored.pop(CODEC_MEMBER).tobytes().decode("utf-8"))
        entries = {name: (np.dtype(entry["dtype"]), entry["delta"]) for name, entry in codec.items()}
        if entries.keys() != names:
            raise ValueError("array codec and stored arrays disagree")
        entries = {name: entries[name] for name in stored}
        for name, (original, pointer_name) in entries.items():
            if pointer_name is not None and pointer_name not in entries:
                raise ValueError(f"{name}: read without {pointer_name}, its delta pointer")
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


def arrays_from(data: bytes, name: str, pool: Executor | None = None,
                part: Callable[[str], bool] | None = None) -> dict[str, np.ndarray]:
    """`read_npz` of a file's bytes (read once: checked against the manifest's digest first).

    The members are inflated straight from `data` without zipfile's CRC-32 (the digest covers every
    byte, and the CRCs were a tenth of a load) and, given a `pool`, several at once: zlib and numpy
    release the GIL, so a load inflates on both cores (docs/measurements.md#index-load). `part`:
    only the arrays whose names it takes (a delta-coded array's pointer among them), so that two
    threads can each read the part they need next."""
    run = pool.map if pool is not None else map
    view = memoryview(data)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            listed = archive.infolist()
        stems = [info.filename.removesuffix(".npy") for info in listed]
        names = set(stems) - {CODEC_MEMBER}
        members = sorted((info for info, stem in zip(listed, stems)
                          if stem == CODEC_MEMBER or part is None or part(stem)),
                         key=lambda info: -info.compress_size)  # the longest first
        stored = dict(run(lambda info: (info.filename.removesuffix(".npy"), _member_array(view, info, name)), members))
    except (DeflateFailed, struct.error) as error:  # a torn deflate stream or a header cut short
        raise zipfile.BadZipFile(f"{name}: {error}") from error
    entries = _read_codec(stored, names)

    def plain(item: tuple[str, tuple[np.dtype, str | None]]) -> tuple[str, np.ndarray]:
        member, (original, _) = item
        return member, _writable(stored[member].astype(original, copy=False))

    def undeltaed(item: tuple[str, tuple[np.dtype, str | None]]) -> tuple[str, np.ndarray]:
        member, (original, pointer_name) = item
        pointer = arrays[pointer_name]
        check_row_pointer(pointer, stored[member].shape[0], member)
        return member, undelta_by_row(stored[member], pointer, original)

    arrays = dict(run(plain, [item for item in entries.items() if item[1][1] is None]))
    arrays.update(run(undeltaed, [item for item in entries.items() if item[1][1] is not None]))
    return arrays


_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # a zip member's local file header (APPNOTE 4.3.7)


def _member_array(view: memoryview, info: zipfile.ZipInfo, name: str) -> np.ndarray:
    """One .npy member of a zip held in `view`, read-only over its inflated bytes (no copy)."""
    header = _LOCAL_HEADER.unpack_from(view, info.header_offset)
    if header[0] != b"PK\x03\x04":
        raise zipfile.BadZipFile(f"{name}: {info.filename} has no local header")
    start = info.header_offset + _LOCAL_HEADER.size + header[-2] + header[-1]
    raw = view[start:start + info.compress_size]
    if info.compress_type == zipfile.ZIP_STORED:
        payload: bytes | memoryview = raw
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        payload = inflate(raw, info.file_size)
    else:
        raise zipfile.BadZipFile(f"{name}: {info.filename} is compressed in a way this index never writes")
    if len(payload) != info.file_size:
        raise zipfile.BadZipFile(f"{name}: {info.filename} is not as long as its header says")
    header_bytes = io.BytesIO(payload[:_NPY_HEADER_MAX])
    version = np.lib.format.read_magic(header_bytes)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran_order, dtype = read_header(header_bytes)
    if dtype.hasobject:
        raise ValueError(f"{name}: {info.filename} holds objects")
    count = int(np.prod(shape, dtype=np.int64))
    array = np.frombuffer(payload, dtype=dtype, count=count, offset=header_bytes.tell())
    return array.reshape(shape[::-1]).transpose() if fortran_order else array.reshape(shape)


_NPY_HEADER_MAX = 65_536 + 12  # a version 2 header's longest (magic, length, dictionary)


def _writable(array: np.ndarray) -> np.ndarray:
    """`array`, copied where it still lies over the file's read-only bytes (the index updates some
    arrays in place)."""
    return array if array.flags.writeable else array.copy()


def write_json_gz(path: Path, members: Iterable[tuple[str, Any]]) -> None:
    """A JSON object of `members` (key, value), gzip level 1: symbol tables are names and numbers
    (docs/measurements.md#index-on-disk). Written member by member: the whole text (and the objects behind
    it) at once were tens of MB at a full build's peak of memory, its save. msgspec encodes ~7x
    faster than the json module (docs/measurements.md#index-on-disk); named tuples are written as
    the arrays they are, as the json module writes them."""
    with create_private_file(path, "wb") as handle:
        with gzip.GzipFile(fileobj=handle, mode="wb", compresslevel=1, mtime=0) as packed:
            separator = b"{"
            for key, value in members:
                packed.write(b"".join((separator, _encode(key), b":", _encode(value))))
                separator = b","
            packed.write(b"{}" if separator == b"{" else b"}")
        handle.flush()
        os.fsync(handle.fileno())


def read_json_gz(path: Path) -> Any:
    """The JSON value of a file written by `write_json_gz`."""
    return json_from(read_regular(path))


def json_from(data: bytes, schema: Any = Any) -> Any:
    """`read_json_gz` of a file's bytes (read once: checked against the manifest's digest first),
    as `schema` says (a type msgspec decodes to, its fields' types checked; Any: plain JSON values).
    Malformed text, invalid UTF-8, a value of another type or arrays nested past the decoder's
    depth is a ValueError (msgspec.DecodeError; the depth's RecursionError made one)."""
    try:
        return _decoder(schema).decode(gunzip(data))
    except RecursionError as error:
        raise ValueError(f"JSON nested too deep: {error}") from error


@functools.cache
def _decoder(schema: Any) -> msgspec.json.Decoder:
    return msgspec.json.Decoder(schema)


def write_bytes(path: Path, data: bytes) -> None:
    """A new file (the manifest), fsynced."""
    with create_private_file(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
