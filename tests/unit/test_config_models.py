"""Issue 56: a setting's default may differ with the model that runs (SettingRules.models): the
levers measured to suit a larger model come with it, unless the user set them. A made-up tree
first, then the real one on every surface, the command line and the evaluator."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import pytest

from repomem.config import (
    Config,
    SettingsRead,
    measured_model,
    model_defaults,
    resolved_config,
    with_assignments,
    with_overrides,
)
from repomem.setting_rules import resolved_tree, setting, setting_problems, settings_of

# -- a made-up tree -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeverSection:
    blocks: int = setting(0, models={"big": 4}, help="blocks, more with the big model")
    room: int = setting(100, surfaces={"lsp": 50}, models={"big": 80}, help="room, less in the editor")
    other: int = setting(1, help="the same with every model")


@dataclass(frozen=True)
class ModelSection:
    name: str = setting("small", help="the model that runs")


@dataclass(frozen=True)
class LeverTree:
    lever: LeverSection = LeverSection()
    model: ModelSection = ModelSection()


def resolve(mapping: dict, surface: str = "cli", overrides: dict | None = None):
    return resolved_tree(LeverTree, mapping, surface, overrides=overrides, model_of=lambda tree: tree.model.name)


def test_a_models_value_replaces_the_default_only_with_that_model():
    small = resolve({})
    assert (small.tree.lever.blocks, small.tree.lever.room, small.chosen["lever.blocks"]) == (0, 100, "default")
    big = resolve({"model": {"name": "big"}})
    assert (big.tree.lever.blocks, big.tree.lever.room, big.tree.lever.other) == (4, 80, 1)
    assert big.chosen["lever.blocks"] == big.chosen["lever.room"] == "model default (big)"
    assert big.chosen["lever.other"] == "default"


def test_what_the_user_sets_wins_over_the_models_value_even_when_it_equals_the_default():
    assert resolve({"model": {"name": "big"}, "lever": {"blocks": 0}}).tree.lever.blocks == 0
    assert resolve({"model": {"name": "big"}, "lever": {"lsp": {"room": 60}}}, "lsp").tree.lever.room == 60
    overridden = resolve({}, overrides={"model.name": "big", "lever.blocks": 2})
    assert (overridden.tree.lever.blocks, overridden.tree.lever.room) == (2, 80)  # the model named by an override


def test_a_models_value_replaces_a_surfaces_declared_default():
    assert resolve({}, "lsp").tree.lever.room == 50
    big = resolve({"model": {"name": "big"}}, "lsp")
    assert big.tree.lever.room == 80 and big.chosen["lever.room"] == "model default (big)"


def test_a_models_value_is_checked_by_the_settings_own_rules():
    @dataclass(frozen=True)
    class Section:
        count: int = setting(1, positive=True, models={"big": 0}, help="a count")

    @dataclass(frozen=True)
    class Tree:
        section: Section = Section()

    [declared] = settings_of(Tree)
    assert any("with big" in problem for problem in setting_problems(declared))


# -- the real tree ------------------------------------------------------------------------------------


def test_the_measured_model_is_the_embedded_one_that_runs_here_or_through_transformers():
    assert measured_model(Config()) == "qwen2.5-coder-1.5b"
    assert measured_model(with_overrides(Config(), model={"embedded_model": "qwen2.5-coder-0.5b"})) \
        == "qwen2.5-coder-0.5b"
    assert measured_model(with_overrides(Config(), model={"hf_model": "qwen2.5-coder-1.5b"})) == "qwen2.5-coder-1.5b"
    assert measured_model(with_overrides(Config(), model={"hf_model": "/models/codellama"})) == ""
    # A GGUF file of the user's own runs none of the levers measured with the default model.
    assert measured_model(with_overrides(Config(), model={"model_path": "/models/codellama.gguf"})) == ""
    assert measured_model(with_overrides(Config(), model={"model_path": "qwen2.5-coder-0.5b"})) == "qwen2.5-coder-0.5b"
    own_file = SettingsRead({"model": {"model_path": "/models/codellama.gguf"}}, {}, [])
    assert resolved_config(own_file, "cli").config.completion.style == "comments"
    served = with_overrides(Config(), model={"endpoint": "http://127.0.0.1:8000",
                                             "embedded_model": "qwen2.5-coder-1.5b"})
    assert measured_model(served) == ""  # a server's model was not measured


def the_15b_on(surface: str, **more: dict) -> SettingsRead:
    """Settings that run the 1.5B on `surface`: the editor's model is its own setting ([model.lsp])."""
    model = {"lsp": {"embedded_model": "qwen2.5-coder-1.5b"}} if surface == "lsp" else {
        "embedded_model": "qwen2.5-coder-1.5b"}
    return SettingsRead({"model": model, **more}, {}, [])


