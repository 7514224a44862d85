"""What the index keeps of each file: its record, and the analysis made of its text alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from repomem.config import Config
from repomem.index.fragments import FileFragments, file_fragments
from repomem.index.scan import SourceFile
from repomem.index.tokens import LineTokens, line_tokens
from repomem.languages.parsed import FileSyntax
from repomem.languages.reparse import TreeMemo
from repomem.languages.syntax import extract_syntax


# A NamedTuple, not a frozen dataclass: a load builds every file's record, and a frozen
# dataclass's __init__ sets each field through object.__setattr__ (~3 us a record;
# docs/measurements.md#index-load). Changed with `_replace`.
class FileRecord(NamedTuple):
    path: str
    language: str
    digest: str
    size: int
    mtime_ns: int  # 0 for an unsaved editor buffer: the next refresh compares digests
    first_fragment: int
    n_fragments: int
    masked: int = 0  # secrets masked in the indexed text (repomem.index.secrets)
    # More kept syntax nodes than graph.max_file_nodes: searched as text, outside the code graph.
    over_node_limit: bool = False


@dataclass(frozen=True)
class FileAnalysis:
    """Everything the index keeps of one file, computed without touching the index."""

    syntax: FileSyntax
    fragments: FileFragments
    tokens: LineTokens  # the file's BM25 tokens by line (a window's tokens are its lines')

    def window_term_ids(self, vocabulary: dict[str, int]) -> list[np.ndarray]:
        return self.tokens.window_term_ids(vocabulary, self.fragments.starts, self.fragments.ends)


def analyze_file(source: SourceFile, config: Config, trees: TreeMemo | None = None,
                 fresh_if_error: bool = False) -> FileAnalysis:
    """`trees`: an edit's memo of last parses (`TreeMemo`), none for a build; `fresh_if_error`:
    see `TreeMemo.parse` (a file read from disk)."""
    syntax = extract_syntax(source.path, source.language, source.text, config.graph.granularity,
                            config.graph.max_file_nodes, trees, fresh_if_error)
    fragments = file_fragments(syntax, config.fragments)
    return FileAnalysis(syntax, fragments, line_tokens(source.text, config.bm25))


def warmed_file_analysis(config: Config) -> FileAnalysis:
    """A small Python file analysed: loads what every file's analysis runs the first time in a
    process (numba's compiled window kernel from its cache, the grammar, the tokenizer's tables),
    so that processes forked after it, or an edit after it, do not load them again."""
    text = "import os\n\n\ndef warm(path):\n    return os.path.join(path, 'x')\n"
    return analyze_file(SourceFile("warm.py", "python", text, "", len(text), 0), config)
