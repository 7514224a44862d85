"""Backend parts that need no model: the batching gatherer, the generation store, GGUF header names,
result labels."""

from __future__ import annotations

import http.server
import json
import struct
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from repomem.backends.base import Generation, GenerationRequest, common_prefix, window_overflow
from repomem.backends.batching import BatchingBackend, supports_batches
from repomem.backends.greedy_logprobs import GREEDY_SAMPLING, ChosenTokenLogprobs, annotated_chunks, is_plain_greedy
from repomem.backends.memo import DEFERRED, DeferredRequests, GenerationStore, MemoBackend
from repomem.backends.models import gguf_names
from repomem.backends.openai_http import OpenAIBackend, model_label
from repomem.backends.templates import PLAIN
from repomem.failures import Failure, FailureKind
from tests.http_servers import answer_json, serve_http


class ReversingModel:
    """A batch backend whose answer is a pure function of the prompt (the prompt reversed), so a
    caller can tell whether it got its own answer back; it records each batch it ran."""

    name = "reverse"
    template = PLAIN
    context_tokens = 100

    def __init__(self, seconds_per_batch: float = 0.05):
        self.batches: list[list[str]] = []
        self.seconds_per_batch = seconds_per_batch

    def count(self, text: str) -> int:
        return len(text)

    def generate_batch(self, requests):
        self.batches.append([r.prompt for r in requests])
        time.sleep(self.seconds_per_batch)
        return [window_overflow(len(r.prompt), r.max_tokens, self.context_tokens)
                or Generation(r.prompt[::-1], len(r.prompt), 1, 0, "stop", self.seconds_per_batch) for r in requests]

    def close(self) -> None:
        pass


def _request(prompt: str, max_tokens: int = 4) -> GenerationRequest:
    return GenerationRequest(prompt=prompt, max_tokens=max_tokens, stop=(), deadline_s=10)


