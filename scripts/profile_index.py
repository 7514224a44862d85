"""Where the seconds of indexing go: the cold build and the edit path, phase by phase (issue 13).

    python scripts/profile_index.py                 # Django 5.1.4 from the package index
    python scripts/profile_index.py --repo DIR      # any other tree

Not a test and not cProfile (its per-call overhead inflates the Python-heavy phases): each phase's
function is wrapped with a wall-clock timer in this process, so the phases add up to the build.
Three parts:

1. the cold build as `repomem index --full` runs it (parse workers included), with the host's busy
   cores during each phase (read from /proc/stat every 50 ms: a phase at ~1 left a core idle);
2. the per-file analysis split into tree-sitter parse, syntax walk, symbols (the call query),
   windows and tokens, measured on one process over every file (the parse workers run this code);
3. one edited ~500-line file applied to the loaded index (the language server's save path), and
   saved;
4. the parse floors: tree-sitter's parse of every file on one process, and on `index.workers`
   forked processes at once (what this machine's cores give in parallel: two vCPUs may not be two
   cores' worth), each the best of three, beside the cold build.

Writes eval/results/profile-index.json and profile-index.md.
"""

from __future__ import annotations

import argparse
import bisect
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import repomem.index.index_edit as index_edit_module  # noqa: E402
import repomem.index.index_state as index_state_module  # noqa: E402
import repomem.index.repo_index as repo_index_module  # noqa: E402
import repomem.languages.syntax as syntax_module  # noqa: E402
import repomem.service as service_module  # noqa: E402
from repomem.config import Config  # noqa: E402
from repomem.index.calls import CallResolution  # noqa: E402
from repomem.index.edit_graph import EditGraph  # noqa: E402
from repomem.index.fragments import file_fragments  # noqa: E402
from repomem.index.index_folder import index_dir  # noqa: E402
from repomem.index.scan import SourceFile, content_digest, list_candidates, read_source  # noqa: E402
from repomem.index.snapshot_save import save_index  # noqa: E402
from repomem.index.tokens import LineTokens, line_tokens  # noqa: E402
from repomem.languages.registry import language_named  # noqa: E402
from repomem.languages.treesitter import parse  # noqa: E402
from repomem.packages import package_source  # noqa: E402
from repomem.service import RepoService  # noqa: E402

DJANGO = "django==5.1.4"


