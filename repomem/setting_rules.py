"""What one setting of the config tree may hold, and who may set it: its SettingRules.

Every field of a config section (repomem/config.py) is declared with `setting(default, ...)`, which
puts the field's SettingRules in its dataclass metadata. Every validator reads them from there:
repomem.toml and the user's config (type, bounds, choices), a repository's own settings (forbidden,
stricter-only, capped), the index and evaluation fingerprints (run-only settings), the language
server's client settings (their names) and the configuration reference (docs/configuration.md).
No validator keeps a table of its own keyed by setting names, so a misspelt name cannot hide: a
rule names no setting, it sits on one, and `rule_problems` (run by the tests) checks each.

This module knows no particular setting; it reads any tree of frozen dataclasses whose fields are
sections and whose sections' fields are settings.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, TypeVar

Tree = TypeVar("Tree")

# Every number a setting holds is at most this, unless its rules say less: TOML integers are
# unbounded, and window_lines = 10**23 overflowed numpy deep in the index build (an internal
# error, not a warning). 2**31 - 1 fits every C int and numpy int32 a setting reaches, and in
# seconds or milliseconds it stays below threading.TIMEOUT_MAX.
SETTING_CEILING = 2**31 - 1

# Who may set a setting in a repository's own repomem.toml (load_config): "anyone" (up to its
# repository_cap, if any); "not a repository" (it sends code or keys to a server, or names a path
# outside the repository); "stricter only" (secret protection: a repository may add patterns,
# lower thresholds and keep masking on). The user's config, the command line and the editor set
# every setting; so does a repository the user trusts.
Repository = Literal["anyone", "not a repository", "stricter only"]
REPOSITORY_RULES: tuple[Repository, ...] = ("anyone", "not a repository", "stricter only")
# A repository cap of this machine's CPU count (threads and processes).
CPU_COUNT = "cpu count"
# Intervals a share or weight lies in.
Interval = Literal["(0, 1]", "[0, 1]"]
INTERVALS: tuple[Interval, ...] = ("(0, 1]", "[0, 1]")

METADATA_KEY = "repomem.setting"


@dataclass(frozen=True)
class SettingRules:
    """One setting's description. Bounds apply to numbers (int and float settings) only."""

    help: str  # one line for a user: what the setting does, with its unit
    minimum: int | float = 0  # numbers: the lowest value accepted
    minimum_means: str = ""  # what a minimum below 0 stands for ("off", "all layers")
    positive: bool = False  # numbers: 0 is refused too ("must be > 0")
    within: Interval | None = None  # numbers: a share or a weight
    maximum: int | float = SETTING_CEILING  # numbers: the highest value accepted
    choices: tuple[str, ...] = ()  # strings: the values accepted (empty: any string)
    folder_name: bool = False  # strings: one plain folder name (no separator, not "", "." or "..")
    repository: Repository = "anyone"
    # Numbers a repository's own settings may not raise past (a cloned repository must not make
    # repomem start 24 workers or reserve a million-token window); CPU_COUNT: this machine's CPU
    # count. A higher value is lowered to the cap with one warning. None: no cap.
    repository_cap: int | float | str | None = None
    zero_is_unlimited: bool = False  # 0 means "no limit", so it counts as above any repository cap
    # The setting changes how work is carried out, not what it produces (threads, where the model
    # runs, how long to wait): fingerprints of an index or of evaluation records leave it out, so a
    # different thread count neither rebuilds nor re-runs anything.
    run_only: bool = False
    reopens_backend: bool = False  # the language server opens another model backend when it changes
    lsp: str = ""  # the language server's client setting (camelCase), if it has one
    # Where the setting used to live ("section.key"): still accepted there, with one warning.
    moved_from: tuple[str, ...] = ()


