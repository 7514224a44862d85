"""The index folder: where it lives, whose it is, its lock, and the pointer to the snapshot in use.

    <index dir>/
      REPOMEM-INDEX      marker: the folder is repomem's to write and prune in
      CURRENT            name of the complete snapshot in use (replaced with os.replace)
      snap-<gen>-<tag>/  one snapshot (snapshot_save.py writes it, snapshot_load.py reads it)
      lock               serialises writers (flock)

Nothing here writes through a link: files beside the snapshots are written under a fresh name and
renamed into place (regular_files.replace_private).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from repomem.cache import cache_root
from repomem.config import Config
from repomem.failures import Failure, FailureKind
from repomem.regular_files import is_scratch_of, open_private, read_regular, replace_private

CURRENT = "CURRENT"
MARKER = "REPOMEM-INDEX"  # written into every index folder repomem creates: what it may delete in
GITIGNORE = ".gitignore"
LOCK = "lock"
IGNORE_EVERYTHING = b"*\n"  # the folder's own .gitignore: git leaves all of it out


def _cache_folder(base: Path, root: Path) -> Path:
    key = hashlib.blake2b(str(root.resolve()).encode(), digest_size=8).hexdigest()
    return base / f"{root.resolve().name}-{key}"


def index_dir(root: Path, config: Config) -> Path:
    """Where the repository's index lives: `index.cache_dir` if set; else `.repomem` in the
    repository; else, when the repository cannot be written (a read-only mount or checkout), a
    folder in the user cache keyed by the repository's path (`index_outside_repo` says so)."""
    if config.index.cache_dir:
        return _cache_folder(Path(config.index.cache_dir).expanduser(), root)
    inside = root / config.index.dir_name
    if index_outside_repo(root, config):
        return _cache_folder(cache_root() / "indexes", root)
    return inside


def index_outside_repo(root: Path, config: Config) -> bool:
    """True when the repository is read-only and the index falls back to the user cache."""
    if config.index.cache_dir:
        return False
    inside = root / config.index.dir_name
    target = inside if inside.is_dir() else root
    return not os.access(target, os.W_OK | os.X_OK)


def foreign_folder(directory: Path) -> bool:
    """Whether `directory` is there and is not repomem's to write in: a file, or a folder holding
    things without MARKER (nor an index written before folders carried it). An empty folder may be
    claimed."""
    if directory.is_symlink() or not directory.exists():
        return False
    if not directory.is_dir():
        return True
    try:
        if (directory / MARKER).is_file() or _looks_like_an_old_index(directory):
            return False
        return any(not is_scratch_of(entry.name, MARKER) for entry in directory.iterdir())
    except OSError:
        return True


class IndexFolderRefused(OSError):
    """The index folder is not repomem's to write in (the message says why)."""


def _looks_like_an_old_index(directory: Path) -> bool:
    """An index written before folders carried MARKER: its pointer and its own .gitignore."""
    try:
        # read_regular: never a pipe
        return (directory / CURRENT).is_file() and read_regular(directory / GITIGNORE) == IGNORE_EVERYTHING
    except OSError:
        return False


def check_index_link(directory: Path, root: Path) -> None:
    """Raise IndexFolderRefused where the index folder is a symbolic link leading out of the
    repository, or nowhere: neither written nor read (a repository's link to another project's
    index folder loaded that index, sealed by the same user's key, as this repository's)."""
    if not directory.is_symlink():
        return
    try:
        target = directory.resolve()
    except (RuntimeError, OSError):  # a loop of links (Python 3.11 raises RuntimeError)
        raise IndexFolderRefused(f"the index folder {directory} is a symbolic link that leads nowhere "
                                 "(a loop); remove it or set index.cache_dir in your own config") from None
    if not target.is_relative_to(root.resolve()):
        raise IndexFolderRefused(f"the index folder {directory} is a symbolic link out of the repository "
                                 f"(to {target}); remove it or set index.cache_dir in your own config")


