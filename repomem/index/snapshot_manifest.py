"""A snapshot's manifest: its format, builder and settings, the files' records, and the SHA-256
of every other file of the snapshot, sealed under this user's key (provenance.py). An index
folder a repository ships, or one damaged on disk, fails here and is rebuilt, never read.

The files' records are stored by column (one list per FileRecord field, None in every column for a
removed file's slot): 50,000 records parse three times faster as nine lists than as 50,000 objects,
and the check that nothing changed reads three of the columns (docs/measurements.md#nothing-changed)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from repomem.config import Config, settings_digest
from repomem.failures import Failure, FailureKind
from repomem.index.builder_version import builder_digest
from repomem.index.integrity import check_file_columns
from repomem.index.provenance import bytes_digest, file_digest, sealed_json, unsealed_json
from repomem.index.repo_index import FileRecord, RepoIndex
from repomem.index.snapshot_files import write_bytes
from repomem.regular_files import read_regular

FORMAT_VERSION = 6  # 2: W's base stored as its upper triangle, symbol tables gzipped; 3: array files
# deflated, integers narrowed and sparse index arrays delta coded by row (see snapshot_files.write_npz);
# 4: a capped search leaves out the cost level the cap cuts (W changes where it cut one: rebuild);
# 5: sealed manifests with the digests of the snapshot's files; 6: the seal over the body's bytes,
# the files' records by column
MANIFEST = "manifest.json"
# Every file of a snapshot but the manifest, whose digests the sealed manifest holds.
SNAPSHOT_FILES = ("base.npz", "delta.npz", "files.npz", "symbols.json.gz", "changed_files.npz",
                  "changed_symbols.json.gz")
BASE_FILES = ("base.npz", "files.npz", "symbols.json.gz")  # shared by the snapshots of one full build
# Sections of the config that shape the index; a change in any of them means a rebuild.
INDEX_SECTIONS = ("scan", "graph", "fragments", "relations", "bm25")


def config_fingerprint(config: Config) -> str:
    return settings_digest(config, INDEX_SECTIONS)  # threads do not change the result


FILE_COLUMNS = FileRecord._fields
# Every column is one JSON string (JSON parses one long string many times faster than 50,000 values):
# text columns joined by NUL (no path holds one), a removed file's slot the empty path; number
# columns as base64 of little-endian int64 (docs/measurements.md#nothing-changed).
TEXT_COLUMNS = ("path", "language", "digest")
_SLOT_VALUES = {"path": "", "language": "", "digest": "", "size": 0, "mtime_ns": 0, "first_fragment": 0,
                "n_fragments": 0, "masked": 0, "over_node_limit": False}


def packed_integers(values: Any) -> str:
    """Integers (or booleans) as base64 of little-endian int64."""
    return base64.b64encode(np.asarray(values, dtype="<i8").tobytes()).decode("ascii")


def unpacked_array(text: Any, count: int | None = None) -> np.ndarray:
    """The int64 array of packed_integers; ValueError unless it has `count` values (when given)."""
    if not isinstance(text, str):
        raise ValueError("a packed column is not text")
    values = np.frombuffer(base64.b64decode(text, validate=True), dtype="<i8")
    if count is not None and values.shape[0] != count:
        raise ValueError("a packed column has the wrong length")
    return values


def unpacked_integers(text: Any, count: int | None = None) -> list[int]:
    """The integers of packed_integers, as Python ints."""
    return unpacked_array(text, count).tolist()


def file_columns(records: list[FileRecord | None]) -> dict[str, Any]:
    """The records as the manifest holds them: one column per field and their count."""
    columns: dict[str, Any] = {"count": len(records)}
    for name in FILE_COLUMNS:
        # A record's fields are plain values: read as they are, without dataclasses.asdict's
        # recursive deep copy (docs/measurements.md#index-on-disk).
        values = [_SLOT_VALUES[name] if r is None else getattr(r, name) for r in records]
        columns[name] = "\0".join(values) if name in TEXT_COLUMNS else packed_integers(values)
    return columns


def file_records(columns: Any, n_fragments: int | None = None) -> list[FileRecord | None]:
    """The records back from their columns. Raises ValueError for columns of another shape and,
    given the index's `n_fragments`, for values the index cannot hold (integrity.check_file_columns)."""
    if not isinstance(columns, dict) or set(columns) != {"count", *FILE_COLUMNS}:
        raise ValueError("the file records are not the manifest's columns")
    numbers = {name: file_array(columns, name) for name in FILE_COLUMNS if name not in TEXT_COLUMNS}
    paths = file_column(columns, "path")
    if n_fragments is not None:
        flags = numbers.pop("over_node_limit")
        check_file_columns(paths, numbers, flags, n_fragments)
        numbers["over_node_limit"] = flags
    lists = [paths if name == "path" else file_column(columns, name) if name in TEXT_COLUMNS
             else numbers[name].astype(bool).tolist() if name == "over_node_limit" else numbers[name].tolist()
             for name in FILE_COLUMNS]
    return [FileRecord(*row) if row[0] else None for row in zip(*lists)]