def setting(default: Any, *, help: str, minimum: int | float = 0, minimum_means: str = "", positive: bool = False,
            within: Interval | None = None, maximum: int | float = SETTING_CEILING, choices: Iterable[str] = (),
            folder_name: bool = False, repository: Repository = "anyone",
            repository_cap: int | float | str | None = None, zero_is_unlimited: bool = False,
            run_only: bool = False, reopens_backend: bool = False, lsp: str = "",
            moved_from: Iterable[str] = ()) -> Any:
    """A config section's field: its default and its SettingRules, in the field's metadata."""
    rules = SettingRules(help=help, minimum=minimum, minimum_means=minimum_means, positive=positive, within=within,
                         maximum=maximum, choices=tuple(choices), folder_name=folder_name, repository=repository,
                         repository_cap=repository_cap, zero_is_unlimited=zero_is_unlimited, run_only=run_only,
                         reopens_backend=reopens_backend, lsp=lsp, moved_from=tuple(moved_from))
    return dataclasses.field(default=default, metadata={METADATA_KEY: rules})


@dataclass(frozen=True)
class Setting:
    """A setting of a config tree: where it lives, its default and its rules."""

    section: str
    key: str
    default: Any
    rules: SettingRules

    @property
    def name(self) -> str:
        return f"{self.section}.{self.key}"


@cache
def settings_of(root: type) -> tuple[Setting, ...]:
    """Every setting of the config tree `root` (a dataclass of sections), in declaration order.
    Raises TypeError for a field declared without `setting(...)`: it would have no rules."""
    settings = []
    defaults = root()
    for section in dataclasses.fields(root):
        values = getattr(defaults, section.name)
        for field in dataclasses.fields(values):
            rules = field.metadata.get(METADATA_KEY)
            if not isinstance(rules, SettingRules):
                raise TypeError(f"{section.name}.{field.name} is declared without setting(...): it has no rules")
            settings.append(Setting(section.name, field.name, getattr(values, field.name), rules))
    return tuple(settings)


@cache
def settings_by_name(root: type) -> dict[tuple[str, str], Setting]:
    """(section, key) -> Setting, for the tree's current names."""
    return {(s.section, s.key): s for s in settings_of(root)}


@cache
def moved_settings(root: type) -> dict[tuple[str, str], Setting]:
    """(old section, old key) -> the Setting that moved from there."""
    moved = {}
    for setting_ in settings_of(root):
        for old in setting_.rules.moved_from:
            section, _, key = old.partition(".")
            moved[(section, key)] = setting_
    return moved


def with_current_names(root: type, data: dict[str, Any], label: str = "config") -> tuple[dict[str, Any], list[str]]:
    """`data` (a nested mapping, as read from TOML) with every moved setting's old name replaced by
    its current one, and one warning per old name. Where the current name is set too, it wins.
    Sections and values are left as they are for the validators to judge."""
    moved = moved_settings(root)
    if not moved:
        return data, []
    warnings: list[str] = []
    renamed: dict[str, Any] = {name: dict(values) if isinstance(values, dict) else values
                               for name, values in data.items()}
    for section, values in data.items():
        if not isinstance(values, dict):
            continue
        for key, value in values.items():
            target = moved.get((section, key))
            if target is None:
                continue
            current = renamed.setdefault(target.section, {})
            if not isinstance(current, dict):
                continue  # the current section is not a table: config_from_mapping reports both
            del renamed[section][key]
            if not renamed[section] and section not in {s.section for s in settings_of(root)}:
                del renamed[section]  # a section that exists no more, now empty
            if target.key in current:
                warnings.append(f"{label} {section}.{key} has moved to {target.name}, which is set too; "
                                f"{section}.{key} ignored")
                continue
            current[target.key] = value
            warnings.append(f"{label} {section}.{key} has moved to {target.name}; read as {target.name} "
                            "(rename it there)")
    return renamed, warnings


