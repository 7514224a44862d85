"""What the index's seal and checks cost when an index is loaded (not a test: machines are noisy).

    python scripts/bench_index_load.py                   # Django 5.1.4 from the package index
    python scripts/bench_index_load.py --before REV      # the reference: the same steps at REV
    python scripts/bench_index_load.py --repo DIR

For this checkout and a reference commit (a git worktree of REV, same interpreter), in the same
run: build the index of the tree once (each in its own cache folder), then time `load_index`
(the query arrays: read, digests, checks) and the per-file structure (read, checks) over several
repeats, and the same after one edited file was saved. A check that refused a real index would
show as a rebuild here, so the script also says whether each load was trusted.
Results: eval/results/bench-index-load.json and a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from scripts.bench_sources import django_or  # noqa: E402

# Runs inside the checkout under test (PYTHONPATH): prints one JSON object.
PROBE = r"""
import json, sys, time
from pathlib import Path
from repomem.config import load_config
from repomem.failures import Failure
from repomem.index.snapshot_load import load_index
from repomem.service import RepoService

root, repeats, edited = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
service = RepoService.open(root)
report = service.ensure_index()
config, _ = load_config(root)

def timed(after_edit):
    loads, structures, trusted = [], [], True
    for _ in range(repeats):
        started = time.perf_counter()
        index = load_index(root, config)
        loads.append(time.perf_counter() - started)
        if isinstance(index, Failure):
            trusted = False
            continue
        started = time.perf_counter()
        index.ensure_structure()
        structures.append(time.perf_counter() - started)
    return {"load_s": loads, "structure_s": structures, "trusted": trusted}

out = {"build": report.action, "fragments": report.fragments, "files": report.files, "fresh": timed(False)}
path = root / edited
original = path.read_bytes()
try:
    path.write_bytes(original + b"\n\ndef bench_added(x):\n    return x\n")
    service = RepoService.open(root)
    service.ensure_index()
    out["after_edit"] = timed(True)
finally:
    path.write_bytes(original)
print(json.dumps(out))
"""


def probe(checkout: Path, tree: Path, cache: Path, repeats: int, edited: str) -> dict:
    config = cache / "config.toml"
    config.write_text(f'[index]\ncache_dir = "{cache / "indexes"}"\n')
    environment = {**os.environ, "PYTHONPATH": str(checkout), "REPOMEM_CONFIG": str(config)}
    run = subprocess.run([sys.executable, "-c", PROBE, str(tree), str(repeats), edited], env=environment,
                         capture_output=True, text=True, cwd=checkout)
    if run.returncode != 0:
        raise SystemExit(f"{checkout}: {run.stderr[-2000:]}")
    return json.loads(run.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path)
    parser.add_argument("--before", default="0047f1e", help="reference commit (default: the commit before the seal)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--edited", default="django/db/models/query.py")
    parser.add_argument("--out", type=Path, default=ROOT / "eval/results/bench-index-load.json")
    args = parser.parse_args()
    tree = django_or(args.repo)
    console = Console()
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench-load-") as scratch:
        before = Path(scratch) / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before), args.before],
                       check=True, capture_output=True)
        try:
            for label, checkout in (("before " + args.before, before), ("this checkout", ROOT)):
                cache = Path(scratch) / label.replace(" ", "-")
                cache.mkdir()
                console.print(f"{label}: indexing {tree.name} and loading it {args.repeats} times ...")
                results[label] = probe(checkout, tree, cache, args.repeats, args.edited)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)], capture_output=True)
    table = Table(title=f"index load, {tree.name} (median of {args.repeats}; seconds)")
    for column in ("checkout", "files", "fragments", "load", "structure", "load after an edit",
                   "structure after an edit", "trusted"):
        table.add_column(column, justify="right")
    for label, result in results.items():
        fresh, edited = result["fresh"], result["after_edit"]
        table.add_row(label, f"{result['files']:,}", f"{result['fragments']:,}",
                      f"{statistics.median(fresh['load_s']):.3f}", f"{statistics.median(fresh['structure_s']):.3f}",
                      f"{statistics.median(edited['load_s']):.3f}", f"{statistics.median(edited['structure_s']):.3f}",
                      "yes" if fresh["trusted"] and edited["trusted"] else "NO")
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"tree": str(tree), "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
