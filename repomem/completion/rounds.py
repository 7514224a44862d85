"""Which round's answer a multi-round completion shows (prompt.round_choice).

RepoCoder's second round re-retrieves with the first draft, and on the dev set it turns about as
many right answers wrong as wrong answers right (docs/eval-history.md, issue 11). The model's own
confidence, its mean log-probability per generated token, tells the two apart better than always
taking the last round. The engine and the evaluation report both choose with `choose_round`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RoundAnswer:
    raw: str  # the model's continuation in that round, before post-processing
    mean_logprob: float | None  # per generated token, nats; None when the backend does not report it


def choose_round(logprobs: Sequence[float | None], choice: str) -> int:
    """Index of the answer to show, given each round's mean log-probability (first round first):
    the last ("last"), or the most confident ("confident"; the later round on a tie, the last when
    any is unknown)."""
    last = len(logprobs) - 1
    if choice != "confident" or any(value is None for value in logprobs):
        return last
    return max(range(len(logprobs)), key=lambda i: (logprobs[i], i))
