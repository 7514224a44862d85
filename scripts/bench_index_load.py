"""What the index's seal and checks cost when an index is loaded (not a test: machines are noisy).

    python scripts/bench_index_load.py                   # Django 5.1.4 from the package index
    python scripts/bench_index_load.py --before REV      # the reference: the same steps at REV
    python scripts/bench_index_load.py --repo DIR

For this checkout and a reference commit (a git worktree of REV, same interpreter), in the same
run: build the index of the tree once (each in its own cache folder), then time `load_index`
(the query arrays: read, digests, checks) and the per-file structure (read, checks) in alternating
rounds, a fresh process each (this machine's noise drifts over minutes; both sides meet the same
drift), and the same after one edited file was saved. A check that refused a real index would
show as a rebuild here, so the script also says whether each load was trusted.
Results: eval/results/bench-index-load.json and a table.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from scripts.bench_sources import django_or  # noqa: E402
from scripts.reference_checkout import paired_arguments, reference_worktree, run_probe  # noqa: E402

# Runs inside the checkout under test (PYTHONPATH): "build" brings the index up to date; "load"
# loads it `repeats` times after one untimed load (the kernels' compiled code read from numba's
# cache, the files in the page cache), timing the structure too. Prints one JSON object.
PROBE = r"""
import json, sys, time
from pathlib import Path
from repomem.config import load_config
from repomem.failures import Failure
from repomem.index.snapshot_load import load_index
from repomem.service import RepoService

root, phase, repeats = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
if phase == "build":
    report = RepoService.open(root).ensure_index()
    print(json.dumps({"build": report.action, "fragments": report.fragments, "files": report.files}))
    raise SystemExit
config, _ = load_config(root)
load_index(root, config)
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
print(json.dumps({"load_s": loads, "structure_s": structures, "trusted": trusted}))
"""


def probe(checkout: Path, tree: Path, cache: Path, phase: str, repeats: int = 0) -> dict:
    return run_probe(checkout, cache, PROBE, str(tree), phase, str(repeats))


def timed_rounds(checkouts: dict[str, tuple[Path, Path]], tree: Path, rounds: int, repeats: int) -> dict:
    """Each checkout's index brought up to date, then loaded in `rounds` alternating rounds (the
    reference, this checkout, the reference, ...): this machine's noise drifts over minutes, so
    both sides meet the same drift."""
    out = {label: probe(checkout, tree, cache, "build") for label, (checkout, cache) in checkouts.items()}
    for label in out:
        out[label].update({"load_s": [], "structure_s": [], "trusted": True})
    for _ in range(rounds):
        for label, (checkout, cache) in checkouts.items():
            measured = probe(checkout, tree, cache, "load", repeats)
            out[label]["load_s"] += measured["load_s"]
            out[label]["structure_s"] += measured["structure_s"]
            out[label]["trusted"] = out[label]["trusted"] and measured["trusted"]
    return out


def main() -> None:
    # The default reference: the commit before the seal.
    parser = paired_arguments(__doc__, "0047f1e", 3, ROOT / "eval/results/bench-index-load.json")
    parser.add_argument("--repeats", type=int, default=5, help="loads per round")
    parser.add_argument("--edited", default="django/db/models/query.py")
    args = parser.parse_args()
    tree = django_or(args.repo)
    console = Console()
    with reference_worktree(args.before) as before, tempfile.TemporaryDirectory(prefix="bench-load-") as scratch:
        checkouts = {label: (checkout, Path(scratch) / label.replace(" ", "-"))
                     for label, checkout in (("before " + args.before, before), ("this checkout", ROOT))}
        edited = tree / args.edited
        original = edited.read_bytes()
        try:
            console.print(f"indexing {tree.name} with each checkout, then {args.rounds} alternating rounds of "
                          f"{args.repeats} loads ...")
            fresh = timed_rounds(checkouts, tree, args.rounds, args.repeats)
            edited.write_bytes(original + b"\n\ndef bench_added(x):\n    return x\n")
            console.print(f"the same after an edit of {args.edited} ...")
            after_edit = timed_rounds(checkouts, tree, args.rounds, args.repeats)
        finally:
            edited.write_bytes(original)
    results = {label: {"build": fresh[label]["build"], "fragments": fresh[label]["fragments"],
                       "files": fresh[label]["files"], "fresh": fresh[label], "after_edit": after_edit[label]}
               for label in checkouts}
    table = Table(title=f"index load, {tree.name} (median of {args.rounds} × {args.repeats}, alternating; seconds)")
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
