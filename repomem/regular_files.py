"""Reading a file that must be a regular file: never blocks on a named pipe, a socket or a device.

Opening a FIFO for reading waits for a writer forever; `Path.read_bytes` on a FIFO in a repository,
a `.gitignore` or a cursor file hung repomem. The file is opened non-blocking and checked with
fstat (the same open file, so a swap between check and read cannot slip a pipe in).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class NotRegularFile(OSError):
    """The path names a pipe, socket, device or folder: nothing to read."""

    def __init__(self, path: Path):
        super().__init__(errno.EINVAL, "not a regular file", str(path))


def read_regular(path: Path) -> bytes:
    """The bytes of a regular file; NotRegularFile (an OSError) for anything else."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise NotRegularFile(path)
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(descriptor)


def open_private(path: Path, flags: int) -> int:
    """A descriptor for writing `path` (with `flags`, e.g. O_WRONLY | O_TRUNC), owner-only (0600)
    when created, never through a symbolic link.

    Everything repomem writes lives in folders a repository can ship (`.repomem/`), and git keeps
    symbolic links: a link named `lock` or `feedback.jsonl` there would make repomem truncate or
    append to whatever it points at. A link found where repomem writes is removed and a plain file
    created in its place (O_NOFOLLOW | O_EXCL: a link planted again in between fails the call)."""
    flags |= os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags, 0o600)
    except OSError as error:
        if error.errno != errno.ELOOP:
            raise
    path.unlink()
    return os.open(path, flags | os.O_EXCL, 0o600)


def read_regular_text(path: Path) -> str:
    """UTF-8 text of a regular file, undecodable bytes replaced."""
    return read_regular(path).decode("utf-8", errors="replace")


def drop_torn_tail(path: Path) -> None:
    """A writer killed mid-line leaves a last line without newline: cut it before appending."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) == b"\n":
            return
        data = handle.seek(0) or handle.read()
        handle.truncate(data.rfind(b"\n") + 1)
