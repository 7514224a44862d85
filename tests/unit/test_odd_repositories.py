"""Repositories of odd shapes a user meets: Git LFS files whose content was not fetched, submodules
and repositories nested in another, and git's own folder (a bare repository, a work tree's .git)
taken for a repository. Each is indexed as what it is, or said to be what it is."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from repomem.config import Config
from repomem.failures import Failure, FailureKind
from repomem.index.scan import LFS_POINTER, NESTED_REPOSITORY
from repomem.index.scan_memo import listing_inputs
from repomem.repository_root import find_repo_root, in_git_folder, too_wide_to_index
from repomem.service import RepoService
from tests.repos import synthetic_files, write_repo

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "protocol.file.allow=always",
       "-c", "init.defaultBranch=main"]
POINTER = (b"version https://git-lfs.github.com/spec/v1\n"
           b"oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n")
FETCHED = "def load_weights(path):\n    return open(path, 'rb').read()\n"


def _git(root: Path, *args: str) -> None:
    subprocess.run([*GIT, *args], cwd=root, check=True, capture_output=True)


def _committed(root: Path, files: dict[str, str]) -> Path:
    write_repo(root, files)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "files")
    return root


def _skipped(service: RepoService) -> dict[str, str]:
    assert service.index is not None
    return dict(service.index.skipped)


# -- Git LFS pointers -----------------------------------------------------------------------------


@pytest.mark.parametrize("resident", [False, True], ids=["a command each time", "a process watching the tree"])
def test_an_lfs_pointer_is_skipped_until_its_content_is_fetched(tmp_path: Path, resident: bool):
    """A file whose LFS content was not fetched holds a pointer: indexed, its hash was noise in BM25
    and a stray file in the graph. It is skipped with its reason, told unchanged without a load,
    and indexed by an update (not a rebuild) once `git lfs pull` wrote the real file; a pointer
    checked out again leaves the index. Only a file under 1,024 bytes is a pointer (LFS's spec)."""
    root = _committed(tmp_path / "repo", synthetic_files(6))
    (root / "model_weights.py").write_bytes(POINTER)
    (root / "lookalike.py").write_bytes(POINTER + b"# " + b"x" * 1024 + b"\n")  # 1,024 bytes or more: a file

    def ensure(**options):
        service = kept if resident else RepoService.open(root)
        return service, service.ensure_index(**options)

    kept = RepoService.open(root)
    service, built = ensure()
    assert built.action == "built"
    assert _skipped(service)["model_weights.py"] == LFS_POINTER
    assert service.index.record("model_weights.py") is None and service.index.record("lookalike.py") is not None
    refused = service.cursor_at(root / "model_weights.py", 1, 1)  # no place for a cursor, as for any skipped file
    assert isinstance(refused, Failure) and refused.kind == FailureKind.NOT_INDEXED and "LFS" in refused.message
    if resident:
        kept.watch_tree()
        if not kept.watching:
            pytest.skip("no inotify here: a resident process scans as a command does")
    if not resident:
        quick = RepoService.open(root)
        assert quick.ensure_index(load=False).action == "unchanged" and quick.index is None

    (root / "model_weights.py").write_text(FETCHED)  # `git lfs pull`
    service, fetched = ensure()
    assert (fetched.action, fetched.changed) == ("updated", 1)
    assert service.index.record("model_weights.py") is not None and "model_weights.py" not in _skipped(service)
    assert not isinstance(service.cursor_at(root / "model_weights.py", 2, 1), Failure)

    (root / "model_weights.py").write_bytes(POINTER)  # the pointer checked out again
    service, again = ensure()
    assert (again.action, again.removed) == ("updated", 1)
    assert _skipped(service)["model_weights.py"] == LFS_POINTER


# -- submodules and nested repositories -----------------------------------------------------------


def _with_submodule(tmp_path: Path) -> Path:
    """A repository with a submodule at `sub` (files `helper.py` and `pkg/deep/inner.py`)."""
    other = _committed(tmp_path / "other", {"helper.py": "def helper_in_sub(x):\n    return x * 2\n",
                                            "pkg/deep/inner.py": "def inner():\n    return 3\n"})
    root = _committed(tmp_path / "super", {"app.py": "def main():\n    return 1\n"})
    _git(root, "submodule", "add", "-q", str(other), "sub")
    _git(root, "commit", "-qm", "submodule")
    return root


def test_a_submodule_is_reported_not_indexed_and_is_its_own_repository(tmp_path: Path):
    """git lists a submodule as one entry (its folder), never its files: they were left out without
    a word. Now its folder is reported, the files stay out (a repository of its own, found as such
    from a file in it), and a scan does not watch the folders inside it."""
    root = _with_submodule(tmp_path)
    service = RepoService.open(root)
    report = service.ensure_index()
    assert ("sub/", NESTED_REPOSITORY) in report.skipped
    assert not [r.path for r in service.index.files if r is not None and r.path.startswith("sub")]
    folders, _ = listing_inputs(root, Config().scan)
    assert str(root / "sub") in folders and not [f for f in folders if f.startswith(str(root / "sub") + "/")]
    quick = RepoService.open(root)
    assert quick.ensure_index(load=False).action == "unchanged" and quick.index is None

    assert find_repo_root(root / "sub" / "helper.py") == root / "sub"
    inner = RepoService.open(root / "sub")
    assert inner.ensure_index().files == 2

    clone = tmp_path / "clone"  # cloned without its submodules: an empty folder in their place
    _git(tmp_path, "clone", "-q", str(root), str(clone))
    assert list((clone / "sub").iterdir()) == []
    assert ("sub/", NESTED_REPOSITORY) in RepoService.open(clone).ensure_index().skipped
    _git(clone, "submodule", "update", "-q", "--init")  # initialised: the same
    assert ("sub/", NESTED_REPOSITORY) in RepoService.open(clone).ensure_index().skipped


def test_a_repository_nested_in_the_work_tree_is_reported(tmp_path: Path):
    """A repository cloned inside another (untracked): git lists its folder alone, named like a
    file or not."""
    root = _committed(tmp_path / "repo", {"app.py": "def main():\n    return 1\n"})
    _committed(root / "vendor" / "chart.js", {"chart.js": "function chart() {\n  return 2;\n}\n"})
    service = RepoService.open(root)
    report = service.ensure_index()
    assert ("vendor/chart.js/", NESTED_REPOSITORY) in report.skipped
    assert service.index.record("vendor/chart.js/chart.js") is None


# -- git's own folder -----------------------------------------------------------------------------


def test_git_own_folders_are_told_from_repositories(tmp_path: Path):
    """A bare repository and a work tree's .git are git's own files: `repomem index` there wrote an
    index among them. They are told apart (as git tells them) from folders that only look alike."""
    bare = tmp_path / "bare.git"
    _git(tmp_path, "init", "-q", "--bare", str(bare))
    assert in_git_folder(bare).startswith("a bare git repository")
    assert in_git_folder(bare / "refs" / "heads").startswith(f"inside the bare git repository {bare}")
    assert too_wide_to_index(bare)  # the language server's refusal of a workspace
    assert find_repo_root(bare / "refs") is None

    work = _with_submodule(tmp_path)
    assert in_git_folder(work / ".git").startswith(f"git's own folder of the repository {work}")
    assert in_git_folder(work / ".git" / "objects").startswith(f"inside git's own folder of the repository {work}")
    assert in_git_folder(work / ".git" / "modules" / "sub" / "refs").startswith("inside git's own folder")
    assert in_git_folder(work) == in_git_folder(work / "sub") == in_git_folder(work / "sub" / "pkg") == ""

    nested = work / "backup.git"  # a bare repository inside a work tree: git takes it for its own
    _git(work, "init", "-q", "--bare", str(nested))
    assert find_repo_root(nested / "refs") is None and in_git_folder(nested / "refs")

    alike = tmp_path / "alike"  # a project's own HEAD, objects/ and refs/: no git folder
    for folder in ("objects", "refs"):
        (alike / folder).mkdir(parents=True)
    (alike / "HEAD").write_text("a note\n")
    assert in_git_folder(alike) == ""
