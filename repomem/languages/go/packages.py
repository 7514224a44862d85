"""Go packages are directories; an import path names one by the module path (go.mod) followed by
the directory. The resolver sees only .go files, never go.mod, so an import path resolves to the
repository directory that equals its longest proper suffix (`example.com/m/pkg/util` -> pkg/util),
or, for a module that sits below the repository root, to a directory ending in that suffix
(`backend/pkg/util`), the one nearest the importing file. The standard library never resolves."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import PurePosixPath

from repomem.languages.resolver_scaffold import shared_prefix_length

# Top-level elements of the standard library's import paths (no dot: paths of other modules
# start with a host name). A repository directory of the same name never captures them.
STANDARD_LIBRARY = frozenset({
    "archive", "bufio", "builtin", "bytes", "cmp", "compress", "container", "context", "crypto", "database",
    "debug", "embed", "encoding", "errors", "expvar", "flag", "fmt", "go", "hash", "html", "image", "index",
    "internal", "io", "iter", "log", "maps", "math", "mime", "net", "os", "path", "plugin", "reflect", "regexp",
    "runtime", "slices", "sort", "strconv", "strings", "structs", "sync", "syscall", "testing", "text", "time",
    "unicode", "unique", "unsafe", "weak", "C",
})
_MAJOR_VERSION = re.compile(r"v[0-9]+")


def default_name(path: str) -> str:
    """The name `import "path"` binds, approximated by the path's last element (the package
    clause of the imported files is what Go uses; it differs rarely): a major-version element
    (`.../v2`) and gopkg.in's `.v3` suffix are skipped, `go-` prefixes dropped."""
    elements = [e for e in path.split("/") if e]
    if len(elements) > 1 and _MAJOR_VERSION.fullmatch(elements[-1]):
        elements.pop()
    name = elements[-1] if elements else path
    name = re.sub(r"\.v[0-9]+$", "", name)
    if name.startswith("go-") and len(name) > 3:
        name = name[3:]
    return name.replace("-", "_").replace(".", "_")


def directory_of(path: str) -> str:
    """A file's package directory, "" at the repository root."""
    parent = str(PurePosixPath(path).parent)
    return "" if parent == "." else parent


def path_suffixes(import_path: str) -> list[str]:
    """Proper suffixes of an import path on element boundaries, longest first (at least the first
    element, the module's host or name, is dropped); none for the standard library."""
    elements = [e for e in import_path.split("/") if e]
    if not elements or elements[0] in STANDARD_LIBRARY:
        return []
    return ["/".join(elements[start:]) for start in range(1, len(elements))]


def directory_tails(directory: str) -> list[str]:
    """A directory and its proper tails: pkg/a/b -> [pkg/a/b, a/b, b]."""
    elements = directory.split("/") if directory else []
    return ["/".join(elements[start:]) for start in range(len(elements))]


class PackageDirectories:
    """The repository's package directories (those holding a .go file) and their files."""

    def __init__(self) -> None:
        self._files: dict[str, set[int]] = defaultdict(set)
        self._by_tail: dict[str, set[str]] = defaultdict(set)  # proper tail -> directories

    def add(self, directory: str, file_id: int) -> None:
        if not self._files[directory]:
            for tail in directory_tails(directory)[1:]:
                self._by_tail[tail].add(directory)
        self._files[directory].add(file_id)

    def remove(self, directory: str, file_id: int) -> None:
        files = self._files.get(directory)
        if files is None:
            return
        files.discard(file_id)
        if not files:
            del self._files[directory]
            for tail in directory_tails(directory)[1:]:
                holders = self._by_tail[tail]
                holders.discard(directory)
                if not holders:
                    del self._by_tail[tail]

    def files(self, directory: str) -> list[int]:
        """The files of a package, in id order."""
        return sorted(self._files.get(directory, ()))

    def find(self, import_path: str, importer_directory: str) -> str | None:
        """The directory an import path names, None when it is outside the repository."""
        for suffix in path_suffixes(import_path):
            if suffix in self._files:
                return suffix
            holders = self._by_tail.get(suffix)
            if holders:
                here = importer_directory.split("/")
                return min(holders, key=lambda d: (-shared_prefix_length(here, d.split("/")), d))
        return None
