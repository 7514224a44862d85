"""What a command pays for the index when nothing changed, or one file did (not a test).

    python scripts/bench_no_change.py                         # Django 5.1.4 and 50,000 small files
    python scripts/bench_no_change.py --before REV --rounds 5
    python scripts/bench_no_change.py --trees django

For this checkout and a reference commit (a git worktree of REV, same interpreter), in the same
run and in turns: each tree is a git repository with its files committed (what a user has; made
once in ~/.cache/repomem/bench-trees), indexed once by each checkout (each in its own cache
folder), then timed as a user runs it, a fresh `python -m repomem` process each time:
- `repomem index --json` with nothing changed: its `seconds` (the index step) and the process's wall,
  three times right after the first build, then in each round;
- `repomem retrieve FILE:LINE --json` with nothing changed: `timings_ms.index` and the wall;
- `repomem index --json` after one function was appended to one file (then the file is restored and
  indexed again, untimed).
`--index-in-repo`: each checkout indexes its own copy of the tree into the folder a user's index
takes by default, `.repomem` in the repository (git then lists what it holds unless told not to),
instead of a cache folder of its own.
Results: eval/results/bench-no-change.json and a table of medians (min-max).
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

from scripts.bench_sources import django_or  # noqa: E402

# The trees as git repositories, kept between runs (the benchmark leaves them as it found them).
TREE_CACHE = Path.home() / ".cache" / "repomem" / "bench-trees"
# (tree, the file edited, the cursor retrieved at)
TREES = {
    "django": ("django/db/models/query.py", "django/db/models/query.py:120"),
    "fifty-k": ("part042/mod0250.py", "part042/mod0250.py:3"),
}


def _git_repository(files_from: Path | None, folder: Path) -> Path:
    """`folder` as a git repository holding `files_from`'s files, or 50,000 small ones (100 folders
    of 500), all committed."""
    if files_from is not None:
        shutil.copytree(files_from, folder, symlinks=True)
    else:
        for part in range(100):
            sub = folder / f"part{part:03d}"
            sub.mkdir(parents=True)
            for number in range(500):
                (sub / f"mod{number:04d}.py").write_text(
                    f"def f{number}(x):\n    return x + {number}\n\n\ndef g{number}(y):\n    return f{number}(y) * 2\n")
    git = ["git", "-C", str(folder), "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "tree"], check=True)
    return folder


def bench_tree(name: str, console: Console) -> Path:
    """The tree `name` of TREES as a git repository in TREE_CACHE, made the first time (50,000
    files take minutes to write here)."""
    tree = TREE_CACHE / name
    if not (tree / ".git").is_dir():
        shutil.rmtree(tree, ignore_errors=True)
        with console.status(f"{name}: copying and committing into {tree}"):
            _git_repository(django_or(None) if name == "django" else None, tree)
    return tree


def timed_repomem(environment: dict[str, str], cwd: Path, *args: str) -> tuple[dict, float]:
    """`python -m repomem ARGS` as a user's shell starts it: its JSON answer (`--json`, else {})
    and its wall time in seconds; a failure ends the benchmark with its stderr."""
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "repomem", *args], env=environment, capture_output=True, text=True,
                         cwd=cwd)
    wall = time.perf_counter() - started
    if run.returncode != 0:
        raise SystemExit(f"{cwd} {' '.join(args)}: {run.stderr[-2000:]}")
    return (json.loads(run.stdout) if "--json" in args else {}), wall


def _repomem(checkout: Path, cache: Path, *args: str) -> tuple[dict, float]:
    """`cache`: the checkout's own folder; its indexes go there unless it holds IN_REPO."""
    config = cache / "config.toml"
    config.write_text("" if (cache / IN_REPO).exists() else f'[index]\ncache_dir = "{cache / "indexes"}"\n')
    # Never answered by a daemon (one a terminal command started stays up 30 idle minutes): the
    # figure is a fresh process's, as the reference checkout's commands are.
    environment = {**os.environ, "PYTHONPATH": str(checkout), "REPOMEM_CONFIG": str(config), "REPOMEM_NO_DAEMON": "1"}
    return timed_repomem(environment, checkout, *args)


IN_REPO = "index-in-repo"  # a file in a checkout's cache folder: its index lives in its tree's .repomem