def test_concurrent_callers_are_gathered_into_batches_and_get_their_own_answers():
    model = ReversingModel()
    batcher = BatchingBackend(model, max_batch=4, gather_s=0.2)
    prompts = [f"prompt-{i:02d}" for i in range(10)]
    answers: dict[str, Generation | Failure] = {}

    def call(prompt: str) -> None:
        answers[prompt] = batcher.generate(_request(prompt))

    threads = [threading.Thread(target=call, args=(p,)) for p in prompts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    batcher.close()
    assert {p: a.text for p, a in answers.items()} == {p: p[::-1] for p in prompts}
    assert sorted(p for batch in model.batches for p in batch) == prompts  # each prompt ran once
    assert max(len(b) for b in model.batches) == 4 and len(model.batches) <= 4  # 10 callers, batches of <= 4
    assert batcher.batch_sizes == [len(b) for b in model.batches]


def test_a_lone_caller_waits_only_the_gather_window_and_failures_stay_per_request():
    model = ReversingModel(seconds_per_batch=0.0)
    batcher = BatchingBackend(model, max_batch=8, gather_s=0.05)
    started = time.perf_counter()
    answer = batcher.generate(_request("x" * 10))
    assert isinstance(answer, Generation) and time.perf_counter() - started < 2.0
    too_long = batcher.generate(_request("x" * 99, max_tokens=4))
    assert isinstance(too_long, Failure) and too_long.kind == "prompt-too-long"
    batcher.stop()
    closed = batcher.generate(_request("late"))
    assert isinstance(closed, Failure) and closed.kind == "backend-closed"
    assert supports_batches(model) and not supports_batches(batcher)


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _gguf_header(path: Path, entries: list[tuple[str, int, bytes]]) -> None:
    body = b"GGUF" + struct.pack("<IQQ", 3, 0, len(entries))
    for key, kind, value in entries:
        body += _string(key) + struct.pack("<I", kind) + value
    path.write_bytes(body)


def test_gguf_names_come_from_the_header(tmp_path: Path):
    model = tmp_path / "m.gguf"
    _gguf_header(model, [
        ("general.architecture", 8, _string("qwen2")),
        ("general.alignment", 4, struct.pack("<I", 32)),
        ("general.name", 8, _string("Qwen2.5 Coder 0.5B Instruct")),
        ("general.basename", 8, _string("Qwen2.5-Coder")),
    ])
    assert gguf_names(model) == ("Qwen2.5 Coder 0.5B Instruct", "Qwen2.5-Coder")
    truncated = tmp_path / "t.gguf"
    truncated.write_bytes(model.read_bytes()[:40])
    assert gguf_names(truncated) == ()
    (tmp_path / "n.gguf").write_bytes(b"not a model")
    assert gguf_names(tmp_path / "n.gguf") == ()
    assert gguf_names(tmp_path / "absent.gguf") == ()


def test_a_gguf_is_parsed_once_while_transformers_converts_it(tmp_path: Path):
    gguf = pytest.importorskip("gguf")
    from repomem.backends.transformers_hf import _gguf_read_once

    model = tmp_path / "m.gguf"
    _gguf_header(model, [("general.architecture", 8, _string("qwen2")), ("general.name", 8, _string("tiny"))])
    original = gguf.GGUFReader
    with _gguf_read_once():
        first = gguf.GGUFReader(str(model))
        assert gguf.GGUFReader(tmp_path / "." / "m.gguf") is first  # the same file, however named
        assert gguf.GGUFReader(str(model), "c") is not first  # another mode is another reader
        assert first.fields["general.name"].contents() == "tiny"
    assert gguf.GGUFReader is original
    with pytest.raises(RuntimeError), _gguf_read_once():
        raise RuntimeError("a failed conversion")
    assert gguf.GGUFReader is original  # restored on the way out of a failure too
    assert gguf.GGUFReader(str(model)) is not first


def test_results_name_the_model_not_the_server():
    assert model_label("qwen.gguf", "http://127.0.0.1:8001") == model_label("qwen.gguf", "http://127.0.0.1:8002")
    assert model_label("/models/qwen.gguf", "http://a") == "openai:qwen.gguf"
    assert model_label("codellama/CodeLlama-7b-hf", "http://a") == "openai:codellama/CodeLlama-7b-hf"
    assert model_label("", "http://a:1/") == "openai:http://a:1"


def test_common_prefix_and_window_overflow():
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2 and common_prefix([], [1]) == 0
    assert window_overflow(90, 10, 100) is None
    assert window_overflow(91, 10, 100).kind == "prompt-too-long"


class _CutStream(http.server.BaseHTTPRequestHandler):
    """A completions server that ends its stream early, without a finish reason, as
    llama-cpp-python's server does to a request when another arrives (interrupt_requests)."""

    finish_reason: str | None = None

    def do_GET(self):  # noqa: N802
        answer_json(self, {"data": [{"id": "m.gguf"}]})

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.answer_stream()

    def answer_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for text in ("re", "turn"):
            chunk = {"choices": [{"text": text, "finish_reason": None}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        last = {"choices": [{"text": " a", "finish_reason": type(self).finish_reason}]}
        self.wfile.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("finish_reason", [None, "length"])
def test_a_stream_cut_without_finish_reason_is_a_failure_not_a_short_answer(finish_reason):
    handler = type("Handler", (_CutStream,), {"finish_reason": finish_reason})
    server, url = serve_http(handler)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        assert not isinstance(backend, Failure), backend
        assert backend.name == "openai:m.gguf"
        answer = backend.generate(_request("x", max_tokens=3))
        backend.close()
    finally:
        server.shutdown()
    if finish_reason is None:
        assert isinstance(answer, Failure) and answer.kind == "backend-interrupted", answer
        assert "--interrupt_requests False" in answer.message
    else:
        assert isinstance(answer, Generation) and answer.text == "return a" and answer.finish_reason == "length"


class _FinishAlone(_CutStream):
    """llama-cpp-python's server: one chunk per token, then a chunk with the finish reason alone."""

    def answer_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for text, finish in (("re", None), ("turn", None), ("", "length")):
            chunk = {"choices": [{"text": text, "finish_reason": finish}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


def _one_answer(handler, max_tokens: int):
    """The answer a server answering as `handler` gives to one request for prompt "x"."""
    server, url = serve_http(handler)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        answer = backend.generate(_request("x", max_tokens=max_tokens))
        backend.close()
    finally:
        server.shutdown()
    return answer


def test_the_chunk_holding_only_the_finish_reason_is_not_counted_as_a_generated_token():
    answer = _one_answer(_FinishAlone, max_tokens=2)
    assert isinstance(answer, Generation) and answer.text == "return" and answer.finish_reason == "length"
    assert answer.completion_tokens == 2  # not max_tokens + 1


class _NoLogprobs(_CutStream):
    """A server that refuses the `logprobs` field (HTTP 400) and streams plain chunks without it."""

    finish_reason = "stop"
    asked: list[bool] = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        if self.path.endswith("/v1/completions"):
            type(self).asked.append("logprobs" in body)
        if "logprobs" in body:
            self.refuse(body)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {"choices": [{"text": "return a", "finish_reason": "stop"}]}
        self.wfile.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())

    def refuse(self, body: dict):
        self.send_response(400)
        self.send_header("Content-Length", "0")
        self.end_headers()


class _NoLogprobsEmptyStream(_NoLogprobs):
    """llama-cpp-python's server started with --logits_all False: a streamed request for
    log-probabilities gets 200 and a stream that ends at once (its error is raised after the status)."""

    def refuse(self, body: dict):
        if not body.get("stream"):
            return super().refuse(body)  # asked plainly, the refusal is a status (HTTP 500 there)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", "0")
        self.end_headers()


class _WithLogprobs(_CutStream):
    """Chunks carrying `logprobs.token_logprobs` (vLLM, llama-cpp-python), one or two tokens each."""

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for text, values, finish in (("re", [-0.5], None), ("turn a", [-0.25, -1.25], "stop")):
            chunk = {"choices": [{"text": text, "logprobs": {"tokens": [], "token_logprobs": values},
                                  "finish_reason": finish}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")


def test_log_probabilities_are_averaged_per_token_and_a_server_refusing_them_is_asked_once():
    answer = _one_answer(_WithLogprobs, max_tokens=8)
    assert answer.text == "return a" and answer.mean_logprob == pytest.approx(-2.0 / 3)
    _NoLogprobs.asked = []
    server, url = serve_http(_NoLogprobs)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        first = backend.generate(_request("x", max_tokens=8))
        second = backend.generate(_request("y", max_tokens=8))
        backend.close()
    finally:
        server.shutdown()
    assert first.text == second.text == "return a" and first.mean_logprob is None
    assert _NoLogprobs.asked == [True, False, False]  # refused once, then never asked again
    _NoLogprobs.asked = []
    server, url = serve_http(_NoLogprobsEmptyStream)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        answers = [backend.generate(_request(prompt, max_tokens=8)) for prompt in ("x", "y")]
        backend.close()
    finally:
        server.shutdown()
    assert [a.text for a in answers] == ["return a", "return a"], answers
    assert _NoLogprobs.asked == [True, True, False, False]  # streamed, asked plainly (refused), never again


def test_endpoint_logprobs_off_never_asks_for_them():
    """model.endpoint_logprobs = false (a server slow at log-probabilities): the backend the
    settings open never sends the field, so its answers carry no confidence and no lever adds a
    generation for one."""
    from repomem.backends.factory import connect_endpoint
    from repomem.config import Config, with_overrides

    _NoLogprobs.asked = []
    server, url = serve_http(_NoLogprobs)
    try:
        backend = connect_endpoint(url, with_overrides(Config(), model={"endpoint_logprobs": False}))
        answers = [backend.generate(_request(prompt, max_tokens=8)) for prompt in ("x", "y")]
        backend.close()
    finally:
        server.shutdown()
    assert [a.text for a in answers] == ["return a", "return a"] and answers[0].mean_logprob is None
    assert _NoLogprobs.asked == [False, False]


class _Runaway(_CutStream):
    """A server that never stops: endless events of 1,000 characters, or one endless line."""

    one_line = False
    events_written = 0  # by this handler class, until the client hung up

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {"choices": [{"text": "x" * 1000, "finish_reason": None}]}
        event = b"data: " + json.dumps(chunk).encode() + (b"" if type(self).one_line else b"\n\n")
        try:
            for _ in range(200_000):  # ~200 MB if nobody stops reading
                self.wfile.write(event)
                type(self).events_written += 1
        except OSError:
            pass  # the client hung up, as it should


@pytest.mark.parametrize("one_line", [False, True])
def test_a_server_that_never_stops_is_cut_by_size_not_memory(one_line):
    handler = type("Handler", (_Runaway,), {"one_line": one_line})
    server, url = serve_http(handler)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        assert not isinstance(backend, Failure), backend
        started = time.perf_counter()
        answer = backend.generate(GenerationRequest(prompt="x", max_tokens=16, stop=(), deadline_s=5))
        elapsed = time.perf_counter() - started  # the answer's time, not the test server's shutdown
        backend.close()
    finally:
        server.shutdown()
    assert elapsed < 5
    if one_line:
        assert isinstance(answer, Failure) and answer.kind == "bad-response", answer
    else:
        assert isinstance(answer, Generation) and answer.finish_reason == "length"
        assert len(answer.text) <= 64 * 16


def test_a_json_answer_that_never_ends_is_cut_by_size_not_read_whole():
    """/tokenize answered by an endless body was read whole into memory (200 MB here) before the
    answer could be refused: now it stops at MAX_ANSWER_BYTES (what the server could write before
    the client hung up is counted: a time bound failed on a busy host)."""
    handler = type("Handler", (_Runaway,), {"one_line": True})
    server, url = serve_http(handler)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        assert not isinstance(backend, Failure), backend
        started = time.perf_counter()
        answer = backend.count("def f():\n    return 1\n")
        elapsed = time.perf_counter() - started
        backend.close()
    finally:
        server.shutdown()
    assert isinstance(answer, Failure) and answer.kind == "bad-response" and "MB" in answer.message, answer
    # 16 MB read, plus what the sockets' buffers held when the client hung up; not 200 MB.
    assert handler.events_written * 1_050 < 48 << 20, handler.events_written
    assert elapsed < 10


class _CountingModel:
    """Answers a prompt by reversing it and counts the calls (the wrapper's logic is what is tested;
    the embedded model replays through the store in tests/e2e/test_eval.py)."""

    name = "counting"
    template = PLAIN
    context_tokens = 4096

    def __init__(self, finish_reason: str = "stop"):
        self.calls = 0
        self.finish_reason = finish_reason

    def generate(self, request: GenerationRequest) -> Generation:
        self.calls += 1
        return Generation(request.prompt[::-1], 3, 2, 0, self.finish_reason, 0.5)

    def count(self, text: str) -> int:
        return len(text)

    def close(self) -> None:
        pass


def test_the_generation_store_answers_a_later_run_per_task_and_survives_a_torn_line(tmp_path: Path):
    path = tmp_path / "store" / "generations.jsonl"
    store = GenerationStore.open(path)
    model = _CountingModel()
    memo = MemoBackend(model, store)
    memo.forget("task/1")
    first = memo.generate(_request("abc"))
    assert memo.generate(_request("abc")) == first and model.calls == 1  # the task's own memory
    memo.forget("task/2")
    memo.generate(_request("abc"))  # another task: its `enough` predicate may differ, so no reuse
    memo.generate(_request("abc", max_tokens=8))  # another cap
    assert model.calls == 3 and len(store) == 3
    store.close()
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"key": "torn')  # a run killed mid-write
    reopened = GenerationStore.open(path)
    later = MemoBackend(_CountingModel(), reopened)
    later.forget("task/1")
    answer = later.generate(_request("abc"))
    assert answer.text == first.text and answer.finish_reason == "stop" and later.recalled == 1
    assert later.inner.calls == 0
    later.forget("task/9")
    later.generate(_request("abc"))
    assert later.inner.calls == 1 and later.recalled == 1
    reopened.close()
    assert all(line.endswith("}") for line in path.read_text().splitlines())


def test_a_deferred_request_is_counted_so_a_task_with_one_is_not_recorded_half_answered(tmp_path: Path):
    """`eval run --defer`: the evaluator compares the count before and after a task; a follow-up or
    second-opinion generation written out after an answer from the store still counts."""
    store = GenerationStore.open(tmp_path / "g.jsonl")
    model = _CountingModel()
    direct = MemoBackend(model, store)
    direct.forget("t")
    direct.generate(_request("draft"))  # answered earlier: in the store
    deferring = DeferredRequests.open(tmp_path / "requests.jsonl")
    memo = MemoBackend(_CountingModel(), store, deferring)
    memo.forget("t")
    assert memo.generate(_request("draft")).text == "tfard" and memo.deferred_requests == 0
    follow_up = memo.generate(_request("draft with the signature pinned"))
    assert isinstance(follow_up, Failure) and follow_up.kind == DEFERRED and memo.deferred_requests == 1
    assert memo.inner.calls == 0
    deferring.close()
    store.close()


def test_a_store_line_nested_past_jsons_depth_costs_one_generation_not_the_run(tmp_path: Path):
    path = tmp_path / "generations.jsonl"
    path.write_text("[" * 100_000 + "\n")  # json.loads raises RecursionError, no ValueError
    store = GenerationStore.open(path)
    assert not isinstance(store, Failure) and len(store) == 0
    store.close()


def test_cut_answers_are_not_stored_and_a_folder_is_not_a_store(tmp_path: Path):
    store = GenerationStore.open(tmp_path / "g.jsonl")
    memo = MemoBackend(_CountingModel("deadline"), store)
    memo.forget("t")
    memo.generate(_request("abc"))
    memo.generate(_request("abc"))
    assert memo.inner.calls == 2 and len(store) == 0  # a deadline cut is not the answer
    store.close()
    failure = GenerationStore.open(tmp_path)
    assert isinstance(failure, Failure) and "not a file" in failure.message


def test_chosen_token_logprobs_record_the_argmax_log_softmax_and_leave_the_logits_alone():
    rng = np.random.default_rng(7)
    recorder = ChosenTokenLogprobs()
    steps = [rng.normal(0, 4, 151_936).astype(np.float32) for _ in range(3)]
    for scores in steps:
        kept = scores.copy()
        assert recorder(np.zeros(0, dtype=np.intc), scores) is scores and np.array_equal(scores, kept)
    reference = [float(s.astype(np.float64).max() - np.log(np.exp(s.astype(np.float64)).sum())) for s in steps]
    assert recorder.values == pytest.approx(reference, abs=1e-6)
    assert all(value < 0 for value in recorder.values)


def test_greedy_chunks_carry_the_values_recorded_since_the_last_and_an_early_reader_ends_the_stream():
    recorder = ChosenTokenLogprobs()
    closed = []

    def stream():
        try:
            for value, text in ((-0.5, "re"), (-0.25, ""), (-1.0, "turn"), (-2.0, " a")):
                recorder.values.append(value)  # as the sampler's processor does before a chunk
                yield {"choices": [{"text": text, "finish_reason": None}]}
        finally:
            closed.append(True)

    chunks = annotated_chunks(stream(), recorder)
    first = next(chunks)
    assert first["choices"][0]["logprobs"]["token_logprobs"] == [-0.5]
    assert [c["choices"][0]["logprobs"]["token_logprobs"] for c in (next(chunks), next(chunks))] == [[-0.25], [-1.0]]
    chunks.close()  # the client stopped reading: llama.cpp's generator is closed with it
    assert closed == [True]
    assert is_plain_greedy({"temperature": 0.0})  # create_completion's own default penalty is 1.0
    assert is_plain_greedy({"temperature": 0.0, "repeat_penalty": 1.0, "presence_penalty": 0.0})
    assert not is_plain_greedy({"temperature": 0.0, "repeat_penalty": 1.1})  # the server's default, always sent
    assert not is_plain_greedy({"temperature": 0.2, "repeat_penalty": 1.0})


class _Recording(_CutStream):
    """Records each completion request's body."""

    finish_reason = "stop"
    bodies: list[dict] = []

    def do_POST(self):  # noqa: N802
        type(self).bodies.append(json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0))))
        self.answer_stream()  # the body is read once (reading it again waited for the client's deadline)


def test_the_embedded_models_client_sends_greedy_sampling_and_other_servers_get_only_temperature_zero():
    _Recording.bodies = []
    server, url = serve_http(_Recording)
    try:
        for sampling in (GREEDY_SAMPLING, None):
            backend = OpenAIBackend.connect(url, deadline_s=5, sampling=sampling)
            answer = backend.generate(_request("x", max_tokens=8))
            backend.close()
            assert not isinstance(answer, Failure) and answer.text == "return a", answer
    finally:
        server.shutdown()
    child, other = [body for body in _Recording.bodies if "max_tokens" in body]  # not the token counts
    assert child["temperature"] == other["temperature"] == 0.0
    assert child["repeat_penalty"] == 1.0 and is_plain_greedy(child)
    assert "repeat_penalty" not in other and "presence_penalty" not in other


class _RecordsPayloads(http.server.BaseHTTPRequestHandler):
    """A completions server that lists one model owned by `owner` and keeps each completion
    request's JSON body."""

    owner = "vllm"
    payloads: list[dict] = []

    def do_GET(self):  # noqa: N802
        answer_json(self, {"object": "list", "data": [{"id": "m.gguf", "owned_by": type(self).owner}]})

    def do_POST(self):  # noqa: N802
        type(self).payloads.append(json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0))))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {"choices": [{"text": "x", "finish_reason": "stop"}]}
        self.wfile.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("owner", ["me", "vllm"])
