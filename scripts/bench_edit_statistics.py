"""BM25's statistics after an edit (`bm25.compute_stats`), this checkout against a reference commit
in one process (not a test: machines are noisy).

    python scripts/bench_edit_statistics.py PREPARED_COPY --before REV [--edits 40] [--rounds 5]

PREPARED_COPY is `scripts/bench_index_edit.py`'s (made by its `--prepare-from`). The language
server's edits of one ~500-line file (bench_index_edit's `whole_edits`, one place at a time) are
applied once to the loaded index, recording what each edit handed `compute_stats`; then REV's
`compute_stats` (its bm25.py read from git) and this checkout's work through the same sequence,
each from its own first statistics, in alternating rounds. Every round's idf must be the other
side's bit for bit. A whole edit is ~30 ms on a noisy host, which hides a stage's change of a
millisecond: this times the stage alone. Results: eval/results/bench-edit-statistics.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import repomem.index.bm25 as this_bm25  # noqa: E402
import repomem.index.index_edit as index_edit  # noqa: E402
from repomem.cyclic_gc import settle_long_lived  # noqa: E402
from repomem.failures import Failure  # noqa: E402
from repomem.service import RepoService  # noqa: E402
from scripts.bench_index_edit import whole_edits  # noqa: E402
from scripts.reference_checkout import module_at  # noqa: E402


def recorded_inputs(copy: Path, edited: str, n_edits: int) -> list[tuple]:
    """(df, doc_len, live, config) of each edit's `compute_stats`, in order."""
    service = RepoService.open(copy.resolve())
    assert not isinstance(service, Failure), service
    report = service.ensure_index(save=False)
    assert not isinstance(report, Failure) and report.action == "unchanged", \
        "the prepared copy is stale (another builder): prepare it again with bench_index_edit.py --prepare-from"
    service.prepare_for_edits()
    settle_long_lived()
    inputs: list[tuple] = []
    real = index_edit.compute_stats

    def recording(df, doc_len, live, config, before=None):
        inputs.append((df, doc_len, live, config))
        return real(df, doc_len, live, config, before=before)

    index_edit.compute_stats = recording
    try:
        lines = (copy / edited).read_text(encoding="utf-8").splitlines()
        for text in whole_edits(lines, n_edits, one_place=True):
            assert service.set_buffer(edited, text) is None
    finally:
        index_edit.compute_stats = real
    return inputs


def timed(module: types.ModuleType, inputs: list[tuple]) -> tuple[float, list[bytes]]:
    """Median milliseconds of `compute_stats` an edit, each from the last's statistics, and the idf bits."""
    stats = module.compute_stats(*inputs[0])
    times, idfs = [], []
    for df, doc_len, live, config in inputs[1:]:
        began = time.perf_counter()
        stats = module.compute_stats(df, doc_len, live, config, before=stats)
        times.append((time.perf_counter() - began) * 1000)
        idfs.append(stats.idf.tobytes())
    return statistics.median(times), idfs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("copy", type=Path, help="bench_index_edit.py's prepared copy")
    parser.add_argument("--before", required=True, help="reference commit")
    parser.add_argument("--edited", default="Django-5.1.4/django/contrib/auth/models.py")
    parser.add_argument("--edits", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-edit-statistics.json")
    args = parser.parse_args()
    if not (args.copy / args.edited).is_file():
        raise SystemExit(f"--edited: no file {args.edited} in {args.copy}")
    inputs = recorded_inputs(args.copy, args.edited, args.edits)
    live_counts = [int(np.count_nonzero(live)) for _, _, live, _ in inputs]
    changed_count = sum(a != b for a, b in zip(live_counts, live_counts[1:]))
    sides = {f"before {args.before}": module_at(args.before, "repomem/index/bm25.py"), "this checkout": this_bm25}
    medians: dict[str, list[float]] = {label: [] for label in sides}
    for _ in range(args.rounds):
        bits = []
        for label, module in sides.items():
            median_ms, idfs = timed(module, inputs)
            medians[label].append(median_ms)
            bits.append(idfs)
        if bits[0] != bits[1]:
            raise SystemExit("the two checkouts' idf differ: the change is not exact")
    before, now = medians.values()
    ratios = [b / a for a, b in zip(before, now)]
    table = Table(title=f"compute_stats an edit of {args.edited} (ms; {len(inputs) - 1} edits, {changed_count} "
                        f"changed the live count; medians, {args.rounds} alternating rounds)")
    for column in (*sides, "this / before"):
        table.add_column(column, justify="right")
    for a, b, r in zip(before, now, ratios):
        table.add_row(f"{a:.2f}", f"{b:.2f}", f"{r:.2f}")
    table.add_row(f"median {statistics.median(before):.2f}", f"median {statistics.median(now):.2f}",
                  f"median {statistics.median(ratios):.2f}")
    Console(width=120).print(table)
    args.out.write_text(json.dumps({"before": args.before, "edited": args.edited, "edits": len(inputs) - 1,
                                    "live_count_changed": changed_count, "rounds": args.rounds,
                                    "medians_ms": medians, "ratios": ratios,
                                    "idf_identical": True}, indent=2) + "\n")
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
