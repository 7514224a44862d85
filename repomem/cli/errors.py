"""How a Failure reaches the top of the CLI: raised as UserError, printed as one line, exit 2."""

from __future__ import annotations

import argparse
import math
from typing import TypeVar

from repomem.config.sections import ALPHA_MAX
from repomem.failures import Failure, FailureKind
from repomem.setting_rules import SETTING_CEILING

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


def finite_float(text: str) -> float:
    """An argparse type: a number, not NaN or infinity (they print as invalid JSON)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def alpha_value(text: str) -> float:
    """An argparse type for FragRel's alpha: a finite number from 0 to ALPHA_MAX (a negative weight
    would rank the fragments the relations favour last; 1e308 overflowed every score to infinity,
    ranked at random and printed JSON no parser reads)."""
    value = finite_float(text)
    if not 0 <= value <= ALPHA_MAX:
        raise argparse.ArgumentTypeError(f"must be from 0 to {ALPHA_MAX:g}, got {text!r}")
    return value


class OneLineParser(argparse.ArgumentParser):
    """argparse with its usage errors as one line (the usage itself is a `--help` away), exit 2."""

    def error(self, message: str):  # type: ignore[override]
        import sys

        sys.stderr.write(f"repomem: error: {message} (see `{self.prog} --help`)\n")
        raise SystemExit(EXIT_USAGE)


def check_top_k(k: int | None) -> None:
    """`--k` (retrieve, eval run) within 1 and the ceiling of retrieval.top_k: 10**20 overflowed
    the int64 of the top-k kernel (an internal error); any k above the fragments there are returns
    them all anyway."""
    if k is not None and k < 1:
        raise UserError(Failure(FailureKind.BAD_OPTION, "--k must be at least 1"))
    if k is not None and k > SETTING_CEILING:
        raise UserError(Failure(FailureKind.BAD_OPTION, f"--k must be at most {SETTING_CEILING:,}"))