def test_only_llama_cpp_pythons_server_is_told_to_decode_greedily(owner):
    """llama-cpp-python's server ("owned_by": "me") adds a repeat penalty of 1.1 to a request that
    names none; vLLM logs every field it does not know. Each gets what it needs."""
    handler = type("Handler", (_RecordsPayloads,), {"owner": owner, "payloads": []})
    server, url = serve_http(handler)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        assert not isinstance(backend, Failure), backend
        assert isinstance(backend.generate(_request("x", max_tokens=3)), Generation)
        backend.close()
    finally:
        server.shutdown()
    (payload,) = [p for p in handler.payloads if "max_tokens" in p]  # the completion, not a token count
    assert payload["temperature"] == 0.0
    if owner == "me":
        assert {k: payload[k] for k in GREEDY_SAMPLING} == GREEDY_SAMPLING
    else:
        assert not set(GREEDY_SAMPLING) & set(payload)


class _Hangs(http.server.BaseHTTPRequestHandler):
    """Lists a model, then holds every completion for 30 s: before its status line, or (`streams`)
    after the status and one chunk (a loaded GPU server, a stalled stream)."""

    streams = False
    release = threading.Event()

    def do_GET(self):  # noqa: N802
        answer_json(self, {"data": [{"id": "m"}]})

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if type(self).streams:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b'data: {"choices": [{"text": "re", "finish_reason": null}]}\n\n')
            self.wfile.flush()
        self.release.wait(30)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("streams", [False, True], ids=["before-the-status", "mid-stream"])
