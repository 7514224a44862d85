"""The embedded model's child process, token speed of warm answers: this checkout against a
reference commit, in alternating rounds, beside the floor (llama.cpp in one process, loaded and
evaluated on its main thread).

    python scripts/bench_model_thread.py --before REV [--rounds 4] [--answers 8] [--model qwen2.5-coder-1.5b]

Each probe starts the child as the language server does (`LlamaProcessBackend`: the installed
llama.cpp build, 2 threads, fused attention, the model's layers as `model.embedded_layers` picks
them here; the 0.5B unless `--model` names another embedded model), reads a ~950-token prompt of
Django's `query.py` (or this package's sources) cold, then asks `--answers` warm answers of 16
tokens, each after the same prompt plus one character (as typing does: the cache holds all but the
last token or two), and `--answers` answers after a word typed halfway (the prompt cut before a
` self` near its end, the answer held to start with ` sel` or `sel`: word healing), up to 8
tokens or the line's end; then, in the same process once the child has gone, the floor: the same
file loaded by `llama_cpp.Llama` on the main thread, the prompt, and 16 tokens written one `eval`
at a time. Figures: the cold prompt's seconds, the warm answers' milliseconds a token written
(their median), the floor's, and the word-healed answers' milliseconds (their median) and texts.
Writes eval/results/bench-model-thread.json (-1.5b.json for that model).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.reference_checkout import alternating_rounds, paired_arguments  # noqa: E402

PROBE = r"""
import json, statistics, sys, time
from pathlib import Path
from repomem.backends.base import GenerationRequest
from repomem.backends.llama_process import LlamaProcessBackend
from repomem.failures import Failure
path, text_path, answers = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
text = Path(text_path).read_text(encoding="utf-8")[:3500]
backend = LlamaProcessBackend.open(path, context_tokens=4096, threads=2, flash_attention=True)
assert not isinstance(backend, Failure), backend
started = time.perf_counter()
cold = backend.generate(GenerationRequest(prompt=text, max_tokens=1, stop=[], deadline_s=120))
prompt_s = time.perf_counter() - started
token_ms = []
for i in range(answers):
    started = time.perf_counter()
    warm = backend.generate(GenerationRequest(prompt=text + "x" * (1 + i % 2), max_tokens=16, stop=[],
                                              deadline_s=120))
    token_ms.append((time.perf_counter() - started) * 1000 / max(warm.completion_tokens, 1))
# A word typed halfway: the prompt ends before it, the answer starts with its letters (word healing).
cut = text.rfind(" self")
forced_ms, forced_texts = [], []
for i in range(answers):
    started = time.perf_counter()
    held = backend.generate(GenerationRequest(prompt=text[:cut] + " " * (i % 2), max_tokens=8, stop=["\n"],
                                              deadline_s=120, forced_start=" sel" if i % 2 == 0 else "sel"))
    forced_ms.append((time.perf_counter() - started) * 1000)
    forced_texts.append(held.text)
backend.close()
import llama_cpp
llm = llama_cpp.Llama(model_path=str(path), n_ctx=4096, n_threads=2, n_threads_batch=2, flash_attn=True,
                      verbose=False)
tokens = llm.tokenize(text.encode())
llm.eval(tokens)
started = time.perf_counter()
for token in tokens[:16]:
    llm.eval([token])
floor_ms = (time.perf_counter() - started) * 1000 / 16
print(json.dumps({"file": path.name, "prompt_tokens": cold.prompt_tokens, "prompt_s": prompt_s,
                  "token_ms": token_ms, "median_token_ms": statistics.median(token_ms), "floor_token_ms": floor_ms,
                  "forced_ms": forced_ms, "median_forced_ms": statistics.median(forced_ms),
                  "forced_texts": forced_texts}))
"""


def main() -> int:
    parser = paired_arguments(__doc__, "HEAD", 4, ROOT / "eval" / "results" / "bench-model-thread.json")
    parser.set_defaults(out=None)
    parser.add_argument("--answers", type=int, default=8)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="an embedded model's name")
    args = parser.parse_args()
    if args.out is None:
        suffix = "" if args.model == "qwen2.5-coder-0.5b" else "-" + args.model.split("-")[-1]
        args.out = ROOT / "eval" / "results" / f"bench-model-thread{suffix}.json"
    from repomem.backends.bf16_layers import embedded_model_file_as_is, widened_for
    from repomem.backends.models import model_named, model_path
    from repomem.failures import Failure
    from scripts.bench_sources import django_or

    model = model_named(args.model)
    if isinstance(model, Failure):
        raise SystemExit(model.message)
    # The file `model.embedded_layers = "auto"` runs here, as this checkout decides it.
    shipped = model_path(model)
    if not shipped.is_file():
        raise SystemExit(f"no {shipped.name}: run `repomem model pull {model.name}` first")
    path = embedded_model_file_as_is(shipped, "auto", widened_for(model, "auto")) or shipped
    source = django_or(args.repo)
    text = source / "django" / "db" / "models" / "query.py"
    if not text.is_file():
        text = ROOT / "repomem" / "completion" / "engine.py"
    console = Console(width=120)
    runs = alternating_rounds(args.before, args.rounds, console, source.name, "the child's warm answers",
                              PROBE, lambda _: [str(path), str(text), str(args.answers)])
    table = Table(title=f"Warm answers of the model's child ({path.name}, {text.name}, 16 tokens each; medians of "
                        f"{args.rounds} alternating rounds)")
    for column in ("checkout", "cold prompt s", "ms a token, warm", "floor: main thread, ms a token",
                   "ms an answer after a word typed halfway"):
        table.add_column(column, justify="right" if column != "checkout" else "left")
    summary = {}
    for label, probes in runs.items():
        row = {"prompt_s": statistics.median(p["prompt_s"] for p in probes),
               "token_ms": statistics.median(p["median_token_ms"] for p in probes),
               "floor_token_ms": statistics.median(p["floor_token_ms"] for p in probes),
               "forced_ms": statistics.median(p["median_forced_ms"] for p in probes if "median_forced_ms" in p)
               if any("median_forced_ms" in p for p in probes) else None,
               "forced_texts": sorted({text for p in probes for text in p.get("forced_texts", [])})}
        summary[label] = row
        texts = ", ".join(map(repr, row["forced_texts"]))
        forced = "" if row["forced_ms"] is None else f"{row['forced_ms']:.0f} ({texts})"
        table.add_row(label, f"{row['prompt_s']:.2f}", f"{row['token_ms']:.1f}", f"{row['floor_token_ms']:.1f}", forced)
    console.print(table)
    args.out.write_text(json.dumps({"before": args.before, "text": text.name, "runs": runs, "summary": summary},
                                   indent=2) + "\n")
    console.print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
