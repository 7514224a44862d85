"""The embedded model's KV cache kept in runs (completion.reuse_chunk_tokens) against its common
beginning only, on what an editor asks most: the completion of a new line after the last was
written.

    python scripts/bench_kv_reuse.py [--pairs 40] [--min-run 64] [--repo DIR] [--seed 0]
                                     [--out eval/results/bench-kv-reuse.json]

Django 5.1.4 (pinned, hash-checked; or --repo), the default strategy with the language server's
settings for the embedded model (1,024-token prompts, no file-only round). Each pair is two
consecutive lines L and L + 1 of a function body (seeded choice): the user pressed Enter after
line L - 1 (an empty indented line L, the rest of the file below it) and is completed there, then
writes line L as the file has it, presses Enter and is completed again. Two llama.cpp models in
this process answer both steps in turn, alternating which goes first: one keeps only the common
beginning of consecutive prompts (as before), one also moves the cached runs of at least
`--min-run` tokens. Reports the second step's time (p50 / p95), the prompt tokens not evaluated
again, whether the two answers agree, and whether each is the file's real line (paired).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import re
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.backends.llama import LlamaBackend  # noqa: E402
from repomem.backends.models import pull_default_model  # noqa: E402
from repomem.completion.engine import CompletionEngine  # noqa: E402
from repomem.config import with_overrides  # noqa: E402
from repomem.failures import Failure  # noqa: E402
from repomem.positions import locate  # noqa: E402
from repomem.service import RepoService  # noqa: E402
from scripts.bench_sources import django_or  # noqa: E402

CODE_LINE = re.compile(r"^(\s+)[A-Za-z_].{6,}$")  # indented code, not a comment, a string or a closer


def pick_pairs(root: Path, count: int, seed: int) -> list[tuple[str, int]]:
    """(file, L): lines L and L + 1 (0-based) are indented code lines of one block."""
    rng = random.Random(seed)
    files = sorted(str(path.relative_to(root)) for path in root.rglob("*.py")
                   if "tests" not in path.parts and path.stat().st_size > 4_000)
    rng.shuffle(files)
    pairs = []
    for path in files:
        lines = (root / path).read_text(encoding="utf-8").split("\n")
        spots = [i for i in range(40, len(lines) - 2)
                 if (a := CODE_LINE.match(lines[i])) and (b := CODE_LINE.match(lines[i + 1]))
                 and a[1] == b[1] and CODE_LINE.match(lines[i - 1])]
        if spots:
            pairs.append((path, rng.choice(spots)))
        if len(pairs) == count:
            break
    return pairs


def new_line_text(lines: list[str], line: int) -> tuple[str, int]:
    """The file as it reads after Enter at the end of line `line` - 1: an empty line `line`,
    indented as the next one, then the rest; and that indentation's width (the cursor column)."""
    indent = CODE_LINE.match(lines[line])[1]
    return "\n".join([*lines[:line], indent, *lines[line:]]), len(indent)


