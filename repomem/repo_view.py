"""RepoView: what one request may read of a repository, and nothing that writes.

The service (repomem/service.py) owns the index's life cycle: load, build, edit, save, roll back,
editor buffers. A completion, a retrieval or an explanation only reads; it gets a view made by
the service for that request and its config (`RepoService.view`), which offers

- the text the index was built from (editor buffer or disk), secrets masked;
- the windows: which fragments a span or a file covers, a fragment's text, the live window an
  edit gave a remembered fragment;
- retrieval: the top K for a query or a cursor (eq. 10, the time budget, the cursor's masks), and
  its explanation;
- a read-only symbol handle on the code graph (repomem/retrieval/symbol_view.py) for what a prompt
  lever asks of imports, resolved calls and definitions;
- the memory strategies' stores.

Prompt levers and retrievers get the view, never the service. A view must not outlive the request
it was made for: an edit or a rollback replaces the index it reads.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from repomem.config import Config, ScanConfig
from repomem.embeddings.window_embeddings import DenseWindows
from repomem.failures import Failure, FailureKind
from repomem.index.repo_index import RepoIndex
from repomem.index.secrets import mask_secrets
from repomem.memory.stores import MemoryStores
from repomem.positions import Cursor, query_first_line, text_before_cursor
from repomem.retrieval.scoring import (
    Lift,
    ScoredFragment,
    best_fragments,
    score_fragments,
    scored_fragments,
    strongest_lifts,
    top_fragments,
)
from repomem.retrieval.symbol_view import SymbolView


@dataclass(frozen=True)
class IndexedFile:
    """One file of the index, as a caller choosing files (a benchmark's cursors) sees it."""

    path: str
    language: str
    fragments: int  # windows of its current text


@dataclass(frozen=True)
class Retrieval:
    cursor: Cursor
    query_first_line: int  # 0-based
    fragments: tuple[ScoredFragment, ...]
    alpha: float
    k: int
    timings_ms: dict[str, float]


def masked(text: str, scan: ScanConfig) -> str:
    """`text` with secrets masked as the index masks them under `scan` (nothing when it is off)."""
    if not scan.mask_secrets:
        return text
    if len(text) <= MEMO_MAX_CHARACTERS:
        return _masked_recently(text, scan.secret_min_length, scan.secret_min_entropy)
    return mask_secrets(text, scan.secret_min_length, scan.secret_min_entropy)[0]


# An editor's requests mask the same texts prompt after prompt (the files its blocks come from,
# the blocks whose tokens are counted): a pass over a whole file each (docs/editors.md#interactive-latency).
# Kept: the last 256 answers for texts of at most 64k characters (at most ~16 MB).
MEMO_MAX_CHARACTERS = 1 << 16


@lru_cache(maxsize=256)
def _masked_recently(text: str, min_length: int, min_entropy: float) -> str:
    return mask_secrets(text, min_length, min_entropy)[0]


def fragment_ids(mask: np.ndarray | None) -> np.ndarray:
    """A caller's mask as fragment ids, int64: a boolean mask (one entry per fragment) or ids."""
    if mask is None:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(mask) if mask.dtype == bool else mask.astype(np.int64)


def same_file_groups(root: Path, links: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """For each of `links` (repository-relative symbolic links to files) and each file they lead
    to inside `root`: the other paths naming the same file. Made once per scan that changed the
    links (a stat per link), read per request."""
    top = os.path.realpath(root)
    groups: dict[str, set[str]] = {}
    for link in links:
        target = os.path.relpath(os.path.realpath(os.path.join(top, link)), top)
        if not target.startswith(".."):
            groups.setdefault(target, {target}).add(link)
    return {name: tuple(sorted(group - {name})) for group in groups.values() for name in group}


class RepoView:
    """Read-only access to one repository's index and text for one request and config."""

    def __init__(self, root: Path, config: Config, index: RepoIndex | None, raw_text: Callable[[str], str],
                 memories: MemoryStores, dense: Callable[[], DenseWindows | Failure] | None = None,
                 same_files: Mapping[str, tuple[str, ...]] | None = None):
        """`raw_text(path)`: the file's text as indexed (editor buffer, else disk; "" when
        unreadable), secrets not yet masked; `dense()`: the index's windows as embeddings (the
        service embeds what has no vector yet at the first call); `same_files`: the paths that name
        one file, the scan's symbolic links and their targets (`same_file_groups`)."""
        self.root = root
        self.config = config
        self._index = index
        self._raw_text = raw_text
        self.memories = memories
        self._dense = dense
        self._same_files = same_files or {}
        self._symbols: SymbolView | None = None
        # Each file's masked lines, made once per request: masking is a pass over the whole file
        # (milliseconds for a long one), and a request reads one file for many fragments.
        self._lines: dict[str, list[str]] = {}

    # -- the index -----------------------------------------------------------------------------

    @property
    def index_loaded(self) -> bool:
        return self._index is not None

    @property
    def symbols(self) -> SymbolView | None:
        """The code graph's read-only handle; None without an index."""
        if self._symbols is None and self._index is not None:
            self._symbols = SymbolView(self._index)
        return self._symbols

    def _loaded(self) -> RepoIndex:
        assert self._index is not None, "call ensure_index first"
        return self._index

    def indexed_files(self) -> list[IndexedFile]:
        """Every file of the index with its language and window count; [] without one."""
        if self._index is None:
            return []
        return [IndexedFile(r.path, r.language, r.n_fragments) for r in self._index.files if r is not None]

    # -- text ----------------------------------------------------------------------------------

    def mask(self, text: str) -> str:
        """`text` with secrets masked (as indexed): fragments and prompts never carry one."""
        return masked(text, self.config.scan)

    def file_lines(self, path: str) -> list[str]:
        """A file's lines as indexed: its editor buffer, else the disk ([] when unreadable), as
        they were at this request's first read of them; a list of the caller's own."""
        lines = self._lines.get(path)
        if lines is None:
            lines = self._lines[path] = self.mask(self._raw_text(path)).split("\n")
        return list(lines)

    def unmasked_lines(self, path: str) -> list[str]:
        """`file_lines` before secret masking, for a caller that masks the few lines it keeps
        (masking a whole file costs milliseconds; a signature is one line of it)."""
        return self._raw_text(path).split("\n")

    def span_text(self, path: str, start_line: int, end_line: int) -> str:
        """Lines [start_line, end_line) (0-based) of a file, from its editor buffer or the disk."""
        return "\n".join(self.file_lines(path)[start_line:end_line])

    def fragment_text(self, fragment: ScoredFragment) -> str:
        """The fragment's lines as indexed (editor buffer or disk), or the summary it carries."""
        if fragment.text is not None:
            return fragment.text
        return self.span_text(fragment.path, fragment.start_line, fragment.end_line)

    # -- windows -------------------------------------------------------------------------------

    def visible_fragments(self, path: str, first_line: int, last_line: int) -> np.ndarray:
        """Ids of the file's fragments overlapping lines [first_line, last_line] (0-based)."""
        return self._loaded_symbols().windows_overlapping(path, first_line, last_line)

    def same_file_paths(self, path: str) -> list[str]:
        """The other indexed paths of the file at `path`: a symbolic link inside the repository is
        indexed under its own name beside its target, so the cursor's file has its windows twice
        (the link's and the target's, whichever the cursor is in); [] for most files."""
        others = self._same_files.get(path, ())
        return [name for name in others if self._loaded().record(name) is not None]

    def _loaded_symbols(self) -> SymbolView:
        symbols = self.symbols
        assert symbols is not None, "call ensure_index first"
        return symbols

    def live_window_holding(self, file_id: int, line: int) -> int | None:
        """A live window of the file (an index file id, as the entity memory names it) holding a
        0-based line, the first by id; None without one."""
        return None if self.symbols is None else self.symbols.window_holding(file_id, line)

    def fragments_ending_after(self, path: str, line: int) -> np.ndarray:
        """Ids of the file's fragments that end after 0-based line `line` (the fragment's end is
        exclusive), in id order; none for a file the index lacks."""
        return self._loaded_symbols().windows_overlapping(path, line, np.iinfo(np.int32).max)

    def fragments_of_files(self, paths: set[str]) -> np.ndarray:
        """Bool mask, shape (n_fragments,): fragments of the given files."""
        index = self._loaded()
        ids = [i for i in (index.file_id(p) for p in paths) if i is not None]
        return np.isin(index.fragment_file, np.asarray(ids, dtype=index.fragment_file.dtype))

    def renewed_fragments(self, fragments: Sequence[ScoredFragment]) -> list[ScoredFragment] | None:
        """`fragments` as live windows of the index: each dead one (its file re-indexed, as an
        editor buffer is at every change) replaced by the live window over the same lines of the
        same file, scores kept; None when one has no such window (its file gone, or its lines now
        split otherwise)."""
        index = self._index
        if index is None:
            return None
        renewed = []
        for fragment in fragments:
            f = fragment.fragment
            if 0 <= f < index.n_fragments and index.live[f]:
                renewed.append(fragment)
                continue
            if fragment.text is not None:  # a summary is not a window of lines
                return None
            same = [int(g) for g in self.visible_fragments(fragment.path, fragment.start_line, fragment.start_line)
                    if index.fragment_end[g] == fragment.end_line and index.fragment_start[g] == fragment.start_line]
            if not same:
                return None
            renewed.append(dataclasses.replace(fragment, fragment=same[0]))
        return renewed

    # -- retrieval -----------------------------------------------------------------------------

    def retrieve(
        self,
        query_text: str,
        k: int | None = None,
        alpha: float | None = None,
        excluded: np.ndarray | None = None,
        unlisted: np.ndarray | None = None,
        anchored: int | None = None,
    ) -> list[ScoredFragment]:
        """Top K for a query; `excluded` / `unlisted` as in scoring.score_fragments; `anchored`: BM25's
        best matches kept at the head of the list when alpha > 0 (None: prompt.anchor_matches)."""
        index = self._loaded()
        k = self.config.retrieval.top_k if k is None else k
        alpha = self.config.retrieval.alpha if alpha is None else alpha
        budget_ms = self.config.retrieval.time_budget_ms
        deadline = time.perf_counter() + budget_ms / 1000 if budget_ms > 0 else None
        anchored = self.config.prompt.anchor_matches if anchored is None else anchored
        found = best_fragments(index, query_text, alpha, k, anchored if alpha else 0, excluded, deadline, unlisted)
        # A fragment sharing no term with the query and related to none that does is no match (its
        # scores are exactly 0; a shared term of negative idf, in a tiny repository, scores below): a
        # query of no names (a new, empty file; a line of punctuation) filled the K places with
        # the first files' windows, in id order, and the prompt with them.
        return [f for f in found if f.s_ind != 0.0 or f.s_env != 0.0]

    def cursor_masks(self, cursor: Cursor, excluded: np.ndarray | None = None,
                     unlisted: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(excluded, unlisted) fragment ids for a retrieval at `cursor` (see score_fragments).

        The current file's windows over the query lines are never offered: the prompt shows them
        (under every name the file is indexed by: `same_file_paths`).
        With `retrieval.visible_feed_environment` they still feed their neighbours' s_env (the
        environment starts at the cursor), otherwise they are excluded. `excluded` / `unlisted`
        add the caller's own (e.g. RepoEval's unseen lines, and its leakage rule).
        """
        first_line = query_first_line(cursor.line, self.config.retrieval.query_lines)
        visible = self.visible_fragments(cursor.path, first_line, cursor.line)
        for alias in self.same_file_paths(cursor.path):  # the same lines under a link's name
            visible = np.union1d(visible, self.visible_fragments(alias, first_line, cursor.line))
        excluded, unlisted = fragment_ids(excluded), fragment_ids(unlisted)
        # `visible` is sorted and unique already: the union is only needed beside other ids.
        if self.config.retrieval.visible_feed_environment:
            return excluded, np.union1d(unlisted, visible) if unlisted.size else visible
        return np.union1d(excluded, visible) if excluded.size else visible, unlisted

    def retrieve_at(
        self,
        cursor: Cursor,
        k: int | None = None,
        alpha: float | None = None,
        exclude_visible: bool = True,
        *,
        query: str | None = None,
        excluded: np.ndarray | None = None,
        unlisted: np.ndarray | None = None,
        anchored: int | None = None,
    ) -> Retrieval:
        """Top K for a cursor: the query is the last lines before it (or `query`, e.g. RepoCoder's
        window slid over a draft); the masks are the cursor's own (see `cursor_masks`) plus
        `excluded` / `unlisted`."""
        started = time.perf_counter()
        window, first_line = text_before_cursor(cursor, self.config.retrieval.query_lines)
        if exclude_visible:
            excluded, unlisted = self.cursor_masks(cursor, excluded, unlisted)
        k = self.config.retrieval.top_k if k is None else k
        alpha = self.config.retrieval.alpha if alpha is None else alpha
        fragments = self.retrieve(window if query is None else query, k, alpha, excluded, unlisted, anchored)
        elapsed = (time.perf_counter() - started) * 1000
        return Retrieval(cursor, first_line, tuple(fragments), alpha, k, {"retrieve": elapsed})

    def retrieve_dense(self, cursor: Cursor, query_text: str, k: int | None = None,
                       excluded: np.ndarray | None = None,
                       unlisted: np.ndarray | None = None) -> list[ScoredFragment] | Failure:
        """Top K windows by the cosine of their embedding with the query's (RepoCoder's dense
        retriever); the cursor's masks apply, and neither `excluded` nor `unlisted` windows are
        offered. s_ind = s_rel = the cosine."""
        if self._dense is None:
            return Failure(FailureKind.BAD_STRATEGY, "dense retrieval needs the repository service's embeddings")
        windows = self._dense()
        if isinstance(windows, Failure):
            return windows
        index = self._loaded()
        excluded, unlisted = self.cursor_masks(cursor, excluded, unlisted)
        k = self.config.retrieval.top_k if k is None else k
        out = []
        for fragment, cosine in windows.top(query_text, k, np.union1d(excluded, unlisted)):
            record = index.files[int(index.fragment_file[fragment])]
            assert record is not None
            out.append(ScoredFragment(fragment, record.path, int(index.fragment_start[fragment]),
                                      int(index.fragment_end[fragment]), cosine, 0.0, cosine))
        return out

    def explain(self, cursor: Cursor, alpha: float | None = None, fragments: Sequence[int] | None = None,
                excluded: np.ndarray | None = None,
                unlisted: np.ndarray | None = None) -> list[tuple[ScoredFragment, Lift | None]]:
        """Scores of `fragments` (default: the top K) for the cursor's query, each with the
        neighbour that lifted it most through W (no time budget: an explanation is exact)."""
        index = self._loaded()
        alpha = self.config.retrieval.alpha if alpha is None else alpha
        query, _ = text_before_cursor(cursor, self.config.retrieval.query_lines)
        excluded, unlisted = self.cursor_masks(cursor, excluded, unlisted)
        scores = score_fragments(index, query, alpha, excluded, None, unlisted)
        if fragments is None:
            chosen = top_fragments(index, scores, self.config.retrieval.top_k,
                                   self.config.prompt.anchor_matches if alpha else 0)
        else:
            live = [f for f in fragments if 0 <= f < index.n_fragments and index.live[f]]
            chosen = scored_fragments(index, scores, live)
        lifts = strongest_lifts(index, scores, [f.fragment for f in chosen])
        return list(zip(chosen, lifts))