def claim_index_folder(directory: Path, root: Path) -> None:
    """Make sure `directory` is repomem's before anything is written or deleted there.

    A folder named by `index.dir_name` that already holds other things (`dir_name = "tests"`) is
    refused, not filled with snapshots and pruned; a symlinked index folder leading out of the
    repository is refused (a repository must not make repomem write elsewhere); an index folder
    is created owner-only (0700: it holds the code's tokens)."""
    check_index_link(directory, root)
    if (directory / MARKER).is_file():
        return
    if not directory.is_dir():
        _private_folders(directory)
    # Judged and marked under a lock on the folder itself: processes creating a fresh index at
    # once each found the folder another had just made, with the marker's scratch file in it but
    # not the marker yet, and took it for someone else's folder. The first to lock marks it; the
    # others wait for that and then find the marker.
    with _folder_locked(directory):
        if (directory / MARKER).is_file():
            return
        # A claim killed while it wrote the marker (a server stopped as it started) leaves only the
        # marker's scratch file: the folder is repomem's, made by that claim (`foreign_folder`).
        if foreign_folder(directory):
            raise IndexFolderRefused(f"{directory} exists and is not a repomem index; choose another "
                                     "index.dir_name (repomem only writes in folders it created)")
        for entry in directory.iterdir():
            if is_scratch_of(entry.name, MARKER):
                entry.unlink(missing_ok=True)
        # A folder at the marker's name (an old index's folder, damaged) failed every save for good.
        clear_file_path(directory, MARKER)
        replace_private(directory / MARKER, b"repomem index folder: repomem may replace or delete what is in it\n")
        # git ignores the folder from the claim on (the marker first: a folder holding only this
        # file would not be repomem's). The first build scans after the claim and before its
        # save, which wrote this file before: git listed the marker as an untracked file, the
        # build recorded it as skipped, and every later scan, which no longer lists it, differed.
        clear_file_path(directory, GITIGNORE)
        replace_private(directory / GITIGNORE, IGNORE_EVERYTHING)


@contextlib.contextmanager
def _folder_locked(directory: Path) -> Iterator[None]:
    """An exclusive flock on the folder itself (its descriptor): nothing is created in it, so an
    old index or a folder repomem refuses is left as it was."""
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _private_folders(directory: Path) -> None:
    """Make `directory` and each missing folder above it owner-only (0700): `mkdir(parents=True,
    mode=...)` gives the folders above the last the default mode (a cache's `indexes` was 0755)."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)


@contextlib.contextmanager
def writer_lock(directory: Path) -> Iterator[None]:
    """Held while a snapshot is written and made current: one writer at a time per index."""
    directory.mkdir(parents=True, exist_ok=True)
    # open_private removes only an empty folder there: one holding anything failed every save for good.
    clear_file_path(directory, LOCK)
    with os.fdopen(open_private(directory / LOCK, os.O_RDWR), "r+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def fsync_dir(path: Path) -> None:
    """Make the entries created or renamed in folder `path` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- the snapshots in it ----------------------------------------------------------------------


def clear_file_path(directory: Path, name: str = CURRENT) -> None:
    """os.replace cannot put a file over a folder: a folder at `name` where repomem only ever writes a
    file (CURRENT, .gitignore) is moved aside, never deleted, so that the write repairs the index
    (a folder at .gitignore failed every save, and with it every command, for good)."""
    path = directory / name
    if path.is_dir() and not path.is_symlink():
        aside = directory / f"{name}.not-a-file-{time.time_ns()}"
        os.rename(path, aside)


def current_snapshot(directory: Path) -> Path | Failure:
    """The snapshot folder CURRENT names (not checked further), or why there is none."""
    try:
        name = read_regular(directory / CURRENT).decode("utf-8").strip()
    except FileNotFoundError:
        return Failure(FailureKind.NO_INDEX, f"no index in {directory}")
    except (OSError, UnicodeDecodeError) as error:
        return Failure(FailureKind.DAMAGED_INDEX, f"index pointer unreadable: {error}")
    if not name.startswith("snap-") or "/" in name:
        return Failure(FailureKind.DAMAGED_INDEX, "index pointer is damaged")
    return directory / name


def newest_generation(directory: Path) -> int:
    """The highest generation among the snapshot folders' names; -1 when there is none."""
    newest = -1
    for snapshot in directory.glob("snap-*"):
        try:
            newest = max(newest, int(snapshot.name.split("-")[1]))
        except (IndexError, ValueError):
            continue
    return newest


def prune_snapshots(directory: Path, keep: set[str], extra: int) -> None:
    """Remove old snapshots beyond the newest `extra` ones, and leftovers of killed writers."""
    snapshots = sorted((p for p in directory.glob("snap-*") if p.is_dir()), key=lambda p: p.name, reverse=True)
    kept = 0
    for snapshot in snapshots:
        if snapshot.name in keep:
            continue
        if kept < extra:
            kept += 1
            continue
        shutil.rmtree(snapshot, ignore_errors=True)
    for leftover in directory.glob("tmp-*"):
        shutil.rmtree(leftover, ignore_errors=True)
