"""Every llama.cpp evaluation of the model's child on one thread: the one that loaded the model.

With llama.cpp's AMX kernels (the CPU's matrix tiles; scripts/llama_cpu_flags.sh), a model
evaluated on another thread than the one that loaded it ran slower: the 0.5B's 8-bit copy wrote a
token in 52-56 ms instead of 30-33 after a 950-token prompt, and read the prompt in 2.2-2.3 s
instead of 2.0-2.1 (2 threads, the same process and machine, alternating; a build without AMX:
the same speed on either thread). llama-cpp-python's server runs each step of a streamed answer
on whichever of its worker threads is free, and the child loaded the model on a thread of its own,
so the editor's warm answers were written at the slow speed (docs/measurements.md, "The model
thread"). `ModelThread` loads the model and then runs every `decode` of its context (prompts,
tokens, the moved runs of kv_reuse), sent there by `decoding_on`'s class; the rest of a request
(sampling, detokenizing, the HTTP stream) stays on the server's threads.

Only the standard library is imported here: the child must not load repomem's engine.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


class ModelThread(threading.Thread):
    """Runs `load` (which returns the model), then every call `call` sends it, in order."""

    def __init__(self, load: Callable[[], Any]) -> None:
        super().__init__(name="model", daemon=True)
        self._load = load
        self._calls: queue.SimpleQueue[tuple[Callable[..., Any], tuple, Future]] = queue.SimpleQueue()
        self._done_loading = threading.Event()
        self.model: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.model = self._load()
        except BaseException as error:  # noqa: BLE001 - raised again by `loaded`, on the caller's thread
            self.error = error
        finally:
            self._done_loading.set()
        if self.model is None:
            return
        while True:
            function, arguments, result = self._calls.get()
            try:
                result.set_result(function(*arguments))
            except BaseException as error:  # noqa: BLE001 - raised again on the calling thread
                result.set_exception(error)

    def loaded(self) -> Any:
        """The model, once loaded (the load's error raised here otherwise)."""
        self._done_loading.wait()
        if self.model is None:
            raise self.error or RuntimeError("the model did not load")
        return self.model

    def call(self, function: Callable[..., Any], *arguments: Any) -> Any:
        """`function(*arguments)` run on this thread (at once when called on it)."""
        if threading.current_thread() is self:
            return function(*arguments)
        result: Future = Future()
        self._calls.put((function, arguments, result))
        return result.result()


def decoding_on(thread: ModelThread, llama_class: type) -> type:
    """`llama_class` (llama_cpp.Llama) whose context's every `decode` runs on `thread`."""

    class DecodingOnModelThread(llama_class):
        def __init__(self, *args, **settings):
            super().__init__(*args, **settings)
            decode = self._ctx.decode  # llama-cpp-python's LlamaContext; Llama.eval and kv_reuse call it

            def decode_on_thread(batch):
                return thread.call(decode, batch)

            self._ctx.decode = decode_on_thread

    return DecodingOnModelThread