def test_kill_ends_a_call_waiting_on_the_server_at_once(streams: bool):
    """The language server's shutdown kills the backend: a call waiting on a server that does not
    answer returns at once with a failure (it waited for its deadline, here 20 s), and nothing
    is tried again after it."""
    _Hangs.streams = streams
    _Hangs.release.clear()
    server, url = serve_http(_Hangs)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        answers: list = []
        call = threading.Thread(target=lambda: answers.append(
            backend.generate(GenerationRequest("x", 8, [], 20.0))))
        call.start()
        time.sleep(0.5)  # the request is at the server
        killed = time.perf_counter()
        backend.kill()
        call.join(timeout=10)
        waited = time.perf_counter() - killed
        assert not call.is_alive() and waited < 1.0, waited
        (answer,) = answers
        assert isinstance(answer, Failure) and answer.kind == "backend-interrupted", answer
        assert "session ended" in answer.message
        again = backend.generate(GenerationRequest("y", 8, [], 20.0))
        assert isinstance(again, Failure) and "session ended" in again.message
        backend.close()
    finally:
        _Hangs.release.set()
        server.shutdown()


def test_the_model_child_imports_nothing_from_its_working_folder(tmp_path, monkeypatch):
    """The child runs `python -m repomem.backends.llama_child` in the temporary folder, which any
    local user may write in: Python put that folder first on the import path, so a `repomem`
    package planted there ran as the user, with the API key in its environment. -P leaves it out."""
    import tempfile

    from repomem.backends.llama_process import start_ahead

    marker = tmp_path / "planted-code-ran"
    planted = tmp_path / "repomem" / "backends"
    planted.mkdir(parents=True)
    (tmp_path / "repomem" / "__init__.py").write_text("")
    (planted / "__init__.py").write_text("")
    (planted / "llama_child.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    started = start_ahead(tmp_path / "no-such-model.gguf")
    assert started is not None
    started.process.communicate(timeout=120)  # the real child: it says the model cannot be read
    assert not marker.exists()


class _Malformed(_CutStream):
    """A completions server whose answers have the right shape at the top and wrong values inside."""

    models: object = {"data": [{"id": "m.gguf"}]}
    event: object = {"choices": [{"text": "x", "finish_reason": "stop"}]}

    def do_GET(self):  # noqa: N802
        answer_json(self, type(self).models)

    def answer_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        event = type(self).event
        data = event if isinstance(event, str) else json.dumps(event)
        self.wfile.write(f"data: {data}\n\ndata: [DONE]\n\n".encode())


@pytest.mark.parametrize("what, models, event", [
    ("a text that is a list", None, {"choices": [{"text": ["x"], "finish_reason": "stop"}]}),
    ("usage that is a list", None, {"choices": [{"text": "x", "finish_reason": "stop"}], "usage": [1]}),
    ("events nested past any depth", None, "[" * 100_000 + "]" * 100_000),
    ("a model id that is not a string", {"data": [{"id": 7}]}, None),
])
def test_malformed_answers_are_one_failure_never_an_exception(what, models, event):
    """Each of these raised a TypeError, AttributeError or RecursionError out of the backend (a
    traceback at the command line) where the module promises a Failure."""
    handler = type("Handler", (_Malformed,), {**({"models": models} if models else {}),
                                               **({"event": event} if event else {})})
    server, url = serve_http(handler)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        if models is not None:
            assert isinstance(backend, Failure) and backend.kind == "bad-response", (what, backend)
            return
        assert not isinstance(backend, Failure), backend
        answer = backend.generate(GenerationRequest(prompt="x", max_tokens=4, stop=(), deadline_s=5))
        backend.close()
    finally:
        server.shutdown()
    assert isinstance(answer, Failure) and answer.kind == "bad-response", (what, answer)


def test_counts_a_server_got_wrong_are_not_taken_and_a_key_no_header_carries_is_said_so():
    handler = type("Handler", (_Malformed,), {"event": {
        "choices": [{"text": "x", "finish_reason": "stop"}],
        "usage": {"completion_tokens": "lots", "prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": 2.5}}}})
    server, url = serve_http(handler)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        assert not isinstance(backend, Failure), backend
        answer = backend.generate(GenerationRequest(prompt="x", max_tokens=4, stop=(), deadline_s=5))
        backend.close()
        pasted = OpenAIBackend.connect(url, api_key="sk-\u2019quoted\u2019", deadline_s=5)
    finally:
        server.shutdown()
    assert isinstance(answer, Generation) and (answer.completion_tokens, answer.cached_tokens) == (1, 0)
    assert isinstance(pasted, Failure) and pasted.kind == "backend-auth" and "HTTP header" in pasted.message


