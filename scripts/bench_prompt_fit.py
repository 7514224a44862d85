"""Fitting a prompt to its token budget: counting whole texts against the token floor and
counts summed over pieces (backends.token_floor, backends.token_pieces).

    python scripts/bench_prompt_fit.py [--repo DIR] [--cursors 60] [--max-prompt-tokens 1024]

On Django 5.1.4 (pinned; or --repo) with the embedded model's child counting tokens: seeded
cursors at the start of lines in the lower half of Python files of 300 lines or more (where the
file left of the cursor is many times the budget), each prompt built (`CompletionEngine.prepare`:
retrieval, the fit and its token counts; no generation) each way, in alternating order: "whole"
(every text tokenized whole, as before) and "floor + pieces"; "cold" with every count cache and
the masking memo emptied first (a file's first prompt), "again" the same prompt built once more
with the caches it left (an ask after a keystroke that kept the blocks). Reports p50 / p95 / max milliseconds and
the requests to the child per prompt, and checks that every way builds the same prompt, byte for
byte. Results: eval/results/bench-prompt-fit.json and a table.
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
from repomem.backends.token_pieces import PieceCounts  # noqa: E402
from repomem.completion.engine import CompletionEngine  # noqa: E402
from repomem.config import with_overrides  # noqa: E402
from repomem.failures import Failure  # noqa: E402
from repomem.positions import locate  # noqa: E402
from repomem.repo_view import _masked_recently  # noqa: E402
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
    requests: list[int] = []
    posting = backend._client.post  # noqa: SLF001
    counting = backend._client.count  # noqa: SLF001

    def post(path, payload, deadline_s):
        requests.append(1)
        return posting(path, payload, deadline_s)

    def count(text):
        requests.append(1)
        return counting(text)

    backend._client.post, backend._client.count = post, count  # type: ignore[method-assign]  # noqa: SLF001
    facts = backend._tokenizer_facts()  # noqa: SLF001
    assert facts[0] is not None and facts[1] is not None, "this model's tokenizer allows neither"
    ways = {"whole": (None, None), "floor + pieces": facts}
    timings: dict[str, list[float]] = {f"{way}, {when}": [] for way in ways for when in ("cold", "again")}
    counts: dict[str, list[int]] = {name: [] for name in timings}
    same = 0
    warm_up = locate(service.root, long_files[0], texts[long_files[0]], 2, 1)  # first-use costs, not timed
    assert not isinstance(warm_up, Failure), warm_up
    engine.prepare(engine.request(warm_up))  # type: ignore[arg-type]
    for number in range(args.cursors):
        path = rng.choice(long_files)
        lines = texts[path].split("\n")
        line = rng.randint(len(lines) // 2, len(lines) - 2)
        cursor = locate(service.root, path, texts[path], line + 1, len(lines[line]) - len(lines[line].lstrip()) + 1)
        if isinstance(cursor, Failure):
            continue
        request = engine.request(cursor)
        assert not isinstance(request, Failure), request
        prompts: dict[str, set[str]] = {"cold": set(), "again": set()}
        for way in (list(ways) if number % 2 else list(ways)[::-1]):
            backend._vocabulary[:] = [ways[way]]  # noqa: SLF001
            backend._client._counts.clear()  # noqa: SLF001 (cold count caches)
            backend._piece_counts = PieceCounts()  # noqa: SLF001
            _masked_recently.cache_clear()  # and the masking memo: a first prompt in these files
            fresh = CompletionEngine(service, backend, config)  # no start remembered from the other way
            for when in ("cold", "again"):
                requests.clear()
                started = time.perf_counter()
                prepared = fresh.prepare(request)
                timings[f"{way}, {when}"].append((time.perf_counter() - started) * 1000)
                counts[f"{way}, {when}"].append(len(requests))
                assert not isinstance(prepared, Failure), prepared
                prompts[when].add(prepared.prompt.text)
        same += all(len(texts) == 1 for texts in prompts.values())  # each way the same prompt
    backend.close()
    n = len(timings["whole, cold"])
    summary = {mode: {"p50_ms": round(statistics.median(values), 1), "p95_ms": round(percentile(values, 95), 1),
                      "max_ms": round(max(values), 1), "counts_p50": statistics.median(counts[mode]),
                      "counts_sum": sum(counts[mode])}
               for mode, values in timings.items()}
    table = Table(title=f"prompt fit, {n} cursors, {args.max_prompt_tokens}-token prompts; same prompt: {same} of {n}")
    for column in ("", "p50 ms", "p95 ms", "max ms", "requests / prompt (p50)", "requests, all"):
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
