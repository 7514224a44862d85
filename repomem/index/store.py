"""On-disk index: immutable snapshots, switched atomically.

    <index dir>/
      CURRENT            name of the complete snapshot in use (replaced with os.replace)
      snap-<gen>-<tag>/  manifest.json, base.npz, delta.npz, files.npz, symbols.json.gz, ...
      lock               serialises writers (flock)

The manifest is sealed under this user's key and holds the SHA-256 of every other file of its
snapshot (index/provenance.py): an index folder a repository ships, or one damaged on disk, is
rebuilt, never read. What passes is still checked before a kernel touches it (index/integrity.py).
Nothing here writes through a link: files in a snapshot are created in a fresh folder (O_EXCL),
files beside them are written under a fresh name and renamed into place.

A writer builds a new snapshot in a temporary folder, fsyncs it, renames it into place and only
then swaps CURRENT, so a process killed at any instant leaves the previous index loadable.
`base.npz` (W and postings as built by the last full build) never changes between full builds
and is hard-linked into later snapshots; an incremental save writes only the small files.
A reader that meets an unknown format, a config change or a damaged file gets a Failure and
rebuilds; nothing here raises for bad data on disk.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import hashlib
import io
import json
import os
import secrets
import shutil
import time
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from repomem.cache import cache_root
from repomem.config import Config, settings_digest
from repomem.failures import Failure
from repomem.index.bm25 import TermSegment, compute_stats
from repomem.index.builder_version import builder_digest
from repomem.index.calls import resolves_calls
from repomem.index.fragments import FileFragments
from repomem.index.integrity import (
    check_compressed,
    check_file_arrays,
    check_offsets,
    check_query_arrays,
    check_structure,
)
from repomem.index.kernels.csr import symmetric_from_upper, upper_triangle
from repomem.index.provenance import bytes_digest, check_seal, file_digest, sealed
from repomem.index.repo_index import FileRecord, RepoIndex, StructureUnavailable
from repomem.languages.parsed import CallSites, Definition, FileSyntax, ImportBinding
from repomem.regular_files import open_private, read_regular, replace_private

FORMAT_VERSION = 5  # 2: W's base stored as its upper triangle, symbol tables gzipped; 3: array files
# deflated, integers narrowed and sparse index arrays delta coded by row (see _write_npz); 4: a capped
# search leaves out the cost level the cap cuts (W changes where it cut one: rebuild); 5: sealed
# manifests with the digests of the snapshot's files
CURRENT = "CURRENT"
MANIFEST = "manifest.json"
# Every file of a snapshot but the manifest, whose digests the sealed manifest holds.
SNAPSHOT_FILES = ("base.npz", "delta.npz", "files.npz", "symbols.json.gz", "changed_files.npz",
                  "changed_symbols.json.gz")
BASE_FILES = ("base.npz", "files.npz", "symbols.json.gz")  # shared by the snapshots of one full build
# Sections of the config that shape the index; a change in any of them means a rebuild.
INDEX_SECTIONS = ("scan", "graph", "fragments", "relations", "bm25")


def _cache_folder(base: Path, root: Path) -> Path:
    key = hashlib.blake2b(str(root.resolve()).encode(), digest_size=8).hexdigest()
    return base / f"{root.resolve().name}-{key}"


def index_dir(root: Path, config: Config) -> Path:
    """Where the repository's index lives: `index.cache_dir` if set; else `.repomem` in the
    repository; else, when the repository cannot be written (a read-only mount or checkout), a
    folder in the user cache keyed by the repository's path (`index_outside_repo` says so)."""
    if config.index.cache_dir:
        return _cache_folder(Path(config.index.cache_dir).expanduser(), root)
    inside = root / config.index.dir_name
    if index_outside_repo(root, config):
        return _cache_folder(cache_root() / "indexes", root)
    return inside


def index_outside_repo(root: Path, config: Config) -> bool:
    """True when the repository is read-only and the index falls back to the user cache."""
    if config.index.cache_dir:
        return False
    inside = root / config.index.dir_name
    target = inside if inside.is_dir() else root
    return not os.access(target, os.W_OK | os.X_OK)


def config_fingerprint(config: Config) -> str:
    return settings_digest(config, INDEX_SECTIONS)  # threads do not change the result


MARKER = "REPOMEM-INDEX"  # written into every index folder repomem creates: what it may delete in


class IndexFolderRefused(OSError):
    """The index folder is not repomem's to write in (the message says why)."""


def _looks_like_an_old_index(directory: Path) -> bool:
    """An index written before folders carried MARKER: its pointer and its own .gitignore."""
    try:
        return (directory / CURRENT).is_file() and read_regular(directory / ".gitignore") == b"*\n"  # never a pipe
    except OSError:
        return False


