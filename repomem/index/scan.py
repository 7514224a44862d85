"""Repository scan: which files are indexed, and their text.

`git ls-files` inside a git work tree (tracked plus untracked-but-not-ignored files), otherwise a
walk that honours every `.gitignore` on the way. Default excludes, secrets (by name, by content,
and symlinks to them), binaries, huge or minified files, Git LFS pointers, symlinks leaving the root
or entering an excluded folder, and the folders of submodules and nested repositories are skipped,
each with a reason a user can read.
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import heapq
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from stat import S_ISBLK, S_ISCHR, S_ISDIR, S_ISFIFO, S_ISLNK, S_ISREG, S_ISSOCK
from typing import NamedTuple

from repomem.config import ScanConfig
from repomem.index.gitignore import IgnoreRules
from repomem.index.secrets import mask_secrets, secret_file_reason
from repomem.languages.registry import language_of
from repomem.regular_files import read_regular


@dataclass(frozen=True)
class SourceFile:
    path: str  # repository-relative, POSIX separators
    language: str  # tree-sitter grammar name
    text: str  # decoded with replacement of invalid UTF-8
    digest: str  # blake2b-128 of the raw bytes, hex
    size: int  # bytes
    mtime_ns: int
    masked: int = 0  # secrets replaced in `text` (repomem.index.secrets)


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


class Candidate(NamedTuple):
    """A file that passed the name-based filters; its content is not read yet. A tuple: a scan
    makes one per file, 50,000 on a large tree, three times faster than a frozen dataclass."""

    path: str
    language: str
    size: int
    mtime_ns: int


def normalize_newlines(text: str) -> str:
    """CRLF and lone CR become LF: tree-sitter rows, windows and tokens all count "\n" lines."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def content_digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@lru_cache(maxsize=8)
def _secret_pattern(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """File names matching any pattern, whatever their case (`Secrets.py` is `secrets.*`). No
    pattern matches nothing (an empty alternation would match every name)."""
    if not patterns:
        return re.compile(r"(?!)")
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns), re.IGNORECASE)


def is_secret(path: str, config: ScanConfig) -> bool:
    name = path.rsplit("/", 1)[-1]
    return _secret_pattern(config.secret_patterns).match(name) is not None


def link_target_reason(root: Path, path: str, config: ScanConfig) -> str | None:
    """Why the symbolic link at repository-relative `path` must not be read through: it points at a
    secret file or into an excluded folder (`settings_env.py -> .env`, `notes.py -> .git/config`),
    or outside the repository. None for a path that is no link, or a link to an ordinary file."""
    full = root / path
    if not full.is_symlink():
        return None
    target = full.resolve(strict=True)  # OSError (a loop: RuntimeError before Python 3.13) for the caller
    resolved_root = root.resolve()
    if not target.is_relative_to(resolved_root):
        return "symlink points outside the repository"
    relative = target.relative_to(resolved_root).as_posix()
    if is_secret(relative, config):
        return f"symlink to the secret file {relative}"
    excluded = next((part for part in relative.split("/")[:-1] if _excluded_dir(part, config)), None)
    if excluded is not None:
        return f"symlink into excluded folder {excluded}"
    return None


def secret_reason(root: Path, path: str, config: ScanConfig) -> str | None:
    """Why no text of the file at repository-relative `path` may be indexed or sent to a model, by
    its name or, for a symbolic link, its target's (said after the path: "matches ..."); None when
    neither says so. Its content is judged apart (secrets.secret_file_reason)."""
    if is_secret(path, config):
        return "matches a secret file pattern (scan.secret_patterns)"
    try:
        reason = link_target_reason(root, path, config)
    except (OSError, RuntimeError):
        return None  # a broken link or a loop: nothing to read
    return None if reason is None or reason.startswith("symlink points outside") else f"is a {reason}"


def _excluded_dir(name: str, config: ScanConfig) -> bool:
    return name in config.excluded_dirs or name.endswith(config.excluded_dir_suffixes)


