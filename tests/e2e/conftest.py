"""End-to-end fixtures: the real embedded model and llama-cpp-python's OpenAI-compatible server,
started as a separate process in place of vLLM (which needs a GPU)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from repomem.backends.llama import LlamaBackend
from repomem.backends.models import pull_default_model
from repomem.backends.openai_http import OpenAIBackend
from repomem.failures import Failure
from tests.cli_process import free_port


@pytest.fixture(scope="session")
def model_path() -> Path:
    path = pull_default_model()
    assert not isinstance(path, Failure), path
    return path


@pytest.fixture(scope="session")
def llama(model_path) -> LlamaBackend:
    backend = LlamaBackend.open(model_path, context_tokens=2048, threads=2)
    assert not isinstance(backend, Failure), backend
    return backend


@pytest.fixture(scope="module")
def llama_server(model_path):
    """llama-cpp-python's OpenAI-compatible server: a real separate process on loopback."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "4096", "--n_threads", "2", "--interrupt_requests", "False"],
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
        time.sleep(1)
    else:
        process.kill()
        pytest.fail("llama_cpp.server did not start")
    yield url, process
    process.kill()
    process.wait(timeout=30)
