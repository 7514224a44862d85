"""One description per setting (issue 35): every setting's rules sit on its field
(repomem/config/sections.py, `setting(...)`), every validator reads them there, and a misspelt rule fails
here instead of being silently ignored."""

from __future__ import annotations

import ast
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import repomem.setting_rules as setting_rules
from repomem.config import (
    BLOCK_ORDERS,
    Config,
    config_from_mapping,
    default_config,
    load_config,
    settings_digest,
    with_assignments,
    with_overrides,
)
from repomem.lsp.settings import CLIENT_SETTINGS, apply_settings, backend_changed, client_problem_line
from repomem.setting_reference import REFERENCE_PATH, configuration_reference
from repomem.setting_rules import (
    CPU_COUNT,
    ConfigProblem,
    rule_problems,
    setting,
    settings_by_name,
    settings_of,
    tree_from_mapping,
    with_current_names,
)
from tests.repos import write_repo

ROOT = Path(__file__).resolve().parents[2]
VALIDATORS = (ROOT / "repomem" / "config" / "sections.py", ROOT / "repomem" / "config" / "reading.py",
              ROOT / "repomem" / "setting_rules.py", ROOT / "lsp" / "settings.py")


def names_where(predicate) -> set[str]:
    return {s.name for s in settings_of(Config) if predicate(s.rules)}


# -- the rules are well-formed -------------------------------------------------------------------


def test_every_setting_has_well_formed_rules():
    assert rule_problems(Config) == []
    assert len(settings_of(Config)) > 100


@dataclass(frozen=True)
class TypoSection:
    label: str = setting("a", choices=("b", "c"), help="the default is not a choice")
    path: str = setting("", maximum=10, repository="not a repositry", help="a bound on a string; a misspelt rule")
    names: tuple[str, ...] = setting(("x",), repository_cap=4, help="a cap on a list")
    count: int = setting(0, positive=True, lsp="max_count", help="its default refused; a snake_case editor name")
    layers: int = setting(-1, minimum=-1, help="a minimum below 0 that says not what it means")
    share: float = setting(0.5, within="(0, 1)", help="an interval not known")  # type: ignore[arg-type]
    twin: int = setting(1, lsp="maxCount", moved_from=("typo.count", "nodot"), help="an old name still in use")
    other: int = setting(1, lsp="maxCount", help="")


@dataclass(frozen=True)
class TypoTree:
    typo: TypoSection = field(default_factory=TypoSection)


def test_misspelt_or_impossible_rules_are_reported_one_by_one():
    problems = "\n".join(rule_problems(TypoTree))
    for expected in ("typo.label: the default 'a' is refused by its own rules: is not one of b, c",
                     "typo.path: bounds on a str setting",
                     "typo.path: repository 'not a repositry' is not one of",
                     "typo.names: a repository cap on a tuple setting",
                     "typo.count: the default 0 is refused by its own rules: must be > 0",
                     "typo.count: language-server name 'max_count' is not camelCase",
                     "typo.layers: a minimum below 0 needs minimum_means",
                     "typo.share: within '(0, 1)' is not one of",
                     "typo.twin: moved_from 'typo.count' is a current setting",
                     "typo.twin: moved_from 'nodot' is not section.key",
                     "typo.other: language-server name 'maxCount' is typo.twin's too",
                     "typo.other: needs a one-line help"):
        assert expected in problems, (expected, problems)


def test_a_field_declared_without_rules_is_refused():
    @dataclass(frozen=True)
    class Bare:
        plain: int = 3

    @dataclass(frozen=True)
    class BareTree:
        bare: Bare = field(default_factory=Bare)

    with pytest.raises(TypeError, match="bare.plain is declared without setting"):
        settings_of(BareTree)


def test_the_validators_read_no_table_keyed_by_setting_names():
    """The tables this replaced were (section, key) tuples in sets and dicts, and dicts keyed by
    setting or client names: none is left in the validators, so no rule can name a setting that
    does not exist."""
    keys = {s.key for s in settings_of(Config)} | {s.section for s in settings_of(Config)}
    names = keys | set(CLIENT_SETTINGS)
    offenders = []
    for path in VALIDATORS:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # with_overrides(config, completion={"max_prompt_tokens": ...}) sets fields by name: a
        # misspelt one raises TypeError there, it cannot hide.
        overrides = {id(keyword.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
                     and getattr(node.func, "id", None) == "with_overrides" for keyword in node.keywords}
        for node in ast.walk(tree):
            found = []
            if isinstance(node, ast.Tuple) and len(node.elts) == 2 \
                    and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
                section, key = (e.value for e in node.elts)  # type: ignore[attr-defined]
                found = [f"{section}.{key}"] if section in keys else []
            elif isinstance(node, ast.Dict) and id(node) not in overrides:
                found = [k.value for k in node.keys if isinstance(k, ast.Constant) and k.value in names]
            elif isinstance(node, ast.Set):
                found = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names]
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno}: {name}" for name in found]
    assert offenders == []