def claim_index_folder(directory: Path, root: Path) -> None:
    """Make sure `directory` is repomem's before anything is written or deleted there.

    A folder named by `index.dir_name` that already holds other things (`dir_name = "tests"`) is
    refused, not filled with snapshots and pruned; a symlinked index folder leading out of the
    repository is refused (a repository must not make repomem write elsewhere); an index folder
    is created owner-only (0700: it holds the code's tokens)."""
    if directory.is_symlink():
        target = directory.resolve()
        if not target.is_relative_to(root.resolve()):
            raise IndexFolderRefused(f"the index folder {directory} is a symbolic link out of the repository "
                                     f"(to {target}); remove it or set index.cache_dir in your own config")
    if (directory / MARKER).is_file():
        return
    if not directory.is_dir():
        _private_folders(directory)
    # Judged and marked under a lock on the folder itself: processes creating a fresh index at
    # once each found the folder another had just made, with the marker's scratch file in it but
    # not the marker yet, and took it for someone else's folder. The first to lock marks it; the
    # others wait for that and then find the marker.
    with _folder_locked(directory):
        if (directory / MARKER).is_file():
            return
        if any(directory.iterdir()) and not _looks_like_an_old_index(directory):
            raise IndexFolderRefused(f"{directory} exists and is not a repomem index; choose another "
                                     "index.dir_name (repomem only writes in folders it created)")
        replace_private(directory / MARKER, b"repomem index folder: repomem may replace or delete what is in it\n")


@contextlib.contextmanager
def _folder_locked(directory: Path) -> Iterator[None]:
    """An exclusive flock on the folder itself (its descriptor): nothing is created in it, so an
    old index or a folder repomem refuses is left as it was."""
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _private_folders(directory: Path) -> None:
    """Make `directory` and each missing folder above it owner-only (0700): `mkdir(parents=True,
    mode=...)` gives the folders above the last the default mode (a cache's `indexes` was 0755)."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)


@contextlib.contextmanager
def writer_lock(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with os.fdopen(open_private(directory / "lock", os.O_RDWR), "r+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _private(path: Path, mode: str):
    """A new file in a snapshot folder this writer just made, readable by its owner only (0600:
    index files hold the repository's tokens); O_EXCL | O_NOFOLLOW: never an existing file or link."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                         0o600)
    return os.fdopen(descriptor, mode, **({} if "b" in mode else {"encoding": "utf-8"}))


# -- array files: a zip of .npy members, integers delta coded and narrowed ----------------------
#
# Most of an index is integers far narrower than their int32/int64 arrays: column and document
# ids that grow along each row of a sparse matrix, term counts, line numbers. Each array is
# written in the narrowest integer dtype that holds its values, sparse index arrays first as
# differences within each row, and the zip is deflated at level 1 (sizes and times:
# docs/measurements.md#index-on-disk; W's float32 values barely compress and are most of what is
# left). CODEC_MEMBER records, per
# array, its dtype in memory and the pointer array its rows are delta coded by, so reading gives
# back the arrays exactly as they were written.

CODEC_MEMBER = "__codec__"
# Tried in this order, narrowest first; only those that cast back to the array's own dtype
# without loss are used, so a decoded array can always be cast back.
_INTEGER_DTYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16,
                                                  np.uint32, np.int32, np.uint64, np.int64))


def _narrowest_integer_dtype(values: np.ndarray, original: np.dtype) -> np.dtype:
    """The narrowest integer dtype that holds `values` and casts safely to `original`."""
    low, high = (int(values.min()), int(values.max())) if values.size else (0, 0)
    for candidate in _INTEGER_DTYPES:
        limits = np.iinfo(candidate)
        if limits.min <= low and high <= limits.max and np.can_cast(candidate, original, "safe"):
            return candidate
    return original


def _check_row_pointer(pointer: np.ndarray, entries: int, name: str) -> None:
    """A CSR/CSC index pointer that splits exactly `entries` values into rows (ValueError if not)."""
    if pointer.ndim != 1 or pointer.dtype.kind not in "iu" or pointer.size == 0:
        raise ValueError(f"{name}: row pointer is not a non-empty integer vector")
    if int(pointer[0]) != 0 or int(pointer[-1]) != entries:
        raise ValueError(f"{name}: row pointer ends at {int(pointer[-1])}, not at its {entries} entries")
    if not bool((np.diff(pointer) >= 0).all()):
        raise ValueError(f"{name}: row pointer goes backwards")