def is_text_name(path: str) -> bool:
    """Whether `path` is valid UTF-8: a name read from the disk carries undecodable bytes as
    surrogate escapes (os.fsdecode, `git ls-files` decoded the same way)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable_path(path: str) -> str:
    """`path` as valid UTF-8 text, an undecodable byte shown as \\xNN (for reports and JSON)."""
    try:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file name decodes to (JSON's "\\ud800")
        return path.encode("utf-8", "backslashreplace").decode("utf-8")


NOT_UTF8_NAME = "file name is not valid UTF-8"
NO_GRAMMAR = "no grammar for this file type"  # not reported: most of a tree is such files
# A submodule, or a repository inside this one's folder that git leaves out of it: git lists its
# folder ("sub/"), never its files. Each is a repository of its own, found as such from a file in it.
NESTED_REPOSITORY = "a git submodule or nested repository: its own repository, indexed when you complete inside it"

# A file tracked with Git LFS whose content was not fetched holds its pointer instead: a version
# line naming LFS's spec (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md, pre-release
# pointers named hawser's), then the object's hash and size, in under 1,024 bytes. Indexed, its hash
# was noise in BM25 and a stray file in the code graph; `git lfs pull` makes it the real file, which
# the next scan reads (its size and time moved) and indexes.
LFS_POINTER_MAX_BYTES = 1024
LFS_POINTER_STARTS = (b"version https://git-lfs.github.com/spec/", b"version https://hawser.github.com/spec/")
LFS_POINTER = "a Git LFS pointer: its content was not fetched (`git lfs pull` fetches it)"


def is_lfs_pointer(data: bytes) -> bool:
    """Whether a file's bytes are a Git LFS pointer: the spec's version line first, and the
    object's hash and size among the lines after it (the caller checks the size first)."""
    return data.startswith(LFS_POINTER_STARTS) and b"\noid " in data and b"\nsize " in data


def _folder_reason(folder: str, config: ScanConfig) -> str | None:
    """Why the files of repository-relative `folder` ("" for the top) are skipped by its name or
    an enclosing one's, or None."""
    for part in folder.split("/") if folder else ():
        if _excluded_dir(part, config):
            return f"inside excluded folder {part}"
    return None


def excluded_reason(path: str, config: ScanConfig, folders: dict[str, str | None] | None = None) -> str | None:
    """Name-based reason to skip a repository-relative path, or None to keep it. `folders`: the
    verdicts on the folders met so far (a scan asks about thousands of files in hundreds of folders)."""
    folder = path.rpartition("/")[0]
    if folders is None:
        reason = _folder_reason(folder, config)
    elif folder in folders:
        reason = folders[folder]
    else:
        reason = folders[folder] = _folder_reason(folder, config)
    if reason is not None:
        return reason
    if is_secret(path, config):
        return "secret (never indexed)"
    if language_of(path) is None:
        return NO_GRAMMAR
    # Skipped, not carried: a path goes into the index's JSON manifest, JSON output, prompt
    # headers sent to a model (UTF-8 text) and editors' URIs, and a name that is not text broke
    # every completion that retrieved the file. Such names are rare in source trees; one reason
    # in `index -v` costs less than escaping every one of those paths.
    if not is_text_name(path):
        return NOT_UTF8_NAME
    return None


# git as a reader only: a repository's own config must not make it run a program (core.fsmonitor
# names a command git runs on every status-like call; hooks are not run by these commands anyway).
GIT = ("git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")
# git's answers that hold paths, read as Python reads file names: a folder named in another
# encoding than UTF-8 (`caf\xe9/`) raised UnicodeDecodeError out of every command there.
PATH_TEXT = {"encoding": "utf-8", "errors": "surrogateescape"}
GITLINK = "160000 "  # the mode git's index gives a submodule (a commit of another repository), `ls-files -s`


# git's word for a folder it could not list (`--others` walks the disk): it leaves its files out. A
# warning past git's message buffer (about 4 KB: a path deeper than PATH_MAX) is cut, reason and all.
_GIT_UNLISTED = re.compile(r"^warning: could not open directory '(.*?)(?:': (.*))?$", re.MULTILINE)