def step(engine: CompletionEngine, root: Path, path: str, lines: list[str], line: int):
    text, column = new_line_text(lines, line)
    cursor = locate(root, path, text, line + 1, column + 1)
    assert not isinstance(cursor, Failure), cursor
    started = time.perf_counter()
    result = engine.complete(cursor)
    assert not isinstance(result, Failure), result
    return result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=None)
    parser.add_argument("--pairs", type=int, default=40)
    parser.add_argument("--min-run", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-kv-reuse.json")
    args = parser.parse_args()
    console = Console()
    source = django_or(args.repo)
    service = RepoService.open(source)
    assert isinstance(service, RepoService), service
    console.print("index ...")
    service.ensure_index()
    model = pull_default_model()
    if isinstance(model, Failure):
        raise SystemExit(model.message)
    # What the language server runs the embedded model with (lsp/settings.py).
    config = with_overrides(service.config,
                            completion={"max_prompt_tokens": service.config.server.embedded_prompt_tokens},
                            prompt={"file_only_round": False})
    engines = {}
    for name, min_run in (("beginning only", 0), (f"runs >= {args.min_run}", args.min_run)):
        backend = LlamaBackend.open(model, 4096, args.threads, 0, reuse_chunk_tokens=min_run)
        assert not isinstance(backend, Failure), backend
        engines[name] = CompletionEngine(service, backend, config)
    records = []
    pairs = pick_pairs(source, args.pairs, args.seed)
    for number, (path, line) in enumerate(pairs):
        lines = (source / path).read_text(encoding="utf-8").split("\n")
        order = list(engines) if number % 2 == 0 else list(engines)[::-1]
        record = {"path": path, "line": line + 1, "truth": lines[line + 1].strip()}
        for name in order:
            step(engines[name], source, path, lines, line)  # the first new line: fills the cache
            result, seconds = step(engines[name], source, path, lines, line + 1)
            record[name] = {"seconds": round(seconds, 3), "prompt_tokens": result.generation.prompt_tokens,
                            "reused_tokens": result.generation.cached_tokens, "answer": result.text.strip(),
                            "right": result.text.strip() == record["truth"]}
        records.append(record)
        console.print(f"{number + 1}/{len(pairs)} {path}:{line + 2} "
                      + "  ".join(f"{name}: {record[name]['seconds']:.2f} s, {record[name]['reused_tokens']} reused"
                                  for name in engines))
    summary = {}
    for name in engines:
        seconds = [r[name]["seconds"] for r in records]
        summary[name] = {"p50_s": float(np.percentile(seconds, 50)), "p95_s": float(np.percentile(seconds, 95)),
                         "mean_prompt_tokens": float(np.mean([r[name]["prompt_tokens"] for r in records])),
                         "mean_reused_tokens": float(np.mean([r[name]["reused_tokens"] for r in records])),
                         "right": sum(r[name]["right"] for r in records)}
    plain, reusing = list(engines)
    agree = sum(r[plain]["answer"] == r[reusing]["answer"] for r in records)
    won = sum(r[reusing]["right"] and not r[plain]["right"] for r in records)
    lost = sum(r[plain]["right"] and not r[reusing]["right"] for r in records)
    # Where runs were kept beyond the common beginning: the only pairs whose answers can differ.
    moved = [r for r in records if r[reusing]["reused_tokens"] > r[plain]["reused_tokens"]]
    moved_summary = {"pairs": len(moved),
                     "answers_alike": sum(r[plain]["answer"] == r[reusing]["answer"] for r in moved),
                     **{name: {"median_s": float(np.median([r[name]["seconds"] for r in moved])) if moved else None,
                               "right": sum(r[name]["right"] for r in moved)} for name in engines}}
    table = Table(title=f"the second of two new lines, {len(records)} pairs, {source.name}, embedded model, "
                        f"{args.threads} threads")
    for column in ("KV cache kept", "p50 s", "p95 s", "prompt tokens", "not evaluated again", "answers right"):
        table.add_column(column)
    for name, row in summary.items():
        table.add_row(name, f"{row['p50_s']:.2f}", f"{row['p95_s']:.2f}", f"{row['mean_prompt_tokens']:.0f}",
                      f"{row['mean_reused_tokens']:.0f}", f"{row['right']}")
    console.print(table)
    console.print(f"answers alike: {agree} of {len(records)}; right with runs only: {won}, with the beginning only: "
                  f"{lost}")
    if moved:
        console.print(f"pairs where runs were kept beyond the beginning: {len(moved)}; answers alike "
                      f"{moved_summary['answers_alike']}; median "
                      + ", ".join(f"{name} {moved_summary[name]['median_s']:.2f} s, "
                                  f"{moved_summary[name]['right']} right" for name in engines))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"repo": source.name, "pairs": len(records), "min_run": args.min_run,
                                    "threads": args.threads, "summary": summary, "answers_alike": agree,
                                    "won": won, "lost": lost, "runs_kept": moved_summary, "records": records,
                                    "config": dataclasses.asdict(config.completion)}, indent=2) + "\n")


if __name__ == "__main__":
    main()
