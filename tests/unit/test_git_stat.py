"""What git's index says of the tracked files (repomem/index/git_stat.py): the reader against git's
own account of its index (`git ls-files --debug`) in each index version and object format, what
it refuses, and a scan that takes the sizes and times git vouches for giving the answer of one
`lstat` a file, whatever changed."""

from __future__ import annotations

import os
import random
import re
import subprocess
import time
from pathlib import Path

import pytest

from repomem.config import Config
from repomem.index import scan_memo
from repomem.index.git_stat import changed_files, index_entries
from repomem.index.index_folder import MARKER
from repomem.index.scan import list_candidates
from repomem.index.scan_memo import listed_names
from tests.repos import write_repo

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
FILES = {
    "app/main.py": "def main():\n    return 1\n",
    "app/main_helpers.py": "def helper():\n    return 2\n",  # shares a long beginning with the one before (v4)
    "app/mainline.py": "x = 3\n",
    "lib/deep/mod.py": "def deep():\n    return 3\n",
    "naïve/ünïcode.py": "y = 4\n",
    "top.py": "z = 5\n",
    "big.py": "# big\n" * 400,
}


def _git(root: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=root, check=True, capture_output=True, text=True).stdout


def index_file(root: Path) -> Path:
    """git's index file of the work tree at `root`."""
    return Path(_git(root, "rev-parse", "--path-format=absolute", "--git-path", "index").strip())


def _repository(tmp_path: Path, *init: str) -> Path:
    root = write_repo(tmp_path / "repo", FILES)
    _git(root, "init", "-q", *init)
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "files")
    return root


def _debug_entries(root: Path) -> dict[str, tuple[int, int]]:
    """git's own account: path -> (size, mtime ns) of the entries `index_entries` should keep."""
    entries, path, mtime = {}, "", 0
    for line in _git(root, "-c", "core.quotePath=false", "ls-files", "--debug", "--stage").splitlines():
        if not line.startswith("  "):
            mode, _, stage, path = re.match(r"(\d+) (\S+) (\d)\t(.*)", line).groups()
            plain = mode in ("100644", "100755") and stage == "0"
        elif line.strip().startswith("mtime:"):
            seconds, nanoseconds = line.split()[1].split(":")
            mtime = int(seconds) * 1_000_000_000 + int(nanoseconds)
        elif line.strip().startswith("size:"):
            size, flags = re.match(r"\s*size: (\d+)\s+flags: ([0-9a-f]+)", line).groups()
            # assume-valid 0x8000; in memory, skip-worktree 1 << 30 and intent-to-add 1 << 29
            if plain and not int(flags, 16) & (0x8000 | 1 << 30 | 1 << 29):
                entries[path] = (int(size), mtime)
    return entries


@pytest.mark.parametrize("version", [2, 3, 4])
@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_the_entries_are_the_ones_git_reports(tmp_path, version, object_format):
    root = _repository(tmp_path, f"--object-format={object_format}")
    (root / "link.py").symlink_to("top.py")
    (root / "added_later.py").write_text("w = 6\n")
    _git(root, "add", "link.py")
    _git(root, "add", "--intent-to-add", "added_later.py")  # an extended flag: version 3 at least
    _git(root, "update-index", "--assume-unchanged", "app/mainline.py")
    _git(root, "update-index", "--skip-worktree", "lib/deep/mod.py")
    _git(root, "update-index", "--index-version", str(version))
    hash_bytes = 20 if object_format == "sha1" else 32
    entries = index_entries(index_file(root).read_bytes(), hash_bytes)
    assert entries == _debug_entries(root)
    assert set(entries) == {"app/main.py", "app/main_helpers.py", "naïve/ünïcode.py", "top.py", "big.py",
                            "repomem.toml"}


def test_a_split_index_and_damaged_bytes_are_refused_without_an_exception(tmp_path):
    root = _repository(tmp_path)
    data = index_file(root).read_bytes()
    assert index_entries(data) is not None
    generator = random.Random(7)
    for _ in range(300):
        damaged = bytearray(data)
        if generator.random() < 0.5:
            del damaged[generator.randrange(len(damaged)):]
        else:
            for _ in range(generator.randrange(1, 8)):
                damaged[generator.randrange(len(damaged))] = generator.randrange(256)
        index_entries(bytes(damaged))  # an answer or None, never an exception
    assert index_entries(b"DIRC") is None and index_entries(b"not an index at all, not at all") is None
    _git(root, "update-index", "--split-index")
    assert index_entries(index_file(root).read_bytes()) is None


