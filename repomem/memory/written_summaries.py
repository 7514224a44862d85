"""Model-written summaries, kept in the index folder by content hash.

`repomem summarise` asks the configured model for a one-line summary of every file (its
extractive summary: path, docstring, signatures) and a gist of every page (ReadAgent), and appends
each answer as one JSON line to `<index folder>/written-summaries.jsonl`:

    {"key": <blake2b of what was summarised>, "kind": "file" | "page", "model": <backend name>,
     "text": <the summary>}

Keys are hashes of the summarised text, so an edit invalidates exactly the summaries of what
changed, a rerun skips every key already written by the same model (resume after an
interruption: each line is flushed as it is written, a torn last line is cut), and a
summary is never shown for text it was not written for. With `memory.summaries = "model"` the
summary tree and the gists use these where they exist and their extractive form elsewhere.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from repomem.regular_files import cut_torn_tail, open_private, read_regular_text, replace_private

FILE_NAME = "written-summaries.jsonl"


@dataclass
class WrittenSummaries:
    path: Path
    texts: dict[str, str] = field(default_factory=dict)  # key -> summary (the last one written wins)
    by_model: dict[str, set[str]] = field(default_factory=dict)  # model -> keys it wrote
    stamp: tuple[int, int] = (0, 0)  # (size, mtime_ns) of the file when read
    skipped: int = 0  # lines that were not a summary record

    @classmethod
    def load(cls, folder: Path) -> WrittenSummaries:
        store = cls(folder / FILE_NAME)
        try:
            text = read_regular_text(store.path)
            status = store.path.stat()
        except OSError:
            return store
        store.stamp = (status.st_size, status.st_mtime_ns)
        for line in text.split("\n"):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                key, model, summary = record["key"], record["model"], record["text"]
            except (ValueError, KeyError, TypeError):
                store.skipped += 1
                continue
            if isinstance(key, str) and isinstance(model, str) and isinstance(summary, str) and summary.strip():
                store.texts[key] = summary.strip()
                store.by_model.setdefault(model, set()).add(key)
            else:
                store.skipped += 1
        return store

    def current(self) -> bool:
        """Whether the file is still what was read (another process may have appended)."""
        try:
            status = self.path.stat()
        except OSError:
            return self.stamp == (0, 0)
        return (status.st_size, status.st_mtime_ns) == self.stamp

    def get(self, key: str) -> str | None:
        return self.texts.get(key)

    def has(self, model: str, key: str) -> bool:
        return key in self.by_model.get(model, ())

    def append(self, key: str, kind: str, model: str, text: str) -> None:
        """Write one summary durably before the next is asked for (an interrupted run resumes)."""
        line = json.dumps({"key": key, "kind": kind, "model": model, "text": text}, ensure_ascii=False)
        # In the index folder, which a repository can ship: never through a planted link.
        descriptor = open_private(self.path, os.O_RDWR | os.O_APPEND)
        cut_torn_tail(descriptor)
        with os.fdopen(descriptor, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self.texts[key] = text.strip()
        self.by_model.setdefault(model, set()).add(key)
        status = self.path.stat()
        self.stamp = (status.st_size, status.st_mtime_ns)

    def compact(self, live: Collection[str]) -> int:
        """Drop the summaries of text the repository no longer has (keys not in `live`), and lines
        that are no summary, rewriting the file atomically; the number of lines dropped. Each edit
        adds summaries and none went, so the file grew with every run and was read whole at every
        change. Nothing is rewritten while another process appends (the file is not as read)."""
        if not self.current():
            return 0
        try:
            text = read_regular_text(self.path)
        except OSError:
            return 0
        kept: list[str] = []
        dropped = 0
        for line in text.split("\n"):
            if not line.strip():
                continue
            try:
                key = json.loads(line)["key"]
            except (ValueError, KeyError, TypeError):
                key = None
            if isinstance(key, str) and key in live:
                kept.append(line)
            else:
                dropped += 1
        if dropped:
            replace_private(self.path, "".join(f"{line}\n" for line in kept).encode("utf-8"))
            reread = WrittenSummaries.load(self.path.parent)
            self.texts, self.by_model, self.stamp, self.skipped = (reread.texts, reread.by_model, reread.stamp,
                                                                   reread.skipped)
        return dropped
