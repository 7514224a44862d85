"""What one setting of the config tree may hold, and who may set it: its SettingRules.

Every field of a config section (repomem/config/sections.py) is declared with `setting(default, ...)`, which
puts the field's SettingRules in its dataclass metadata. Every validator reads them from there:
repomem.toml and the user's config (type, bounds, choices), a repository's own settings (forbidden,
stricter-only, capped), the index and evaluation fingerprints (run-only settings), the language
server's client settings (their names) and the configuration reference (docs/configuration.md).
No validator keeps a table of its own keyed by setting names, so a misspelt name cannot hide: a
rule names no setting, it sits on one, and `rule_problems` (run by the tests) checks each.

A setting may hold another value on a surface (SURFACES: the command line, the language server,
the evaluator; "lsp_embedded" while the language server runs the embedded model): its rules declare
that value, and a file may set one under [section.SURFACE_KEY]; resolved_tree picks, for one
surface, the most specific value. What is wrong with a mapping comes back as ConfigProblem values,
worded by ConfigProblem.render where a person reads them.

This module knows no particular setting; it reads any tree of frozen dataclasses whose fields are
sections and whose sections' fields are settings.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
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

# Where a config is used: the command line, the language server, the evaluator. A setting may hold
# another value on one of them (SettingRules.surfaces), and on one of them when the embedded model
# runs on this machine ("lsp_embedded": a CPU affords a smaller prompt than a model server).
SURFACES = ("cli", "lsp", "eval")
EMBEDDED = "embedded"
SURFACE_KEYS = (*SURFACES, *(f"{surface}_{EMBEDDED}" for surface in SURFACES))


class _NothingKept:
    """No value is kept instead: the entry is ignored (an unknown key, a moved name)."""

    def __repr__(self) -> str:
        return "nothing"


NOTHING_KEPT: Any = _NothingKept()

# What is wrong with an entry of the settings read. The validators produce these as data; only the
# edges (the CLI's stderr, the language server's window/showMessage) turn them into prose, with
# ConfigProblem.render: nothing reads a problem's words back.
ProblemKind = Literal[
    "unknown section", "unknown key", "not a table", "wrong type", "refused value", "one value everywhere",
    "moved", "moved, both set", "not for a repository", "stricter only", "weaker", "capped", "unreadable",
    "bad assignment", "unknown surface",
]


def _spelled(value: Any) -> str:
    """A value as TOML writes it where Python's spelling differs (true, false, a list in brackets),
    else Python's (strings in single quotes are TOML's literal strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(_spelled(item) for item in value) + "]"
    return repr(value)