class Phases:
    """Seconds per phase; a phase entered inside another is subtracted from the outer one."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list[Any]] = []  # [name, started, inner seconds]
        self.spans: dict[str, list[tuple[float, float]]] = defaultdict(list)  # perf_counter (start, end) per call

    def wrap(self, owner: Any, attribute: str, name: str) -> Callable[[], None]:
        original = getattr(owner, attribute)

        def timed(*args: Any, **kwargs: Any) -> Any:
            self._stack.append([name, time.perf_counter(), 0.0])
            try:
                return original(*args, **kwargs)
            finally:
                phase, started, inner = self._stack.pop()
                ended = time.perf_counter()
                spent = ended - started
                self.spans[phase].append((started, ended))
                self.seconds[phase] += spent - inner
                self.calls[phase] += 1
                if self._stack:
                    self._stack[-1][2] += spent

        setattr(owner, attribute, timed)
        return lambda: setattr(owner, attribute, original)


# The phases a cold build and an edit share: call resolution, the graph and the relation rows.
GRAPH_PHASES = [
    (CallResolution, "__init__", "calls: resolver tables"),
    (CallResolution, "resolve_file", "calls: resolve (per file)"),
    (repo_index_module.RepoIndex, "graph", "graph: edges"),
    (repo_index_module.RepoIndex, "fragment_table", "graph: fragment table"),
    (index_state_module, "relation_entries", "relations: Dijkstra + eq. 8 rows"),
]
COLD_PHASES = [
    (service_module, "list_candidates", "scan: list files (git ls-files / walk)"),
    (service_module, "read_and_analyze", "read + masking + parse + syntax + windows + tokens (workers)"),
    (LineTokens, "window_term_ids", "BM25: term ids"),
    (repo_index_module, "build_segment", "BM25: postings segment"),
    (repo_index_module, "document_frequencies", "BM25: document frequencies"),
    *GRAPH_PHASES,
    (repo_index_module, "symmetric_matrix", "W: symmetric union (max with its transpose)"),
    (service_module, "save_index", "save snapshot"),
]


class BusyCores:
    """The host's busy processors (0..cores), sampled from /proc/stat every `period` seconds on a
    thread; empty where there is no /proc/stat."""

    def __init__(self, period: float = 0.05) -> None:
        self.period = period
        self.samples: list[tuple[float, float]] = []  # (perf_counter at the sample's end, busy cores)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="busy-cores", daemon=True)

    @staticmethod
    def _ticks() -> tuple[int, int] | None:
        try:
            with open("/proc/stat") as handle:
                fields = [int(v) for v in handle.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        return sum(fields), fields[3] + fields[4]  # all ticks, idle + iowait

    def _sample(self) -> None:
        before = self._ticks()
        cores = os.cpu_count() or 1
        while before is not None and not self._stop.wait(self.period):
            now = self._ticks()
            if now is None:
                return
            total, idle = now[0] - before[0], now[1] - before[1]
            if total > 0:
                self.samples.append((time.perf_counter(), cores * (total - idle) / total))
            before = now

    def __enter__(self) -> BusyCores:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def during(self, spans: list[tuple[float, float]]) -> float | None:
        """The mean busy cores over samples taken inside `spans`; None without one. The spans are
        merged and searched by bisection: a per-file phase has one span a file (23,160 on x8)."""
        starts: list[float] = []
        ends: list[float] = []
        for start, end in sorted(spans):
            if ends and start <= ends[-1]:
                ends[-1] = max(ends[-1], end)
            else:
                starts.append(start)
                ends.append(end)
        inside = [busy for at, busy in self.samples
                  if (i := bisect.bisect_right(starts, at) - 1) >= 0 and at <= ends[i]]
        return sum(inside) / len(inside) if inside else None


def timed_build(work: Path) -> tuple[dict[str, float], float, dict[str, float]]:
    """The cold build's seconds per phase, its total, and the mean busy cores during each phase."""
    phases = Phases()
    undo = [phases.wrap(*spec) for spec in COLD_PHASES]
    try:
        service = RepoService.open(work)
        assert isinstance(service, RepoService), service
        with BusyCores() as busy:
            started = time.perf_counter()
            report = service.ensure_index(full=True)
            ended = time.perf_counter()
    finally:
        for restore in reversed(undo):
            restore()
    assert not hasattr(report, "kind"), report
    total = ended - started
    seconds = dict(phases.seconds)
    seconds["other (W matrix, records, arrays)"] = total - sum(seconds.values())
    cores = {name: value for name, spans in phases.spans.items() if (value := busy.during(spans)) is not None}
    return seconds, total, cores


def analysis_split(work: Path, config: Config) -> dict[str, float]:
    """The per-file work of the parse workers, one process, split by step (seconds summed over files)."""
    candidates, _ = list_candidates(work, config.scan)
    seconds: dict[str, float] = defaultdict(float)
    for candidate in candidates:
        source = read_source(work, candidate, config.scan)
        if not isinstance(source, SourceFile):
            continue
        language = language_named(source.language)
        data = source.text.encode("utf-8")
        started = time.perf_counter()
        root = parse(language.name, data).root_node
        parsed = time.perf_counter()
        kept = syntax_module.walk_tree(root, language, config.graph.granularity, source.text.count("\n"), len(data),
                                       config.graph.max_file_nodes)
        walked = time.perf_counter()
        if kept.symbols is not None and not kept.over_limit:
            kept.symbols.finish(root, kept.kept_index, kept.class_scope)
        finished = time.perf_counter()
        syntax = syntax_module.extract_syntax(source.path, source.language, source.text, config.graph.granularity,
                                              config.graph.max_file_nodes)
        extracted = time.perf_counter()  # the same steps again, to get the FileSyntax: not counted
        file_fragments(syntax, config.fragments)
        windowed = time.perf_counter()
        line_tokens(source.text, config.bm25)
        tokenized = time.perf_counter()
        seconds["tree-sitter parse"] += parsed - started
        seconds["syntax walk (kept nodes, definitions, imports)"] += walked - parsed
        seconds["symbols: call query + owners"] += finished - walked
        seconds["windows"] += windowed - extracted
        seconds["tokens by line"] += tokenized - windowed
    return dict(seconds)


# The sources the parse floors parse, set before the workers fork (they inherit it, nothing is pickled).
_FLOOR_SOURCES: list[tuple[str, bytes]] = []


def _parse_share(share: int, shares: int) -> float:
    """Parse every `shares`-th source from `share` on; its seconds on this process."""
    started = time.perf_counter()
    for language, data in _FLOOR_SOURCES[share::shares]:
        parse(language, data)
    return time.perf_counter() - started


