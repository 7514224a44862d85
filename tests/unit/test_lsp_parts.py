"""Unit tests of the language server's parts (settings, caches, feedback log) and of the core
additions it needs (explain's strongest lifts, the retrieval time budget, file events, save)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from lsprotocol import types

from repomem.config import Config, load_config, read_config, read_settings, with_overrides
from repomem.index.snapshot_load import load_index
from repomem.lsp.cache import CachedCompletion, CompletionCache, CursorState, ForwardTypingCache
from repomem.lsp.feedback import FeedbackLog, ShownCompletion, ShownCompletions
from repomem.lsp.session import CompletionSession, EditorRequest
from repomem.lsp.settings import apply_settings, backend_changed, client_problem_line, settings_after_change
from repomem.positions import locate
from repomem.progress import NoProgress
from repomem.retrieval.scoring import ScoredFragment, score_fragments, strongest_lifts, top_fragments
from repomem.service import RepoService

QUERY = "def rename(self, name):\n    self.name = name\n    self.save()\n    slugify(name)"


# -- settings ----------------------------------------------------------------------------------------


def test_settings_apply_and_bad_ones_fall_back_with_a_message():
    base = with_overrides(Config(), retrieval={"top_k": 7})  # as if from repomem.toml
    config, problems = apply_settings(base, {"repomem": {
        "alpha": 0.25, "maxNewTokens": 12, "debounceMs": 5, "retrievalBudgetMs": 20,
        "topK": -3, "strategy": "psychic", "contextShare": "half", "colour": "blue", "endpoint": None,
    }})
    assert config.retrieval.alpha == 0.25 and config.completion.max_new_tokens == 12
    assert config.server.debounce_ms == 5
    assert config.retrieval.time_budget_ms == 20  # the server's budget reaches the core's retrieval
    assert config.retrieval.top_k == 7  # the repository's value, not the library default
    assert config.completion.strategy == "fragrel" and config.completion.context_share == 0.5
    assert len(problems) == 4
    assert {(p.key, p.kind) for p in problems} == {("topK", "refused value"), ("strategy", "refused value"),
                                                   ("contextShare", "wrong type"), ("colour", "unknown key")}
    lines = [client_problem_line(p) for p in problems]
    assert any("topK=-3" in line and "7 kept" in line for line in lines)
    assert any("strategy='psychic'" in line for line in lines)
    assert any("unknown repomem setting 'colour'" in line for line in lines)
    _, problems = apply_settings(Config(), ["not", "an", "object"])
    assert problems and "must be an object" in client_problem_line(problems[0])
    assert backend_changed(Config(), apply_settings(Config(), {"endpoint": "http://127.0.0.1:1"})[0])
    assert not backend_changed(apply_settings(Config(), {})[0], apply_settings(Config(), {"alpha": 0.1})[0])


def test_an_invalid_setting_in_a_configuration_change_keeps_the_previous_value(tmp_path: Path):
    """lsp/README.md: an invalid value is reported and the previous value is kept, not the
    repository's default (a typo in `endpoint` switched a working model server to the embedded model)."""
    session = CompletionSession(tmp_path, Config(), lambda level, message: None)
    assert session.configure({"endpoint": "http://127.0.0.1:1", "debounceMs": 40, "topK": 9}) == []
    problems = session.configure({"repomem": {"endpoint": 12, "debounceMs": -5, "topK": 9}})
    assert session.config.model.endpoint == "http://127.0.0.1:1"
    assert session.config.server.debounce_ms == 40 and session.config.retrieval.top_k == 9
    assert len(problems) == 2
    assert any("endpoint=12" in p and "'http://127.0.0.1:1' kept" in p for p in problems)
    assert any("debounceMs=-5" in p and "40 kept" in p for p in problems)
    # Still the previous value at the next change, and a setting the change leaves out goes back
    # to the repository's value, as before.
    session.configure({"endpoint": 13})
    assert session.config.model.endpoint == "http://127.0.0.1:1"
    assert session.config.server.debounce_ms == Config().server.debounce_ms
    _, problems = apply_settings(Config(), {"debounceMs": -5}, {"debounceMs": 40})
    assert problems and problems[0].kept == 40 and "40 kept" in client_problem_line(problems[0])


