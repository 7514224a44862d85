"""The names' part of a scan kept between runs (repomem/index/scan_memo.py): used while nothing it
depends on moved, and whatever moved, the scan's answer is the one a scan from nothing gives."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from repomem.config import Config, with_overrides
from repomem.index import scan_memo
from repomem.index.index_folder import MARKER
from repomem.index.scan import list_candidates
from repomem.index.scan_memo import MEMO, listed_names
from tests.repos import write_repo

FILES = {
    "app/main.py": "def main():\n    return 1\n",
    "app/util.py": "def helper():\n    return 2\n",
    "lib/deep/mod.py": "def deep():\n    return 3\n",
    "docs/notes.txt": "no grammar\n",
    "build/generated.py": "def generated():\n    return 4\n",  # an excluded folder: skipped, with a reason
    ".env": "TOKEN=abc\n",  # a secret by name
    "empty/.keep": "",  # a folder with no indexed file in it
    ".gitignore": "ignored/\n",
    "ignored/skip.py": "def skip():\n    return 5\n",
}
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


def _age(root: Path) -> None:
    """Every folder and file a minute old: a memo records only folders older than RACY_S."""
    then = time.time() - 60
    for folder, _, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(folder, name), (then, then), follow_symlinks=False)
        os.utime(folder, (then, then))


def _repo(tmp_path: Path, git: bool) -> tuple[Path, Path]:
    root = write_repo(tmp_path / "repo", FILES)
    if git:
        subprocess.run([*GIT, "init", "-q"], cwd=root, check=True)
        subprocess.run([*GIT, "add", "-A"], cwd=root, check=True)
        subprocess.run([*GIT, "commit", "-q", "-m", "files"], cwd=root, check=True)
    memo_folder = tmp_path / "index"
    memo_folder.mkdir()
    (memo_folder / MARKER).write_text("repomem index folder\n")
    _age(root)
    return root, memo_folder


def _scan(root: Path, memo_folder: Path | None, config: Config | None = None):
    scan = (config or Config()).scan
    return list_candidates(root, scan, listed_names(root, scan, memo_folder))


def _from_nothing(root: Path, config: Config | None = None):
    return list_candidates(root, (config or Config()).scan)


@pytest.fixture(params=[True, False], ids=["git", "no git"])
def repo(tmp_path: Path, request) -> tuple[Path, Path, bool]:
    root, memo_folder = _repo(tmp_path, request.param)
    return root, memo_folder, request.param


def test_the_memo_is_recorded_then_used_and_answers_as_a_scan_from_nothing(repo, monkeypatch):
    root, memo_folder, git = repo
    first = _scan(root, memo_folder)
    assert (memo_folder / MEMO).is_file()
    assert first == _from_nothing(root)
    assert {c.path for c in first[0]} == {"app/main.py", "app/util.py", "lib/deep/mod.py"}
    # git lists an excluded folder's untracked files (then judged by name); a walk never enters it.
    skipped = {(s.path, s.reason) for s in first[1]}
    assert (("build/generated.py", "inside excluded folder build") in skipped) == git

    def no_listing(*args, **kwargs):
        raise AssertionError("listed again although nothing moved")

    monkeypatch.setattr(scan_memo, "list_names", no_listing)
    assert _scan(root, memo_folder) == first


def _write_in_place(path: Path, text: str) -> None:
    """Edit a file as `echo >` does: same inode, its folder's time untouched."""
    with open(path, "r+", encoding="utf-8") as handle:
        handle.truncate(0)
        handle.write(text)


