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
    for name in ("repomem-settings", "repomem-server-command"):
        assert f"(defcustom {name} " in el and f"(defcustom {name} " in lsp_mode
    for path in re.findall(r"\]\(((?:nvim|vim|emacs|vscode|helix)/[^)]*)\)", LSP_README):
        assert (ROOT / "lsp" / path).exists(), path


def test_the_vim_steps_turn_file_types_on():
    """A vimrc of one's own stops Vim loading defaults.vim, which turned file types on; without
    them no buffer is a Python buffer and repomem never starts (the first vimrc the README's steps
    gave)."""
    vim_steps = LSP_README.split("- **Vim with ALE**", 1)[1].split("\n- **", 1)[0]
    assert "packadd! ale" in vim_steps and "filetype plugin on" in vim_steps
    assert "filetype plugin on" in (ROOT / "lsp" / "vim" / "repomem.vim").read_text()
