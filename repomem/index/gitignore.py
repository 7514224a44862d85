"""Adapter for pathspec: .gitignore semantics for repositories without git."""

from __future__ import annotations

from pathlib import Path

import pathspec

from repomem.regular_files import read_regular_text


class IgnoreRules:
    """The .gitignore files met so far on a walk, each applying below its own folder."""

    def __init__(self) -> None:
        self._specs: list[tuple[str, pathspec.PathSpec]] = []

    def add_file(self, path: Path, prefix: str) -> None:
        """Add the rules of one .gitignore; `prefix` is its folder, relative, with a trailing '/'."""
        try:
            lines = read_regular_text(path).splitlines()
        except OSError:
            return
        self._specs.append((prefix, pathspec.GitIgnoreSpec.from_lines(lines)))

    def ignored(self, relative_path: str, is_dir: bool) -> bool:
        result = False
        for prefix, spec in self._specs:
            if not relative_path.startswith(prefix):
                continue
            inner = relative_path[len(prefix):] + ("/" if is_dir else "")
            verdict = spec.check_file(inner)
            if verdict.include is not None:
                result = verdict.include
        return result
