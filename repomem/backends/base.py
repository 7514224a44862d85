"""The interface every model backend implements, and what a generation returns."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from repomem.failures import Failure
from repomem.fim import Template

CancelCheck = Callable[[], bool]


@dataclass(frozen=True)
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int  # prompt tokens served from the backend's prefix cache (0 if unknown)
    finish_reason: str  # "stop" | "length" | "cancelled" | "deadline"
    seconds: float  # wall time of the call


@dataclass(frozen=True)
class GenerationRequest:
    prompt: str
    max_tokens: int
    stop: Sequence[str]
    deadline_s: float  # the call returns by then (Failure or what was generated so far)
    cancel: CancelCheck | None = None  # polled between tokens
    # Polled with the text generated so far; True ends the generation as finished ("stop"). The
    # evaluator stops once a prediction has as many lines as the scorer will read: greedy
    # decoding makes the kept text identical to a full-length run's.
    enough: Callable[[str], bool] | None = None


class Backend(Protocol):
    name: str  # for reports: "llama.cpp:<file>", "openai:<url>", ...
    template: Template
    context_tokens: int  # the model's window (prompt + generation)

    def count(self, text: str) -> int | Failure:
        """Tokens of `text` with the backend's own tokenizer."""

    def generate(self, request: GenerationRequest) -> Generation | Failure:
        """Greedy continuation of the prompt."""

    def close(self) -> None:
        """Release the model or connection."""
