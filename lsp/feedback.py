"""Shown completions and the accept / reject log of the language server.

Every completion the server shows gets an id. `repomem/didAccept` and `repomem/didReject`
(params `{"id": ...}`) append one JSON line to a local file, together with the fragments that fed
the completion; nothing leaves the machine. The default file is `feedback.jsonl` in the
repository's index folder (`.repomem/`, or the configured cache dir), next to the index it
describes; `server.feedback_log` names another file.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from repomem.failures import Failure, FailureKind
from repomem.records import fragment_record
from repomem.regular_files import open_private
from repomem.retrieval.scoring import ScoredFragment


@dataclass(frozen=True)
class ShownCompletion:
    completion_id: str
    path: str  # repository-relative
    line: int  # 0-based, as LSP
    character: int
    text: str
    strategy: str
    backend: str
    fragments: tuple[ScoredFragment, ...]  # retrieved for it, best first
    in_prompt: frozenset[int]  # fragment ids whose text went into the prompt


class ShownCompletions:
    """The last `entries` shown completions by id (older ones can no longer be accepted)."""

    def __init__(self, entries: int):
        self._entries = max(entries, 1)
        self._items: OrderedDict[str, ShownCompletion] = OrderedDict()
        self._counter = 0
        self._lock = threading.Lock()

    def new_id(self) -> str:
        with self._lock:
            self._counter += 1
            return f"c{self._counter}"

    def add(self, shown: ShownCompletion) -> None:
        with self._lock:
            self._items[shown.completion_id] = shown
            while len(self._items) > self._entries:
                self._items.popitem(last=False)

    def get(self, completion_id: str) -> ShownCompletion | None:
        with self._lock:
            return self._items.get(completion_id)


def feedback_record(event: str, shown: ShownCompletion) -> dict:
    return {
        "time": round(time.time(), 3),
        "event": event,
        "id": shown.completion_id,
        "path": shown.path,
        "line": shown.line,  # the cursor, 0-based as LSP positions are
        "character": shown.character,
        "completion": shown.text,
        "strategy": shown.strategy,
        "backend": shown.backend,
        "fragments": [fragment_record(f, in_prompt=f.fragment in shown.in_prompt) for f in shown.fragments],
    }


class FeedbackLog:
    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def append(self, event: str, shown: ShownCompletion) -> None | Failure:
        line = json.dumps(feedback_record(event, shown), ensure_ascii=False)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Owner-only (0600): the log holds completions and the code they came from.
            descriptor = open_private(self.path, os.O_WRONLY | os.O_APPEND)  # never through a planted link
            with self._lock, os.fdopen(descriptor, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
        except OSError as error:
            return Failure(FailureKind.FEEDBACK_WRITE, f"cannot append to {self.path}: {error.strerror or error}")
        return None