CHANGES: dict[str, Callable[[Path], None]] = {
    "a file added": lambda root: (root / "app/new.py").write_text("def new():\n    return 6\n"),
    "a file added where nothing was indexed": lambda root: (root / "empty/found.py").write_text("x = 1\n"),
    "a file added in a new folder": lambda root: write_repo(root, {"fresh/deeper/mod.py": "y = 2\n"}),
    "a file added in an excluded folder": lambda root: (root / "build/more.py").write_text("z = 3\n"),
    "a file removed": lambda root: (root / "app/util.py").unlink(),
    "a folder renamed": lambda root: (root / "lib/deep").rename(root / "lib/deeper"),
    "an ignore rule edited in place": lambda root: _write_in_place(root / ".gitignore", "app/\n"),
    "an ignore rule added in a folder": lambda root: (root / "lib/.gitignore").write_text("deep/\n"),
    "an ignored folder's rule dropped": lambda root: _write_in_place(root / ".gitignore", "\n"),
    "a file edited in place": lambda root: _write_in_place(root / "app/main.py", "def main():\n    return 10\n"),
    "a folder made unreadable": lambda root: (root / "lib/deep").chmod(0),
    "a folder made readable again": lambda root: (root / "empty").chmod(0o755),
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_whatever_moved_the_answer_is_a_scan_from_nothings(repo, change: str):
    root, memo_folder, _ = repo
    if change == "a folder made readable again":
        if os.geteuid() == 0:
            pytest.skip("root lists a folder whatever its mode: nothing to make readable")
        (root / "empty" / "found.py").write_text("x = 1\n")
        (root / "empty").chmod(0)
        _age(root)
        assert "empty/found.py" not in {c.path for c in _from_nothing(root)[0]}
    try:
        CHANGES[change](root)
        assert _scan(root, memo_folder) == _from_nothing(root)
    finally:
        for folder in ("lib/deep", "empty"):
            if (root / folder).exists():
                (root / folder).chmod(0o755)


def _excludes_file(root: Path) -> None:
    rules = root.parent / "global-excludes"
    rules.write_text("scratch.py\n")
    subprocess.run([*GIT, "config", "core.excludesFile", str(rules)], cwd=root, check=True)


GIT_CHANGES: dict[str, Callable[[Path], None]] = {
    "an ignored file staged": lambda root: subprocess.run([*GIT, "add", "-f", "ignored/skip.py"], cwd=root,
                                                          check=True),
    "a rule in git's exclude file": lambda root: (root / ".git/info/exclude").write_text("scratch.py\n"),
    "an excludes file named in git's config": _excludes_file,
}


@pytest.mark.parametrize("change", GIT_CHANGES, ids=list(GIT_CHANGES))
def test_what_git_alone_knows_is_seen_too(tmp_path: Path, change: str):
    root, memo_folder = _repo(tmp_path, git=True)
    (root / "app/scratch.py").write_text("s = 1\n")  # untracked, not ignored: listed
    _age(root)
    before = _scan(root, memo_folder)
    assert "app/scratch.py" in {c.path for c in before[0]}
    GIT_CHANGES[change](root)
    after = _scan(root, memo_folder)
    assert after == _from_nothing(root) and after != before


def test_an_edit_to_a_linked_excludes_file_is_seen(tmp_path: Path):
    """A global excludes file kept with dotfiles and linked from where git reads it: an edit of the
    target leaves the link as it was, and the memo kept listing the file git now ignores."""
    root, memo_folder = _repo(tmp_path, git=True)
    (root / "app/scratch.py").write_text("s = 1\n")
    target = tmp_path / "dotfiles-ignore"
    target.write_text("\n")
    (tmp_path / "excludes-link").symlink_to(target)
    subprocess.run([*GIT, "config", "core.excludesFile", str(tmp_path / "excludes-link")], cwd=root, check=True)
    _age(root)
    then = time.time() - 60
    for path in (target, tmp_path / "excludes-link"):
        os.utime(path, (then, then), follow_symlinks=False)
    before = _scan(root, memo_folder)
    assert "app/scratch.py" in {c.path for c in before[0]} and (memo_folder / MEMO).is_file()
    _write_in_place(target, "scratch.py\n")
    after = _scan(root, memo_folder)
    assert after == _from_nothing(root) and "app/scratch.py" not in {c.path for c in after[0]}


def test_other_scan_settings_list_again(repo):
    root, memo_folder, _ = repo
    _scan(root, memo_folder)
    wider = with_overrides(Config(), scan={"excluded_dirs": (".git", ".repomem")})
    assert _scan(root, memo_folder, wider) == _from_nothing(root, wider)
    assert "build/generated.py" in {c.path for c in _scan(root, memo_folder, wider)[0]}


def test_a_folder_changed_just_now_is_not_recorded(tmp_path: Path):
    root, memo_folder = _repo(tmp_path, git=False)
    (root / "app/new.py").write_text("v = 1\n")  # app/ changed this second
    assert _scan(root, memo_folder) == _from_nothing(root)
    assert not (memo_folder / MEMO).exists()


def test_a_memo_not_sealed_here_is_ignored(repo):
    root, memo_folder, _ = repo
    _scan(root, memo_folder)
    memo = json.loads((memo_folder / MEMO).read_bytes())
    memo["body"]["kept"] = "app/main.py"  # hides two files; the seal no longer matches
    (memo_folder / MEMO).write_text(json.dumps(memo))
    assert _scan(root, memo_folder) == _from_nothing(root)


def test_no_memo_outside_a_folder_repomem_made(tmp_path: Path):
    root, memo_folder = _repo(tmp_path, git=False)
    (memo_folder / MARKER).unlink()
    _scan(root, memo_folder)
    assert not (memo_folder / MEMO).exists()


def test_a_copy_of_the_tree_with_its_index_folder_lists_its_own_files(repo):
    """`cp -a` of a repository whose index folder is inside it: the memo copied along named the
    original's folders, all as recorded, so a file added to the copy was never listed."""
    root, memo_folder, _ = repo
    shutil.move(memo_folder, root / ".repomem")
    _age(root)
    _scan(root, root / ".repomem")
    assert (root / ".repomem" / MEMO).is_file()
    copy = root.parent / "copy"
    shutil.copytree(root, copy, symlinks=True)  # times kept, folders' too
    (copy / "app" / "added.py").write_text("def added():\n    return 6\n")
    _age(copy)
    assert "app/added.py" in {c.path for c in _scan(copy, copy / ".repomem")[0]}
    assert _scan(copy, copy / ".repomem") == _from_nothing(copy)


def test_a_folder_below_a_work_trees_top_is_listed_as_git_sees_it(tmp_path: Path):
    """`repomem index app` in a git work tree (or a `repomem.toml` project inside one): the
    .gitignore files above the folder and git's exclude file judge its names, and an edit of the
    one above is seen by the memo. A folder git ignores, named by the user, is indexed on its own."""
    root, _ = _repo(tmp_path, git=True)
    (root / ".gitignore").write_text("ignored/\n*.gen.py\ncache/\n")
    write_repo(root, {"app/made.gen.py": "g = 1\n", "app/cache/stale.py": "c = 1\n", "app/local.py": "l = 1\n",
                      "ignored/inner/own.py": "o = 1\n"})
    (root / ".git/info/exclude").write_text("local.py\n")
    app = root / "app"
    memo_folder = tmp_path / "app-index"
    memo_folder.mkdir()
    (memo_folder / MARKER).write_text("repomem index folder\n")
    _age(root)
    first = _scan(app, memo_folder)
    assert {c.path for c in first[0]} == {"main.py", "util.py"}
    assert first == _from_nothing(app) and (memo_folder / MEMO).is_file()
    _write_in_place(root / ".gitignore", "ignored/\n")  # the rule above dropped: seen through the memo
    after = _scan(app, memo_folder)
    assert {c.path for c in after[0]} == {"main.py", "util.py", "made.gen.py", "cache/stale.py"}
    assert after == _from_nothing(app)
    assert {c.path for c in _from_nothing(root / "ignored/inner")[0]} == {"own.py"}


def test_files_outside_a_sparse_checkout_are_not_listed_as_deleted(tmp_path: Path):
    """A sparse checkout keeps the files outside its cone in git's index and off the disk: each was
    a "deleted" skip at every command (thousands in a monorepo). They are not listed now, with the
    memo or without; one of them written to the disk all the same is indexed."""
    root, memo_folder = _repo(tmp_path, git=True)
    subprocess.run([*GIT, "update-index", "-q", "--refresh"], cwd=root, check=True)  # _age touched every file
    subprocess.run([*GIT, "sparse-checkout", "set", "app"], cwd=root, check=True, capture_output=True)
    assert not (root / "lib").exists()
    _age(root)
    for _ in range(2):  # recorded, then from the memo
        kept, skipped = _scan(root, memo_folder)
        assert "lib/deep/mod.py" not in {c.path for c in kept}
        assert not [s for s in skipped if s.path == "lib/deep/mod.py"], skipped
        assert (kept, skipped) == _from_nothing(root)
    write_repo(root, {"lib/deep/mod.py": "def deep():\n    return 3\n"})
    assert "lib/deep/mod.py" in {c.path for c in _scan(root, memo_folder)[0]}


def test_a_nested_repository_is_watched_as_a_folder_and_seen_when_it_stops_being_one(tmp_path: Path):
    """git lists a repository nested in the work tree as its folder alone: the memo watches that
    folder's entries, not the folders inside it (a large submodule's thousands of folders were
    checked at every scan); its .git removed, its files are the outer repository's, as a scan
    from nothing finds."""
    root, memo_folder = _repo(tmp_path, git=True)
    nested = write_repo(root / "vendor/tool", {"tool.py": "def tool():\n    return 6\n", "deep/er/x.py": "y = 7\n"})
    subprocess.run([*GIT, "init", "-q"], cwd=nested, check=True)
    _age(root)
    for _ in range(2):  # recorded, then from the memo
        kept, skipped = _scan(root, memo_folder)
        assert not [c.path for c in kept if c.path.startswith("vendor/")]
        assert "vendor/tool/" in {s.path for s in skipped} and (kept, skipped) == _from_nothing(root)
    shutil.rmtree(nested / ".git")
    kept, skipped = _scan(root, memo_folder)
    assert {"vendor/tool/tool.py", "vendor/tool/deep/er/x.py"} <= {c.path for c in kept}
    assert (kept, skipped) == _from_nothing(root)
