"""What a command costs through `repomem daemon` against a fresh process, in the same run (not a test).

    python scripts/bench_daemon.py                        # Django 5.1.4, 50,000 small files, the example
    python scripts/bench_daemon.py --trees django --rounds 7

For each tree (a git repository with its files committed, made once in ~/.cache/repomem/bench-trees
by scripts/bench_no_change.py's rule; the bundled example for `complete`), in rounds, the reference
first, then the daemon, each command a `python -m repomem` process as a user's shell starts it:
- the reference: REPOMEM_NO_DAEMON=1, the command loads, checks and updates the index itself;
- the daemon: started once per tree in a cache folder of its own (the index and its seal key too),
  warmed by one command and left to make the index ready for edits and watch the tree.
Measured: `retrieve --json` with nothing changed (`timings_ms.index` and the command's wall), the
same after one function was appended to one file, and `index --json` with nothing changed
(`seconds`); on the example, `complete` (wall, and `timings_ms.load_model`). Each round restores
the edited file and lets both bring their index up to date, untimed.
Results: eval/results/bench-daemon.json and a table of medians (min-max).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from repomem.cache import cache_root  # noqa: E402
from scripts.bench_no_change import TREES, bench_tree  # noqa: E402
from scripts.bench_no_change import timed_repomem as _repomem  # noqa: E402

EXAMPLE = ("examples/shop", "shop/report.py:9")
MODES = ("fresh process", "daemon")


def _environment(cache: Path, daemon: bool) -> dict[str, str]:
    environment = {k: v for k, v in os.environ.items() if k != "REPOMEM_NO_DAEMON"}
    environment["REPOMEM_CACHE"] = str(cache)
    if not daemon:
        environment["REPOMEM_NO_DAEMON"] = "1"
    return environment


def _wait_until_watched(environment: dict[str, str], tree: Path) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status, _ = _repomem(environment, tree, "daemon", "status", "--json")
        if any(r["root"] == str(tree.resolve()) and r["watching"] for r in status.get("repositories", [])):
            return
        time.sleep(0.5)
    raise SystemExit(f"the daemon never watched {tree}")


def measure_tree(tree: Path, edited: str, cursor: str, cache: Path, rounds: int) -> dict:
    samples: dict[str, dict[str, list[float]]] = {mode: {} for mode in MODES}
    environments = {mode: _environment(cache, mode == "daemon") for mode in MODES}
    _repomem(environments["fresh process"], tree, "index", "--json")  # built (or found) once, untimed
    _repomem(environments["daemon"], tree, "retrieve", cursor, "--json")  # the daemon loads it
    _wait_until_watched(environments["daemon"], tree)
    path = tree / edited
    original = path.read_bytes()
    for number in range(rounds):
        for mode in MODES:
            environment = environments[mode]

            def keep(key: str, value: float, mode: str = mode) -> None:
                samples[mode].setdefault(key, []).append(value)

            answer, wall = _repomem(environment, tree, "retrieve", cursor, "--json")
            keep("retrieve, nothing changed: index step s", answer["timings_ms"]["index"] / 1000)
            keep("retrieve, nothing changed: command wall s", wall)
            report, wall = _repomem(environment, tree, "index", "--json")
            keep("index, nothing changed: index step s", report["seconds"])
            path.write_bytes(original + f"\n\ndef bench_added_{number}(x):\n    return x\n".encode())
            try:
                answer, wall = _repomem(environment, tree, "retrieve", cursor, "--json")
                keep("retrieve, one file edited: index step s", answer["timings_ms"]["index"] / 1000)
                keep("retrieve, one file edited: command wall s", wall)
            finally:
                path.write_bytes(original)
            _repomem(environment, tree, "index", "--json")  # both indexes as the files are, untimed
    return samples


def measure_complete(cache: Path, rounds: int) -> dict:
    samples: dict[str, dict[str, list[float]]] = {mode: {} for mode in MODES}
    folder, cursor = EXAMPLE
    tree = ROOT / folder
    for _ in range(rounds + 1):
        for mode in MODES:
            answer, wall = _repomem(_environment(cache, mode == "daemon"), tree, "complete", cursor, "--json")
            samples[mode].setdefault("complete: command wall s", []).append(wall)
            samples[mode].setdefault("complete: model start s", []).append(answer["timings_ms"]["load_model"] / 1000)
    for mode in MODES:  # the first round: the daemon's first command starts its model
        for values in samples[mode].values():
            del values[0]
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", default=",".join([*TREES, "complete"]),
                        help="comma-separated, from: " + ", ".join([*TREES, "complete"]))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-daemon.json")
    args = parser.parse_args()
    console = Console()
    results: dict = {"rounds": args.rounds, "trees": {}}
    for tree_name in args.trees.split(","):
        # A cache folder of the tree's own (its daemon, its indexes' seal key) with the user's
        # models and prompt states, and a short path: a Unix socket's holds 107 bytes.
        cache = Path(tempfile.mkdtemp(prefix="rmb-"))
        for shared in ("models", "prompt-states"):
            (cache_root() / shared).mkdir(parents=True, exist_ok=True)
            (cache / shared).symlink_to(cache_root() / shared)
        daemon_environment = _environment(cache, True)
        _repomem(daemon_environment, ROOT, "daemon", "start", "--idle-minutes", "30")
        try:
            if tree_name == "complete":
                with console.status(f"complete: {args.rounds} rounds"):
                    results["trees"][tree_name] = measure_complete(cache, args.rounds)
                continue
            edited, cursor = TREES[tree_name]
            tree = bench_tree(tree_name, console)
            with console.status(f"{tree_name}: {args.rounds} rounds"):
                results["trees"][tree_name] = measure_tree(tree, edited, cursor, cache, args.rounds)
        finally:
            _repomem(daemon_environment, ROOT, "daemon", "stop")
            shutil.rmtree(cache, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    table = Table(title=f"a command with and without the daemon: medians (min-max) of {args.rounds} rounds, seconds")
    for column in ("tree", "measure", *MODES, "ratio"):
        table.add_column(column)
    for tree_name, samples in results["trees"].items():
        for key in samples[MODES[0]]:
            fresh, daemon = samples[MODES[0]][key], samples[MODES[1]][key]
            cells = [f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})" for v in (fresh, daemon)]
            if statistics.median(daemon) < 0.001:  # under a millisecond: no ratio worth printing
                table.add_row(tree_name, key, *cells, "-")
                continue
            ratio = statistics.median(fresh) / statistics.median(daemon)
            table.add_row(tree_name, key, *cells, f"{ratio:.0f}x" if ratio >= 10 else f"{ratio:.1f}x")
    console.print(table)


if __name__ == "__main__":
    main()
