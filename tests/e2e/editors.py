"""What the real-editor tests (test_nvim, test_emacs_tty) share: the feedback log as the editor
left it, and one row of the editor matrix per check."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
