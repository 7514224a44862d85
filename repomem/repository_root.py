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
    for every later command, silently leaving out the rest of it. None inside a bare repository
    (in_git_folder says so)."""
    here = start if _exists(start, is_dir=True) else start.parent
    folders: tuple[Path, ...] = (here, *here.parents)
    for number, folder in enumerate(folders):
        if any(_exists(folder / marker) for marker in REPOSITORY_MARKERS):
            return folder
        if folder.name != ".git" and _bare_layout(folder):
            # A bare repository (or one inside a work tree, where git too takes it for its own): no
            # work tree of its own, and no folder above it is the repository it serves.
            folders = folders[:number]
            break
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
    root, the home folder unless it is a repository itself (a dotfiles work tree), or git's own
    folder (in_git_folder)."""
    try:
        resolved = folder.resolve()
        home = Path.home().resolve()
    except (OSError, RuntimeError):
        return ""
    if resolved == resolved.parent:
        return "the filesystem's root"
    if resolved == home and not any((home / marker).exists() for marker in REPOSITORY_MARKERS):
        return "your home folder"
    return in_git_folder(resolved)


def _bare_layout(folder: Path) -> bool:
    """Whether `folder` is laid out as git's own folder, by git's test: objects/, refs/ and a HEAD
    that names a branch or a commit (a project's own folders named so are no git folder)."""
    if not (_exists(folder / "HEAD") and _exists(folder / "objects", is_dir=True)
            and _exists(folder / "refs", is_dir=True)):
        return False  # one stat for almost every folder
    try:
        with open(folder / "HEAD", "rb") as head:
            named = head.read(100).strip()
    except OSError:
        return False
    return named.startswith(b"ref: refs/") or (len(named) in (40, 64) and all(c in b"0123456789abcdef" for c in named))


def _git_folder_around(folder: Path) -> tuple[Path, Path | None] | None:
    """git's own folder that `folder` (resolved) is or lies in, and the work tree it serves (None
    for a bare repository); None where it lies in none, as in any folder of a work tree: the
    walk up stops at the first folder holding a repository marker. A `.git` folder is its
    parent's, whatever lies inside it (a submodule's git folder, a linked work tree's)."""
    bare: Path | None = None
    for above in (folder, *folder.parents):
        if above.name == ".git":
            return above, above.parent
        if any(_exists(above / marker) for marker in REPOSITORY_MARKERS):
            break
        if bare is None and _bare_layout(above):
            bare = above
    return None if bare is None else (bare, None)


def in_git_folder(folder: Path) -> str:
    """What `folder` is when git's own folder holds it, said after its name ("PATH is ..."), with
    where to run repomem instead; "" where git's folder does not hold it. `git init --bare` makes
    such a folder, and an index there was written among git's own files."""
    try:
        folder = folder.resolve()
    except (OSError, RuntimeError):
        return ""
    found = _git_folder_around(folder)
    if found is None:
        return ""
    git_dir, work_tree = found
    if work_tree is None:
        what = "a bare git repository" if git_dir == folder else f"inside the bare git repository {git_dir}"
        return f"{what} (git's own folder, with no work tree: run repomem in a clone of it)"
    where = "" if git_dir == folder else "inside "
    return f"{where}git's own folder of the repository {work_tree} (not its files: run repomem in {work_tree})"
