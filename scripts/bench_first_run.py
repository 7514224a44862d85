"""A new user's first run against a reference commit: the kernels compiled from nothing (not a test).

    python scripts/bench_first_run.py --before REV [--rounds 3] [--out eval/results/bench-first-run.json]

For this checkout and REV (a git worktree, same interpreter), in alternating rounds, each run in a
fresh numba cache (NUMBA_CACHE_DIR: nothing compiled), its own index cache and no stored prompt
states (a new user has none), a `python -m repomem` process started in the checkout as a shell
starts it:
- `complete`: the README's first command on a fresh copy of the bundled example (the answer must be
  `compute_tax(amount_cents, tax_class)`), wall seconds;
- `step`: the kernel step alone (`compile_kernels_once`, as `RepoService.ensure_index` calls it);
- `two at once`: two processes starting the step together on one fresh cache (the test suite's two
  workers on a fresh machine, an editor's server beside a command), wall until both are done.
Results: the JSON file and a table of medians (min-max) and the median of the pairs' ratios.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from scripts.reference_checkout import reference_worktree  # noqa: E402

EXPECTED = "compute_tax(amount_cents, tax_class)"
STEP = ("from repomem.kernel_compile import compile_kernels_once, compiled_marker; "
        "from repomem.progress import NoProgress; compile_kernels_once(NoProgress()); "
        "assert compiled_marker().exists()")
MEASURES = ("complete", "step", "two at once")


def timed(checkout: Path, scratch: Path, measure: str) -> float:
    """Wall seconds of one `measure` in `checkout`, from a fresh numba cache under `scratch`."""
    kernels, example = scratch / "numba", scratch / "example"
    config = scratch / "config.toml"
    config.write_text(f'[index]\ncache_dir = "{scratch / "indexes"}"\n\n[model]\nprompt_cache_mb = 0\n')
    environment = {"NUMBA_CACHE_DIR": str(kernels), "REPOMEM_CONFIG": str(config), "REPOMEM_NO_DAEMON": "1",
                   "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    if measure == "complete":
        shutil.copytree(ROOT / "examples" / "shop", example, ignore=shutil.ignore_patterns(".repomem"))
        commands = [[sys.executable, "-m", "repomem", "complete", str(example / "shop" / "report.py") + ":9"]]
    else:
        commands = [[sys.executable, "-c", STEP]] * (2 if measure == "two at once" else 1)
    started = time.perf_counter()
    processes = [subprocess.Popen(command, cwd=checkout, env=environment, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for command in commands]
    outputs = [process.communicate() for process in processes]
    seconds = time.perf_counter() - started
    for process, (out, err) in zip(processes, outputs):
        if process.returncode != 0 or (measure == "complete" and EXPECTED not in out):
            raise SystemExit(f"{checkout} {measure}: exit {process.returncode}\n{out[-1000:]}\n{err[-2000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", required=True, help="reference commit")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of each checkout")
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-first-run.json")
    args = parser.parse_args()
    console = Console(width=130)
    labels = (f"before {args.before}", "this checkout")
    runs: dict[str, dict[str, list[float]]] = {label: {m: [] for m in MEASURES} for label in labels}
    with reference_worktree(args.before) as reference, console.status("") as status:
        checkouts = dict(zip(labels, (reference, ROOT)))
        for round_number in range(args.rounds):
            for measure in MEASURES:
                for label, checkout in checkouts.items():
                    status.update(f"round {round_number + 1} of {args.rounds}: {measure}, {label}")
                    with tempfile.TemporaryDirectory(prefix="bench-first-run-") as scratch:
                        runs[label][measure].append(timed(checkout, Path(scratch), measure))
    table = Table(title="A first run, every kernel compiled from nothing (wall seconds, median (min-max))")
    table.add_column("measure")
    for label in labels:
        table.add_column(label, justify="right")
    table.add_column("this / before, median pair", justify="right")
    summary = {}
    for measure in MEASURES:
        before, now = runs[labels[0]][measure], runs[labels[1]][measure]
        ratio = statistics.median(b / a for a, b in zip(before, now))
        summary[measure] = {"before": statistics.median(before), "now": statistics.median(now), "ratio": ratio}
        table.add_row(measure, *(f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})" for v in (before, now)),
                      f"{ratio:.2f}")
    console.print(table)
    args.out.write_text(json.dumps({"before": args.before, "rounds": args.rounds, "runs": runs,
                                    "summary": summary}, indent=2) + "\n")
    console.print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