def file_array(columns: Any, name: str) -> np.ndarray:
    """One number column of the records."""
    count = columns["count"]
    if not isinstance(count, int) or count < 0:
        raise ValueError("the file records' count is not a count")
    return unpacked_array(columns[name], count)


def file_column(columns: Any, name: str) -> list[Any]:
    """One column of the records: "" for a removed file's path (what snapshot_check compares)."""
    if name not in TEXT_COLUMNS:
        return file_array(columns, name).tolist()
    count = columns["count"]
    column = columns[name]
    if not isinstance(column, str):
        raise ValueError(f"the file records' {name} column is not text")
    values = column.split("\0") if count else []
    if len(values) != count:
        raise ValueError(f"the file records' {name} column has the wrong length")
    return values


def write_manifest(folder: Path, index: RepoIndex, digests: dict[str, str]) -> None:
    """The sealed manifest of the snapshot being written in `folder`, whose other files have
    `digests`; written last, so a snapshot with a manifest is whole."""
    manifest = {
        "format": FORMAT_VERSION,
        "builder": builder_digest(),
        "config": config_fingerprint(index.config),
        "generation": index.generation,
        "graph": [index.graph_nodes, index.graph_edges],
        # What snapshot_check needs to tell "nothing changed" and report it without loading arrays.
        "fragments": {"base": int(index.w_base.shape[0]), "all": index.n_fragments, "live": int(index.live.sum())},
        "base_id": index.base_id,
        "base_segments": index.base_segments,
        "base_files": packed_integers(sorted(index.base_files)),
        "files": file_columns(index.files),
        "skipped": index.skipped,
        "digests": digests,
        # Each file's identity as written: what `repomem index` compares when it reports an index
        # unchanged without loading it (snapshot_check.snapshot_as_written); a load hashes the bytes.
        "identities": {name: file_identity(folder / name) for name in digests},
    }
    write_bytes(folder / MANIFEST, sealed_json(manifest))


def file_identity(path: Path) -> list[int]:
    """A snapshot file's inode, size and modification time (ns): replaced or written to, it differs."""
    stat = os.stat(path)
    return [stat.st_ino, stat.st_size, stat.st_mtime_ns]


def read_manifest(data: bytes, config: Config) -> dict[str, Any] | Failure:
    """The manifest in `data` when it can be used for `config`, or why not (then rebuild): another
    format, not sealed by this user's key, another builder, other settings. Raises ValueError for a
    sealed body that is no JSON."""
    body = unsealed_json(data)
    if isinstance(body, Failure):
        try:  # a manifest of a format before the sealed body: say "older", not "not written here"
            earlier = json.loads(data)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
            earlier = None
        if isinstance(earlier, dict) and earlier.get("format") not in (None, FORMAT_VERSION):
            return Failure(FailureKind.OLD_INDEX, "index format is unknown to this version")
        return body
    if not isinstance(body, dict) or body.get("format") != FORMAT_VERSION:
        return Failure(FailureKind.OLD_INDEX, "index format is unknown to this version")
    if body.get("builder") != builder_digest():
        return Failure(FailureKind.OLD_INDEX, "index built by another version of repomem")
    if body.get("config") != config_fingerprint(config):
        return Failure(FailureKind.CONFIG_CHANGED, "index settings changed")
    return body


def written_digest(write: Any, path: Path, *arguments: Any, **options: Any) -> str:
    """Write a snapshot file with `write(path, ...)` and return its SHA-256 for the manifest."""
    write(path, *arguments, **options)
    return file_digest(path)


def verified_bytes(snapshot: Path, name: str, digests: Any) -> bytes:
    """A snapshot file's bytes, provided they are the ones the sealed manifest names."""
    data = read_regular(snapshot / name)
    expected = digests.get(name) if isinstance(digests, dict) else None
    if not isinstance(expected, str) or bytes_digest(data) != expected:
        raise ValueError(f"{name} is not the file this index wrote")
    return data


def sealed_base_digests(snapshot: Path, base_id: str) -> dict[str, str] | None:
    """The digests of `snapshot`'s base files when it is a sealed snapshot of the same full build
    (its base files can be hard-linked into the next snapshot); else None."""
    try:
        manifest = unsealed_json(read_regular(snapshot / MANIFEST))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("base_id") != base_id:
        return None
    digests = manifest.get("digests")
    if not isinstance(digests, dict) or not all(isinstance(digests.get(n), str) for n in BASE_FILES):
        return None
    return {name: digests[name] for name in BASE_FILES}