def git_files(root: Path, unlisted: list[Skipped] | None = None) -> list[str] | None:
    """Paths from git (relative to `root`), or None when `root` is not in a git work tree, or is a
    folder git ignores (indexed on its own, by the walk, as a user who names it asks). A folder
    below the work tree's top is listed as git sees it: the .gitignore files above it and git's
    exclude files apply (the walk read only those inside it). The folders git could not list go
    to `unlisted` with the reason (see walk_files). A tracked file git keeps out of the work tree
    (skip-worktree: outside a sparse checkout's cone) is listed only where it is on the disk all
    the same."""
    try:
        top = subprocess.run(
            [*GIT, "-C", str(root), "rev-parse", "--show-toplevel"],
            capture_output=True, timeout=30, **PATH_TEXT,
        )
        if top.returncode != 0 or not top.stdout.strip():
            return None
        if Path(top.stdout.strip()).resolve() != root.resolve():
            ignored = subprocess.run([*GIT, "-C", str(root), "check-ignore", "-q", "."],
                                     capture_output=True, timeout=30)
            if ignored.returncode != 1:  # 0: ignored; 128: git could not tell
                return None
        listed = subprocess.run(
            [*GIT, "-C", str(root), "ls-files", "-z", "-t", "-s", "--cached", "--others", "--exclude-standard"],
            capture_output=True, timeout=120, env={**os.environ, "LC_ALL": "C"},  # _GIT_UNLISTED reads its English
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listed.returncode != 0:
        return None
    unlisted = [] if unlisted is None else unlisted
    for folder, reason in _GIT_UNLISTED.findall(listed.stderr.decode("utf-8", errors="surrogateescape")):
        too_long = reason in ("", os.strerror(errno.ENAMETOOLONG))
        unlisted.append(Skipped(printable_path(folder.rstrip("/")) + "/",
                                unreadable_reason(OSError(errno.ENAMETOOLONG if too_long else 0, reason))))
    # "TAG MODE OBJECT STAGE\tNAME" for a tracked file, "? NAME" for an untracked one; S:
    # skip-worktree. A sparse checkout leaves every file outside its cone in git's index and off
    # the disk: each was reported "deleted" at every command (thousands in a monorepo), and lstat'ed
    # at each.
    names = set()
    for entry in listed.stdout.decode("utf-8", errors="surrogateescape").split("\0"):
        if len(entry) <= 2:
            continue
        if entry[0] == "?":
            names.add(entry[2:])  # untracked; a repository nested in this one is its folder, "nested/"
            continue
        mode, _, name = entry[2:].partition("\t")
        if mode.startswith(GITLINK):
            name += "/"  # a submodule: its folder, as git names a nested repository
        if entry[0] != "S" or os.path.lexists(os.path.join(root, name)):
            names.add(name)
    return sorted(names)


def gone_reason(error: OSError) -> str:
    """Why a listed file was not there to index: one git still tracks but that was deleted from the
    disk (or one deleted while the walk listed its folder) is no read error ("unreadable: No such
    file or directory" read as one)."""
    if error.errno == errno.ENOENT:
        return "deleted (listed by git or the walk, not on the disk)"
    return unreadable_reason(error)


def unreadable_reason(error: OSError) -> str:
    """Why a file or folder could not be opened, for a person."""
    if error.errno == errno.ENAMETOOLONG:  # deeper than PATH_MAX, or one name longer than NAME_MAX
        return "path too long to open (longer than the system's PATH_MAX or NAME_MAX)"
    return f"unreadable: {error.strerror or error}"


def _walk(top: str, onerror: Callable[[OSError], None]) -> Iterator[tuple[str, list[str], list[str]]]:
    """os.walk(top, onerror=onerror, followlinks=False), top-down, with a stack instead of recursion:
    Python 3.11's os.walk recurses once per level, so a folder nested about 1,000 deep (a path of
    2,000 characters, well under PATH_MAX) ended every command in a RecursionError."""
    stack = [top]
    while stack:
        directory = stack.pop()
        dir_names: list[str] = []
        file_names: list[str] = []
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    (dir_names if is_dir else file_names).append(entry.name)
        except OSError as error:
            onerror(error)
            continue
        yield directory, dir_names, file_names  # the caller may prune dir_names, as with os.walk
        below = [os.path.join(directory, name) for name in dir_names]
        stack.extend(path for path in reversed(below) if not os.path.islink(path))


def walk_files(root: Path, config: ScanConfig, unlisted: list[Skipped] | None = None,
               visited: list[str] | None = None) -> list[str]:
    """All files under `root` not ignored by .gitignore files; never follows directory symlinks.
    The folders that could not be listed go to `unlisted` with the reason (os.walk drops them
    silently: a folder deeper than PATH_MAX took its files out of the index with no reason given).
    `visited`: gets every folder entered or found unlistable, repository-relative ("" for the top)."""
    found: list[str] = []
    unlisted = [] if unlisted is None else unlisted
    rules = IgnoreRules()
    top = str(root)

    def unlistable(error: OSError) -> None:
        folder = os.path.relpath(error.filename, top).replace(os.sep, "/") if error.filename else "."
        unlisted.append(Skipped(printable_path(folder) + "/", unreadable_reason(error)))
        if visited is not None and folder != ".":  # made readable again, its files count
            visited.append(folder)

    for directory, dir_names, file_names in _walk(top, unlistable):
        relative_dir = os.path.relpath(directory, top).replace(os.sep, "/")
        prefix = "" if relative_dir == "." else relative_dir + "/"
        if visited is not None:
            visited.append(prefix[:-1])
        if ".gitignore" in file_names:
            rules.add_file(Path(directory) / ".gitignore", prefix)
        kept_dirs = []
        for name in sorted(dir_names):
            if _excluded_dir(name, config) or rules.ignored(prefix + name, is_dir=True):
                continue
            kept_dirs.append(name)
        dir_names[:] = kept_dirs
        for name in sorted(file_names):
            if not rules.ignored(prefix + name, is_dir=False):
                found.append(prefix + name)
    return sorted(found)


@dataclass(frozen=True)
class NameListing:
    """The names' part of a scan: what may be indexed, and what was skipped by name alone."""

    kept: list[tuple[str, str]]  # (repository-relative path, language), in path order
    unlisted: list[Skipped]  # folders that could not be listed
    skipped: list[tuple[str, Skipped]]  # (the path as listed, why), in path order
    # Per kept name, its size and modification time (ns) now, as git vouches for them
    # (index/git_stat.py, index/scan_memo.py); -1 where only an lstat can tell; None: all lstat'ed.
    current_stats: tuple[list[int], list[int]] | None = None


def judge_names(names: list[str], config: ScanConfig) -> tuple[list[tuple[str, str]], list[tuple[str, Skipped]]]:
    """Each listed name judged by name alone: (kept with their language, skipped with why)."""
    kept: list[tuple[str, str]] = []
    skipped: list[tuple[str, Skipped]] = []
    folders: dict[str, str | None] = {}
    for name in names:
        reason = excluded_reason(name, config, folders)
        if reason is None:
            language = language_of(name)
            assert language is not None
            kept.append((name, language))
        elif reason != NO_GRAMMAR:
            skipped.append((name, Skipped(printable_path(name), reason)))
        elif name.endswith("/"):  # only git names a folder: a submodule's or a nested repository's
            skipped.append((name, Skipped(printable_path(name), NESTED_REPOSITORY)))
    return kept, skipped


def list_names(root: Path, config: ScanConfig, visited: list[str] | None = None) -> tuple[NameListing, bool]:
    """The names' part of a scan of `root`, and whether git listed them (`visited`: the folders a
    walk entered, when git did not)."""
    unlisted: list[Skipped] = []
    names = git_files(root, unlisted)
    from_git = names is not None
    if names is None:
        names = walk_files(root, config, unlisted, visited)
    kept, skipped = judge_names(names, config)
    return NameListing(kept, unlisted, skipped), from_git


def list_candidates(root: Path, config: ScanConfig, listing: NameListing | None = None,
                    links: list[str] | None = None) -> tuple[list[Candidate], list[Skipped]]:
    """Files that may be indexed, with cheap stat data; nothing is read yet. `listing`: the names'
    part when the caller has it (scan_memo.py), else listed now; `links`, when given, receives the
    candidates that are symbolic links (their stat is their target's)."""
    listing = listing if listing is not None else list_names(root, config)[0]
    later: list[tuple[str, Skipped]] = []  # skipped by what lstat says, merged into the name order
    candidates: list[Candidate] = []
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    largest, lstat, keep = config.max_file_bytes, os.lstat, candidates.append  # the loop runs per file
    unknown = [-1] * len(listing.kept)
    sizes, times = listing.current_stats or (unknown, unknown)
    try:
        for (name, language), size, mtime_ns in zip(listing.kept, sizes, times):
            if size >= 0:  # a regular file, as git's index recorded it and git found it now
                if size <= largest:
                    keep(Candidate(name, language, size, mtime_ns))
                else:
                    later.append((name, Skipped(name, f"larger than {largest} bytes")))
                continue
            try:
                stat = lstat(name, dir_fd=top)  # one call for the common file that is no link
                if S_ISREG(stat.st_mode) and stat.st_size <= largest:
                    keep(Candidate(name, language, stat.st_size, stat.st_mtime_ns))
                    continue
                if S_ISLNK(stat.st_mode):
                    link_reason = link_target_reason(root, name, config)
                    if link_reason is not None:
                        later.append((name, Skipped(name, link_reason)))
                        continue
                    stat = os.stat(name, dir_fd=top)
                    if links is not None and S_ISREG(stat.st_mode) and stat.st_size <= largest:
                        links.append(name)
            except RuntimeError:  # a symlink loop (Python < 3.13 raises RuntimeError, later ones OSError)
                later.append((name, Skipped(name, "symbolic link loop")))
                continue
            except OSError as error:
                loop = error.errno == errno.ELOOP
                later.append((name, Skipped(name, "symbolic link loop" if loop else gone_reason(error))))
                continue
            if not S_ISREG(stat.st_mode):
                later.append((name, Skipped(name, special_file_reason(stat.st_mode))))
                continue
            if stat.st_size > largest:
                later.append((name, Skipped(name, f"larger than {largest} bytes")))
                continue
            keep(Candidate(name, language, stat.st_size, stat.st_mtime_ns))
    finally:
        os.close(top)
    # Both in the order of the listed names, as one pass over them would give.
    in_order = heapq.merge(listing.skipped, later, key=lambda pair: pair[0]) if later else listing.skipped
    return candidates, [*listing.unlisted, *(entry for _, entry in in_order)]


def special_file_reason(mode: int) -> str:
    """Why a listed name that is no regular file is not indexed (only regular files are opened)."""
    kind = ("a named pipe" if S_ISFIFO(mode) else "a socket" if S_ISSOCK(mode)
            else "a device" if S_ISCHR(mode) or S_ISBLK(mode) else "a folder" if S_ISDIR(mode) else "a special file")
    return f"not a regular file ({kind})"


def read_source(root: Path, candidate: Candidate, config: ScanConfig) -> SourceFile | Skipped:
    """Read and check one file; files may vanish or change while we read, that is a Skipped."""
    try:
        data = read_regular(root / candidate.path)
    except OSError as error:
        return Skipped(candidate.path, unreadable_reason(error))
    return source_from_bytes(candidate.path, candidate.language, data, candidate.mtime_ns, config)


def source_from_bytes(
    path: str, language: str, data: bytes, mtime_ns: int, config: ScanConfig
) -> SourceFile | Skipped:
    if len(data) > config.max_file_bytes:
        return Skipped(path, f"larger than {config.max_file_bytes} bytes")
    if b"\0" in data:  # anywhere (memchr over at most max_file_bytes): a late NUL reached prompts
        return Skipped(path, "binary file")
    if len(data) < LFS_POINTER_MAX_BYTES and is_lfs_pointer(data):
        return Skipped(path, LFS_POINTER)
    text = normalize_newlines(data.decode("utf-8", errors="replace"))
    longest = max(map(len, text.split("\n")), default=0)
    if longest > config.max_line_chars:
        return Skipped(path, f"a line is longer than {config.max_line_chars} characters (minified?)")
    reason = secret_file_reason(text, config.secret_min_length, config.secret_min_entropy)
    if reason is not None:
        return Skipped(path, f"secret (never indexed): holds {reason}")
    masked = 0
    if config.mask_secrets:
        text, masked = mask_secrets(text, config.secret_min_length, config.secret_min_entropy)
    return SourceFile(path, language, text, content_digest(data), len(data), mtime_ns, masked)
