"""How likely two GGUF files of one model find the right answers: the mean log-probability per token
of each task's ground truth after its prompt, paired task by task. Exact match moves only where an
answer flips; this moves with every task, so it shows a small systematic loss (say, from rounding
the weights) that a few hundred exact-match tasks cannot.

    repomem eval run ... --generations EMPTY.jsonl --defer REQUESTS.jsonl    # the prompts, not generated
    python scripts/compare_model_likelihood.py REQUESTS.jsonl --tasks line.jsonl --tasks api.jsonl \
        [--models A.gguf B.gguf] [--out eval/results/bf16-layers/likelihood.json]
    python scripts/compare_model_likelihood.py REQUESTS.jsonl --tasks ... \
        --compare OUT1.json:A.gguf OUT2.json:B.gguf --out BOTH.json

`--compare` scores nothing: it pairs two files' scores from earlier runs' outputs, so that the
same file run by two llama.cpp builds (each run in its own environment) can be compared.

Only prompts with retrieved blocks are scored (the retrieving round; the file-only round's prompts
are left out). Default models: the shipped embedded model and its layers widened to bfloat16.
Each prompt is evaluated cold by each model; the answer's tokens are then fed one at a time and
the log-softmax of each is read (32 tokens at most). A progress bar per model; prints a table;
writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import track

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from repomem.backends.bf16_layers import widened_path  # noqa: E402
from repomem.backends.models import small_model_path  # noqa: E402
from repomem.evaluation.report import paired_bootstrap  # noqa: E402
from repomem.evaluation.tasks import load_tasks  # noqa: E402
from repomem.failures import Failure  # noqa: E402

BLOCK_MARKER = "the below code fragment can be found in:"  # repomem/completion/prompt.py's block header
FILE_SEPARATOR = "<|file_sep|>"  # Qwen's repository-level format: one before each file shown


def retrieving(prompt: str) -> bool:
    """Whether `prompt` shows retrieved blocks: RepoCoder's commented frame, or other files before
    the current one in Qwen's repository-level format (a file-only prompt shows one file)."""
    return BLOCK_MARKER in prompt or prompt.count(FILE_SEPARATOR) > 1
MAX_ANSWER_TOKENS = 32


def answer_logprobs(model, prompt: str, answer: str) -> list[float]:
    """Log-probability of each of the answer's tokens after the prompt (the KV cache cleared first)."""
    prompt_tokens = model.tokenize(prompt.encode(), add_bos=True, special=True)
    answer_tokens = model.tokenize(answer.encode(), add_bos=False, special=False)[:MAX_ANSWER_TOKENS]
    model.reset()
    model._ctx.kv_cache_clear()
    model.eval(prompt_tokens)
    logprobs = []
    for token in answer_tokens:
        # (n_vocab,) logits of the last position evaluated (llama.cpp keeps them without logits_all)
        logits = np.ctypeslib.as_array(model._ctx.get_logits(), shape=(model.n_vocab(),)).astype(np.float64)
        top = logits.max()
        logprobs.append(float(logits[token] - top - np.log(np.exp(logits - top).sum())))
        model.eval([token])
    return logprobs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("requests", type=Path)
    parser.add_argument("--tasks", type=Path, action="append", required=True)
    parser.add_argument("--models", type=Path, nargs="+", default=[small_model_path(), widened_path()],
                        help="two files to pair, or one whose scores a later --compare pairs")
    parser.add_argument("--out", type=Path, default=Path("eval/results/bf16-layers/likelihood.json"))
    parser.add_argument("--compare", nargs=2, metavar="OUTPUT.json:MODEL",
                        help="pair the scores two earlier runs wrote (no model is run)")
    args = parser.parse_args()

    truth = {}
    for path in args.tasks:
        tasks = load_tasks(path)
        if isinstance(tasks, Failure):
            raise SystemExit(tasks.message)
        truth.update({task.task_id: task for task in tasks})
    requests = [json.loads(line) for line in args.requests.read_text().splitlines() if line.strip()]
    requests = [r for r in requests if retrieving(r["prompt"]) and r["task"] in truth]
    scores: dict[str, dict[str, float]] = defaultdict(dict)  # model name -> task -> mean log-probability
    if args.compare:
        names = []
        for item in args.compare:
            output, _, name = item.rpartition(":")
            label = f"{name} ({Path(output).stem})"
            scores[label] = json.loads(Path(output).read_text())["per_task"][name]
            names.append(label)
        return _report(truth, scores, names[0], names[1], args.out)
    import llama_cpp

    for model_path in args.models:
        threads = os.cpu_count() or 1
        model = llama_cpp.Llama(model_path=str(model_path), n_ctx=4096, n_threads=threads, n_threads_batch=threads,
                                verbose=False)
        for request in track(requests, description=model_path.name, console=Console(stderr=True)):
            logprobs = answer_logprobs(model, request["prompt"], truth[request["task"]].ground_truth)
            if logprobs:
                scores[model_path.name][request["task"]] = float(np.mean(logprobs))
        del model
    if len(args.models) == 1:  # scores alone, for a later --compare
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"models": [args.models[0].name], "per_task": scores}, indent=2) + "\n")
        return 0
    first, second = (path.name for path in args.models[:2])
    return _report(truth, scores, first, second, args.out)


def _report(truth: dict, scores: dict[str, dict[str, float]], first: str, second: str, out: Path) -> int:
    """The paired table of two models' scores by split, printed and written to `out` with the scores."""
    rows = {}
    for split in sorted({truth[t].split for t in scores[first]}):
        ids = [t for t in scores[first] if truth[t].split == split and t in scores[second]]
        a = np.array([scores[first][t] for t in ids])
        b = np.array([scores[second][t] for t in ids])
        mean, low, high = (value / 100 for value in paired_bootstrap(b, a))
        rows[split] = {"tasks": len(ids), first: float(a.mean()), second: float(b.mean()),
                       "difference": [mean, low, high], "second_higher": int((b > a).sum()),
                       "first_higher": int((a > b).sum())}
    print(f"| split | tasks | {first} | {second} | difference [95%] | tasks where the second is higher / lower |")
    print("| --- | --- | --- | --- | --- | --- |")
    for split, row in rows.items():
        mean, low, high = row["difference"]
        print(f"| {split} | {row['tasks']} | {row[first]:.4f} | {row[second]:.4f} | {mean:+.4f} [{low:+.4f}, "
              f"{high:+.4f}] | {row['second_higher']} / {row['first_higher']} |")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"models": [first, second], "splits": rows, "per_task": scores}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
