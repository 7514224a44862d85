"""The transformers backend on the CPU with the embedded GGUF (dequantized by transformers; the
converted checkpoint is cached, so only the first load pays the conversion): exact token counts,
greedy generation with stop strings, batched generation equal to one prompt at a time, and the
CLI and the evaluator driving it."""

from __future__ import annotations

from pathlib import Path

import pytest

from repomem.backends.base import GenerationRequest
from repomem.backends.transformers_hf import TransformersBackend
from repomem.config import Config, with_overrides
from repomem.evaluation.run import RunSettings, read_results, run_evaluation
from repomem.evaluation.tasks import load_tasks
from repomem.failures import Failure
from tests.cli_process import run
from tests.repos import copy_example, with_short_prompts

PROMPTS = (
    "def fibonacci(n):\n    ",
    "import os\n\ndef list_files(path):\n    return ",
    "class Stack:\n    def push(self, item):\n        self.",
)


@pytest.fixture(scope="module")
def hf(model_path: Path):
    backend = TransformersBackend.open(str(model_path), context_tokens=2048, threads=2)
    assert not isinstance(backend, Failure), backend
    yield backend
    backend.close()


def _request(prompt: str, max_tokens: int = 8) -> GenerationRequest:
    return GenerationRequest(prompt=prompt, max_tokens=max_tokens, stop=("\n\n", "<|endoftext|>"), deadline_s=300)


@pytest.mark.slow
def test_counts_match_llama_cpp_and_batches_match_single_prompts(hf, llama):
    assert hf.name == "transformers:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" and hf.template.family == "qwen"
    for text in (*PROMPTS, "    return {'a': [1, 2]}  # ünïcode\n"):
        assert hf.count(text) == llama.count(text), text  # the GGUF's own vocabulary, two tokenizers
    single = [hf.generate(_request(p)) for p in PROMPTS]
    batch = hf.generate_batch([_request(p) for p in PROMPTS])
    assert [s.text for s in single] == [b.text for b in batch]  # left padding changes nothing (float32)
    for answer in single:
        assert not isinstance(answer, Failure) and answer.text.strip()
        assert "\n\n" not in answer.text and answer.completion_tokens <= 8
        assert answer.finish_reason in ("stop", "length")
    short = hf.generate(_request(PROMPTS[0], max_tokens=3))
    assert short.completion_tokens == 3 and short.finish_reason == "length"
    overflow = hf.generate_batch([_request("x " * 3000), _request(PROMPTS[1])])
    assert isinstance(overflow[0], Failure) and overflow[0].kind == "prompt-too-long"
    assert overflow[1].text == single[1].text  # one bad prompt does not spoil its batch


@pytest.mark.slow
def test_a_forced_start_holds_its_own_row_of_a_batch(hf):
    """Token healing inside a word with transformers: the row asked to start with `se` writes the
    model's `self`, the other row of the batch answers as it does alone."""
    point = ("class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n"
             "    def scaled(self, factor):\n        return Point(")
    forced = GenerationRequest(prompt=point, max_tokens=16, stop=("\n",), deadline_s=300, forced_start="se")
    both = hf.generate_batch([forced, _request(PROMPTS[1])])
    assert not isinstance(both[0], Failure) and both[0].text.startswith("self.x"), both[0]
    assert both[0].mean_logprob is not None and both[0].mean_logprob <= 0
    assert both[1].text == hf.generate(_request(PROMPTS[1])).text
    unforced = hf.generate(GenerationRequest(prompt=point + "se", max_tokens=16, stop=("\n",), deadline_s=300))
    assert not ("se" + unforced.text).startswith("self.x"), unforced  # mid-word, the name is broken


@pytest.mark.slow
def test_complete_with_the_hf_backend(model_path: Path, tmp_path: Path):
    repo = with_short_prompts(copy_example(tmp_path / "shop"))
    # One generation (the file-only round's second costs ~4 s more with transformers on the CPU).
    (repo / "repomem.toml").write_text((repo / "repomem.toml").read_text() + "[prompt]\nfile_only_round = false\n")
    result = run("complete", str(repo / "shop" / "report.py") + ":9", "--hf", str(model_path), timeout=900)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().startswith("compute_tax("), result.stdout