def test_the_retrieval_budget_is_one_setting_with_a_value_per_surface(tmp_path: Path, monkeypatch):
    """retrieval.time_budget_ms holds the CLI's (and the evaluator's) budget and, under
    [retrieval.lsp], the language server's; the old server.retrieval_budget_ms reads as the latter."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REPOMEM_CONFIG", raising=False)
    (tmp_path / "repomem.toml").write_text("[retrieval]\ntime_budget_ms = 7\n[retrieval.lsp]\ntime_budget_ms = 30\n")
    cli, warnings = load_config(tmp_path)  # what `repomem complete` and `repomem retrieve` run with
    assert not warnings and cli.retrieval.time_budget_ms == 7
    settings = read_settings(tmp_path)
    assert apply_settings(settings, {})[0].retrieval.time_budget_ms == 30
    served, problems = apply_settings(settings, {"retrievalBudgetMs": 20})
    assert not problems and served.retrieval.time_budget_ms == 20  # the editor's over the file's
    assert load_config(tmp_path)[0].retrieval.time_budget_ms == 7  # the CLI's budget is not the server's
    # The old name, with one warning; the plain value leaves the server's default alone.
    (tmp_path / "repomem.toml").write_text("[retrieval]\ntime_budget_ms = 7\n[server]\nretrieval_budget_ms = 30\n")
    resolved = read_config(tmp_path, "lsp")
    assert resolved.config.retrieval.time_budget_ms == 30
    assert [(p.kind, p.old_name, p.key) for p in resolved.problems] == [
        ("moved", "server.retrieval_budget_ms", "retrieval.lsp.time_budget_ms")]
    assert resolved.sources["retrieval.time_budget_ms"].endswith("repomem.toml [retrieval.lsp]")
    (tmp_path / "repomem.toml").write_text("[retrieval]\ntime_budget_ms = 7\n")
    assert read_config(tmp_path, "lsp").config.retrieval.time_budget_ms == 50  # the surface's own default
    # Defaults: exact FragRel for the CLI, a budget for the editor.
    assert Config().retrieval.time_budget_ms == 0
    assert apply_settings(Config(), {})[0].retrieval.time_budget_ms == 50


def test_the_prompt_budget_fits_the_backend_unless_the_client_sets_one():
    assert apply_settings(Config(), {})[0].completion.max_prompt_tokens == 1024  # embedded, on the CPU
    chunked = read_settings_from({"model": {"lsp_embedded": {"prefill_chunk_tokens": 256}}})
    assert apply_settings(chunked, {})[0].model.prefill_chunk_tokens == 256  # the server's, when set
    assert Config().model.prefill_chunk_tokens == 0  # the CLI and evaluation: in one piece
    # Moved runs of the KV cache kept: in the editor, not for the CLI and evaluation (exact prompts).
    assert apply_settings(Config(), {})[0].model.reuse_chunk_tokens == 64
    assert apply_settings(Config(), {"reuseChunkTokens": 0})[0].model.reuse_chunk_tokens == 0
    assert Config().model.reuse_chunk_tokens == 0
    assert apply_settings(Config(), {"endpoint": "http://127.0.0.1:8000"})[0].model.reuse_chunk_tokens == 0
    assert apply_settings(Config(), {"maxPromptTokens": 512})[0].completion.max_prompt_tokens == 512
    served = apply_settings(Config(), {"endpoint": "http://127.0.0.1:8000"})[0]
    assert served.completion.max_prompt_tokens == 2048  # a served model keeps completion.max_prompt_tokens


def read_settings_from(mapping: dict):
    from repomem.config import SettingsRead

    return SettingsRead(mapping, {}, [])


def test_the_file_only_round_is_off_in_the_editor_with_the_embedded_model_unless_asked_for():
    """Its second prompt evicts the first from llama.cpp's one prompt cache ([prompt.lsp_embedded])."""
    assert Config().prompt.file_only_round  # the CLI and the evaluator: the exact match's default
    assert not apply_settings(Config(), {})[0].prompt.file_only_round
    assert apply_settings(Config(), {"fileOnlyRound": True})[0].prompt.file_only_round
    asked = read_settings_from({"prompt": {"lsp_embedded": {"file_only_round": True}}})
    assert apply_settings(asked, {})[0].prompt.file_only_round
    served = apply_settings(Config(), {"endpoint": "http://127.0.0.1:8000"})[0]
    assert served.prompt.file_only_round  # a served model has the batch and the cache for it
    assert not apply_settings(Config(), {"endpoint": "http://127.0.0.1:8000", "fileOnlyRound": False})[0] \
        .prompt.file_only_round


def test_the_session_hands_the_engine_and_the_service_one_config(tmp_path: Path):
    """One resolved config per request: the engine and the service read the same object, never
    copies kept equal by assignment."""
    session = CompletionSession(tmp_path, Config(), lambda level, message: None)
    session.backend = object()  # type: ignore[assignment]  # no model: only the engine's wiring is looked at
    session.configure({"topK": 4})
    assert session.engine is not None
    assert session.engine.config is session.service.config is session.config
    assert session.config.retrieval.top_k == 4 and session.config.completion.max_prompt_tokens == 1024