def _delta_by_row(values: np.ndarray, pointer: np.ndarray) -> np.ndarray:
    """Differences within each row, in the array's own integer dtype; the first entry of each row
    stays absolute. Rows need not be sorted: a decreasing step is a negative difference (and the
    dtype's arithmetic wraps the same way both ways, `_undelta_by_row` sums in it, so even extreme
    values come back exactly). No int64 copy: a full build's save was its peak of memory."""
    coded = np.empty_like(values)
    coded[:1] = values[:1]
    np.subtract(values[1:], values[:-1], out=coded[1:])
    row_starts = pointer[:-1][np.diff(pointer) > 0]
    coded[row_starts] = values[row_starts]
    return coded


def _undelta_by_row(coded: np.ndarray, pointer: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Inverse of `_delta_by_row` without a loop over rows: one running sum over all entries, less
    the running sum reached before each row began. Summed in the array's own integer `dtype`:
    sums that wrap around are still exact modulo 2**bits, and every original value fits in it
    (cheaper than summing in int64: docs/measurements.md#index-on-disk)."""
    running = np.zeros(coded.shape[0] + 1, dtype=dtype)
    np.cumsum(coded.astype(dtype, copy=False), out=running[1:])
    row_sizes = np.diff(pointer)
    return running[1:] - np.repeat(running[pointer[:-1]], row_sizes)


def _write_npz(path: Path, arrays: dict[str, np.ndarray], deltas: dict[str, str] | None = None,
               stored: tuple[str, ...] = ()) -> None:
    """Write `arrays` as a zip of .npy members, readable with `_read_npz`.

    `deltas` maps an index array's name to its row pointer's name (`indices` -> `indptr` of a
    CSR/CSC matrix): that array is stored as differences within each row. Members named in `stored`
    are written without deflate (float arrays that shrink little for the time it takes)."""
    deltas = deltas or {}
    for name, pointer_name in deltas.items():
        if pointer_name in deltas or arrays[name].ndim != 1 or arrays[name].dtype.kind not in "iu":
            raise ValueError(f"{name}: only a 1-d integer array can be delta coded, by an uncoded pointer")
        _check_row_pointer(np.asarray(arrays[pointer_name]), arrays[name].shape[0], name)
    codec = {name: {"dtype": np.asarray(array).dtype.str, "delta": deltas.get(name)} for name, array in arrays.items()}

    def coded(name: str) -> np.ndarray:
        array = np.asarray(arrays[name])
        pointer_name = deltas.get(name)
        if pointer_name is not None:
            array = _delta_by_row(array, np.asarray(arrays[pointer_name]))
        if array.dtype.kind in "iu":  # bool and float arrays are written as they are
            array = array.astype(_narrowest_integer_dtype(array, array.dtype), copy=False)
        return array

    with _private(path, "wb") as handle:
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


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of a file written by `_write_npz`, as it was in memory.

    Bad data raises what the callers treat as a damaged index: zipfile.BadZipFile (also for a torn
    deflate stream), ValueError, KeyError, OSError or EOFError."""
    return _arrays_from(read_regular(path), path.name)


def _arrays_from(data: bytes, name: str) -> dict[str, np.ndarray]:
    """`_read_npz` of a file's bytes (read once: checked against the manifest's digest first)."""
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
            _check_row_pointer(pointer, stored[name].shape[0], name)
            arrays[name] = _undelta_by_row(stored[name], pointer, original)
    return arrays


def _write_json_gz(path: Path, members: Iterable[tuple[str, Any]]) -> None:
    """A JSON object of `members` (key, value), gzip level 1: symbol tables are names and numbers
    (docs/measurements.md#index-on-disk). Written member by member: the whole text (and the objects behind
    it) at once were tens of MB at a full build's peak of memory, its save."""
    encode = json.JSONEncoder(separators=(",", ":")).encode
    with _private(path, "wb") as handle:
        with gzip.GzipFile(fileobj=handle, mode="wb", compresslevel=1, mtime=0) as packed:
            separator = "{"
            for key, value in members:
                packed.write(f"{separator}{encode(key)}:{encode(value)}".encode())
                separator = ","
            packed.write(b"{}" if separator == "{" else b"}")
        handle.flush()
        os.fsync(handle.fileno())


def _read_json_gz(path: Path) -> Any:
    return _json_from(read_regular(path))


def _json_from(data: bytes) -> Any:
    return json.loads(gzip.decompress(data).decode("utf-8"))


def _write_text(path: Path, text: str) -> None:
    with _private(path, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


# -- encoding --------------------------------------------------------------------------------


def _segments_arrays(prefix: str, segments: list[TermSegment]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {f"{prefix}count": np.asarray([len(segments)])}
    for number, segment in enumerate(segments):
        tf = segment.tf
        out[f"{prefix}{number}_meta"] = np.asarray([segment.first_doc, tf.shape[0], tf.shape[1]], dtype=np.int64)
        out[f"{prefix}{number}_indptr"] = tf.indptr
        out[f"{prefix}{number}_indices"] = tf.indices
        out[f"{prefix}{number}_data"] = tf.data
    return out


def _segments_deltas(prefix: str, segments: list[TermSegment]) -> dict[str, str]:
    """Postings' document ids, delta coded within each term (column of the CSC matrix)."""
    return {f"{prefix}{number}_indices": f"{prefix}{number}_indptr" for number in range(len(segments))}


def _segments_from(prefix: str, data: Any) -> list[TermSegment]:
    segments = []
    for number in range(int(data[f"{prefix}count"][0])):
        first, rows, cols = (int(v) for v in data[f"{prefix}{number}_meta"])
        tf = sp.csc_matrix(
            (data[f"{prefix}{number}_data"], data[f"{prefix}{number}_indices"], data[f"{prefix}{number}_indptr"]),
            shape=(rows, cols),
        )
        segments.append(TermSegment(first, tf))
    return segments


def _files_arrays(index: RepoIndex, file_ids: list[int]) -> dict[str, np.ndarray]:
    """Syntax nodes, windows and call edges of some files, concatenated with offsets."""
    def stack(values: list[np.ndarray], dtype: Any) -> tuple[np.ndarray, np.ndarray]:
        sizes = np.fromiter((v.shape[0] for v in values), dtype=np.int64, count=len(values))
        offsets = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        joined = np.concatenate(values).astype(dtype) if values else np.zeros(0, dtype=dtype)
        return joined, offsets

    syntaxes = [index.syntax[i] for i in file_ids]
    fragments = [index.file_fragments[i] for i in file_ids]
    assert all(s is not None for s in syntaxes) and all(f is not None for f in fragments)
    out: dict[str, np.ndarray] = {"file_ids": np.asarray(file_ids, dtype=np.int64)}
    for name in ("parent", "start_line", "end_line", "length"):
        out[name], out["node_offsets"] = stack([getattr(s, name) for s in syntaxes], np.int32)
    out["line_chars"], out["line_offsets"] = stack([s.line_chars for s in syntaxes], np.int32)
    out["win_starts"], out["win_offsets"] = stack([f.starts for f in fragments], np.int32)
    out["win_ends"], _ = stack([f.ends for f in fragments], np.int32)
    out["cover_window"], out["cover_offsets"] = stack([f.cover_window for f in fragments], np.int32)
    out["cover_node"], _ = stack([f.cover_node for f in fragments], np.int32)
    out["cover_weight"], _ = stack([f.cover_weight for f in fragments], np.int64)
    return out





def _symbols_json(index: RepoIndex, file_ids: list[int]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The symbols.json object's members, one per file whose language resolves calls."""
    for file_id in file_ids:
        syntax = index.syntax[file_id]
        assert syntax is not None
        if not resolves_calls(syntax):
            continue
        yield str(file_id), {
            "d": [[d.node, d.name, d.kind, d.scope, int(d.in_function), list(d.bases)] for d in syntax.definitions],
            "i": [[b.local, b.module, b.name] for b in syntax.imports],
            "c": list(map(list, syntax.calls.rows())),
        }


def _decode_files(
    data: Any, symbols: dict[str, Any], index: RepoIndex, overridden: set[int]
) -> dict[int, tuple[FileSyntax, FileFragments]]:
    """The structure of the files in one files.npz / symbols pair, checked before it is sliced;
    files in `overridden` are described again by a later pair and skipped."""
    records = index.files
    file_ids = data["file_ids"].tolist()
    current = np.asarray([0 <= f < len(records) and records[f] is not None and f not in overridden for f in file_ids],
                         dtype=bool)
    check_file_arrays(data, records, index.fragment_start, index.fragment_end, current)
    out = {}
    node_offsets = data["node_offsets"]
    line_offsets = data["line_offsets"]
    win_offsets = data["win_offsets"]
    cover_offsets = data["cover_offsets"]
    for position, file_id in enumerate(file_ids):
        record = records[file_id]
        if not current[position]:
            continue
        assert record is not None
        n0, n1 = node_offsets[position], node_offsets[position + 1]
        l0, l1 = line_offsets[position], line_offsets[position + 1]
        w0, w1 = win_offsets[position], win_offsets[position + 1]
        c0, c1 = cover_offsets[position], cover_offsets[position + 1]
        entry = symbols.get(str(file_id), {})
        syntax = FileSyntax(
            path=record.path,
            language=record.language,
            parent=data["parent"][n0:n1],
            start_line=data["start_line"][n0:n1],
            end_line=data["end_line"][n0:n1],
            length=data["length"][n0:n1],
            line_chars=data["line_chars"][l0:l1],
            definitions=tuple(Definition(d[0], d[1], d[2], d[3], bool(d[4]), tuple(d[5])) for d in entry.get("d", [])),
            imports=tuple(map(ImportBinding._make, entry.get("i", []))),
            calls=CallSites.of_rows(entry.get("c", [])),
        )
        fragments = FileFragments(
            data["win_starts"][w0:w1], data["win_ends"][w0:w1],
            data["cover_window"][c0:c1], data["cover_node"][c0:c1], data["cover_weight"][c0:c1],
        )
        out[file_id] = (syntax, fragments)
    return out


# -- saving ----------------------------------------------------------------------------------


def save_index(index: RepoIndex, directory: Path, base_snapshot: Path | None = None) -> Path:
    """Write a new snapshot and make it current; returns its folder.

    `base_snapshot`: a previous snapshot of the same full build whose base files can be
    hard-linked instead of rewritten (set by `load_index`).
    """
    claim_index_folder(directory, index.root)
    # The call edges and the changed files' structure are written from memory: an index loaded
    # lazily (only its files restamped since) must read them first, or the snapshot saved would
    # lose them (and with them every later update's call edges).
    index.ensure_structure()
    with writer_lock(directory):
        replace_private(directory / ".gitignore", b"*\n")
        tag = secrets.token_hex(4)
        temporary = directory / f"tmp-{tag}"
        temporary.mkdir(mode=0o700)
        # Snapshot names must keep growing across full builds, which restart at generation 0.
        index.generation = max(index.generation, _newest_generation(directory) + 1)
        try:
            # Leaving the block waits for the helper, so a failed save never removes the folder under it.
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="save-base") as helper:
                base_written: Future | None = None
                files_written: Future | None = None
                digests: dict[str, str] = {}
                reused = _sealed_base_digests(base_snapshot, index.base_id) if base_snapshot is not None else None
                reuse = reused is not None and index.base_id != ""
                if reuse:
                    assert base_snapshot is not None and reused is not None
                    try:
                        for name in BASE_FILES:
                            os.link(base_snapshot / name, temporary / name)
                        digests.update(reused)
                    except OSError:  # no hard links here, or the base was pruned meanwhile: write it
                        for name in BASE_FILES:
                            (temporary / name).unlink(missing_ok=True)
                        reuse = False
                if not reuse:
                    index.base_id = tag
                    base_files = [i for i, r in enumerate(index.files) if r is not None]
                    index.base_files = set(base_files)
                    # W is exactly symmetric (symmetric_union keeps one value per pair) with an empty
                    # diagonal: its upper triangle is all of it, at half the bytes.
                    # A kernel, not scipy's triu (its COO copies of all of W were a cold build's peak of
                    # memory); float32 is lossless: weights are float32 values (stored_weights).
                    w = index.w_base
                    upper_indptr, upper_indices, upper_data = upper_triangle(w.indptr, w.indices, w.data)
                    base_segments = index.segments[: index.base_segments]
                    # On a helper thread: deflate and numpy release the GIL, so W and the postings are
                    # coded while this thread writes the symbols (Python) and the rest.
                    base_written = helper.submit(_written, _write_npz, temporary / "base.npz", {
                        "wu_indptr": upper_indptr, "wu_indices": upper_indices,
                        "wu_data": upper_data, "w_shape": np.asarray(index.w_base.shape),
                        **_segments_arrays("seg", base_segments),
                    }, deltas={"wu_indices": "wu_indptr", **_segments_deltas("seg", base_segments)},
                        # W's float32 weights barely deflate, and deflating them was a save's longest
                        # member (docs/measurements.md#index-on-disk).
                        stored=("wu_data",))
                    del upper_indptr, upper_indices, upper_data
                    # The files' arrays on the helper too: the symbols' JSON (Python) is this thread's
                    # longest part, so the two threads finish about together.
                    files_written = helper.submit(_written, _write_npz, temporary / "files.npz",
                                                  _files_arrays(index, base_files))
                    digests["symbols.json.gz"] = _written(_write_json_gz, temporary / "symbols.json.gz",
                                                          _symbols_json(index, base_files))
                changed_files = [i for i, r in enumerate(index.files) if r is not None and i not in index.base_files]
                rows, cols, values = index.delta_entries
                vocabulary_blob = "\n".join(index.vocabulary).encode("utf-8")
                digests["delta.npz"] = _written(_write_npz, temporary / "delta.npz", {
                    "live": index.live, "fragment_file": index.fragment_file,
                    "fragment_start": index.fragment_start, "fragment_end": index.fragment_end,
                    "doc_len": index.doc_len, "df": index.df, "thresholds": index.thresholds,
                    "rowsum": index.rowsum, "calls": index.all_calls(), "delta_rows": rows, "delta_cols": cols,
                    "delta_values": values.astype(np.float32),
                    "vocabulary": np.frombuffer(vocabulary_blob, dtype=np.uint8),
                    **_segments_arrays("dseg", index.segments[index.base_segments :]),
                }, deltas=_segments_deltas("dseg", index.segments[index.base_segments :]),
                    # Every save writes these whole: deflate took 8 ms each to save 40% of 0.4 MB.
                    stored=("thresholds", "rowsum"))
                digests["changed_files.npz"] = _written(_write_npz, temporary / "changed_files.npz",
                                                        _files_arrays(index, changed_files))
                digests["changed_symbols.json.gz"] = _written(_write_json_gz, temporary / "changed_symbols.json.gz",
                                                              _symbols_json(index, changed_files))
                for name, written in (("base.npz", base_written), ("files.npz", files_written)):
                    if written is not None:
                        digests[name] = written.result()  # its error, if any, is this save's
                manifest = {
                    "format": FORMAT_VERSION,
                    "builder": builder_digest(),
                    "config": config_fingerprint(index.config),
                    "generation": index.generation,
                    "graph": [index.graph_nodes, index.graph_edges],
                    "base_id": index.base_id,
                    "base_segments": index.base_segments,
                    "base_files": sorted(index.base_files),
                    # A record's fields are plain values: its __dict__ is what dataclasses.asdict gives,
                    # without asdict's recursive deep copy (docs/measurements.md#index-on-disk).
                    "files": [None if r is None else vars(r) for r in index.files],
                    "skipped": index.skipped,
                    "digests": digests,
                }
                _write_text(temporary / MANIFEST, json.dumps(sealed(manifest)))
                _fsync_dir(temporary)
                final = directory / f"snap-{index.generation:06d}-{tag}"
                os.rename(temporary, final)
                _fsync_dir(directory)
                _clear_pointer_path(directory)
                replace_private(directory / CURRENT, (final.name + "\n").encode())
                _fsync_dir(directory)
        except BaseException:
            shutil.rmtree(temporary, ignore_errors=True)
            raise
        _prune(directory, keep={final.name}, extra=index.config.index.keep_snapshots)
        index.snapshot = final
        return final


def _newest_generation(directory: Path) -> int:
    newest = -1
    for snapshot in directory.glob("snap-*"):
        try:
            newest = max(newest, int(snapshot.name.split("-")[1]))
        except (IndexError, ValueError):
            continue
    return newest


def _sealed_base_digests(snapshot: Path, base_id: str) -> dict[str, str] | None:
    """The digests of `snapshot`'s base files when it is a sealed snapshot of the same full build
    (its base files can be hard-linked into the next snapshot); else None."""
    try:
        manifest = json.loads(read_regular(snapshot / MANIFEST).decode("utf-8"))
    except (OSError, ValueError):
        return None
    if check_seal(manifest) is not None or manifest.get("base_id") != base_id:
        return None
    digests = manifest.get("digests")
    if not isinstance(digests, dict) or not all(isinstance(digests.get(n), str) for n in BASE_FILES):
        return None
    return {name: digests[name] for name in BASE_FILES}


def _written(write: Any, path: Path, *arguments: Any, **options: Any) -> str:
    """Write a snapshot file with `write(path, ...)` and return its SHA-256 for the manifest."""
    write(path, *arguments, **options)
    return file_digest(path)


def _prune(directory: Path, keep: set[str], extra: int) -> None:
    """Remove old snapshots beyond the newest `extra` ones, and leftovers of killed writers."""
    snapshots = sorted((p for p in directory.glob("snap-*") if p.is_dir()), key=lambda p: p.name, reverse=True)
    kept = 0
    for snapshot in snapshots:
        if snapshot.name in keep:
            continue
        if kept < extra:
            kept += 1
            continue
        shutil.rmtree(snapshot, ignore_errors=True)
    for leftover in directory.glob("tmp-*"):
        shutil.rmtree(leftover, ignore_errors=True)


# -- loading ---------------------------------------------------------------------------------


def _clear_pointer_path(directory: Path) -> None:
    """os.replace cannot put the pointer over a folder: a folder named CURRENT (not repomem's: it
    only ever writes a file there) is moved aside, never deleted, so the next save repairs the index."""
    pointer = directory / CURRENT
    if pointer.is_dir() and not pointer.is_symlink():
        aside = directory / f"{CURRENT}.not-a-file-{time.time_ns()}"
        os.rename(pointer, aside)


def current_snapshot(directory: Path) -> Path | Failure:
    try:
        name = read_regular(directory / CURRENT).decode("utf-8").strip()
    except FileNotFoundError:
        return Failure("no-index", f"no index in {directory}")
    except (OSError, UnicodeDecodeError) as error:
        return Failure("damaged-index", f"index pointer unreadable: {error}")
    if not name.startswith("snap-") or "/" in name:
        return Failure("damaged-index", "index pointer is damaged")
    return directory / name


def load_index(root: Path, config: Config) -> RepoIndex | Failure:
    """The current snapshot for `root`, or why it cannot be used (then rebuild): not sealed by this
    user's key, a file whose bytes are not the ones written, or an array that breaks an invariant."""
    directory = index_dir(root, config)
    snapshot = current_snapshot(directory)
    if isinstance(snapshot, Failure):
        return snapshot
    try:
        manifest = json.loads(read_regular(snapshot / MANIFEST).decode("utf-8"))
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION:
            return Failure("old-index", "index format is unknown to this version")
        untrusted = check_seal(manifest)
        if untrusted is not None:
            return untrusted
        if manifest.get("builder") != builder_digest():
            return Failure("old-index", "index built by another version of repomem")
        if manifest.get("config") != config_fingerprint(config):
            return Failure("config-changed", "index settings changed")
        digests = manifest["digests"]
        # All of the snapshot's bytes are checked now, the lazily read structure's too
        # (docs/measurements.md#index-on-disk), so damage anywhere means a rebuild at load, not an
        # error at the first edit.
        contents = {name: _verified(snapshot, name, digests) for name in ("base.npz", "delta.npz")}
        for name in SNAPSHOT_FILES[2:]:
            _verified(snapshot, name, digests)
        records: list[FileRecord | None] = [None if r is None else FileRecord(**r) for r in manifest["files"]]
        base, arrays = _arrays_from(contents["base.npz"], "base.npz"), _arrays_from(contents["delta.npz"], "delta.npz")
        del contents
        shape = tuple(int(v) for v in base["w_shape"].tolist())
        upper = sp.csr_matrix((base["wu_data"], base["wu_indices"], base["wu_indptr"]), shape=shape)
        check_compressed(upper, "W")
        w_base = _symmetric_from_upper(upper)
        segments = _segments_from("seg", base) + _segments_from("dseg", arrays)
        words = arrays["vocabulary"].tobytes().decode("utf-8").split("\n") if arrays["vocabulary"].size else []
        vocabulary = {word: number for number, word in enumerate(words)}
        if len(vocabulary) != len(words):
            return Failure("damaged-index", "index is damaged (a word is listed twice in the vocabulary)")
        live = arrays["live"]
        if live.dtype != np.bool_:
            return Failure("damaged-index", "index is damaged (live is not a mask)")
        n = int(live.shape[0])
        rows, cols, values = arrays["delta_rows"], arrays["delta_cols"], arrays["delta_values"].astype(np.float64)
        check_offsets(np.asarray([0, rows.shape[0]]), 1, cols.shape[0], "W's updates")
        if rows.size and (int(min(rows.min(), cols.min())) < 0 or int(max(rows.max(), cols.max())) >= n):
            return Failure("damaged-index", "index is damaged (W's updates point past the end)")
        index = RepoIndex(
            root=root,
            config=config,
            files=records,
            syntax=[None] * len(records),
            file_fragments=[None] * len(records),
            live=live,
            fragment_file=arrays["fragment_file"],
            fragment_start=arrays["fragment_start"],
            fragment_end=arrays["fragment_end"],
            vocabulary=vocabulary,
            segments=segments,
            doc_len=arrays["doc_len"],
            df=arrays["df"],
            stats=compute_stats(np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool), config.bm25),  # set below
            w_base=w_base,
            w_delta=sp.csr_matrix((values, (rows, cols)), shape=(n, n)),
            delta_entries=(rows, cols, values),
            thresholds=arrays["thresholds"],
            rowsum=arrays["rowsum"],
            calls={},
            skipped=[(str(path), str(reason)) for path, reason in manifest.get("skipped", [])],
            generation=int(manifest["generation"]),
            graph_nodes=int(manifest["graph"][0]),
            graph_edges=int(manifest["graph"][1]),
        )
        index.base_id = str(manifest["base_id"])
        index.base_segments = int(manifest["base_segments"])
        index.base_files = {int(f) for f in manifest["base_files"]}
        check_query_arrays(index)
        index.stats = compute_stats(index.df, index.doc_len, index.live, config.bm25)
        index.snapshot = snapshot
        index.structure_loader = lambda: _load_structure(snapshot, index, digests)
    except OSError as error:  # a file of the snapshot missing or unreadable: name it plainly
        return Failure("damaged-index", f"index is damaged ({error.strerror or error}: {error.filename})")
    except (ValueError, KeyError, TypeError, AttributeError, EOFError, IndexError) as error:
        return Failure("damaged-index", f"index is damaged ({error.__class__.__name__}: {error})")
    except Exception as error:  # zipfile.BadZipFile and other decoder errors of a torn file
        return Failure("damaged-index", f"index is damaged ({error.__class__.__name__})")
    return index


def _verified(snapshot: Path, name: str, digests: Any) -> bytes:
    """A snapshot file's bytes, provided they are the ones the sealed manifest names."""
    data = read_regular(snapshot / name)
    expected = digests.get(name) if isinstance(digests, dict) else None
    if not isinstance(expected, str) or bytes_digest(data) != expected:
        raise ValueError(f"{name} is not the file this index wrote")
    return data


def _symmetric_from_upper(upper: sp.csr_matrix) -> sp.csr_matrix:
    """W from its strict upper triangle: canonical CSR (sorted columns, float64), the matrix that
    was saved."""
    if upper.shape[0] != upper.shape[1]:
        raise ValueError("W is not square")
    indptr, indices, data = symmetric_from_upper(upper.indptr, upper.indices, upper.data)
    if indptr[-1] <= np.iinfo(np.int32).max:  # scipy's choice: int32 indices while they fit
        indptr, indices = indptr.astype(np.int32), indices.astype(np.int32)
    full = sp.csr_matrix(upper.shape, dtype=np.float64)
    full.indptr, full.indices, full.data = indptr, indices, data
    full.has_sorted_indices = True
    return full


def _load_structure(snapshot: Path, index: RepoIndex, digests: dict[str, str]) -> None:
    """Syntax, windows and call edges: only needed to update the index, so loaded on demand.

    Raises StructureUnavailable when another process pruned the snapshot meanwhile or a file is
    damaged; the caller rebuilds. The structure is checked whole before the index holds any of it:
    an index whose structure failed keeps none (its next use fails the same way, not halfway).
    """
    try:
        syntax, fragments, calls = _read_structure(snapshot, index, digests)
        index.syntax, index.file_fragments, index.calls = syntax, fragments, calls
        check_structure(index)
    except (OSError, EOFError, ValueError, KeyError, TypeError, AttributeError, IndexError,
            zipfile.BadZipFile) as error:
        index.syntax = [None] * len(index.files)
        index.file_fragments = [None] * len(index.files)
        index.calls = {}
        index.structure_loader = lambda: _load_structure(snapshot, index, digests)
        raise StructureUnavailable(f"{error.__class__.__name__}: {error}") from error


def _read_structure(snapshot: Path, index: RepoIndex, digests: dict[str, str]
                    ) -> tuple[list[FileSyntax | None], list[FileFragments | None], dict[int, np.ndarray]]:
    syntax: list[FileSyntax | None] = [None] * len(index.files)
    fragments: list[FileFragments | None] = [None] * len(index.files)
    changed = _arrays_from(_verified(snapshot, "changed_files.npz", digests), "changed_files.npz")
    for files_name, symbols_name, overridden in (
            ("files.npz", "symbols.json.gz", set(changed["file_ids"].tolist())),
            ("changed_files.npz", "changed_symbols.json.gz", set())):
        symbols = _json_from(_verified(snapshot, symbols_name, digests))
        if not isinstance(symbols, dict):
            raise ValueError(f"{symbols_name} is not an object")
        arrays = changed if files_name == "changed_files.npz" else \
            _arrays_from(_verified(snapshot, files_name, digests), files_name)
        decoded = _decode_files(arrays, symbols, index, overridden)
        for file_id, (file_syntax, file_fragments) in decoded.items():
            syntax[file_id] = file_syntax
            fragments[file_id] = file_fragments
    calls = _arrays_from(_verified(snapshot, "delta.npz", digests), "delta.npz")["calls"]
    if calls.ndim != 2 or calls.shape[1] != 5 or calls.dtype.kind not in "iu":
        raise ValueError("call edges have the wrong shape")
    calls = calls[np.argsort(calls[:, 0], kind="stable")]
    files, starts = np.unique(calls[:, 0], return_index=True)
    by_file = dict(zip(files.tolist(), np.split(calls, starts[1:]))) if calls.shape[0] else {}
    if any(not 0 <= f < len(index.files) or syntax[f] is None for f in by_file):
        raise ValueError("a call edge leaves from a file without structure")
    edges = {}
    for file_id, file_syntax in enumerate(syntax):
        if resolves_calls(file_syntax):
            edges[file_id] = by_file.pop(file_id, np.zeros((0, 5), dtype=np.int64))
    if by_file:
        raise ValueError("call edges leave from a file that resolves no calls")
    return syntax, fragments, edges
