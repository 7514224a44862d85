"""A backend wrapper that answers a request it has seen before from memory.

The evaluator runs every strategy on one task in turn: RepoCoder's first round is exactly the
vanilla (or FragRel) completion, same prompt, same decoding, so it is generated once. Greedy
decoding makes the remembered answer the one a second call would give. The memory is cleared
between tasks (`forget`), which also keeps the `enough` predicate of one task from serving another.
"""

from __future__ import annotations

from repomem.backends.base import Backend, Generation, GenerationRequest
from repomem.failures import Failure


class MemoBackend:
    def __init__(self, inner: Backend):
        self.inner = inner
        self.name = inner.name
        self.template = inner.template
        self.context_tokens = inner.context_tokens
        self._answers: dict[tuple[str, int, tuple[str, ...]], Generation] = {}
        self.reused = 0  # requests answered from memory since construction

    def count(self, text: str) -> int | Failure:
        return self.inner.count(text)

    def generate(self, request: GenerationRequest) -> Generation | Failure:
        key = (request.prompt, request.max_tokens, tuple(request.stop))
        remembered = self._answers.get(key)
        if remembered is not None:
            self.reused += 1
            return remembered  # its own seconds: a strategy's latency is what it would have cost
        answer = self.inner.generate(request)
        if isinstance(answer, Generation) and answer.finish_reason not in ("cancelled", "deadline"):
            self._answers[key] = answer
        return answer

    def forget(self) -> None:
        self._answers.clear()

    def close(self) -> None:
        self.inner.close()
