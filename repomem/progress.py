"""How long-running core work reports progress without knowing about terminals."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def start(self, stage: str, total: int) -> None:
        """A new stage begins with `total` units of work."""

    def advance(self, units: int = 1) -> None:
        """`units` more units of the current stage are done."""


class NoProgress:
    def start(self, stage: str, total: int) -> None:
        pass

    def advance(self, units: int = 1) -> None:
        pass
