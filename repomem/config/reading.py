"""Settings read, trusted and resolved into one Config per surface.

The user's config, then the repository's ``repomem.toml`` over it (a repository may only make
things stricter unless trusted), then the command line or the editor's settings: each surface (the
CLI, the language server, the evaluator) resolves one Config from the settings read
(read_settings, resolved_config); a Config holds plain values, the ones that surface runs with.
Problems are ConfigProblem values, worded only at the edges (problem_lines).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repomem.config.sections import EMBEDDED_MODEL_CHOICES, Config
from repomem.regular_files import read_regular
from repomem.setting_rules import (
    CPU_COUNT,
    NOTHING_KEPT,
    SURFACE_KEYS,
    ConfigProblem,
    Setting,
    checked_value,
    coerce,
    is_number,
    resolved_tree,
    settings_by_name,
    settings_of,
    tree_from_mapping,
    value_problem,
    with_current_names,
)

CONFIG_FILE_NAME = "repomem.toml"


def runs_embedded(config: Config) -> bool:
    """Whether the embedded model runs on this machine (llama.cpp: no model server, no checkpoint):
    then a surface's "_embedded" values apply (a CPU affords less than a model server)."""
    return not config.model.endpoint and not config.model.hf_model


def measured_model(config: Config) -> str:
    """The model whose measured defaults apply (SettingRules.models): an embedded model, run by
    llama.cpp here (`model.embedded_model`, or `model.model_path` naming it) or read by transformers
    (`model.hf_model` naming it); "" for a model server's model or another file or checkpoint, whose
    levers were not measured."""
    if config.model.endpoint:
        return ""
    for named in (config.model.hf_model, config.model.model_path):  # a file, or an embedded model's name
        if named:
            return named if named in EMBEDDED_MODEL_CHOICES else ""
    return config.model.embedded_model


def model_defaults(model: str) -> dict[str, dict[str, Any]]:
    """The settings whose default differs with `model` (SettingRules.models), as with_overrides
    takes them: section -> key -> value."""
    sections: dict[str, dict[str, Any]] = {}
    for setting_ in settings_of(Config):
        values = dict(setting_.rules.models)
        if model in values:
            sections.setdefault(setting_.section, {})[setting_.key] = values[model]
    return sections


def config_from_mapping(data: dict[str, Any], surface: str = "cli") -> tuple[Config, list[ConfigProblem]]:
    """Build a Config for `surface` from a nested mapping; bad entries fall back to defaults, each
    with a problem."""
    return tree_from_mapping(Config, data, surface, runs_embedded, measured_model)


def default_config(surface: str = "cli") -> Config:
    """What `surface` runs with when nobody set anything: Config()'s defaults, the surface's own
    and those measured for the default embedded model (`completion.style` with the 1.5B)."""
    return config_from_mapping({}, surface)[0]


TRUST_SECTION = "trust"


def _elsewhere() -> str:
    """Where a user sets what a repository may not; said in each refusal."""
    return (f"set it in {user_config_path()} or on the command line, or trust the repository there under "
            f"[{TRUST_SECTION}]")


def _repository_cap(user_section: dict[str, Any], setting_: Setting, asked: Any,
                    written: str) -> tuple[Any, ConfigProblem | None]:
    """`asked` (a repository's value of a setting with a repository_cap), or the cap with a problem
    when it is above (the user's own value, where higher, is the cap); a value of the wrong type is
    left for the resolution to report."""
    if not is_number(asked):
        return asked, None
    cap = setting_.rules.repository_cap
    if cap == CPU_COUNT:
        cap = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    users = user_section.get(setting_.key)
    if is_number(users) and users > cap:
        cap = users
    unlimited = asked == 0 and setting_.rules.zero_is_unlimited
    if not unlimited and not asked > cap:  # NaN is reported by the resolution
        return asked, None
    return cap, ConfigProblem(written, "capped", value=asked, kept=cap, source=CONFIG_FILE_NAME, message=(
        f"{'(no limit) ' if unlimited else ''}is more than a repository's own settings may ask for ({cap:,}); "
        f"{cap:,} used ({_elsewhere()})"))


