"""`repomem index` with nothing changed is told from the sealed manifest and one scan, without
loading the index (repomem/index/snapshot_check.py). Whatever the repository did, the report is the
one the full path (load, refresh) gives, and the index on disk is the same afterwards."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from repomem.index.index_folder import current_snapshot, index_dir
from repomem.service import RepoService
from tests.manifests import manifest_body, manifest_seal, write_manifest
from tests.repos import synthetic_files, write_repo

MINIFIED = "x = [" + "1, " * 6000 + "]\n"  # skipped when read: a line longer than scan.max_line_chars


def _repo(tmp_path: Path) -> Path:
    root = write_repo(tmp_path / "repo", {**synthetic_files(6), "vendor/min.py": MINIFIED})
    (root / "blob.py").write_bytes(b"\0binary")
    assert RepoService.open(root).ensure_index().action == "built"
    return root


def _fields(report) -> dict:
    return {k: v for k, v in vars(report).items() if k != "seconds"}


def _both_ways(root: Path) -> tuple[RepoService, dict, dict]:
    """The report without loading (this check), then the full path's on a copy of the index state:
    the check runs first and writes nothing, so the second sees the same disk."""
    quick = RepoService.open(root)
    quick_report = quick.ensure_index(load=False)
    full_report = RepoService.open(root).ensure_index()
    return quick, _fields(quick_report), _fields(full_report)


def test_nothing_changed_is_reported_from_the_manifest_alone(tmp_path: Path):
    root = _repo(tmp_path)
    snapshot = current_snapshot(index_dir(root, RepoService.open(root).config))
    quick, quick_report, full_report = _both_ways(root)
    assert quick.index is None  # nothing was loaded
    assert quick_report == full_report and quick_report["action"] == "unchanged"
    assert {p for p, _ in quick_report["skipped"]} >= {"vendor/min.py", "blob.py"}
    assert current_snapshot(index_dir(root, quick.config)) == snapshot  # nothing written


def _touch(root: Path) -> None:
    path = root / "lib/part0/mod0.py"
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))


CHANGES = {
    "a file touched, its bytes the same": _touch,
    "a file edited": lambda root: (root / "lib/part0/mod0.py").write_text("def edited():\n    return 1\n"),
    "a file added": lambda root: (root / "new.py").write_text("def added():\n    return 2\n"),
    "a file removed": lambda root: (root / "lib/part0/mod0.py").unlink(),
    "a minified file made readable": lambda root: (root / "vendor/min.py").write_text("def ok():\n    return 3\n"),
    "a binary file added": lambda root: (root / "blob2.py").write_bytes(b"\0more"),
    "an ignore rule added": lambda root: (root / ".gitignore").write_text("lib/part1/\n"),
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_any_change_takes_the_full_path_and_reports_the_same(tmp_path: Path, change: str):
    root = _repo(tmp_path)
    CHANGES[change](root)
    quick = RepoService.open(root)
    quick_report = _fields(quick.ensure_index(load=False))
    assert quick.index is not None  # loaded: the change was seen
    again = _fields(RepoService.open(root).ensure_index())
    assert again["action"] == "unchanged"  # the first run saved what it saw
    assert {k: v for k, v in quick_report.items() if k not in ("action", "changed", "removed")} == \
        {k: v for k, v in again.items() if k not in ("action", "changed", "removed")}
    # ... so well that the next run is told unchanged without a load (a binary file added changed
    # only the skipped files, and was not saved: every later run loaded the index).
    third = RepoService.open(root)
    assert _fields(third.ensure_index(load=False)) == again and third.index is None


def test_a_git_work_trees_first_index_is_not_one_of_its_skipped_files(tmp_path: Path):
    """The index folder is git-ignored from its claim on: the first build scanned after the claim
    and recorded the folder's marker as an untracked file skipped, which no later scan lists, so no
    later run was ever told unchanged without a load."""
    root = write_repo(tmp_path / "repo", synthetic_files(3))
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    built = RepoService.open(root).ensure_index()
    assert built.action == "built" and not [path for path, _ in built.skipped if path.startswith(".repomem")]
    quick = RepoService.open(root)
    assert quick.ensure_index(load=False).action == "unchanged" and quick.index is None


def _rewrite_manifest(root: Path, edit) -> None:
    snapshot = current_snapshot(index_dir(root, RepoService.open(root).config))
    manifest = manifest_body(snapshot)
    edit(manifest)
    write_manifest(snapshot, manifest)


def test_a_manifest_without_the_counts_takes_the_full_path(tmp_path: Path):
    root = _repo(tmp_path)
    _rewrite_manifest(root, lambda manifest: manifest.pop("fragments"))
    quick = RepoService.open(root)
    assert quick.ensure_index(load=False).action == "unchanged" and quick.index is not None


def test_counts_that_say_compaction_is_due_take_the_full_path(tmp_path: Path):
    """The full path decides on the loaded arrays (here: not due, the counts were made up)."""
    root = _repo(tmp_path)
    _rewrite_manifest(root, lambda manifest: manifest["fragments"].update(all=manifest["fragments"]["base"] * 2))
    quick = RepoService.open(root)
    assert quick.ensure_index(load=False).action == "unchanged" and quick.index is not None


def test_a_manifest_not_sealed_here_is_not_believed(tmp_path: Path):
    root = _repo(tmp_path)
    snapshot = current_snapshot(index_dir(root, RepoService.open(root).config))
    manifest = manifest_body(snapshot)
    manifest["fragments"]["live"] += 1
    write_manifest(snapshot, manifest, seal=manifest_seal(snapshot))  # the seal no longer matches
    report = RepoService.open(root).ensure_index(load=False)
    assert report.action == "built" and report.warning


def test_a_sealed_manifest_cut_short_is_damage_not_another_machines(tmp_path: Path):
    """A sealed manifest cut short was reported as "not written on this machine (no seal)": a user
    looked for another machine's hand, not for a damaged file."""
    root = _repo(tmp_path)
    snapshot = current_snapshot(index_dir(root, RepoService.open(root).config))
    (snapshot / "manifest.json").write_bytes((snapshot / "manifest.json").read_bytes()[:100])
    report = RepoService.open(root).ensure_index(load=False)
    assert report.action == "built" and "damaged" in report.reason and "cut short" in report.reason, report
    assert "machine" not in (report.warning or ""), report.warning


