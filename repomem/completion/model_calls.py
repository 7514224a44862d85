"""Model calls a memory strategy makes while it retrieves (MemWalker's navigation, ReadAgent's
look-up, QRMeM's reflection), each kept with its prompt and answer for `--json` and the
evaluation records.

`MemoryModel` wraps the configured backend for one completion request: it phrases a question in
the model family's instruction form, masks secrets (the same last gate as the completion prompt),
enforces the request's budget of calls, and records every call. A call that fails, runs out of
budget or is cancelled answers None and the strategy falls back to what it can do without the
model (recorded as such), so a memory strategy degrades to retrieval, never to an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from repomem.backends.base import Backend, Generation, GenerationRequest
from repomem.failures import Failure


@dataclass(frozen=True)
class ModelCall:
    purpose: str  # "navigate" | "look-up" | "reflect" | "summarise"
    prompt: str  # exactly as sent (masked, in the family's instruction form)
    answer: str  # the model's text; "" when the call failed (see `error`)
    prompt_tokens: int
    answer_tokens: int
    seconds: float
    decision: str = ""  # what the strategy made of the answer, e.g. "3: django/db/" or "fallback: best BM25"
    error: str = ""

    def record(self) -> dict[str, object]:
        """JSON form for `complete --json` and evaluation records."""
        out: dict[str, object] = {"purpose": self.purpose, "prompt": self.prompt, "answer": self.answer,
                                  "decision": self.decision, "prompt_tokens": self.prompt_tokens,
                                  "answer_tokens": self.answer_tokens, "ms": round(self.seconds * 1000, 1)}
        if self.error:
            out["error"] = self.error
        return out


@dataclass
class MemoryModel:
    """One request's access to the model for memory decisions (not thread-safe: one per request)."""

    backend: Backend
    mask: Callable[[str], str]  # secrets never leave repomem, in any prompt
    max_calls: int  # the request's budget; a call over it answers None without running
    deadline_s: float  # per call
    cancel: Callable[[], bool] | None = None
    calls: list[ModelCall] = field(default_factory=list)

    @property
    def spent(self) -> bool:
        return len(self.calls) >= self.max_calls

    def ask(self, purpose: str, question: str, max_tokens: int, stop: Sequence[str] = ("\n",)) -> str | None:
        """The model's answer to `question` (instruction form), or None when it could not answer."""
        if self.spent or (self.cancel is not None and self.cancel()):
            return None
        prompt = self.mask(self.backend.template.instruction(question))
        answer = self.backend.generate(GenerationRequest(
            prompt=prompt, max_tokens=max_tokens, stop=[*self.backend.template.stops, *stop],
            deadline_s=self.deadline_s, cancel=self.cancel,
        ))
        if isinstance(answer, Failure):
            self.calls.append(ModelCall(purpose, prompt, "", 0, 0, 0.0, error=answer.message))
            return None
        self.calls.append(_call(purpose, prompt, answer))
        if answer.finish_reason == "cancelled":
            return None
        return answer.text

    def decided(self, decision: str) -> None:
        """Note what the strategy made of the last answer (shown beside it)."""
        if self.calls:
            last = self.calls[-1]
            self.calls[-1] = ModelCall(last.purpose, last.prompt, last.answer, last.prompt_tokens,
                                       last.answer_tokens, last.seconds, decision, last.error)


def _call(purpose: str, prompt: str, answer: Generation) -> ModelCall:
    return ModelCall(purpose, prompt, answer.text, answer.prompt_tokens, answer.completion_tokens, answer.seconds)


# An answer's tokens: numbers, names (digits inside a name are no number: `api_v3.py`), one symbol.
_ANSWER_TOKEN = re.compile(r"\d+(?![\w.]*[A-Za-z_])|[A-Za-z_\d][\w./-]*|\S")
# Words and symbols between the numbers of one list: `2 and 5`, `page 2 and page 5`, `#1, #3`.
_LIST_JOINERS = frozenset({",", ";", "&", "+", "#", "and", "or", "then", "page", "pages", "option", "options",
                           "part", "parts"})


def chosen_numbers(answer: str | None, allowed: range, limit: int,
                   labels: Mapping[int, str] | None = None) -> list[int]:
    """The distinct numbers `answer` chooses that lie in `allowed`, in the order given, at most
    `limit`: its first list of numbers (`3`, `1, 2 and 5`, `I pick 2`), not every digit in it (an
    answer echoing `3. shop/checkout.py lines 1-31` chose 3, not also 1); where it holds none, the
    options whose `labels` (number -> name shown) it names, in the order named (`api_v3.py`), and
    so too where a label comes before any number (`lines 1-20` names that option, not option 1)."""
    out: list[int] = []
    started = False
    tokens = list(_ANSWER_TOKEN.finditer(answer or ""))
    first_number = next((token.start() for token in tokens if token.group().isdigit()), None)
    if first_number is not None and labels and answer:
        lowered = answer.lower()
        named_first = min(((at, -len(label), number) for number, label in labels.items()
                           if number in allowed and label and (at := lowered.find(label.lower())) >= 0), default=None)
        if named_first is not None and named_first[0] <= first_number:
            return [named_first[2]][:limit]
    for token in (match.group() for match in tokens):
        if token.isdigit():
            started = True
            number = int(token)
            if number in allowed and number not in out:
                out.append(number)
                if len(out) == limit:
                    return out
        elif started and token.lower() not in _LIST_JOINERS:
            break
    if out or not labels or not answer:
        return out
    lowered = answer.lower()
    named = sorted((at, number) for number, label in labels.items()
                   if number in allowed and label and (at := lowered.find(label.lower())) >= 0)
    return [number for _, number in named][:limit]


def says_yes(answer: str | None) -> bool | None:
    """True / False for an answer starting with yes / no (any case), None otherwise."""
    word = (answer or "").strip().lstrip("*#-:\"'` ").split(maxsplit=1)
    if not word:
        return None
    head = word[0].lower().strip(".,!:*\"'`")  # `"yes"`, `**Yes**`: the question quotes its choices
    return True if head == "yes" else False if head == "no" else None
