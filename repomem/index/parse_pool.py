"""Reading and parsing a repository's files, on worker processes when there are many.

A full build reads, masks, parses and windows every candidate file (`read_and_analyze`); an
update parses the few files it has already read (`analyze_sources`). Below PARALLEL_MIN_FILES
files, or with one configured worker, the work runs in this process; above, on forked workers
that send their analyses back packed (repomem/index/batch.py).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from repomem.child_processes import die_with_parent
from repomem.config import Config, ScanConfig
from repomem.index.batch import AnalysisBatch, pack_analyses, unpack_analyses
from repomem.index.indexed_files import warmed_file_analysis
from repomem.index.repo_index import FileAnalysis, analyze_file
from repomem.index.scan import Candidate, Skipped, SourceFile, read_source, source_from_bytes
from repomem.progress import Progress

# Below this many files a worker pool costs more than it saves.
PARALLEL_MIN_FILES = 64


def read_candidate(
    root: Path, candidate: Candidate, buffers: dict[str, str], config: ScanConfig,
) -> SourceFile | Skipped:
    """A file as the index sees it: the editor's unsaved buffer if one is open, else the disk."""
    buffer = buffers.get(candidate.path)
    if buffer is not None:
        return source_from_bytes(candidate.path, candidate.language, buffer.encode("utf-8"), 0, config)
    return read_source(root, candidate, config)


def analyze_sources(sources: Sequence[SourceFile], config: Config, progress: Progress) -> list[FileAnalysis]:
    """Parse and window files already read (an update's changed files)."""
    progress.start("parsing", len(sources))
    return _in_chunks(_analyze_chunk, sources, lambda part: (part, config), config, progress)


def read_and_analyze(
    root: Path, candidates: Sequence[Candidate], buffers: dict[str, str], config: Config, progress: Progress,
) -> tuple[list[SourceFile], list[FileAnalysis], list[Skipped]]:
    """Read, mask, parse and window every candidate (a full build), in path order: the sources
    (without their text), their analyses, and the files that could not be read."""
    progress.start("parsing", len(candidates))
    ordered = sorted(candidates, key=lambda c: c.path)
    results = _in_chunks(_read_and_analyze_chunk, ordered, lambda part: (root, part, buffers, config), config,
                         progress)
    sources, analyses, unreadable = [], [], []
    for result in results:
        if isinstance(result, Skipped):
            unreadable.append(result)
        else:
            sources.append(result[0])
            analyses.append(result[1])
    results.clear()
    return sources, analyses, unreadable


def _analyze_chunk(args: tuple[list[SourceFile], Config]) -> list[FileAnalysis]:
    sources, config = args
    return [analyze_file(source, config) for source in sources]


def _read_and_analyze_chunk(
    args: tuple[Path, list[Candidate], dict[str, str], Config],
) -> list[tuple[SourceFile, FileAnalysis] | Skipped]:
    """Read, mask and analyze files where the parsing runs (both cores read: reading and masking
    no longer run on one core before the parse). The index keeps no text, so a source travels back
    without it (less to pickle; docs/measurements.md#parsing-and-analysis)."""
    root, candidates, buffers, config = args
    out: list[tuple[SourceFile, FileAnalysis] | Skipped] = []
    for candidate in candidates:
        source = read_candidate(root, candidate, buffers, config.scan)
        if isinstance(source, Skipped):
            out.append(source)
        else:
            out.append((dataclasses.replace(source, text=""), analyze_file(source, config)))
    return out


def _in_chunks(function: Callable[[Any], list[Any]], items: Sequence[Any], make_args: Callable[[list[Any]], Any],
               config: Config, progress: Progress) -> list[Any]:
    """`function(make_args(part))` over parts of `items`, results end to end in order: on
    `config.index.workers` processes for large repositories, else here, item by item."""
    workers = max(1, config.index.workers)
    out: list[Any] = []
    if workers == 1 or len(items) < PARALLEL_MIN_FILES:
        for item in items:
            out.extend(function(make_args([item])))
            progress.advance()
        return out
    parts = [list(items[start:end]) for start, end in part_bounds(len(items), workers)]
    # Loaded here once, the forked workers inherit it: each worker loaded numba's kernels and
    # their runtime on its first file otherwise, a few tenths of a second each on both cores,
    # while this process loads the runtime later anyway (docs/measurements.md#parsing-and-analysis).
    warmed_file_analysis(config)
    context = multiprocessing.get_context("fork")
    names: dict[str, str] = {}  # each call site name once across the parts (CallSites.sharing_names)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=die_with_parent,
                             initargs=(os.getpid(),)) as pool:
        for part, results in zip(parts, pool.map(_packed_call, [(function, make_args(p)) for p in parts])):
            out.extend(_unpacked(results, names))
            progress.advance(len(part))
    return out


def part_bounds(n_items: int, workers: int, min_part: int = 8) -> list[tuple[int, int]]:
    """[start, end) of each part of `n_items` for `workers` processes, in order: parts of
    n / (16 workers) items while plenty remain, then smaller ones (a sixth of what is left per
    worker, at least `min_part`), so that the workers finish together. With equal parts the
    last one ran alone on one core: ~1.3 s of a 23,000-file build (docs/measurements.md#parsing-and-analysis)."""
    steady = max(min_part, n_items // (workers * 16))
    bounds: list[tuple[int, int]] = []
    start = 0
    while start < n_items:
        size = max(min_part, min(steady, (n_items - start) // (workers * 6)))
        bounds.append((start, min(n_items, start + size)))
        start += size
    return bounds


# A worker's results: each FileAnalysis (alone or the second of a pair) replaced by its position in
# one AnalysisBatch, which pickles as a few long arrays (repomem.index.batch).
_PackedResults = tuple[list[Any], AnalysisBatch]


def _packed_call(args: tuple[Callable[[Any], list[Any]], Any]) -> _PackedResults:
    """`function(function_args)` in a worker, its analyses packed (see `_unpacked`)."""
    function, function_args = args
    shells: list[Any] = []  # ("analysis", i), ("pair", first item, i) or ("item", anything else)
    analyses: list[FileAnalysis] = []
    for item in function(function_args):
        if isinstance(item, FileAnalysis):
            shells.append(("analysis", len(analyses)))
            analyses.append(item)
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], FileAnalysis):
            shells.append(("pair", item[0], len(analyses)))
            analyses.append(item[1])
        else:
            shells.append(("item", item))
    return shells, pack_analyses(analyses)


def _unpacked(results: _PackedResults, names: dict[str, str] | None = None) -> list[Any]:
    """The results `_packed_call` packed, in their order (`names` as `unpack_analyses`)."""
    shells, batch = results
    analyses = unpack_analyses(batch, names)
    out: list[Any] = []
    for shell in shells:
        if shell[0] == "analysis":
            out.append(analyses[shell[1]])
        elif shell[0] == "pair":
            out.append((shell[1], analyses[shell[2]]))
        else:
            out.append(shell[1])
    return out
