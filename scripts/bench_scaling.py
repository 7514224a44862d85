"""How indexing and retrieval grow with the size of the repository (issue 13): not a test.

    python scripts/bench_scaling.py            # four trees, ~40k to ~1.5M lines, pinned sdists

Each tree is a copy of one or more pinned sdists from the package index (hash-checked, cached in
~/.cache/repomem/packages). For each: `repomem index --full` in a fresh process (wall time, peak
RSS of the indexing process or of its largest parse worker, index size on disk), then retrieval
latency over random cursors in this process. Growth is
judged by the exponent of a power-law fit (time ~ lines^b): b = 1 is linear. Writes
eval/results/bench-scaling.json and bench-scaling.png.
"""

from __future__ import annotations

import argparse
import json
import random
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
from repomem.packages import package_source  # noqa: E402
from repomem.positions import locate  # noqa: E402
from repomem.service import RepoService  # noqa: E402

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


def assemble(name: str, work: Path) -> Path:
    tree = work / name
    tree.mkdir()
    for requirement in TREES[name]:
        source = package_source(requirement, PINNED[requirement])
        if isinstance(source, Failure):
            raise SystemExit(f"{requirement}: {source.message}")
        shutil.copytree(source, tree / source.name, ignore=shutil.ignore_patterns(".repomem", ".complete"))
    subprocess.run(["git", "init", "-q", str(tree)], check=True)  # one repository, walked as git sees it
    return tree


def cold_index(tree: Path) -> dict:
    command = [sys.executable, "-c",
               "import resource, runpy, sys; sys.argv = ['repomem', 'index', sys.argv[1], '--json', '--full'];"
               "code = 0\ntry: runpy.run_module('repomem', run_name='__main__')\n"
               "except SystemExit as e: code = e.code\n"
               "print('PEAK_KB', max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
               "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss), file=sys.stderr); sys.exit(code)",
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


def indexed_lines(service: RepoService) -> int:
    index = service.index_for_measurement()  # lines as the syntax trees counted them
    index.ensure_structure()
    return int(sum(s.n_lines for s in index.syntax if s is not None))


def retrieval(service: RepoService, cursors: int, seed: int) -> dict:
    rng = random.Random(seed)
    files = [f.path for f in service.view().indexed_files() if f.language == "python" and f.fragments > 2]
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
    figure, axes = plt.subplots(1, 3, figsize=(14, 4))
    for axis, key, label in ((axes[0], "wall_s", "cold index, s"), (axes[1], "peak_rss_mb", "peak RSS, MB"),
                             (axes[2], "p50_ms", "retrieval p50, ms")):
        values = np.array([r[key] for r in rows], dtype=float)
        axis.loglog(lines, values, "o-", label="measured")
        # The linear reference through the middle point: parallel lines mean linear growth.
        middle = len(rows) // 2
        axis.loglog(lines, values[middle] * lines / lines[middle], "--", color="grey", label="linear")
        for row, x, y in zip(rows, lines, values):
            axis.annotate(row["tree"], (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        axis.set_xlabel("indexed lines")
        axis.set_title(f"{label} (slope {power_law_exponent(list(lines), list(values)):.2f})")
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(out, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", default=",".join(TREES), help="comma-separated, from: " + ", ".join(TREES))
    parser.add_argument("--cursors", type=int, default=100)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-scaling")
    args = parser.parse_args()
    console = Console()
    rows = []
    with tempfile.TemporaryDirectory(prefix="repomem-scaling-") as scratch:
        for name in args.trees.split(","):
            tree = assemble(name, Path(scratch))
            console.print(f"{name}: indexing ...")
            row = {"tree": name, "packages": TREES[name], **cold_index(tree)}
            service = RepoService.open(tree)
            service.ensure_index()
            row["lines"] = indexed_lines(service)
            row.update(retrieval(service, args.cursors, seed=0))
            rows.append(row)
            console.print(row)
            shutil.rmtree(tree)
    rows.sort(key=lambda r: r["lines"])
    table = Table(title="repomem scaling (cold index in a fresh process; retrieval top-10, α 0.5)")
    for column in ("tree", "lines", "files", "fragments", "cold index s", "peak RSS MB", "index MB",
                   "retrieval p50 / p95 ms"):
        table.add_column(column, justify="left" if column == "tree" else "right")
    for r in rows:
        table.add_row(r["tree"], f"{r['lines']:,}", f"{r['files']:,}", f"{r['fragments']:,}", f"{r['wall_s']:.1f}",
                      f"{r['peak_rss_mb']:.0f}", f"{r['index_mb']:.0f}", f"{r['p50_ms']:.1f} / {r['p95_ms']:.1f}")
    console.print(table)
    lines = [r["lines"] for r in rows]
    exponents = {key: power_law_exponent(lines, [r[key] for r in rows])
                 for key in ("wall_s", "peak_rss_mb", "index_mb", "p50_ms")} if len(rows) > 1 else {}
    console.print({"power-law exponents vs lines (1 = linear)": exponents})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"rows": rows, "exponents": exponents}, indent=2))
    if len(rows) > 1:
        plot(rows, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