def measure(checkouts: dict[str, Path], caches: dict[str, Path], trees: dict[str, Path], edited: str, cursor: str,
            rounds: int) -> dict:
    """`trees`: the tree each checkout indexes (one tree for both, or a copy each)."""
    samples: dict[str, dict[str, list[float]]] = {name: {} for name in checkouts}

    def keep(name: str, key: str, value: float) -> None:
        samples[name].setdefault(key, []).append(value)

    for name, checkout in checkouts.items():
        _repomem(checkout, caches[name], "index", str(trees[name]), "--json")
    # Before any file changes: what a first build leaves (the rounds below save again after each edit).
    for _ in range(3):
        for name, checkout in checkouts.items():
            report, _ = _repomem(checkout, caches[name], "index", str(trees[name]), "--json")
            keep(name, "index after the build, nothing changed: index step s", report["seconds"])

    for _ in range(rounds):
        for name, checkout in checkouts.items():
            tree = trees[name]
            path = tree / edited
            original, stat = path.read_bytes(), path.stat()
            report, wall = _repomem(checkout, caches[name], "index", str(tree), "--json")
            assert report["action"] == "unchanged", report
            keep(name, "index, nothing changed: index step s", report["seconds"])
            keep(name, "index, nothing changed: command wall s", wall)
            answer, wall = _repomem(checkout, caches[name], "retrieve", str(tree / cursor), "--json")
            keep(name, "retrieve, nothing changed: index step s", answer["timings_ms"]["index"] / 1000)
            keep(name, "retrieve, nothing changed: command wall s", wall)
            path.write_bytes(original + b"\n\ndef bench_added(x):\n    return x\n")
            try:
                report, wall = _repomem(checkout, caches[name], "index", str(tree), "--json")
                assert report["action"] == "updated", report
                keep(name, "index, one file edited: index step s", report["seconds"])
            finally:
                # The file as it was, bytes and modification time: to the other checkout's index too.
                path.write_bytes(original)
                os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
            _repomem(checkout, caches[name], "index", str(tree), "--json")
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="7f6c994", help="reference commit (default: before the manifest check)")
    parser.add_argument("--trees", default=",".join(TREES), help="comma-separated, from: " + ", ".join(TREES))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-no-change.json")
    parser.add_argument("--index-in-repo", action="store_true", help="each checkout's index in its tree's copy (above)")
    args = parser.parse_args()
    console = Console()
    results: dict = {"before": args.before, "rounds": args.rounds, "index_in_repo": args.index_in_repo, "trees": {}}
    with tempfile.TemporaryDirectory(prefix="bench-no-change-") as scratch:
        work = Path(scratch)
        reference = work / "reference"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(reference), args.before],
                       check=True, capture_output=True)
        try:
            checkouts = {"before": reference, "this checkout": ROOT}
            for tree_name in args.trees.split(","):
                edited, cursor = TREES[tree_name]
                tree = bench_tree(tree_name, console)
                caches = {name: work / f"cache-{tree_name}-{index}" for index, name in enumerate(checkouts)}
                trees = {name: tree for name in checkouts}
                for name, cache in caches.items():
                    cache.mkdir()
                    if args.index_in_repo:
                        (cache / IN_REPO).touch()
                        with console.status(f"{tree_name}: a copy for {name}"):
                            trees[name] = Path(shutil.copytree(tree, cache / "tree", symlinks=True))
                        shutil.rmtree(trees[name] / ".repomem", ignore_errors=True)
                with console.status(f"{tree_name}: {args.rounds} rounds"):
                    results["trees"][tree_name] = measure(checkouts, caches, trees, edited, cursor, args.rounds)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(reference)],
                           capture_output=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    table = Table(title=f"the index when nothing changed: medians (min-max) of {args.rounds} rounds, seconds")
    for column in ("tree", "measure", f"before ({args.before})", "this checkout", "ratio"):
        table.add_column(column)
    for tree_name, samples in results["trees"].items():
        for key in samples["before"]:
            before, after = samples["before"][key], samples["this checkout"][key]
            cell = [f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})" for v in (before, after)]
            table.add_row(tree_name, key, *cell, f"{statistics.median(before) / statistics.median(after):.1f}x")
    console.print(table)


if __name__ == "__main__":
    main()
