"""scripts/answer_leased.sh before any model runs: parts gathered call by call, the joined model
checked against its sha256, and bad calls refused in one line (answering itself is the e2e
deferral test's scripts/answer_requests.py)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "answer_leased.sh"


def _run(work: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WORK": str(work), "OUT": str(work / "out")}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60)


def test_parts_gather_and_a_damaged_join_is_refused(tmp_path: Path):
    work = tmp_path / "work"
    assert _run(work).returncode == 2
    assert "no such file" in _run(work, "part", str(tmp_path / "absent")).stderr
    requests = tmp_path / "requests.jsonl"
    requests.write_text('{"key": "k"}\n')
    no_parts = _run(work, "answer", str(requests))
    assert no_parts.returncode == 2 and "no model parts" in no_parts.stderr

    model = b"a model, in two parts"
    for index, piece in enumerate((model[:10], model[10:])):
        (tmp_path / f"model.part0{index}").write_bytes(piece)
        assert _run(work, "part", str(tmp_path / f"model.part0{index}")).returncode == 0
    assert sorted(p.name for p in (work / "parts").iterdir()) == ["model.part00", "model.part01"]
    (work / "model.sha256").write_text(f"{hashlib.sha256(model + b'!').hexdigest()}  m.gguf\n")
    damaged = _run(work, "answer", str(requests))
    assert damaged.returncode == 1 and "a part is missing or damaged" in damaged.stderr
    assert hashlib.sha256(model).hexdigest() in damaged.stderr  # what the parts joined to
    assert not any(work.glob("*.gguf*"))  # nothing half-made is left to be taken for the model
    assert len(list((work / "parts").iterdir())) == 2  # the parts stay, to be mended and joined again
