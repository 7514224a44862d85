"""Client settings of the language server: initializationOptions and workspace/didChangeConfiguration.

Editors send flat camelCase settings, optionally under a "repomem" key:

    {"repomem": {"strategy": "fragrel", "alpha": 0.5, "topK": 10, "maxNewTokens": 32}}

Each one sets the setting of the config tree whose rules carry its name (`lsp="topK"` in
repomem/config.py; docs/configuration.md lists them) and is checked by the same validator as
`repomem.toml`; an unknown or invalid setting keeps the repository's value (its
`repomem.toml`, else the default) and comes back as a message for `window/showMessage`.
"""

from __future__ import annotations

from typing import Any

from repomem.config import Config, config_from_mapping, with_overrides
from repomem.setting_rules import Setting, settings_of

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
    return options


def layered_settings(initial: Any, changed: Any) -> Any:
    """The settings in force after a workspace/didChangeConfiguration: its repomem keys over the
    initializationOptions'. A change without them (eglot sends `{}` right after connecting, other
    clients their whole configuration for other servers) leaves the initial settings as they were."""
    initial, changed = _own(initial), _own(changed)
    if not isinstance(changed, dict):
        return changed  # not an object: apply_settings reports it
    base = initial if isinstance(initial, dict) else {}
    return {**base, **changed}


def _checked(target: Setting, value: Any) -> tuple[Any, str | None]:
    """`value` as the setting `target` holds it, and why it is invalid (None when it is not), by the
    validator `repomem.toml` goes through."""
    section, key = target.section, target.key
    checked, warnings = config_from_mapping({section: {key: value}})
    if warnings:
        return None, warnings[0].split(";")[0].removeprefix(f"config {section}.{key}").lstrip(": =")
    return getattr(getattr(checked, section), key), None


def settings_in_force(base: Config, options: Any, previous: dict[str, Any] | None = None,
                      ) -> tuple[dict[str, Any], list[str]]:
    """The client settings to apply, by client name and as sent, and one message per rejected one.

    `previous`: this function's last result, the settings in force until now. An invalid value keeps
    the one in force before it (lsp/README.md: "the previous value is kept"; a typo in an editor's
    `endpoint` must not silently switch a working model server back to the embedded model), else
    the repository's value (`base`)."""
    previous = previous or {}
    problems: list[str] = []
    options = _own(options)
    if options is None:
        options = {}
    if not isinstance(options, dict):
        problems.append(f"repomem settings must be an object, got {type(options).__name__}; "
                        f"{'previous settings' if previous else 'defaults'} kept")
        return dict(previous), problems
    in_force: dict[str, Any] = {}
    for name, value in options.items():
        target = CLIENT_SETTINGS.get(name)
        if target is None:
            problems.append(f"unknown repomem setting {name!r} ignored (known: {', '.join(CLIENT_SETTINGS)})")
            continue
        if value is None:
            continue  # an editor's way of saying "not set"
        _, reason = _checked(target, value)
        if reason is None:
            in_force[name] = value
            continue
        if name in previous:
            in_force[name] = previous[name]
            kept = _checked(target, previous[name])[0]
        else:
            kept = getattr(getattr(base, target.section), target.key)
        problems.append(f"repomem setting {name}={value!r} is invalid ({reason}); {kept!r} kept")
    return in_force, problems


def apply_settings(base: Config, options: Any, previous: dict[str, Any] | None = None) -> tuple[Config, list[str]]:
    """`base` (the repository's config) with the client's settings applied, and one message per
    rejected setting (settings_in_force: a rejected one keeps its value in `previous`). The result is
    the config the server's requests run with (for_server_requests)."""
    in_force, problems = settings_in_force(base, options, previous)
    changes: dict[str, dict[str, Any]] = {}
    for name, value in in_force.items():
        target = CLIENT_SETTINGS[name]
        changes.setdefault(target.section, {})[target.key] = _checked(target, value)[0]
    config = with_overrides(base, **changes)
    completion = config.completion
    if not completion.endpoint and not completion.hf_model:  # the embedded model, on this machine
        prompt_tokens = completion.max_prompt_tokens
        if "max_prompt_tokens" not in changes.get("completion", {}) and config.server.embedded_prompt_tokens > 0:
            prompt_tokens = config.server.embedded_prompt_tokens
        file_only_round = changes.get("prompt", {}).get("file_only_round", config.server.embedded_file_only_round)
        config = with_overrides(config, completion={"prefill_chunk_tokens": config.server.prefill_chunk_tokens,
                                                     "reuse_chunk_tokens": config.server.reuse_chunk_tokens,
                                                     "max_prompt_tokens": prompt_tokens},
                                prompt={"file_only_round": file_only_round})
    return for_server_requests(config), problems


def for_server_requests(config: Config) -> Config:
    """A copy of `config` for the language server's own requests: retrieval.time_budget_ms (the
    budget of the CLI and the evaluator, in the repository's file too) replaced there by
    server.retrieval_budget_ms, the server's. Two settings, one meaning each; `config` is unchanged."""
    return with_overrides(config, retrieval={"time_budget_ms": config.server.retrieval_budget_ms})


def backend_changed(old: Config, new: Config) -> bool:
    return any(getattr(getattr(old, s.section), s.key) != getattr(getattr(new, s.section), s.key)
               for s in BACKEND_SETTINGS)

