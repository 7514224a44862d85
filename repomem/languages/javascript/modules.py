"""Which repository file a module specifier names, the way Node and TypeScript read relative ones.

`./a` from `src/x.ts` names `src/a` with a source extension (TypeScript's order: .ts, .tsx, ...,
then .js, .jsx, ...; a `.d.ts` after every real source), else `src/a/index.*`. An extension written
in the specifier is taken literally first, then as TypeScript's ESM style (`./a.js` is `a.ts`).
Bare specifiers (`react`, `lodash/fp`, `node:fs`) name packages outside the repository: never
resolved, nor are path aliases from a tsconfig, which the resolver does not read.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict

# The extensions of the three grammars (registry.py), in the order TypeScript tries them.
SOURCE_EXTENSIONS = (".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs")
_TYPESCRIPT_EXTENSIONS = frozenset({".ts", ".mts", ".cts"})


def split_source_path(path: str) -> tuple[str, tuple[bool, int]] | None:
    """(stem, rank) of a path ending in a source extension: `src/a.d.ts` -> ("src/a", (True, 0));
    a lower rank wins when several files share a stem. None for any other path."""
    lower = path.lower()
    for order, extension in enumerate(SOURCE_EXTENSIONS):
        if lower.endswith(extension) and len(path) > len(extension):
            stem = path[: -len(extension)]
            declaration = extension in _TYPESCRIPT_EXTENSIONS and stem.lower().endswith(".d")
            return (stem[:-2] if declaration else stem), (declaration, order)
    return None


def stem_of(path: str) -> str:
    """The path without its source extension: what a file is known by as a module."""
    split = split_source_path(path)
    return path if split is None else split[0]


def module_keys(stem: str) -> list[str]:
    """The specifier targets that name a module: its stem, and its folder for an `index` file."""
    head, tail = posixpath.split(stem)
    return [stem, head] if tail == "index" else [stem]


def is_relative(specifier: str) -> bool:
    return specifier.startswith(("./", "../")) or specifier in (".", "..")


def specifier_target(importer_path: str, specifier: str) -> str | None:
    """The repository path a relative specifier points at (extension as written), None for a bare
    specifier or one leaving the repository."""
    if not is_relative(specifier):
        return None
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(importer_path), specifier))
    if joined == ".":
        return ""
    return None if joined == ".." or joined.startswith("../") else joined


def target_key(importer_path: str, specifier: str) -> str | None:
    """The module key (see module_keys) a relative specifier looks for, for dependents."""
    target = specifier_target(importer_path, specifier)
    return None if target is None else stem_of(target)


class ModuleFiles:
    """The repository's source files by path, by stem and by the folder of their `index` file."""

    def __init__(self) -> None:
        self._by_path: dict[str, int] = {}
        self._by_stem: dict[str, dict[int, tuple[bool, int]]] = defaultdict(dict)
        self._by_index_folder: dict[str, dict[int, tuple[bool, int]]] = defaultdict(dict)

    def add(self, path: str, file_id: int) -> None:
        self._by_path[path] = file_id
        split = split_source_path(path)
        if split is None:
            return
        stem, rank = split
        self._by_stem[stem][file_id] = rank
        head, tail = posixpath.split(stem)
        if tail == "index":
            self._by_index_folder[head][file_id] = rank

    def remove(self, path: str, file_id: int) -> None:
        if self._by_path.get(path) == file_id:
            del self._by_path[path]
        split = split_source_path(path)
        if split is None:
            return
        stem = split[0]
        head, tail = posixpath.split(stem)
        tables = [(self._by_stem, stem)] + ([(self._by_index_folder, head)] if tail == "index" else [])
        for table, key in tables:
            holders = table.get(key)
            if holders is not None:
                holders.pop(file_id, None)
                if not holders:
                    del table[key]

    def find(self, importer_path: str, specifier: str) -> int | None:
        """The file a specifier of `importer_path` names, None outside the repository."""
        target = specifier_target(importer_path, specifier)
        if target is None:
            return None
        exact = self._by_path.get(target)
        if exact is not None:
            return exact
        split = split_source_path(target)
        if split is not None:  # `./a.js` written for a.ts (TypeScript's ESM style)
            return _best(self._by_stem.get(split[0]))
        own = _best(self._by_stem.get(target))
        return own if own is not None else _best(self._by_index_folder.get(target))


def _best(holders: dict[int, tuple[bool, int]] | None) -> int | None:
    if not holders:
        return None
    return min(holders, key=lambda file_id: (holders[file_id], file_id))
