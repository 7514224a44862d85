"""The embedded model's KV cache kept in runs (model.reuse_chunk_tokens) against its common
beginning only, on what an editor asks most: the completion of a new line after the last was
written, line after line.

    python scripts/bench_kv_reuse.py [--sequences 16] [--steps 6] [--min-run 64] [--max-moves 1,2,99]
                                     [--repo DIR] [--seed 0] [--out eval/results/bench-kv-reuse.json]

Django 5.1.4 (pinned, hash-checked; or --repo), the default strategy with the language server's
settings for the embedded model (1,024-token prompts, no file-only round). A sequence is
`--steps` + 1 consecutive code lines of a function body (seeded choice of files and places): the
user pressed Enter before the first (an empty indented line there, the rest of the file below) and
is completed there; then writes that line as the file has it, presses Enter and is completed on
the next, and so on. The first completion fills the cache and is not counted. Several llama.cpp
models in this process answer every step in turn (a fresh order each sequence): one keeps only
the common beginning of consecutive prompts (as before), the others also move the cached runs of
at least `--min-run` tokens, a cell moved at most M times (`--max-moves`; 99 = unbounded).
Reports per model the steps' time (p50 / p95), the prompt tokens not evaluated again, the answers
that are the file's real line, and how many answers are those of the first model.
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

from llama_cpp import Llama  # noqa: E402

from repomem.backends.kv_reuse import with_chunk_reuse  # noqa: E402
from repomem.backends.llama import LlamaBackend  # noqa: E402
from repomem.backends.models import pull_small_model  # noqa: E402
from repomem.completion.engine import CompletionEngine  # noqa: E402
from repomem.config import config_from_mapping, with_overrides  # noqa: E402
from repomem.failures import Failure  # noqa: E402
from repomem.positions import locate  # noqa: E402
from repomem.service import RepoService  # noqa: E402
from scripts.bench_sources import django_or  # noqa: E402

CODE_LINE = re.compile(r"^(\s+)[A-Za-z_].{6,}$")  # indented code, not a comment, a string or a closer


def pick_sequences(root: Path, count: int, steps: int, seed: int) -> list[tuple[str, int]]:
    """(file, L): lines L .. L + steps (0-based) are indented code lines; one place a file."""
    rng = random.Random(seed)
    files = sorted(str(path.relative_to(root)) for path in root.rglob("*.py")
                   if "tests" not in path.parts and path.stat().st_size > 4_000)
    rng.shuffle(files)
    places = []
    for path in files:
        lines = (root / path).read_text(encoding="utf-8").split("\n")
        spots = [i for i in range(40, len(lines) - steps - 1)
                 if all(CODE_LINE.match(lines[k]) for k in range(i - 1, i + steps + 1))]
        if spots:
            places.append((path, rng.choice(spots)))
        if len(places) == count:
            break
    return places


def new_line_text(lines: list[str], line: int) -> tuple[str, int]:
    """The file as it reads when line `line` is still to be written: Enter pressed after line
    `line` - 1, the new line indented as the file's, the lines after it below; and that
    indentation's width (the cursor column)."""
    indent = CODE_LINE.match(lines[line])[1]
    return "\n".join([*lines[:line], indent, *lines[line + 1:]]), len(indent)


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
    parser.add_argument("--sequences", type=int, default=16)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--min-run", type=int, default=64)
    parser.add_argument("--max-moves", default="1,2,99")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-kv-reuse.json")
    args = parser.parse_args()
    console = Console(width=160)
    source = django_or(args.repo)
    service = RepoService.open(source)
    assert isinstance(service, RepoService), service
    console.print("index ...")
    service.ensure_index()
    model = pull_small_model()
    if isinstance(model, Failure):
        raise SystemExit(model.message)
    # What the language server runs the embedded model with (its "lsp_embedded" surface values).
    lsp = config_from_mapping({}, "lsp")[0]
    config = with_overrides(service.config, completion={"max_prompt_tokens": lsp.completion.max_prompt_tokens},
                            prompt={"file_only_round": lsp.prompt.file_only_round})
    variants = [("beginning only", 0, 0)] + [(f"runs, moved <= {m}", args.min_run, int(m))
                                              for m in args.max_moves.split(",")]
    engines = {}
    for name, min_run, max_moves in variants:
        backend = LlamaBackend.open(model, 4096, args.threads, 0, reuse_chunk_tokens=min_run)
        assert not isinstance(backend, Failure), backend
        if min_run:  # the same model class with this bound (LlamaBackend.open takes the default)
            backend._llama.__class__ = with_chunk_reuse(Llama, min_run, max_moves)
        engines[name] = CompletionEngine(service, backend, config)
    rng = random.Random(args.seed)
    records = []
    places = pick_sequences(source, args.sequences, args.steps, args.seed)
    for number, (path, first) in enumerate(places):
        lines = (source / path).read_text(encoding="utf-8").split("\n")
        order = list(engines)
        rng.shuffle(order)
        steps = [{"path": path, "line": first + k + 1, "step": k, "truth": lines[first + k].strip()}
                 for k in range(1, args.steps + 1)]
        for name in order:
            step(engines[name], source, path, lines, first)  # fills the cache
            for record in steps:
                result, seconds = step(engines[name], source, path, lines, first + record["step"])
                record[name] = {"seconds": round(seconds, 3), "prompt_tokens": result.generation.prompt_tokens,
                                "reused_tokens": result.generation.cached_tokens, "answer": result.text.strip(),
                                "right": result.text.strip() == record["truth"]}
        records += steps
        console.print(f"{number + 1}/{len(places)} {path}:{first + 1} " + "  ".join(
            f"{name}: {np.median([r[name]['seconds'] for r in steps]):.2f} s" for name in engines))
    reference = variants[0][0]
    summary = {}
    for name in engines:
        seconds = [r[name]["seconds"] for r in records]
        summary[name] = {"p50_s": float(np.percentile(seconds, 50)), "p95_s": float(np.percentile(seconds, 95)),
                         "mean_s": float(np.mean(seconds)),
                         "mean_prompt_tokens": float(np.mean([r[name]["prompt_tokens"] for r in records])),
                         "mean_reused_tokens": float(np.mean([r[name]["reused_tokens"] for r in records])),
                         "right": sum(r[name]["right"] for r in records),
                         "answers_as_reference": sum(r[name]["answer"] == r[reference]["answer"] for r in records),
                         "won": sum(r[name]["right"] and not r[reference]["right"] for r in records),
                         "lost": sum(r[reference]["right"] and not r[name]["right"] for r in records)}
    table = Table(title=f"new lines written one after another: {len(places)} places x {args.steps} steps, "
                        f"{source.name}, embedded model, {args.threads} threads")
    for column in ("KV cache kept", "p50 s", "p95 s", "mean s", "prompt tokens", "not evaluated again",
                   "answers right", f"answers as '{reference}'", "won / lost"):
        table.add_column(column)
    for name, row in summary.items():
        table.add_row(name, f"{row['p50_s']:.2f}", f"{row['p95_s']:.2f}", f"{row['mean_s']:.2f}",
                      f"{row['mean_prompt_tokens']:.0f}", f"{row['mean_reused_tokens']:.0f}", f"{row['right']}",
                      f"{row['answers_as_reference']} of {len(records)}", f"{row['won']} / {row['lost']}")
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"repo": source.name, "places": len(places), "steps": args.steps,
                                    "min_run": args.min_run, "threads": args.threads, "summary": summary,
                                    "records": records, "config": dataclasses.asdict(config.completion)},
                                   indent=2) + "\n")


if __name__ == "__main__":
    main()
