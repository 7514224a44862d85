"""rich progress bars for long CLI work (the core reports through repomem.progress.Progress)."""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class RichProgress:
    """rich progress bars on stderr. When stderr is not a terminal (a log file, CI), a plain line
    with the count and the estimated time left every `log_every_s` seconds instead."""

    def __init__(self, console: Console, log_every_s: float = 60.0):
        self._console = console
        self._log_every_s = log_every_s
        self._logged_at = time.monotonic()
        self._progress = Progress(
            TextColumn("{task.description:>10}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta"), TimeRemainingColumn(),
            console=console, transient=True, disable=not console.is_terminal,
        )
        self._task: Any = None

    def __enter__(self) -> RichProgress:
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.__exit__(*exc)

    def start(self, stage: str, total: int) -> None:
        if self._task is not None:
            self._progress.update(self._task, visible=False)
        self._task = self._progress.add_task(stage, total=max(total, 1))

    def advance(self, units: int = 1) -> None:
        if self._task is None:
            return
        self._progress.advance(self._task, units)
        if self._console.is_terminal or time.monotonic() - self._logged_at < self._log_every_s:
            return
        self._logged_at = time.monotonic()
        task = self._progress.tasks[-1]
        left = f", about {task.time_remaining / 60:.0f} min left" if task.time_remaining else ""
        print(f"{task.description}: {task.completed:.0f}/{task.total:.0f}{left}", file=sys.stderr, flush=True)
