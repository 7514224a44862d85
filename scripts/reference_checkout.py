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


# Compiles the index kernels of the checkout first on PYTHONPATH, where that checkout can (a
# checkout older than repomem.kernel_compile compiles them in its first probe, as it always did).
COMPILE_KERNELS = """
try:
    from repomem.kernel_compile import compile_kernels_once
    from repomem.progress import NoProgress
except ImportError:
    raise SystemExit(0)
compile_kernels_once(NoProgress())
"""


@contextlib.contextmanager
def reference_worktree(rev: str) -> Iterator[Path]:
    """REV checked out in a scratch folder, its kernels compiled: a fresh worktree has no numba
    cache beside its sources, and its first probe compiled every kernel in process while this
    checkout's loaded them (266 against 180 MB resident, and seconds, in a first round)."""
    with tempfile.TemporaryDirectory(prefix="repomem-reference-") as scratch:
        checkout = Path(scratch) / "checkout"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(checkout), rev],
                       check=True, capture_output=True)
        subprocess.run([sys.executable, "-c", COMPILE_KERNELS], env={**os.environ, "PYTHONPATH": str(checkout)},
                       cwd=checkout, capture_output=True, check=False)
        try:
            yield checkout
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(checkout)],
                           capture_output=True)


# Run before a probe: `repomem.lsp` and `repomem.evaluation` from the checkout's `lsp/` and `eval/`.
# PYTHONPATH puts the checkout's `repomem` first, but those two packages live outside it, and the
# editable install's finder mapped them to this working tree's folders: a probe of the reference's
# server or evaluation would have run this checkout's.
CHECKOUT_PACKAGES = """
import importlib.util as _util, sys as _sys
from pathlib import Path as _Path

class _CheckoutPackages:
    FOLDERS = {{"repomem.lsp": "lsp", "repomem.evaluation": "eval"}}

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        folder = cls.FOLDERS.get(name)
        init = _Path({checkout!r}) / folder / "__init__.py" if folder else None
        if init is None or not init.is_file():
            return None
        return _util.spec_from_file_location(name, init, submodule_search_locations=[str(init.parent)])

_sys.meta_path.insert(0, _CheckoutPackages)
"""


def run_probe(checkout: Path, cache: Path, probe: str, *args: str) -> dict:
    """`python -c PROBE ARGS` in `checkout` with the index cache under `cache`; its last line as JSON.
    A failing probe ends the benchmark with its stderr."""
    cache.mkdir(parents=True, exist_ok=True)
    config = cache / "config.toml"
    config.write_text(f'[index]\ncache_dir = "{cache / "indexes"}"\n')
    environment = {**os.environ, "PYTHONPATH": str(checkout), "REPOMEM_CONFIG": str(config),
                   "REPOMEM_NO_DAEMON": "1"}
    run = subprocess.run([sys.executable, "-c", CHECKOUT_PACKAGES.format(checkout=str(checkout)) + probe, *args],
                         env=environment, capture_output=True, text=True, cwd=checkout)
    if run.returncode != 0:
        raise SystemExit(f"{checkout}: {run.stderr[-2000:]}")
    return json.loads(run.stdout.splitlines()[-1])


def alternating_rounds(before: str, rounds: int, console: Console, tree_name: str, work: str, probe: str,
                       arguments: Callable[[int], list[str]]) -> dict[str, list[dict]]:
    """REV ("before REV") and this checkout ("this checkout") in alternating rounds, a fresh
    process each with its own index cache (the first round of each indexes the tree): each
    probe's JSON by checkout, in round order. `arguments(round)`: the probe's arguments. The
    order within a round alternates too: the side run first always met the host as the last
    round left it (warming or still busy)."""
    with reference_worktree(before) as reference, tempfile.TemporaryDirectory(prefix="bench-") as scratch:
        checkouts = {"before " + before: reference, "this checkout": ROOT}
        runs: dict[str, list[dict]] = {label: [] for label in checkouts}
        with console.status("") as status:
            for round_number in range(rounds):
                in_turn = list(checkouts.items())
                for label, checkout in (in_turn if round_number % 2 == 0 else in_turn[::-1]):
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
