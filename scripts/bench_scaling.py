"""How indexing and retrieval grow with the size of the repository: not a test.

    python scripts/bench_scaling.py                                   # four trees, ~40k to ~1.5M lines
    python scripts/bench_scaling.py --trees django-x1,django-x2,django-x4,django-x8,fifty-k \
        --out eval/results/bench-scaling-django

Each tree is a copy of one or more pinned sdists from the package index (hash-checked, cached in
~/.cache/repomem/packages); `django-xK` is K copies of Django 5.1.4, each under its own renamed
top package (`django2`, ..., its imports rewritten: K projects side by side, 4M lines at K = 8);
`fifty-k` is 50,000 small files in 100 folders. Each tree is a git repository. For each:
`repomem index --full` in a fresh process (wall time, peak RSS of the indexing process or of its
largest parse worker, index size on disk), `repomem index` with nothing changed in a fresh
process (its `seconds`, median of 3 after one run), `load_index` in this process (median of 3), and
retrieval latency over random cursors in this process. Growth is judged by the exponent of a
power-law fit (time ~ lines^b): b = 1 is linear. Writes OUT.json and OUT.png.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.failures import Failure  # noqa: E402
from repomem.index.snapshot_load import load_index  # noqa: E402
from repomem.packages import package_source  # noqa: E402
from repomem.positions import locate  # noqa: E402
from repomem.service import RepoService  # noqa: E402
from scripts.bench_no_change import _git_repository  # noqa: E402

# requirement -> sha256 of its sdist (pip download --no-deps --no-binary :all:)
PINNED = {
    "torchmetrics==0.11.0": "c838e0491d80775daadd0802e27ae3af112a52086c9ba8cbcd1e2807243c89ac",
    "networkx==3.4.2": "307c3669428c5362aab27c8a1260aa8f47c4e91d3891f48be0141738d8d053e1",
    "django==5.1.4": "de450c09e91879fa5a307f696e57c851955c910a438a35e6b4c895e86bedc82a",
    "sympy==1.13.3": "b27fd2c6530e0ab39e275fc9b683895367e51d5da91baa8d3d64db2565fec4d9",
    "sqlalchemy==2.0.36": "7f2767680b6d2398aea7082e45a774b2b0767b5c8d8ffb9c8b683088ea9b29c5",
}
TREES = {
    "torchmetrics": ["torchmetrics==0.11.0"],
    "networkx": ["networkx==3.4.2"],
    "django": ["django==5.1.4"],
    "sympy+sqlalchemy+networkx": ["sympy==1.13.3", "sqlalchemy==2.0.36", "networkx==3.4.2"],
}


DJANGO_COPIES = {f"django-x{copies}": copies for copies in (1, 2, 4, 8)}
_DJANGO_NAME = re.compile(r"\bdjango\b")


def _django_copies(copies: int, tree: Path) -> None:
    """`copies` Django sources side by side, copy k's top package `django{k}` and its imports with it."""
    source = package_source("django==5.1.4", PINNED["django==5.1.4"])
    if isinstance(source, Failure):
        raise SystemExit(source.message)
    for copy in range(1, copies + 1):
        target = tree / f"copy{copy}"
        shutil.copytree(source, target, ignore=shutil.ignore_patterns(".repomem", ".complete"))
        if copy == 1:
            continue
        (target / "django").rename(target / f"django{copy}")
        for path in target.rglob("*.py"):
            text = path.read_text(encoding="utf-8", errors="surrogateescape")
            path.write_text(_DJANGO_NAME.sub(f"django{copy}", text), encoding="utf-8", errors="surrogateescape")


def assemble(name: str, work: Path) -> Path:
    tree = work / name
    if name == "fifty-k":
        return _git_repository(None, tree)
    tree.mkdir()
    if name in DJANGO_COPIES:
        _django_copies(DJANGO_COPIES[name], tree)
        subprocess.run(["git", "init", "-q", str(tree)], check=True)
        return tree
    for requirement in TREES[name]:
        source = package_source(requirement, PINNED[requirement])
        if isinstance(source, Failure):
            raise SystemExit(f"{requirement}: {source.message}")
        shutil.copytree(source, tree / source.name, ignore=shutil.ignore_patterns(".repomem", ".complete"))
    subprocess.run(["git", "init", "-q", str(tree)], check=True)  # one repository, walked as git sees it
    return tree


