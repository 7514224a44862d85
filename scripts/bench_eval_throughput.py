"""Evaluation throughput: completions per second for N workers in flight (docs/design.md section 7).

    python scripts/bench_eval_throughput.py [--workers 1,4,16] [--limit 8] [--endpoint URL ...]
                                            [--hf MODEL] [--model GGUF] [--prompt-tokens 512]

Runs the same RepoEval-protocol tasks (the dev set built by `repomem eval build --out
corpora/devset`, or --tasks/--repos) once per worker count against one backend: by default the
embedded model in one llama.cpp child server (as `repomem eval run` starts it), or the servers
given with --endpoint, or transformers in process (--hf, batched). Each run writes its own results
file; every run's records are compared with the first one's (wall times and prompt-cache hits
aside: eval/run.py comparable_record) and must be equal.
Results: eval/results/bench-throughput[-LABEL].json and a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.backends.factory import connect_endpoint, open_backend  # noqa: E402
from repomem.config import Config, with_overrides  # noqa: E402
from repomem.evaluation.run import RunSettings, comparable_record, read_results, run_evaluation  # noqa: E402
from repomem.evaluation.tasks import load_tasks, select_tasks  # noqa: E402
from repomem.failures import Failure  # noqa: E402

DEVSET = ROOT / "corpora" / "devset"


def comparable(path: Path) -> list[dict]:
    """A results file's records without what differs between runs by nature (wall times, cache hits)."""
    return [comparable_record(r) for r in read_results(path)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", action="append", default=None, help="tasks JSONL (default: the dev set's splits)")
    parser.add_argument("--repos", default=str(DEVSET / "repositories"))
    parser.add_argument("--limit", type=int, default=8, help="tasks per split (default 8)")
    parser.add_argument("--workers", default="1,4,16", help="worker counts to compare (default 1,4,16)")
    parser.add_argument("--strategies", default="vanilla", help="comma-separated (default vanilla)")
    parser.add_argument("--prompt-tokens", type=int, default=512, help="whole prompt budget (default 512)")
    parser.add_argument("--max-new-tokens", type=int, default=100)
    parser.add_argument("--threads", type=int, default=0, help="llama.cpp threads (default: all cores)")
    parser.add_argument("--endpoint", action="append", default=None, help="a server (repeat for several)")
    parser.add_argument("--hf", default=None, help="transformers in process: checkpoint folder or GGUF")
    parser.add_argument("--model", default=None, help="a GGUF for the llama.cpp child (default: embedded)")
    parser.add_argument("--label", default="", help="suffix of the results file name")
    args = parser.parse_args()
    console = Console(stderr=True)

    task_files = args.tasks or [str(DEVSET / "line.jsonl"), str(DEVSET / "api.jsonl")]
    tasks = []
    for name in task_files:
        loaded = load_tasks(Path(name))
        if isinstance(loaded, Failure):
            console.print(f"{loaded.message} (build the dev set: repomem eval build --out corpora/devset)")
            return 2
        tasks.extend(loaded)
    tasks = select_tasks(tasks, args.limit, 0)
    counts = [int(v) for v in args.workers.split(",")]
    config = with_overrides(Config(), completion={"threads": args.threads})
    settings = RunSettings(strategies=tuple(args.strategies.split(",")), max_new_tokens=args.max_new_tokens,
                           max_prompt_tokens=args.prompt_tokens)

    started = time.perf_counter()
    if args.endpoint:
        backends = [connect_endpoint(url, config) for url in args.endpoint]
    else:
        backends = [open_backend(config, model_path=args.model or "", hf_model=args.hf or "")]
    failed = [b for b in backends if isinstance(b, Failure)]
    if failed:
        console.print(failed[0].message)
        return 2
    start_s = time.perf_counter() - started
    console.print(f"{backends[0].name}: ready in {start_s:.1f} s; {len(tasks)} tasks x {len(settings.strategies)} "
                  f"strategies per run")

    rows = []
    reference: list[dict] | None = None
    with tempfile.TemporaryDirectory() as scratch:
        for workers in counts:
            results = Path(scratch) / f"workers-{workers}.jsonl"
            summary = run_evaluation(tasks, Path(args.repos), results, settings, config=config, backends=backends,
                                     workers=workers, log=lambda message: None)
            if isinstance(summary, Failure):
                console.print(summary.message)
                return 1
            records = comparable(results)
            generated = sum(1 for r in read_results(results) if "prediction" in r) - summary.reused
            same = reference is None or records == reference
            reference = reference if reference is not None else records
            rows.append({
                "workers": workers, "records": summary.written, "generations": generated, "errors": summary.failed,
                "seconds": round(summary.seconds, 2),
                "completions_per_s": round(summary.written / summary.seconds, 3),
                "batches": len(summary.batch_sizes),
                "mean_batch": round(sum(summary.batch_sizes) / len(summary.batch_sizes), 2) if summary.batch_sizes
                else None,
                "records_equal_to_first": same,
            })
            console.print(f"workers {workers}: {summary.written} records in {summary.seconds:.1f} s, "
                          f"records equal to the first run: {same}")
    for backend in backends:
        backend.close()

    table = Table(title=f"eval throughput: {backends[0].name} ({os.cpu_count()} cores)")
    for column in ("workers", "records", "seconds", "completions/s", "speed-up", "mean batch", "same records"):
        table.add_column(column, justify="right")
    base = rows[0]["completions_per_s"]
    for row in rows:
        table.add_row(str(row["workers"]), str(row["records"]), f"{row['seconds']:.1f}",
                      f"{row['completions_per_s']:.3f}", f"{row['completions_per_s'] / base:.2f}x",
                      str(row["mean_batch"] or "-"), "yes" if row["records_equal_to_first"] else "NO")
    Console().print(table)
    out = ROOT / "eval" / "results" / f"bench-throughput{'-' + args.label if args.label else ''}.json"
    out.write_text(json.dumps({
        "backend": backends[0].name, "start_s": round(start_s, 2), "host": platform.node(),
        "cores": os.cpu_count(), "tasks": len(tasks), "strategies": list(settings.strategies),
        "prompt_tokens": args.prompt_tokens, "max_new_tokens": args.max_new_tokens, "rows": rows,
    }, indent=2) + "\n")
    console.print(f"wrote {out}")
    return 0 if all(row["records_equal_to_first"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
