"""ReadAgent adapted to code: files paginated at syntax boundaries, each page compressed to a gist.

A page ends at the first top-level statement or definition (a method counts) that begins once
the page holds `page_lines` lines; a stretch with no boundary is cut at twice that. A gist is
extractive by default: the page's line range, its definition headers (up to `GIST_HEADERS`) and
the first docstring line under the first one, or its first lines when it defines nothing. A
model-written gist (see written_summaries.py) replaces the extractive one where the index has
one for the page's text.

The memory is live like the summary tree: `update` re-paginates only files whose content digest
changed. The retriever (repomem/completion/memory_retrievers.py) shows the model the gists of the
best pages and lets it look a few up in full.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from repomem.languages.parsed import FileSyntax
from repomem.memory.docstrings import docstring_line
from repomem.prompt_names import one_line

GIST_HEADERS = 3  # definition headers a gist names
GIST_LINE_CHARS = 100  # characters kept of one line of a gist


@dataclass(frozen=True)
class Page:
    path: str
    start_line: int  # 0-based
    end_line: int  # exclusive
    gist: str
    digest: str  # of the page's text: the key of its model-written gist


def page_bounds(syntax: FileSyntax | None, n_lines: int, page_lines: int) -> list[tuple[int, int]]:
    """[start, end) line ranges covering the file in order (see the module doc)."""
    boundaries: set[int] = set()
    if syntax is not None and syntax.parent.shape[0]:
        boundaries.update(int(line) for line in syntax.start_line[np.flatnonzero(syntax.parent == 0)])
        boundaries.update(int(syntax.start_line[d.node]) for d in syntax.definitions if not d.in_function)
    cap = 2 * page_lines
    pages: list[tuple[int, int]] = []
    start = 0
    for boundary in [*sorted(b for b in boundaries if 0 < b < n_lines), n_lines]:
        while boundary - start > cap:
            pages.append((start, start + cap))
            start += cap
        if boundary - start >= page_lines or (boundary == n_lines and boundary > start):
            pages.append((start, boundary))
            start = boundary
    return pages


def _short(line: str) -> str:
    line = line.strip()
    return line if len(line) <= GIST_LINE_CHARS else line[: GIST_LINE_CHARS - 3] + "..."


def extractive_gist(lines: Sequence[str], start: int, end: int, syntax: FileSyntax | None) -> str:
    heads = []
    if syntax is not None:
        heads = sorted({int(syntax.start_line[d.node]) for d in syntax.definitions
                        if not d.in_function and start <= int(syntax.start_line[d.node]) < end})
    parts = [_short(lines[h]) for h in heads[:GIST_HEADERS]]
    if heads:
        # The first line after the header's own (a signature may run over several lines).
        body = next((n for n in range(heads[0] + 1, min(end, heads[0] + 6))
                     if lines[n].strip() and not lines[n].rstrip().endswith((",", "(", "["))), None)
        docstring = docstring_line(lines, body, end) if body is not None else ""
        if docstring:
            parts.insert(1, _short(docstring))
        if len(heads) > GIST_HEADERS:
            parts.append(f"and {len(heads) - GIST_HEADERS} more definitions")
    else:
        parts = [_short(line) for line in lines[start:end] if line.strip()][:2]
    return f"lines {start + 1}-{end}: " + " | ".join(parts)


def page_digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


FileSource = Callable[[str], tuple[FileSyntax | None, Sequence[str]]]  # path -> (syntax, lines)
WrittenGist = Callable[[str], str | None]  # page digest -> a model-written gist, if the index has one


@dataclass
class GistMemory:
    page_lines: int
    pages: dict[str, tuple[str, tuple[Page, ...]]] = field(default_factory=dict)  # path -> (file digest, pages)
    paginated: int = 0  # files paginated by the last update

    def update(self, files: Mapping[str, str], source: FileSource, written: WrittenGist | None = None) -> int:
        """Bring the pages to `files` (path -> content digest); returns the files re-paginated."""
        for path in [p for p in self.pages if p not in files]:
            del self.pages[path]
        self.paginated = 0
        for path, digest in files.items():
            kept = self.pages.get(path)
            if kept is not None and kept[0] == digest:
                continue
            syntax, lines = source(path)
            out = []
            # A final line break ends the last line, it starts no line of its own (as editors count).
            n_lines = len(lines) - (len(lines) > 1 and lines[-1] == "")
            for start, end in page_bounds(syntax, n_lines, self.page_lines):
                key = page_digest("\n".join(lines[start:end]))
                model_gist = written(key) if written is not None else None
                gist = (f"lines {start + 1}-{end}: {model_gist}" if model_gist
                        else extractive_gist(lines, start, end, syntax))
                out.append(Page(path, start, end, gist, key))
            self.pages[path] = (digest, tuple(out))
            self.paginated += 1
        return self.paginated

    def pages_of(self, path: str) -> tuple[Page, ...]:
        kept = self.pages.get(path)
        return kept[1] if kept is not None else ()

    def page_at(self, path: str, line: int) -> Page | None:
        """The page holding a 0-based line."""
        return next((p for p in self.pages_of(path) if p.start_line <= line < p.end_line), None)


def lookup_question(code_path: str, code: str, gists: Sequence[Page], lookups: int) -> str:
    """The look-up step: the code at the cursor and the numbered gists; the model names pages."""
    lines = [f"Code is being written in {one_line(code_path)}. Its last lines:", "```", code.rstrip("\n"), "```",
             "Gists of pages of other files in the repository:"]
    for number, page in enumerate(gists, start=1):
        lines.append(f"{number}. {one_line(page.path)} {page.gist}")
    lines.append(f"To write the next line, which pages (at most {lookups}) should be read in full? "
                 "Answer with their numbers, separated by commas.")
    return "\n".join(lines)
