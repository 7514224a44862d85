"""Fitting a prompt to its token budget, with and without the token floor (backends.token_floor).

    python scripts/bench_prompt_fit.py [--repo DIR] [--cursors 60] [--max-prompt-tokens 1024]

On Django 5.1.4 (pinned; or --repo) with the embedded model's child counting tokens: seeded
cursors at the start of lines in the lower half of Python files of 300 lines or more (where the
file left of the cursor is many times the budget), each prompt built (`CompletionEngine.prepare`:
retrieval, the fit and its token counts; no generation) once with the floor and once without it
(the backend's `count_floor` answering 0), in alternating order, the child's count cache emptied
before each. Reports p50 / p95 / max milliseconds and the counts sent to the child per prompt, and
checks that both ways build the same prompt, byte for byte. Results:
eval/results/bench-prompt-fit.json and a table.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.backends.factory import open_backend  # noqa: E402
from repomem.backends.llama_process import LlamaProcessBackend  # noqa: E402
from repomem.completion.engine import CompletionEngine  # noqa: E402
from repomem.config import with_overrides  # noqa: E402
from repomem.failures import Failure  # noqa: E402
from repomem.positions import locate  # noqa: E402
from repomem.service import RepoService  # noqa: E402
from scripts.bench_query import percentile  # noqa: E402
from scripts.bench_sources import django_or  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=None)
    parser.add_argument("--cursors", type=int, default=60)
    parser.add_argument("--max-prompt-tokens", type=int, default=1024)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-prompt-fit.json")
    args = parser.parse_args()
    console = Console()
    service = RepoService.open(django_or(args.repo).resolve())
    if isinstance(service, Failure):
        raise SystemExit(service.message)
    report = service.ensure_index()
    if isinstance(report, Failure):
        raise SystemExit(report.message)
    config = with_overrides(service.config, completion={"max_prompt_tokens": args.max_prompt_tokens})
    backend = open_backend(config)
    if isinstance(backend, Failure) or not isinstance(backend, LlamaProcessBackend):
        raise SystemExit(f"the embedded model's child is needed: {backend}")
    engine = CompletionEngine(service, backend, config)
    rng = random.Random(7)
    files = [f.path for f in service.view().indexed_files() if f.language == "python"]
    texts = {path: (service.root / path).read_text(encoding="utf-8", errors="replace") for path in files}
    long_files = sorted(path for path in files if texts[path].count("\n") >= 300)
    sent: list[int] = []
    counting = backend.count

    def count(text: str):
        sent.append(len(text))
        return counting(text)

    backend.count = count  # type: ignore[method-assign]
    with_floor = backend.count_floor
    timings: dict[str, list[float]] = {"floor": [], "no floor": []}
    counts: dict[str, list[int]] = {"floor": [], "no floor": []}
    same = 0
    for number in range(args.cursors):
        path = rng.choice(long_files)
        lines = texts[path].split("\n")
        line = rng.randint(len(lines) // 2, len(lines) - 2)
        cursor = locate(service.root, path, texts[path], line + 1, len(lines[line]) - len(lines[line].lstrip()) + 1)
        if isinstance(cursor, Failure):
            continue
        request = engine.request(cursor)
        assert not isinstance(request, Failure), request
        prompts = {}
        for mode in (("floor", "no floor") if number % 2 else ("no floor", "floor")):
            backend.count_floor = with_floor if mode == "floor" else (lambda text: 0)  # type: ignore[method-assign]
            backend._client._counts.clear()  # noqa: SLF001 (a cold count cache each time)
            sent.clear()
            fresh = CompletionEngine(service, backend, config)  # no start remembered from the other way
            started = time.perf_counter()
            prepared = fresh.prepare(request)
            timings[mode].append((time.perf_counter() - started) * 1000)
            counts[mode].append(len(sent))
            assert not isinstance(prepared, Failure), prepared
            prompts[mode] = prepared.prompt.text
        same += prompts["floor"] == prompts["no floor"]
    backend.close()
    n = len(timings["floor"])
    summary = {mode: {"p50_ms": round(statistics.median(values), 1), "p95_ms": round(percentile(values, 95), 1),
                      "max_ms": round(max(values), 1), "counts_p50": statistics.median(counts[mode]),
                      "counts_sum": sum(counts[mode])}
               for mode, values in timings.items()}
    table = Table(title=f"prompt fit, {n} cursors, {args.max_prompt_tokens}-token prompts; same prompt: {same} of {n}")
    for column in ("", "p50 ms", "p95 ms", "max ms", "counts / prompt (p50)", "counts, all"):
        table.add_column(column, justify="right")
    for mode, row in summary.items():
        table.add_row(mode, str(row["p50_ms"]), str(row["p95_ms"]), str(row["max_ms"]), str(row["counts_p50"]),
                      str(row["counts_sum"]))
    console.print(table)
    args.out.write_text(json.dumps({"cursors": n, "max_prompt_tokens": args.max_prompt_tokens, "same_prompt": same,
                                    "summary": summary, "ms": timings, "counts": counts}, indent=1) + "\n")
    console.print(f"written {args.out}")
    return 0 if same == n else 1


if __name__ == "__main__":
    raise SystemExit(main())