@pytest.mark.parametrize("surface", ["cli", "lsp", "eval"])
def test_every_surface_applies_the_measured_defaults_of_the_model_it_runs(surface: str):
    shipped = model_defaults("qwen2.5-coder-1.5b")
    read = the_15b_on(surface)
    resolved = resolved_config(read, surface)
    for section, values in shipped.items():
        for key, value in values.items():
            assert getattr(getattr(resolved.config, section), key) == value
            assert resolved.sources[f"{section}.{key}"] == "model default (qwen2.5-coder-1.5b)"
    served = resolved_config(SettingsRead({"model": {"embedded_model": "qwen2.5-coder-1.5b",
                                                     "endpoint": "http://127.0.0.1:8000"}}, {}, []), surface)
    assert all(not where.startswith("model default") for where in served.sources.values())
    # The small model's own: no fill in the middle (eval/results/right-context), the rest default.
    assert model_defaults("qwen2.5-coder-0.5b") == {"completion": {"fill_in_middle": False}}
    small = resolved_config(SettingsRead({"model": {"embedded_model": "qwen2.5-coder-0.5b"}}, {}, []), surface)
    assert {key for key, where in small.sources.items() if where.startswith("model default")} == \
        {"completion.fill_in_middle"}
    assert small.config.completion.fill_in_middle is False


def test_the_command_lines_model_name_selects_its_measured_defaults():
    from repomem.cli.backend_options import model_override
    from repomem.cli.eval_commands import _measured_model

    assert model_override("qwen2.5-coder-1.5b") == {"model.embedded_model": "qwen2.5-coder-1.5b"}
    assert model_override("/nowhere/model.gguf") == {"model.model_path": "/nowhere/model.gguf"}
    assert model_override(None) is None

    def args(**given) -> argparse.Namespace:
        return argparse.Namespace(**{"model": None, "hf": None, "endpoint": [], "vllm": None, **given})

    plain = Config()
    assert _measured_model(args(), plain) == "qwen2.5-coder-1.5b"  # the evaluator's default model
    assert _measured_model(args(model="qwen2.5-coder-1.5b"), plain) == "qwen2.5-coder-1.5b"
    assert _measured_model(args(hf="qwen2.5-coder-1.5b"), plain) == "qwen2.5-coder-1.5b"
    assert _measured_model(args(hf="qwen2.5-coder-1.5b", endpoint=["http://127.0.0.1:8000"]), plain) == ""
    assert _measured_model(args(model="/nowhere/model.gguf"), plain) == ""
    # `eval run --set model.embedded_model=...` names the model as --model does
    named, problems = with_assignments(plain, ("model.embedded_model=qwen2.5-coder-1.5b",))
    assert not problems and _measured_model(args(), named) == "qwen2.5-coder-1.5b"
    assert _measured_model(args(model="qwen2.5-coder-0.5b"), named) == "qwen2.5-coder-0.5b"  # --model wins
    served, _ = with_assignments(plain, ("model.endpoint=http://127.0.0.1:8000",))
    assert _measured_model(args(), served) == ""


def test_the_repository_form_comes_with_the_15b_and_the_05b_keeps_repocoders_comments():
    assert Config().completion.style == "comments"
    assert model_defaults("qwen2.5-coder-1.5b")["completion"]["style"] == "repo"
    for surface in ("cli", "lsp", "eval"):
        assert resolved_config(the_15b_on(surface), surface).config.completion.style == "repo"
        chosen = the_15b_on(surface, completion={"style": "comments"})
        assert resolved_config(chosen, surface).config.completion.style == "comments"  # the user's choice
    empty = SettingsRead({}, {}, [])
    assert resolved_config(empty, "cli").config.completion.style == "repo"  # the default model's form
    assert resolved_config(empty, "lsp").config.completion.style == "comments"  # the editor runs the 0.5B


def test_the_15b_gets_three_minutes_a_generation_unless_the_user_sets_a_deadline():
    """About a minute for one 1,000-token prompt on two AVX2 cores: the 0.5B's 60 s cut its first
    round short there, and the command printed nothing."""
    assert Config().completion.deadline_s == 60.0
    assert model_defaults("qwen2.5-coder-1.5b")["completion"]["deadline_s"] == 180.0
    empty = SettingsRead({}, {}, [])
    assert resolved_config(empty, "cli").config.completion.deadline_s == 180.0  # the default model
    assert resolved_config(empty, "lsp").config.completion.deadline_s == 60.0  # the editor's 0.5B
    chosen = the_15b_on("cli", completion={"deadline_s": 60.0})
    assert resolved_config(chosen, "cli").config.completion.deadline_s == 60.0
