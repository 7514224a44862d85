"""Prompt and token speed of the embedded models with llama.cpp's AMX kernels, against a build without
them, in the same run (scripts/llama_cpu_flags.sh asks for AMX where the CPU has its matrix tiles).

    python scripts/bench_amx.py --reference-build DIR [--rounds 3] [--out eval/results/bench-amx.json]

DIR holds a `llama_cpp` package built without AMX (e.g. `pip install --target DIR --no-binary
llama-cpp-python llama-cpp-python==0.3.36` with the flags the script gave before AMX); the
installed one is timed as "this build". Each (build, file) pair runs in its own process: the
shipped 0.5B, its 8-bit copy for the tiles (repomem.backends.int8_layers, written if missing), and
the shipped 1.5B; a 950-token prompt of Django's `query.py` (or this package's sources) read cold
`--rounds` times, then 16 tokens written one at a time, 2 threads, fused attention as the editor
runs. Also says whether the greedy tokens and the prompt's last logits equal the reference's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.backends.bf16_layers import INT8_SMALL, widen, widened_path  # noqa: E402
from repomem.backends.layer_timing import sample_text  # noqa: E402
from repomem.backends.models import QWEN_CODER_15B, model_path, small_model_path  # noqa: E402
from repomem.failures import Failure  # noqa: E402

PROMPT_TOKENS = 950
DECODE_TOKENS = 16

# Run in a child, with the build under test first on its path: prints one JSON line.
_TIMED = r"""
import json, sys, time
import numpy as np
import llama_cpp
path, text, rounds, prompt_tokens, decode_tokens, logits_out = sys.argv[1:7]
llm = llama_cpp.Llama(model_path=path, n_ctx=2048, n_threads=2, n_threads_batch=2, n_batch=512,
                      flash_attn=True, verbose=False)
tokens = llm.tokenize(open(text, encoding="utf-8").read().encode())[: int(prompt_tokens)]

def last_logits():
    pointer = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.ctypeslib.as_array(pointer, shape=(llm.n_vocab(),)).copy()

prompt_s, decode_ms = [], []
for _ in range(int(rounds)):
    llm.reset()
    llm._ctx.kv_cache_clear()
    started = time.perf_counter()
    llm.eval(tokens)
    prompt_s.append(time.perf_counter() - started)
    logits = last_logits()
    written = [int(np.argmax(logits))]
    started = time.perf_counter()
    for _ in range(int(decode_tokens)):
        llm.eval([written[-1]])
        written.append(int(np.argmax(last_logits())))
    decode_ms.append((time.perf_counter() - started) * 1000 / int(decode_tokens))
np.save(logits_out, logits)
print(json.dumps({"prompt_s": prompt_s, "decode_ms": decode_ms, "tokens": written,
                  "amx": b"AMX_INT8 = 1" in llama_cpp.llama_print_system_info()}))
"""


def timed(build: Path | None, model: Path, text: Path, rounds: int, logits_out: Path) -> dict:
    env = dict(os.environ)
    if build is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(build), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    run = subprocess.run([sys.executable, "-c", _TIMED, str(model), str(text), str(rounds), str(PROMPT_TOKENS),
                          str(DECODE_TOKENS), str(logits_out)], capture_output=True, text=True, env=env)
    if run.returncode != 0:
        raise SystemExit(f"{model.name} ({build or 'this build'}): exit {run.returncode}\n{run.stderr[-2000:]}")
    return json.loads(run.stdout.splitlines()[-1])


def main() -> int:
    import numpy as np

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference-build", type=Path, required=True,
                        help="a folder holding a llama_cpp package built without AMX")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-amx.json")
    args = parser.parse_args()
    if not (args.reference_build / "llama_cpp").is_dir():
        raise SystemExit(f"--reference-build: no llama_cpp package in {args.reference_build}")
    console = Console()
    int8 = widened_path(INT8_SMALL)
    if not int8.is_file():
        made = widen(small_model_path(), int8, INT8_SMALL)
        if isinstance(made, Failure):
            raise SystemExit(made.message)
    django = Path.home() / ".cache/repomem/packages/django-5.1.4/Django-5.1.4/django/db/models/query.py"
    files = [("0.5B shipped", small_model_path()), ("0.5B 8-bit copy", int8),
             ("1.5B shipped", model_path(QWEN_CODER_15B))]
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as scratch:
        text = Path(scratch) / "prompt.txt"
        text.write_text(django.read_text(encoding="utf-8") if django.is_file() else sample_text(), encoding="utf-8")
        for label, model in files:
            results = {}
            for build_name, build in (("reference build", args.reference_build), ("this build", None)):
                console.print(f"timing {label} with {build_name}")
                logits = Path(scratch) / f"{len(rows)}-{build_name}.npy"
                results[build_name] = timed(build, model, text, args.rounds, logits)
                results[build_name]["logits"] = logits
            reference, this = results["reference build"], results["this build"]
            difference = float(np.abs(np.load(this["logits"]) - np.load(reference["logits"])).max())
            rows.append({"file": label, "path": str(model), "this_build_amx": this["amx"],
                         "reference_build_amx": reference["amx"],
                         **{f"{key}_{name}": statistics.median(results[build][key])
                            for build, name in (("reference build", "reference"), ("this build", "this"))
                            for key in ("prompt_s", "decode_ms")},
                         "prompt_s_rounds": {build: results[build]["prompt_s"] for build in results},
                         "same_tokens": this["tokens"] == reference["tokens"],
                         "largest_logit_difference": round(difference, 4)})
    # The shipped 0.5B on the reference build is what ran before: each row against it too.
    baseline = rows[0]
    table = Table(title=f"{PROMPT_TOKENS}-token prompt read cold, {DECODE_TOKENS} tokens written, 2 threads "
                        f"(medians of {args.rounds})")
    for column in ("file", "reference build: prompt s / ms a token", "this build: prompt s / ms a token",
                   "prompt speed-up vs the shipped 0.5B before", "same tokens", "largest logit difference"):
        table.add_column(column)
    for row in rows:
        base = baseline if row["file"].startswith("0.5B") else row
        table.add_row(row["file"], f"{row['prompt_s_reference']:.2f} / {row['decode_ms_reference']:.1f}",
                      f"{row['prompt_s_this']:.2f} / {row['decode_ms_this']:.1f}",
                      f"{base['prompt_s_reference'] / row['prompt_s_this']:.2f}x",
                      "yes" if row["same_tokens"] else "no", f"{row['largest_logit_difference']:.3f}")
    console.print(table)
    args.out.write_text(json.dumps({"prompt_tokens": PROMPT_TOKENS, "decode_tokens": DECODE_TOKENS,
                                    "rounds": args.rounds, "rows": rows}, indent=2) + "\n")
    console.print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