@dataclass(frozen=True)
class ConfigProblem:
    """One problem with the settings read: which setting (or section) it is about, its kind, the
    reason in a user's words, the value refused and the value kept instead."""

    key: str  # "retrieval.top_k", "retrieval.lsp.time_budget_ms" or a section; "" for a whole file
    kind: ProblemKind
    message: str = ""  # the reason ("must be > 0"), or the explanation a kind needs
    value: Any = NOTHING_KEPT  # the value refused, as written
    kept: Any = NOTHING_KEPT  # the value in force instead; NOTHING_KEPT: the entry is ignored
    source: str = ""  # where it was read: a file's path, "repomem.toml", "--set"; "" when merged
    old_name: str = ""  # "moved": the name the setting was read under
    kept_is: str = "default"  # what the value kept is: "default", "your" (the user's config's), "" (said in message)

    def reason(self) -> str:
        """What is wrong with the value, without naming the setting or what happens instead (the
        language server says that its own way)."""
        if self.kind == "refused value":
            return f"{self.value!r} {self.message}"
        return self.message or self.kind

    def render(self, outcome: bool = True) -> str:
        """The problem as one line for a person. `outcome`: say what happens instead ("default 10
        kept", "ignored"); off where a refused entry stops the command (`--set`)."""
        where = f"{self.source}: " if self.source else ("config " if self.kind.startswith("moved") else "")
        kept = (f"; {self.kept_is + ' ' if self.kept_is else ''}{_spelled(self.kept)} kept"
                if outcome and self.kept is not NOTHING_KEPT else "")
        ignored = " ignored" if outcome else ""
        section, _, key = self.key.partition(".")
        text = {
            "unknown section": f"unknown config section [{self.key}]{ignored}",
            "unknown key": f"unknown config key {self.key}{ignored}" + (f" ({self.message})" if self.message else ""),
            "not a table": f"config section [{self.key}] must be a table" + ("; default kept" if outcome else ""),
            "wrong type": f"config {self.key}: {self.message}{kept}",
            "refused value": f"config {self.key}={_spelled(self.value)} {self.message}{kept}",
            "one value everywhere": f"config {self.key}{ignored}: {section}.{key.rpartition('.')[2]} has one value "
                                    f"on every surface (set it under [{section}])",
            "moved": f"{self.old_name} has moved to {self.key}; read as {self.key} (rename it there)",
            "moved, both set": f"{self.old_name} has moved to {self.key}, which is set too; {self.old_name}{ignored}",
            "not for a repository": f"{self.key}{ignored}: {self.message}",
            "stricter only": f"{self.key}: {self.message}" + ("; ignored" if outcome else ""),
            "weaker": f"{self.key}: {self.message}",
            "capped": f"{self.key}={self.value!r} {self.message}",
            "unreadable": self.message + ("; defaults used" if outcome else ""),
            "bad assignment": self.message if self.value is NOTHING_KEPT else f"{self.value!r}: {self.message}",
            "unknown surface": f"unknown surface {self.value!r}: one of {', '.join(SURFACES)}",
        }[self.kind]
        return where + text


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
    # The setting may hold another value on some surfaces (SURFACE_KEYS: "lsp", "lsp_embedded",
    # ...): these are its defaults there, as (surface key, value) pairs; a user's file may give it
    # one per surface too, under [section.SURFACE_KEY]. Empty: one value on every surface.
    surfaces: tuple[tuple[str, Any], ...] = ()
    # Old names of one surface's value, as (old "section.key", surface key) pairs: the language
    # server's server.retrieval_budget_ms is retrieval.time_budget_ms on the "lsp" surface now.
    surface_moved_from: tuple[tuple[str, str], ...] = ()
    # Its defaults with some models, as (model name, value) pairs: what was measured to suit that
    # model (a larger model uses what a smaller one only copies). They apply where the user set
    # nothing for the surface, over the surface's own default; resolved_tree's `model_of` says which
    # model runs.
    models: tuple[tuple[str, Any], ...] = ()


def setting(default: Any, *, help: str, minimum: int | float = 0, minimum_means: str = "", positive: bool = False,
            within: Interval | None = None, maximum: int | float = SETTING_CEILING, choices: Iterable[str] = (),
            folder_name: bool = False, repository: Repository = "anyone",
            repository_cap: int | float | str | None = None, zero_is_unlimited: bool = False,
            run_only: bool = False, reopens_backend: bool = False, lsp: str = "",
            moved_from: Iterable[str] = (), surfaces: dict[str, Any] | None = None,
            surface_moved_from: dict[str, str] | None = None, models: dict[str, Any] | None = None) -> Any:
    """A config section's field: its default and its SettingRules, in the field's metadata.
    `surfaces`: its defaults on some surfaces ({"lsp": 50.0}); `surface_moved_from`: old names of
    those values ({"server.retrieval_budget_ms": "lsp"}); `models`: its defaults with some models
    ({"qwen2.5-coder-1.5b": 4})."""
    rules = SettingRules(help=help, minimum=minimum, minimum_means=minimum_means, positive=positive, within=within,
                         maximum=maximum, choices=tuple(choices), folder_name=folder_name, repository=repository,
                         repository_cap=repository_cap, zero_is_unlimited=zero_is_unlimited, run_only=run_only,
                         reopens_backend=reopens_backend, lsp=lsp, moved_from=tuple(moved_from),
                         surfaces=tuple((surfaces or {}).items()),
                         surface_moved_from=tuple((surface_moved_from or {}).items()),
                         models=tuple((models or {}).items()))
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
def moved_settings(root: type) -> dict[tuple[str, str], tuple[Setting, str]]:
    """(old section, old key) -> the Setting that moved from there, and the surface key of the
    value the old name held ("" when it held the setting's value on every surface)."""
    moved = {}
    for setting_ in settings_of(root):
        for old in setting_.rules.moved_from:
            section, _, key = old.partition(".")
            moved[(section, key)] = (setting_, "")
        for old, surface_key in setting_.rules.surface_moved_from:
            section, _, key = old.partition(".")
            moved[(section, key)] = (setting_, surface_key)
    return moved


