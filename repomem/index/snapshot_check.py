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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repomem.config import Config
from repomem.failures import Failure
from repomem.index.index_folder import current_snapshot, index_dir
from repomem.index.scan import Candidate, Skipped
from repomem.index.snapshot_manifest import MANIFEST, SNAPSHOT_FILES, file_column, file_identity, read_manifest
from repomem.regular_files import read_regular


@dataclass(frozen=True)
class SnapshotSummary:
    """What a sealed manifest says of its index, enough to report on it."""

    snapshot: Path
    files: dict[str, tuple[int, int]]  # each live file's path -> (size, mtime_ns) as indexed
    masked: tuple[tuple[str, int], ...]  # (path, secrets masked) of the files with any
    over_node_limit: tuple[str, ...]
    identities: dict[str, list[int]]  # of the snapshot's other files as written (snapshot_manifest)
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
    manifest = read_manifest(read_regular(snapshot / MANIFEST), config)
    return manifest if isinstance(manifest, Failure) else (snapshot, manifest)


def snapshot_summary(root: Path, config: Config) -> SnapshotSummary | None:
    """The current snapshot's summary, or None where only loading it can tell (no index, one not
    sealed here or made for other settings, a damaged or older manifest)."""
    try:
        current = current_manifest(root, config)
        if isinstance(current, Failure):
            return None
        snapshot, manifest = current
        counts, columns = manifest["fragments"], manifest["files"]
        paths = file_column(columns, "path")
        files = dict(zip(paths, zip(file_column(columns, "size"), file_column(columns, "mtime_ns"))))
        files.pop("", None)  # removed files' slots
        masked = tuple((path, count) for path, count in zip(paths, file_column(columns, "masked")) if path and count)
        over = tuple(path for path, over in zip(paths, file_column(columns, "over_node_limit")) if path and over)
        return SnapshotSummary(snapshot, files, masked, over, manifest["identities"],
                               tuple((str(p), str(r)) for p, r in manifest["skipped"]),
                               int(manifest["graph"][0]), int(manifest["graph"][1]), int(counts["base"]),
                               int(counts["all"]), int(counts["live"]))
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


def snapshot_as_written(summary: SnapshotSummary) -> bool:
    """Whether every file of the snapshot is the one written (same inode, size and time): "unchanged"
    is said without a load only of an index whose files were neither replaced nor written to since.
    Damage that leaves a file's size and time alone (a bit flipped on the disk) is found by the next
    load, which hashes every byte (snapshot_load.py) and rebuilds; hashing here cost Django's
    no-change check a fifth of its time (docs/measurements.md#nothing-changed)."""
    try:
        return all(file_identity(summary.snapshot / name) == summary.identities[name] for name in SNAPSHOT_FILES)
    except (OSError, KeyError, TypeError):
        return False


def unchanged_since(summary: SnapshotSummary, candidates: Sequence[Candidate], skipped: Sequence[Skipped],
                    compact_ratio: float, read: Callable[[Candidate], object]) -> bool:
    """Whether a refresh of the summarised index with this scan would change nothing, write nothing
    and report what the summary says (RepoService._refresh, step by step): each indexed file there
    with the size and modification time recorded (a touched one is read by the refresh and its new
    time written, so it is not "unchanged" here); each candidate without a record skipped again when
    read, for the reason recorded (`read`: the refresh's read, a Skipped or the source; a minified
    file is such a candidate); the same skipped files in the same order; no compaction due
    (RepoService._needs_compaction)."""
    recorded = summary.files
    unreadable: list[Skipped] = []
    seen = 0
    for candidate in candidates:
        record = recorded.get(candidate.path)
        if record is None:
            result = read(candidate)
            if not isinstance(result, Skipped):
                return False  # a new file
            unreadable.append(result)
        elif record[1] == 0 or record != (candidate.size, candidate.mtime_ns):
            return False
        else:
            seen += 1
    if seen != len(recorded):
        return False  # an indexed file is gone
    if tuple((s.path, s.reason) for s in (*skipped, *unreadable)) != summary.skipped:
        return False
    if summary.base_fragments == 0:
        return summary.all_fragments == 0
    return summary.all_fragments - summary.base_fragments <= compact_ratio * summary.base_fragments
