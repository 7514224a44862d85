"""`repomem --help` against the settings: an option left out takes a setting's value, which a
repository's repomem.toml may change, so its help names the setting and the setting's real default
(the bundled example sets `retrieval.top_k = 5` while `retrieve --k` said "default 10")."""

from __future__ import annotations

import argparse

import pytest

from repomem.cli.main import build_parser
from repomem.config import Config


def _option(command: str, flag: str) -> argparse.Action:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return next(a for a in commands.choices[command]._actions if flag in a.option_strings)


@pytest.mark.parametrize(("command", "flag", "setting"), [
    ("retrieve", "--k", "retrieval.top_k"),
    ("retrieve", "--alpha", "retrieval.alpha"),
    ("complete", "--order", "completion.order"),
    ("complete", "--max-tokens", "completion.max_new_tokens"),
    ("complete", "--strategy", "completion.strategy"),
])
def test_an_option_that_defaults_to_a_setting_names_it_and_its_default(command, flag, setting):
    option = _option(command, flag)
    assert option.default is None  # the setting decides, not argparse
    section, key = setting.split(".")
    default = getattr(getattr(Config(), section), key)
    assert f"default: {setting}, {default}" in option.help, option.help
