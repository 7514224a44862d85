"""The interface every model backend implements, and what a generation returns."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from repomem.backends.templates import Template
from repomem.failures import Failure, FailureKind

CancelCheck = Callable[[], bool]


@dataclass(frozen=True)
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int  # prompt tokens served from the backend's prefix cache (0 if unknown)
    finish_reason: str  # "stop" | "length" | "cancelled" | "deadline"
    seconds: float  # wall time of the call
    # Mean natural-log probability per generated token (greedy: each the most likely one), the
    # stop token included; None when the backend does not report it. The model's confidence in its
    # answer, which chooses between RepoCoder's rounds (prompt.round_choice).
    mean_logprob: float | None = None


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
    # Text the answer must start with, its tokens chosen by the model (token healing inside a
    # word: repomem.backends.forced_start). Only for a backend that `constrains_start`; the
    # Generation's text then begins with it, and its tokens count among the generated ones.
    forced_start: str = ""
    # The model's cache keeps only its common beginning with the prompt and evaluates the rest:
    # no cached run moved into place (repomem.backends.kv_reuse). A moved run was computed after
    # other text; right after an edit before it, it never saw the edited text (the line below an
    # accepted completion). Backends without moved runs ignore it.
    prefix_only: bool = False


class Backend(Protocol):
    name: str  # for reports: "llama.cpp:<file>", "openai:<url>", ...
    template: Template
    # The model's window (prompt + generation), tokens; 0 while unknown (a server that has not said:
    # OpenAIBackend learns it from GET /v1/models or a refusal). Prompts are fitted to it.
    context_tokens: int

    def count(self, text: str) -> int | Failure:
        """Tokens of `text` with the backend's own tokenizer."""

    def generate(self, request: GenerationRequest) -> Generation | Failure:
        """Greedy continuation of the prompt."""

    def close(self) -> None:
        """Release the model or connection."""


def constrains_start(backend: object) -> bool:
    """Whether `backend` honours GenerationRequest.forced_start (the embedded model does; a server
    reached over HTTP offers no vocabulary to choose the tokens from)."""
    return bool(getattr(backend, "constrains_start", False))


def mean_of(values: Sequence[float]) -> float | None:
    """Mean of the tokens' log-probabilities, None when none was reported (or one is not a number)."""
    if not values or not all(isinstance(v, int | float) for v in values):
        return None
    return float(sum(values)) / len(values)


def token_logprobs(choice: dict) -> list:
    """The log-probabilities an OpenAI-style completion choice (or streamed chunk) carries for its
    tokens (`logprobs.token_logprobs`: llama-cpp-python, vLLM), [] when it carries none."""
    logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
    values = logprobs.get("token_logprobs") if isinstance(logprobs, dict) else None
    return list(values) if isinstance(values, list) else []


def early_stop(request: GenerationRequest, text: str, deadline: float) -> str | None:
    """Why a streaming generation should end after this token, or None to go on.

    `text` is what was generated so far; `deadline` is a time.perf_counter() value. Every
    streaming backend asks this between tokens, so cancel, `enough` and the deadline behave alike.
    """
    # `enough` first: it may be what cancels (the language server stops a generation the user has
    # typed past when it reads its text), and a cancel then ends this token, not the next one.
    settled = request.enough is not None and request.enough(text)
    if request.cancel is not None and request.cancel():
        return "cancelled"
    if settled:
        return "stop"
    if time.perf_counter() > deadline:
        return "deadline"
    return None


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common beginning of two token lists: what a prompt cache can reuse."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def window_overflow(prompt_tokens: int, max_tokens: int, context_tokens: int) -> Failure | None:
    """A Failure when the prompt plus the tokens to generate do not fit the model's window."""
    if prompt_tokens + max_tokens <= context_tokens:
        return None
    return Failure(FailureKind.PROMPT_TOO_LONG, f"prompt of {prompt_tokens} tokens plus {max_tokens} new ones exceeds "
                                                f"the model window of {context_tokens}")


# Failure kinds after which a backend is presumed broken: the language server closes it and
# opens a new one at the next request. A prompt that does not fit, or a cancelled call, is not.
BROKEN_BACKEND_KINDS = frozenset({
    FailureKind.BACKEND_ERROR, FailureKind.BACKEND_UNREACHABLE, FailureKind.BACKEND_TIMEOUT, FailureKind.BAD_RESPONSE,
    FailureKind.GENERATION, FailureKind.BACKEND_CLOSED, FailureKind.MODEL_CRASHED,
})


def backend_broken(failure: Failure) -> bool:
    return failure.kind in BROKEN_BACKEND_KINDS


class TokenCountFailed(Exception):
    """A backend could not count tokens while a prompt was being fitted (carries the Failure)."""

    def __init__(self, failure: Failure):
        super().__init__(failure.message)
        self.failure = failure


class BackendTokenizer:
    """A backend's exact token count as completion.prompt.Tokenizer; a failed count raises
    TokenCountFailed, which the caller turns back into its Failure. `mask` is applied to every text
    before it is counted: a server's `/tokenize` hears what its `/v1/completions` would, secrets
    masked, and the count is the masked prompt's (what is sent)."""

    def __init__(self, backend: Backend, mask: Callable[[str], str] | None = None):
        self._backend = backend
        self._mask = mask

    def count(self, text: str) -> int:
        return self._counted(self._masked(text))

    def exceeds(self, text: str, limit: int) -> bool:
        """count(text) > limit; without counting when the backend's lower bound (`count_floor`,
        e.g. backends.token_floor) is already above the limit: the same answer."""
        masked = self._masked(text)
        floor = getattr(self._backend, "count_floor", None)
        if floor is not None and floor(masked) > limit:
            return True
        return self._counted(masked) > limit

    def warm(self, texts: list[str]) -> None:
        """Texts about to be counted, handed to a backend that counts many in one request
        (`warm_counts`); nothing for one that does not."""
        warm = getattr(self._backend, "warm_counts", None)
        if warm is not None:
            warm([self._masked(text) for text in texts])

    def _masked(self, text: str) -> str:
        return self._mask(text) if self._mask is not None else text

    def _counted(self, masked: str) -> int:
        value = self._backend.count(masked)
        if isinstance(value, Failure):
            raise TokenCountFailed(value)
        return value
