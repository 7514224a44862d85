"""End-to-end fixtures: the real embedded model and llama-cpp-python's OpenAI-compatible server,
started as a separate process in place of vLLM (which needs a GPU)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from repomem.backends.bf16_layers import embedded_model_file, widened_for
from repomem.backends.llama import LlamaBackend
from repomem.backends.models import SMALL_MODEL, pull_small_model
from repomem.backends.openai_http import OpenAIBackend
from repomem.failures import Failure
from tests.cli_process import free_port
from tests.small_model import SMALL_MODEL_SETTINGS


@pytest.fixture(scope="session")
def small_model_config(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("user-config") / "config.toml"
    path.write_text(SMALL_MODEL_SETTINGS)
    return path


@pytest.fixture(autouse=True)
def runs_the_small_model(small_model_config: Path, monkeypatch) -> None:
    """Every command a test starts reads a user config naming the 0.5B (tests/small_model.py); a
    test that points REPOMEM_CONFIG elsewhere replaces it."""
    monkeypatch.setenv("REPOMEM_CONFIG", str(small_model_config))


@pytest.fixture(scope="session")
def model_path() -> Path:
    """The 0.5B, pulled, with the file `model.embedded_layers = "auto"` runs settled as a user's first
    run settles it (its copy for this CPU written and timed where it may pay, under the machine
    lock): every test then meets the same choice, whichever runs first."""
    path = pull_small_model()
    assert not isinstance(path, Failure), path
    embedded_model_file(path, "auto", widened=widened_for(SMALL_MODEL, "auto"))
    return path


@pytest.fixture(scope="session")
def llama(model_path) -> LlamaBackend:
    backend = LlamaBackend.open(model_path, context_tokens=2048, threads=2)
    assert not isinstance(backend, Failure), backend
    return backend


def _served(model_path: Path, logits_all: bool, window: int = 4096):
    """llama-cpp-python's OpenAI-compatible server: a real separate process on loopback.
    `logits_all` is its own default (on): the logits of every prompt token, which its completions
    need to report log-probabilities; off, it evaluates a 200-token prompt ~3x faster here.
    `window`: its context (n_ctx), tokens."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", str(window), "--n_threads", "2", "--interrupt_requests", "False",
         "--logits_all", str(logits_all)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline:
        if process.poll() is not None:
            pytest.fail("llama_cpp.server exited")
        backend = OpenAIBackend.connect(url, deadline_s=2)
        if not isinstance(backend, Failure):
            backend.close()
            break
        time.sleep(0.25)
    else:
        process.kill()
        pytest.fail("llama_cpp.server did not start")
    yield url, process
    process.kill()
    process.wait(timeout=30)


@pytest.fixture(scope="module")
def llama_server(model_path):
    """A served model without log-probabilities (a client that asks for them is refused once, with
    HTTP 500, and asks no more)."""
    yield from _served(model_path, logits_all=False)


@pytest.fixture(scope="module")
def llama_server_with_logprobs(model_path):
    """A served model as llama-cpp-python starts it by default: log-probabilities streamed."""
    yield from _served(model_path, logits_all=True)


@pytest.fixture(scope="module")
def llama_server_small_window(model_path):
    """A served model with a window of 512 tokens, smaller than a default prompt (2,048)."""
    yield from _served(model_path, logits_all=False, window=512)