class _Dribbles(http.server.BaseHTTPRequestHandler):
    """Answers at a byte every 50 ms: every read gets something well inside any read timeout."""

    answer = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + b"data: {}\n\n" * 1000

    def _dribble(self):
        try:
            for byte in self.answer:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass  # the client hung up, as it should

    do_GET = do_POST = _dribble

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("call", ["connect", "generate", "count"])
def test_a_server_answering_a_byte_at_a_time_is_cut_at_the_calls_deadline(call):
    """httpx's timeouts are per read, so each byte started the wait again: a 1 s call to such a
    server took over a minute. Now the whole call ends by its deadline."""
    server, url = serve_http(_Dribbles)
    try:
        started = time.perf_counter()
        if call == "connect":
            answer = OpenAIBackend.connect(url, deadline_s=1.0)
        else:
            backend = OpenAIBackend(url, "m", tokenize_path="/tokenize")
            answer = backend.generate(GenerationRequest(prompt="x", max_tokens=4, stop=(), deadline_s=1.0)) \
                if call == "generate" else backend._request("POST", "/tokenize", {"prompt": "x"}, 1.0)
        elapsed = time.perf_counter() - started
    finally:
        server.shutdown()
    assert elapsed < 2.0, elapsed
    assert isinstance(answer, Failure) and answer.kind in ("backend-timeout", "backend-unreachable"), answer


