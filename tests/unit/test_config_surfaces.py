"""Issue 58: one config resolved per surface (the CLI, the language server, the evaluator), from
values declared on each setting; the [model] section read under its old [completion] names; config
problems as typed values, worded only where a person reads them."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from repomem.config import (
    Config,
    SettingsRead,
    config_from_mapping,
    default_config,
    model_defaults,
    read_config,
    resolved_config,
    settings_digest,
    with_assignments,
    with_overrides,
)
from repomem.setting_rules import NOTHING_KEPT, SURFACE_KEYS, ConfigProblem, settings_of
from tests.repos import write_repo


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "user.toml").write_text("")  # there, empty: REPOMEM_CONFIG naming no file is warned about
    monkeypatch.setenv("REPOMEM_CONFIG", str(tmp_path / "user.toml"))
    return write_repo(tmp_path / "repo", {"a.py": "x = 1\n"})


def read(mapping: dict) -> SettingsRead:
    return SettingsRead(mapping, {}, [])


# -- surfaces ----------------------------------------------------------------------------------------


def test_the_surface_values_are_declared_on_their_settings():
    declared = {s.name: dict(s.rules.surfaces) for s in settings_of(Config) if s.rules.surfaces}
    assert declared == {
        "retrieval.time_budget_ms": {"lsp": 50.0}, "completion.max_prompt_tokens": {"lsp_embedded": 1024},
        "model.prefill_chunk_tokens": {"lsp_embedded": 0}, "model.reuse_chunk_tokens": {"lsp_embedded": 64},
        "prompt.file_only_round": {"lsp_embedded": False}, "model.prompt_cache_mb": {"eval": 0, "lsp": 0},
        "model.flash_attention": {"lsp_embedded": True}, "model.embedded_model": {"lsp": "qwen2.5-coder-0.5b"},
        "completion.continue_lines": {"lsp": True}}
    assert all(key in SURFACE_KEYS for values in declared.values() for key in values)


def test_each_surface_resolves_its_own_values_and_the_cli_and_evaluator_keep_the_defaults():
    # The command line runs the default model, the 1.5B, with the levers measured for it.
    with_the_default_model = with_overrides(Config(), **model_defaults(Config().model.embedded_model))
    assert with_the_default_model.completion.style == "repo" != Config().completion.style
    assert config_from_mapping({}, "cli")[0] == with_the_default_model == default_config()
    evaluator = config_from_mapping({}, "eval")[0]  # the defaults but for the prompt states it keeps
    assert evaluator.model.prompt_cache_mb == 0 and Config().model.prompt_cache_mb == 512
    assert evaluator == with_overrides(with_the_default_model, model={"prompt_cache_mb": 0})
    lsp = config_from_mapping({}, "lsp")[0]
    assert (lsp.retrieval.time_budget_ms, lsp.completion.max_prompt_tokens, lsp.model.reuse_chunk_tokens,
            lsp.prompt.file_only_round, lsp.model.flash_attention) == (50.0, 1024, 64, False, True)
    assert (lsp.model.embedded_model, lsp.completion.style) == ("qwen2.5-coder-0.5b", "comments")
    # The line below a taken answer continues its prompt only where one process answers one user.
    assert lsp.completion.continue_lines and not evaluator.completion.continue_lines \
        and not default_config().completion.continue_lines
    served = config_from_mapping({"model": {"endpoint": "http://127.0.0.1:8000"}}, "lsp")[0]
    assert (served.retrieval.time_budget_ms, served.completion.max_prompt_tokens, served.model.reuse_chunk_tokens,
            served.prompt.file_only_round, served.model.flash_attention) == (50.0, 2048, 0, True, False)  # not embedded


def test_the_most_specific_value_wins_then_the_later_layer():
    mapping = {"completion": {"max_prompt_tokens": 4096, "lsp": {"max_prompt_tokens": 3000},
                              "lsp_embedded": {"max_prompt_tokens": 1500}}}
    assert config_from_mapping(mapping, "cli")[0].completion.max_prompt_tokens == 4096
    resolved = resolved_config(read(mapping), "lsp")
    assert resolved.config.completion.max_prompt_tokens == 1500 and resolved.surface_key == "lsp_embedded"
    assert resolved.sources["completion.max_prompt_tokens"] == "set [completion.lsp_embedded]"
    # A plain value leaves a surface's declared default alone (as server.* left the CLI's alone).
    plain = resolved_config(read({"completion": {"max_prompt_tokens": 4096}}), "lsp")
    assert plain.config.completion.max_prompt_tokens == 1024
    assert plain.sources["completion.max_prompt_tokens"] == "surface default (lsp_embedded)"
    # So with the model: a plain choice is the command line's; the editor's is [model.lsp] (or the
    # editor's own setting), one setting either way.
    plain = read({"model": {"embedded_model": "qwen2.5-coder-0.5b"}})
    assert resolved_config(plain, "cli").config.model.embedded_model == "qwen2.5-coder-0.5b"
    editor = read({"model": {"lsp": {"embedded_model": "qwen2.5-coder-1.5b"}}})
    assert resolved_config(editor, "lsp").config.model.embedded_model == "qwen2.5-coder-1.5b"
    assert resolved_config(editor, "cli").config.model.embedded_model == "qwen2.5-coder-1.5b"
    assert resolved_config(read({}), "lsp").sources["model.embedded_model"] == "surface default (lsp)"
    # The command line and the editor win over all, and count when judging the embedded model.
    over = resolved_config(read(mapping), "lsp", {"completion.max_prompt_tokens": 700}, "editor setting")
    assert over.config.completion.max_prompt_tokens == 700
    assert over.sources["completion.max_prompt_tokens"] == "editor setting"
    served = resolved_config(read(mapping), "lsp", {"model.endpoint": "http://127.0.0.1:8000"})
    assert served.config.completion.max_prompt_tokens == 3000 and served.surface_key == "lsp"


def test_a_surface_table_is_checked_as_the_plain_values_are():
    config, problems = config_from_mapping({"retrieval": {"lsp": {"time_budget_ms": -1, "top_k": 3, "nope": 1},
                                                          "gui": {"time_budget_ms": 1}, "eval": 5}}, "lsp")
    assert config.retrieval.time_budget_ms == 50.0 and config.retrieval.top_k == 10
    assert [(p.key, p.kind) for p in problems] == [
        ("retrieval.lsp.time_budget_ms", "refused value"), ("retrieval.lsp.top_k", "one value everywhere"),
        ("retrieval.lsp.nope", "unknown key"), ("retrieval.gui", "unknown key"), ("retrieval.eval", "not a table")]
    assert problems[0].kept == 50.0  # the surface's own default, not the plain one
    assert problems[1].render() == ("config retrieval.lsp.top_k ignored: retrieval.top_k has one value on every "
                                    "surface (set it under [retrieval])")
    with pytest.raises(ValueError):
        config_from_mapping({}, "gui")


def test_a_repository_surface_table_obeys_the_repository_rules(repo: Path):
    (repo / "repomem.toml").write_text("[completion.lsp_embedded]\nmax_prompt_tokens = 1000000\n"
                                       "[model.lsp]\nendpoint = 'http://attacker.example'\n")
    resolved = read_config(repo, "lsp")
    assert resolved.config.completion.max_prompt_tokens == 32_768  # lowered to its repository cap
    assert resolved.config.model.endpoint == ""
    assert {(p.key, p.kind) for p in resolved.problems} >= {
        ("completion.lsp_embedded.max_prompt_tokens", "capped"), ("model.lsp.endpoint", "not for a repository")}


def test_the_old_server_settings_read_as_surface_values_with_one_notice_each(repo: Path):
    (repo / "repomem.toml").write_text("[server]\nretrieval_budget_ms = 30\nembedded_prompt_tokens = 900\n"
                                       "embedded_file_only_round = true\nreuse_chunk_tokens = 0\n"
                                       "prefill_chunk_tokens = 128\ndebounce_ms = 60\n")
    lsp = read_config(repo, "lsp")
    assert (lsp.config.retrieval.time_budget_ms, lsp.config.completion.max_prompt_tokens,
            lsp.config.prompt.file_only_round, lsp.config.model.reuse_chunk_tokens,
            lsp.config.model.prefill_chunk_tokens, lsp.config.server.debounce_ms) == (30, 900, True, 0, 128, 60)
    assert sorted((p.old_name, p.key) for p in lsp.problems) == [
        ("server.embedded_file_only_round", "prompt.lsp_embedded.file_only_round"),
        ("server.embedded_prompt_tokens", "completion.lsp_embedded.max_prompt_tokens"),
        ("server.prefill_chunk_tokens", "model.lsp_embedded.prefill_chunk_tokens"),
        ("server.retrieval_budget_ms", "retrieval.lsp.time_budget_ms"),
        ("server.reuse_chunk_tokens", "model.lsp_embedded.reuse_chunk_tokens")]
    assert all(p.kind == "moved" for p in lsp.problems)
    cli = read_config(repo, "cli").config  # the CLI's values are not the server's
    assert (cli.retrieval.time_budget_ms, cli.completion.max_prompt_tokens, cli.prompt.file_only_round) == (
        0.0, 2048, True)


# -- the [model] section ------------------------------------------------------------------------------


def test_the_model_settings_live_in_model_and_read_under_their_completion_names():
    moved = {s.key for s in settings_of(Config) if s.section == "model"}
    newer = {"prompt_cache_mb", "flash_attention", "decode_threads"}  # added to [model] after the move: no old name
    assert all(f"completion.{s.key}" in s.rules.moved_from for s in settings_of(Config)
               if s.section == "model" and s.key not in newer)
    assert len(moved - newer) == 15 and "deadline_s" not in moved and not hasattr(Config().completion, "endpoint")
    config, problems = config_from_mapping({"completion": {"embedded_model": "qwen2.5-coder-1.5b", "threads": 3}})
    assert config.model.embedded_model == "qwen2.5-coder-1.5b" and config.model.threads == 3
    assert [(p.kind, p.old_name, p.key) for p in problems] == [
        ("moved", "completion.embedded_model", "model.embedded_model"),
        ("moved", "completion.threads", "model.threads")]
    assert problems[0].render() == ("config completion.embedded_model has moved to model.embedded_model; read as "
                                    "model.embedded_model (rename it there)")
    notices: list[ConfigProblem] = []
    config, refused = with_assignments(Config(), ["completion.endpoint_logprobs=false"], notices)
    assert not refused and not config.model.endpoint_logprobs and notices[0].key == "model.endpoint_logprobs"


def test_the_move_leaves_the_fingerprints_of_earlier_indexes_and_records_alone():
    """Hashed as the [completion] settings they were (ModelConfig.DIGESTED_AS): an evaluation's
    records made before the move keep resuming and comparing."""
    config = with_overrides(Config(), model={"embedded_model": "qwen2.5-coder-1.5b", "threads": 3},
                            completion={"max_new_tokens": 12})
    run_only = {s.name for s in settings_of(Config) if s.rules.run_only}
    before_the_move: dict[str, dict] = {}  # the layout of the settings before issue 58
    for section in dataclasses.fields(config):
        values = dataclasses.asdict(getattr(config, section.name))
        kept = {key: value for key, value in values.items() if f"{section.name}.{key}" not in run_only}
        if kept:
            before_the_move.setdefault("completion" if section.name == "model" else section.name, {}).update(kept)
    expected = hashlib.blake2b(json.dumps(before_the_move, sort_keys=True).encode(), digest_size=16).hexdigest()
    assert settings_digest(config) == expected


# -- typed problems ------------------------------------------------------------------------------------


def test_problems_are_values_and_words_come_only_from_render():
    config, problems = config_from_mapping({"retrieval": {"top_k": "ten", "alpha": 3.0e9}, "nope": {}})
    assert [(p.key, p.kind, p.value, p.kept) for p in problems] == [
        ("retrieval.top_k", "wrong type", "ten", 10), ("retrieval.alpha", "refused value", 3.0e9, 0.5),
        ("nope", "unknown section", NOTHING_KEPT, NOTHING_KEPT)]
    assert problems[0].message == "expected an integer, got a string"
    assert problems[0].render() == "config retrieval.top_k: expected an integer, got a string; default 10 kept"
    assert problems[0].render(outcome=False) == "config retrieval.top_k: expected an integer, got a string"
    assert problems[2].render(outcome=False) == "unknown config section [nope]"
    _, refused = with_assignments(Config(), ["retrieval.top_k"])
    assert refused[0].kind == "bad assignment"
    assert refused[0].render() == "'retrieval.top_k': expected section.key=value"


def test_an_unreadable_settings_file_is_one_problem(repo: Path, tmp_path: Path):
    (tmp_path / "user.toml").write_text("[retrieval\n")
    resolved = read_config(repo)
    assert [(p.kind, p.source) for p in resolved.problems] == [("unreadable", str(tmp_path / "user.toml"))]
    assert resolved.config == default_config()
    assert resolved.problems[0].render().endswith("; defaults used")