@pytest.mark.slow
def test_evaluation_batches_workers_requests(hf, tmp_path: Path):
    """Two workers on two tasks: their generations share forward passes."""
    from tests.e2e.test_eval import _task_line

    repos = tmp_path / "repositories"
    copy_example(repos / "shop")
    checkout = (repos / "shop" / "shop" / "checkout.py").read_text().split("\n")
    lines = [i for i, line in enumerate(checkout) if line.startswith("    ") and line.strip()][-2:]
    tasks = [_task_line(f"shop/line/{n}", "shop", "shop/checkout.py", checkout, line) for n, line in enumerate(lines)]
    (tmp_path / "line.jsonl").write_text("\n".join(tasks) + "\n")
    results = tmp_path / "results.jsonl"
    summary = run_evaluation(load_tasks(tmp_path / "line.jsonl"), repos, results,
                             RunSettings(strategies=("vanilla",), max_new_tokens=12, max_prompt_tokens=256),
                             config=with_overrides(Config(), model={"batch_gather_ms": 5000.0}),
                             backends=[hf], workers=2)
    assert not isinstance(summary, Failure), summary
    assert summary.written == 2 and summary.failed == 0
    assert sum(summary.batch_sizes) == 2 and max(summary.batch_sizes) == 2, summary.batch_sizes
    assert {r["backend"] for r in read_results(results)} == {hf.name}


@pytest.mark.slow
def test_logprob_is_the_sum_over_the_greedy_tokens_by_hand(hf):
    """The log-probability the backend reports against a greedy loop written out: the whole sequence
    through the model at each step (no cache), log-softmax, the best token taken and its value summed.
    In a batch, a row that stopped early counts only its own tokens."""
    import torch

    model, tokenizer = hf._model, hf._tokenizer
    for prompt, steps in ((PROMPTS[0], 6), (PROMPTS[2], 4)):
        ids = tokenizer.encode(prompt, add_special_tokens=False)
        total = 0.0
        with torch.inference_mode():
            for _ in range(steps):
                logits = model(torch.tensor([ids])).logits[0, -1].float()
                logprobs = torch.log_softmax(logits, dim=-1)
                token = int(torch.argmax(logits))
                total += float(logprobs[token])
                ids.append(token)
        answer = hf.generate(GenerationRequest(prompt=prompt, max_tokens=steps, stop=(), deadline_s=300))
        assert answer.completion_tokens == steps and answer.finish_reason == "length"
        assert answer.mean_logprob is not None and answer.mean_logprob < 0
        assert abs(answer.mean_logprob - total / steps) < 1e-3, (answer.mean_logprob, total / steps)
    short, long = hf.generate_batch([_request(PROMPTS[0], max_tokens=2), _request(PROMPTS[1], max_tokens=8)])
    alone = hf.generate(_request(PROMPTS[0], max_tokens=2))
    assert short.completion_tokens == 2 and abs(short.mean_logprob - alone.mean_logprob) < 1e-3
    assert long.completion_tokens > 2


@pytest.mark.slow
def test_counting_tokens_does_not_wait_for_a_running_generation(hf):
    """Evaluation workers count their prompts' tokens while a batch generates (with one lock for
    both, every count waited for the batch, and GPU batches stayed small)."""
    import threading
    import time

    gate = threading.Event()
    real = hf._model.generate

    def held(*args, **kwargs):  # the generation is under way, holding the model, until the gate opens
        gate.wait(30)
        return real(*args, **kwargs)

    hf._model.generate = held
    try:
        generating = threading.Thread(target=hf.generate, args=(_request(PROMPTS[0], max_tokens=2),))
        generating.start()
        deadline = time.monotonic() + 30
        while not hf._lock.locked() and time.monotonic() < deadline:
            time.sleep(0.01)
        counted: list[int] = []
        counter = threading.Thread(target=lambda: counted.append(hf.count("x = 1\n")))
        counter.start()
        counter.join(5)
        during = list(counted)
    finally:
        gate.set()
        generating.join()
        del hf._model.generate
    assert hf._lock.locked() is False and during == [hf.count("x = 1\n")], during