def test_a_password_or_query_in_the_endpoint_is_never_repeated():
    """A URL holding credentials (`https://user:secret@host`, `?api_key=`) was repeated in every
    failure message and in the backend's name, which results and logs carry."""
    backend = OpenAIBackend("http://me:hunter2@127.0.0.1:9/v1?api_key=sk-123", "", connect_timeout_s=0.5, retries=0)
    answer = backend.generate(GenerationRequest(prompt="x", max_tokens=4, stop=(), deadline_s=1.0))
    assert isinstance(answer, Failure) and "127.0.0.1:9" in answer.message
    for shown in (answer.message, backend.name, backend.shown_endpoint):
        assert "hunter2" not in shown and "sk-123" not in shown, shown
    assert backend.shown_endpoint == "http://me:***@127.0.0.1:9?***"
    assert OpenAIBackend("http://127.0.0.1:8000", "m").shown_endpoint == "http://127.0.0.1:8000"


class _VLLMLike(http.server.BaseHTTPRequestHandler):
    """Answers as vLLM's OpenAI server does (vLLM itself needs a GPU; this is a stand-in, not
    vLLM): routes at the root, `/tokenize` beside `/v1`, log-probabilities streamed, and HTTP 400
    with vLLM's error body for a prompt plus max_tokens past its window of `window` tokens (one a
    character here). Records each request's path and each completion's body."""

    window = 64
    paths: list[str] = []
    completions: list[dict] = []
    first_token_s = 0.0  # seconds before a completion's status line (a long prompt being read)

    def do_GET(self):  # noqa: N802
        type(self).paths.append(self.path)
        if self.path != "/v1/models":
            self.send_error(404)
            return
        answer_json(self, {"object": "list", "data": [{"id": "codellama/CodeLlama-7b-hf", "owned_by": "vllm"}]})

    def do_POST(self):  # noqa: N802
        type(self).paths.append(self.path)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        if self.path == "/tokenize":
            answer_json(self, {"tokens": list(range(len(body["prompt"]))), "count": len(body["prompt"])})
            return
        if self.path != "/v1/completions":
            self.send_error(404)
            return
        type(self).completions.append(body)
        time.sleep(type(self).first_token_s)
        asked = len(body["prompt"]) + body["max_tokens"]
        if asked > type(self).window:
            error = json.dumps({"object": "error", "message": (
                f"This model's maximum context length is {type(self).window} tokens. However, you requested "
                f"{asked} tokens ({len(body['prompt'])} in the messages, {body['max_tokens']} in the completion). "
                "Please reduce the length of the messages or completion."), "type": "BadRequestError",
                "param": None, "code": 400}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(error)))
            self.end_headers()
            self.wfile.write(error)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        chunk = {"choices": [{"text": " a + b", "finish_reason": "stop",
                              "logprobs": {"token_logprobs": [-0.5]} if "logprobs" in body else None}]}
        self.wfile.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_an_endpoint_in_the_openai_base_url_form_reaches_the_servers_routes(suffix):
    """`http://host:8000/v1` is how vLLM's docs and OpenAI's clients write a server's base URL; it
    was called as /v1/v1/models, and connecting failed with HTTP 404."""
    handler = type("Handler", (_VLLMLike,), {"paths": [], "completions": []})
    server, url = serve_http(handler)
    try:
        backend = OpenAIBackend.connect(url + suffix, deadline_s=5)
        assert not isinstance(backend, Failure), backend
        assert backend.count("def f():") == 8
        answer = backend.generate(_request("def add(a, b):\n    return", max_tokens=4))
        backend.close()
    finally:
        server.shutdown()
    assert isinstance(answer, Generation) and answer.text == " a + b", answer
    # (the last /tokenize: the answer's prompt tokens, which this server's stream does not report)
    assert handler.paths == ["/v1/models", "/tokenize", "/v1/completions", "/tokenize"]
    assert backend.template.family == "codellama"


