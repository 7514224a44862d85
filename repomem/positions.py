"""Cursor positions: `FILE:LINE[:COL]` as compilers print them (1-based), checked against a repo."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from repomem.config import ScanConfig
from repomem.failures import Failure, FailureKind
from repomem.index.scan import (
    LFS_POINTER,
    LFS_POINTER_MAX_BYTES,
    NOT_UTF8_NAME,
    is_lfs_pointer,
    is_text_name,
    normalize_newlines,
    printable_path,
)
from repomem.regular_files import read_regular
from repomem.repository_root import INDEX_MARKER

# ASCII digits only: \d also takes other scripts' digits ("report.py:٩" read as line 9). DOTALL: a
# file name may hold a newline (the scan indexes such a file; its cursor was "expected FILE:LINE").
_POSITION = re.compile(r"^(?P<path>.+?):(?P<line>[0-9]+)(?::(?P<col>[0-9]+))?$", re.DOTALL)
# Folders whose files are never a cursor's: version control's metadata and the index's own.
INTERNAL_FOLDERS = frozenset({".git", ".hg", ".svn", ".bzr", INDEX_MARKER})


@dataclass(frozen=True)
class PositionSpec:
    path: Path  # as given, not yet resolved
    line: int  # 1-based
    column: int | None  # 1-based, None = end of the line


@dataclass(frozen=True)
class Cursor:
    """A checked cursor inside a repository. `line` and `column` are 0-based."""

    root: Path
    path: str  # repository-relative, POSIX
    line: int
    column: int
    text: str  # the file's text (disk or editor buffer)


def text_offset(lines: list[str], line: int, column: int) -> int:
    """The offset in `"\\n".join(lines)` of (`line`, `column`), both 0-based, in code points."""
    return sum(len(row) + 1 for row in lines[:line]) + column


def parse_position(spec: str) -> PositionSpec | Failure:
    match = _POSITION.match(spec)
    if match is None:
        return Failure(FailureKind.BAD_POSITION, f"expected FILE:LINE[:COL], got {spec!r}")
    line = int(match["line"])
    column = int(match["col"]) if match["col"] is not None else None
    if line < 1 or (column is not None and column < 1):
        return Failure(FailureKind.BAD_POSITION, f"lines and columns start at 1: {spec!r}")
    return PositionSpec(Path(match["path"]), line, column)


def relative_to_root(root: Path, path: Path) -> str | Failure:
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        return Failure(FailureKind.SYMLINK_LOOP, f"{path}: a symbolic link loop, not a file")
    try:
        return resolved.relative_to(root.resolve()).as_posix()
    except ValueError:
        if path.is_symlink():
            return Failure(FailureKind.OUTSIDE_REPO,
                           f"{path} is a symbolic link to {resolved}, outside the repository {root}")
        return Failure(FailureKind.OUTSIDE_REPO, f"{path} is outside the repository {root}")


def read_text_file(path: Path) -> str | Failure:
    """A file's text for a cursor; missing, unreadable or binary files are Failures."""
    if not path.exists():
        return Failure(FailureKind.MISSING_FILE, f"{path}: no such file")
    if path.is_dir():
        return Failure(FailureKind.NOT_A_FILE, f"{path} is a folder, not a file")
    try:
        data = read_regular(path)
    except OSError as error:
        return Failure(FailureKind.UNREADABLE_FILE, f"{path}: cannot read ({error.strerror or error})")
    if b"\0" in data:  # anywhere: a NUL past the first kilobytes reached prompts (scan.source_from_bytes)
        return Failure(FailureKind.BINARY_FILE, f"{path} is a binary file")
    return normalize_newlines(data.decode("utf-8", errors="replace"))


