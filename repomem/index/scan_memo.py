"""What a scan learns from names alone, kept between runs while the tree's folders stay as they were.

A scan has two parts. The names: `git ls-files` (or a walk honouring .gitignore files), then each
name judged by name (excluded folder, secret name, no grammar); on 50,000 files that is two git
processes and 50,000 verdicts, most of the time a command spends learning that nothing changed
(docs/measurements.md#nothing-changed). The files: one lstat each, for size and time.

The names change only when a folder's entries change, an ignore rule changes, or git's own index
does; a folder's entries change only with its modification time (a file's edit leaves its folder's
time alone). So the names' part is kept in `scan-memo.json` beside the index, with the identity and
times of everything that decides it: every folder the listing depends on (all but .git and folders
git ignores whole; in a tree without git, the folders the walk entered), every ignore file met,
git's index, git's exclude and config files, the settings that judge names and the code that judges
them. When each of those is as recorded, the kept names are the answer and only the lstat pass runs;
anything else lists and judges again and records anew. In a git work tree the memo also keeps the
size and time git's index records for each kept file (index/git_stat.py; git's index is one of
the files watched): with the memo valid, `git diff-files` names the tracked files whose stat moved,
and only those and the untracked ones are lstat'ed. A folder changed in the last RACY_S seconds
is not recorded (its time may not move again within the same clock tick); the next scan records it.

The memo is sealed with the index's key (provenance.py): a forged memo could hide files from the
index. A damaged, foreign or unreadable memo is ignored and replaced. Not watched: git config files
pulled in by `include.path` (their changes reach the listing at the next change of a folder or of
the files above).
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import time
from array import array
from dataclasses import dataclass, replace
from pathlib import Path
from stat import S_ISLNK, S_ISREG

from repomem.config import ScanConfig
from repomem.index.builder_version import builder_digest
from repomem.index.git_stat import asking_changed_files, changed_files_answer, index_entries, object_hash_bytes
from repomem.index.index_folder import MARKER
from repomem.index.provenance import sealed_json, unsealed_json
from repomem.index.scan import GIT, PATH_TEXT, NameListing, Skipped, list_names
from repomem.regular_files import read_regular, replace_private

MEMO = "scan-memo.json"
RACY_S = 2.0  # seconds: a folder younger than this may change again without its time moving
MEMO_VERSION = 2
# Below this many kept names an lstat each (~5 us) costs less than starting git (~5 ms of this
# process's time, docs/measurements.md#nothing-changed).
GIT_STAT_MIN_FILES = 1000


def _identity(path: str) -> list[int] | None:
    """What tells a folder or file apart from its earlier self: inode, size and times (ns). For a
    symbolic link, its target's too: git reads a global excludes file or config through a link
    (dotfiles kept in one folder, linked from ~/.config/git/ignore), and an edit of the target
    leaves the link itself as it was, so the memo kept the old listing."""
    try:
        stat = os.lstat(path)
    except OSError:
        return None
    identity = [stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]
    if not S_ISLNK(stat.st_mode):
        return identity
    try:
        target = os.stat(path)
    except OSError:
        return [*identity, -1]  # a broken link: told apart from the link once it leads somewhere
    # The target's first: its modification time is the one the racy check (listed_names) reads.
    return [target.st_ino, target.st_size, target.st_mtime_ns, target.st_ctime_ns, target.st_dev, *identity]


def git_environment() -> list[tuple[str, str]]:
    """The environment git reads its rules from (which files a listing holds), sorted."""
    return sorted((name, value) for name, value in os.environ.items()
                  if name.startswith("GIT_") or name in ("HOME", "XDG_CONFIG_HOME"))


def _settings_key(config: ScanConfig, root: Path) -> str:
    """The settings and code that judge names, the environment git reads its rules from, and the
    tree's own path: the folders watched are named by absolute path, so a copy of the tree with
    its index folder inside (`cp -a`, a restored backup) would otherwise watch the original's
    folders and never see a file added to the copy."""
    text = repr((MEMO_VERSION, builder_digest(), config, git_environment(), os.path.abspath(root)))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _git_inputs(root: Path) -> list[str] | None:
    """The files git's listing reads besides the folders: its index, exclude and config files, the
    global excludes file; None when git cannot say (then nothing is recorded)."""
    try:
        where = subprocess.run([*GIT, "-C", str(root), "rev-parse", "--path-format=absolute", "--git-dir",
                                "--git-common-dir", "--show-toplevel"], capture_output=True, timeout=30, **PATH_TEXT)
        excludes = subprocess.run([*GIT, "-C", str(root), "config", "--path", "--get", "core.excludesFile"],
                                  capture_output=True, timeout=30, **PATH_TEXT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = where.stdout.splitlines()
    if where.returncode != 0 or len(lines) != 3:
        return None
    git_dir, common_dir, top = lines
    home = os.environ.get("HOME", "")
    config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    inputs = [os.environ.get("GIT_INDEX_FILE") or os.path.join(git_dir, "index"),
              os.path.join(common_dir, "info", "exclude"), os.path.join(common_dir, "config"),
              os.path.join(git_dir, "config.worktree"), os.path.join(home, ".gitconfig"),
              os.path.join(config_home, "git", "config"), os.path.join(config_home, "git", "ignore"),
              "/etc/gitconfig", str(root / ".git")]
    if excludes.returncode == 0 and excludes.stdout.strip():
        inputs.append(excludes.stdout.strip())
    # A folder below the work tree's top (git_files): the .gitignore files above it judge its names too.
    inside = Path(os.path.realpath(root))
    above = [folder for folder in inside.parents if folder == Path(top) or Path(top) in folder.parents]
    inputs.extend(str(folder / ".gitignore") for folder in above)
    return inputs


def _git_ignored_folders(root: Path) -> set[str] | None:
    """The folders git ignores whole (repository-relative, no trailing slash)."""
    try:
        listed = subprocess.run([*GIT, "-C", str(root), "ls-files", "-z", "--others", "--ignored",
                                 "--exclude-standard", "--directory"], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if listed.returncode != 0:
        return None
    names = listed.stdout.decode("utf-8", errors="surrogateescape").split("\0")
    return {name[:-1] for name in names if name.endswith("/")}


def _folders_for_git(root: Path, nested: set[str]) -> list[str] | None:
    """Every folder under `root` git's listing may read: all but .git, folders ignored whole, and
    what lies inside the folders of `nested` repositories (submodules: git lists the folder and
    never reads into it; one with thousands of folders made every scan check each). Repository-
    relative, "" for the top."""
    ignored = _git_ignored_folders(root)
    if ignored is None:
        return None
    found: list[str] = []
    pending = [""]
    top = str(root)
    while pending:
        folder = pending.pop()
        found.append(folder)
        try:
            with os.scandir(os.path.join(top, folder) if folder else top) as entries:
                for entry in entries:
                    if not entry.is_dir(follow_symlinks=False):
                        continue
                    relative = f"{folder}/{entry.name}" if folder else entry.name
                    if relative in nested:
                        found.append(relative)  # its entries alone: a nested repository's .git removed
                    elif relative != ".git" and relative not in ignored:
                        pending.append(relative)
        except OSError:
            continue  # recorded as it is (maybe absent); git says what it could not list
    return found


@dataclass
class _Recorded:
    listing: NameListing
    watched: dict[str, list[int] | None]  # absolute path -> identity when listed
    # Per kept name, size and mtime (ns) as git's index recorded them, -1 for a file it does not
    # vouch for (untracked, not a plain entry); None outside git.
    git_stats: tuple[list[int], list[int]] | None = None


def _packed(values: list[int], kind: str = "q") -> str:
    """A column of integers as base64 of machine words (`kind`: array's type code): a 50,000-long
    JSON list of numbers parsed in ~10 ms, this in ~1."""
    return base64.b64encode(array(kind, values).tobytes()).decode("ascii")


def _unpacked(text: str, count: int, kind: str = "q") -> list[int]:
    values = array(kind)
    values.frombytes(base64.b64decode(text, validate=True))
    if len(values) != count:
        raise ValueError("a column of another length")
    return values.tolist()


def _read(memo: Path, key: str) -> _Recorded | None:
    try:
        body = unsealed_json(read_regular(memo))
    except (OSError, ValueError):
        return None
    try:
        if not isinstance(body, dict) or body.get("key") != key:
            return None
        names = body["kept"].split("\0") if body["kept"] else []
        languages = body["languages"]
        codes = [languages[code] for code in _unpacked(body["language_of"], len(names), "H")]
        if len(codes) != len(names):
            return None
        unlisted = [Skipped(path, reason) for path, reason in body["unlisted"]]
        skipped = [(path, Skipped(shown, reason)) for path, shown, reason in body["skipped"]]
        watched = {path: identity for path, identity in body["watched"]}
        stats = body.get("git_stats")
        git_stats = (_unpacked(stats[0], len(names)), _unpacked(stats[1], len(names))) if stats else None
        return _Recorded(NameListing(list(zip(names, codes)), unlisted, skipped), watched, git_stats)
    except (KeyError, TypeError, ValueError, IndexError):
        return None


def _still_true(recorded: _Recorded) -> bool:
    return all(_identity(path) == identity for path, identity in recorded.watched.items())


def _write(memo: Path, key: str, listing: NameListing, watched: dict[str, list[int] | None],
           git_stats: tuple[list[int], list[int]] | None) -> None:
    languages = sorted({language for _, language in listing.kept})
    code = {language: number for number, language in enumerate(languages)}
    body = {
        "key": key,
        "kept": "\0".join(path for path, _ in listing.kept),  # no file name holds a NUL
        "languages": languages,
        "language_of": _packed([code[language] for _, language in listing.kept], "H"),
        "unlisted": [[skipped.path, skipped.reason] for skipped in listing.unlisted],
        "skipped": [[path, skipped.path, skipped.reason] for path, skipped in listing.skipped],
        "watched": [[path, identity] for path, identity in watched.items()],
        "git_stats": [_packed(git_stats[0]), _packed(git_stats[1])] if git_stats else None,
    }
    try:
        replace_private(memo, sealed_json(body))
    except OSError:
        pass  # a memo is a shortcut: the next scan lists again


def _listing_and_inputs(root: Path, config: ScanConfig
                        ) -> tuple[NameListing, tuple[list[str], list[str]] | None, str | None]:
    """The names' part of a scan; what it depended on (None: cannot be told), as the folders it
    read (absolute) and the files that judged names (git's index, exclude and config files, each
    folder's .gitignore); git's index file (None outside git)."""
    visited: list[str] = []
    listing, from_git = list_names(root, config, visited)
    if from_git:
        nested = {path[:-1] for path, _ in listing.skipped if path.endswith("/")}  # scan.NESTED_REPOSITORY
        inputs, folders = _git_inputs(root), _folders_for_git(root, nested)
        if inputs is None or folders is None:
            return listing, None, None
    else:
        inputs, folders = [], visited
    paths = [str(root / folder) if folder else str(root) for folder in folders]
    return listing, (paths, [*inputs, *(os.path.join(path, ".gitignore") for path in paths)]), \
        inputs[0] if from_git else None


def _list_names(root: Path, config: ScanConfig) -> tuple[NameListing, list[str] | None, str | None]:
    """The names' part of a scan, the paths it depended on (None: cannot be told, record nothing)
    and git's index file (None outside git)."""
    listing, depended, index = _listing_and_inputs(root, config)
    if depended is None:
        return listing, None, None
    folders, rule_files = depended
    return listing, [*rule_files, *folders], index


def listing_inputs(root: Path, config: ScanConfig) -> tuple[list[str], list[str]] | None:
    """What a scan's names depend on, for a watch (index/tree_watch.py): the folders read and the
    files that judge names, absolute; None when it cannot be told. The folders also hold those of
    the names listed that are not on the disk (files git tracks in a folder it ignores, deleted
    with their folder): made again, git lists them, so the watch must not judge them ignored."""
    listing, depended, _ = _listing_and_inputs(root, config)
    if depended is None:
        return None
    folders, rule_files = depended
    known = set(folders)
    top = str(root)
    for name in [*(path for path, _ in listing.kept), *(path for path, _ in listing.skipped)]:
        folder = name.rstrip("/").rpartition("/")[0]
        while (absolute := f"{top}/{folder}" if folder else top) not in known:
            known.add(absolute)
            folders.append(absolute)
            folder = folder.rpartition("/")[0]
    return folders, rule_files


def _git_stats(root: Path, listing: NameListing, index: str,
               identity: list[int] | None) -> tuple[list[int], list[int]] | None:
    """What git's index file `index` records of each kept name, where that is what the disk says
    now (-1: nothing vouched for; an entry git smudged or never refreshed is not the file), read
    only if the file is still `identity` before and after: git may rewrite it at any time."""
    hash_bytes = object_hash_bytes(root)
    if identity is None or hash_bytes is None:
        return None
    try:
        data = read_regular(Path(index))
    except OSError:
        return None
    entries = index_entries(data, hash_bytes) if _identity(index) == identity else None
    if entries is None or _identity(index) != identity:
        return None
    unknown = (-1, -1)
    found = [entries.get(name, unknown) for name, _ in listing.kept]
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for number, ((name, _), (size, mtime_ns)) in enumerate(zip(listing.kept, found)):
            if size >= 0:
                try:
                    status = os.lstat(name, dir_fd=top)
                except OSError:
                    found[number] = unknown
                    continue
                if not S_ISREG(status.st_mode) or (status.st_size, status.st_mtime_ns) != (size, mtime_ns):
                    found[number] = unknown
    finally:
        os.close(top)
    return [size for size, _ in found], [mtime for _, mtime in found]


def _vouched(recorded: _Recorded, asked: subprocess.Popen | None) -> NameListing:
    """The recorded listing, with the sizes and times of the tracked files git (`asked`:
    asking_changed_files) finds unchanged."""
    changed = changed_files_answer(asked, wanted=recorded.git_stats is not None)
    if recorded.git_stats is None or changed is None:
        return recorded.listing
    sizes, times = list(recorded.git_stats[0]), recorded.git_stats[1]
    if changed:
        for number, (name, _) in enumerate(recorded.listing.kept):
            if name in changed:
                sizes[number] = -1
    return replace(recorded.listing, current_stats=(sizes, times))


def listed_names(root: Path, config: ScanConfig, memo_folder: Path | None) -> NameListing:
    """The names' part of a scan of `root`: from the memo in `memo_folder` while everything it
    depends on is as recorded, else listed and judged again (and recorded when nothing is racy)."""
    if memo_folder is None:
        return _list_names(root, config)[0]
    memo = memo_folder / MEMO
    key = _settings_key(config, root)
    # git's answer only serves a memo with git's entries of enough files; asked first, it comes
    # while the memo is read and checked.
    try:  # each kept file takes at least 25 bytes of a memo with git's entries (a name, 2 + 16 packed)
        worth_asking = memo.stat().st_size > GIT_STAT_MIN_FILES * 25 and (root / ".git").exists()
    except OSError:
        worth_asking = False
    asked = asking_changed_files(root) if worth_asking else None
    recorded = _read(memo, key)
    if recorded is not None and _still_true(recorded):
        if len(recorded.listing.kept) < GIT_STAT_MIN_FILES:
            recorded.git_stats = None
        return _vouched(recorded, asked)
    changed_files_answer(asked, wanted=False)
    started_ns = time.time_ns()
    listing, watched, index = _list_names(root, config)
    if watched is None or not (memo_folder / MARKER).is_file():  # only in a folder repomem made
        return listing
    identities = {path: _identity(path) for path in watched}
    racy = started_ns - int(RACY_S * 1e9)
    # A folder (or rule file) changed just now may change again within its clock tick unseen.
    if any(identity is not None and identity[2] >= racy for identity in identities.values()):
        return listing
    _write(memo, key, listing, identities, None if index is None else
           _git_stats(root, listing, index, identities.get(index)))
    return listing
