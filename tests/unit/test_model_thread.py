"""The model's child evaluates on the thread that loaded the model (repomem.backends.model_thread):
llama.cpp's AMX kernels wrote tokens 1.7x slower on any other. The real child runs this in
tests/e2e/test_model_process.py; here, which thread each call lands on."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from repomem.backends.model_thread import ModelThread, decoding_on


class FakeContext:
    def __init__(self) -> None:
        self.threads: list[int] = []

    def decode(self, batch):
        self.threads.append(threading.get_ident())
        if batch == "bad":
            raise ValueError("llama_decode returned 1")
        return len(batch)


class FakeLlama:
    """What decoding_on needs of llama_cpp.Llama: a context made in __init__, used by eval."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loaded_on = threading.get_ident()
        self._ctx = FakeContext()

    def eval(self, tokens):
        return self._ctx.decode(tokens)


def test_every_decode_runs_on_the_thread_that_loaded_the_model_whichever_thread_asks():
    holder: list[ModelThread] = []
    thread = ModelThread(lambda: decoding_on(holder[0], FakeLlama)("m"))
    holder.append(thread)
    thread.start()
    model = thread.loaded()
    assert model.name == "m" and model.loaded_on == thread.ident != threading.get_ident()
    with ThreadPoolExecutor(4) as workers:  # the server's worker threads, a step of an answer each
        results = list(workers.map(model.eval, [[1] * n for n in range(1, 41)]))
    assert results == list(range(1, 41))
    assert set(model._ctx.threads) == {thread.ident} and len(model._ctx.threads) == 40
    # An error in llama.cpp's call reaches the caller, and the thread serves on.
    with pytest.raises(ValueError, match="llama_decode"):
        model.eval("bad")
    assert model.eval([1, 2]) == 2
    # Called on the model thread itself (a step that calls another), it runs there at once.
    assert thread.call(lambda: thread.call(threading.get_ident)) == thread.ident


def test_a_load_that_fails_is_raised_where_the_model_is_asked_for():
    def load():
        raise OSError("failed to load model")

    thread = ModelThread(load)
    thread.start()
    with pytest.raises(OSError, match="failed to load"):
        thread.loaded()
    thread.join(timeout=5)
    assert not thread.is_alive()  # nothing to serve: the thread ends
