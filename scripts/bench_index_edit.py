"""Time of one index edit as the language server makes it: a loaded index takes an
unsaved buffer of one ~500-line file (`RepoService.set_buffer`, which runs `apply_changes`).

    python scripts/bench_index_edit.py PREPARED_COPY --edits 15 [--edited Django-5.1.4/django/contrib/auth/models.py]
    python scripts/bench_index_edit.py PREPARED_COPY --typing
    python scripts/bench_index_edit.py PREPARED_COPY --prepare-from ~/.cache/repomem/packages/django-5.1.4
    python scripts/bench_index_edit.py SCRATCH --before REV --rounds 3   # both kinds of edit, paired
    python scripts/bench_index_edit.py SCRATCH --before REV --saved --edited Django-5.1.4/django/db/models/query.py

`--prepare-from` copies a repository to PREPARED_COPY and builds its index once; later runs load
that index (they never save: buffers stay in memory), so every run times the same edits of the
same index. The checkout timed is the one on PYTHONPATH. As the language server does, the loaded
index is prepared for edits before the first one (`RepoService.prepare_for_edits`: the per-file
structure, the call tables, the graph kept between edits, the kernels) and kept out of the
garbage collector's walks (`cyclic_gc.settle_long_lived`). Prints one JSON line: the
seconds to load and to prepare, the first edit's milliseconds apart, then each later edit's and
their median.

The edits: a statement typed whole in the middle of the file (even edits), and also a function
added at its end (odd ones), so every edit changes the file's syntax tree. `--typing` instead
types three lines into three functions key by key (`TYPED_LINES`), a buffer per keystroke as an
editor sends them: most keystrokes leave the tree as it was. `--saved` writes the whole edits to the
file instead, and times what a resident process (the daemon, the language server's watch) does for a
saved file: `RepoService.read_disk_changes` after the watch saw the write (the file and its time
stamp are put back at the end, so the prepared index stays current).

`--before REV` times both kinds of edit in this checkout and in REV (a git worktree), each in its
own copy of Django under SCRATCH prepared by its own code (the builder digests differ), in
alternating processes, and writes eval/results/bench-index-edit.json: each run's median and p95,
and the median of the pairs' ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # for scripts.*; the repomem timed is the one PYTHONPATH names first

from repomem.cyclic_gc import settle_long_lived  # noqa: E402
from repomem.failures import Failure  # noqa: E402
from repomem.service import RepoService  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("copy", type=Path, help="the prepared copy (made by --prepare-from)")
    parser.add_argument("--prepare-from", type=Path, help="repository to copy and index first")
    parser.add_argument("--edits", type=int, default=15)
    parser.add_argument("--edited", default="Django-5.1.4/django/contrib/auth/models.py")
    parser.add_argument("--typing", action="store_true", help="type lines key by key (see above)")
    parser.add_argument("--saved", action="store_true", help="save the whole edits to disk (see above)")
    parser.add_argument("--one-place", action="store_true",
                        help="whole edits that each change one place (a statement, a function, the way back)")
    parser.add_argument("--before", help="reference commit: time both checkouts, paired (see above)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-index-edit.json")
    args = parser.parse_args()
    if args.before is not None:
        return paired(args)
    if args.prepare_from is not None:
        if args.copy.exists():
            shutil.rmtree(args.copy)
        shutil.copytree(args.prepare_from, args.copy, ignore=shutil.ignore_patterns(".repomem", "__pycache__"))
    started = time.perf_counter()
    service = RepoService.open(args.copy.resolve())
    assert not isinstance(service, Failure), service
    report = service.ensure_index(save=args.prepare_from is not None)
    assert not isinstance(report, Failure), report
    if args.prepare_from is not None:
        print(json.dumps({"prepared": str(args.copy), "action": report.action, "fragments": report.fragments}))
        return 0
    assert report.action == "unchanged", f"the prepared index was {report.action}: prepare it again"
    loaded_s = time.perf_counter() - started
    started = time.perf_counter()
    service.prepare_for_edits()
    settle_long_lived()  # as the language server does once its index is in place
    prepared_s = time.perf_counter() - started
    if not (args.copy / args.edited).is_file():
        raise SystemExit(f"--edited: no file {args.edited} in {args.copy}")
    lines = (args.copy / args.edited).read_text(encoding="utf-8").splitlines()
    edit_ms = saved_edits(service, args.copy / args.edited, lines, args.edits, args.one_place) if args.saved else []
    for text in (() if args.saved else typed_buffers(lines) if args.typing
                 else whole_edits(lines, args.edits, args.one_place)):
        began = time.perf_counter()
        assert service.set_buffer(args.edited, text) is None
        edit_ms.append((time.perf_counter() - began) * 1000)
    later = edit_ms[1:] or edit_ms
    print(json.dumps({"lines": len(lines), "load_s": round(loaded_s, 3), "prepare_s": round(prepared_s, 3),
                      "first_edit_ms": round(edit_ms[0], 1),
                      "edit_ms": [round(ms, 2) for ms in later], "median_edit_ms": round(statistics.median(later), 2),
                      "p95_edit_ms": round(float(np.percentile(later, 95)), 2),  # interpolated, as elsewhere
                      "max_edit_ms": round(max(later), 2)}))
    return 0


def paired(args: argparse.Namespace) -> int:
    """This checkout against `args.before`, both kinds of edit, alternating (see above)."""
    from rich.console import Console
    from rich.table import Table

    from scripts.bench_sources import django_or
    from scripts.reference_checkout import reference_worktree

    # The folder holding Django's sources (the default --edited path starts with its name).
    source = args.prepare_from if args.prepare_from is not None else django_or(None).parent
    console = Console(width=130)
    labels = (f"before {args.before}", "this checkout")
    kinds = {"whole statements and functions": ["--edits", str(args.edits)], "typing key by key": ["--typing"]}
    if args.one_place:
        kinds = {"one statement or function at a time": ["--edits", str(args.edits), "--one-place"]}
    if args.saved:
        kinds = {"whole statements and functions, saved": ["--edits", str(args.edits), "--saved"]}
        if args.one_place:
            kinds = {"one statement or function at a time, saved": ["--edits", str(args.edits), "--saved",
                                                                     "--one-place"]}
    runs: dict[str, dict[str, list[dict]]] = {label: {kind: [] for kind in kinds} for label in labels}

    def probe(checkout: Path, *arguments: str) -> dict:
        run = subprocess.run([sys.executable, str(Path(__file__).resolve()), *arguments, "--edited", args.edited],
                             env={**os.environ, "PYTHONPATH": str(checkout), "REPOMEM_NO_DAEMON": "1"},
                             capture_output=True, text=True, cwd=checkout)
        if run.returncode != 0:
            raise SystemExit(f"{checkout}: {run.stderr[-2000:]}")
        return json.loads(run.stdout.splitlines()[-1])

    with reference_worktree(args.before) as reference, console.status("") as status:
        checkouts = dict(zip(labels, (reference, ROOT)))
        copies = {label: args.copy.resolve() / name for label, name in zip(labels, ("before", "now"))}
        for label, checkout in checkouts.items():
            status.update(f"indexing a copy of {source.name} with {label}")
            probe(checkout, str(copies[label]), "--prepare-from", str(source))
        for round_number in range(args.rounds):
            for kind, arguments in kinds.items():
                for label, checkout in checkouts.items():
                    status.update(f"round {round_number + 1} of {args.rounds}: {kind}, {label}")
                    runs[label][kind].append(probe(checkout, str(copies[label]), *arguments))
    table = Table(title=f"One edited file of {args.edited} in memory (ms; medians of the runs' medians "
                        f"and p95s, {args.rounds} alternating runs each)")
    table.add_column("edits")
    for label in labels:
        table.add_column(f"{label}: median / p95", justify="right")
    table.add_column("this / before, median pair", justify="right")
    summary = {}
    for kind in kinds:
        before, now = ([run["median_edit_ms"] for run in runs[label][kind]] for label in labels)
        p95s = [statistics.median(run["p95_edit_ms"] for run in runs[label][kind]) for label in labels]
        ratio = statistics.median(b / a for a, b in zip(before, now))
        summary[kind] = {"before_median_ms": statistics.median(before), "now_median_ms": statistics.median(now),
                         "before_p95_ms": p95s[0], "now_p95_ms": p95s[1], "ratio": ratio}
        table.add_row(kind, f"{statistics.median(before):.1f} / {p95s[0]:.1f}",
                      f"{statistics.median(now):.1f} / {p95s[1]:.1f}", f"{ratio:.2f}")
    console.print(table)
    args.out.write_text(json.dumps({"before": args.before, "edited": args.edited, "rounds": args.rounds,
                                    "runs": runs, "summary": summary}, indent=2) + "\n")
    console.print(f"written {args.out}")
    return 0


# Typed key by key, each as the first line of a function's body (after its `def` line), in
# functions a third, half and two thirds of the way down the file.
TYPED_LINES = ("self.last_login = timezone.now()", "# a note typed here, with words", "return value + 1")


def whole_edits(lines: list[str], count: int, one_place: bool = False) -> Iterator[str]:
    """A statement typed in the middle of the file (its definitions keep their shape) on even
    edits; odd ones also add a function at the end (the definitions change), so that one version
    differs from the last in two places. `one_place`: each edit changes one place only: the
    statement in the middle, the file as it was, a function at the end, the file as it was..."""
    middle = len(lines) // 2
    indent = lines[middle][: len(lines[middle]) - len(lines[middle].lstrip())]
    for attempt in range(count):
        if one_place and attempt % 2:
            yield "\n".join(lines) + "\n"
            continue
        typed = lines[:middle] + [f"{indent}typed_{attempt} = {attempt}"] + lines[middle:]
        if one_place and attempt % 4 == 2:
            typed = lines + ["", "", f"def typed_{attempt}():", "    pass"]
        elif not one_place and attempt % 2:
            typed += ["", "", f"def typed_{attempt}():", "    pass"]
        yield "\n".join(typed) + "\n"


def saved_edits(service: RepoService, path: Path, lines: list[str], count: int, one_place: bool) -> list[float]:
    """Milliseconds of `read_disk_changes` for each of `whole_edits` written to `path` (the
    watch given 50 ms to see each write, untimed); then the file as it was, time stamp included."""
    original, stamp = path.read_bytes(), path.stat()
    assert service.watch_tree() is False and service.watching, "no watch of the tree here"
    edit_ms = []
    try:
        for text in whole_edits(lines, count, one_place):
            path.write_text(text, encoding="utf-8")
            time.sleep(0.05)
            began = time.perf_counter()
            changed = service.read_disk_changes()
            edit_ms.append((time.perf_counter() - began) * 1000)
            assert changed == (1, 0), changed
    finally:
        path.write_bytes(original)
        os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    return edit_ms


def typed_buffers(lines: list[str]) -> Iterator[str]:
    """The buffer after each keystroke of TYPED_LINES (see above)."""
    for share, line in zip((1 / 3, 1 / 2, 2 / 3), TYPED_LINES):
        after = next(i for i in range(int(len(lines) * share), len(lines)) if lines[i].lstrip().startswith("def "))
        indent = " " * (len(lines[after]) - len(lines[after].lstrip()) + 4)
        typed = indent + line
        for end in range(len(indent) + 1, len(typed) + 1):
            yield "\n".join(lines[: after + 1] + [typed[:end]] + lines[after + 1 :]) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