def cold_index(tree: Path) -> dict:
    # `repomem` ends with os._exit (no interpreter teardown: repomem/cli/process_exit.py), so the
    # peak is read by a parent: the largest of its waited-for descendants (the command or a worker).
    command = [sys.executable, "-c",
               "import resource, subprocess, sys\n"
               "run = subprocess.run([sys.executable, '-m', 'repomem', 'index', sys.argv[1], '--json', '--full'])\n"
               "print('PEAK_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
               "sys.exit(run.returncode)",
               str(tree)]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"indexing {tree} failed: {result.stderr[-2000:]}")
    peak_kb = int(result.stderr.rsplit("PEAK_KB", 1)[1].split()[0])
    report = json.loads(result.stdout)
    return {"wall_s": wall, "peak_rss_mb": peak_kb / 1024, "files": report["files"],
            "fragments": report["fragments"], "nodes": report["nodes"], "edges": report["edges"],
            "index_mb": report["index_bytes"] / 1e6, "skipped": len(report["skipped"]),
            "outside_graph": len(report.get("outside_graph", []))}


def unchanged_check(tree: Path, repeats: int = 3) -> float:
    """`repomem index` in a fresh process with nothing changed: its index step, seconds (median;
    one run first, which may record the scan memo)."""
    seconds = []
    for _ in range(repeats + 1):
        result = subprocess.run([sys.executable, "-m", "repomem", "index", str(tree), "--json"], capture_output=True,
                                text=True, cwd=ROOT)
        report = json.loads(result.stdout)
        assert report["action"] == "unchanged", report["action"]
        seconds.append(report["seconds"])
    return statistics.median(seconds[1:])


def load_seconds(service: RepoService, repeats: int = 3) -> float:
    """load_index in this process (median; one load first: numba's first kernel is a process's, not the load's)."""
    times = []
    for _ in range(repeats + 1):
        started = time.perf_counter()
        loaded = load_index(service.root, service.config)
        times.append(time.perf_counter() - started)
        assert not isinstance(loaded, Failure), loaded
    return statistics.median(times[1:])


def indexed_lines(service: RepoService) -> int:
    index = service.index_for_measurement()  # lines as the syntax trees counted them
    index.ensure_structure()
    return int(sum(s.n_lines for s in index.syntax if s is not None))


def retrieval(service: RepoService, cursors: int, seed: int) -> dict:
    rng = random.Random(seed)
    python = [f for f in service.view().indexed_files() if f.language == "python"]
    # Files of several fragments where there are such (a cursor inside a file's only fragment is a
    # query its own file answers); a tree of one-fragment files has none.
    files = [f.path for f in python if f.fragments > 2] or [f.path for f in python]
    latencies = []
    for _ in range(cursors):
        path = rng.choice(files)
        text = (service.root / path).read_text(encoding="utf-8", errors="replace")
        cursor = locate(service.root, path, text, rng.randint(1, max(1, text.count("\n"))), None)
        assert not isinstance(cursor, Failure), cursor
        started = time.perf_counter()
        service.view().retrieve_at(cursor, k=10, alpha=0.5)
        latencies.append((time.perf_counter() - started) * 1000)
    return {"p50_ms": statistics.median(latencies), "p95_ms": float(np.percentile(latencies, 95))}


def power_law_exponent(sizes: list[float], values: list[float]) -> float:
    slope, _ = np.polyfit(np.log(sizes), np.log(values), 1)
    return float(slope)


