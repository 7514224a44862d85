"""The embedded model's process started before the index step (repomem.backends.factory.start_ahead),
with the real model: taken by the backend that wants that very process, stopped when another is
opened or nothing is, never started when something must be fetched or written first."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from repomem.backends.bf16_layers import embedded_model_file_as_is
from repomem.backends.factory import open_backend, start_ahead
from repomem.config import with_overrides
from repomem.failures import Failure
from tests.cli_process import alive, run
from tests.small_model import SMALL_CONFIG

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "shop"


def test_the_backend_takes_the_process_started_ahead(model_path):
    config = SMALL_CONFIG
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
    ahead = start_ahead(SMALL_CONFIG)
    assert ahead is not None
    other = with_overrides(SMALL_CONFIG, model={"context_tokens": 2048})
    backend = open_backend(other, ahead=ahead)
    assert not isinstance(backend, Failure), backend
    try:
        assert backend.pid != ahead.process.pid and ahead.process.poll() is not None
    finally:
        backend.close()
    unused = start_ahead(SMALL_CONFIG)
    assert unused is not None
    unused.discard()
    assert unused.process.poll() is not None


def test_nothing_starts_ahead_for_a_server_a_missing_file_or_a_model_to_write(model_path, tmp_path):
    assert start_ahead(with_overrides(SMALL_CONFIG, model={"endpoint": "http://127.0.0.1:9"})) is None
    assert start_ahead(with_overrides(SMALL_CONFIG, model={"isolate_model": False})) is None
    assert start_ahead(SMALL_CONFIG, str(tmp_path / "missing.gguf")) is None
    # bfloat16 layers not yet written: the widening (a progress bar, 960 MB) comes first, in order.
    if embedded_model_file_as_is(model_path, "bf16") is None:
        assert start_ahead(with_overrides(SMALL_CONFIG, model={"embedded_layers": "bf16"})) is None


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


def _serve_until_ready(root: Path, options: dict) -> tuple[object, int, list[int]]:
    """`repomem serve` in `root`: the model child it started before the client said anything, and
    the model children once it is ready with `options` as the client's settings."""
    from tests.cli_process import model_children
    from tests.e2e.test_lsp_bad_input import RawClient

    client = RawClient(root)
    deadline = time.monotonic() + 30
    while not (early := model_children(client.process.pid)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(early) == 1, "no model child before initialize"
    client.answer(client.request("initialize", {"processId": None, "rootUri": root.as_uri(), "capabilities": {},
                                                "initializationOptions": {"repomem": options}}))
    client.notify("initialized", {})
    while not any("repomem: ready" in line for line in client.logs):
        assert time.monotonic() < deadline + 90, client.logs[-5:]
        time.sleep(0.05)
    return client, early[0], model_children(client.process.pid)


def test_the_language_server_starts_the_model_before_its_imports_and_takes_it(model_path, tmp_path):
    """lsp/model_ahead.py: `repomem serve` starts the embedded model for the folder it runs in
    before the client's `initialize`; the session takes that process when the client's settings
    want the same model, and stops it for another (here a client setting, gpuLayers 0)."""
    repo = tmp_path / "shop"
    shutil.copytree(EXAMPLE, repo, ignore=shutil.ignore_patterns(".repomem"))
    from repomem.lsp.model_ahead import start_for_folder

    probe = start_for_folder(repo)
    if probe is None:  # e.g. bfloat16 layers this CPU wants and nobody wrote yet: they come first
        pytest.skip("nothing starts ahead here: the embedded model must be fetched or widened first")
    probe.discard()
    for options, taken in (({}, True), ({"gpuLayers": 0}, False)):
        client, early, serving = _serve_until_ready(repo, options)
        try:
            assert len(serving) == 1 and (serving[0] == early) == taken, (early, serving)
            assert taken or not alive(early)
        finally:
            client.answer(client.request("shutdown"))
            client.notify("exit", {})
            assert client.process.wait(timeout=30) == 0
        # The model's child dies with its parent (a signal the kernel sends as the parent exits).
        gone_by = time.monotonic() + 10
        while (alive(serving[0]) or alive(early)) and time.monotonic() < gone_by:
            time.sleep(0.05)
        assert not alive(serving[0]) and not alive(early)
