"""Prompt evaluation and decoding: the shipped embedded model against its layers widened to
bfloat16 (repomem.backends.bf16_layers), both loaded in this process, timed in turn; or, with
`--flash-attention`, the widened file without and with llama.cpp's fused attention
(model.flash_attention, the editor's default).

    python scripts/bench_bf16_layers.py [--prompt-tokens 1000] [--rounds 5] [--out eval/results/bench-bf16-layers.json]
    python scripts/bench_bf16_layers.py --flash-attention --out eval/results/bench-flash-attention.json

Each round evaluates one cold prompt per model (the KV cache cleared: a first completion in a
file) and then decodes 24 tokens one at a time (what every answer costs per token), the models
in a shuffled order per round. Prompts are the first tokens of Django 5.1.4 files, another file
each round. Threads: all cores, as the product runs it. Not a test: prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from repomem.backends.bf16_layers import build_multiplies_bf16, widen, widened_path  # noqa: E402
from repomem.backends.models import pull_small_model  # noqa: E402
from repomem.failures import Failure  # noqa: E402
from scripts.bench_sources import django_or  # noqa: E402

FILES = ("django/contrib/auth/models.py", "django/db/models/query.py", "django/forms/fields.py",
         "django/http/request.py", "django/utils/html.py", "django/views/generic/edit.py",
         "django/core/handlers/base.py", "django/template/defaulttags.py")
DECODED_TOKENS = 24


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompt-tokens", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=len(FILES))
    parser.add_argument("--out", type=Path, default=Path("eval/results/bench-bf16-layers.json"))
    parser.add_argument("--flash-attention", action="store_true",
                        help="compare the widened file without and with the fused attention")
    args = parser.parse_args()
    import llama_cpp

    shipped = pull_small_model()
    assert not isinstance(shipped, Failure), shipped
    wide = widened_path() if widened_path().exists() else widen(shipped, widened_path())
    assert not isinstance(wide, Failure), wide
    tree = django_or(None)
    threads = os.cpu_count() or 1
    variants = ({"attention as shipped": (wide, False), "fused attention": (wide, True)} if args.flash_attention
                else {shipped.name: (shipped, False), wide.name: (wide, False)})
    models = {name: llama_cpp.Llama(model_path=str(path), n_ctx=2048, n_threads=threads, n_threads_batch=threads,
                                    flash_attn=fused, verbose=False) for name, (path, fused) in variants.items()}
    answers: dict[str, list[list[int]]] = {name: [] for name in models}
    prefill: dict[str, list[float]] = {name: [] for name in models}
    decode: dict[str, list[float]] = {name: [] for name in models}
    for round_number in range(args.rounds):
        text = (tree / FILES[round_number % len(FILES)]).read_text()
        order = list(models)
        random.Random(round_number).shuffle(order)
        for name in order:
            model = models[name]
            tokens = model.tokenize(text.encode())[: args.prompt_tokens]
            model.reset()
            model._ctx.kv_cache_clear()  # a cold prompt: nothing of the last round's cache kept
            started = time.perf_counter()
            model.eval(tokens)
            prefill[name].append(time.perf_counter() - started)
            started = time.perf_counter()
            greedy = []
            for _ in range(DECODED_TOKENS):  # one token at a time: the decode path
                greedy.append(model.sample(temp=0.0))
                model.eval([greedy[-1]])
            decode[name].append((time.perf_counter() - started) / DECODED_TOKENS * 1000)
            answers[name].append(greedy)
    rows = {name: {"file_bytes": os.path.getsize(models[name].model_path),
                   "prefill_s": {"median": statistics.median(prefill[name]), "min": min(prefill[name]),
                                 "max": max(prefill[name]), "runs": prefill[name]},
                   "decode_ms_per_token": {"median": statistics.median(decode[name]), "min": min(decode[name]),
                                           "max": max(decode[name])}}
            for name in models}
    base, other = list(models)
    ratios = [a / b for a, b in zip(prefill[base], prefill[other])]
    result = {"prompt_tokens": args.prompt_tokens, "rounds": args.rounds, "threads": threads,
              "build_multiplies_bf16": build_multiplies_bf16(), "models": rows,
              "prefill_speedup_pairwise": {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)},
              "same_greedy_tokens": sum(a == b for a, b in zip(answers[base], answers[other]))}
    print(f"| model | file | cold {args.prompt_tokens}-token prompt, median (min-max) | decode ms/token, median |")
    print("| --- | --- | --- | --- |")
    for name, row in rows.items():
        p = row["prefill_s"]
        print(f"| {name} | {row['file_bytes'] / 1e6:.0f} MB | {p['median']:.2f} s ({p['min']:.2f}-{p['max']:.2f}) | "
              f"{row['decode_ms_per_token']['median']:.1f} |")
    print(f"prefill speed-up, pair by pair: median {result['prefill_speedup_pairwise']['median']:.2f}x "
          f"({min(ratios):.2f}-{max(ratios):.2f}); the same {DECODED_TOKENS} greedy tokens in "
          f"{result['same_greedy_tokens']} of {args.rounds} rounds")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
