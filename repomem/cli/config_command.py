"""`repomem config show`: every setting's value in force on one surface and where it came from."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from repomem.cli.errors import UserError
from repomem.config import (
    SettingsRead,
    assignment_overrides,
    read_settings,
    resolved_config,
)
from repomem.failures import Failure, FailureKind
from repomem.repository_root import find_repo_root
from repomem.setting_reference import toml_value
from repomem.setting_rules import SURFACES, ConfigProblem, settings_of


def add_config_parser(commands: Any) -> None:
    config = commands.add_parser("config", help="the settings in force and where each came from")
    actions = config.add_subparsers(dest="action", required=True)
    show = actions.add_parser("show", help="print every setting's value on a surface and where it came from")
    show.add_argument("path", nargs="?", default=None,
                      help="a repository's folder, or a folder inside one (default: the repository around the "
                           "current folder, else none)")
    show.add_argument("--surface", choices=SURFACES, default="cli",
                      help="whose settings: the command line's (default), the language server's or the "
                           "evaluator's (which reads no settings files)")
    show.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                      help="a command-line value, as `eval run --set` takes it (repeatable)")
    show.add_argument("--json", action="store_true", help="machine-readable output (see README)")
    show.set_defaults(handler=cmd_config_show)


def _repository(path: str | None) -> Path | None:
    if path is None:
        return find_repo_root(Path.cwd())
    if not path.strip():
        raise UserError(Failure(FailureKind.MISSING_REPO, "the repository folder is an empty string"))
    folder = Path(path)
    if not folder.exists():
        raise UserError(Failure(FailureKind.MISSING_REPO, f"{path}: no such folder"))
    if not folder.is_dir():
        raise UserError(Failure(FailureKind.NOT_A_FOLDER, f"{path} is not a folder"))
    # A folder inside a repository: that repository's settings, which commands on its files run
    # with (its subfolder's own showed none of its repomem.toml).
    return find_repo_root(folder.resolve()) or folder.resolve()


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _problem_record(problem: ConfigProblem) -> dict[str, Any]:
    return {"key": problem.key, "kind": problem.kind, "message": problem.render()}


def cmd_config_show(args: argparse.Namespace, out: Console, err: Console) -> int:
    root = _repository(args.path)
    # The evaluator reads no settings files: its records hold the --set values, the rest defaults.
    read = SettingsRead({}, {}, []) if args.surface == "eval" else read_settings(root)
    unreadable = [problem for problem in read.problems if problem.kind == "unreadable"]
    if unreadable:  # shown to be looked at: a file that cannot be read is the answer, not a warning
        raise UserError(Failure(FailureKind.BAD_CONFIG, unreadable[0].render(outcome=False)))
    overrides, refused, moved = assignment_overrides(args.set)
    if refused:
        raise UserError(Failure(FailureKind.BAD_OPTION, f"--set: {refused[0].render(outcome=False)}"))
    resolved = resolved_config(read, args.surface, overrides, "command line")
    problems = moved + resolved.problems
    for problem in problems:
        print(f"repomem: warning: {problem.render()}", file=sys.stderr)
    settings = settings_of(type(resolved.config))
    if args.json:
        print(json.dumps({
            "surface": resolved.surface, "surface_key": resolved.surface_key,
            "repository": str(root) if root is not None else None,
            "settings": [{"name": s.name, "value": _json_value(getattr(getattr(resolved.config, s.section), s.key)),
                          "source": resolved.sources[s.name]} for s in settings],
            "problems": [_problem_record(problem) for problem in problems],
        }, indent=2))
        return 0
    print(f"# surface: {resolved.surface_key}" + (f"; repository: {root}" if root is not None else ""))
    section = ""
    for setting_ in settings:
        if setting_.section != section:
            section = setting_.section
            print(f"\n[{section}]")
        value = getattr(getattr(resolved.config, setting_.section), setting_.key)
        print(f"{setting_.key} = {toml_value(value)}  # {resolved.sources[setting_.name]}")
    return 0
