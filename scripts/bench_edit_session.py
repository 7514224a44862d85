"""An editing session against a reference commit: queries and memory as the edits pile up.

    python scripts/bench_edit_session.py --before REV                 # Django 5.1.4
    python scripts/bench_edit_session.py --before REV --repo DIR --edits 400

What a language server lives through between two rebuilds: the index takes one unsaved buffer
after another (`RepoService.set_buffer`, as the server does for each change it is told of), most
of them in one file, a few in two others, each edit a line typed into the buffer the edit before
left. At 0 edits and at checkpoints after them, `retrieve_at` answers the same seeded cursors
(top 10, alpha 0.5) in files the session does not edit. For this checkout and REV, in alternating
rounds, a fresh process each (both index the tree once, each in its own cache): query p50 / p95,
each edit's milliseconds, the postings segments held and the resident memory; every checkpoint
hashes its answers (fragment ids and the bits of the three scores), and the two checkouts must
agree. Results: eval/results/bench-edit-session.json and a table.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from scripts.bench_query import percentile  # noqa: E402
from scripts.bench_sources import django_or  # noqa: E402
from scripts.reference_checkout import alternating_rounds, paired_arguments  # noqa: E402

# Runs inside the checkout under test (PYTHONPATH); prints one JSON object.
PROBE = r"""
import hashlib, json, os, random, struct, sys, time
from pathlib import Path
from repomem.failures import Failure
from repomem.positions import locate
from repomem.service import RepoService

root, n_cursors, checkpoints = Path(sys.argv[1]), int(sys.argv[2]), [int(v) for v in sys.argv[3].split(",")]
service = RepoService.open(root)
service.ensure_index()
files = sorted(f.path for f in service.view().indexed_files() if f.language == "python" and f.fragments > 2)
rng = random.Random(5)
def line_count(path):
    return (root / path).read_text(encoding="utf-8", errors="replace").count("\n")
sized = [path for path in files if 200 <= line_count(path) <= 800]
if len(sized) < 3:
    raise SystemExit(f"{root} holds {len(sized)} Python files of 200-800 lines; the session edits 3")
edited = rng.sample(sized, 3)
cursors = []
others = [path for path in files if path not in edited]
while len(cursors) < n_cursors:
    path = rng.choice(others)
    text = (root / path).read_text(encoding="utf-8", errors="replace")
    cursor = locate(root, path, text, rng.randint(1, max(1, text.count("\n"))), None)
    assert not isinstance(cursor, Failure), cursor
    cursors.append(cursor)
buffers = {path: (root / path).read_text(encoding="utf-8").split("\n") for path in edited}

def queries():
    answers = hashlib.sha256()
    for cursor in cursors[:20]:
        service.view().retrieve_at(cursor, k=10, alpha=0.5)  # compiled kernels, caches
    timings = []
    for cursor in cursors:
        started = time.perf_counter()
        found = service.view().retrieve_at(cursor, k=10, alpha=0.5)
        timings.append((time.perf_counter() - started) * 1000)
        for f in found.fragments:
            answers.update(struct.pack("<q3d", f.fragment, f.s_ind, f.s_env, f.s_rel))
    index = service.index_for_measurement()
    resident_mb = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return {"ms": timings, "answers": answers.hexdigest()[:16], "segments": len(index.segments),
            "resident_mb": round(resident_mb, 1)}

out = {"edited": edited, "at": {"0": queries()}, "edit_ms": []}
done = 0
for checkpoint in checkpoints:
    while done < checkpoint:
        path = edited[0] if done % 10 < 7 else edited[1 + done % 2]  # 7 of 10 edits in one file
        lines = buffers[path]
        at = len(lines) // 3 + (done * 7) % max(1, len(lines) // 3)
        indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())] if lines[at].strip() else ""
        lines.insert(at, f"{indent}typed_{done} = {done}")
        started = time.perf_counter()
        assert service.set_buffer(path, "\n".join(lines)) is None
        out["edit_ms"].append((time.perf_counter() - started) * 1000)
        done += 1
    out["at"][str(checkpoint)] = queries()
print(json.dumps(out))
"""


def main() -> None:
    parser = paired_arguments(__doc__, "HEAD", 3, ROOT / "eval/results/bench-edit-session.json")
    parser.add_argument("--cursors", type=int, default=200, help="cursors answered at each checkpoint")
    parser.add_argument("--edits", type=int, default=300, help="edits in the session")
    args = parser.parse_args()
    tree = django_or(args.repo)
    console = Console()
    checkpoints = sorted({args.edits // 4, args.edits // 2, args.edits} - {0})
    runs = alternating_rounds(args.before, args.rounds, console, tree.name, f"{args.edits} edits", PROBE,
                              lambda _: [str(tree), str(args.cursors), ",".join(map(str, checkpoints))])
    summary: dict[str, dict] = {}
    same = True
    for label, measured in runs.items():
        at: dict[str, dict] = {}
        previous = 1  # the first edit reads the structure: left out
        for point in measured[0]["at"]:
            timings = [ms for run in measured for ms in run["at"][point]["ms"]]
            since = [ms for run in measured for ms in run["edit_ms"][previous : int(point)]]
            previous = max(previous, int(point))
            at[point] = {"p50_ms": percentile(timings, 50), "p95_ms": percentile(timings, 95),
                         "edits_since_p50_ms": percentile(since, 50) if since else None,
                         "segments": measured[0]["at"][point]["segments"],
                         "resident_mb": statistics.median(run["at"][point]["resident_mb"] for run in measured),
                         "answers": sorted({run["at"][point]["answers"] for run in measured})}
        edits = [ms for run in measured for ms in run["edit_ms"][1:]]  # the first reads the structure
        summary[label] = {"edited": measured[0]["edited"], "at": at,
                          "edit_p50_ms": percentile(edits, 50), "edit_p95_ms": percentile(edits, 95)}
    labels = list(summary)
    for point in summary[labels[0]]["at"]:
        same &= summary[labels[0]]["at"][point]["answers"] == summary[labels[1]]["at"][point]["answers"]
    table = Table(title=f"{tree.name}: {args.edits} edits of {', '.join(summary[labels[1]]['edited'])}, "
                        f"{args.rounds} alternating rounds, {args.cursors} cursors a checkpoint")
    for column in ("edits", *(f"{label}: query p50 / p95 ms, segments, MB; the edits since, p50 ms"
                              for label in labels)):
        table.add_column(column, justify="right")

    def since(at: dict) -> str:
        return "" if at["edits_since_p50_ms"] is None else f"; {at['edits_since_p50_ms']:.1f}"

    for point in summary[labels[0]]["at"]:
        table.add_row(point, *(f"{s['at'][point]['p50_ms']:.2f} / {s['at'][point]['p95_ms']:.2f}, "
                               f"{s['at'][point]['segments']}, {s['at'][point]['resident_mb']:.0f}"
                               f"{since(s['at'][point])}" for s in summary.values()))
    table.add_row("an edit p50 / p95",
                  *(f"{s['edit_p50_ms']:.1f} / {s['edit_p95_ms']:.1f} ms" for s in summary.values()))
    console.print(table)
    console.print("answers bit-identical in both checkouts" if same else "[red]ANSWERS DIFFER between the checkouts")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"tree": str(tree), "rounds": args.rounds, "edits": args.edits,
                                    "cursors": args.cursors, "answers_identical": same, "results": summary},
                                   indent=2) + "\n")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
