"""A query's latency against a reference commit (not a test: machines are noisy).

    python scripts/bench_query.py --before REV           # Django 5.1.4 from the package index
    python scripts/bench_query.py --before REV --repo DIR

For this checkout and REV (a git worktree, same interpreter), each with its own index of the tree:
`retrieve_at` at seeded random cursors in Python files (top 10; alpha 0.5, the default, and 0, BM25
alone), in alternating rounds, a fresh process each (this machine's noise drifts over minutes;
both sides meet the same drift). Every round also hashes the answers (fragment ids and the bits of
their three scores): the two checkouts must agree, or the change was not exact.
Results: eval/results/bench-query.json and a table (docs/design.md section 7: p50 <= 1 ms, p95 <= 5 ms).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from scripts.bench_sources import django_or  # noqa: E402
from scripts.reference_checkout import alternating_rounds, paired_arguments  # noqa: E402

ALPHAS = (0.5, 0.0)

# Runs inside the checkout under test (PYTHONPATH): brings the index up to date, picks the cursors
# (seeded: the same in both checkouts), answers them once untimed (compiled kernels, caches), then
# times each; prints one JSON object.
PROBE = r"""
import hashlib, json, random, struct, sys, time
from pathlib import Path
from repomem.failures import Failure
from repomem.positions import locate
from repomem.service import RepoService

root, n_cursors, seed = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
service = RepoService.open(root)
service.ensure_index()
files = sorted(f.path for f in service.view().indexed_files() if f.language == "python" and f.fragments > 2)
rng = random.Random(seed)
cursors = []
for _ in range(n_cursors):
    path = rng.choice(files)
    text = (root / path).read_text(encoding="utf-8", errors="replace")
    cursor = locate(root, path, text, rng.randint(1, max(1, text.count("\n"))), None)
    assert not isinstance(cursor, Failure), cursor
    cursors.append(cursor)
alphas = [float(a) for a in sys.argv[4].split(",")]
answers = hashlib.sha256()
for cursor in cursors:
    for alpha in alphas:
        for f in service.view().retrieve_at(cursor, k=10, alpha=alpha).fragments:
            answers.update(struct.pack("<q3d", f.fragment, f.s_ind, f.s_env, f.s_rel))
timings = {str(a): [] for a in alphas}
for cursor in cursors:
    for alpha in alphas:
        started = time.perf_counter()
        service.view().retrieve_at(cursor, k=10, alpha=alpha)
        timings[str(alpha)].append((time.perf_counter() - started) * 1000)
print(json.dumps({"ms": timings, "answers": answers.hexdigest()[:16]}))
"""


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile, interpolated between the two nearest samples (numpy's default, as the
    other benchmarks compute it). The nearest rank above, used before 2026-12-05, gave the maximum
    for any p95 of 20 samples or fewer and the upper of two middle samples for a median."""
    return float(np.percentile(np.asarray(values, dtype=float), q))


def main() -> None:
    parser = paired_arguments(__doc__, "HEAD", 4, ROOT / "eval/results/bench-query.json")
    parser.add_argument("--cursors", type=int, default=200, help="cursors a round")
    args = parser.parse_args()
    tree = django_or(args.repo)
    console = Console()
    alphas = ",".join(str(a) for a in ALPHAS)
    runs = alternating_rounds(args.before, args.rounds, console, tree.name, f"{args.cursors} cursors", PROBE,
                              lambda round_number: [str(tree), str(args.cursors), str(round_number), alphas])
    results = {label: {"ms": {str(a): [] for a in ALPHAS}, "answers": set()} for label in runs}
    for label, measured_runs in runs.items():
        for measured in measured_runs:
            for alpha, values in measured["ms"].items():
                results[label]["ms"][alpha] += values
            results[label]["answers"].add(measured["answers"])
    digests = [sorted(result["answers"]) for result in results.values()]
    same = digests[0] == digests[1]
    table = Table(title=f"retrieve_at, top 10, {tree.name}: {args.rounds} alternating rounds × {args.cursors} "
                        f"cursors (ms)")
    for column in ("checkout", *(f"α {a} p50 / p95" for a in ALPHAS)):
        table.add_column(column, justify="right")
    summary = {}
    for label, result in results.items():
        summary[label] = {alpha: {"p50_ms": percentile(v, 50), "p95_ms": percentile(v, 95),
                                  "mean_ms": statistics.mean(v)} for alpha, v in result["ms"].items()}
        table.add_row(label, *(f"{summary[label][str(a)]['p50_ms']:.2f} / {summary[label][str(a)]['p95_ms']:.2f}"
                               for a in ALPHAS))
    console.print(table)
    console.print("answers bit-identical in both checkouts" if same else "[red]ANSWERS DIFFER between the checkouts")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"tree": str(tree), "rounds": args.rounds, "cursors": args.cursors,
                                    "answers_identical": same, "results": summary}, indent=2) + "\n")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