def user_config_path() -> Path:
    """REPOMEM_CONFIG, else $XDG_CONFIG_HOME/repomem/config.toml, else ~/.config/repomem/config.toml."""
    if os.environ.get("REPOMEM_CONFIG"):
        return Path(os.environ["REPOMEM_CONFIG"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "repomem" / "config.toml"


def _read_toml(path: Path, label: str) -> tuple[dict[str, Any], list[ConfigProblem]]:
    """A settings file's mapping, settings that moved read under their current names."""
    if not path.exists():
        return {}, []
    if not path.is_file():
        return {}, [ConfigProblem("", "unreadable", f"{label} is not a regular file")]
    try:
        text = read_regular(path).decode("utf-8")
        data = tomllib.loads(text)
    except RecursionError:
        return {}, [ConfigProblem("", "unreadable", f"{deepest_key(text) or 'a value'} is nested too deeply",
                                  source=label)]
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        reason = str(error).splitlines()[0] if str(error) else error.__class__.__name__
        return {}, [ConfigProblem("", "unreadable", reason, source=label)]
    return with_current_names(Config, data, label)


def deepest_key(text: str) -> str:
    """The dotted key (its table's header, then the key at the start of its line) whose value nests
    brackets deepest in TOML `text`: tomllib parses nesting by recursion, and its RecursionError
    ("maximum recursion depth exceeded") named no key. A rough scan, run only once tomllib failed:
    strings and comments are skipped, nothing else is checked. Iterative, whatever the depth."""
    header = key = deepest = ""
    depth = most = 0
    position, end = 0, len(text)
    line_start = True
    while position < end:
        char = text[position]
        if char in "\"'":
            quote = char * 3 if text.startswith(char * 3, position) else char
            position += len(quote)
            while position < end and not text.startswith(quote, position):
                if len(quote) == 1 and text[position] == "\n":
                    break  # unterminated: the line ends it
                position += 2 if char == '"' and text[position] == "\\" else 1
            else:
                position += len(quote)
            line_start = False
            continue
        if char == "#" or (line_start and depth == 0 and char not in " \t\r\n"):
            line_end = text.find("\n", position)
            line = text[position: end if line_end < 0 else line_end]
            if char == "[":  # a [table] or [[array of tables]] header: its line holds nothing else
                header, key = line.split("#")[0].strip().strip("[]").strip(), ""
                position += len(line)
                continue
            if char != "#":
                key = line.split("=")[0].strip()
                line_start = False
                continue
            position += len(line)
            continue
        if char == "\n":
            line_start = True
        elif char in "[{":
            depth += 1
            if depth > most:
                most, deepest = depth, ".".join(part for part in (header, key) if part)
        elif char in "]}":
            depth = max(depth - 1, 0)
        position += 1
    return deepest


def _trusted(user: dict[str, Any], repo_root: Path) -> bool:
    listed = user.get(TRUST_SECTION, {}).get("repositories", []) if isinstance(user.get(TRUST_SECTION), dict) else []
    if not isinstance(listed, list):
        return False
    root = repo_root.resolve()
    return any(isinstance(entry, str) and Path(entry).expanduser().resolve() == root for entry in listed)


def _stricter_only(user_section: dict[str, Any], setting_: Setting, asked: Any) -> tuple[Any, str | None]:
    """The value a "stricter only" setting takes when a repository asks for `asked` over the user's
    setting or the default: patterns added, thresholds lowered, masking kept on. Returns it (None:
    leave the key as the user has it) and None, "weaker" (the repository asked for less protection)
    or why the asked value is unusable."""
    default = setting_.default
    try:
        asked = coerce(asked, default)
    except TypeError as error:
        return None, str(error)
    problem = value_problem(setting_.rules, asked)
    if problem is not None:
        return None, f"{asked!r} {problem}"
    try:
        current = coerce(user_section.get(setting_.key, default), default)
    except TypeError:
        current = default  # the user's own value is unusable: the resolution falls back to this
    if isinstance(default, tuple):
        return list(dict.fromkeys((*current, *asked))), None
    if isinstance(default, bool):
        return current or asked, "weaker" if current and not asked else None
    return min(current, asked), "weaker" if asked > current else None


def load_config(repo_root: Path | None, surface: str = "cli",
                overrides: dict[str, Any] | None = None) -> tuple[Config, list[str]]:
    """read_config's config for `surface`, its problems as lines for a person (at most
    MAX_WARNINGS and a count): for callers that print them (RepoService.open's warnings).
    `overrides` ("section.key" -> a checked value): the command line's, over every settings file."""
    resolved = resolved_config(read_settings(repo_root), surface, overrides)
    return resolved.config, problem_lines(resolved.problems)


@dataclass(frozen=True)
class SettingsRead:
    """The settings files of one repository merged, before a surface resolves them: the user's
    config, then the repository's repomem.toml within what a repository may set."""

    merged: dict[str, Any]  # as TOML nests it: section -> key -> value, section -> SURFACE -> key -> value
    origins: dict[str, str]  # "section.key" or "section.SURFACE.key" -> the file whose value it is
    problems: list[ConfigProblem]


@dataclass(frozen=True)
class ResolvedConfig:
    """The config one surface runs with, what was wrong with the settings read, and where each
    setting's value came from ("section.key" -> "default", "surface default (lsp_embedded)", a
    file's path, "command line", "editor setting")."""

    config: Config
    problems: list[ConfigProblem]
    sources: dict[str, str]
    surface: str
    surface_key: str  # the most specific surface key that applied: "lsp_embedded", "cli", ...


def _entry_names(mapping: dict[str, Any]) -> list[str]:
    """The dotted names of a settings mapping's entries: section.key and section.SURFACE.key, and
    each section (or key outside any section) by itself: a problem about a whole section (an
    unknown one, one that is no table) names the file it was read from too."""
    names = []
    for section, values in mapping.items():
        names.append(section)
        if not isinstance(values, dict):
            continue
        for key, value in values.items():
            if key in SURFACE_KEYS and isinstance(value, dict):
                names += [f"{section}.{key}.{inner}" for inner in value]
            else:
                names.append(f"{section}.{key}")
    return names


def read_settings(repo_root: Path | None) -> SettingsRead:
    """The user's config (user_config_path), then the repository's ``repomem.toml`` over it, minus
    the settings a repository may not set unless the user trusts it (repository="not a repository"),
    with its secret protection settings counted only where they are stricter ("stricter only") and
    its resource settings lowered to their repository_cap. A surface's values ([section.lsp]) obey
    the same rules as the plain ones. No `repo_root`: the user's config alone."""
    user_path = user_config_path()
    user, problems = _read_toml(user_path, str(user_path))
    if os.environ.get("REPOMEM_CONFIG") and not user_path.exists():
        problems.append(ConfigProblem("", "unreadable", f"REPOMEM_CONFIG names {user_path}, which does not exist"))
    repo_path = repo_root / CONFIG_FILE_NAME if repo_root is not None else Path()
    repo: dict[str, Any] = {}
    if repo_root is not None:
        repo, repo_problems = _read_toml(repo_path, CONFIG_FILE_NAME)
        problems += repo_problems
    trusted = repo_root is not None and _trusted(user, repo_root)
    by_name = settings_by_name(Config)
    merged: dict[str, Any] = {name: _copied(value) for name, value in user.items() if name != TRUST_SECTION}
    origins = dict.fromkeys(_entry_names(merged), str(user_path))
    weakened: list[str] = []  # the repository's settings that would lower secret protection, said once

    def admitted(section: str, key: str, value: Any, users: dict[str, Any], written: str) -> Any:
        """The repository's `value` for section.key as the user's settings let it be, or REFUSED."""
        setting_ = by_name.get((section, key))
        if setting_ is None:  # unknown keys are the resolution's to report
            return value
        users_value = users.get(key, NOTHING_KEPT)
        if users_value is not NOTHING_KEPT and checked_value(setting_, users_value)[1] is None:
            _, problem = checked_value(setting_, value, written, users_value, CONFIG_FILE_NAME)
            if problem is not None:  # a bad value over a good one of the user's: the user's stays
                problems.append(dataclasses.replace(problem, kept_is="your"))
                return REFUSED
        if trusted:
            return value
        if setting_.rules.repository == "not a repository":
            problems.append(ConfigProblem(written, "not for a repository", source=CONFIG_FILE_NAME, message=(
                "a repository's own settings may not send data elsewhere, name paths outside it or choose how "
                f"this machine runs the model ({_elsewhere()})")))
            return REFUSED
        if setting_.rules.repository == "stricter only":
            value, refused = _stricter_only(users, setting_, value)
            if refused == "weaker":
                weakened.append(written)
            elif refused is not None:
                problems.append(ConfigProblem(written, "stricter only", refused, source=CONFIG_FILE_NAME))
            if value is None:
                return REFUSED
        if setting_.rules.repository_cap is not None:
            value, capped = _repository_cap(users, setting_, value, written)
            if capped is not None:
                problems.append(capped)
        return value

    for section, values in repo.items():
        current = merged.get(section, {})
        if not isinstance(values, dict) or not isinstance(current, dict):
            merged[section] = values
            origins.update(dict.fromkeys(_entry_names({section: values}), str(repo_path)))
            continue
        plain_users = {key: value for key, value in current.items() if key not in SURFACE_KEYS}
        for key, value in values.items():
            if key in SURFACE_KEYS and isinstance(value, dict) and isinstance(current.get(key, {}), dict):
                users = {**plain_users, **current.get(key, {})}  # what the user has on that surface
                for inner, inner_value in value.items():
                    kept = admitted(section, inner, inner_value, users, f"{section}.{key}.{inner}")
                    if kept is not REFUSED:
                        current.setdefault(key, {})[inner] = kept
                        origins[f"{section}.{key}.{inner}"] = str(repo_path)
                continue
            kept = admitted(section, key, value, plain_users, f"{section}.{key}")
            if kept is not REFUSED:
                current[key] = kept
                origins[f"{section}.{key}"] = str(repo_path)
        if section not in user:
            origins[section] = str(repo_path)
        merged[section] = current
    if weakened:
        problems.append(ConfigProblem(", ".join(weakened), "weaker", source=CONFIG_FILE_NAME, message=(
            "a repository's own settings may only add secret file patterns, lower the masking thresholds or keep "
            f"masking on; the stricter value was kept ({_elsewhere()})")))
    return SettingsRead(merged, origins, problems)


REFUSED = object()  # read_settings: a repository's value not admitted


def settings_given(config: Config, source: str = "given") -> SettingsRead:
    """A Config already built (tests, a caller's own) as settings read, its values that differ
    from the defaults set as plain values: another surface resolves it as it would the file that
    set them (the surface defaults of the language server still apply to it)."""
    merged: dict[str, Any] = {}
    for setting_ in settings_of(Config):
        value = getattr(getattr(config, setting_.section), setting_.key)
        if value != setting_.default:
            merged.setdefault(setting_.section, {})[setting_.key] = list(value) if isinstance(value, tuple) else value
    return SettingsRead(merged, dict.fromkeys(_entry_names(merged), source), [])


def _copied(value: Any) -> Any:
    """A settings table copied two levels deep (its surface tables too), so merging leaves the
    mapping read from the file as it was."""
    if not isinstance(value, dict):
        return value
    return {key: dict(inner) if isinstance(inner, dict) else inner for key, inner in value.items()}


def resolved_config(settings: SettingsRead, surface: str = "cli", overrides: dict[str, Any] | None = None,
                    overrides_source: str = "command line") -> ResolvedConfig:
    """The config `surface` runs with, from the settings read (SettingsRead) and `overrides`
    ("section.key" -> a checked value: the command line's, the editor's), which win over all."""
    resolved = resolved_tree(Config, settings.merged, surface, runs_embedded, overrides, measured_model)
    sources: dict[str, str] = {}
    for name, where in resolved.chosen.items():
        section, _, key = name.partition(".")
        if where == "override":
            sources[name] = overrides_source
        elif where == "set":
            sources[name] = settings.origins.get(name, "set")
        elif where.startswith("set for "):
            surface_key = where.removeprefix("set for ")
            sources[name] = f"{settings.origins.get(f'{section}.{surface_key}.{key}', 'set')} [{section}.{surface_key}]"
        else:
            sources[name] = where
    config, inconsistent = _consistent(resolved.tree)
    found = [problem if problem.source else dataclasses.replace(problem, source=settings.origins.get(problem.key, ""))
             for problem in resolved.problems + inconsistent]
    return ResolvedConfig(config, settings.problems + found, sources, surface, resolved.surface_key)


def _consistent(config: Config) -> tuple[Config, list[ConfigProblem]]:
    """`config` with settings that contradict each other or their use made to agree, and a problem
    for each: a stride longer than the window left lines between windows that retrieval never saw;
    a relative index.cache_dir was read from each command's own folder, one index per folder."""
    problems = []
    fragments = config.fragments
    if fragments.stride_lines > fragments.window_lines:
        problems.append(ConfigProblem(
            "fragments.stride_lines", "refused value", f"is longer than fragments.window_lines "
            f"({fragments.window_lines}): the lines between windows would never be retrieved",
            value=fragments.stride_lines, kept=fragments.window_lines, kept_is=""))
        config = with_overrides(config, fragments={"stride_lines": fragments.window_lines})
    cache_dir = config.index.cache_dir
    if cache_dir and not Path(cache_dir).expanduser().is_absolute():
        problems.append(ConfigProblem("index.cache_dir", "refused value", "must be an absolute path (or start "
                                      "with ~): a relative one is read from each command's folder",
                                      value=cache_dir, kept=""))
        config = with_overrides(config, index={"cache_dir": ""})
    return config, problems


def read_config(repo_root: Path, surface: str = "cli") -> ResolvedConfig:
    """The config `surface` ("cli", "lsp", "eval") runs with in the repository at `repo_root`: the
    settings files read (read_settings), resolved for that surface."""
    return resolved_config(read_settings(repo_root), surface)


MAX_WARNINGS = 20  # config warnings shown; the rest are counted in one line


def problem_lines(problems: Iterable[ConfigProblem], limit: int = MAX_WARNINGS, outcome: bool = True) -> list[str]:
    """The problems as lines for a person: the first `limit` and one line counting the rest (a
    repomem.toml with 100,000 unknown sections printed 100,000 lines, and sent as many
    window/showMessage)."""
    problems = list(problems)
    lines = [problem.render(outcome) for problem in problems[:limit]]
    if len(problems) > limit:
        lines.append(f"and {len(problems) - limit:,} more config warnings")
    return lines


def with_overrides(config: Config, **sections: dict[str, Any]) -> Config:
    """Return `config` with some fields replaced, e.g. ``retrieval={"alpha": 0.0}``."""
    replaced = {
        name: dataclasses.replace(getattr(config, name), **values) for name, values in sections.items()
    }
    return dataclasses.replace(config, **replaced)


def assignment_overrides(assignments: Iterable[str]) -> tuple[dict[str, Any], list[ConfigProblem],
                                                          list[ConfigProblem]]:
    """"section.key=value" assignments (values in TOML syntax; a bare word is a string), each checked
    as repomem.toml's keys are: the values ("section.key" -> the value as the setting holds it), the
    problems, one per bad assignment (it stops the command: render them without an outcome), and
    one notice (kind "moved") per setting named where it used to live, applied where it lives now."""
    problems: list[ConfigProblem] = []
    mapping: dict[str, dict[str, Any]] = {}
    for assignment in assignments:
        name, sep, raw = assignment.partition("=")
        section, dot, key = name.strip().partition(".")
        if not sep or not dot or not key:
            problems.append(ConfigProblem(name.strip(), "bad assignment", "expected section.key=value",
                                          value=assignment))
            continue
        try:
            value = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw.strip()
        except RecursionError:
            problems.append(ConfigProblem(name.strip(), "bad assignment",
                                          f"{name.strip()}: the value is nested too deeply"))
            continue
        mapping.setdefault(section, {})[key] = value
    mapping, notices = with_current_names(Config, mapping, "--set")
    checked, refused = config_from_mapping(mapping)
    problems.extend(refused)
    if problems:
        return {}, problems, notices
    return ({f"{section}.{key}": getattr(getattr(checked, section), key) for section, keys in mapping.items()
             for key in keys}, problems, notices)


def with_assignments(config: Config, assignments: list[str] | tuple[str, ...],
                     notices: list[ConfigProblem] | None = None) -> tuple[Config, list[ConfigProblem]]:
    """`config` with "section.key=value" assignments applied (assignment_overrides), or `config`
    and the problems when one is refused. Moved names go to `notices`."""
    values, problems, moved = assignment_overrides(assignments)
    if notices is not None:
        notices.extend(moved)
    if problems:
        return config, problems
    sections: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        section, _, key = name.partition(".")
        sections.setdefault(section, {})[key] = value
    return with_overrides(config, **sections), []


def settings_digest(config: Config, sections: Iterable[str] | None = None, digest_size: int = 16) -> str:
    """A hex hash of the settings of `sections` (default: every section not wholly run-only),
    defaults included, run-only settings left out: a different thread count neither rebuilds an
    index nor re-runs an evaluation."""
    names = [f.name for f in dataclasses.fields(config)] if sections is None else list(sections)
    run_only = {(s.section, s.key) for s in settings_of(Config) if s.rules.run_only}
    chosen: dict[str, dict[str, Any]] = {}
    for name in names:
        values = dataclasses.asdict(getattr(config, name))
        if values and all((name, key) in run_only for key in values):
            continue  # where the index lives, how the server answers: the whole section is run-only
        kept = {key: value for key, value in values.items() if (name, key) not in run_only}
        chosen.setdefault(getattr(getattr(config, name), "DIGESTED_AS", name), {}).update(kept)
    return hashlib.blake2b(json.dumps(chosen, sort_keys=True).encode(), digest_size=digest_size).hexdigest()