def test_a_configuration_change_carries_every_setting_and_one_it_lacks_is_unset():
    initial = {"repomem": {"maxNewTokens": 24, "debounceMs": 10}}
    assert settings_after_change(initial, {}) == {"maxNewTokens": 24, "debounceMs": 10}  # eglot's first `{}`
    # The user removed maxNewTokens from their settings (VS Code sends the keys that are set): it
    # goes back to the settings files' value, where it stayed at 24 until a restart.
    assert settings_after_change(initial, {"repomem": {"debounceMs": 5}}) == {"debounceMs": 5}
    assert settings_after_change(initial, {"repomem": {}}) == {}  # every setting removed
    assert settings_after_change(None, {"alpha": 0.1}) == {"alpha": 0.1}
    assert settings_after_change(initial, [1]) == [1]  # not an object: apply_settings reports it
    # No settings, or other servers' own: nothing of repomem's changed (the endpoint was dropped;
    # a warning per foreign section was shown).
    assert settings_after_change(initial, None) == {"maxNewTokens": 24, "debounceMs": 10}
    assert settings_after_change(initial, {"pyright": {"x": 1}, "python": {}}) == {"maxNewTokens": 24,
                                                                                 "debounceMs": 10}


# -- caches --------------------------------------------------------------------------------------------


def test_the_server_tells_the_packages_version_and_its_shutdown_ends_the_message_loop():
    import asyncio
    import importlib.metadata

    from repomem.lsp.framing import MessageLoop
    from repomem.lsp.server import RepomemServer, server_version

    assert server_version() == importlib.metadata.version("repomem")
    ls = RepomemServer()
    assert (ls.name, ls.version) == ("repomem", server_version())
    stop = ls.session_stop
    ls.shutdown()  # pygls's public shutdown reaches our loop's stop event, not pygls's private one
    assert stop.is_set()

    class Silent:
        async def readline(self) -> bytes:
            raise AssertionError("a stopped loop reads nothing")

    asyncio.run(MessageLoop(ls.protocol, lambda data: None, 1024).run(stop, Silent()))