def uncompletable(relative_path: str, text: str, scan: ScanConfig) -> Failure | None:
    """Why a file is no place for a cursor: what the scan would skip it for. A file the index
    leaves out still reached the query and the prompt as the cursor's own file: a 10 MB line
    cost 1.8 GB and a model call that timed out before the prompt budget refused it."""
    if not is_text_name(relative_path):
        return Failure(FailureKind.NOT_UTF8_NAME,
                       f"{printable_path(relative_path)}: the {NOT_UTF8_NAME}; repomem neither "
                       "indexes nor completes in such files (rename it)")
    internal = next((part for part in relative_path.split("/")[:-1] if part in INTERNAL_FOLDERS), None)
    if internal is not None:
        # A remote's URL with its token sits in .git/config: nothing in these folders is code.
        return Failure(FailureKind.NOT_INDEXED,
                       f"{relative_path} lies inside {internal}/ (version control or the index's "
                       "own files): repomem neither indexes nor completes there")
    if "\0" in text:
        return Failure(FailureKind.BINARY_FILE, f"{relative_path} is a binary file (it holds a NUL character)")
    if len(text) > scan.max_file_bytes and len(text.encode("utf-8", "surrogatepass")) > scan.max_file_bytes:
        return Failure(FailureKind.FILE_TOO_LARGE, f"{relative_path} is larger than {scan.max_file_bytes} bytes "
                                                   "(scan.max_file_bytes): not indexed, nor completed in")
    longest = max(map(len, text.split("\n")), default=0)
    if longest > scan.max_line_chars:
        return Failure(FailureKind.LINE_TOO_LONG,
                       f"{relative_path} has a line of {longest} characters, more than "
                       f"{scan.max_line_chars} (scan.max_line_chars; minified?): not indexed, "
                       "nor completed in")
    data = text.encode("utf-8", "surrogatepass") if len(text) < LFS_POINTER_MAX_BYTES else b""
    if len(data) < LFS_POINTER_MAX_BYTES and is_lfs_pointer(data):
        return Failure(FailureKind.NOT_INDEXED, f"{relative_path} is {LFS_POINTER}; not indexed, nor completed in")
    return None


def locate(root: Path, relative_path: str, text: str, line: int, column: int | None,
           scan: ScanConfig | None = None) -> Cursor | Failure:
    """Check a 1-based line / column against the text and return a 0-based cursor. `scan`: the
    limits of the files a cursor may sit in (the scan's; default: the config's defaults)."""
    problem = uncompletable(relative_path, text, scan or ScanConfig())
    if problem is not None:
        return problem
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()  # the empty string after the final newline is not a line `wc -l` counts...
        if line == len(lines) + 1 and column in (None, 1):
            # ...but editors put the cursor there (a new last line being started): its start.
            return Cursor(root, relative_path, line - 1, 0, text)
    n_lines = max(len(lines), 1)
    if line > n_lines:
        return Failure(FailureKind.LINE_OUT_OF_RANGE,
                       f"{relative_path}:{line}: line out of range (the file has {n_lines} lines)")
    current = lines[line - 1] if lines else ""
    if column is None:
        column = len(current) + 1
    if column > len(current) + 1:
        return Failure(
            FailureKind.COLUMN_OUT_OF_RANGE,
            f"{relative_path}:{line}:{column}: column out of range (the line has {len(current)} characters)",
        )
    return Cursor(root, relative_path, line - 1, column - 1, text)


def text_before_cursor(cursor: Cursor, n_lines: int) -> tuple[str, int]:
    """The last `n_lines` lines up to the cursor (the current line cut at the cursor).

    Returns the text and its first line (0-based).
    """
    # Split no further than the cursor's line: the lines after it are never read.
    return window_before(cursor.text.split("\n", cursor.line + 1), cursor.line, cursor.column, n_lines)


def query_first_line(line: int, n_lines: int) -> int:
    """The first line (0-based) of the `n_lines` lines that end at 0-based line `line`."""
    return max(0, line - n_lines + 1)


def window_before(lines: list[str], line: int, column: int, n_lines: int) -> tuple[str, int]:
    """`text_before_cursor` over a file already split into lines (0-based `line` / `column`)."""
    first = query_first_line(line, n_lines)
    window = lines[first:line]
    window.append(lines[line][:column] if line < len(lines) else "")
    return "\n".join(window), first