def parse_floors(work: Path, config: Config, rounds: int = 3) -> tuple[float, float, int]:
    """(one process's parse of every file, the wall of `index.workers` processes parsing it in
    interleaved shares, the process count), seconds, each the best of `rounds`. The files are read
    first; the workers are started and warmed before the clock runs."""
    candidates, _ = list_candidates(work, config.scan)
    _FLOOR_SOURCES.clear()
    for candidate in candidates:
        source = read_source(work, candidate, config.scan)
        if isinstance(source, SourceFile):
            _FLOOR_SOURCES.append((language_named(source.language).name, source.text.encode("utf-8")))
    _FLOOR_SOURCES.sort(key=lambda item: -len(item[1]))  # interleaved shares of similar sizes
    workers = max(1, config.index.workers)
    one = min(_parse_share(0, 1) for _ in range(rounds))
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pool.starmap(_parse_share, [(share, len(_FLOOR_SOURCES)) for share in range(workers)])  # warm
        walls = []
        for _ in range(rounds):
            started = time.perf_counter()
            pool.starmap(_parse_share, [(share, workers) for share in range(workers)])
            walls.append(time.perf_counter() - started)
    _FLOOR_SOURCES.clear()
    return one, min(walls), workers


EDIT_PHASES = [
    (repo_index_module, "analyze_file", "parse + syntax + windows of the file"),
    (repo_index_module.RepoIndex, "ensure_structure", "load per-file structure"),
    *GRAPH_PHASES,
    (EditGraph, "__init__", "edit graph: built whole (first edit after a load)"),
    (EditGraph, "sync", "edit graph: new nodes, patched rows, fragment rows"),
    (index_edit_module, "build_segment", "BM25: postings segment"),
    (index_edit_module, "compute_stats", "BM25: idf"),
    (index_edit_module, "symmetric_union", "W: new rows and their mirror"),
    (index_edit_module, "strongest_per_row", "W: each new row's top list"),
]


def timed_edit(work: Path, repeats: int) -> tuple[dict[str, float], float, float, str, float]:
    service = RepoService.open(work)
    report = service.ensure_index()
    assert not hasattr(report, "kind"), report
    index = service.index_for_measurement()  # the edit's phases are timed on the index itself
    # A file of the tree's most common language, the one nearest 500 lines.
    files = service.view().indexed_files()
    language = Counter(f.language for f in files).most_common(1)[0][0]
    sizes = [(abs((work / f.path).read_text(errors="replace").count("\n") - 500), f.path)
             for f in files if f.language == language]
    _, path = min(sizes)
    comment = language_named(language).line_comment
    original = (work / path).read_text(encoding="utf-8")
    lines = original.split("\n")
    per_phase: dict[str, list[float]] = defaultdict(list)
    totals, saves = [], []
    first_edit = 0.0
    # One edit more than timed: the first after a load builds the kept edit graph (reported apart).
    for attempt in range(-1, repeats):
        middle = len(lines) // 2
        # Python's figures since issue 13 insert a statement; other languages, a comment line.
        inserted = f"_edited_{attempt} = {attempt}" if language == "python" else f"{comment} edited {attempt}"
        edited = "\n".join(lines[:middle] + [inserted] + lines[middle:])
        source = SourceFile(path, language, edited, content_digest(edited.encode()), len(edited.encode()), 1)
        phases = Phases()
        undo = [phases.wrap(*spec) for spec in EDIT_PHASES]
        try:
            started = time.perf_counter()
            repo_index_module.apply_changes(index, [source], [])
            total = time.perf_counter() - started
        finally:
            for restore in reversed(undo):
                restore()
        if attempt < 0:
            first_edit = total
            continue
        for name, value in phases.seconds.items():
            per_phase[name].append(value)
        per_phase["other (postings merge, W rows, arrays)"].append(total - sum(phases.seconds.values()))
        totals.append(total)
        started = time.perf_counter()
        save_index(index, index_dir(work, service.config), index.snapshot)
        saves.append(time.perf_counter() - started)
    return ({name: statistics.median(values) for name, values in per_phase.items()}, statistics.median(totals),
            statistics.median(saves), f"{path} ({len(lines)} lines)", first_edit)


