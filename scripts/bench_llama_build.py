"""Two builds of llama-cpp-python side by side: prompt reading and decoding speed of the embedded
model, and whether their greedy answers agree.

    python scripts/bench_llama_build.py --build avx2=/path/to/site --build avx512=/other/site [--rounds 3]

Each `--build NAME=DIR` is a folder holding a `llama_cpp` package (a `pip install --target DIR`
of a wheel built with other CMAKE_ARGS; an empty DIR means the one installed in this environment).
The builds run in turn, each in a fresh process with DIR first on PYTHONPATH, for `--rounds`
rounds (this host's speed drifts, so each round times both). A run reads a 1,000-token prompt
three times from a cleared cache (the first completion's wait) and decodes 32 tokens greedily after
it; it reports llama.cpp's own list of the CPU features it was built with. Writes
eval/results/bench-llama-build.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
PROMPT_TOKENS = 1000
DECODED_TOKENS = 32


def measure() -> dict:
    """One process: this build's prompt and decode speed and its greedy tokens (JSON on stdout)."""
    import llama_cpp

    from repomem.backends.models import small_model_path

    model = llama_cpp.Llama(model_path=str(small_model_path()), n_ctx=2048, n_threads=2, n_threads_batch=2,
                            verbose=False)
    text = (ROOT / "repomem" / "index" / "relations.py").read_text(encoding="utf-8")
    prompt = model.tokenize(text.encode("utf-8"))[:PROMPT_TOKENS]
    read_s, decode_s, answers = [], [], []
    for _ in range(3):
        model.reset()
        started = time.perf_counter()
        model.eval(prompt)
        read_s.append(time.perf_counter() - started)
        tokens = []
        started = time.perf_counter()
        for _ in range(DECODED_TOKENS):
            token = model.sample(temp=0.0)
            tokens.append(int(token))
            model.eval([token])
        decode_s.append(time.perf_counter() - started)
        answers.append(tokens)
    info = llama_cpp.llama_print_system_info().decode()
    features = [part.split("=")[0].strip() for part in info.split("|") if part.strip().endswith("= 1")]
    return {"read_s": read_s, "decode_s": decode_s, "tokens": answers[0],
            "same_each_time": answers.count(answers[0]) == len(answers), "features": features,
            "package": str(Path(llama_cpp.__file__).parent)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", action="append", default=[], metavar="NAME=DIR", help="a build to time (2 or more)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-llama-build.json")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)  # the child's part
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure()))
        return
    builds = dict(part.partition("=")[::2] for part in args.build)
    if len(builds) < 2:
        parser.error("name two builds or more with --build NAME=DIR")
    runs: dict[str, list[dict]] = {name: [] for name in builds}
    for round_ in range(args.rounds):
        for name, folder in builds.items():
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (folder, str(ROOT)) if p)}
            done = subprocess.run([sys.executable, __file__, "--measure"], capture_output=True, text=True, env=env,
                                  check=True)
            runs[name].append(json.loads(done.stdout))
            print(f"round {round_ + 1}: {name} read {min(runs[name][-1]['read_s']):.2f} s", file=sys.stderr)
    reference = next(iter(builds))
    table = Table(title=f"llama-cpp-python builds: the embedded model, 2 threads, {args.rounds} rounds")
    for column in ("build", "features", f"read {PROMPT_TOKENS} tokens: median (min) s", "tokens/s",
                   f"decode {DECODED_TOKENS}: median s", "tokens/s", f"greedy tokens as {reference}'s"):
        table.add_column(column)
    summary = {}
    for name, results in runs.items():
        reads = [s for r in results for s in r["read_s"]]
        decodes = [s for r in results for s in r["decode_s"]]
        agree = sum(a == b for a, b in zip(results[0]["tokens"], runs[reference][0]["tokens"]))
        summary[name] = {"features": results[0]["features"], "read_median_s": statistics.median(reads),
                         "read_min_s": min(reads), "read_tokens_per_s": PROMPT_TOKENS / statistics.median(reads),
                         "decode_median_s": statistics.median(decodes),
                         "decode_tokens_per_s": DECODED_TOKENS / statistics.median(decodes),
                         "greedy_tokens_agreeing": agree, "stable": all(r["same_each_time"] for r in results),
                         "reads_s": reads, "decodes_s": decodes}
        row = summary[name]
        table.add_row(name, " ".join(f for f in row["features"] if f.startswith("AVX")),
                      f"{row['read_median_s']:.2f} ({row['read_min_s']:.2f})", f"{row['read_tokens_per_s']:.0f}",
                      f"{row['decode_median_s']:.2f}", f"{row['decode_tokens_per_s']:.0f}",
                      f"{agree} of {DECODED_TOKENS}")
    Console(width=150).print(table)
    args.out.write_text(json.dumps({"rounds": args.rounds, "prompt_tokens": PROMPT_TOKENS,
                                    "decoded_tokens": DECODED_TOKENS, "builds": summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