def _aged(root: Path) -> None:
    """Everything a minute old, git's index refreshed to it: a memo records nothing racy, and a
    change now is in another second than any recorded (git compares times to the second unless
    built with USE_NSEC; a change within the recorded second is found by its content check)."""
    then = time.time() - 60
    for folder, _, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(folder, name), (then, then), follow_symlinks=False)
        os.utime(folder, (then, then))
    subprocess.run([*GIT, "update-index", "-q", "--refresh"], cwd=root, check=False)
    os.utime(index_file(root), (then, then))
    os.utime(root / ".git", (then, then))


def test_changed_files_are_the_tracked_files_whose_stat_moved(tmp_path):
    root = _repository(tmp_path)
    _aged(root)
    assert changed_files(root) == set()
    (root / "top.py").write_text("z = 55\n")
    os.utime(root / "app" / "main.py")  # touched: the same bytes, a later second
    (root / "lib" / "deep" / "mod.py").unlink()
    (root / "new.py").write_text("untracked\n")
    assert changed_files(root) == {"top.py", "app/main.py", "lib/deep/mod.py"}
    assert changed_files(tmp_path / "nowhere") is None


@pytest.fixture
def small_trees_ask_git(monkeypatch):
    """git's answer for these few files too (repositories below GIT_STAT_MIN_FILES lstat each)."""
    monkeypatch.setattr(scan_memo, "GIT_STAT_MIN_FILES", 0)


def test_a_scan_with_what_git_vouches_for_is_a_scan_of_one_lstat_a_file(tmp_path, small_trees_ask_git):
    root = _repository(tmp_path)
    memo_folder = tmp_path / "index"
    memo_folder.mkdir()
    (memo_folder / MARKER).write_text("repomem index folder\n")
    scan = Config().scan
    _aged(root)
    first = listed_names(root, scan, memo_folder)  # lists, and records git's entries
    assert first.current_stats is None
    vouched = listed_names(root, scan, memo_folder)
    assert vouched.current_stats is not None
    sizes, _ = vouched.current_stats
    assert sum(size >= 0 for size in sizes) == len(FILES)
    assert list_candidates(root, scan, vouched) == list_candidates(root, scan)
    # The changes a file makes without its folder changing: an edit, a touch, a size past the limit.
    (root / "top.py").write_text("z = 55\n")
    os.utime(root / "app" / "main.py")
    (root / "big.py").write_text("# big\n" * 400_000)
    now = listed_names(root, scan, memo_folder)
    assert now.current_stats is not None  # the memo still holds: only files changed
    assert [size >= 0 for size in now.current_stats[0]] == [name not in ("top.py", "app/main.py", "big.py")
                                                            for name, _ in now.kept]
    assert list_candidates(root, scan, now) == list_candidates(root, scan)
    candidates, skipped = list_candidates(root, scan, now)
    assert "big.py" in {s.path for s in skipped} and "top.py" in {c.path for c in candidates}
    # A link in a file's place, a file gone: its folder changed, so the names are listed again.
    (root / "app" / "mainline.py").unlink()
    (root / "app" / "mainline.py").symlink_to("main.py")
    os.unlink(root / "lib" / "deep" / "mod.py")
    again = listed_names(root, scan, memo_folder)
    assert again.current_stats is None
    assert list_candidates(root, scan, again) == list_candidates(root, scan)


def test_a_file_git_records_otherwise_than_the_disk_is_always_stat_ed(tmp_path, small_trees_ask_git):
    root = _repository(tmp_path)  # just committed: git's entries may be racily clean, some smudged
    memo_folder = tmp_path / "index"
    memo_folder.mkdir()
    (memo_folder / MARKER).write_text("repomem index folder\n")
    then = time.time() - 60
    for folder, _, names in os.walk(root):  # everything old, git's index not refreshed
        for name in names:
            os.utime(os.path.join(folder, name), (then, then))
        os.utime(folder, (then, then))
    scan = Config().scan
    listed_names(root, scan, memo_folder)
    vouched = listed_names(root, scan, memo_folder)
    assert vouched.current_stats is not None and all(size < 0 for size in vouched.current_stats[0])
    assert list_candidates(root, scan, vouched) == list_candidates(root, scan)


def test_a_small_tree_is_stat_ed_without_asking_git(tmp_path, monkeypatch):
    root = _repository(tmp_path)
    memo_folder = tmp_path / "index"
    memo_folder.mkdir()
    (memo_folder / MARKER).write_text("repomem index folder\n")
    _aged(root)
    scan = Config().scan
    listed_names(root, scan, memo_folder)
    asked = []
    monkeypatch.setattr(scan_memo, "asking_changed_files", lambda where: asked.append(where))
    assert listed_names(root, scan, memo_folder).current_stats is None and not asked