def plot(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = np.array([r["lines"] for r in rows], dtype=float)
    panels = [("wall_s", "cold index, s"), ("peak_rss_mb", "peak RSS, MB"), ("index_mb", "index on disk, MB"),
              ("load_s", "load, s"), ("unchanged_s", "nothing changed, s"), ("p50_ms", "retrieval p50, ms")]
    panels = [(key, label) for key, label in panels if all(key in r for r in rows)]
    columns = min(3, len(panels))
    figure, axes = plt.subplots((len(panels) + columns - 1) // columns, columns,
                                figsize=(4.8 * columns, 3.8 * ((len(panels) + columns - 1) // columns)))
    family = [i for i, r in enumerate(rows) if r["tree"] in DJANGO_COPIES]
    fit = family if len(family) > 1 else list(range(len(rows)))
    others = [i for i in range(len(rows)) if i not in fit]
    for axis, (key, label) in zip(np.atleast_1d(axes).ravel(), panels):
        values = np.array([r[key] for r in rows], dtype=float)
        axis.loglog(lines[fit], values[fit], "o-", label="Django copies" if fit == family else "measured")
        if others:  # another shape of tree (50,000 small files): beside the family, not on its line
            axis.loglog(lines[others], values[others], "s", color="tab:orange", label="other trees")
        # The linear reference through the family's middle point: parallel lines mean linear growth.
        middle = fit[len(fit) // 2]
        axis.loglog(lines[fit], values[middle] * lines[fit] / lines[middle], "--", color="grey", label="linear")
        for row, x, y in zip(rows, lines, values):
            axis.annotate(row["tree"], (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        axis.set_xlabel("indexed lines")
        slope = power_law_exponent(list(lines[fit]), list(values[fit]))
        axis.set_title(f"{label} (slope {slope:.2f})", fontsize=9)
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    names = [*TREES, *DJANGO_COPIES, "fifty-k"]
    parser.add_argument("--trees", default=",".join(TREES), help="comma-separated, from: " + ", ".join(names))
    parser.add_argument("--cursors", type=int, default=100)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-scaling")
    parser.add_argument("--keep", action="store_true",
                        help="keep OUT.json's rows of the trees not measured now (a tree measured again is replaced)")
    parser.add_argument("--plot-only", action="store_true", help="draw OUT.png from OUT.json, measure nothing")
    args = parser.parse_args()
    if args.plot_only:
        plot(sorted(json.loads(args.out.with_suffix(".json").read_text())["rows"], key=lambda r: r["lines"]),
             args.out.with_suffix(".png"))
        return
    console = Console()
    measured_now = set(args.trees.split(","))
    kept = json.loads(args.out.with_suffix(".json").read_text())["rows"] if args.keep else []
    rows = [r for r in kept if r["tree"] not in measured_now]
    with tempfile.TemporaryDirectory(prefix="repomem-scaling-") as scratch:
        for name in args.trees.split(","):
            tree = assemble(name, Path(scratch))
            console.print(f"{name}: indexing ...")
            row = {"tree": name, "packages": TREES.get(name, ["django==5.1.4"] if name in DJANGO_COPIES else []),
                   **cold_index(tree)}
            row["unchanged_s"] = unchanged_check(tree)
            service = RepoService.open(tree)
            service.ensure_index()
            row["lines"] = indexed_lines(service)
            row["load_s"] = load_seconds(service)
            row["index_mb_per_million_lines"] = row["index_mb"] / (row["lines"] / 1e6)
            row.update(retrieval(service, args.cursors, seed=0))
            del service
            rows.append(row)
            console.print(row)
            shutil.rmtree(tree)
            args.out.parent.mkdir(parents=True, exist_ok=True)  # each tree's row kept as soon as measured
            args.out.with_suffix(".json").write_text(json.dumps({"rows": rows}, indent=2))
    rows.sort(key=lambda r: r["lines"])
    table = Table(title="repomem scaling (cold index in a fresh process; retrieval top-10, α 0.5)")
    for column in ("tree", "lines", "files", "fragments", "cold index s", "peak RSS MB", "index MB (per M lines)",
                   "load s", "nothing changed s", "retrieval p50 / p95 ms"):
        table.add_column(column, justify="left" if column == "tree" else "right")
    for r in rows:
        table.add_row(r["tree"], f"{r['lines']:,}", f"{r['files']:,}", f"{r['fragments']:,}", f"{r['wall_s']:.1f}",
                      f"{r['peak_rss_mb']:.0f}", f"{r['index_mb']:.0f} ({r['index_mb_per_million_lines']:.0f})",
                      f"{r['load_s']:.3f}", f"{r['unchanged_s']:.3f}", f"{r['p50_ms']:.1f} / {r['p95_ms']:.1f}")
    console.print(table)
    # The slope of one family of trees: Django's copies when they were measured (the 50,000 small
    # files are another shape, plotted beside them), else every tree.
    family = [r for r in rows if r["tree"] in DJANGO_COPIES]
    fitted = family if len(family) > 1 else rows
    lines = [r["lines"] for r in fitted]
    exponents = {key: power_law_exponent(lines, [r[key] for r in fitted])
                 for key in ("wall_s", "peak_rss_mb", "index_mb", "load_s", "unchanged_s", "p50_ms")} \
        if len(fitted) > 1 else {}
    console.print({"power-law exponents vs lines (1 = linear)": exponents})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"rows": rows, "exponents": exponents}, indent=2))
    if len(rows) > 1:
        plot(rows, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
