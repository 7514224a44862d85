"""A snapshot's manifest: its format, builder and settings, the files' records, and the SHA-256
of every other file of the snapshot, sealed under this user's key (provenance.py). An index
folder a repository ships, or one damaged on disk, fails here and is rebuilt, never read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repomem.config import Config, settings_digest
from repomem.failures import Failure, FailureKind
from repomem.index.builder_version import builder_digest
from repomem.index.provenance import bytes_digest, check_seal, file_digest, sealed
from repomem.index.repo_index import RepoIndex
from repomem.index.snapshot_files import write_text
from repomem.regular_files import read_regular

FORMAT_VERSION = 5  # 2: W's base stored as its upper triangle, symbol tables gzipped; 3: array files
# deflated, integers narrowed and sparse index arrays delta coded by row (see snapshot_files.write_npz);
# 4: a capped search leaves out the cost level the cap cuts (W changes where it cut one: rebuild);
# 5: sealed manifests with the digests of the snapshot's files
MANIFEST = "manifest.json"
# Every file of a snapshot but the manifest, whose digests the sealed manifest holds.
SNAPSHOT_FILES = ("base.npz", "delta.npz", "files.npz", "symbols.json.gz", "changed_files.npz",
                  "changed_symbols.json.gz")
BASE_FILES = ("base.npz", "files.npz", "symbols.json.gz")  # shared by the snapshots of one full build
# Sections of the config that shape the index; a change in any of them means a rebuild.
INDEX_SECTIONS = ("scan", "graph", "fragments", "relations", "bm25")


def config_fingerprint(config: Config) -> str:
    return settings_digest(config, INDEX_SECTIONS)  # threads do not change the result


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
        "base_files": sorted(index.base_files),
        # A record's fields are plain values: its __dict__ is what dataclasses.asdict gives,
        # without asdict's recursive deep copy (docs/measurements.md#index-on-disk).
        "files": [None if r is None else vars(r) for r in index.files],
        "skipped": index.skipped,
        "digests": digests,
    }
    write_text(folder / MANIFEST, json.dumps(sealed(manifest)))


def unusable_manifest(manifest: Any, config: Config) -> Failure | None:
    """Why a snapshot with this manifest cannot be loaded for `config` (then rebuild), or None."""
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION:
        return Failure(FailureKind.OLD_INDEX, "index format is unknown to this version")
    untrusted = check_seal(manifest)
    if untrusted is not None:
        return untrusted
    if manifest.get("builder") != builder_digest():
        return Failure(FailureKind.OLD_INDEX, "index built by another version of repomem")
    if manifest.get("config") != config_fingerprint(config):
        return Failure(FailureKind.CONFIG_CHANGED, "index settings changed")
    return None


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
        manifest = json.loads(read_regular(snapshot / MANIFEST).decode("utf-8"))
    except (OSError, ValueError):
        return None
    if check_seal(manifest) is not None or manifest.get("base_id") != base_id:
        return None
    digests = manifest.get("digests")
    if not isinstance(digests, dict) or not all(isinstance(digests.get(n), str) for n in BASE_FILES):
        return None
    return {name: digests[name] for name in BASE_FILES}