def with_current_names(root: type, data: dict[str, Any],
                       source: str = "") -> tuple[dict[str, Any], list[ConfigProblem]]:
    """`data` (a nested mapping, as read from TOML) with every moved setting's old name replaced by
    its current one (a surface's value under [section.SURFACE]), and one problem per old name.
    Where the current name is set too, it wins. Sections and values are left as they are for the
    validators to judge. `source`: where `data` was read, for the problems."""
    moved = moved_settings(root)
    if not moved:
        return data, []
    problems: list[ConfigProblem] = []
    renamed: dict[str, Any] = {name: dict(values) if isinstance(values, dict) else values
                               for name, values in data.items()}
    current_sections = {s.section for s in settings_of(root)}
    for section, values in data.items():
        if not isinstance(values, dict):
            continue
        for key, value in values.items():
            found = moved.get((section, key))
            if found is None:
                continue
            target, surface_key = found
            current = renamed.setdefault(target.section, {})
            if not isinstance(current, dict):
                continue  # the current section is not a table: tree_from_mapping reports both
            if surface_key:
                current = current.setdefault(surface_key, {})
                if not isinstance(current, dict):
                    continue  # [section] surface_key = 3: reported as not a table
            new_name = target.name if not surface_key else f"{target.section}.{surface_key}.{target.key}"
            del renamed[section][key]
            if not renamed[section] and section not in current_sections:
                del renamed[section]  # a section that exists no more, now empty
            if target.key in current:
                problems.append(ConfigProblem(new_name, "moved, both set", old_name=f"{section}.{key}",
                                              source=source))
                continue
            current[target.key] = value
            problems.append(ConfigProblem(new_name, "moved", old_name=f"{section}.{key}", source=source))
    return renamed, problems


def checked_value(setting_: Setting, value: Any, name: str = "", kept: Any = NOTHING_KEPT,
                  source: str = "") -> tuple[Any, ConfigProblem | None]:
    """`value` as the setting holds it (coerced to its type) and None, or None and why it is
    refused: the one check of a value, whoever sent it (a file, the command line, an editor).
    `name`: the setting's name as the user wrote it (default its current one); `kept`: the value in
    force instead (default the setting's default)."""
    name = name or setting_.name
    kept = setting_.default if kept is NOTHING_KEPT else kept
    try:
        coerced = coerce(value, setting_.default)
    except TypeError as error:
        return None, ConfigProblem(name, "wrong type", str(error), value=value, kept=kept, source=source)
    problem = value_problem(setting_.rules, coerced)
    if problem is not None:
        return None, ConfigProblem(name, "refused value", problem, value=coerced, kept=kept, source=source)
    return coerced, None


@dataclass(frozen=True)
class ResolvedTree:
    """A config tree as one surface sees it, what was wrong with the mapping it was read from, and
    where each setting's value came from (by "section.key"): "default", "surface default (KEY)" (the
    setting's declared value on that surface), "set" (the mapping's plain value), "set for KEY"
    (the mapping's value for that surface) or "override" (resolved_tree's overrides)."""

    tree: Any
    problems: list[ConfigProblem]
    chosen: dict[str, str]
    surface_key: str  # the most specific surface key that applied ("lsp_embedded", "cli")


