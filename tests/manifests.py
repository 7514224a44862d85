"""Reading and rewriting a snapshot's sealed manifest in tests (repomem/index/snapshot_manifest.py):
its body as a dict, its file records as one dict per file (as tests damage them), and the body
written back sealed with this user's key, or under a seal of the test's choosing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repomem.index.indexed_files import FileRecord
from repomem.index.provenance import sealed_json
from repomem.index.snapshot_manifest import MANIFEST, file_columns, file_records


def manifest_body(snapshot: Path) -> dict[str, Any]:
    return json.loads((snapshot / MANIFEST).read_bytes())["body"]


def manifest_seal(snapshot: Path) -> str:
    return json.loads((snapshot / MANIFEST).read_bytes())["seal"]


def write_manifest(snapshot: Path, body: dict[str, Any], seal: str | None = None) -> None:
    """`body` as the snapshot's manifest: sealed here, or with `seal` as its seal. The file is replaced,
    never written through (snapshots share files by hard links)."""
    data = sealed_json(body) if seal is None else json.dumps({"seal": seal, "body": body}).encode()
    (snapshot / MANIFEST).unlink()
    (snapshot / MANIFEST).write_bytes(data)


def record_rows(body: dict[str, Any]) -> list[dict[str, Any] | None]:
    return [None if record is None else record._asdict() for record in file_records(body["files"])]


def with_record_rows(body: dict[str, Any], rows: Any) -> None:
    """The body's records replaced by `rows` (a list of dicts and None), or by `rows` as they are
    when they are no such list (a damage of the records' shape)."""
    if isinstance(rows, list):
        body["files"] = file_columns([None if row is None else FileRecord(**row) for row in rows])
    else:
        body["files"] = rows
