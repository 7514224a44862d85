"""Completion latency with the embedded model (docs/design.md section 7: warm p50 <= 1 s).

    python scripts/bench_completion.py [--repo DIR] [--walk 50]

On a warm index of Django 5.1.4 (pinned; or --repo): cold and warm latency for ~1k- and ~2k-token
prompts, then a walk of cursor positions through one function, line by line as a user typing
would make them, once per block order ("score": RepoCoder's, most similar last; "stable": by
path and line), reporting p50/p95 latency and prompt tokens reused from llama.cpp's cache.
Results: eval/results/bench-completion.json and a table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.backends.base import Backend, GenerationRequest  # noqa: E402
from repomem.backends.factory import open_gguf  # noqa: E402
from repomem.backends.models import pull_small_model  # noqa: E402
from repomem.completion.engine import CompletionEngine  # noqa: E402
from repomem.config import with_overrides  # noqa: E402
from repomem.failures import Failure  # noqa: E402
from repomem.positions import locate  # noqa: E402
from repomem.service import RepoService  # noqa: E402
from scripts.bench_sources import django_or  # noqa: E402

WALK_FILE = "django/contrib/auth/models.py"


def flush_cache(backend: Backend) -> None:
    """Make the next prompt cold: evaluate an unrelated prompt first."""
    backend.generate(GenerationRequest("# unrelated\n" * 4, 1, [], 60.0))


def single(service: RepoService, backend: Backend, budget: int, path: str, line: int) -> dict:
    config = with_overrides(service.config, completion={"max_prompt_tokens": budget})
    engine = CompletionEngine(service, backend, config)
    text = (service.root / path).read_text(encoding="utf-8")
    # Right after the "= " of an assignment: the model has a real expression to write.
    column = text.split("\n")[line - 1].index(" = ") + 4
    cursor = locate(service.root, path, text, line, column)
    assert not isinstance(cursor, Failure)
    flush_cache(backend)
    cold = engine.complete(cursor)
    warm = engine.complete(cursor)
    assert not isinstance(cold, Failure) and not isinstance(warm, Failure), (cold, warm)
    return {
        "prompt_tokens": cold.generation.prompt_tokens,
        "cold_s": sum(cold.timings_ms.values()) / 1000, "warm_s": sum(warm.timings_ms.values()) / 1000,
        "warm_cached_tokens": warm.generation.cached_tokens, "generated_tokens": warm.generation.completion_tokens,
        "completion": warm.text,
    }


def walk(service: RepoService, backend: Backend, order: str, n_positions: int, path: str) -> dict:
    config = with_overrides(service.config, completion={"order": order})
    engine = CompletionEngine(service, backend, config)
    text = (service.root / path).read_text(encoding="utf-8")
    lines = text.split("\n")
    # The longest function of the file: the walk stays inside it, one line after another.
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith("def ")]
    spans = [(b - a, a) for a, b in zip(starts, starts[1:] + [len(lines)])]
    _, first = max(spans)
    positions = [first + 2 + k for k in range(n_positions) if lines[first + 2 + k].strip()][:n_positions]
    flush_cache(backend)
    latencies, cached, prompt_tokens = [], [], []
    for number in positions:
        cursor = locate(service.root, path, text, number, None)
        assert not isinstance(cursor, Failure)
        started = time.perf_counter()
        result = engine.complete(cursor)
        latencies.append(time.perf_counter() - started)
        assert not isinstance(result, Failure), result
        cached.append(result.generation.cached_tokens)
        prompt_tokens.append(result.generation.prompt_tokens)
    reuse = float(np.sum(cached) / max(np.sum(prompt_tokens), 1))
    return {
        "order": order, "positions": len(positions), "function_line": first + 1,
        "p50_s": float(np.percentile(latencies, 50)), "p95_s": float(np.percentile(latencies, 95)),
        "mean_prompt_tokens": statistics.mean(prompt_tokens), "mean_cached_tokens": statistics.mean(cached),
        "reused_share": reuse,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=None)
    parser.add_argument("--file", default=WALK_FILE, help="file for the single cursors and the walk")
    parser.add_argument("--walk", type=int, default=50)
    parser.add_argument("--orders", default="score,stable", help="block orders to walk with")
    parser.add_argument("--skip-single", action="store_true")
    parser.add_argument("--in-process", action="store_true",
                        help="llama.cpp in this process (model.isolate_model = false) instead of the default "
                             "child process")
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-completion.json")
    args = parser.parse_args()
    console = Console()
    source = django_or(args.repo)
    service = RepoService.open(source)
    assert isinstance(service, RepoService)
    console.print("index ...")
    service.ensure_index()
    model = pull_small_model()
    if isinstance(model, Failure):
        raise SystemExit(model.message)
    settings = with_overrides(service.config, model={"context_tokens": 4096, "isolate_model": not args.in_process})
    started = time.perf_counter()
    backend = open_gguf(model, settings)
    assert not isinstance(backend, Failure), backend
    start_s = time.perf_counter() - started
    text = (service.root / args.file).read_text(encoding="utf-8").split("\n")
    line = max(i for i, row in enumerate(text[: len(text) // 2]) if " = " in row) + 1
    results: dict = {"repo": source.name, "file": args.file, "model": backend.name, "single": {}, "walks": [],
                     "model_process": "in-process" if args.in_process else "child", "start_s": round(start_s, 2)}
    for budget in () if args.skip_single else (1024, 2048):
        console.print(f"cold / warm, {budget}-token budget ...")
        results["single"][str(budget)] = single(service, backend, budget, args.file, line)
    for order in args.orders.split(","):
        console.print(f"walk of {args.walk} cursors, order={order} ...")
        results["walks"].append(walk(service, backend, order, args.walk, args.file))
    results["config"] = dataclasses.asdict(service.config.completion)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    backend.close()

    table = Table(title=f"completion latency, {backend.name} ({results['model_process']}, started in "
                        f"{start_s:.1f} s), {source.name}")
    for column in ("measure", "value"):
        table.add_column(column)
    for budget, row in results["single"].items():
        table.add_row(f"{budget}-token budget ({row['prompt_tokens']} tokens)",
                      f"cold {row['cold_s']:.2f} s, warm {row['warm_s']:.2f} s "
                      f"({row['warm_cached_tokens']} tokens cached)")
    for row in results["walks"]:
        met = "met" if row["p50_s"] <= 1.0 else "NOT met"
        table.add_row(f"walk, order={row['order']} ({row['positions']} cursors)",
                      f"p50 {row['p50_s']:.2f} s, p95 {row['p95_s']:.2f} s, reused {row['reused_share']:.0%} "
                      f"of prompt tokens (target p50 <= 1 s: {met})")
    console.print(table)
    console.print(f"written {args.out}")


if __name__ == "__main__":
    random.seed(0)
    main()
