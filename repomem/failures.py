"""Expected failures travel as values: adapters turn them into one clear line and an exit code."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Failure:
    kind: str  # stable machine-readable slug, e.g. "missing-file", "line-out-of-range"
    message: str  # one line for a person

    def __str__(self) -> str:
        return self.message