# -- who may set what: the rules as they were (a change here is a change of security or of every
# index's fingerprint, so it is spelt out) ---------------------------------------------------------


def test_what_a_repository_may_not_set_or_only_make_stricter():
    assert names_where(lambda r: r.repository == "not a repository") == {
        "model.endpoint", "model.api_key_env", "model.model_path", "model.hf_model",
        "server.feedback_log", "index.cache_dir", "model.embedded_layers", "model.embedded_model",
        "model.prompt_cache_mb", "daemon.auto_start", "daemon.idle_minutes"}
    assert names_where(lambda r: r.repository == "stricter only") == {
        "scan.secret_patterns", "scan.mask_secrets", "scan.secret_min_length", "scan.secret_min_entropy"}


def test_the_repository_caps():
    caps = {s.name: s.rules.repository_cap for s in settings_of(Config) if s.rules.repository_cap is not None}
    assert caps == {
        "index.workers": CPU_COUNT, "relations.workers": CPU_COUNT, "relations.product_threads": CPU_COUNT,
        "model.threads": CPU_COUNT, "model.decode_threads": CPU_COUNT, "model.context_tokens": 32_768,
        "completion.max_prompt_tokens": 32_768,
        "completion.max_suffix_tokens": 32_768, "completion.max_new_tokens": 2_048, "completion.iterative_rounds": 4,
        "model.batch_size": 64, "completion.deadline_s": 600.0, "memory.max_calls": 32,
        "memory.answer_tokens": 256, "memory.summary_tokens": 1_024, "scan.max_file_bytes": 10_000_000,
        "scan.max_line_chars": 100_000, "graph.max_reach": 8_192, "graph.max_file_nodes": 100_000,
        "relations.max_relations_per_fragment": 512, "relations.semantic_neighbours": 512,
        "retrieval.top_k": 200, "retrieval.query_lines": 1_000,
        "retrieval.summary_walk_files": 256, "retrieval.summary_walk_steps": 4_096, "index.keep_snapshots": 8,
        "server.completion_cache_entries": 4_096, "server.shown_completions": 4_096, "server.indexed_buffers": 512}
    assert names_where(lambda r: r.zero_is_unlimited) == {"graph.max_reach", "graph.max_file_nodes"}


def test_run_only_settings_leave_the_fingerprints_alone():
    run_only = names_where(lambda r: r.run_only)
    sections = {s.section for s in settings_of(Config)}
    wholly = {section for section in sections
              if all(s.rules.run_only for s in settings_of(Config) if s.section == section)}
    assert wholly == {"index", "server", "daemon"}
    assert run_only - {s.name for s in settings_of(Config) if s.section in wholly} == {
        "relations.workers", "relations.product_threads", "relations.parallel_product_entries",
        "model.threads", "model.decode_threads", "model.endpoint", "model.api_key_env", "completion.deadline_s",
        "model.isolate_model", "model.gpu_layers", "model.embedded_layers", "model.batch_size",
        "model.batch_gather_ms",
        "model.context_tokens", "model.prefill_chunk_tokens", "model.reuse_chunk_tokens", "model.flash_attention",
        "model.prompt_cache_mb"}
    base = Config()
    for s in settings_of(Config):
        if isinstance(s.default, (bool, tuple, str)) or s.rules.choices:
            continue
        changed = with_overrides(base, **{s.section: {s.key: s.default + 1}})
        assert (settings_digest(changed) == settings_digest(base)) == s.rules.run_only, s.name
    assert settings_digest(base, ["relations"]) == settings_digest(
        with_overrides(base, relations={"workers": 7}), ["relations"])


