"""Whether the index on disk still matches the repository, told from its sealed manifest and one
scan, without loading the index.

A command that finds nothing changed (the common case: `repomem index` again, a completion after a
save elsewhere) used to load every array and the files' structure first, then scan, most of it
loading what the check never reads (docs/measurements.md#nothing-changed). The manifest
alone holds what the check compares (each file's size and modification time, the skipped files, the
fragment counts), and it is sealed: nothing unchecked is read. Anything else (a file touched or
changed, added or removed, a skip reason that moved, an index due for compaction, a manifest
written before these counts) says "not known unchanged", and the command takes the full path.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repomem.config import Config
from repomem.failures import Failure
from repomem.index.index_folder import current_snapshot, index_dir
from repomem.index.indexed_files import FileRecord
from repomem.index.scan import Candidate, Skipped
from repomem.index.snapshot_manifest import MANIFEST, SNAPSHOT_FILES, unusable_manifest, verified_bytes
from repomem.regular_files import read_regular


@dataclass(frozen=True)
class SnapshotSummary:
    """What a sealed manifest says of its index, enough to report on it."""

    snapshot: Path
    records: tuple[FileRecord, ...]  # the live files
    digests: dict[str, str]  # of the snapshot's other files, as the sealed manifest names them
    skipped: tuple[tuple[str, str], ...]
    nodes: int
    edges: int
    base_fragments: int  # rows of W's base (the last full build)
    all_fragments: int  # live and retired
    live_fragments: int


def current_manifest(root: Path, config: Config) -> tuple[Path, dict[str, Any]] | Failure:
    """The current snapshot of `root`'s index and its manifest, provided the manifest is sealed by
    this user's key and made for `config`. Raises OSError or ValueError for a manifest that cannot
    be read or parsed."""
    snapshot = current_snapshot(index_dir(root, config))
    if isinstance(snapshot, Failure):
        return snapshot
    manifest = json.loads(read_regular(snapshot / MANIFEST).decode("utf-8"))
    unusable = unusable_manifest(manifest, config)
    return unusable if unusable is not None else (snapshot, manifest)


def snapshot_summary(root: Path, config: Config) -> SnapshotSummary | None:
    """The current snapshot's summary, or None where only loading it can tell (no index, one not
    sealed here or made for other settings, a damaged or older manifest)."""
    try:
        current = current_manifest(root, config)
        if isinstance(current, Failure):
            return None
        snapshot, manifest = current
        counts = manifest["fragments"]
        records = tuple(FileRecord(**r) for r in manifest["files"] if r is not None)
        return SnapshotSummary(snapshot, records, manifest["digests"],
                               tuple((str(p), str(r)) for p, r in manifest["skipped"]),
                               int(manifest["graph"][0]), int(manifest["graph"][1]), int(counts["base"]),
                               int(counts["all"]), int(counts["live"]))
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def snapshot_whole(summary: SnapshotSummary) -> bool:
    """Whether every file of the snapshot has the bytes the manifest names, as a load checks them
    (docs/measurements.md#index-on-disk): "unchanged" is said only of an index that is whole; a
    damaged one is loaded, found damaged and rebuilt by the full path. A caller that loads the
    index anyway leaves this to the load (each byte hashed once)."""
    try:
        for name in SNAPSHOT_FILES:
            verified_bytes(summary.snapshot, name, summary.digests)
    except (OSError, ValueError):
        return False
    return True


def unchanged_since(summary: SnapshotSummary, candidates: Sequence[Candidate], skipped: Sequence[Skipped],
                    compact_ratio: float, read: Callable[[Candidate], object]) -> bool:
    """Whether a refresh of the summarised index with this scan would change nothing, write nothing
    and report what the summary says (RepoService._refresh, step by step): each indexed file there
    with the size and modification time recorded (a touched one is read by the refresh and its new
    time written, so it is not "unchanged" here); each candidate without a record skipped again when
    read, for the reason recorded (`read`: the refresh's read, a Skipped or the source; a minified
    file is such a candidate); the same skipped files in the same order; no compaction due
    (RepoService._needs_compaction)."""
    recorded = {r.path: r for r in summary.records}
    unreadable: list[Skipped] = []
    seen = 0
    for candidate in candidates:
        record = recorded.get(candidate.path)
        if record is None:
            result = read(candidate)
            if not isinstance(result, Skipped):
                return False  # a new file
            unreadable.append(result)
        elif record.mtime_ns == 0 or record.size != candidate.size or record.mtime_ns != candidate.mtime_ns:
            return False
        else:
            seen += 1
    if seen != len(summary.records):
        return False  # an indexed file is gone
    if tuple((s.path, s.reason) for s in (*skipped, *unreadable)) != summary.skipped:
        return False
    if summary.base_fragments == 0:
        return summary.all_fragments == 0
    return summary.all_fragments - summary.base_fragments <= compact_ratio * summary.base_fragments
