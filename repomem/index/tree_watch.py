"""What changed in a repository since the last look, from Linux's inotify: a resident process
(`repomem daemon`, the language server) then skips the scan when nothing changed and re-reads only
the files written when only files were written.

A scan's answer has two parts (index/scan_memo.py): the names, which change only when a folder's
entries change or a file they are judged by changes (a .gitignore, git's index, exclude and config
files), and each file's size and time, which change when it is written. So the folders the
listing depends on are watched, and so are the folders holding those rule files; each event is
read as:
- a rule file touched in any way, a watched folder changed or gone, a directory event, or the
  kernel's queue overflowing: the names may have changed, and the next look is a full scan (a new
  folder is watched first, so nothing written into it after that is missed);
- a file created, deleted or moved: its path; the service re-reads it where the index holds it and
  it is still there (a save by rename), and judges a name it does not hold as the scan would (an
  editor's swap, lock or backup file, with no grammar, changes no scan's answer); anything else
  asks for a full scan;
- a file written or its attributes changed: that file's path, re-read if the index holds it.
Anything else (git's objects, other files in a rule file's folder) changes no scan's answer.
Folders the scan never enters (scan.excluded_dirs: node_modules, .venv, build, __pycache__, ...)
are not watched, nor anything below them: `npm install` or a new virtual environment in the tree
would otherwise cost a watch per folder, made on the thread that answers completions. (In git mode
a file below one that git does not ignore is reported as skipped, not indexed; a new one is
reported from the next full scan.)
Nor is a folder made later that the tree's .gitignore files leave out whole (a `target/`, `.next/`,
`out/` a build writes): judged as the scan judges it, by the .gitignore files of the folders above
it, deeper ones deciding, `!` included (git never lists anything inside an ignored folder but the
files it tracks there, and a new tracked file comes with a write of git's index, a rule file). It
and what lies below it are neither walked nor watched, and its coming or going asks for no scan.
Where in doubt it is watched: a folder that held listed names at the start (tracked files in an
ignored folder, made again), a .gitignore line git may read otherwise (index/gitignore.py). The
.gitignore of each folder watched is a rule file: a rule changed makes the watch anew, from a scan.

A watch is started before the scan it follows: an event that races the scan is seen at the next
look, at worst as one more read of an unchanged file. Off Linux, or past the user's inotify limits,
there is no watch and every look is a full scan.

Not seen by inotify: a write through a hard link whose other name lies outside the watched
folders, a write through a shared memory mapping, a change made by another machine on a network
file system. The service therefore still scans in full once FULL_SCAN_EVERY_S has passed since
its last full scan, which bounds how long such a change can go unseen.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from repomem.index.gitignore import IgnoreFile, IgnoreRules, read_ignore_file

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

WRITTEN = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE
ENTRIES = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO
GONE = IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED
FOLDER_MASK = WRITTEN | ENTRIES | GONE | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK
EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then len bytes of name)
READ_BYTES = 1 << 16
FULL_SCAN_EVERY_S = 300.0  # seconds: what a watch cannot see is found at the next full scan


@dataclass
class Changes:
    """What a look found: `names` True when only a full scan can say what the repository holds
    now; otherwise `written`, the repository-relative paths of files written since the last look,
    and `entries`, those of files created, deleted or moved (in or out)."""

    names: bool = False
    written: set[str] = field(default_factory=set)
    entries: set[str] = field(default_factory=set)
    # The watch itself must be made anew from what the names depend on now (with the full scan):
    # a rule file changed (an ignore rule removed leaves folders unwatched that now count), the
    # kernel's queue overflowed (folders made meanwhile were never watched), the tree's top or a
    # rule file's folder went away (replaced, made again).
    rewatch: bool = False


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        return libc
    except (OSError, AttributeError):
        return None


class TreeWatch:
    """inotify watches on a repository's folders and the folders of the files its names are judged
    by. `start` answers None where no watch can be had; `look` drains what happened since the
    last look."""

    def __init__(self, libc, fd: int, root: str, excluded: str = "",
                 never_scanned: Callable[[str], bool] | None = None, listed: Iterable[str] = ()):
        self._libc = libc
        self._fd = fd
        self._root = root.rstrip("/") or "/"
        self._excluded = excluded.rstrip("/")  # a folder in the tree left unwatched (the index's own)
        # Whether a folder of this name is never scanned, wherever it is (scan.excluded_dirs):
        # nothing below it changes a scan's answer, so it is not watched either.
        self._never_scanned = never_scanned or (lambda name: False)
        self._tree: dict[int, str] = {}  # watch -> a folder of the tree (absolute)
        self._rules: dict[int, set[str]] = {}  # watch -> names in it that rule the listing
        self._folders: dict[str, int] = {}  # absolute folder -> watch
        # The folders listed at the start, watched or not (absent): never judged ignored whole.
        self._listed: set[str] = set(listed)
        self._ignore_files: dict[str, IgnoreFile | None] = {}  # absolute folder -> its .gitignore, as read
        self.failed = ""  # why the watch stopped being complete (then every look says `names`)

    @classmethod
    def start(cls, root: str, folders: list[str], rule_files: list[str], excluded: str = "",
              never_scanned: Callable[[str], bool] | None = None) -> TreeWatch | None:
        """Watch `folders` (absolute; the tree's) and, for each of `rule_files` (absolute), the
        nearest existing folder above it, and above the file a symbolic link among them leads to
        (a .gitignore or an excludes file kept in a dotfiles folder is edited there); None where
        inotify is not available or a limit is met. `excluded`: a folder of the tree never watched,
        nor any below it, when listed or made later (the index's own: its writes change no scan).
        `never_scanned(name)`: whether folders of that name are never scanned (scan.excluded_dirs:
        node_modules, .venv, build): they and all below them are not watched either, when listed
        or made later. A `npm install` or a `python -m venv .venv` inside the tree made a watch
        for each of its thousands of folders, walked on the thread that answers completions; so
        did a folder made later that the .gitignore files leave out (module docstring), unless
        `folders` holds it (folders of files listed there, absent now: not watched, never judged
        ignored)."""
        libc = _libc()
        if libc is None:
            return None
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            return None
        watch = cls(libc, fd, root, excluded, never_scanned, listed=folders)
        for folder in folders:
            if not watch._excluded_folder(folder) and not watch._below_never_scanned(folder):
                watch._add(folder, tree=True)
        for path in rule_files:
            if os.path.basename(path) == ".gitignore" and watch._below_never_scanned(os.path.dirname(path)):
                continue  # rules for names below a folder never scanned
            for ruled in dict.fromkeys((path, os.path.realpath(path))):
                folder, name = os.path.split(ruled)
                while folder and not os.path.isdir(folder) and folder != os.path.dirname(folder):
                    folder, name = os.path.split(folder)
                watch._add(folder, tree=False, rule=name)
        if watch.failed:
            watch.close()
            return None
        return watch

    def _add(self, folder: str, tree: bool, rule: str | None = None) -> None:
        wd = self._folders.get(folder)
        if wd is None:
            wd = self._libc.inotify_add_watch(self._fd, os.fsencode(folder), FOLDER_MASK)
            if wd < 0:
                error = ctypes.get_errno()
                if error in (errno.ENOENT, errno.ENOTDIR):
                    return  # gone since it was listed: the scan after the watch sees it gone
                self.failed = f"inotify: {os.strerror(error)} (fs.inotify.max_user_watches?)"
                return
            self._folders[folder] = wd
        if tree:
            self._tree[wd] = folder
        if rule is not None:
            self._rules.setdefault(wd, set()).add(rule)

    def _excluded_folder(self, folder: str) -> bool:
        return bool(self._excluded) and (folder == self._excluded or folder.startswith(self._excluded + "/"))

    def _below_never_scanned(self, folder: str) -> bool:
        """Whether `folder` (absolute) is, or lies below, a folder of the tree never scanned."""
        if not folder.startswith(self._root + "/"):
            return False
        return any(self._never_scanned(part) for part in folder[len(self._root) + 1:].split("/"))

    def _ignore_file(self, folder: str) -> IgnoreFile | None:
        """The rules of `folder`'s .gitignore (a folder of the tree, absolute), read once: each
        event naming a .gitignore forgets it (_read_events)."""
        if folder not in self._ignore_files:
            prefix = folder[len(self._root) + 1:] + "/" if folder != self._root else ""
            self._ignore_files[folder] = read_ignore_file(Path(folder, ".gitignore"), prefix)
        return self._ignore_files[folder]

    def _rules_above(self, folder: str) -> IgnoreRules | None:
        """The .gitignore files that judge `folder` (absolute), from the tree's top down; None for
        a folder outside the tree."""
        if not folder.startswith(self._root + "/"):
            return None
        rules = IgnoreRules()
        above = self._root
        for name in folder[len(self._root) + 1:].split("/")[:-1]:
            rules.add(self._ignore_file(above))
            above += "/" + name
        rules.add(self._ignore_file(above))
        return rules

    def _ignored_whole(self, folder: str, rules: IgnoreRules | None) -> bool:
        """Whether the scan lists nothing in `folder` (absolute) by the ignore rules (`rules`:
        those above it), for sure."""
        return rules is not None and folder not in self._listed and \
            rules.surely_ignored(folder[len(self._root) + 1:], is_dir=True)

    def _watch_new_tree(self, folder: str) -> bool:
        """A folder created or moved into the tree, and every folder below it, but those the
        .gitignore files leave out whole (as the scan's walk judges them, each folder's own
        .gitignore read before its folders are); False, with nothing watched, for `folder` left
        out so."""
        rules = self._rules_above(folder)
        if self._ignored_whole(folder, rules):
            return False
        pending = [folder]
        while pending:
            current = pending.pop()
            if self._excluded_folder(current) or self._never_scanned(os.path.basename(current)):
                continue
            self._add(current, tree=True, rule=".gitignore")
            try:
                with os.scandir(current) as entries:
                    found = [entry for entry in entries if entry.is_dir(follow_symlinks=False)
                             or entry.name == ".gitignore"]
            except OSError:
                continue
            if rules is not None:  # made anew: not the .gitignore that may have been here
                ruled = any(entry.name == ".gitignore" for entry in found)
                self._ignore_files[current] = read_ignore_file(Path(current, ".gitignore"),
                                                               current[len(self._root) + 1:] + "/") if ruled else None
                rules.add(self._ignore_files[current])
            pending.extend(entry.path for entry in found if entry.name not in (".git", ".gitignore")
                           and not self._never_scanned(entry.name) and not self._ignored_whole(entry.path, rules))
        return True

    def look(self) -> Changes:
        """What happened since the last look (or the start)."""
        changes = Changes()
        while True:
            try:
                data = os.read(self._fd, READ_BYTES)
            except BlockingIOError:
                break
            except OSError as error:
                self.failed = f"inotify: {error.strerror}"
                break
            if not data:
                break
            self._read_events(data, changes)
        if self.failed:
            changes.names = changes.rewatch = True
        return changes

    def _read_events(self, data: bytes, changes: Changes) -> None:
        offset = 0
        while offset + EVENT.size <= len(data):
            wd, mask, _, length = EVENT.unpack_from(data, offset)
            offset += EVENT.size
            name = os.fsdecode(data[offset:offset + length].split(b"\0", 1)[0])
            offset += length
            if mask & IN_Q_OVERFLOW:
                changes.names = changes.rewatch = True
                continue
            if name and name in self._rules.get(wd, ()):
                changes.names = changes.rewatch = True
            folder = self._tree.get(wd)
            if mask & GONE and (wd in self._rules or folder == self._root):
                changes.names = changes.rewatch = True
            if folder is None:
                continue  # a rule file's folder: only the rule files' own names count (above)
            if mask & GONE or not name:
                changes.names = True  # the folder itself changed or went away
                if mask & IN_IGNORED:
                    self._tree.pop(wd, None)
                    self._folders = {path: w for path, w in self._folders.items() if w != wd}
                continue
            if name == ".gitignore":
                self._ignore_files.pop(folder, None)
            if mask & IN_ISDIR:
                path = os.path.join(folder, name)
                if name == ".git":
                    changes.names = True
                elif mask & (IN_MOVED_FROM | IN_DELETE):
                    # One the ignore rules leave out whole, never watched: the scan listed nothing in it.
                    if path in self._folders or not self._ignored_whole(path, self._rules_above(path)):
                        changes.names = True
                    self._forget_tree(path)
                elif mask & (IN_CREATE | IN_MOVED_TO):
                    changes.names |= self._watch_new_tree(path)
                else:
                    changes.names = True
                continue
            if folder == self._root:
                path = name
            elif folder.startswith(self._root + "/"):
                path = folder[len(self._root) + 1:] + "/" + name
            else:
                changes.names = True  # not under the root (a tree above it?): only a scan can tell
                continue
            if mask & ENTRIES:
                changes.entries.add(path)
            elif mask & WRITTEN:
                changes.written.add(path)

    def _forget_tree(self, folder: str) -> None:
        """A folder moved or deleted out of its place, and every folder below it: their watches go
        (one moved elsewhere would report its events under its old name) and their names are free
        for a folder made there again, which is then watched anew."""
        below = folder + "/"
        for path in [path for path in self._ignore_files if path == folder or path.startswith(below)]:
            del self._ignore_files[path]
        for path in [path for path in self._folders if path == folder or path.startswith(below)]:
            wd = self._folders.pop(path)
            if self._tree.pop(wd, None) is not None and wd not in self._rules:
                self._libc.inotify_rm_watch(self._fd, wd)  # its IN_IGNORED then names no folder

    def fileno(self) -> int:
        """The inotify descriptor (-1 once closed): readable when `look` has something to read."""
        return self._fd

    @property
    def folders(self) -> int:
        return len(self._tree)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
