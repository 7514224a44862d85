"""How a Failure reaches the top of the CLI: raised as UserError, printed as one line, exit 2."""

from __future__ import annotations

from typing import TypeVar

from repomem.failures import Failure

EXIT_USAGE = 2

T = TypeVar("T")


class UserError(Exception):
    """A Failure on its way to the top of the CLI."""

    def __init__(self, failure: Failure):
        super().__init__(failure.message)
        self.failure = failure


def ok(value: T | Failure) -> T:
    if isinstance(value, Failure):
        raise UserError(value)
    return value
