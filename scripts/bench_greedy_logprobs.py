"""What the answers' confidence costs the embedded model: greedy decoding with and without the
log-probability recorder, and llama-cpp-python's own way (a model loaded with `logits_all`).

    python scripts/bench_greedy_logprobs.py [--tokens 96] [--runs 5] [--prompt-tokens 1000]

One llama.cpp model in this process without `logits_all` decodes the same prompt `--runs` times
each way, alternating (plain greedy; greedy with repomem.backends.greedy_logprobs' recorder);
a second, loaded with `logits_all` as llama-cpp-python requires for `logprobs`, is the reference.
Every way's prompt is cached before its timed runs, so the figure is the decoding: milliseconds
per generated token, median (min-max), and a cold prompt's prefill with and without `logits_all`.
The recorded mean log-probability is checked against the reference's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.backends.greedy_logprobs import ChosenTokenLogprobs  # noqa: E402
from repomem.backends.models import small_model_path  # noqa: E402

CODE_LINE = "    total = sum(item.price * item.quantity for item in cart.items if item.quantity > 0)\n"


def _decode(llama, prompt: list[int], tokens: int, recorder: ChosenTokenLogprobs | None,
            logprobs: bool = False) -> tuple[float, int, float | None]:
    """Seconds per generated token, tokens generated, mean log-probability (when known)."""
    started = time.perf_counter()
    output = llama.create_completion(prompt, max_tokens=tokens, temperature=0.0, repeat_penalty=1.0,
                                     logprobs=0 if logprobs else None,
                                     logits_processor=[recorder] if recorder is not None else None)
    seconds = time.perf_counter() - started
    choice = output["choices"][0]
    generated = output["usage"]["completion_tokens"]
    mean = None
    if recorder is not None and recorder.values:
        mean = sum(recorder.values[:generated]) / generated
    elif logprobs:
        values = choice["logprobs"]["token_logprobs"]
        mean = sum(values) / len(values)
    return seconds / max(generated, 1), generated, mean


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=96, help="tokens generated a run")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--prompt-tokens", type=int, default=1000, help="the cold prompt's length")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    from llama_cpp import Llama

    path = small_model_path()
    if not path.is_file():
        print(f"error: {path} is missing: run `repomem model pull` first", file=sys.stderr)
        return 2
    common = {"model_path": str(path), "n_ctx": 4096, "n_threads": args.threads, "n_threads_batch": args.threads,
              "verbose": False}
    plain = Llama(**common)
    reference = Llama(**common, logits_all=True)
    text = CODE_LINE * (args.prompt_tokens // 20)
    prompt = plain.tokenize(text.encode(), add_bos=False)[: args.prompt_tokens]
    prefill = {}
    for name, model in (("logits_all off", plain), ("logits_all on (reference)", reference)):
        model.reset()
        prefill[name] = _decode(model, prompt, 1, None)[0]  # one token: the prompt's evaluation
    ways = {"greedy": [], "greedy + recorder": [], "logits_all + logprobs (reference)": []}
    means: dict[str, float | None] = {}
    for _ in range(args.runs + 1):  # the first round warms each way's cache and is not kept
        for name in ways:
            recorder = ChosenTokenLogprobs() if name == "greedy + recorder" else None
            model = reference if name.startswith("logits_all") else plain
            per_token, _, mean = _decode(model, prompt, args.tokens, recorder, logprobs=model is reference)
            ways[name].append(per_token)
            if mean is not None:
                means[name] = mean
    print(f"cold prefill of {len(prompt)} tokens, {args.threads} threads: "
          + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in prefill.items()))
    base = statistics.median(ways["greedy"][1:])
    print(f"decoding {args.tokens} tokens, {args.runs} runs each, alternating (ms per token, median (min-max)):")
    for name, values in ways.items():
        kept = values[1:]
        median = statistics.median(kept)
        print(f"  {name:36s} {median * 1000:7.2f} ({min(kept) * 1000:.2f}-{max(kept) * 1000:.2f})  "
              f"{median / base:5.2f}x greedy")
    recorded, library = means.get("greedy + recorder"), means.get("logits_all + logprobs (reference)")
    print(f"mean log-probability per token: recorder {recorded:.6f}, llama-cpp-python {library:.6f}")
    return 0 if recorded is not None and library is not None and abs(recorded - library) < 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
