"""A reference commit beside this checkout, for benchmarks that run the same probe in both.

`module_at(rev, path)` loads one source file as REV had it, as a module of its own (its imports
are this checkout's), for benchmarks that time one stage of both in one process.
`reference_worktree(rev)` checks REV out as a detached git worktree in a scratch folder (removed
afterwards); `run_probe` runs a probe script with a checkout first on PYTHONPATH and its own index
cache (so the two checkouts never rebuild each other's indexes: the builder digest differs), and
returns the JSON object the probe prints last.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console

ROOT = Path(__file__).resolve().parent.parent


def module_at(rev: str, path: str) -> types.ModuleType:
    """`path` (e.g. repomem/index/bm25.py) as REV had it, as a module named `reference_<stem>`."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"],
                            capture_output=True, text=True, check=True).stdout
    module = types.ModuleType(f"reference_{Path(path).stem}")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{rev}:{path}", "exec"), module.__dict__)
    return module


@contextlib.contextmanager
def reference_worktree(rev: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="repomem-reference-") as scratch:
        checkout = Path(scratch) / "checkout"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(checkout), rev],
                       check=True, capture_output=True)
        try:
            yield checkout
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(checkout)],
                           capture_output=True)


def run_probe(checkout: Path, cache: Path, probe: str, *args: str) -> dict:
    """`python -c PROBE ARGS` in `checkout` with the index cache under `cache`; its last line as JSON.
    A failing probe ends the benchmark with its stderr."""
    cache.mkdir(parents=True, exist_ok=True)
    config = cache / "config.toml"
    config.write_text(f'[index]\ncache_dir = "{cache / "indexes"}"\n')
    environment = {**os.environ, "PYTHONPATH": str(checkout), "REPOMEM_CONFIG": str(config),
                   "REPOMEM_NO_DAEMON": "1"}
    run = subprocess.run([sys.executable, "-c", probe, *args], env=environment, capture_output=True, text=True,
                         cwd=checkout)
    if run.returncode != 0:
        raise SystemExit(f"{checkout}: {run.stderr[-2000:]}")
    return json.loads(run.stdout.splitlines()[-1])


def alternating_rounds(before: str, rounds: int, console: Console, tree_name: str, work: str, probe: str,
                       arguments: Callable[[int], list[str]]) -> dict[str, list[dict]]:
    """REV ("before REV") and this checkout ("this checkout") in alternating rounds, a fresh
    process each with its own index cache (the first round of each indexes the tree): each
    probe's JSON by checkout, in round order. `arguments(round)`: the probe's arguments."""
    with reference_worktree(before) as reference, tempfile.TemporaryDirectory(prefix="bench-") as scratch:
        checkouts = {"before " + before: reference, "this checkout": ROOT}
        runs: dict[str, list[dict]] = {label: [] for label in checkouts}
        with console.status("") as status:
            for round_number in range(rounds):
                for label, checkout in checkouts.items():
                    status.update(f"round {round_number + 1} of {rounds}: {label} "
                                  f"({'indexing ' + tree_name + ' first, ' if round_number == 0 else ''}{work})")
                    runs[label].append(run_probe(checkout, Path(scratch) / label.replace(" ", "-"), probe,
                                                 *arguments(round_number)))
    return runs


def paired_arguments(description: str, before: str, rounds: int, out: Path) -> argparse.ArgumentParser:
    """The options every paired benchmark takes: the tree (`--repo`, default Django 5.1.4), the
    reference commit, the alternating rounds and the results file; the caller adds its own."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path)
    parser.add_argument("--before", default=before, help="reference commit")
    parser.add_argument("--rounds", type=int, default=rounds, help="alternating rounds of each checkout")
    parser.add_argument("--out", type=Path, default=out)
    return parser