def tree_from_mapping(root: type[Tree], data: dict[str, Any]) -> tuple[Tree, list[str]]:
    """The config tree `root` built from a nested mapping (as read from TOML): each value of the
    setting's type and accepted by its rules replaces the default; any other entry falls back to
    the default with one warning. A moved setting's old name counts as its current one."""
    data, warnings = with_current_names(root, data)
    by_name = settings_by_name(root)
    base = root()
    section_names = {section.name for section in dataclasses.fields(root)}  # type: ignore[arg-type]
    sections: dict[str, Any] = {}
    for section_name, section_value in data.items():
        if section_name not in section_names:
            warnings.append(f"unknown config section [{section_name}] ignored")
            continue
        if not isinstance(section_value, dict):
            warnings.append(f"config section [{section_name}] must be a table; default kept")
            continue
        changes: dict[str, Any] = {}
        for key, value in section_value.items():
            setting_ = by_name.get((section_name, key))
            if setting_ is None:
                warnings.append(f"unknown config key {section_name}.{key} ignored")
                continue
            try:
                coerced = coerce(value, setting_.default)
            except TypeError as error:
                warnings.append(f"config {setting_.name}: {error}; default {setting_.default!r} kept")
                continue
            problem = value_problem(setting_.rules, coerced)
            if problem is not None:
                warnings.append(f"config {setting_.name}={coerced!r} {problem}; default {setting_.default!r} kept")
                continue
            changes[key] = coerced
        sections[section_name] = dataclasses.replace(getattr(base, section_name), **changes)
    return dataclasses.replace(base, **sections), warnings  # type: ignore[type-var]


