"""Answer a deferred requests file (`eval run --defer`) into a generation store, in large batches.

    python scripts/answer_requests.py REQUESTS.jsonl --out STORE.jsonl [--hf MODEL | --model M.gguf | ...]

The machine that runs this needs the model and this checkout, not the repositories: `eval run
--defer` built every prompt elsewhere. Tasks are taken in a shuffled order (fixed seed), all of a
task's prompts together, so a run stopped by --time-limit leaves whole tasks of every repository;
inside each stretch of a few batches prompts are sorted by length (left padding wastes least when
neighbours are alike). Each batch is one `generate_batch` of a backend that batches (transformers,
vLLM); others answer one prompt at a time. The backend is the one `eval run` opens for the same
model options, so the answers are what the evaluation would have stored: same stop strings, same
`enough` rule (the line count each request carries), same mean log-probability.
Append STORE.jsonl to the run's `--generations` file and run the evaluation again to score them.
The backend's name must be the one the deferring run used (the store is keyed by it): give the
model file the same name. Answers already in --out are skipped, so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

from rich.console import Console

from repomem.backends.base import Generation, GenerationRequest, constrains_start
from repomem.backends.batching import supports_batches
from repomem.backends.memo import GenerationStore
from repomem.cli.backend_options import add_backend_options, open_chosen_backends
from repomem.cli.errors import UserError
from repomem.config import Config
from repomem.evaluation.metrics import EnoughLines
from repomem.failures import Failure

SHUFFLE_SEED = 20231
BATCHES_PER_STRETCH = 8
DEADLINE_S = 3600.0  # per batch: the evaluator's deadline does not apply to an offline answer


def _requests(path: Path) -> list[dict]:
    entries = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                entries.append(json.loads(line))
            except ValueError:
                continue  # a torn last line: that request is simply not answered
    return entries


def _in_task_order(entries: list[dict], batch: int) -> list[dict]:
    by_task: dict[str, list[dict]] = {}
    for entry in entries:
        by_task.setdefault(entry["task"], []).append(entry)
    tasks = sorted(by_task)
    random.Random(SHUFFLE_SEED).shuffle(tasks)
    ordered = [entry for task in tasks for entry in by_task[task]]
    stretch = batch * BATCHES_PER_STRETCH
    return [entry for first in range(0, len(ordered), stretch)
            for entry in sorted(ordered[first:first + stretch], key=lambda e: len(e["prompt"]))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("requests", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="generation store to append the answers to")
    parser.add_argument("--batch", type=int, default=128, help="prompts per forward pass")
    parser.add_argument("--time-limit", type=float, default=0, help="stop starting batches after this many s")
    add_backend_options(parser)
    args = parser.parse_args()
    started = time.perf_counter()
    try:
        backend = open_chosen_backends(args, Config(), Console(stderr=True))[0]
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    try:
        return _answer(args, backend, started)
    finally:
        backend.close()


def _answer(args: argparse.Namespace, backend, started: float) -> int:
    store = GenerationStore.open(args.out)
    if isinstance(store, Failure):
        print(f"error: {store.message}", file=sys.stderr)
        return 1
    entries = [e for e in _requests(args.requests) if store.get(e["key"]) is None]
    models = {e["model"] for e in entries}
    if models - {backend.name}:
        print(f"error: the requests were built for {sorted(models)}, this model is {backend.name!r}: the store "
              "would not answer them (name the model file as the deferring run did)", file=sys.stderr)
        return 1
    if any(e.get("forced_start") for e in entries) and not constrains_start(backend):
        print(f"error: some requests must start with a typed word (eval run --typing word) and {backend.name} "
              "cannot hold a start: answer them with --hf or --model", file=sys.stderr)
        return 1
    print(f"{len(entries)} requests to answer, model loaded in {time.perf_counter() - started:.0f} s", flush=True)
    entries = _in_task_order(entries, args.batch)
    answered = failed = 0
    batches: list[int] = []
    for first in range(0, len(entries), args.batch):
        if args.time_limit and time.perf_counter() - started > args.time_limit:
            print("time limit reached: run again to answer the rest", flush=True)
            break
        chunk = entries[first:first + args.batch]
        requests = [GenerationRequest(e["prompt"], int(e["max_tokens"]), tuple(e["stop"]), DEADLINE_S,
                                      enough=EnoughLines(e["enough_lines"]) if "enough_lines" in e else None,
                                      forced_start=e.get("forced_start", ""))
                    for e in chunk]
        batch_started = time.perf_counter()
        answers = backend.generate_batch(requests) if supports_batches(backend) else map(backend.generate, requests)
        for entry, answer in zip(chunk, answers):
            if isinstance(answer, Generation):
                store.put(entry["key"], answer)
                answered += 1
            else:
                failed += 1
        batches.append(len(chunk))
        print(f"{answered + failed}/{len(entries)} answered ({failed} failed), batch of {len(chunk)} in "
              f"{time.perf_counter() - batch_started:.1f} s", flush=True)
    store.close()
    print(f"{answered} answers -> {args.out}, {failed} failed, {time.perf_counter() - started:.0f} s")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