def _homes_of(root: type[Tree], key: str) -> str:
    """Where a key written in the wrong place belongs ("it is a key of [retrieval]"), "" for none."""
    homes = sorted(s.section for s in settings_of(root) if s.key == key)
    return f"it is a key of [{'], ['.join(homes)}]" if homes else ""


def resolved_tree(root: type[Tree], data: dict[str, Any], surface: str = "cli",
                  embedded_when: Callable[[Any], bool] | None = None,
                  overrides: dict[str, Any] | None = None,
                  model_of: Callable[[Any], str] | None = None) -> ResolvedTree:
    """The config tree `root` built from a nested mapping (as read from TOML) for `surface`: each
    value of the setting's type and accepted by its rules replaces the default; any other entry
    falls back to the default with one problem. A moved setting's old name counts as its current
    one. The most specific value wins: [section.SURFACE_embedded] (when `embedded_when(tree)` says
    the embedded model runs) over [section.SURFACE] over [section]; at one level the mapping's value
    over the setting's declared surface default. `overrides` ("section.key" -> a value already
    checked, checked_value) win over all: the command line's and the editor's, given for this
    surface; they count when judging whether the embedded model runs (an editor's endpoint).
    `model_of(tree)` names the model that runs ("" for one without declared defaults): a setting's
    value for that model (SettingRules.models) replaces its default or surface default, never a
    value the mapping or the overrides give."""
    if surface not in SURFACES:
        raise ValueError(f"unknown surface {surface!r}: one of {', '.join(SURFACES)}")
    data, problems = with_current_names(root, data)
    by_name = settings_by_name(root)
    section_names = {section.name for section in dataclasses.fields(root)}  # type: ignore[arg-type]
    plain: dict[tuple[str, str], Any] = {}
    per_surface: dict[str, dict[tuple[str, str], Any]] = {key: {} for key in SURFACE_KEYS}
    for section_name, section_value in data.items():
        if section_name not in section_names and not isinstance(section_value, dict):
            # `top_k = 3` above every [section]: a key outside any section, not a section
            home = _homes_of(root, section_name)
            problems.append(ConfigProblem(section_name, "unknown key", "outside any section" + (
                f"; {home}" if home else "")))
            continue
        if section_name not in section_names:
            problems.append(ConfigProblem(section_name, "unknown section"))
            continue
        if not isinstance(section_value, dict):
            problems.append(ConfigProblem(section_name, "not a table"))
            continue
        for key, value in section_value.items():
            if key in SURFACE_KEYS:
                if not isinstance(value, dict):
                    problems.append(ConfigProblem(f"{section_name}.{key}", "not a table"))
                    continue
                for surface_setting, surface_value in value.items():
                    setting_ = by_name.get((section_name, surface_setting))
                    written = f"{section_name}.{key}.{surface_setting}"
                    if setting_ is None:
                        problems.append(ConfigProblem(written, "unknown key", _homes_of(root, surface_setting)))
                        continue
                    if not setting_.rules.surfaces:
                        problems.append(ConfigProblem(written, "one value everywhere", kept=NOTHING_KEPT))
                        continue
                    declared = dict(setting_.rules.surfaces).get(key, setting_.default)
                    coerced, problem = checked_value(setting_, surface_value, written, declared)
                    if problem is not None:
                        problems.append(problem)
                        continue
                    per_surface[key][(section_name, surface_setting)] = coerced
                continue
            setting_ = by_name.get((section_name, key))
            if setting_ is None:
                problems.append(ConfigProblem(f"{section_name}.{key}", "unknown key", _homes_of(root, key)))
                continue
            coerced, problem = checked_value(setting_, value)
            if problem is not None:
                problems.append(problem)
                continue
            plain[(section_name, key)] = coerced
    values: dict[tuple[str, str], Any] = {(s.section, s.key): s.default for s in settings_of(root)}
    chosen = {s.name: "default" for s in settings_of(root)}

    def lay(entries: dict[tuple[str, str], Any], where: str) -> None:
        for (section_name, key), value in entries.items():
            values[(section_name, key)] = value
            chosen[f"{section_name}.{key}"] = where

    def declared_on(surface_key: str) -> dict[tuple[str, str], Any]:
        return {(s.section, s.key): dict(s.rules.surfaces)[surface_key]
                for s in settings_of(root) if surface_key in dict(s.rules.surfaces)}

    def built() -> Any:
        base = root()
        sections = {name: dataclasses.replace(getattr(base, name), **{key: values[(name, key)] for key in (
            f.name for f in dataclasses.fields(getattr(base, name)))}) for name in section_names}
        return dataclasses.replace(base, **sections)  # type: ignore[type-var]

    given = {tuple(name.split(".", 1)): value for name, value in (overrides or {}).items()}
    lay(plain, "set")
    lay(declared_on(surface), f"surface default ({surface})")
    lay(per_surface[surface], f"set for {surface}")
    lay(given, "override")  # type: ignore[arg-type]
    surface_key = surface
    embedded_key = f"{surface}_{EMBEDDED}"
    if embedded_when is not None and embedded_when(built()):
        surface_key = embedded_key
        lay(declared_on(embedded_key), f"surface default ({embedded_key})")
        lay(per_surface[embedded_key], f"set for {embedded_key}")
        lay(given, "override")  # type: ignore[arg-type]
    model = model_of(built()) if model_of is not None else ""
    if model:
        lay({(s.section, s.key): dict(s.rules.models)[model] for s in settings_of(root)
             if model in dict(s.rules.models) and _unset(chosen[s.name])}, f"model default ({model})")
    return ResolvedTree(built(), problems, chosen, surface_key)