def test_the_backend_reopens_for_its_own_settings_only():
    assert names_where(lambda r: r.reopens_backend) == {
        "model.model_path", "model.endpoint", "model.hf_model", "model.gpu_layers",
        "model.isolate_model", "model.threads", "model.decode_threads", "model.context_tokens",
        "model.prefill_chunk_tokens", "model.reuse_chunk_tokens", "model.flash_attention", "model.endpoint_logprobs",
        "model.embedded_layers", "model.embedded_model", "model.prompt_cache_mb"}
    base = Config()
    for s in settings_of(Config):
        if s.section not in ("completion", "model") or s.rules.choices:
            continue
        new = "x" if isinstance(s.default, str) else (not s.default if isinstance(s.default, bool) else s.default + 1)
        changed = with_overrides(base, **{s.section: {s.key: new}})
        assert backend_changed(base, changed) == s.rules.reopens_backend, s.name


# -- the language server's names -----------------------------------------------------------------


def test_client_settings_keep_their_names():
    """Editors' configurations name these: renaming one breaks them."""
    assert {name: s.name for name, s in CLIENT_SETTINGS.items()} == {
        "model": "model.model_path", "endpoint": "model.endpoint", "hfModel": "model.hf_model",
        "endpointLogprobs": "model.endpoint_logprobs", "embeddedLayers": "model.embedded_layers",
        "embeddedModel": "model.embedded_model",
        "gpuLayers": "model.gpu_layers", "strategy": "completion.strategy", "order": "completion.order",
        "alpha": "retrieval.alpha", "topK": "retrieval.top_k", "maxPromptTokens": "completion.max_prompt_tokens",
        "contextShare": "completion.context_share", "maxSuffixTokens": "completion.max_suffix_tokens",
        "maxNewTokens": "completion.max_new_tokens", "maxLines": "completion.max_lines",
        "wordHealing": "completion.word_healing", "continueLines": "completion.continue_lines",
        "deadlineSeconds": "completion.deadline_s", "fileOnlyRound": "prompt.file_only_round",
        "debounceMs": "server.debounce_ms", "retrievalBudgetMs": "retrieval.time_budget_ms",
        "answerWithinMs": "server.answer_within_ms", "warmAfterMs": "server.warm_after_ms",
        "typeThrough": "server.type_through", "flashAttention": "model.flash_attention",
        "speculateBelow": "server.speculate_below", "lineAhead": "server.line_ahead",
        "warmNewFunction": "server.warm_new_function",
        "reuseChunkTokens": "model.reuse_chunk_tokens", "indexNice": "server.index_nice",
        "completionCacheEntries": "server.completion_cache_entries", "feedbackLog": "server.feedback_log"}


def test_every_client_setting_is_checked_by_its_settings_rules():
    for name, target in CLIENT_SETTINGS.items():
        wrong = [1] if not isinstance(target.default, tuple) else 1
        config, problems = apply_settings(Config(), {name: wrong})
        assert len(problems) == 1 and problems[0].key == name, (name, problems)
        assert problems[0].kind in ("wrong type", "refused value")
        assert client_problem_line(problems[0]).startswith(f"repomem setting {name}=")


