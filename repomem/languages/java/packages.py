"""Java packages as the files declare them (`package a.b;`, not their folders: source roots vary),
and the top-level classes each package holds across its files."""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from repomem.languages.parsed import Definition, FileSyntax


class Found(NamedTuple):
    file: int
    definition: Definition


def is_platform(qualified: str) -> bool:
    """Names under java.* and javax.*: the platform's, never resolved (even where a repository
    holds sources under those packages, as the JDK's own tests do)."""
    first = qualified.split(".", 1)[0]
    return first in ("java", "javax")


def prefixes(qualified: str) -> list[str]:
    """'a.b.C' -> ['a.b.C', 'a.b', 'a']."""
    parts = qualified.split(".")
    return [".".join(parts[:end]) for end in range(len(parts), 0, -1)]


class Packages:
    """Files by declared package, and each package's top-level classes (built when first asked,
    dropped when one of its files changes)."""

    def __init__(self, files: dict[int, FileSyntax]) -> None:
        self._syntax = files  # the resolver's own table of files, shared
        self._files: dict[str, set[int]] = defaultdict(set)
        self._classes: dict[str, dict[str, Found]] = {}

    def add(self, package: str, file_id: int) -> None:
        self._files[package].add(file_id)
        self._classes.pop(package, None)

    def remove(self, package: str, file_id: int) -> None:
        files = self._files.get(package)
        if files is None:
            return
        files.discard(file_id)
        if not files:
            del self._files[package]
        self._classes.pop(package, None)

    def holds(self, package: str) -> bool:
        return package in self._files

    def files(self, package: str) -> set[int]:
        return self._files.get(package, set())

    def top_class(self, package: str, name: str) -> Found | None:
        classes = self._classes.get(package)
        if classes is None:
            classes = {}
            # In path order, as a whole build numbers the files, so edits keep the same first file.
            for file_id in sorted(self._files.get(package, ()), key=lambda f: self._syntax[f].path):
                for definition in self._syntax[file_id].definitions:
                    if definition.kind == "class" and not definition.scope and not definition.in_function:
                        classes.setdefault(definition.name, Found(file_id, definition))  # the first path's
            self._classes[package] = classes
        return classes.get(name)
