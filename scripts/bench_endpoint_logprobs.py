"""What asking a server for log-probabilities costs (model.endpoint_logprobs), per generation.

    python scripts/bench_endpoint_logprobs.py [--prompt-tokens 300] [--new-tokens 24] [--repeats 5]

Starts llama-cpp-python's OpenAI-compatible server on loopback with the embedded model (the server
a user may run on a CPU), then times the same greedy request through repomem's OpenAI backend with
and without `logprobs`, alternating so drift hits both alike. The prompt is new text each time, so
neither side is served from the prompt cache. Prints a table and writes
eval/results/bench-endpoint-logprobs.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.backends.base import GenerationRequest  # noqa: E402
from repomem.backends.models import pull_small_model  # noqa: E402
from repomem.backends.openai_http import OpenAIBackend  # noqa: E402
from repomem.failures import Failure  # noqa: E402
from tests.cli_process import free_port  # noqa: E402


def start_server(model: Path, threads: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host",
                                "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads", str(threads)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        probe = OpenAIBackend.connect(url, deadline_s=2)
        if not isinstance(probe, Failure):
            probe.close()
            return process, url
        time.sleep(1)
    process.kill()
    raise SystemExit("llama_cpp.server did not start")


def prompt_of(backend: OpenAIBackend, tokens: int, salt: int) -> str:
    """Python source of about `tokens` tokens, different for each `salt` (no prompt-cache hits)."""
    lines: list[str] = []
    while backend.count("".join(lines)) < tokens:
        i = len(lines)
        lines.append(f"def step_{salt}_{i}(value):\n    return value * {i + salt} - {salt}\n\n")
    return "".join(lines) + f"def step_{salt}_total(value):\n    return"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompt-tokens", type=int, default=300)
    parser.add_argument("--new-tokens", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-endpoint-logprobs.json")
    args = parser.parse_args()
    model = pull_small_model()
    if isinstance(model, Failure):
        raise SystemExit(model.message)
    process, url = start_server(model, args.threads)
    seconds: dict[bool, list[float]] = {True: [], False: []}
    tokens: dict[bool, list[int]] = {True: [], False: []}
    try:
        clients = {asks: OpenAIBackend.connect(url, asks_logprobs=asks) for asks in (True, False)}
        for repeat in range(args.repeats):
            for asks in ((True, False) if repeat % 2 == 0 else (False, True)):
                client = clients[asks]
                # No stop strings: every request generates exactly --new-tokens tokens.
                request = GenerationRequest(prompt_of(client, args.prompt_tokens, 2 * repeat + asks),
                                            args.new_tokens, (), 300.0)
                started = time.perf_counter()
                answer = client.generate(request)
                if isinstance(answer, Failure):
                    raise SystemExit(answer.message)
                seconds[asks].append(time.perf_counter() - started)
                tokens[asks].append(answer.completion_tokens)
                assert (answer.mean_logprob is not None) == asks, answer
        for client in clients.values():
            client.close()
    finally:
        process.kill()
        process.wait(timeout=30)
    summary = {
        "server": "llama-cpp-python's llama_cpp.server, embedded Qwen2.5-Coder-0.5B Q4_K_M, CPU",
        "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens, "repeats": args.repeats,
        "threads": args.threads,
        "with_logprobs_s": seconds[True], "without_logprobs_s": seconds[False],
        "generated_tokens": {"with": tokens[True], "without": tokens[False]},
        "median_with_s": statistics.median(seconds[True]), "median_without_s": statistics.median(seconds[False]),
    }
    extra = summary["median_with_s"] - summary["median_without_s"]
    summary["extra_s_per_generated_token"] = extra / max(statistics.median(tokens[True]), 1)
    table = Table(title=f"one generation, {args.prompt_tokens}-token prompt, {args.new_tokens} new tokens "
                        f"(median of {args.repeats})")
    for column in ("logprobs asked", "median s", "min s", "max s"):
        table.add_column(column, justify="right")
    for asks in (True, False):
        table.add_row("yes" if asks else "no", f"{statistics.median(seconds[asks]):.2f}",
                      f"{min(seconds[asks]):.2f}", f"{max(seconds[asks]):.2f}")
    Console().print(table)
    print(f"extra per generated token when asked: {summary['extra_s_per_generated_token'] * 1000:.0f} ms")
    args.out.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
