"""The memory strategies' memories of one repository, built on first use and kept current.

HAT and MemWalker read the summary tree, ReadAgent the gists, QRMeM the entity memory, and all of
them the model-written summaries when memory.summaries = "model". `MemoryStores` holds one of
each for a repository and brings it up to date with the index each time it is asked: the tree
and the gists re-summarise only the files whose content digest changed; the entity memory is
rebuilt when the index (or any indexed file's content) is another.

It reads the repository through what its owner (the service) hands it at construction: the
loaded index, the memory settings and a file's masked lines, each asked anew at every call,
since the index is replaced by a rebuild or a rollback and the settings by the editor.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from repomem.config import MemoryConfig
from repomem.index.repo_index import RepoIndex
from repomem.languages.parsed import FileSyntax
from repomem.memory.entities import EntityMemory
from repomem.memory.gists import GistMemory
from repomem.memory.summary_tree import SummaryTree, file_summary
from repomem.memory.written_summaries import WrittenSummaries

FileSource = Callable[[str], tuple[FileSyntax | None, list[str]]]  # path -> (syntax, masked lines)


class MemoryStores:
    def __init__(self, index: Callable[[], RepoIndex], settings: Callable[[], MemoryConfig],
                 file_lines: Callable[[str], list[str]], summaries_folder: Callable[[], Path]):
        """`index`: the loaded index (the caller's own check that one is loaded); `file_lines`: a
        file's lines as indexed, secrets masked; `summaries_folder`: where `repomem summarise`
        writes (the index folder)."""
        self._index = index
        self._settings = settings
        self._file_lines = file_lines
        self._summaries_folder = summaries_folder
        self._summary_tree: SummaryTree | None = None  # strategies "hat", "memwalker"
        self._gists: GistMemory | None = None  # strategy "readagent"
        self._entities: tuple[object, EntityMemory] | None = None  # (state of the index, memory): "qrmem"
        self._written: WrittenSummaries | None = None  # with memory.summaries = "model"

    def summary_tree(self) -> SummaryTree:
        """The repository's summary tree (repomem/memory/summary_tree.py), brought up to date with
        the index: only files whose content changed since the last call are re-summarised, and
        the folders above them."""
        files, source = self._sources()
        written = self.written_summaries()
        lookup = written.get if written is not None else None
        if self._summary_tree is None:
            self._summary_tree = SummaryTree.build(files, source, lookup)
        else:
            self._summary_tree.update(files, source, lookup)
        return self._summary_tree

    def gist_memory(self) -> GistMemory:
        """ReadAgent's pages and gists (repomem/memory/gists.py), re-paginated per changed file."""
        files, source = self._sources()
        written = self.written_summaries()
        page_lines = self._settings().page_lines
        if self._gists is None or self._gists.page_lines != page_lines:
            self._gists = GistMemory(page_lines)
        self._gists.update(files, source, written.get if written is not None else None)
        return self._gists

    def entity_memory(self) -> EntityMemory:
        """QRMeM's entity memory (repomem/memory/entities.py), rebuilt when an indexed file changed."""
        index = self._index()
        state = (id(index), hash(frozenset((r.path, r.digest) for r in index.files if r is not None)))
        if self._entities is None or self._entities[0] != state:
            self._entities = (state, EntityMemory(index))
        return self._entities[1]

    def file_summaries(self) -> list[tuple[str, str]]:
        """(path, extractive summary) of every indexed file, in path order: what `repomem
        summarise` asks the model to rewrite."""
        files, source = self._sources()
        return [(path, file_summary(path, *source(path))) for path in sorted(files)]

    def written_summaries(self) -> WrittenSummaries | None:
        """Model-written summaries when memory.summaries = "model" (re-read after `summarise`
        appended to them; the memories built from the old ones are rebuilt)."""
        if self._settings().summaries != "model":
            if self._written is not None:  # switched back to extractive: the memories built on them go
                self._written = None
                self._summary_tree = self._gists = None
            return None
        if self._written is None or not self._written.current():
            self._written = self.open_written_summaries()
            self._summary_tree = self._gists = None
        return self._written

    def open_written_summaries(self) -> WrittenSummaries:
        """The written summaries as the index folder holds them now (for `repomem summarise` to
        append to)."""
        return WrittenSummaries.load(self._summaries_folder())

    def _sources(self) -> tuple[dict[str, str], FileSource]:
        """(path -> content digest of every indexed file, path -> (syntax, masked lines))."""
        index = self._index()
        index.ensure_structure()
        files = {r.path: r.digest for r in index.files if r is not None}

        def source(path: str) -> tuple[FileSyntax | None, list[str]]:
            file_id = index.file_id(path)
            return (index.syntax[file_id] if file_id is not None else None), self._file_lines(path)

        return files, source