def test_a_notification_whose_params_do_not_fit_is_dropped_with_its_fault_said_once():
    """The message loop names what was wrong with a notification pygls cannot structure (where and
    what came instead) through its `bad_notification`; the server says each method's fault once."""
    from repomem.lsp.framing import MessageLoop
    from repomem.lsp.server import RepomemServer

    ls = RepomemServer()
    said: list[tuple[str, str]] = []
    loop = MessageLoop(ls.protocol, lambda data: pytest.fail(f"a notification got an answer: {data!r}"), 1 << 20,
                       lambda method, fault: said.append((method, fault)))
    loop.initialized = True
    uri = "file:///tmp/x.py"
    for params in ({"textDocument": {"uri": uri, "version": 2}, "contentChanges": 5},
                   {"textDocument": {"uri": uri, "version": 3}, "contentChanges": [{"range": "nonsense", "text": 5}]}):
        loop.handle(json.dumps({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": params}).encode())
    loop.handle(json.dumps({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": uri, "languageId": "python", "version": 1}}}).encode())
    assert said[0] == ("textDocument/didChange", "params.contentChanges: expected an array, got 5")
    assert said[1] == ("textDocument/didChange", "params.contentChanges[0]: expected one of the protocol's shapes "
                                                 "for it, got {'range': 'nonsense', 'text': 5}")
    assert said[2] == ("textDocument/didOpen", "params.textDocument.text: missing")
    logged: list[str] = []
    ls.log = lambda level, message: logged.append(f"{level}: {message}")
    for _ in range(3):
        ls.bad_params("repomem/didMoveCursor", "position: expected {line, character}, got 'here'")
    assert logged == ["warning: repomem/didMoveCursor dropped: its params do not fit the protocol: "
                      "position: expected {line, character}, got 'here'"]


def test_completion_cache_is_an_lru_keyed_by_text_around_the_cursor_and_settings():
    cache = CompletionCache(entries=2)
    text = "def f():\n    return \n"
    first = CursorState.of("a.py", text, 20, answers_generation=1)
    cache.put(first, CachedCompletion("1", "c1"))
    assert cache.get(CursorState.of("a.py", text, 20, 1)).text == "1"
    assert cache.get(CursorState.of("a.py", text, 20, 2)) is None  # settings changed
    assert cache.get(CursorState.of("a.py", text + "x = 1\n", 20, 1)) is None  # text after the cursor changed
    cache.put(CursorState.of("b.py", text, 20, 1), CachedCompletion("2", "c2"))
    cache.get(first)  # touch: first is now the most recent
    cache.put(CursorState.of("c.py", text, 20, 1), CachedCompletion("3", "c3"))
    assert len(cache) == 2
    assert cache.get(first) is not None and cache.get(CursorState.of("b.py", text, 20, 1)) is None


def test_answers_given_before_the_index_was_installed_are_not_given_again():
    """Until the index is in, completions come from the open file alone; asked again at the same
    cursor afterwards, such an answer was taken from the cache (and a request joined a generation
    started before). The installed index makes every earlier answer stale."""
    from repomem.lsp.server import RepomemServer

    ls = RepomemServer()
    try:
        cache, forward = CompletionCache(entries=4), ForwardTypingCache()
        text = "total = compute_\n"
        before = ls.ask_in("file:///a.py", "a.py", 1, text, 0, 16).state
        cache.put(before, CachedCompletion("tax(x)", "c1"))
        forward.remember(before, CachedCompletion("tax(x)", "c1"))
        ls.index_installed()
        after = ls.ask_in("file:///a.py", "a.py", 1, text, 0, 16).state
        assert cache.get(after) is None and cache.get(before) is not None
        typed = ls.ask_in("file:///a.py", "a.py", 2, "total = compute_t\n", 0, 17).state
        assert forward.continuation(typed) is None
    finally:
        ls.shutdown()


def test_forward_typing_reuses_the_rest_of_a_shown_completion():
    forward = ForwardTypingCache()
    before = "x = compute_"
    after = "\n\nprint(x)\n"
    shown = CursorState.of("a.py", before + after, len(before), 1)
    forward.remember(shown, CachedCompletion("tax(amount, kind)", "c7"))
    typed = before + "ta"
    rest = forward.continuation(CursorState.of("a.py", typed + after, len(typed), 1))
    assert rest == CachedCompletion("x(amount, kind)", "c7")
    wrong = before + "to"
    assert forward.continuation(CursorState.of("a.py", wrong + after, len(wrong), 1)) is None
    assert forward.continuation(CursorState.of("a.py", typed + after + "y\n", len(typed), 1)) is None
    assert forward.continuation(CursorState.of("a.py", before + after, len(before), 1)) is None  # nothing typed
    whole = before + "tax(amount, kind)"  # typed it all: nothing left to offer
    assert forward.continuation(CursorState.of("a.py", whole + after, len(whole), 1)) is None
    assert forward.continuation(CursorState.of("a.py", typed + after, len(typed), 2)) is None


# -- feedback ---------------------------------------------------------------------------------------------


def test_feedback_log_appends_json_lines_with_the_fragments(tmp_path: Path):
    shown_completions = ShownCompletions(entries=1)
    fragments = (ScoredFragment(3, "pkg/helpers.py", 0, 20, 4.0, 2.0, 5.0),
                 ScoredFragment(9, "pkg/models.py", 10, 30, 3.0, 1.0, 3.5))
    first = ShownCompletion(shown_completions.new_id(), "pkg/sub/service.py", 4, 8, "slugify(name)", "fragrel",
                            "llama.cpp:m.gguf", fragments, frozenset({3}))
    shown_completions.add(first)
    second = ShownCompletion(shown_completions.new_id(), "a.py", 0, 0, "y", "infile", "b", (), frozenset())
    shown_completions.add(second)
    assert shown_completions.get(first.completion_id) is None  # only the last one is remembered
    log = FeedbackLog(tmp_path / "deep" / "feedback.jsonl")
    assert log.append("accept", first) is None
    assert log.append("reject", second) is None
    lines = [json.loads(line) for line in log.path.read_text().splitlines()]
    assert [line["event"] for line in lines] == ["accept", "reject"]
    assert lines[0]["completion"] == "slugify(name)" and lines[0]["path"] == "pkg/sub/service.py"
    assert [(f["path"], f["in_prompt"]) for f in lines[0]["fragments"]] == [("pkg/helpers.py", True),
                                                                             ("pkg/models.py", False)]
    assert lines[0]["fragments"][0]["s_rel"] == 5.0
    # Lines as every other JSON output writes them: 1-based, inclusive (the fragment holds 0..19).
    assert (lines[0]["fragments"][0]["start_line"], lines[0]["fragments"][0]["end_line"]) == (1, 20)


# -- core additions ---------------------------------------------------------------------------------------


def _indexed(root: Path) -> RepoService:
    service = RepoService.open(root)
    assert isinstance(service, RepoService)
    report = service.ensure_index()
    assert report.fragments > 0
    return service


def test_strongest_lift_is_the_largest_term_of_eq_9(package_repo: Path):
    service = _indexed(package_repo)
    index = service.index
    scores = score_fragments(index, QUERY, alpha=0.5)
    top = top_fragments(index, scores, 5)
    w = index.relation_matrix().toarray()
    lifts = strongest_lifts(index, scores, [f.fragment for f in top])
    assert any(lift is not None for lift in lifts)
    for fragment, lift in zip(top, lifts):
        terms = w[fragment.fragment] * np.where(index.live, scores.s_ind, 0.0)
        terms[fragment.fragment] = 0.0
        if terms.max() <= 0:
            assert lift is None
            continue
        assert lift.fragment == int(np.argmax(terms))
        assert lift.weight == w[fragment.fragment, lift.fragment]
        assert np.isclose(lift.share, terms.max() / terms.sum())


def test_retrieval_time_budget_degrades_to_bm25(package_repo: Path):
    service = _indexed(package_repo)
    index = service.index
    late = score_fragments(index, QUERY, alpha=0.5, deadline=time.perf_counter() - 1.0)
    on_time = score_fragments(index, QUERY, alpha=0.5, deadline=time.perf_counter() + 60.0)
    assert not late.environment and on_time.environment
    assert not late.s_env.any() and on_time.s_env.any()
    usable = ~np.isnan(late.s_rel)
    assert np.array_equal(late.s_rel[usable], late.s_ind[usable])
    assert np.array_equal(on_time.s_rel, score_fragments(index, QUERY, alpha=0.5).s_rel, equal_nan=True)


def test_explain_scores_given_fragments_with_lifts(package_repo: Path):
    service = _indexed(package_repo)
    text = (package_repo / "pkg/sub/service.py").read_text()
    cursor = locate(service.root, "pkg/sub/service.py", text, 12, None)
    fresh = service.view().explain(cursor, alpha=0.5)
    assert 3 <= len(fresh) <= service.config.retrieval.top_k
    chosen = [fresh[2][0].fragment, fresh[0][0].fragment]
    again = service.view().explain(cursor, alpha=0.5, fragments=chosen)
    assert [f.fragment for f, _ in again] == chosen  # in the order asked, same scores
    assert again[1][0].s_rel == fresh[0][0].s_rel


def test_file_events_reindex_from_disk_and_save_persists(package_repo: Path):
    service = _indexed(package_repo)
    helpers = package_repo / "pkg" / "helpers.py"
    helpers.write_text(helpers.read_text() + "\n\ndef zebra_crossing_total(x):\n    return x\n")
    assert service.file_changed("pkg/helpers.py") is None
    assert any(f.path == "pkg/helpers.py" for f in service.view().retrieve("zebra_crossing_total", k=3))
    service.set_buffer("pkg/models.py", "def only_in_buffer():\n    pass\n")
    (package_repo / "pkg" / "models.py").write_text("def on_disk():\n    pass\n")
    service.file_changed("pkg/models.py")  # the open buffer wins over the disk
    assert service.view().retrieve("only_in_buffer", k=1)[0].path == "pkg/models.py"
    assert service.save() is None
    loaded = load_index(package_repo, load_config(package_repo)[0])
    assert "zebra" in loaded.vocabulary


def test_only_the_most_recent_open_buffers_are_overlaid_on_the_index(package_repo: Path):
    """Issue 34: every open buffer was overlaid on the index (~200 KB each), so 3,000 open documents
    took 1.3 GB. Only the server.indexed_buffers most recently edited or asked in are; the others
    are kept as text and overlaid again when edited or asked in."""
    session = CompletionSession(package_repo, with_overrides(Config(), server={"indexed_buffers": 2}),
                                lambda level, message: None)
    session.install_index(session.build_index(NoProgress()))
    paths = [f"pkg/opened_{number}.py" for number in range(4)]
    for number, path in enumerate(paths):
        session.buffer_changed(path, f"def only_in_buffer_{number}(value):\n    return value + {number}\n")
    session.sync_buffers()

    def overlaid() -> set[str]:
        return {path for path in paths if session.service.index.record(path) is not None}

    assert overlaid() == set(paths[2:])
    explained = session.explain(paths[0], session.open_buffers[paths[0]], 1, 4, None)  # asked in: overlaid again
    assert "error" not in explained, explained
    assert overlaid() == {paths[0], paths[3]}
    assert session.service.view().retrieve("only_in_buffer_0", k=1)[0].path == paths[0]
    session.buffer_changed(paths[1], "def edited_again(value):\n    return value\n")
    session.buffer_closed(paths[0])
    session.drop_closed_buffer(paths[0])
    session.sync_buffers()
    assert overlaid() == {paths[1], paths[3]}


def test_a_document_closed_and_opened_again_while_the_model_is_busy_keeps_its_new_text(package_repo: Path):
    """VS Code changing a file's language closes and reopens it at once. The close's work waited for
    the model thread behind the reopen's text, then took that text away: the index held the disk's
    version until the next keystroke."""
    session = CompletionSession(package_repo, Config(), lambda level, message: None)
    session.install_index(session.build_index(NoProgress()))
    path = "pkg/reopened.py"
    session.buffer_changed(path, "def first_version(value):\n    return value\n")
    session.sync_buffers()
    session.buffer_closed(path)  # the event loop: close, then open again, while the model is busy
    session.buffer_changed(path, "def second_version(value):\n    return value\n")
    session.drop_closed_buffer(path)  # the model thread, later, in the order they came
    session.sync_buffers()
    assert session.service.view().retrieve("second_version", k=1)[0].path == path
    assert session.service.index.record(path) is not None
    session.buffer_closed(path)  # closed for good: the disk's text counts again (it has none)
    session.drop_closed_buffer(path)
    assert session.service.index.record(path) is None


def test_an_empty_settings_object_from_neovim_is_no_settings():
    """Neovim encodes an empty Lua table as `[]`: `settings = { repomem = {} }` arrives as
    `{"repomem": []}` (Neovim 0.12 with no user settings warned "unknown repomem setting 'repomem'")."""
    from repomem.config import Config

    nothing_sent = apply_settings(Config(), {})
    for sent in ({"repomem": []}, {"repomem": None}, {"repomem": {}}):
        assert apply_settings(Config(), sent) == nothing_sent, sent
    assert nothing_sent[1] == []
    assert settings_after_change({"repomem": {}}, {"repomem": []}) == {}


def test_inline_context_as_vscode_languageclient_sends_it_is_read_as_meant():
    """lsp/client_quirks.py: VS Code's own trigger kind (0 = Invoke) and Range (a list) arrive
    unconverted from vscode-languageclient 9; LSP's own shapes pass as they are."""
    from repomem.lsp.client_quirks import lenient_converter

    converter = lenient_converter()
    at = {"line": 8, "character": 11}

    def context(**fields) -> types.InlineCompletionContext:
        params = {"textDocument": {"uri": "file:///r/a.py"}, "position": at, "context": fields}
        return converter.structure(params, types.InlineCompletionParams).context

    vscode = context(triggerKind=0, selectedCompletionInfo={"range": [at, at], "text": "compute"})
    assert vscode == types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked)
    lsp_range = {"start": at, "end": {"line": 8, "character": 14}}
    proper = context(triggerKind=2, selectedCompletionInfo={"range": lsp_range, "text": "com"})
    assert proper.trigger_kind is types.InlineCompletionTriggerKind.Automatic
    assert proper.selected_completion_info == types.SelectedCompletionInfo(
        range=types.Range(types.Position(8, 11), types.Position(8, 14)), text="com")
    assert context(triggerKind=1).trigger_kind is types.InlineCompletionTriggerKind.Invoked


def test_positions_and_texts_of_the_wrong_json_type_are_invalid_params_not_misread():
    """cattrs read a line "1" as 1, 1.5 as 1 and true as 1 (a completion at another position than
    asked; the custom messages refused them), and a change's `"text": null` as the text "None",
    written into the server's copy of the document. They are invalid params now."""
    import cattrs

    from repomem.lsp.client_quirks import lenient_converter

    converter = lenient_converter()
    uri = "file:///r/a.py"
    at = {"line": 1, "character": 4}
    assert converter.structure({"textDocument": {"uri": uri}, "position": at},
                               types.CompletionParams).position == types.Position(1, 4)
    for line in ("1", 1.5, 1.0, True, None):
        with pytest.raises(cattrs.BaseValidationError):
            converter.structure({"textDocument": {"uri": uri}, "position": {**at, "line": line}},
                                types.CompletionParams)
    partial = {"range": {"start": at, "end": at}, "text": "x"}
    for change in (partial, {"text": "x = 1\n"}):
        params = {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [change]}
        assert converter.structure(params, types.DidChangeTextDocumentParams).content_changes[0].text == change["text"]
        for text in (None, 5):
            with pytest.raises(cattrs.BaseValidationError):
                converter.structure({**params, "contentChanges": [{**change, "text": text}]},
                                    types.DidChangeTextDocumentParams)
    texted_line = {**partial, "range": {"start": {"line": "0", "character": 0}, "end": at}}
    with pytest.raises(cattrs.BaseValidationError):
        converter.structure({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [texted_line]},
                            types.DidChangeTextDocumentParams)
    with pytest.raises(cattrs.BaseValidationError):
        converter.structure({"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": None}},
                            types.DidOpenTextDocumentParams)


def test_the_session_reads_the_disk_watch_before_retrieval_unless_it_is_off(package_repo: Path):
    """server.watch_disk: a file another program writes reaches the next retrieval without a
    client event, and the session asks for the index to be written (after the answer); off, the
    session keeps no watch and such a file waits for a save or a client event."""
    for watch in (True, False):
        persisted: list[int] = []
        session = CompletionSession(package_repo, with_overrides(Config(), server={"watch_disk": watch}),
                                    lambda level, message: None)
        session.on_disk_changed = lambda box=persisted: box.append(1)
        session.install_index(session.build_index(NoProgress()))
        assert session.service.watching is watch
        name = f"pkg/written_{int(watch)}.py"
        (package_repo / name).write_text(f"def written_elsewhere_{int(watch)}(value):\n    return value\n")
        session.sync_buffers()
        assert (session.service.index.record(name) is not None) is watch
        assert bool(persisted) is watch
        session.persist()
        session.service.stop_watching()


def test_a_watch_that_fails_costs_the_watch_never_the_index(package_repo: Path, monkeypatch):
    """An error starting or reading the watch (an embedder the update needs is missing, a file
    system that errs): logged once, the session goes on without the watch."""
    logged: list[tuple[str, str]] = []
    session = CompletionSession(package_repo, Config(), lambda level, message: logged.append((level, message)))

    def broken() -> bool:
        raise OSError("watch refused")

    monkeypatch.setattr(session.service, "watch_tree", broken)
    session.install_index(session.build_index(NoProgress()))
    assert session.index_ready.is_set() and not session.service.watching
    assert any(level == "warning" and "watch refused" in message for level, message in logged)
    monkeypatch.undo()
    session.install_index(session.service.index)
    assert session.service.watching

    def unreadable() -> tuple[int, int]:
        raise OSError("read refused")

    monkeypatch.setattr(session.service, "read_disk_changes", unreadable)
    session.sync_buffers()
    assert not session.service.watching
    assert any("read refused" in message for _, message in logged)


def test_documents_split_lines_where_the_client_does_below_a_form_feed_u2028_and_nel():
    """pygls split a document's lines with str.splitlines, which also breaks at a form feed, U+2028,
    NEL and others: below one, every incremental change landed on the wrong line of the server's
    copy, and columns were converted on the wrong line. The server's workspace now splits at
    "\\n", "\\r\\n" and "\\r" only, from `initialize` on."""
    import asyncio

    from pygls.workspace import Workspace

    from repomem.lsp.documents import ProtocolLinesDocument
    from repomem.lsp.server import RepomemServer, initialize

    ls = RepomemServer()
    ls.protocol._workspace = Workspace(None)  # as pygls makes it at initialize, before the handler

    async def initialized() -> None:
        initialize(ls, types.InitializeParams(capabilities=types.ClientCapabilities()))

    asyncio.run(initialized())
    uri = "file:///page.py"
    text = "def f(x):\f\n    return \r\nz = '\u2028'\nnel\x85 é😀 = f(\n"
    ls.workspace.put_text_document(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    document = ls.workspace.get_text_document(uri)
    assert isinstance(document, ProtocolLinesDocument)
    assert list(document.lines) == ["def f(x):\f\n", "    return \r\n", "z = '\u2028'\n", "nel\x85 é😀 = f(\n"]
    # "x" typed at the end of "    return " (the client's line 1) and after "f(" on line 3, whose
    # column counts the emoji as two UTF-16 units.
    for line, character, typed in ((1, 11, "x"), (3, 13, "y")):
        where = types.Range(start=types.Position(line=line, character=character),
                            end=types.Position(line=line, character=character))
        ls.workspace.update_text_document(types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                                          types.TextDocumentContentChangePartial(range=where, text=typed))
    assert document.source == "def f(x):\f\n    return x\r\nz = '\u2028'\nnel\x85 é😀 = f(y\n"
    position = document.position_from_client_units(types.Position(line=3, character=13))
    assert (position.line, position.character) == (3, 12)


def test_an_incremental_change_is_spliced_as_pygls_splices_it():
    """The server's documents splice a change by offsets and split only the changed lines again
    (pygls wrote the text again line by line, in Python, and the whole text was split twice: a
    keystroke in a 20 MB file took half a second); random changes of every shape the protocol
    allows, ranges ending on the last line and past the end included, give pygls's text, and
    lines as a fresh split gives them (a lone "\r" before a new "\n" is one break)."""
    import random

    from pygls.workspace import TextDocument
    from pygls.workspace.position_codec import PositionCodec

    from repomem.lsp.documents import ProtocolLinesDocument

    rng = random.Random(7)
    pieces = ["a", "é", "😀", " ", "\n", "\r\n", "\r", "xyz", "\t"]
    split = ProtocolLinesDocument("file:///whole.py", source="")  # a fresh split of a text, for the kept lines
    for _ in range(600):
        text = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 40)))
        documents = [kind("file:///t.py", source=text, version=1, sync_kind=types.TextDocumentSyncKind.Incremental,
                          position_codec=PositionCodec(types.PositionEncodingKind.Utf16))
                     for kind in (TextDocument, ProtocolLinesDocument)]
        for _ in range(4):
            lines = documents[0].lines
            start_line = rng.randrange(0, len(lines) + 1)
            end_line = rng.randrange(start_line, len(lines) + 2)

            codec = documents[0].position_codec
            units = [codec.client_num_units(line.rstrip("\r\n")) for line in lines] + [0, 0]
            start = types.Position(start_line, rng.randrange(0, units[start_line] + 1))
            low = start.character if end_line == start_line else 0
            end = types.Position(end_line, rng.randrange(low, max(low, units[end_line]) + 1))
            inserted = "".join(rng.choice(pieces) for _ in range(rng.randrange(0, 4)))
            for document in documents:
                document.apply_change(types.TextDocumentContentChangePartial(range=types.Range(start, end),
                                                                             text=inserted))
            assert documents[1].source == documents[0].source, (text, start, end, inserted)
            split._source = documents[1].source
            assert documents[1].lines == split.lines, (text, start, end, inserted)


def test_indexing_starts_whatever_the_client_answers_about_its_progress_token(monkeypatch):
    """The index was built only once the client answered `window/workDoneProgress/create`: a client
    that never answered got no index for the whole session (completions from the open file only),
    and one that answered with an error left a traceback on stderr."""
    import concurrent.futures
    import threading
    from types import SimpleNamespace

    from repomem.lsp.server import LspProgress, RepomemServer

    sent: list[tuple[str, str]] = []
    created: list[concurrent.futures.Future] = []

    class Progress:
        def create(self, token):
            created.append(concurrent.futures.Future())
            return created[-1]

        def begin(self, token, value):
            sent.append(("begin", value.message))

        def report(self, token, value):
            sent.append(("report", value.message))

        def end(self, token, value):
            sent.append(("end", value.message))

    capabilities = SimpleNamespace(window=SimpleNamespace(work_done_progress=True))
    monkeypatch.setattr(RepomemServer, "client_capabilities", property(lambda self: capabilities))
    monkeypatch.setattr(RepomemServer, "work_done_progress", property(lambda self: Progress()))
    monkeypatch.setattr(RepomemServer, "call_from_thread", lambda self, function, *args: function(*args))
    ls = RepomemServer()
    try:
        ls.session = SimpleNamespace(config=Config())
        ran = threading.Event()
        progresses: list[LspProgress] = []

        def work(progress: LspProgress) -> None:
            progresses.append(progress)
            progress.open("loading the index")
            progress.start("parsing", 2)
            ran.set()

        ls.with_progress("indexing", work)
        assert ran.wait(10), "the work waited for the client's answer"
        assert sent == []  # no report before the token is the client's
        created[-1].set_result(None)  # accepted late: the opening is sent then
        progresses[-1].end("done")
        assert [kind for kind, _ in sent] == ["begin", "end"] and sent[0][1] == "loading the index"
        sent.clear()
        ls.with_progress("indexing", work)
        created[-1].set_exception(RuntimeError("no"))
        assert ran.wait(10) and sent == []
    finally:
        ls.session = None
        ls.shutdown()


def test_custom_messages_take_unsigned_positions_only():
    """A negative line given to `repomem.explain` answered a JSON-RPC error with a traceback."""
    from repomem.lsp.server import _document_position

    def at(line, character):
        return _document_position({"textDocument": {"uri": "file:///r/a.py"},
                                   "position": {"line": line, "character": character}})

    assert at(3, 4) == ("file:///r/a.py", types.Position(line=3, character=4))
    assert at(-1, 0) is None and at(0, -2) is None and at(True, 0) is None and at(1.5, 0) is None


def test_a_file_refused_for_a_long_line_is_said_once_not_at_every_request(package_repo: Path):
    """A cursor in a file repomem does not complete in (a minified line) logged the refusal at every
    keystroke's request; it is said once per file, and again once the file was completed in."""
    logs: list[tuple[str, str]] = []
    session = CompletionSession(package_repo, Config(), lambda level, message: logs.append((level, message)))
    minified = "var a=1;" * 2000 + "\n"
    for typed in ("x", "xy", "xyz"):
        answer = session.complete(EditorRequest("pkg/app.min.js", minified + typed, 1, len(typed), lambda: False))
        assert answer.finish_reason == "failed"
    refused = [message for _, message in logs if "scan.max_line_chars" in message]
    assert len(refused) == 1, logs
    other = session.complete(EditorRequest("pkg/other.min.js", minified, 0, 3, lambda: False))
    assert other.finish_reason == "failed"
    assert len([message for _, message in logs if "scan.max_line_chars" in message]) == 2, logs


def test_a_position_past_the_protocols_unsigned_range_in_a_custom_message_is_no_position():
    """repomem/didMoveCursor and repomem.explain read their positions by hand: a line past LSP's
    uinteger (2**31 - 1) made lsprotocol's Position raise, an "Error in server" pop-up."""
    from repomem.lsp.server import _document_position

    uri = "file:///repo/a.py"
    for line, character in [(2**40, 0), (0, 2**31), (-1, 0), (True, 0), (1.5, 0)]:
        position = {"line": line, "character": character}
        assert _document_position({"textDocument": {"uri": uri}, "position": position}) is None
    assert _document_position({"textDocument": {"uri": uri}, "position": {"line": 2**31 - 1, "character": 0}}) == (
        uri, types.Position(line=2**31 - 1, character=0))


def test_settings_under_the_repomem_key_that_are_not_an_object_are_said_to_be_so():
    """`{"repomem": 5}` was read as a flat setting named "repomem": "unknown repomem setting
    'repomem' ignored", which hid what was wrong."""
    config, problems = apply_settings(Config(), {"repomem": 5})
    assert [client_problem_line(p) for p in problems] == [
        "repomem settings must be an object, got int; defaults kept"]
    assert config.retrieval.top_k == apply_settings(Config(), None)[0].retrieval.top_k
