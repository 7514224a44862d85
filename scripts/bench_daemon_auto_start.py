"""What a person at a terminal waits for, command after command, with the daemon a command starts
for the next ones (`daemon.auto_start`) against commands that each run alone (not a test).

    python scripts/bench_daemon_auto_start.py                    # the example and Django 5.1.4
    python scripts/bench_daemon_auto_start.py --rounds 3 --pause 5

Each round, in a cache folder of its own (the models and prompt states linked from the user's), a
sequence of the same command run three times at a pseudo-terminal: the first, the second at once
after it (the daemon may still be loading the index), the third after `--pause` seconds (a person
reading the answer). Once with REPOMEM_NO_DAEMON=1 (each command alone, as before), once without
(the first command starts the daemon, which the next two use), in turns; the daemon is stopped at
the end of its sequence. Commands: `retrieve --json` on the tree (the index built beforehand), and
`complete --json` on the example (the 0.5B: tests/small_model.py). Wall seconds of each command
and its `timings_ms`. Results: eval/results/bench-daemon-auto-start.json and a table of medians.
"""

from __future__ import annotations

import argparse
import json
import os
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

from repomem.cache import cache_root  # noqa: E402
from scripts.bench_no_change import TREES, bench_tree  # noqa: E402
from tests.cli_process import run_at_a_terminal  # noqa: E402
from tests.repos import copy_example  # noqa: E402
from tests.small_model import SMALL_MODEL_SETTINGS  # noqa: E402

STEPS = ("first", "second, at once", "third, after the pause")


def sequence(args: list[str], cwd: Path, auto: bool, pause: float) -> list[dict]:
    folder = Path(tempfile.mkdtemp(prefix="rmb-"))  # short: a Unix socket's path holds 107 bytes
    try:
        for shared in ("models", "prompt-states"):
            (cache_root() / shared).mkdir(parents=True, exist_ok=True)
            (folder / shared).symlink_to(cache_root() / shared)
        # The key the indexes were sealed with: another would have every index rebuilt.
        (folder / "index-seal.key").symlink_to(cache_root() / "index-seal.key")
        env = {k: v for k, v in os.environ.items() if k not in ("REPOMEM_NO_DAEMON", "REPOMEM_DEBUG")}
        env.update(REPOMEM_CACHE=str(folder), REPOMEM_CONFIG=str(write_small_config(folder)))
        if not auto:
            env["REPOMEM_NO_DAEMON"] = "1"
        found = []
        for step in STEPS:
            if step == STEPS[2]:
                time.sleep(pause)
            started = time.perf_counter()
            status, stdout, shown = run_at_a_terminal(args, env, cwd, timeout=600)
            seconds = time.perf_counter() - started
            if status != 0:
                raise SystemExit(f"repomem {' '.join(args)} failed: {shown}")
            found.append({"step": step, "wall_s": round(seconds, 3), "timings_ms": json.loads(stdout)["timings_ms"],
                          "started_daemon": "started a daemon" in shown})
        if auto:
            subprocess.run([sys.executable, "-m", "repomem", "daemon", "stop"], env=env, capture_output=True,
                           timeout=120)
        return found
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def write_small_config(folder: Path) -> Path:
    path = folder / "user.toml"
    path.write_text(SMALL_MODEL_SETTINGS)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pause", type=float, default=5.0, help="seconds before the third command")
    parser.add_argument("--trees", default="example,django")
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-daemon-auto-start.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rmb-trees-"))
    cases = []
    for name in args.trees.split(","):
        if name == "example":
            shop = copy_example(work / "shop")
            subprocess.run(["git", "init", "-q"], cwd=shop, check=True)
            cases.append(("example: complete", ["complete", "shop/report.py:9", "--json"], shop))
        else:
            tree = bench_tree(name, Console())  # a git repository in the bench-trees cache
            cases.append((f"{name}: retrieve", ["retrieve", TREES[name][1], "--json"], tree))
    results: dict[str, dict[str, list[list[dict]]]] = {}
    for label, command, cwd in cases:
        subprocess.run([sys.executable, "-m", "repomem", *command], cwd=cwd, capture_output=True, check=True,
                       env={**os.environ, "REPOMEM_NO_DAEMON": "1",
                            "REPOMEM_CONFIG": str(write_small_config(work))})  # index, prompt states
        runs: dict[str, list[list[dict]]] = {"alone": [], "auto-started daemon": []}
        for _ in range(args.rounds):
            for mode, auto in (("alone", False), ("auto-started daemon", True)):
                runs[mode].append(sequence(command, cwd, auto, args.pause))
        results[label] = runs
    shutil.rmtree(work, ignore_errors=True)
    args.out.write_text(json.dumps({"what": __doc__.split("\n")[0], "rounds": args.rounds, "pause_s": args.pause,
                                    "results": results}, indent=1))
    table = Table(title=f"wall seconds at a terminal, median (min-max) of {args.rounds}")
    table.add_column("command")
    table.add_column("step")
    for mode in ("alone", "auto-started daemon"):
        table.add_column(mode, justify="right")
    for label, runs in results.items():
        for index, step in enumerate(STEPS):
            cells = []
            for mode in ("alone", "auto-started daemon"):
                walls = [sequence_[index]["wall_s"] for sequence_ in runs[mode]]
                cells.append(f"{statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f})")
            table.add_row(label, step, *cells)
    Console().print(table)


if __name__ == "__main__":
    main()
