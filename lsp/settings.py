"""Client settings of the language server: initializationOptions and workspace/didChangeConfiguration.

Editors send flat camelCase settings, optionally under a "repomem" key:

    {"repomem": {"strategy": "fragrel", "alpha": 0.5, "topK": 10, "maxNewTokens": 32}}

Each one sets the setting of the config tree whose rules carry its name (`lsp="topK"` in
repomem/config/sections.py; docs/configuration.md lists them) and is checked by the same validator as
`repomem.toml` (checked_value); an unknown or invalid setting keeps the value in force before it
and comes back as a ConfigProblem, which `client_problem_line` words for `window/showMessage`.

The config a request runs with is resolved once, for the "lsp" surface (its "lsp_embedded" values
when the embedded model runs), from the settings files with the client's settings over them.
"""

from __future__ import annotations

from typing import Any

from repomem.config import Config, SettingsRead, resolved_config, settings_given
from repomem.setting_rules import NOTHING_KEPT, ConfigProblem, Setting, checked_value, settings_of

# Client setting name -> the setting it sets: every setting whose rules name it (lsp="topK").
CLIENT_SETTINGS: dict[str, Setting] = {s.rules.lsp: s for s in settings_of(Config) if s.rules.lsp}
# Settings whose change means opening another model backend.
BACKEND_SETTINGS = tuple(s for s in settings_of(Config) if s.rules.reopens_backend)


def _own(options: Any) -> Any:
    """repomem's settings: the object under a "repomem" key, else the object as sent (flat). An
    empty value under the key is no settings: Neovim's JSON encoder writes an empty Lua table as
    `[]` (`settings = { repomem = {} }` arrives as `{"repomem": []}`), and "repomem" is never a
    setting's name."""
    if isinstance(options, dict) and "repomem" in options:
        own = options["repomem"]
        if isinstance(own, dict):
            return own
        if own is None or own == [] or own == "":
            return {}
        return own  # not an object: said as such (it was "unknown repomem setting 'repomem'")
    return options


def settings_after_change(in_force: Any, changed: Any) -> Any:
    """The settings in force after a workspace/didChangeConfiguration, `in_force` before it. One that carries repomem's
    section (or its keys flat) carries all of them, as every shipped set-up sends them: a key it no
    longer holds was unset by the user and goes back to the settings files' value (lsp/README.md;
    laid over the initializationOptions, a removed `endpoint` kept sending code to that server until
    a restart). A change without them (eglot sends `{}` right after connecting, other clients their
    whole configuration for other servers) leaves the settings as they were."""
    if changed is None or (isinstance(changed, dict) and "repomem" not in changed
                           and not any(name in CLIENT_SETTINGS for name in changed)):
        # `{"settings": null}`, or other servers' sections (`{"pyright": ..., "python": ...}`):
        # nothing of repomem's changed (the first dropped every initialization option, the
        # endpoint too; the second raised a warning per section).
        return _own(in_force)
    return _own(changed)  # not an object: apply_settings reports it


def settings_in_force(base: Config, options: Any, previous: dict[str, Any] | None = None,
                      ) -> tuple[dict[str, Any], list[ConfigProblem]]:
    """The client settings to apply, by client name and as sent, and one problem per rejected one
    (its key the client name).

    `previous`: this function's last result, the settings in force until now. An invalid value keeps
    the one in force before it (lsp/README.md: "the previous value is kept"; a typo in an editor's
    `endpoint` must not silently switch a working model server back to the embedded model), else
    the value the settings files give (`base`, resolved for the language server)."""
    previous = previous or {}
    problems: list[ConfigProblem] = []
    options = _own(options)
    if options is None:
        options = {}
    if not isinstance(options, dict):
        problems.append(ConfigProblem("", "not a table", value=options,
                                      message=f"{'previous settings' if previous else 'defaults'} kept"))
        return dict(previous), problems
    in_force: dict[str, Any] = {}
    for name, value in options.items():
        target = CLIENT_SETTINGS.get(name)
        if target is None:
            problems.append(ConfigProblem(name, "unknown key", value=value))
            continue
        if value is None:
            continue  # an editor's way of saying "not set"
        _, refused = checked_value(target, value, name)
        if refused is None:
            in_force[name] = value
            continue
        if name in previous:
            in_force[name] = previous[name]
            kept = checked_value(target, previous[name])[0]
        else:
            kept = getattr(getattr(base, target.section), target.key)
        problems.append(ConfigProblem(name, refused.kind, refused.message, value=value, kept=kept))
    return in_force, problems


def client_problem_line(problem: ConfigProblem) -> str:
    """A problem with the client's settings as the editor's user reads it (window/showMessage)."""
    if problem.kind == "not a table":
        return f"repomem settings must be an object, got {type(problem.value).__name__}; {problem.message}"
    if problem.kind == "unknown key":
        return f"unknown repomem setting {problem.key!r} ignored (known: {', '.join(CLIENT_SETTINGS)})"
    reason = problem.message if problem.kind == "wrong type" else f"{problem.value!r} {problem.message}"
    kept = "" if problem.kept is NOTHING_KEPT else f"; {problem.kept!r} kept"
    return f"repomem setting {problem.key}={problem.value!r} is invalid ({reason}){kept}"


def client_overrides(in_force: dict[str, Any]) -> dict[str, Any]:
    """The client's settings in force (settings_in_force) by the setting they set: "section.key"
    -> the value as that setting holds it."""
    return {CLIENT_SETTINGS[name].name: checked_value(CLIENT_SETTINGS[name], value)[0]
            for name, value in in_force.items()}


def session_config(base: SettingsRead | Config, options: Any, previous: dict[str, Any] | None = None,
                   ) -> tuple[Config, dict[str, Any], list[ConfigProblem]]:
    """The one config the language server's requests run with: the settings files (`base`: read,
    or a Config already built) resolved for the "lsp" surface with the client's settings over
    them; the client's settings in force (settings_in_force, for the next change) and one
    problem per rejected one."""
    read = base if isinstance(base, SettingsRead) else settings_given(base)
    from_files = resolved_config(read, "lsp").config
    in_force, problems = settings_in_force(from_files, options, previous)
    return resolved_config(read, "lsp", client_overrides(in_force), "editor setting").config, in_force, problems


def apply_settings(base: SettingsRead | Config, options: Any, previous: dict[str, Any] | None = None,
                   ) -> tuple[Config, list[ConfigProblem]]:
    """session_config's config and problems."""
    config, _, problems = session_config(base, options, previous)
    return config, problems


def backend_changed(old: Config, new: Config) -> bool:
    return any(getattr(getattr(old, s.section), s.key) != getattr(getattr(new, s.section), s.key)
               for s in BACKEND_SETTINGS)