@pytest.mark.parametrize("name", ["base.npz", "symbols.json.gz"])
def test_a_damaged_file_of_the_snapshot_is_rebuilt_not_reported_unchanged(tmp_path: Path, name: str):
    root = _repo(tmp_path)
    snapshot = current_snapshot(index_dir(root, RepoService.open(root).config))
    (snapshot / name).write_bytes(b"garbage")
    report = RepoService.open(root).ensure_index(load=False)
    assert report.action == "built" and "damaged" in report.reason


def test_damage_that_keeps_a_files_identity_is_found_by_the_next_load(tmp_path: Path):
    """`repomem index` compares the snapshot files' identities (inode, size, time), not their bytes:
    a byte flipped in place with the time put back is reported unchanged, and the next load, which
    hashes every byte, finds it and rebuilds."""
    root = _repo(tmp_path)
    path = current_snapshot(index_dir(root, RepoService.open(root).config)) / "base.npz"
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x20
    with open(path, "r+b") as handle:  # in place: the same inode and size
        handle.write(data)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert RepoService.open(root).ensure_index(load=False).action == "unchanged"
    report = RepoService.open(root).ensure_index()
    assert report.action == "built" and "not the file this index wrote" in report.reason, report.reason


def test_a_tree_copied_with_its_index_is_told_unchanged_without_a_load_from_then_on(tmp_path: Path):
    """A copy of the tree with its index folder (`cp -a`, a backup restored) holds the snapshot's
    files under other inodes: the check could not vouch for them, so every command loaded the whole
    index (Django: 0.7-1 s against 0.04 s) and, finding nothing changed, wrote nothing, forever. The
    first load checks every byte and records the files as they are."""
    root = _repo(tmp_path)
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, symlinks=True)  # times kept, inodes new
    first = RepoService.open(copy)
    assert first.ensure_index(load=False).action == "unchanged" and first.index is not None
    second = RepoService.open(copy)
    assert second.ensure_index(load=False).action == "unchanged" and second.index is None
    assert RepoService.open(root).ensure_index(load=False).action == "unchanged"  # the original as it was
