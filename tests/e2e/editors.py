"""What the real-editor tests (test_nvim, test_emacs_tty, test_vscode) share: the feedback log as
the editor left it, one row of the editor matrix per check, the summary line, and waiting."""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


def feedback_events(workspace: Path) -> list[dict]:
    """The accept / reject lines the server appended to the workspace's feedback log."""
    path = workspace / ".repomem" / "feedback.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@contextmanager
def matrix_check(results: dict[str, dict], name: str) -> Iterator[dict]:
    """One row of the editor matrix: ok once the block ran through, else the failure's text."""
    result = results[name] = {"ok": False, "details": ""}
    try:
        yield result
    except BaseException as error:  # pytest.fail raises an OutcomeException, not an Exception
        result["details"] = f"{error.__class__.__name__}: {error}"[:400]
        raise
    result["ok"] = True


def rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 1)


def matrix_rows(results: dict[str, dict], names: Sequence[str]) -> dict[str, dict]:
    """Every check of the matrix in order, "not run" for those that did not run."""
    return {name: results.get(name, {"ok": None, "details": "not run"}) for name in names}


EDITOR_SUMMARIES = "editor_summaries"  # a worker's lines, sent to the controller with its output


def print_summary(pytestconfig, editor: str, version: str, rows: dict[str, dict], **seconds: float | None) -> None:
    """One line on the terminal, past pytest's capture: pass / FAIL / not run per check, and times
    (printed at the end of the run when the tests run in xdist workers)."""
    verdict = {True: "pass", False: "FAIL", None: "not run"}
    line = (f"{version}: " + " ".join(f"{name}={verdict[row['ok']]}" for name, row in rows.items())
            + "".join(f" {name}={rounded(value)}" for name, value in seconds.items()))
    line = f"{editor} e2e: {line}"
    if hasattr(pytestconfig, "workeroutput"):  # an xdist worker: the controller prints it (tests/conftest.py)
        pytestconfig.workeroutput.setdefault(EDITOR_SUMMARIES, []).append(line)
        return
    with pytestconfig.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        print(f"\n{line}")


def poll(predicate: Callable[[], T], timeout_s: float) -> T:
    """`predicate`'s first true value, polled every 0.1 s, or its last (false) one past `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def wait_for(predicate: Callable[[], T], timeout_s: float, failure: Callable[[], str]) -> T:
    """`predicate`'s first true value, polled every 0.1 s; past `timeout_s`, the test fails with
    `failure()` (called only then: it may read a screen or a log)."""
    value = poll(predicate, timeout_s)
    if not value:
        pytest.fail(failure())
    return value


def write_matrix_row(results_dir: str | None, file_name: str, identity: dict, settings: dict,
                     rows: dict[str, dict], **measured: object) -> None:
    """The editor matrix's row as JSON under `results_dir` (none: nothing is written): who ran
    (`identity`: editor, version, client), on what machine and day, with which settings, each
    check, and the measured times (seconds, rounded)."""
    if not results_dir:
        return
    row = {**identity, "machine": f"{platform.machine()}, {os.cpu_count()} cores",
           "recorded": time.strftime("%Y-%m-%d"), "settings": settings, "checks": rows,
           **{name: rounded(value) if isinstance(value, float) else value for name, value in measured.items()}}
    (Path(results_dir) / file_name).write_text(json.dumps(row, indent=2) + "\n")
