"""The embedded model keeping moved runs of its KV cache (model.reuse_chunk_tokens), with the
real GGUF, in this process and in the child: fewer tokens evaluated, the cache's cells where
llama.cpp expects them, and the answer a cold evaluation gives on a clear-cut prompt."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import llama_cpp
import pytest

from repomem.backends.base import GenerationRequest, common_prefix
from repomem.backends.kv_reuse import with_chunk_reuse
from repomem.backends.llama import LlamaBackend
from repomem.backends.llama_process import LlamaProcessBackend
from repomem.failures import Failure

HEADER = "# the below code fragments can be found in the repository\n"
PRICING = "".join(f"def price_{n}(amount):\n    return amount * {n + 2} // {n + 1}\n\n" for n in range(6))
TAXES = "".join(f"def tax_{n}(amount):\n    return amount * {n + 1} // 100\n\n" for n in range(6))
ROUNDING = "".join(f"def round_{n}(amount):\n    return round(amount, {n})\n\n" for n in range(6))
FILE = "from shop.pricing import price_3\n\n\ndef total(items):\n    return sum(price_3(item) for item in"
# After the edit the retrieved blocks changed: ROUNDING in TAXES' place, PRICING moved after it.
BEFORE = HEADER + TAXES + PRICING + FILE
AFTER = HEADER + ROUNDING + PRICING + FILE


def _request(prompt: str) -> GenerationRequest:
    return GenerationRequest(prompt=prompt, max_tokens=12, stop=("\n",), deadline_s=120)


@pytest.fixture(scope="module")
def reusing(model_path: Path) -> LlamaBackend:
    backend = LlamaBackend.open(model_path, context_tokens=2048, threads=2, reuse_chunk_tokens=32)
    assert not isinstance(backend, Failure), backend
    return backend


def test_moved_runs_are_kept_and_the_answer_is_the_cold_ones(reusing, llama):
    assert not isinstance(reusing.generate(_request(BEFORE)), Failure)
    after = reusing.generate(_request(AFTER))
    llama.generate(_request("# something else\n"))  # the plain model: AFTER cold
    cold = llama.generate(_request(AFTER))
    assert not isinstance(after, Failure) and not isinstance(cold, Failure)
    shared = common_prefix(reusing._tokens(BEFORE), reusing._tokens(AFTER))
    # PRICING and the file's lines were cached at other positions: kept, only ROUNDING evaluated.
    assert after.cached_tokens >= shared + reusing.count(PRICING) - 8
    assert cold.cached_tokens < shared + 4
    assert after.text == cold.text and after.text.strip()
    model = reusing._llama
    memory = model._ctx.memory
    # Every cell in sequence 0 at positions 0..n_tokens-1; the runs' staging sequence left empty.
    assert llama_cpp.llama_memory_seq_pos_min(memory, 0) == 0
    assert llama_cpp.llama_memory_seq_pos_max(memory, 0) == model.n_tokens - 1
    assert llama_cpp.llama_memory_seq_pos_max(memory, 1) == -1
    again = reusing.generate(_request(AFTER))  # the same prompt: only its last token again
    assert not isinstance(again, Failure) and again.text == after.text
    assert again.cached_tokens == again.prompt_tokens - 1


def test_the_child_reuses_the_same_runs_and_answers_alike(model_path: Path, reusing):
    child = LlamaProcessBackend.open(model_path, context_tokens=2048, threads=2, reuse_chunk_tokens=32)
    assert not isinstance(child, Failure), child
    try:
        answers = []
        for backend in (reusing, child):  # the same history: an approximation depends on it
            for prompt in ("# something else\n", BEFORE):
                assert not isinstance(backend.generate(_request(prompt)), Failure)
            answers.append(backend.generate(_request(AFTER)))
        in_process, answer = answers
        assert not isinstance(answer, Failure) and not isinstance(in_process, Failure)
        assert answer.text == in_process.text
        assert answer.cached_tokens == in_process.cached_tokens > common_prefix(child._client.tokens(BEFORE),
                                                                                child._client.tokens(AFTER))
    finally:
        child.close()


def test_cells_moved_max_moves_times_are_evaluated_again(model_path: Path):
    model = with_chunk_reuse(llama_cpp.Llama, 32, max_moves=1)(
        model_path=str(model_path), n_ctx=2048, n_threads=2, n_threads_batch=2, verbose=False)

    def held_after(prompt: str) -> int:
        """The prompt tokens the cache held when `prompt` was evaluated (its beginning)."""
        model.create_completion(prompt, max_tokens=2, temperature=0.0, top_k=1)
        return model._fresh_from

    tokens = {name: model.tokenize(text.encode(), add_bos=False, special=True)
              for name, text in (("before", BEFORE), ("after", AFTER))}
    shared = common_prefix(tokens["before"], tokens["after"])
    held_after(BEFORE)
    assert held_after(AFTER) > shared + 100  # PRICING and the file's lines moved once
    assert max(model._moves[:model._fresh_from]) == 1
    assert held_after(BEFORE) == shared  # moving them back would be a second move: evaluated again
    assert held_after(AFTER) > shared + 100  # evaluated afresh, they may move once more


def test_a_prefix_only_request_moves_no_run(model_path: Path):
    """A prefix-only request (the line below an accepted completion) keeps the cache's common
    beginning with its prompt and evaluates the rest; the next request may move runs again."""
    model = with_chunk_reuse(llama_cpp.Llama, 32)(
        model_path=str(model_path), n_ctx=2048, n_threads=2, n_threads_batch=2, verbose=False)

    def held_after(prompt: str, prefix_only: bool) -> int:
        model.prefix_only = prefix_only
        model.create_completion(prompt, max_tokens=2, temperature=0.0, top_k=1)
        return model._fresh_from

    after_tokens = model.tokenize(AFTER.encode(), add_bos=False, special=True)
    shared = common_prefix(model.tokenize(BEFORE.encode(), add_bos=False, special=True), after_tokens)
    held_after(BEFORE, False)
    assert held_after(AFTER, True) == shared  # PRICING and the file's lines evaluated where they are now
    held_after(BEFORE, False)
    assert held_after(AFTER, False) > shared + 100  # moved into place when allowed


def test_the_child_moves_no_run_for_a_prefix_only_request(model_path: Path, tmp_path: Path):
    """The child hears the request's prefix-only header (its prompt states count what it evaluated)."""
    child = LlamaProcessBackend.open(model_path, context_tokens=2048, threads=2, reuse_chunk_tokens=32,
                                     prompt_cache=(tmp_path, 1 << 30))
    assert not isinstance(child, Failure), child
    try:
        shared = common_prefix(child._client.tokens(BEFORE), child._client.tokens(AFTER))
        answers = {}
        for prefix_only in (False, True):
            for prompt in ("# something else\n", BEFORE):
                assert not isinstance(child.generate(_request(prompt)), Failure)
            answers[prefix_only] = child.generate(dataclasses.replace(_request(AFTER), prefix_only=prefix_only))
        assert not isinstance(answers[False], Failure) and not isinstance(answers[True], Failure)
        assert answers[False].cached_tokens > shared + 100
        assert answers[True].cached_tokens == shared  # what the child kept, not more
        assert answers[True].text == answers[False].text  # a clear-cut prompt: the cold answer either way
    finally:
        child.close()
