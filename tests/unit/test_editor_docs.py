"""The editor set-ups as documented (lsp/README.md) against the shipped files and the server: each
setting name the docs and the set-ups' examples give is one the server knows, each variable or
function a snippet names is in the file it names, and the Vim steps include what Vim needs."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from repomem.lsp.settings import CLIENT_SETTINGS

ROOT = Path(__file__).resolve().parents[2]
LSP_README = (ROOT / "lsp" / "README.md").read_text()


def _settings_table_names() -> set[str]:
    table = LSP_README.split("### Settings", 1)[1].split("### Commands", 1)[0]
    names: set[str] = set()
    for row in table.splitlines():
        if row.startswith("| `"):
            names |= set(re.findall(r"`(\w+)`", row.split("|")[1]))
    return names


def test_the_settings_table_lists_every_client_setting_and_no_other():
    assert _settings_table_names() == set(CLIENT_SETTINGS)


def test_the_set_ups_example_settings_are_server_settings():
    helix = tomllib.loads((ROOT / "lsp" / "helix" / "languages.toml").read_text())
    used = set(helix["language-server"]["repomem"]["config"]["repomem"])
    package = json.loads((ROOT / "lsp" / "vscode" / "package.json").read_text())
    client_own = {"command", "trace.server"}  # the program and the message trace: never sent
    used |= {key.split(".", 1)[1] for key in package["contributes"]["configuration"]["properties"]} - client_own
    lua = (ROOT / "lsp" / "nvim" / "repomem.lua").read_text()
    used |= set(re.findall(r"^--\s+(\w+) = ", lua, re.M))  # the keys listed above `defaults`
    used |= set(re.findall(r"repomem_settings = \{ (\w+) =", lua))
    used |= set(re.findall(r"repomem_settings = \{'(\w+)'", (ROOT / "lsp" / "vim" / "repomem.vim").read_text()))
    for el in ("repomem.el", "repomem-lsp-mode.el"):
        used |= set(re.findall(r":(\w+) ", " ".join(re.findall(r"repomem-settings '\(([^)]*)\)",
                                                                 (ROOT / "lsp" / "emacs" / el).read_text()))))
    assert {"topK", "maxNewTokens", "debounceMs", "endpoint"} <= used  # the patterns still find them
    assert used - set(CLIENT_SETTINGS) == set()


def test_the_names_the_readme_gives_are_in_the_shipped_files():
    lua = (ROOT / "lsp" / "nvim" / "repomem.lua").read_text()
    vim = (ROOT / "lsp" / "vim" / "repomem.vim").read_text()
    el = (ROOT / "lsp" / "emacs" / "repomem.el").read_text()
    lsp_mode = (ROOT / "lsp" / "emacs" / "repomem-lsp-mode.el").read_text()
    for name in re.findall(r"`vim\.g\.(\w+)", LSP_README):
        assert f"vim.g.{name}" in lua, name
    for name in re.findall(r"`g:(\w+)`", LSP_README):
        assert f"get(g:, '{name}'" in vim, name
    assert "RepomemExplain" in lua and "RepomemExplain" in vim
    assert "(defun repomem-explain ()" in el
    assert "(defcustom repomem-server-command " in el and "(defcustom repomem-server-command " in lsp_mode
    shared = (ROOT / "lsp" / "emacs" / "repomem-settings.el").read_text()
    assert "(defcustom repomem-settings " in shared
    assert "(require 'repomem-settings" in el and "(require 'repomem-settings" in lsp_mode
    for path in re.findall(r"\]\(((?:nvim|vim|emacs|vscode|helix)/[^)]*)\)", LSP_README):
        assert (ROOT / "lsp" / path).exists(), path


def test_the_vim_steps_turn_file_types_on():
    """A vimrc of one's own stops Vim loading defaults.vim, which turned file types on; without
    them no buffer is a Python buffer and repomem never starts (the first vimrc the README's steps
    gave)."""
    vim_steps = LSP_README.split("- **Vim with ALE**", 1)[1].split("\n- **", 1)[0]
    assert "packadd! ale" in vim_steps and "filetype plugin on" in vim_steps
    assert "filetype plugin on" in (ROOT / "lsp" / "vim" / "repomem.vim").read_text()


# -- each set-up's own list of the settings, against the server's table ------------------------------------

def _lsp_defaults() -> dict[str, object]:
    """Each client setting's default as the language server runs (the `lsp` surface: `repomem config
    show --surface lsp`), None where it depends on the model that runs (the embedded model's own
    `lsp_embedded` value, or a value for the 1.5B): the set-ups leave those to the server."""
    from repomem.config import Config, resolved_config, settings_given

    base = settings_given(Config())

    def values(overrides: dict[str, object]) -> dict[str, object]:
        config = resolved_config(base, "lsp", overrides).config
        return {name: getattr(getattr(config, s.section), s.key) for name, s in CLIENT_SETTINGS.items()}

    embedded = values({})
    served = values({"model.endpoint": "http://127.0.0.1:8000"})
    larger = values({"model.embedded_model": "qwen2.5-coder-1.5b"})
    moved_by_others = {"endpoint", "embeddedModel"}  # the ones the three runs set
    return {name: value if name in moved_by_others or value == served[name] == larger[name] else None
            for name, value in embedded.items()}


LSP_DEFAULTS = _lsp_defaults()


def _json_type(default: object) -> str:
    return ("boolean" if isinstance(default, bool) else "integer" if isinstance(default, int)
            else "number" if isinstance(default, float) else "string")


def test_the_lsp_defaults_are_what_the_readme_says_depends_on_the_model():
    assert {name for name, value in LSP_DEFAULTS.items() if value is None} == {
        "maxPromptTokens", "deadlineSeconds", "flashAttention", "reuseChunkTokens", "fileOnlyRound"}
    assert LSP_DEFAULTS["retrievalBudgetMs"] == 50 and LSP_DEFAULTS["embeddedModel"] == "qwen2.5-coder-0.5b"


def test_the_vscode_extension_offers_every_client_setting_as_the_server_takes_it():
    """VS Code shows (and the extension sends) only the settings package.json declares: it offered 9
    of the server's settings, so `warmAfterMs`, `embeddedModel`, `indexNice`, ... could not be set
    from VS Code at all. Each is declared with a description, the server's type, its default on the
    language server (null where the model that runs decides), its values (enum) and its bounds;
    what a repository may not set is the user's own ("scope": "machine")."""
    from repomem.setting_rules import SETTING_CEILING

    package = json.loads((ROOT / "lsp" / "vscode" / "package.json").read_text())
    properties = package["contributes"]["configuration"]["properties"]
    client_own = {"command", "trace.server"}
    assert {key.removeprefix("repomem.") for key in properties} - client_own == set(CLIENT_SETTINGS)
    for name, target in CLIENT_SETTINGS.items():
        declared = properties[f"repomem.{name}"]
        rules = target.rules
        assert declared.get("description") or declared.get("markdownDescription"), name
        expected = _json_type(target.default)
        default = LSP_DEFAULTS[name]
        assert declared["default"] == default, (name, declared["default"], default)
        assert declared["type"] == (expected if default is not None else [expected, "null"]), name
        assert declared.get("enum") == (list(rules.choices) if rules.choices else None), name
        bounds = {}
        if expected in ("integer", "number"):
            if rules.within == "(0, 1]":
                bounds = {"exclusiveMinimum": 0, "maximum": 1}
            elif rules.within == "[0, 1]":
                bounds = {"minimum": 0, "maximum": 1}
            elif rules.positive:
                bounds = {"minimum": 1} if expected == "integer" else {"exclusiveMinimum": 0}
            else:
                bounds = {"minimum": rules.minimum}
            if rules.maximum != SETTING_CEILING and "maximum" not in bounds:
                bounds["maximum"] = rules.maximum
        declared_bounds = {key: declared[key] for key in ("minimum", "exclusiveMinimum", "maximum") if key in declared}
        assert declared_bounds == bounds, name
        user_only = rules.repository == "not a repository"
        assert (declared.get("scope") == "machine") == user_only, name


def _lua_value(text: str) -> object:
    text = text.strip()
    if text == "nil":
        return None
    if text in ("true", "false"):
        return text == "true"
    if text.startswith('"'):
        return json.loads(text)
    return float(text)


def test_the_neovim_key_list_is_the_servers_with_its_defaults():
    """repomem.lua's header lists the keys of `vim.g.repomem_settings`: it listed 9 of them, offered
    `maxPromptTokens = 1024` as the default (2,048 with a served model) and a strategy list that left
    out dense, memwalker, readagent and qrmem."""
    lua = (ROOT / "lsp" / "nvim" / "repomem.lua").read_text()
    keys = lua.split("-- The keys", 1)[1].split("\nlocal defaults = {}", 1)[0]
    listed = {name: (value, comment) for name, value, comment
              in re.findall(r"^--\s+(\w+) = (.+?),\s+--\s*(.*)$", keys, re.M)}
    assert set(listed) == set(CLIENT_SETTINGS)
    for name, (value, comment) in listed.items():
        default, choices = LSP_DEFAULTS[name], CLIENT_SETTINGS[name].rules.choices
        shown = _lua_value(value)
        assert shown == (float(default) if isinstance(default, (int, float)) and not isinstance(default, bool)
                         else default), (name, value, default)
        if choices:
            assert [c.strip() for c in comment.split("one of", 1)[-1].split("|")] == list(choices), (name, comment)


def _elisp_settings(path: Path) -> tuple[dict[str, str], list[str]]:
    """repomem-settings' docstring list (key -> value as written) and its Customize :options keys."""
    text = path.read_text()
    form = text.split("(defcustom repomem-settings", 1)[1].split("\n(def", 1)[0]
    docstring = form.split("\n  :type ", 1)[0]
    listed = dict(re.findall(r"^  :(\w+) +(\S+)", docstring, re.M))
    options = re.findall(r"\(:(\w+) ", form.split(":options", 1)[1]) if ":options" in form else []
    return listed, options


def _elisp_value(text: str) -> object:
    if text == "nil":
        return None
    if text in ("t", ":json-false"):
        return text == "t"
    if text.startswith('\\"'):
        return text.strip('\\"')
    return float(text)


def test_the_emacs_settings_option_lists_the_servers_settings_with_their_defaults():
    """repomem-settings (eglot's and lsp-mode's) named three keys as examples: its docstring now lists
    each with the server's default, and Customize offers each (:options) with its type."""
    listed, options = _elisp_settings(ROOT / "lsp" / "emacs" / "repomem-settings.el")  # both set-ups load it
    assert set(listed) == set(CLIENT_SETTINGS), set(CLIENT_SETTINGS) ^ set(listed)
    assert sorted(options) == sorted(CLIENT_SETTINGS)
    for name, value in listed.items():
        default = LSP_DEFAULTS[name]
        shown = _elisp_value(value)
        assert shown == (float(default) if isinstance(default, (int, float)) and not isinstance(default, bool)
                         else default), (name, value, default)
