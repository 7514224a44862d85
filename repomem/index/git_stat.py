"""What git already knows of the tracked files' sizes and times, so that a scan need not ask the
disk for each.

git's index records, for each tracked file, the size and times its last `git add` or refresh saw,
and `git diff-files` names the tracked files whose stat no longer matches that record, stat'ing
them in C threads (50,000 files in ~0.05 s on two cores, against ~0.3 s for a Python loop of
`lstat`s: docs/measurements.md#nothing-changed). For every other tracked file the size and time
recorded in git's index are the file's own. A scan reads the records once (`index_entries`, kept
in the scan memo while git's index file is unchanged, and only where they equal what an `lstat`
said then: git smudges racy entries and may not have refreshed others) and asks `git diff-files`
each time (`changed_files`): the candidates of one `lstat` a file, without them.

git compares times to the second unless built with USE_NSEC (Debian's git is not), and checks the
bytes of an entry whose second is the index file's own (racy git): a change of bytes is always
reported, but a touch within the recorded second that leaves the bytes alone is not. The scan then
keeps the recorded time for bytes that are the ones indexed, where one `lstat` a file would have
read the file again to find them unchanged.

Only plain entries are trusted: a regular file at stage 0, neither assumed unchanged, skipped in
the work tree nor added with intent (git does not stat those). git's index keeps the low 32 bits
of a size; a file over 4 GiB whose low bits match is past any size limit repomem reads anyway.
"""

from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path

from repomem.index.scan import GIT

# Read-only and exact: compare every stat field git knows, whatever the repository configures.
DIFF_FILES = (*GIT, "-c", "core.checkStat=default", "-c", "core.trustctime=true", "-c", "core.ignoreStat=false",
              "-c", "core.preloadIndex=true", "-c", "core.sparseCheckout=false")
_HEADER = struct.Struct(">4sII")
_ENTRY = struct.Struct(">IIIIIIIIII")  # ctime s, ns; mtime s, ns; dev, ino, mode, uid, gid, size
_ASSUME_VALID, _EXTENDED, _STAGE = 0x8000, 0x4000, 0x3000
_SKIP_WORKTREE, _INTENT_TO_ADD = 0x4000, 0x2000  # in the extended flags
_REGULAR = 0o100000  # the object type bits of a mode: a regular file (644 or 755)


def index_entries(data: bytes, hash_bytes: int = 20) -> dict[str, tuple[int, int]] | None:
    """path -> (size, mtime in ns) of the plain entries of a git index file's bytes (versions 2 to
    4); None for what this reader does not take apart (a split or sparse index, damage).
    `hash_bytes`: 20 for SHA-1 repositories, 32 for SHA-256."""
    if len(data) < _HEADER.size + hash_bytes:
        return None
    signature, version, count = _HEADER.unpack_from(data)
    if signature != b"DIRC" or version not in (2, 3, 4):
        return None
    entries: dict[str, tuple[int, int]] = {}
    position, previous = _HEADER.size, b""
    fixed = _ENTRY.size + hash_bytes + 2
    end = len(data) - hash_bytes
    try:
        for _ in range(count):
            fields = _ENTRY.unpack_from(data, position)
            flags = int.from_bytes(data[position + fixed - 2:position + fixed], "big")
            cursor = position + fixed
            extended = 0
            if flags & _EXTENDED:
                extended = int.from_bytes(data[cursor:cursor + 2], "big")
                cursor += 2
            if version == 4:  # the path: how much of the previous one to drop, then the rest
                byte = data[cursor]
                strip, cursor = byte & 0x7F, cursor + 1
                while byte & 0x80:  # git's offset varint: big-endian, each continuation adds one
                    byte = data[cursor]
                    strip, cursor = ((strip + 1) << 7) | (byte & 0x7F), cursor + 1
                terminator = data.index(b"\0", cursor)
                if strip > len(previous):
                    return None
                path = previous[:len(previous) - strip] + data[cursor:terminator]
                position = terminator + 1
            else:
                terminator = data.index(b"\0", cursor)
                path = data[cursor:terminator]
                position += (terminator - position + 8) // 8 * 8  # NUL-padded to a multiple of 8
            if position > end:
                return None
            previous = path
            mode = fields[6]
            if (mode & 0o170000) == _REGULAR and not flags & (_ASSUME_VALID | _STAGE) \
                    and not extended & (_SKIP_WORKTREE | _INTENT_TO_ADD):
                entries[os.fsdecode(path)] = (fields[9], fields[2] * 1_000_000_000 + fields[3])
        while position + 8 <= end:  # extensions: a split or sparse index holds entries elsewhere
            signature, size = data[position:position + 4], int.from_bytes(data[position + 4:position + 8], "big")
            if signature in (b"link", b"sdir"):
                return None
            position += 8 + size
    except (IndexError, ValueError, struct.error):
        return None
    return entries


def object_hash_bytes(root: Path) -> int | None:
    """20 or 32: the length of the repository's object names (SHA-1 or SHA-256)."""
    try:
        shown = subprocess.run([*GIT, "-C", str(root), "rev-parse", "--show-object-format"],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {"sha1": 20, "sha256": 32}.get(shown.stdout.strip()) if shown.returncode == 0 else None


def asking_changed_files(root: Path) -> subprocess.Popen | None:
    """`git diff-files` started, to run on another core while the caller reads its memo; its
    answer from `changed_files_answer`."""
    try:
        return subprocess.Popen([*DIFF_FILES, "-C", str(root), "diff-files", "--name-only", "-z",
                                 "--ignore-submodules=none", "--no-ext-diff", "--no-textconv"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        return None


def changed_files_answer(asked: subprocess.Popen | None, wanted: bool = True) -> set[str] | None:
    """The tracked files whose stat differs from git's index now (changed, touched, removed,
    replaced); None when git cannot say. `wanted` False: the answer is not needed, git is stopped."""
    if asked is None:
        return None
    if not wanted:
        asked.kill()
        asked.communicate()
        return None
    try:
        output, _ = asked.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        asked.kill()
        asked.communicate()
        return None
    if asked.returncode != 0:
        return None
    return {name for name in output.decode("utf-8", errors="surrogateescape").split("\0") if name}


def changed_files(root: Path) -> set[str] | None:
    """changed_files_answer, asked and waited for."""
    return changed_files_answer(asking_changed_files(root))
