"""The configuration reference for users (docs/configuration.md), written from the settings' rules.

`configuration_reference(Config)` renders one table per section of the config tree: each setting's
key, type, default, accepted values, what a repository's own repomem.toml may do with it, its
language-server name, whether it is run-only, and its help line. scripts/config_reference.py writes
the file; a test checks that the committed file is what the rules say now.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from repomem.setting_rules import CPU_COUNT, SETTING_CEILING, Setting, SettingRules, is_number, settings_of

REFERENCE_PATH = "docs/configuration.md"

INTRO = f"""# Configuration reference

*Written by `python scripts/config_reference.py` from the settings' declarations in
`repomem/config/sections.py` (each field's `setting(...)`); edit those, not this file.
`tests/unit/test_config_rules.py` checks that it is current.*

Settings are read, each over the one before: the defaults below; the user's config
(`$REPOMEM_CONFIG`, else `$XDG_CONFIG_HOME/repomem/config.toml`, else
`~/.config/repomem/config.toml`); the repository's own `repomem.toml`, within what a repository may
set; the command line (`--set section.key=value` of `eval run`, and the options of each command);
and the editor's client settings (the language server). An unknown key, a value of the wrong type
or one outside its bounds falls back to the default with one warning; nothing fails.

**Surfaces.** The command line (`cli`), the language server (`lsp`) and the evaluator (`eval`, which
reads no settings files: defaults and its `--set`) each resolve one config. A few settings hold
another default on one surface, shown as *on lsp* in the default column; `lsp_embedded` is the
language server while the embedded model runs on this machine (no `model.endpoint`, no
`model.hf_model`). A file may set such a setting for one surface in a sub-table,
`[retrieval.lsp]` / `[completion.lsp_embedded]`: the most specific value wins (a surface's own
over the plain one, whichever file it is in), then the later file; the command line and the
editor's settings win over all. A few settings hold another default with one embedded model,
shown as *with NAME*: what was measured to suit it (the 1.5B's repository form); it applies where
nobody set the setting, on every surface, when that model runs here or through transformers
(`model.embedded_model`, `--model NAME`, `--hf NAME`), never for a model server's model.
`repomem config show [--surface cli|lsp|eval] [--json]` prints every value in force and where it
came from.

- **type**: the TOML type. Every number is also at most {SETTING_CEILING:,}.
- **values**: bounds or choices.
- **a repository**: what a repository's own `repomem.toml` may do with the setting: *yes*; *up to*
  a cap (a higher value is lowered to the cap with one warning; the user's own higher value raises
  the cap); *no* (the setting sends code or keys to a server, or names a path outside the
  repository); *stricter only* (secret protection: add patterns, lower thresholds, keep masking
  on). A repository the user trusts sets everything: list it under
  `[trust] repositories = ["/path/to/repo"]` in the user's config.
- **editor**: the language server's client setting (`initializationOptions` and
  `workspace/didChangeConfiguration`, flat or under `"repomem"`; lsp/README.md).
- **run only**: the setting changes how work is carried out, not what it produces: an index or an
  evaluation's records stay valid when it changes.
- A setting that moved still reads under its old name (shown as *was*), with one warning; the
  language server's `server.retrieval_budget_ms`, `server.embedded_prompt_tokens`,
  `server.embedded_file_only_round`, `server.prefill_chunk_tokens` and `server.reuse_chunk_tokens`
  are read as the surface values they became (*was … on lsp…*).
"""


def toml_value(value: Any) -> str:
    """A default as a repomem.toml would spell it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, tuple):
        return "list of strings"
    return "string"


def accepted_values(rules: SettingRules, default: Any) -> str:
    """Bounds or choices in a few words."""
    if rules.choices:
        return ", ".join(f"`{choice}`" for choice in rules.choices)
    if rules.folder_name:
        return "a folder name: no `/` or `\\`, not `.` or `..`"
    if not is_number(default):
        return ""
    if rules.within is not None:
        return rules.within
    if rules.minimum < 0:
        lowest = f">= {rules.minimum} ({rules.minimum} = {rules.minimum_means})"
    else:
        lowest = "> 0" if rules.positive else ">= 0"
    return lowest if rules.maximum >= SETTING_CEILING else f"{lowest}, <= {rules.maximum:,}"


def repository_may(rules: SettingRules) -> str:
    if rules.repository == "not a repository":
        return "no"
    if rules.repository == "stricter only":
        return "stricter only"
    if rules.repository_cap is None:
        return "yes"
    cap = "the CPU count" if rules.repository_cap == CPU_COUNT else f"{rules.repository_cap:,}"
    return f"up to {cap}" + (" (0, no limit, counts as above)" if rules.zero_is_unlimited else "")


def cell(text: str) -> str:
    return text.replace("|", "\\|")


# A list default longer than this is written below its section's table, as TOML.
LONGEST_LIST_IN_A_CELL = 3


def default_cell(setting: Setting) -> str:
    if isinstance(setting.default, tuple) and len(setting.default) > LONGEST_LIST_IN_A_CELL:
        return f"{len(setting.default)} entries, below"
    return f"`{toml_value(setting.default)}`" + "".join(
        f"; on {surface_key}: `{toml_value(value)}`" for surface_key, value in setting.rules.surfaces) + "".join(
        f"; with {model}: `{toml_value(value)}`" for model, value in setting.rules.models)


def wrapped_items(items: tuple[str, ...], width: int = 100) -> list[str]:
    """A TOML array's items, as many to a line as fit in `width` characters."""
    lines = ["   "]
    for item in items:
        text = f" {toml_value(item)},"
        if len(lines[-1]) + len(text) > width and lines[-1].strip():
            lines.append("   ")
        lines[-1] += text
    return lines


def setting_row(setting: Setting) -> str:
    rules = setting.rules
    key = f"`{setting.key}`" + "".join(f" (was `{old}`)" for old in rules.moved_from) + "".join(
        f" (was `{old}` on {surface_key})" for old, surface_key in rules.surface_moved_from)
    columns = [key, type_name(setting.default), default_cell(setting),
               accepted_values(rules, setting.default), repository_may(rules),
               f"`{rules.lsp}`" if rules.lsp else "", "yes" if rules.run_only else "", rules.help]
    return "| " + " | ".join(cell(column) for column in columns) + " |"


def configuration_reference(root: type) -> str:
    """docs/configuration.md for the config tree `root` (repomem.config.Config)."""
    lines = [INTRO]
    settings = settings_of(root)
    for section in dataclasses.fields(root):  # type: ignore[arg-type]
        lines.append(f"## [{section.name}]\n")
        section_type = section.default_factory  # type: ignore[misc]
        summary = " ".join((section_type.__doc__ or "").split()) if section_type.__doc__ else ""
        if summary and not summary.startswith(section_type.__name__ + "("):  # a dataclass's generated doc
            lines.append(summary + "\n")
        lines.append("| key | type | default | values | a repository | editor | run only | what it does |")
        lines.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
        lines += [setting_row(s) for s in settings if s.section == section.name]
        lines.append("")
        long_lists = [s for s in settings if s.section == section.name and isinstance(s.default, tuple)
                      and len(s.default) > LONGEST_LIST_IN_A_CELL]
        if long_lists:
            lines += ["The defaults of its longer lists:", "", "```toml", f"[{section.name}]"]
            for setting in long_lists:
                lines.append(f"{setting.key} = [")
                lines += wrapped_items(setting.default)
                lines.append("]")
            lines += ["```", ""]
    return "\n".join(lines)