def test_the_editor_clients_name_known_client_settings_only():
    """The VS Code extension, Neovim and Helix configurations and lsp/README.md's table spell the
    client settings by hand: each name must be one the server knows."""
    vscode = json.loads((ROOT / "lsp" / "vscode" / "package.json").read_text(encoding="utf-8"))
    properties = vscode["contributes"]["configuration"]["properties"]
    # The program's name and the message trace are the client's own (vscode-languageclient reads
    # `repomem.trace.server` itself): the server is told neither.
    offered = {name.removeprefix("repomem.") for name in properties} - {"command", "trace.server"}
    extension = (ROOT / "lsp" / "vscode" / "extension.js").read_text(encoding="utf-8")
    # The extension sends the settings package.json declares (tests/unit/test_vscode_extension.py
    # runs it), less the client's own.
    assert 'require("./package.json").contributes.configuration.properties' in extension
    client_own = set(re.findall(r'"([\w.]+)"', re.search(r"CLIENT_OWN_KEYS = new Set\(\[(.*?)\]", extension).group(1)))
    assert client_own == {"command", "trace.server"}
    sent = {name.removeprefix("repomem.") for name in properties} - client_own
    helix = tomllib.loads((ROOT / "lsp" / "helix" / "languages.toml").read_text(encoding="utf-8"))
    helix_names = set(helix["language-server"]["repomem"]["config"]["repomem"])
    lua = (ROOT / "lsp" / "nvim" / "repomem.lua").read_text(encoding="utf-8")
    keys = lua.split("-- The keys", 1)[1].split("\nlocal defaults = {}", 1)[0]
    nvim = set(re.findall(r"^--\s+(\w+) = ", keys, re.M))
    readme = (ROOT / "lsp" / "README.md").read_text(encoding="utf-8").split("### Settings", 1)[1].split("###", 1)[0]
    documented = {name for row in readme.splitlines() if row.startswith("| `")
                  for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    for where, names in (("package.json", offered), ("extension.js", sent), ("helix", helix_names),
                         ("nvim", nvim), ("lsp/README.md", documented)):
        assert names and names <= set(CLIENT_SETTINGS), (where, names - set(CLIENT_SETTINGS))
    assert offered == sent
    assert documented == set(CLIENT_SETTINGS)
    for name in offered:  # the types the extension declares are the settings' own, and so are its defaults
        default = CLIENT_SETTINGS[name].default
        expected = ("boolean" if isinstance(default, bool) else "integer" if isinstance(default, int)
                    else "number" if isinstance(default, float) else "string")
        declared = properties[f"repomem.{name}"]
        if declared["default"] is None:  # left to the server, whose default depends on the model
            assert declared["type"] == [expected, "null"], name
        else:  # the language server's default (test_editor_docs.py: its surface's, where it has one)
            assert declared["type"] == expected, name
            assert declared["default"] == default or CLIENT_SETTINGS[name].rules.surfaces, name


# Each language repomem indexes under each editor set-up's names for it: VS Code's language ids,
# Neovim's and Vim's filetypes, Emacs' major modes (eglot) and lsp-mode's language ids.
EDITOR_NAMES = {
    "python": ({"python"}, {"python"}, {"python-mode", "python-ts-mode"}, {"python"}),
    "javascript": ({"javascript", "javascriptreact"}, {"javascript", "javascriptreact"}, {"js-mode", "js-ts-mode"},
                   {"javascript", "javascriptreact"}),
    "typescript": ({"typescript"}, {"typescript"}, {"typescript-mode", "typescript-ts-mode"}, {"typescript"}),
    "tsx": ({"typescriptreact"}, {"typescriptreact"}, {"tsx-ts-mode"}, {"typescriptreact"}),
    "go": ({"go"}, {"go"}, {"go-mode", "go-ts-mode"}, {"go"}),
    "rust": ({"rust"}, {"rust"}, {"rust-mode", "rust-ts-mode"}, {"rust"}),
    "java": ({"java"}, {"java"}, {"java-mode", "java-ts-mode"}, {"java"}),
    "kotlin": ({"kotlin"}, {"kotlin"}, {"kotlin-mode", "kotlin-ts-mode"}, {"kotlin"}),
    "scala": ({"scala"}, {"scala"}, {"scala-mode", "scala-ts-mode"}, {"scala"}),
    "c": ({"c"}, {"c"}, {"c-mode", "c-ts-mode"}, {"c"}),
    "cpp": ({"cpp"}, {"cpp"}, {"c++-mode", "c++-ts-mode"}, {"cpp"}),
    "csharp": ({"csharp"}, {"cs"}, {"csharp-mode", "csharp-ts-mode"}, {"csharp"}),
    "ruby": ({"ruby"}, {"ruby"}, {"ruby-mode", "ruby-ts-mode"}, {"ruby"}),
    "php": ({"php"}, {"php"}, {"php-mode", "php-ts-mode"}, {"php"}),
    "swift": ({"swift"}, {"swift"}, {"swift-mode"}, {"swift"}),
    "lua": ({"lua"}, {"lua"}, {"lua-mode", "lua-ts-mode"}, {"lua"}),
    "bash": ({"shellscript"}, {"sh", "bash"}, {"sh-mode", "bash-ts-mode"}, {"shellscript"}),
}


def test_every_editor_set_up_serves_every_language_repomem_indexes():
    """An editor starts or attaches the server for the languages its set-up lists: VS Code's
    activation events covered 10 of the 17, Neovim's, Vim's and both Emacs clients' lists no more,
    so in a Kotlin, Scala, C#, PHP, Swift, Lua or shell repository no editor served repomem's
    completions. Each set-up now lists every language of the registry, and nothing else."""
    from repomem.languages.registry import LANGUAGES

    assert set(EDITOR_NAMES) == {language.name for language in LANGUAGES}
    vscode = json.loads((ROOT / "lsp" / "vscode" / "package.json").read_text(encoding="utf-8"))
    activated = {event.removeprefix("onLanguage:") for event in vscode["activationEvents"]}
    lua = (ROOT / "lsp" / "nvim" / "repomem.lua").read_text(encoding="utf-8")
    listed = lua.split("local filetypes = vim.g.repomem_filetypes", 1)[1].split("}", 1)[0]
    nvim = set(re.findall(r'"([\w+-]+)"', listed))
    vim_script = (ROOT / "lsp" / "vim" / "repomem.vim").read_text(encoding="utf-8")
    vim = set(re.findall(r"'([\w+-]+)'", vim_script.split("get(g:, 'repomem_filetypes',", 1)[1].split("])", 1)[0]))
    emacs = (ROOT / "lsp" / "emacs" / "repomem.el").read_text(encoding="utf-8")
    modes = set(emacs.split("(defcustom repomem-modes", 1)[1].split(")", 1)[0].replace("'(", " ").split())
    lsp_mode = (ROOT / "lsp" / "emacs" / "repomem-lsp-mode.el").read_text(encoding="utf-8")
    lsp_ids = set(re.findall(r'"([\w+-]+)"', lsp_mode.split("(defcustom repomem-lsp-languages", 1)[1].split(")", 1)[0]))
    for column, (name, listed) in enumerate((("VS Code", activated), ("Neovim", nvim), ("Emacs", modes),
                                             ("lsp-mode", lsp_ids))):
        expected = set().union(*(names[column] for names in EDITOR_NAMES.values()))
        assert listed == expected, (name, sorted(expected - listed), sorted(listed - expected))
    assert vim == nvim  # Vim's filetypes are Neovim's


def test_the_editor_clients_send_only_what_the_user_set():
    """A client that sends every key overrides the server's defaults with its own copies: the
    VS Code extension sent strategy "vanilla" and Neovim's plug-in a 2,048-token prompt, where
    the server would have used fragrel and 1,024 tokens with the embedded model."""
    lua = (ROOT / "lsp" / "nvim" / "repomem.lua").read_text(encoding="utf-8")
    assert "\nlocal defaults = {}\n" in lua
    extension = (ROOT / "lsp" / "vscode" / "extension.js").read_text(encoding="utf-8")
    assert "config.inspect(key)" in extension and "config.get(key)" not in extension
    vscode = json.loads((ROOT / "lsp" / "vscode" / "package.json").read_text(encoding="utf-8"))
    assert vscode["contributes"]["configuration"]["properties"]["repomem.maxPromptTokens"]["default"] is None


def test_a_repositorys_workspace_settings_cannot_name_the_server_the_model_or_the_program():
    """A cloned repository's .vscode/settings.json could send the code, and the API key, to a
    server it named, load a model file of its choosing and name the program VS Code started: the
    settings that say where the code goes and what runs are the user's own ("scope": "machine",
    as the server's own settings are "not a repository"), and the extension reads only the
    user's value of each."""
    vscode = json.loads((ROOT / "lsp" / "vscode" / "package.json").read_text(encoding="utf-8"))
    properties = vscode["contributes"]["configuration"]["properties"]
    extension = (ROOT / "lsp" / "vscode" / "extension.js").read_text(encoding="utf-8")
    # Every setting a repository may not set (its rules: "not a repository"), and the program.
    user_only = {"command"} | {name for name, target in CLIENT_SETTINGS.items()
                               if target.rules.repository == "not a repository"}
    assert {"endpoint", "model", "hfModel", "embeddedModel", "feedbackLog"} <= user_only
    assert {name.removeprefix("repomem.") for name, declared in properties.items()
            if declared.get("scope") == "machine"} == user_only
    # The extension reads only the user's value of each (tests/unit/test_vscode_extension.py runs it).
    assert 'USER_ONLY_KEYS = new Set(Object.keys(SETTINGS).filter((key) => SETTINGS[key].scope === "machine")' \
        in extension
    assert 'get("command")' not in extension and "userOrWorkspaceValue(vscode.workspace" in extension


# -- the behaviour and the warnings as before ------------------------------------------------------


@pytest.mark.parametrize("name, value, warning", [
    ("retrieval.top_k", -1, "config retrieval.top_k=-1 must be > 0; default 10 kept"),  # as 0 is told
    ("fragments.stride_lines", 0, "config fragments.stride_lines=0 must be > 0; default 10 kept"),
    ("graph.syntax_weight", 0.0, "config graph.syntax_weight=0.0 must be > 0; default 0.5 kept"),
    ("graph.call_weight", 1.5, "config graph.call_weight=1.5 must lie in (0, 1]; default 0.8 kept"),
    ("graph.strength_cutoff", 0.0, "config graph.strength_cutoff=0.0 must lie in (0, 1]; default 0.01 kept"),
    ("relations.context_gamma", 1.5, "config relations.context_gamma=1.5 must lie in [0, 1]; default 0.5 kept"),
    ("model.gpu_layers", -2, "config model.gpu_layers=-2 must be -1 (all layers) or more; default -1 kept"),
    ("prompt.clone_position", -3, "config prompt.clone_position=-3 must be -1 (off) or more; default 1 kept"),
    ("relations.max_relations_per_fragment", 5000,
     "config relations.max_relations_per_fragment=5000 must be at most 4,096; default 64 kept"),
    ("index.workers", 2000, "config index.workers=2000 must be at most 1,024; default 2 kept"),
    ("fragments.window_lines", 2**31, "config fragments.window_lines=2147483648 must be at most 2,147,483,647; "
                                      "default 20 kept"),
    ("retrieval.alpha", float("inf"), "config retrieval.alpha=inf must be a finite number; default 0.5 kept"),
    ("index.dir_name", "a/b", "config index.dir_name='a/b' must be a plain folder name; default '.repomem' kept"),
    ("completion.order", "random", "config completion.order='random' is not one of score, similarity, stable; "
                                   "default 'stable' kept"),
    ("retrieval.top_k", "ten", "config retrieval.top_k: expected an integer, got a string; default 10 kept"),
    ("scan.excluded_dirs", [1], "config scan.excluded_dirs: expected a list of strings, got an integer 1 in it; "
                                "default ['.git', '.hg', '.svn', '.venv', 'venv', '.env', 'env', 'node_modules', "
                                "'__pycache__', 'build', 'dist', '.tox', '.nox', '.mypy_cache', '.pytest_cache', "
                                "'.ruff_cache', '.repomem', 'site-packages', '.eggs', '.idea', '.vscode'] kept"),
])
def test_a_refused_value_keeps_the_default_with_the_same_warning(name, value, warning):
    section, key = name.split(".")
    config, problems = config_from_mapping({section: {key: value}})
    assert [problem.render() for problem in problems] == [warning]
    assert problems[0].key == name and problems[0].kept == settings_by_name(Config)[(section, key)].default
    assert config == default_config()


def test_accepted_values_at_the_bounds():
    config, warnings = config_from_mapping({"completion": {"context_share": 1, "order": BLOCK_ORDERS[0]},
                                            "model": {"gpu_layers": -1},
                                            "prompt": {"clone_position": -1},
                                            "graph": {"strength_cutoff": 1e-9, "max_reach": 0},
                                            "relations": {"context_gamma": 0, "max_relations_per_fragment": 4096}})
    assert warnings == []
    assert config.completion.context_share == 1.0 and isinstance(config.completion.context_share, float)
    assert (config.model.gpu_layers, config.graph.max_reach, config.relations.max_relations_per_fragment) == (
        -1, 0, 4096)


# -- a setting that moved (a made-up tree; the real moves are tested below it) -------------------------


@dataclass(frozen=True)
class PromptSection:
    budget: int = setting(100, positive=True, moved_from=("completion.budget", "legacy.budget"),
                          help="tokens, now under [prompt]")


@dataclass(frozen=True)
class CompletionSection:
    other: int = setting(1, help="a setting that stayed")


@dataclass(frozen=True)
class MovedTree:
    completion: CompletionSection = field(default_factory=CompletionSection)
    prompt: PromptSection = field(default_factory=PromptSection)


def test_a_moved_setting_reads_under_its_old_name_with_one_warning():
    assert rule_problems(MovedTree) == []
    tree, problems = tree_from_mapping(MovedTree, {"completion": {"budget": 40, "other": 2}})
    warnings = [problem.render() for problem in problems]
    assert (tree.prompt.budget, tree.completion.other) == (40, 2)
    assert [(p.key, p.kind, p.old_name) for p in problems] == [("prompt.budget", "moved", "completion.budget")]
    assert warnings == ["config completion.budget has moved to prompt.budget; read as prompt.budget (rename it there)"]
    # A section that exists no more is not reported as unknown once its moved keys are read.
    tree, problems = tree_from_mapping(MovedTree, {"legacy": {"budget": 50}})
    assert tree.prompt.budget == 50 and len(problems) == 1 and "legacy.budget has moved" in problems[0].render()
    tree, problems = tree_from_mapping(MovedTree, {"legacy": {"budget": 50, "colour": 1}})
    assert problems[1].render() == "unknown config section [legacy] ignored"


def test_the_current_name_wins_and_the_old_name_is_checked_as_the_new_one():
    tree, problems = tree_from_mapping(MovedTree, {"completion": {"budget": 40}, "prompt": {"budget": 60}})
    assert tree.prompt.budget == 60
    assert [problem.render() for problem in problems] == [
        "config completion.budget has moved to prompt.budget, which is set too; completion.budget ignored"]
    tree, problems = tree_from_mapping(MovedTree, {"completion": {"budget": 0}})
    assert tree.prompt.budget == 100
    assert problems[1].render() == "config prompt.budget=0 must be > 0; default 100 kept"
    renamed, notices = with_current_names(MovedTree, {"completion": {"budget": 3, "other": 4}}, "repomem.toml")
    assert renamed == {"completion": {"other": 4}, "prompt": {"budget": 3}}
    assert [notice.render() for notice in notices] == [
        "repomem.toml: completion.budget has moved to prompt.budget; read as prompt.budget (rename it there)"]


def settings_files(tmp_path: Path, monkeypatch, user_text: str, repo_text: str) -> tuple[Path, Path]:
    """(the user's config, a repository) holding these settings, the user's config in force."""
    user = tmp_path / "user.toml"
    user.write_text(user_text)
    monkeypatch.setenv("REPOMEM_CONFIG", str(user))
    repo = write_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (repo / "repomem.toml").write_text(repo_text)
    return user, repo


def test_a_moved_setting_keeps_its_repository_rules_under_its_old_name(tmp_path: Path, monkeypatch):
    """Were model.endpoint once [legacy] endpoint, a repository still could not set it that way."""
    endpoint = settings_by_name(Config)[("model", "endpoint")]
    monkeypatch.setattr(setting_rules, "moved_settings", lambda root: {("legacy", "endpoint"): (endpoint, "")})
    user, repo = settings_files(tmp_path, monkeypatch, "", '[legacy]\nendpoint = "http://attacker.example"\n')
    config, warnings = load_config(repo)
    assert config.model.endpoint == ""
    assert warnings[0].startswith("repomem.toml: legacy.endpoint has moved to model.endpoint")
    assert "model.endpoint ignored: a repository's own settings may not send data elsewhere" in warnings[1]
    user.write_text('[legacy]\nendpoint = "http://127.0.0.1:8000"\n')
    config, warnings = load_config(repo)
    assert config.model.endpoint == "http://127.0.0.1:8000"  # the user's own, under its old name
    assert warnings[0].startswith(f"{user}: legacy.endpoint has moved to model.endpoint")
    notices: list[ConfigProblem] = []
    config, problems = with_assignments(Config(), ["legacy.endpoint=http://127.0.0.1:9"], notices)
    assert problems == [] and config.model.endpoint == "http://127.0.0.1:9"
    assert [notice.render() for notice in notices] == [
        "--set: legacy.endpoint has moved to model.endpoint; read as model.endpoint (rename it there)"]


# -- the reference for users ---------------------------------------------------------------------


def test_the_configuration_reference_is_current():
    committed = (ROOT / REFERENCE_PATH).read_text(encoding="utf-8")
    assert committed == configuration_reference(Config), "run: python scripts/config_reference.py"
    for s in settings_of(Config):
        assert f"| `{s.key}`" in committed.split(f"## [{s.section}]", 1)[1].split("\n## ", 1)[0], s.name
    readme = (ROOT / "README.md").read_text(encoding="utf-8").split("## Configuration", 1)[1].split("\n## ", 1)[0]
    assert REFERENCE_PATH in readme
    # The README's short table is written by hand: each setting it names must exist.
    known = {f"{s.section}.{s.key}" for s in settings_of(Config)}
    sections = {s.section for s in settings_of(Config)}
    for row in (line for line in readme.splitlines() if line.startswith("| `")):
        first, *others = re.findall(r"`([\w.*]+)`", row.split("|")[1])
        section, _, key = first.partition(".")
        assert section in sections, row
        for name in [first, *(f"{section}.{other}" for other in others)]:
            assert name.endswith(".*") or name in known, name


def test_the_readme_names_every_setting_a_repository_may_not_set():
    """README's Security section lists what a repository's own repomem.toml may not set; it had
    left out model.prompt_cache_mb and the daemon's settings."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8").split("## Security", 1)[1].split("\n## ", 1)[0]
    bullet = readme.split("own `repomem.toml` may tune", 1)[1].split("\n- ", 1)[0]
    named = set(re.findall(r"`([a-z_]+\.[a-z_]+)`", bullet))
    refused = {s.name for s in settings_of(Config) if s.rules.repository == "not a repository"}
    assert refused <= named, sorted(refused - named)


def test_the_prompt_levers_settings_moved_to_prompt_and_are_read_under_their_old_names():
    """The levers' settings left [retrieval] and [completion] for [prompt]; an old repomem.toml,
    --set or client setting keeps working, with one warning per moved key."""
    moved = {"retrieval": {"anchor_matches": 2, "scope_imports": 5, "draft_signature": True},
             "completion": {"continuation_lines": 2, "clone_search": 3, "round_choice": "last", "pack_blocks": True}}
    config, problems = config_from_mapping(moved)
    warnings = [problem.render() for problem in problems]
    assert (config.prompt.anchor_matches, config.prompt.scope_imports, config.prompt.draft_signature,
            config.prompt.continuation_lines, config.prompt.clone_search, config.prompt.round_choice,
            config.prompt.pack_blocks) == (2, 5, True, 2, 3, "last", True)
    assert sorted(warnings) == sorted(f"config {section}.{key} has moved to prompt.{key}; read as prompt.{key} "
                                      "(rename it there)" for section, keys in moved.items() for key in keys)
    assert not hasattr(config.retrieval, "anchor_matches") and not hasattr(config.completion, "pack_blocks")


def test_settings_files_are_named_and_a_bad_value_keeps_the_users_own(tmp_path: Path, monkeypatch):
    """A repository's bad value replaced the user's good one by the default; a problem found while
    resolving named no file; a key above every section was called a section; booleans were spelled
    as Python spells them; REPOMEM_CONFIG naming no file was silent."""
    user, repo = settings_files(tmp_path, monkeypatch, "[retrieval]\ntop_k = 3\n[graph]\nsyntax_weight = true\n",
                                'top_k = 5\n[retrieval]\ntop_k = "x"\n')
    config, warnings = load_config(repo)
    assert config.retrieval.top_k == 3
    assert "repomem.toml: config retrieval.top_k: expected an integer, got a string; your 3 kept" in warnings
    assert f"{user}: config graph.syntax_weight: expected a number, got a boolean; default 0.5 kept" in warnings
    assert f"{repo / 'repomem.toml'}: unknown config key top_k ignored (outside any section; it is a key of " \
        "[retrieval])" in warnings
    (repo / "repomem.toml").write_text("[bm25]\nlowercase = 3\n")
    assert any(w.endswith("; default true kept") for w in load_config(repo)[1])
    monkeypatch.setenv("REPOMEM_CONFIG", str(tmp_path / "nosuch.toml"))
    assert f"REPOMEM_CONFIG names {tmp_path / 'nosuch.toml'}, which does not exist; defaults used" \
        in load_config(repo)[1]


def test_settings_that_contradict_each_other_or_their_use_are_made_to_agree(tmp_path: Path, monkeypatch):
    """A stride longer than the window left lines no window held; a relative cache folder was read
    from each command's own folder (two indexes of one repository, written inside it)."""
    user, repo = settings_files(tmp_path, monkeypatch, '[index]\ncache_dir = "relcache"\n',
                                "[fragments]\nwindow_lines = 2\nstride_lines = 50\n")
    config, warnings = load_config(repo)
    assert (config.fragments.window_lines, config.fragments.stride_lines, config.index.cache_dir) == (2, 2, "")
    assert any("fragments.stride_lines=50 is longer than fragments.window_lines (2)" in w and w.endswith("; 2 kept")
               for w in warnings)
    assert any(w.startswith(f"{user}: config index.cache_dir='relcache' must be an absolute path") for w in warnings)
    user.write_text('[index]\ncache_dir = "~/caches"\n')
    assert load_config(repo)[0].index.cache_dir == "~/caches"