def coerce(value: Any, default: Any) -> Any:
    """Return `value` converted to the type of `default`, or raise TypeError."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
    elif isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif isinstance(default, str):
        if isinstance(value, str):
            return value
    elif isinstance(default, tuple):
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        if isinstance(value, list):
            odd = next(v for v in value if not isinstance(v, str))
            raise TypeError(f"expected a list of strings, got {toml_type(odd)} {odd!r} in it")
        raise TypeError(f"expected a list of strings, got {toml_type(value)}")
    raise TypeError(f"expected {toml_type(default)}, got {toml_type(value)}")


def toml_type(value: Any) -> str:
    """A value's type as a TOML file's author knows it."""
    if isinstance(value, bool):
        return "a boolean"
    return {int: "an integer", float: "a number", str: "a string", list: "a list", tuple: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def value_problem(rules: SettingRules, value: Any) -> str | None:
    """Why `value` (already of the setting's type) is refused, or None. Checked in this order: a
    number is finite, at most its maximum, above 0 where positive, at least its minimum, inside
    its interval; a string is one of the choices, a plain folder name where it must be one."""
    if isinstance(value, str):
        if rules.choices and value not in rules.choices:
            return f"is not one of {', '.join(rules.choices)}"
        if rules.folder_name and (value in ("", ".", "..") or "/" in value or "\\" in value):
            return "must be a plain folder name"
        return None
    if not is_number(value):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"  # NaN / inf would pass every comparison below, or print as invalid JSON
    if value > rules.maximum:
        return f"must be at most {rules.maximum:,}"
    if rules.positive and value <= 0:
        return "must be > 0"  # before the minimum (0 for most): -3 and 0 are told the same rule
    if value < rules.minimum:
        if rules.minimum_means:
            return f"must be {rules.minimum} ({rules.minimum_means}) or more"
        return f"must be >= {rules.minimum}"
    if rules.within == "(0, 1]" and not 0 < value <= 1:
        return "must lie in (0, 1]"
    if rules.within == "[0, 1]" and not 0 <= value <= 1:
        return "must lie in [0, 1]"
    return None


def rule_problems(root: type) -> list[str]:
    """What is wrong with the rules of the config tree `root` (empty when they are well-formed),
    one line per problem: each setting's own (setting_problems), language-server names used
    twice, old names (moved_from) claimed twice or still a setting's current name."""
    problems = []
    settings = settings_of(root)
    current = {s.name for s in settings}
    lsp_names: dict[str, str] = {}
    old_names: dict[str, str] = {}
    for setting_ in settings:
        problems += [f"{setting_.name}: {problem}" for problem in setting_problems(setting_)]
        if setting_.rules.lsp:
            if setting_.rules.lsp in lsp_names:
                problems.append(f"{setting_.name}: language-server name {setting_.rules.lsp!r} is "
                                f"{lsp_names[setting_.rules.lsp]}'s too")
            lsp_names[setting_.rules.lsp] = setting_.name
        for old in setting_.rules.moved_from:
            if old in current:
                problems.append(f"{setting_.name}: moved_from {old!r} is a current setting")
            if old in old_names:
                problems.append(f"{setting_.name}: moved_from {old!r} is {old_names[old]}'s old name too")
            old_names[old] = setting_.name
    return problems


def setting_problems(setting_: Setting) -> list[str]:
    """What is wrong with one setting's rules: bounds on numbers only, choices on strings only
    and holding the default, the default itself accepted, caps on numbers anyone may set, a
    one-line help, a camelCase language-server name, old names spelt "section.key"."""
    rules, default, problems = setting_.rules, setting_.default, []
    number = is_number(default)
    if not rules.help.strip() or "\n" in rules.help:
        problems.append("needs a one-line help")
    if not number:
        bounded = (rules.minimum != 0 or rules.minimum_means or rules.positive or rules.within is not None
                   or rules.maximum != SETTING_CEILING or rules.zero_is_unlimited)
        if bounded:
            problems.append(f"bounds on a {type(default).__name__} setting")
        if rules.repository_cap is not None:
            problems.append(f"a repository cap on a {type(default).__name__} setting")
    else:
        if rules.minimum_means and rules.minimum >= 0:
            problems.append("minimum_means explains a minimum below 0 only")
        if rules.minimum < 0 and not rules.minimum_means:
            problems.append("a minimum below 0 needs minimum_means (what it stands for)")
        if rules.within is not None and rules.within not in INTERVALS:
            problems.append(f"within {rules.within!r} is not one of {INTERVALS}")
        if not rules.minimum <= rules.maximum <= SETTING_CEILING:
            problems.append(f"maximum {rules.maximum!r} is not between the minimum and {SETTING_CEILING}")
        cap = rules.repository_cap
        if cap is not None and cap != CPU_COUNT and not (is_number(cap) and rules.minimum <= cap <= rules.maximum):
            problems.append(f"repository cap {cap!r} is neither {CPU_COUNT!r} nor a number within the bounds")
        if rules.zero_is_unlimited and cap is None:
            problems.append("zero_is_unlimited matters for a repository cap only")
    if not isinstance(default, str) and (rules.choices or rules.folder_name):
        problems.append(f"choices or folder_name on a {type(default).__name__} setting")
    if rules.repository not in REPOSITORY_RULES:
        problems.append(f"repository {rules.repository!r} is not one of {REPOSITORY_RULES}")
    if rules.repository_cap is not None and rules.repository != "anyone":
        problems.append(f"a repository cap on a setting a repository may set only as {rules.repository!r}")
    if rules.repository == "stricter only" and not isinstance(default, (bool, int, float, tuple)):
        problems.append("stricter only applies to a flag, a threshold or a list")
    try:
        coerce(list(default) if isinstance(default, tuple) else default, default)  # as TOML spells it
        refused = value_problem(rules, default)
    except TypeError as error:
        refused = str(error)
    if refused is not None:
        problems.append(f"the default {default!r} is refused by its own rules: {refused}")
    if rules.lsp and not (rules.lsp.isidentifier() and rules.lsp[0].islower() and "_" not in rules.lsp):
        problems.append(f"language-server name {rules.lsp!r} is not camelCase")
    for old in rules.moved_from:
        section, dot, key = old.partition(".")
        if not dot or not section.isidentifier() or not key.isidentifier():
            problems.append(f"moved_from {old!r} is not section.key")
    return problems