def table(title: str, rows: dict[str, float], total: float, unit: str = "s",
          cores: dict[str, float] | None = None) -> tuple[Table, list[str]]:
    """`cores`: the mean busy cores during each phase, a column when given."""
    scale = 1000.0 if unit == "ms" else 1.0
    out = Table(title=title)
    out.add_column("phase")
    out.add_column(unit, justify="right")
    out.add_column("share", justify="right")
    if cores is not None:
        out.add_column("cores busy", justify="right")
    markdown = [f"| phase | {unit} | share |" + (" cores busy |" if cores is not None else ""),
                "|---|---:|---:|" + ("---:|" if cores is not None else "")]
    for name, value in sorted(rows.items(), key=lambda item: -item[1]):
        share = f"{100 * value / total:.0f}%" if total > 0 else ""
        busy = [] if cores is None else [f"{cores[name]:.2f}" if name in cores else ""]
        out.add_row(name, f"{value * scale:.2f}", share, *busy)
        markdown.append(f"| {name} | {value * scale:.2f} | {share} |" + "".join(f" {b} |" for b in busy))
    out.add_row("total", f"{total * scale:.2f}", "100%", *([""] if cores is not None else []), style="bold")
    markdown.append(f"| **total** | **{total * scale:.2f}** | |" + (" |" if cores is not None else ""))
    return out, markdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=None, help="tree to index (default: Django 5.1.4)")
    parser.add_argument("--edits", type=int, default=5, help="edits of one file timed (median)")
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "profile-index")
    args = parser.parse_args()
    console = Console()
    source_tree = args.repo or package_source(DJANGO)
    with tempfile.TemporaryDirectory(prefix="repomem-profile-") as scratch:
        work = Path(scratch) / source_tree.name
        shutil.copytree(source_tree, work, ignore=shutil.ignore_patterns(".repomem"))
        config = Config()
        cold, cold_total, cold_cores = timed_build(work)
        split = analysis_split(work, config)
        edit, edit_total, save_seconds, edited, first_edit = timed_edit(work, args.edits)
        one_core, in_parallel, workers = parse_floors(work, config)
    parts = []
    cold_table, cold_md = table(f"cold build of {source_tree.name}: {cold_total:.1f} s", cold, cold_total,
                                cores=cold_cores)
    split_total = sum(split.values())
    split_table, split_md = table("per-file analysis, one process (what the parse workers run)",
                                  split, split_total)
    edit_table, edit_md = table(f"one edited file, in memory: {edited}", edit, edit_total, "ms")
    for rendered in (cold_table, split_table, edit_table):
        console.print(rendered)
        parts.append(rendered)
    console.print(f"saving the snapshot after the edit: {save_seconds * 1000:.0f} ms; the first edit after the "
                  f"load (builds the kept edit graph): {first_edit * 1000:.0f} ms")
    floors = (f"parse floors: one process {one_core:.2f} s, {workers} processes at once {in_parallel:.2f} s "
              f"({one_core / in_parallel:.2f}x); the cold build is {cold_total / one_core:.1f}x the one-core parse, "
              f"{cold_total / in_parallel:.1f}x the parallel one")
    console.print(floors)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # Suffixes appended, not swapped: "--out eval/results/profile-index-1.5M" keeps its ".5M".
    args.out.parent.joinpath(args.out.name + ".json").write_text(json.dumps({
        "repo": source_tree.name, "cold_seconds": cold_total, "cold_phases": cold, "cold_busy_cores": cold_cores,
        "analysis_phases_one_process": split, "edit_file": edited, "edit_ms": edit_total * 1000,
        "edit_phases_ms": {k: v * 1000 for k, v in edit.items()}, "save_after_edit_ms": save_seconds * 1000,
        "first_edit_after_load_ms": first_edit * 1000, "parse_one_process_seconds": one_core,
        "parse_in_parallel_seconds": in_parallel, "parse_processes": workers,
    }, indent=2))
    args.out.parent.joinpath(args.out.name + ".md").write_text("\n".join([
        f"# Index profile: {source_tree.name} (`python scripts/profile_index.py`)", "",
        f"## Cold build, {cold_total:.1f} s", "", *cold_md, "",
        "## Per-file analysis on one process (the parse workers run this; the cold build splits it over "
        "`index.workers`)", "", *split_md, "",
        f"## One edited file in memory: {edited}, {edit_total * 1000:.0f} ms (median of {args.edits}); "
        f"saving the snapshot: {save_seconds * 1000:.0f} ms", "",
        f"The first edit after a load, not in the median, also builds the graph kept between edits: "
        f"{first_edit * 1000:.0f} ms.", "", *edit_md, "",
        "## Parse floors (tree-sitter alone, best of three)", "", floors + ".", "",
    ]))


if __name__ == "__main__":
    main()