def _unset(where: str) -> bool:
    """Whether a setting resolved from `where` (ResolvedTree.chosen) holds a value nobody set."""
    return where == "default" or where.startswith("surface default")


def tree_from_mapping(root: type[Tree], data: dict[str, Any], surface: str = "cli",
                      embedded_when: Callable[[Any], bool] | None = None,
                      model_of: Callable[[Any], str] | None = None) -> tuple[Tree, list[ConfigProblem]]:
    """resolved_tree's tree and problems."""
    resolved = resolved_tree(root, data, surface, embedded_when, model_of=model_of)
    return resolved.tree, resolved.problems


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
    its interval; a string is one of the choices, a plain folder name where it must be one; a list
    holds no empty name."""
    if isinstance(value, tuple) and any(isinstance(item, str) and not item for item in value):
        # Every name ends with "": scan.excluded_dir_suffixes = [""] excluded every folder, silently.
        return "must not hold an empty name"
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
        for old in (*setting_.rules.moved_from, *(name for name, _ in setting_.rules.surface_moved_from)):
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
    for old in (*rules.moved_from, *(name for name, _ in rules.surface_moved_from)):
        section, dot, key = old.partition(".")
        if not dot or not section.isidentifier() or not key.isidentifier():
            problems.append(f"moved_from {old!r} is not section.key")
    if setting_.key in SURFACE_KEYS:
        problems.append(f"named like a surface ({setting_.key!r}): [section.{setting_.key}] holds surface values")
    declared = dict(rules.surfaces)
    for surface_key, value in rules.surfaces:
        if surface_key not in SURFACE_KEYS:
            problems.append(f"surface {surface_key!r} is not one of {SURFACE_KEYS}")
        refused = checked_value(setting_, list(value) if isinstance(value, tuple) else value)[1]
        if refused is not None:
            problems.append(f"its value on {surface_key} is refused by its own rules: {refused.reason()}")
    for model, value in rules.models:
        refused = checked_value(setting_, list(value) if isinstance(value, tuple) else value)[1]
        if refused is not None:
            problems.append(f"its value with {model} is refused by its own rules: {refused.reason()}")
    for old, surface_key in rules.surface_moved_from:
        if surface_key not in declared:
            problems.append(f"surface_moved_from {old!r} names surface {surface_key!r}, which it declares no value on")
    return problems
