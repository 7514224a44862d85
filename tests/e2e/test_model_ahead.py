"""The embedded model's process started before the index step (repomem.backends.factory.start_ahead),
with the real model: taken by the backend that wants that very process, stopped when another is
opened or nothing is, never started when something must be fetched or written first."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from repomem.backends.bf16_layers import embedded_model_file_as_is
from repomem.backends.factory import open_backend, start_ahead
from repomem.config import Config, with_overrides
from repomem.failures import Failure
from tests.cli_process import alive, run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "shop"


def test_the_backend_takes_the_process_started_ahead(model_path):
    config = Config()
    ahead = start_ahead(config)
    assert ahead is not None and ahead.process.poll() is None
    backend = open_backend(config, ahead=ahead)
    assert not isinstance(backend, Failure), backend
    try:
        assert ahead.taken and backend.pid == ahead.process.pid
        ahead.discard()  # taken: nothing to stop
        assert alive(backend.pid)
    finally:
        backend.close()


def test_a_process_started_for_other_settings_is_stopped_and_the_right_one_started(model_path):
    ahead = start_ahead(Config())
    assert ahead is not None
    other = with_overrides(Config(), model={"context_tokens": 2048})
    backend = open_backend(other, ahead=ahead)
    assert not isinstance(backend, Failure), backend
    try:
        assert backend.pid != ahead.process.pid and ahead.process.poll() is not None
    finally:
        backend.close()
    unused = start_ahead(Config())
    assert unused is not None
    unused.discard()
    assert unused.process.poll() is not None


def test_nothing_starts_ahead_for_a_server_a_missing_file_or_a_model_to_write(model_path, tmp_path):
    assert start_ahead(with_overrides(Config(), model={"endpoint": "http://127.0.0.1:9"})) is None
    assert start_ahead(with_overrides(Config(), model={"isolate_model": False})) is None
    assert start_ahead(Config(), str(tmp_path / "missing.gguf")) is None
    # bfloat16 layers not yet written: the widening (a progress bar, 960 MB) comes first, in order.
    if embedded_model_file_as_is(model_path, "bf16") is None:
        assert start_ahead(with_overrides(Config(), model={"embedded_layers": "bf16"})) is None


def _model_processes() -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"repomem.backends.llama_child" in (entry / "cmdline").read_bytes():
                found.add(int(entry.name))
        except OSError:
            continue
    return {pid for pid in found if alive(pid)}


def test_complete_stops_the_process_it_started_when_the_index_step_fails(model_path, tmp_path):
    repo = tmp_path / "shop"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns(".repomem"))
    index_dir = repo / ".repomem"
    index_dir.write_text("a file where the index folder goes\n")
    before = _model_processes()
    result = run("complete", "shop/report.py:9", "--json", cwd=repo)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert _model_processes() <= before
    index_dir.unlink()
    answer = run("complete", "shop/report.py:9", "--json", cwd=repo)
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)["completion"] == "compute_tax(amount_cents, tax_class)"
