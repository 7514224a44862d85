"""A refresh that reads the tree's watch (repomem/index/tree_watch.py, RepoService.watch_tree) gives
the index a full scan gives, after each kind of change a person or a tool makes; and it skips the
scan where only files were written."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from repomem.index.tree_watch import TreeWatch
from repomem.service import RepoService
from tests.repos import write_repo

FILES = {
    "app/main.py": "from app.util import helper\n\n\ndef main():\n    return helper()\n",
    "app/util.py": "def helper():\n    return 2\n",
    "lib/deep/mod.py": "def deep():\n    return 3\n",
    "docs/notes.txt": "no grammar\n",
    ".gitignore": "ignored/\n",
    "ignored/skip.py": "def skip():\n    return 5\n",
}
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]


def _append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as stream:
        stream.write(text)


def _committed(root: Path, *forced: str) -> None:
    """`root` as a git repository with every file committed (`forced`: added past its ignore rules)."""
    subprocess.run([*GIT, "init", "-q"], cwd=root, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=root, check=True)
    if forced:
        subprocess.run([*GIT, "add", "-f", *forced], cwd=root, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "files"], cwd=root, check=True)


def _indexed_and_watched(root: Path) -> RepoService:
    service = RepoService.open(root)
    assert isinstance(service, RepoService)
    service.ensure_index()
    service.watch_tree()
    assert service._watch is not None
    return service


def _watched(tmp_path: Path) -> tuple[Path, RepoService]:
    """FILES as a repository (no compaction in the way), indexed and watched."""
    root = write_repo(tmp_path / "repo", FILES)
    (root / "repomem.toml").write_text("[index]\ncompact_ratio = 1000.0\n")
    return root, _indexed_and_watched(root)


def _saved_by_rename(path: Path) -> None:
    """The old file kept as a backup, the new text written beside it and renamed over the name."""
    shutil.copyfile(path, path.with_name(path.name + "~"))
    written = path.with_name("." + path.name + ".tmp4913")
    written.write_text(path.read_text() + "\n\ndef saved():\n    return 2\n")
    os.replace(written, path)


def _new_folder(folder: Path, name: str, text: str) -> None:
    folder.mkdir()
    (folder / name).write_text(text)


def _many_folders(top: Path, count: int, files: bool = True) -> None:
    """A build's output: `top` with `count` folders below it, a source file in some."""
    for number in range(count // 2):
        (top / f"d{number}" / "sub").mkdir(parents=True)
        if files and number % 10 == 0:
            (top / f"d{number}" / "gen.py").write_text(f"def gen_{number}():\n    return {number}\n")


def _with_its_own_rules(root: Path) -> None:
    """A folder whose .gitignore leaves out a folder of its own, made with it."""
    _new_folder(root / "pkg9", "a.py", "def a():\n    return 1\n")
    (root / "pkg9/.gitignore").write_text("gen/\n")
    _many_folders(root / "pkg9/gen", 40)


# (what a person did, whether a scan is needed to know it)
CHANGES: list[tuple[str, Callable[[Path], None], bool]] = [
    ("a file written", lambda root: _append(root / "app/util.py", "\n\ndef added():\n    return helper()\n"), False),
    ("a file touched, bytes the same", lambda root: os.utime(root / "lib/deep/mod.py"), False),
    ("a file without a grammar written", lambda root: _append(root / "docs/notes.txt", "more\n"), False),
    ("an editor's swap and lock files created",
     lambda root: [(root / "app" / name).write_text("x") for name in (".main.py.swp", "#main.py#", "main.py~")],
     False),
    ("an editor's swap file removed", lambda root: (root / "app/.main.py.swp").unlink(), False),
    ("a secret file created", lambda root: (root / "app/.env").write_text("TOKEN=1\n"), True),
    ("a file created", lambda root: (root / "app/new.py").write_text("def new():\n    return 1\n"), True),
    ("a file saved by rename, as Vim saves", lambda root: _saved_by_rename(root / "app/new.py"), False),
    ("a file deleted", lambda root: (root / "app/new.py").unlink(), True),
    ("a folder created with a file",
     lambda root: _new_folder(root / "pkg2", "core.py", "def core():\n    pass\n"), True),
    ("a file in the new folder written", lambda root: _append(root / "pkg2/core.py", "\n\ndef more():\n    pass\n"),
     False),
    ("a folder renamed", lambda root: (root / "pkg2").rename(root / "pkg3"), True),
    # The watch is made anew at each full scan: one set up once kept the moved folder's old name.
    ("a folder made again where one was moved from",
     lambda root: _new_folder(root / "pkg2", "again.py", "def again():\n    pass\n"), True),
    ("a file in the folder made again written",
     lambda root: _append(root / "pkg2/again.py", "\n\ndef more():\n    pass\n"), False),
    ("a tracked file deleted", lambda root: (root / "lib/deep/mod.py").unlink(), True),
    ("an ignore rule added", lambda root: _append(root / ".gitignore", "lib/\n"), True),
    ("a folder removed", lambda root: shutil.rmtree(root / "pkg3"), True),
    ("a file grown past the size limit", lambda root: _append(root / "app/main.py", "# " + "x" * 3000 + "\n"), True),
    # ... and one set up once did not watch a folder an ignore rule no longer leaves out.
    ("the ignore rule of a folder removed", lambda root: (root / ".gitignore").write_text("lib/\n"), True),
    ("a file in the folder it ignored written",
     lambda root: _append(root / "ignored/skip.py", "\n\ndef more():\n    return 6\n"), False),
    # A folder the ignore rules leave out whole, made later (a build's target/), is not walked nor
    # watched, and asks for no scan: the scan lists nothing in it.
    ("ignore rules for build folders added",
     lambda root: _append(root / ".gitignore", "target/\n/out/*\n!/out/keep/\n*.gen/\n"), True),
    ("an ignored folder created with many folders", lambda root: _many_folders(root / "target", 200), False),
    ("a file in the ignored folder written", lambda root: _append(root / "target/d0/gen.py", "# more\n"), False),
    ("an ignored folder created by a pattern, in a folder", lambda root: _many_folders(root / "app/x.gen", 20),
     False),
    ("a folder created whose folders the rules leave out but one",
     lambda root: [_many_folders(root / "out" / name, 20) for name in ("debug", "keep")], True),
    ("a file in its re-included folder written", lambda root: _append(root / "out/keep/d0/gen.py", "# more\n"),
     False),
    ("a file in its ignored folder written", lambda root: _append(root / "out/debug/d0/gen.py", "# more\n"), False),
    ("an ignored folder removed", lambda root: shutil.rmtree(root / "app/x.gen"), False),
    ("a folder created whose own .gitignore leaves out a folder in it", _with_its_own_rules, True),
    ("a file in the folder its own .gitignore leaves out written",
     lambda root: _append(root / "pkg9/gen/d0/gen.py", "# more\n"), False),
    # ... and a rule removed: the folder it left out is watched, its files indexed.
    ("the rule of a folder made later removed", lambda root: (root / "pkg9/.gitignore").write_text("# none\n"),
     True),
    ("a file in the folder it left out written", lambda root: _append(root / "pkg9/gen/d0/gen.py", "# more\n"),
     False),
    ("the rules of the build folders removed", lambda root: (root / ".gitignore").write_text("lib/\n"), True),
    ("a file in the folder they ignored written", lambda root: _append(root / "target/d0/gen.py", "# more\n"), False),
    ("a file in the other folder they ignored written",
     lambda root: _append(root / "out/debug/d0/gen.py", "# more\n"), False),
]


def _state(service: RepoService) -> tuple[dict, list]:
    index = service.index_for_measurement()
    files = {r.path: (r.digest, r.size, r.mtime_ns) for r in index.files if r is not None}
    return files, sorted(index.skipped)


@pytest.mark.parametrize("git", [False, True], ids=["walk", "git"])
def test_a_watched_refresh_equals_a_full_scan_after_every_change(tmp_path: Path, git: bool,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    root = write_repo(tmp_path / "repo", FILES)
    # compact_ratio 1000: no rebuild of this small index after a few edits (a build scans anyway)
    (root / "repomem.toml").write_text("[scan]\nmax_file_bytes = 2000\n\n[index]\ncompact_ratio = 1000.0\n")
    (root / "app/alias.py").symlink_to("util.py")  # indexed through the link: a write to util.py changes it too
    if git:
        _committed(root)
    watched = RepoService.open(root)
    assert isinstance(watched, RepoService)
    watched.ensure_index()
    watched.watch_tree()
    assert watched.watching
    scans: list[int] = []
    full_scan = watched._scan
    monkeypatch.setattr(watched, "_scan", lambda: scans.append(1) or full_scan())
    for what, change, needs_scan in CHANGES:
        scans.clear()
        time.sleep(0.01)  # a new mtime_ns even on coarse clocks
        change(root)
        report = watched.ensure_index(save=False)
        assert not isinstance(report, RepoService) and report.warning == "", what
        assert bool(scans) == needs_scan, (what, report.action, report.reason)
        # What a full scan from the index on disk finds, in a service without a watch.
        fresh = RepoService.open(root)
        assert isinstance(fresh, RepoService)
        fresh.ensure_index(save=False)
        assert _state(watched) == _state(fresh), what
    watched.stop_watching()
    assert not watched.watching


def test_an_ignore_file_that_is_a_link_is_not_read_as_git_does_not(tmp_path: Path) -> None:
    """A .gitignore that is a symbolic link (to a dotfiles folder) is not read: git (since 2.32)
    does not follow one in a work tree, and the walk answers as git would. Its rules do not apply,
    and an edit of its target, outside the tree, changes nothing: the watched index stays a fresh
    one's."""
    root = write_repo(tmp_path / "repo", {k: v for k, v in FILES.items() if k != ".gitignore"})
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "gitignore").write_text("ignored/\n")
    (root / ".gitignore").symlink_to(dotfiles / "gitignore")
    watched = RepoService.open(root)
    assert isinstance(watched, RepoService)
    watched.ensure_index()
    assert watched.watch_tree() is False and watched.watching
    assert "ignored/skip.py" in _state(watched)[0]
    _append(dotfiles / "gitignore", "lib/\n")
    report = watched.ensure_index(save=False)
    assert report.removed == 0 and "lib/deep/mod.py" in _state(watched)[0], report
    fresh = RepoService.open(root)
    assert isinstance(fresh, RepoService)
    fresh.ensure_index(save=False)
    assert _state(watched) == _state(fresh)
    watched.stop_watching()


def test_the_index_folder_inside_the_tree_is_not_watched(tmp_path: Path) -> None:
    """Saving the index writes files in the tree's own index folder: no event of it asks for a scan."""
    root = write_repo(tmp_path / "repo", FILES)
    service = RepoService.open(root)
    assert isinstance(service, RepoService)
    service.ensure_index()
    service.watch_tree()
    _append(root / "app/util.py", "\n\ndef saved():\n    return 1\n")
    service.ensure_index(save=False)
    assert service.save() is None
    assert service._watch is not None
    seen = service._watch.look()
    assert not seen.names and not seen.written


def test_past_the_watch_limit_there_is_no_watch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """inotify's ENOSPC (fs.inotify.max_user_watches reached): no watch, every refresh scans."""
    import repomem.index.tree_watch as tree_watch

    class FullLibc:
        def __init__(self, real):
            self._real = real

        def inotify_init1(self, flags):
            return self._real.inotify_init1(flags)

        def inotify_add_watch(self, fd, path, mask):
            import ctypes
            import errno

            ctypes.set_errno(errno.ENOSPC)
            return -1

    real = tree_watch._libc()
    if real is None:
        pytest.skip("no inotify on this system")
    monkeypatch.setattr(tree_watch, "_libc", lambda: FullLibc(real))
    root = write_repo(tmp_path / "repo", FILES)
    assert TreeWatch.start(str(root), [str(root)], []) is None
    service = RepoService.open(root)
    assert isinstance(service, RepoService)
    service.ensure_index()
    assert service.watch_tree() is False and not service.watching


def test_what_the_watch_did_not_see_is_found_by_the_next_full_scan_in_time(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A change inotify cannot report (here: its events drained unread, as a write through a mapping
    or a remote file system leaves none) is found once FULL_SCAN_EVERY_S has passed."""
    import repomem.service as service_module

    root = write_repo(tmp_path / "repo", FILES)
    (root / "repomem.toml").write_text("[index]\ncompact_ratio = 1000.0\n")  # updated, not rebuilt
    service = RepoService.open(root)
    assert isinstance(service, RepoService)
    service.ensure_index()
    service.watch_tree()
    _append(root / "app/util.py", "\n\ndef unseen():\n    return 1\n")
    assert service._watch is not None and service._watch.look().written == {"app/util.py"}  # drained
    assert service.ensure_index(save=False).action == "unchanged"  # within the period: trusted
    monkeypatch.setattr(service_module, "FULL_SCAN_EVERY_S", 0.0)
    report = service.ensure_index(save=False)
    assert report.action == "updated" and report.changed == 1
    fresh = RepoService.open(root)
    assert isinstance(fresh, RepoService)
    fresh.ensure_index(save=False)
    assert _state(service) == _state(fresh)


def test_with_editor_buffers_the_watch_indexes_the_disk_and_leaves_the_buffers(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The language server's path (`read_disk_changes` with buffers open): a file written on disk
    is re-read without a scan, a buffer's file written on disk keeps the buffer's text, a new file
    is found by the scan the new name asks for, and a buffer's file deleted on disk stays indexed
    from the buffer until the buffer is dropped. Each step: the index a service with the same buffer
    and no watch builds from a full scan."""
    root, service = _watched(tmp_path)
    buffer = "def main():\n    return buffered_only()\n"
    assert service.set_buffer("app/main.py", buffer) is None
    scans: list[int] = []
    full_scan = service._scan
    monkeypatch.setattr(service, "_scan", lambda: scans.append(1) or full_scan())

    def same_as_a_full_scan(what: str) -> None:
        fresh = RepoService.open(root)
        assert isinstance(fresh, RepoService)
        fresh.ensure_index(save=False)
        if "app/main.py" in service._buffers:
            assert fresh.set_buffer("app/main.py", buffer) is None
        fresh.ensure_index(save=False)
        assert {path: state[0] for path, state in _state(service)[0].items()} == \
            {path: state[0] for path, state in _state(fresh)[0].items()}, what

    time.sleep(0.01)
    _append(root / "app/util.py", "\n\ndef written():\n    return 1\n")
    _append(root / "app/main.py", "\n\ndef on_disk_only():\n    return 1\n")
    assert service.read_disk_changes() == (1, 0) and not scans
    same_as_a_full_scan("files written")
    (root / "app/fresh.py").write_text("def fresh():\n    return 7\n")
    assert service.read_disk_changes() == (1, 0) and scans
    same_as_a_full_scan("a file created")
    (root / "app/main.py").unlink()
    assert service.read_disk_changes() == (0, 0)
    assert service.index_for_measurement().record("app/main.py") is not None  # the buffer's text
    assert service.drop_buffer("app/main.py") is None
    assert service.index_for_measurement().record("app/main.py") is None
    assert service.read_disk_changes() == (0, 0)


def test_a_file_made_unreadable_and_readable_again_is_as_a_full_build_has_it(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """chmod 000 writes nothing and keeps the file's size and time: the watch sees only its
    attributes change, and trusting the stat kept the old text indexed where a full build skips the
    file as unreadable. Readable again, it is indexed again. (Run as root, the permission a user has
    is emulated: root reads any file.)"""
    import repomem.index.scan as scan_module
    from repomem.regular_files import read_regular

    if os.geteuid() == 0:
        def unreadable(path: os.PathLike | str) -> bool:
            return os.stat(path).st_mode & 0o444 == 0

        def read_as_a_user(path, *args, **kwargs):  # noqa: ANN001, ANN202
            if unreadable(path):
                raise PermissionError(13, "Permission denied", str(path))
            return read_regular(path, *args, **kwargs)

        access = os.access
        monkeypatch.setattr(scan_module, "read_regular", read_as_a_user)
        monkeypatch.setattr(os, "access", lambda path, mode, **kw: not (mode & os.R_OK and unreadable(path))
                            and access(path, mode, **kw))
    root, service = _watched(tmp_path)

    def full_build() -> tuple[dict, list]:
        fresh = RepoService.open(root)
        assert isinstance(fresh, RepoService)
        fresh.ensure_index(full=True, save=False)
        return _state(fresh)

    for what, mode in (("made unreadable", 0o000), ("readable again", 0o644)):
        os.chmod(root / "app/util.py", mode)
        service.ensure_index(save=False)
        built = full_build()
        assert ("app/util.py" in built[0]) == bool(mode), what
        assert {p: s[0] for p, s in _state(service)[0].items()} == {p: s[0] for p, s in built[0].items()}, what
        assert _state(service)[1] == built[1], what
    service.stop_watching()


@pytest.mark.parametrize("watch", [True, False], ids=["watched", "unwatched"])
def test_a_client_file_event_for_an_ignored_file_does_not_index_it(tmp_path: Path, watch: bool) -> None:
    """The language server's `workspace/didChangeWatchedFiles` reach `file_changed` for ignored
    files too (a generated _version.py, build output): read from the disk there, they were indexed
    where a full build leaves them out. A new file the scan keeps is still indexed."""
    root = write_repo(tmp_path / "repo", {**FILES, ".gitignore": "ignored/\n*_version.py\n"})
    service = RepoService.open(root)
    assert isinstance(service, RepoService)
    service.ensure_index()
    if watch:
        service.watch_tree()
        assert service.watching
    (root / "app/_version.py").write_text("version = '1.0'\n")
    (root / "ignored/more.py").write_text("def more():\n    return 1\n")
    (root / "app/kept.py").write_text("def kept():\n    return 1\n")
    for path in ("app/_version.py", "ignored/more.py", "app/kept.py"):
        service.file_changed(path)
    fresh = RepoService.open(root)
    assert isinstance(fresh, RepoService)
    fresh.ensure_index(full=True, save=False)
    assert "app/kept.py" in _state(fresh)[0] and "app/_version.py" not in _state(fresh)[0]
    assert {p: s[0] for p, s in _state(service)[0].items()} == {p: s[0] for p, s in _state(fresh)[0].items()}
    assert _state(service)[1] == _state(fresh)[1]
    service.stop_watching()


def test_without_a_watch_many_ignored_files_cost_one_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build writing many ignored files sends a client event for each: without a watch each was a
    full refresh (a scan of the repository per file). A file whose inode is older than the last
    refresh was judged by it; a file written after it is judged again."""
    root = write_repo(tmp_path / "repo", {**FILES, ".gitignore": "ignored/\n"})
    service = RepoService.open(root)
    assert isinstance(service, RepoService)
    service.ensure_index()
    names = [f"ignored/generated_{number}.py" for number in range(20)]
    for name in names:
        (root / name).write_text("def generated():\n    return 1\n")
    time.sleep(0.1)  # older than the refresh below by more than the clock's slack
    refreshes: list[int] = []
    refresh = service._refresh
    monkeypatch.setattr(service, "_refresh", lambda *a, **k: refreshes.append(1) or refresh(*a, **k))
    for name in names:
        failure = service.file_changed(name)
        assert failure is not None and failure.kind == "not-indexed", failure
    assert len(refreshes) == 1
    time.sleep(0.1)
    (root / "app/new_module.py").write_text("def new_module():\n    return 2\n")
    assert service.file_changed("app/new_module.py") is None  # a new file the scan keeps: scanned, indexed
    assert len(refreshes) == 2 and service.index_for_measurement().record("app/new_module.py") is not None


@pytest.mark.parametrize("git", [False, True], ids=["walk", "git"])
def test_folders_never_scanned_are_not_watched(tmp_path: Path, git: bool) -> None:
    """`npm install`, `python -m venv .venv`, a build or a test run writing folders into the tree
    (scan.excluded_dirs: never scanned) made a watch of each of them, walked on the thread that
    answers completions (2,000 folders of node_modules: 4,000 watches, 0.6 s before the next
    completion; a real one holds tens of thousands). They are not watched, neither when listed at
    the start nor when made later, and what is written below them asks for nothing. With git, as
    such folders are (ignored): git would list the files of one it does not ignore as skipped, which
    the next full scan reports (module docstring)."""
    files = dict(FILES)
    if git:
        files[".gitignore"] += "node_modules/\n.venv/\nbuild/\n*.egg-info/\n"
    root = write_repo(tmp_path / "repo", files)
    (root / "web/node_modules/left/lib").mkdir(parents=True)  # there before the watch
    (root / "web/node_modules/left/lib/index.py").write_text("def left():\n    return 1\n")
    if git:
        _committed(root)
    service = _indexed_and_watched(root)
    watched = service._watch.folders
    assert not any("node_modules" in folder for folder in service._watch._folders)
    for generated in ("node_modules/pkg", ".venv/lib/site-packages/pkg", "build/lib/pkg", "app/x.egg-info/sub"):
        for number in range(20):
            (root / generated / f"d{number}").mkdir(parents=True)
    seen = service._watch.look()
    assert seen.names != git  # new folders in the tree: one scan says what they hold (with git, ignored too)
    assert service._watch.folders == watched
    report = service.ensure_index(save=False)
    assert report.changed == 0 and report.removed == 0, report
    for generated in ("node_modules/pkg/d3", ".venv/lib/site-packages/pkg/d7", "build/lib/pkg/d1",
                      "web/node_modules/left/lib"):
        (root / generated / "more.py").write_text("def more():\n    return 2\n")
    seen = service._watch.look()
    assert not seen.names and not seen.written and not seen.entries, seen
    fresh = RepoService.open(root)
    assert isinstance(fresh, RepoService)
    fresh.ensure_index(save=False)
    assert _state(service) == _state(fresh)
    service.stop_watching()
    if git:  # one git does not ignore: git lists it (its files reported as skipped), the watch does not
        (root / ".gitignore").write_text("ignored/\n")
        service.ensure_index()
        service.watch_tree()
        assert service._watch is not None
        assert not any(part in folder for folder in service._watch._folders
                       for part in ("node_modules", ".venv", "build", "egg-info")), service._watch._folders
        service.stop_watching()


@pytest.mark.parametrize("git", [False, True], ids=["walk", "git"])
def test_folders_the_ignore_rules_leave_out_are_not_watched(tmp_path: Path, git: bool) -> None:
    """A folder the .gitignore files leave out whole, made while the watch runs (a Rust `target/`, a
    Next.js `.next/`, a pattern's `dist-custom/`, an anchored `/generated/`): it was walked and each
    of its folders watched, on the thread that answers completions (2,000 folders: 2,000 watches,
    30 to 100 ms before the next completion, a full scan included). Not walked, not watched, no
    scan; where a `!` rule re-includes a folder inside, that one is watched."""
    files = dict(FILES)
    files[".gitignore"] += "target/\n.next/\ndist-*/\n/generated/\nreports/*\n!reports/kept/\n"
    root = write_repo(tmp_path / "repo", files)
    if git:
        _committed(root)
    service = _indexed_and_watched(root)
    watched = service._watch.folders
    for generated in ("target", ".next", "app/dist-custom", "generated"):
        _many_folders(root / generated, 500)
    seen = service._watch.look()
    assert not seen.names and service._watch.folders == watched, (seen, service._watch.folders)
    (root / "lib/generated").mkdir()  # `/generated/` is anchored: not this one
    (root / "reports/kept").mkdir(parents=True)
    (root / "reports/run1").mkdir()
    seen = service._watch.look()
    assert seen.names
    added = {folder for folder in service._watch._folders if folder.startswith(str(root))} - {str(root)}
    assert {str(root / name) for name in ("lib/generated", "reports", "reports/kept")} <= added
    assert str(root / "reports/run1") not in added
    service.ensure_index(save=False)
    for generated in ("target/d3", ".next/d7", "app/dist-custom/d1", "generated/d2", "reports/run1"):
        (root / generated / "more.py").write_text("def more():\n    return 2\n")
    seen = service._watch.look()
    assert not seen.names and not seen.written and not seen.entries, seen
    shutil.rmtree(root / "target")
    assert not service._watch.look().names
    fresh = RepoService.open(root)
    assert isinstance(fresh, RepoService)
    fresh.ensure_index(save=False)
    assert _state(service) == _state(fresh)
    service.stop_watching()


def test_a_folder_git_ignores_with_tracked_files_is_watched_when_made_again(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """git lists the files it tracks in a folder it ignores (added with `git add -f`): that folder
    removed and made again (a build cleaning its output) is judged by what git lists, not by the
    rules alone, and a .gitignore that git may read otherwise than repomem leaves its folders watched."""
    files = {**FILES, ".gitignore": "release/\n", "src/.gitignore": "a**/y/\n",
             "release/keep.py": "def keep():\n    return 1\n", "src/mod.py": "def mod():\n    return 1\n"}
    root = write_repo(tmp_path / "repo", files)
    _committed(root, "release/keep.py")
    shutil.rmtree(root / "release")  # gone before the watch: git lists its file all the same
    service = _indexed_and_watched(root)
    scans: list[int] = []
    full_scan = service._scan
    monkeypatch.setattr(service, "_scan", lambda: scans.append(1) or full_scan())
    for change in (lambda: _new_folder(root / "release", "keep.py", "def keep():\n    return 2\n"),
                   lambda: shutil.rmtree(root / "release"),
                   lambda: _new_folder(root / "release", "keep.py", "def keep():\n    return 3\n"),
                   lambda: _many_folders(root / "src/ab/y", 4)):
        scans.clear()
        time.sleep(0.01)
        change()
        service.ensure_index(save=False)
        assert scans
        fresh = RepoService.open(root)
        assert isinstance(fresh, RepoService)
        fresh.ensure_index(save=False)
        assert _state(service) == _state(fresh)
    # src/ab/y: ignored by src/.gitignore's `a**/y/` as repomem reads it (`a*`), which git may read otherwise.
    assert {str(root / "release"), str(root / "src/ab"), str(root / "src/ab/y")} <= set(service._watch._folders)
    service.stop_watching()
