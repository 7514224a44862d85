"""A model server's window: a server of 2,048 tokens (vLLM's `--max-model-len 2048`, llama.cpp's
`llama-server -c 2048`) refused every default prompt (2,048 tokens plus the ones to generate), and
llama-server's refusal was taken for a broken server. The window is learned from GET /v1/models
(vLLM's `max_model_len`) or from the refusal itself, and prompts are fitted to it.

The servers here stand in for vLLM and llama-server (neither runs here: vLLM needs a GPU, and
llama-server is not packaged for this machine); they answer with those servers' bodies, one token a
character."""

from __future__ import annotations

import http.server
import json

import pytest

from repomem.backends.openai_http import OpenAIBackend
from repomem.completion.engine import WINDOW_MARGIN_TOKENS, CompletionEngine
from repomem.config import with_overrides
from repomem.failures import Failure
from repomem.positions import locate
from tests.http_servers import answer_json, serve_http


class _Windowed(http.server.BaseHTTPRequestHandler):
    """A completions server with a window of `window` tokens (one a character) that says it in
    GET /v1/models as vLLM does (`states_window`), and refuses a longer request in vLLM's words or,
    with `llama_server`, in llama-server's body. Records each completion's body."""

    window = 600
    states_window = True
    llama_server = False
    fails_late = False  # as llama-cpp-python's server: a streamed refusal is a 200 and an empty stream
    completions: list[dict] = []

    def do_GET(self):  # noqa: N802
        entry = {"id": "codellama/CodeLlama-7b-hf", "owned_by": "me" if type(self).fails_late else "vllm"}
        if type(self).states_window:
            entry["max_model_len"] = type(self).window
        answer_json(self, {"object": "list", "data": [entry]})

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        if self.path == "/tokenize":
            answer_json(self, {"tokens": list(range(len(body["prompt"]))), "count": len(body["prompt"])})
            return
        type(self).completions.append(body)
        asked, window = len(body["prompt"]) + body["max_tokens"], type(self).window
        if asked > window and type(self).fails_late and body.get("stream"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            return
        if asked > window:
            if type(self).llama_server:
                error = {"error": {"code": 400, "message": f"request ({asked} tokens) exceeds the available context "
                                                           f"size ({window} tokens), try increasing it",
                                   "type": "exceed_context_size_error", "n_prompt_tokens": asked, "n_ctx": window}}
            else:
                error = {"object": "error", "message": f"This model's maximum context length is {window} tokens. "
                                                       f"However, you requested {asked} tokens.",
                         "type": "BadRequestError", "param": None, "code": 400}
            answer_json(self, error, status=400)
            return
        chunk = {"choices": [{"text": "compute_tax(amount_cents, tax_class)", "finish_reason": "stop"}]}
        if not body.get("stream"):
            answer_json(self, chunk)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())

    def log_message(self, *args):
        pass


def _server(**behaviour):
    handler = type("Handler", (_Windowed,), {"completions": [], **behaviour})
    server, url = serve_http(handler)
    return handler, server, url


@pytest.mark.parametrize("llama_server", [False, True])
def test_a_refusal_past_the_window_says_so_and_teaches_the_window(llama_server):
    handler, server, url = _server(window=64, states_window=False, llama_server=llama_server)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        assert backend.context_tokens == 0  # not said yet
        refused = backend.generate(_request("x" * 100))
        backend.close()
    finally:
        server.shutdown()
    # llama-server's refusal was "backend-error": a broken server, which the language server reopens
    assert isinstance(refused, Failure) and refused.kind == "prompt-too-long", refused
    assert "64 tokens" in refused.message
    assert backend.context_tokens == 64


def test_the_window_a_server_states_is_the_backends():
    _, server, url = _server(window=2048)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        backend.close()
    finally:
        server.shutdown()
    assert backend.context_tokens == 2048


def _complete(shop, url: str, max_new_tokens: int = 16):
    text = (shop.root / "shop" / "report.py").read_text()
    config = with_overrides(shop.config, completion={"max_prompt_tokens": 2048, "max_new_tokens": max_new_tokens})
    backend = OpenAIBackend.connect(url, deadline_s=10)
    assert not isinstance(backend, Failure), backend
    try:
        engine = CompletionEngine(shop, backend, config)
        cursor = locate(shop.root, "shop/report.py", text, 9, None)
        return engine.complete(cursor), engine.complete(cursor)
    finally:
        backend.close()


def test_prompts_are_fitted_to_the_window_a_server_states(shop):
    handler, server, url = _server(window=600)
    try:
        first, second = _complete(shop, url)
    finally:
        server.shutdown()
    assert not isinstance(first, Failure) and first.text.startswith("compute_tax("), first
    assert not isinstance(second, Failure)
    assert len(handler.completions) == 2  # none refused
    for body in handler.completions:
        assert len(body["prompt"]) <= 600 - 16 - WINDOW_MARGIN_TOKENS


def _two_completions(shop, **behaviour):
    """Two completions at the example's cursor against a server of `behaviour`, both right; the
    server's handler (its recorded completion bodies)."""
    handler, server, url = _server(**behaviour)
    try:
        first, second = _complete(shop, url)
    finally:
        server.shutdown()
    assert not isinstance(first, Failure) and first.text.startswith("compute_tax("), first
    assert not isinstance(second, Failure) and second.text == first.text
    return handler


@pytest.mark.parametrize("llama_server", [False, True])
def test_a_window_learned_from_a_refusal_fits_that_prompt_again_and_every_later_one(shop, llama_server):
    handler = _two_completions(shop, window=600, states_window=False, llama_server=llama_server)
    refused = [body for body in handler.completions if len(body["prompt"]) + body["max_tokens"] > 600]
    fitted = [body for body in handler.completions if len(body["prompt"]) + body["max_tokens"] <= 600]
    # The first prompt was refused (with and without log-probabilities), then asked fitted; the
    # second was fitted from the start.
    assert 1 <= len(refused) <= 2 and len(fitted) == 2, [len(body["prompt"]) for body in handler.completions]
    assert handler.completions[-2:] == fitted


def test_a_server_that_fails_a_stream_late_is_asked_again_unstreamed_for_its_reason(shop):
    """llama-cpp-python's server answers a streamed request past its window with 200 and an empty
    stream: every completion failed as "ended the answer without a finish reason"."""
    handler = _two_completions(shop, window=600, states_window=False, fails_late=True)
    asked = [body for body in handler.completions if body["prompt"] != "\n"]  # not the log-probabilities probe
    streamed = [len(body["prompt"]) + body["max_tokens"] <= 600 for body in asked if body.get("stream")]
    unstreamed = [len(body["prompt"]) + body["max_tokens"] <= 600 for body in asked if not body.get("stream")]
    assert streamed[0] is False and streamed[-2:] == [True, True] and unstreamed == [False], asked


def test_a_window_with_no_room_for_a_prompt_is_one_clear_failure(shop):
    _, server, url = _server(window=100)
    try:
        first, _ = _complete(shop, url, max_new_tokens=90)
    finally:
        server.shutdown()
    assert isinstance(first, Failure) and first.kind == "prompt-too-long"
    assert "window of 100 tokens leaves no room for a prompt beside 90 new tokens" in first.message


def _request(prompt: str, max_tokens: int = 4):
    from repomem.backends.base import GenerationRequest

    return GenerationRequest(prompt=prompt, max_tokens=max_tokens, stop=(), deadline_s=10)
