"""Reading a file that must be a regular file: never blocks on a named pipe, a socket or a device.

Opening a FIFO for reading waits for a writer forever; `Path.read_bytes` on a FIFO in a repository,
a `.gitignore` or a cursor file hung repomem. The file is opened non-blocking and checked with
fstat (the same open file, so a swap between check and read cannot slip a pipe in).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
from typing import BinaryIO


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


def open_regular(path: Path) -> BinaryIO:
    """`path` open for reading a line at a time if it is a regular file; NotRegularFile (an OSError)
    for anything else, checked on the open descriptor, never blocking on a named pipe."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise NotRegularFile(path)
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def open_private(path: Path, flags: int) -> int:
    """A descriptor for writing `path` (with `flags`, e.g. O_WRONLY | O_APPEND), owner-only (0600)
    when created, never through a symbolic link or into a file with other names.

    Everything repomem writes lives in folders a repository can ship (`.repomem/`), and git keeps
    symbolic links: a link named `lock` or `feedback.jsonl` there would make repomem truncate or
    append to whatever it points at, and a hard link (an unpacked archive can hold one) is the same
    file under two names. The file is opened without O_TRUNC and non-blocking (a named pipe planted
    there would wait for a reader forever), checked on the open descriptor (a regular file with one
    name), and only then truncated. Anything else found where repomem writes is removed and a plain
    file created in its place (O_NOFOLLOW | O_EXCL: a link planted again in between fails the call)."""
    flags |= os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(path, (flags & ~os.O_TRUNC) | os.O_NONBLOCK, 0o600)
    except OSError as error:
        if error.errno == errno.EISDIR:
            os.rmdir(path)  # an empty folder in its place goes; one holding anything is reported
            return os.open(path, flags | os.O_EXCL, 0o600)
        if error.errno not in (errno.ELOOP, errno.ENXIO):  # a symbolic link; a pipe without a reader
            raise
    else:
        status = os.fstat(descriptor)
        if stat.S_ISREG(status.st_mode) and status.st_nlink == 1:
            os.set_blocking(descriptor, True)
            if flags & os.O_TRUNC:
                os.ftruncate(descriptor, 0)
            return descriptor
        os.close(descriptor)
    path.unlink()
    return os.open(path, flags | os.O_EXCL, 0o600)


SCRATCH_HEX_DIGITS = 12  # the random part of a scratch file's name (secrets.token_hex(6))


def is_scratch_of(name: str, target: str) -> bool:
    """Whether `name` is a scratch file `replace_private` writes `target` under (.TARGET.<hex>.tmp):
    what a writer killed before its rename leaves beside the target."""
    prefix, suffix = f".{target}.", ".tmp"
    middle = name[len(prefix):-len(suffix)] if name.startswith(prefix) and name.endswith(suffix) else ""
    return len(middle) == SCRATCH_HEX_DIGITS and all(c in "0123456789abcdef" for c in middle)


def replace_private(path: Path, data: bytes) -> None:
    """Make `path` a new owner-only file holding `data`, atomically: written under a fresh name
    (O_EXCL | O_NOFOLLOW) beside it, synced, then renamed over it. A rename replaces a symbolic or
    hard link found at `path` instead of writing through it, and a reader sees the old file or the
    new one, never a torn one."""
    scratch = path.with_name(f".{path.name}.{secrets.token_hex(SCRATCH_HEX_DIGITS // 2)}.tmp")
    descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(scratch, path)
    except BaseException:
        scratch.unlink(missing_ok=True)
        raise


def read_regular_text(path: Path) -> str:
    """UTF-8 text of a regular file, undecodable bytes replaced."""
    return read_regular(path).decode("utf-8", errors="replace")


def drop_torn_tail(path: Path) -> None:
    """A writer killed mid-line leaves a last line without newline: cut it before appending."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as handle:
        cut_torn_tail(handle.fileno())


def cut_torn_tail(descriptor: int) -> None:
    """`drop_torn_tail` on an open descriptor (one from `open_private`, read and write)."""
    size = os.fstat(descriptor).st_size
    if size == 0 or os.pread(descriptor, 1, size - 1) == b"\n":
        return
    data = os.pread(descriptor, size, 0)
    os.ftruncate(descriptor, data.rfind(b"\n") + 1)
