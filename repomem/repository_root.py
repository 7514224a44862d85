"""Which folder is the repository around a path. Standard library only: `repomem model` and
`repomem config` find it without importing the engine (numpy and the index)."""

from __future__ import annotations

from pathlib import Path

REPOSITORY_MARKERS = (".git", "repomem.toml")  # a folder holding one is a repository's root
INDEX_MARKER = ".repomem"  # an index's default folder: a root only where no repository is found


def find_repo_root(start: Path) -> Path | None:
    """The repository around `start`: the nearest folder at or above it holding .git or
    repomem.toml; only where there is none, the nearest holding an index (.repomem). An index
    built in a subfolder (`cd pkg && repomem index`) must not make that subfolder the repository
    for every later command, silently leaving out the rest of it."""
    here = start if _exists(start, is_dir=True) else start.parent
    folders = (here, *here.parents)
    for folder in folders:
        if any(_exists(folder / marker) for marker in REPOSITORY_MARKERS):
            return folder
    for folder in folders:
        # (An index at the filesystem's root or in the home folder, which `repomem index /` wrote
        # before it was refused and an editor's server given the home folder still did, would
        # make every file outside a repository part of it.)
        if _exists(folder / INDEX_MARKER) and not too_wide_to_index(folder):
            return folder
    return None


def _exists(path: Path, is_dir: bool = False) -> bool:
    """Whether `path` is there (a folder, with `is_dir`); False where the system cannot say: a path
    longer than PATH_MAX (a folder that deep raised ENAMETOOLONG, an internal error of every
    command run there), one it may not look into."""
    try:
        return path.is_dir() if is_dir else path.exists()
    except OSError:
        return False


def too_wide_to_index(folder: Path) -> str:
    """What makes `folder` no repository to index whole ("" where nothing does): the filesystem's
    root, or the home folder unless it is a repository itself (a dotfiles work tree)."""
    try:
        resolved = folder.resolve()
        home = Path.home().resolve()
    except (OSError, RuntimeError):
        return ""
    if resolved == resolved.parent:
        return "the filesystem's root"
    if resolved == home and not any((home / marker).exists() for marker in REPOSITORY_MARKERS):
        return "your home folder"
    return ""
