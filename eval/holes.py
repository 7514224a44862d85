"""The data of a benchmark build: a repository's source file and a hole in it (eval/build.py draws
Python's, eval/language_holes.py every other language's)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PythonFile:
    """One source file of a repository (any language's: the name dates from Python-only sets)."""

    path: str  # repository-relative, POSIX separators
    text: str  # newlines normalized to "\n"
    lines: tuple[str, ...]  # split_lines(text): a final newline does not start another line


@dataclass(frozen=True)
class CalledDefinition:
    path: str  # repository-relative path of the defining file
    line: int  # 0-based line of the def / class statement
    name: str
    kind: str  # "function" | "class"


@dataclass(frozen=True)
class Hole:
    file: PythonFile
    lineno: int  # 0-based first line of the ground truth
    end_lineno: int  # 0-based last line, inclusive
    definition: CalledDefinition | None = None  # API holes only

    @property
    def ground_truth(self) -> str:
        return "\n".join(self.file.lines[self.lineno : self.end_lineno + 1])

    @property
    def stripped(self) -> tuple[str, ...]:
        """The ground truth without indentation: two holes with equal `stripped` are duplicates."""
        return tuple(line.strip() for line in self.file.lines[self.lineno : self.end_lineno + 1])