def test_an_endpoints_query_goes_with_every_request():
    """A gateway's `?api-version=2` on the endpoint: the routes were added after it
    (`/v1?api-version=2/v1/models`), so connecting failed; the query now goes with each request."""
    class _NeedsVersion(_VLLMLike):
        def do_GET(self):  # noqa: N802
            self._routed(super().do_GET)

        def do_POST(self):  # noqa: N802
            self._routed(super().do_POST)

        def _routed(self, answer):
            route, _, query = self.path.partition("?")
            if query != "api-version=2":
                type(self).paths.append(self.path)
                self.send_error(404)
                return
            self.path = route
            answer()

    handler = type("Handler", (_NeedsVersion,), {"paths": [], "completions": []})
    server, url = serve_http(handler)
    try:
        backend = OpenAIBackend.connect(url + "/v1?api-version=2", deadline_s=5)
        assert not isinstance(backend, Failure), backend
        answer = backend.generate(_request("def add(a, b):\n    return", max_tokens=4))
        backend.close()
    finally:
        server.shutdown()
    assert isinstance(answer, Generation) and answer.text == " a + b", answer
    assert handler.paths == ["/v1/models", "/v1/completions", "/tokenize"]  # each with the query
    assert backend.shown_endpoint == f"{url}?***"


def test_certificate_authorities_that_cannot_be_read_stop_only_an_https_server(monkeypatch, tmp_path):
    """SSL_CERT_FILE naming a missing file made every backend an internal error, the embedded
    model's loopback server (plain HTTP, no certificate read) included."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    handler = type("Handler", (_VLLMLike,), {"paths": [], "completions": []})
    server, url = serve_http(handler)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        assert not isinstance(backend, Failure), backend
        backend.close()
    finally:
        server.shutdown()
    refused = OpenAIBackend.connect("https://127.0.0.1:9", deadline_s=1)
    assert isinstance(refused, Failure) and refused.kind == FailureKind.BAD_ENDPOINT
    assert "certificate authorities" in refused.message and "missing.pem" in refused.message


def test_a_prompt_past_the_servers_window_says_so_and_leaves_log_probabilities_on():
    """vLLM answers a prompt past its window with HTTP 400: the backend took it for a refusal of
    `logprobs`, asked again without them, and never asked for them again in the session (every
    later answer without a confidence); its failure read only "answered HTTP 400"."""
    handler = type("Handler", (_VLLMLike,), {"paths": [], "completions": []})
    server, url = serve_http(handler)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        before = backend.generate(_request("def add(a, b):\n    return", max_tokens=4))
        too_long = backend.generate(_request("x" * 100, max_tokens=4))
        after = backend.generate(_request("def add(a, b):\n    return", max_tokens=4))
        backend.close()
    finally:
        server.shutdown()
    assert before.mean_logprob == after.mean_logprob == -0.5, after
    assert isinstance(too_long, Failure) and too_long.kind == "prompt-too-long", too_long
    assert "answered HTTP 400: This model's maximum context length is 64 tokens." in too_long.message
    assert ["logprobs" in body for body in handler.completions] == [True, True, False, True]


def test_a_lone_surrogate_in_a_prompt_is_sent_not_raised():
    """An editor's buffer can hold a lone surrogate (JSON's "\\ud800"); httpx's JSON encoding
    raised UnicodeEncodeError out of count and generate (a traceback) where a Failure or an answer
    is promised. It goes as "?", the same in the count as in the completion."""
    handler = type("Handler", (_VLLMLike,), {"paths": [], "completions": []})
    server, url = serve_http(handler)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        prompt = "s = '\ud800 é 😀'\n"
        counted = backend.count(prompt)
        answer = backend.generate(_request(prompt, max_tokens=4))
        backend.close()
    finally:
        server.shutdown()
    assert counted == len(prompt) and isinstance(answer, Generation), answer
    assert handler.completions[0]["prompt"] == "s = '? é 😀'\n"


def test_a_cancelled_completion_stops_while_the_server_reads_the_prompt():
    """The editor moved on: the call waited for the server's first token (a long prompt, a busy
    GPU) before it looked at the cancel check, and a call cancelled before it began was still sent."""
    handler = type("Handler", (_VLLMLike,), {"paths": [], "completions": [], "first_token_s": 3.0})
    server, url = serve_http(handler)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        moved = threading.Event()
        threading.Timer(0.3, moved.set).start()
        started = time.perf_counter()
        answer = backend.generate(GenerationRequest("x", 4, [], 20.0, cancel=moved.is_set))
        waited = time.perf_counter() - started
        cancelled = backend.generate(GenerationRequest("y", 4, [], 20.0, cancel=lambda: True))
        backend.close()
    finally:
        server.shutdown()
    assert isinstance(answer, Generation) and answer.finish_reason == "cancelled" and waited < 1.5, (answer, waited)
    assert isinstance(cancelled, Generation) and cancelled.finish_reason == "cancelled"
    assert [body["prompt"] for body in handler.completions] == ["x"]  # the cancelled one was never sent


def test_connect_failures_never_repeat_a_password_or_key_in_the_endpoint():
    for answer in ({"data": {"x": 1}}, {"data": []}):
        handler = type("Handler", (_Malformed,), {"models": answer})
        server, url = serve_http(handler)
        try:
            failure = OpenAIBackend.connect(url.replace("http://", "http://me:hunter2@") + "/?api_key=sk-123",
                                            deadline_s=5)
        finally:
            server.shutdown()
        assert isinstance(failure, Failure) and failure.kind == "bad-response", failure
        assert "hunter2" not in failure.message and "sk-123" not in failure.message, failure.message


class _AlwaysUnavailable(_VLLMLike):
    """Lists its model, then answers every completion HTTP 503 with a reason."""

    def do_POST(self):  # noqa: N802
        type(self).paths.append(self.path)
        body = json.dumps({"error": {"message": "the model is loading"}}).encode()
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_a_server_answering_an_error_after_every_retry_is_an_error_not_unreachable():
    """A completion the server kept answering with HTTP 503 was reported "backend-unreachable", as if
    no server were there; it is the server's error, with its reason."""
    handler = type("Handler", (_AlwaysUnavailable,), {"paths": [], "completions": []})
    server, url = serve_http(handler)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        assert not isinstance(backend, Failure), backend
        answer = backend.generate(_request("x", max_tokens=4))
        backend.close()
    finally:
        server.shutdown()
    assert isinstance(answer, Failure) and answer.kind == FailureKind.BACKEND_ERROR, answer
    assert "503" in answer.message and "the model is loading" in answer.message
