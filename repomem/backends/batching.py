"""Many callers, one batched model: concurrent `generate` calls (evaluation workers, one thread
each) are gathered into `generate_batch` calls of an in-process backend (transformers, vLLM).

A batch starts when `max_batch` requests wait or `gather_s` after the first one arrived, whichever
comes first: workers spend milliseconds on retrieval and seconds in the model, so a short window
fills the batch without delaying a lone caller noticeably.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from repomem.backends.base import Backend, Generation, GenerationRequest, constrains_start
from repomem.failures import Failure, FailureKind


class BatchBackend(Backend, Protocol):
    def generate_batch(self, requests: Sequence[GenerationRequest]) -> list[Generation | Failure]:
        """One answer per request, in order."""


def supports_batches(backend: Backend) -> bool:
    return callable(getattr(backend, "generate_batch", None))


@dataclass
class _Waiting:
    request: GenerationRequest
    done: threading.Event = field(default_factory=threading.Event)
    answer: Generation | Failure | None = None


class BatchingBackend:
    def __init__(self, inner: BatchBackend, max_batch: int, gather_s: float):
        self.inner = inner
        self.name = inner.name
        self.template = inner.template
        self.constrains_start = constrains_start(inner)  # a batch holds each row to its own start
        self.max_batch = max(1, max_batch)
        self.gather_s = gather_s
        self.batch_sizes: list[int] = []  # sizes of the batches run, in order (for reports and tests)
        self._queue: list[_Waiting] = []
        self._ready = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="batcher", daemon=True)
        self._thread.start()

    @property
    def context_tokens(self) -> int:
        """The inner backend's window, read at each use: a server may state it late (a refusal)."""
        return self.inner.context_tokens

    def count(self, text: str) -> int | Failure:
        return self.inner.count(text)

    def generate(self, request: GenerationRequest) -> Generation | Failure:
        waiting = _Waiting(request)
        with self._ready:
            if self._closed:
                return Failure(FailureKind.BACKEND_CLOSED, "the batching backend was closed")
            self._queue.append(waiting)
            self._ready.notify_all()
        waiting.done.wait()
        assert waiting.answer is not None
        return waiting.answer

    def _take_batch(self) -> list[_Waiting] | None:
        with self._ready:
            while not self._queue and not self._closed:
                self._ready.wait()
            if self._closed and not self._queue:
                return None
            until = time.monotonic() + self.gather_s
            while len(self._queue) < self.max_batch and not self._closed:
                remaining = until - time.monotonic()
                if remaining <= 0:
                    break
                self._ready.wait(remaining)
            batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch :]
            return batch

    def _loop(self) -> None:
        while (batch := self._take_batch()) is not None:
            self.batch_sizes.append(len(batch))
            try:
                answers = self.inner.generate_batch([w.request for w in batch])
            except Exception as error:  # a crashing batch must not leave its callers waiting forever  # noqa: BLE001
                answers = [Failure(FailureKind.GENERATION, f"batched generation failed: {error}")] * len(batch)
            for waiting, answer in zip(batch, answers):
                waiting.answer = answer
                waiting.done.set()

    def stop(self) -> None:
        """Finish the waiting requests and end the gathering thread; the inner backend stays open."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
        self._thread.join()

    def close(self) -> None:
        self.stop()
        self.inner.close()
