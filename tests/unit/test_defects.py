"""Defects the layout issue found, each pinned by a test that failed before its fix."""

from __future__ import annotations

import gc
import http.server
import json
import weakref
from pathlib import Path

import pytest

from repomem.backends.vllm_local import VLLMBackend
from repomem.completion.request import CompletionRequest, read_cursor
from repomem.config import Config
from repomem.failures import Failure
from repomem.lsp.session import CompletionSession, EditorRequest
from repomem.positions import locate
from repomem.strategies import strategy_named
from tests.http_servers import answer_json, serve_http

# -- the cursor's file is read with its own grammar ------------------------------------------------


def cursor_context(tmp_path: Path, path: str, text: str):
    lines = text.split("\n")
    cursor = locate(tmp_path, path, text, len(lines), None)
    assert not isinstance(cursor, Failure)
    request = CompletionRequest(cursor, strategy_named("infile"), 0.0, "score", False, 16)
    return read_cursor(request, 20, supports_fim=False)


@pytest.mark.parametrize(("path", "text"), [
    # A comment ending in ':' reads as a block opener to Python's rules ('//' is not a comment there).
    ("web/cart.js", "function total(items) {\n  // TODO: handle refunds:"),
    # A label ending in ':' would open an indented block under Python's rules (Go's own `case 1:`
    # opens its arm's statements, as Go's rules say).
    ("cmd/main.go", "package main\n\nfunc f(xs []int) int {\nouter:"),
])
def test_a_cursor_outside_python_is_not_completed_with_python_rules(tmp_path, path, text):
    context = cursor_context(tmp_path, path, text)
    assert context.language == path.rsplit(".", 1)[1].replace("js", "javascript")
    assert not context.shape.multiline  # one line, as the language's own rules say


def test_python_cursors_still_open_blocks(tmp_path):
    context = cursor_context(tmp_path, "pkg/mod.py", "def total(items):\n    for item in items:")
    assert context.language == "python" and context.shape.multiline


# -- the language server keeps one feedback log (and its lock) ------------------------------------


def test_the_session_keeps_one_feedback_log(tmp_path):
    session = CompletionSession(tmp_path, Config(), lambda level, message: None)
    first = session.feedback
    assert session.feedback is first  # one object, so its lock serialises concurrent appends
    session.configure({"feedbackLog": str(tmp_path / "elsewhere.jsonl")})
    assert session.feedback is not first and session.feedback.path == tmp_path / "elsewhere.jsonl"


# -- a backend that fails mid-call is reopened, whatever the failure's wording -------------------


class _GarbageCompletions(http.server.BaseHTTPRequestHandler):
    """A server that lists a model and counts tokens, then streams garbage for completions."""

    model_lists = 0

    def do_GET(self):  # noqa: N802
        type(self).model_lists += 1
        answer_json(self, {"data": [{"id": "qwen2.5-coder-0.5b"}]})

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        payload = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/tokenize":
            answer_json(self, {"tokens": [0] * max(1, len(str(payload.get("prompt", "")).split()))})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b"data: {this is not json\n\n")

    def log_message(self, *args):
        pass


def test_a_garbage_answer_makes_the_session_reopen_the_model(tmp_path):
    server, url = serve_http(_GarbageCompletions)
    logs: list[tuple[str, str]] = []
    try:
        session = CompletionSession(tmp_path, Config(), lambda level, message: logs.append((level, message)))
        assert session.configure({"endpoint": url,
                                  "strategy": "infile"}) == []
        request = EditorRequest("a.py", "def f(x):\n    return ", 1, 11, lambda: False)
        answer = session.complete(request)
        assert answer.finish_reason == "failed" and answer.text == ""
        assert session.engine is None and session.backend is None  # dropped: bad-response means broken
        assert any("reopened" in message for _, message in logs)
        assert _GarbageCompletions.model_lists == 1
    finally:
        server.shutdown()


# -- vLLM's close() gives the engine back ------------------------------------------------------------


class _StandInLLM:
    """Stands in for vllm.LLM, which needs a GPU and cannot be installed here; the backend's own
    code (close, and what it does after) is what runs."""

    def get_tokenizer(self):
        return self

    def encode(self, text, add_special_tokens=False):
        return text.split()


def test_vllm_close_releases_the_engine():
    llm = _StandInLLM()
    alive = weakref.ref(llm)
    backend = VLLMBackend(llm, dict, "codellama/CodeLlama-7b-hf", 4096)
    assert backend.count("a b c") == 3
    del llm
    backend.close()
    gc.collect()
    assert alive() is None  # nothing keeps the engine (and its GPU memory) alive
    closed = backend.count("a b c")
    assert isinstance(closed, Failure) and closed.kind == "backend-closed"
    backend.close()  # twice is harmless


# -- the language server keeps its index when preparing it for edits fails ---------------------------


def test_an_index_that_could_not_be_prepared_for_edits_is_still_installed(tmp_path, monkeypatch):
    from repomem.index.repo_index import RepoIndex
    from repomem.progress import NoProgress

    (tmp_path / "a.py").write_text("def f(x):\n    return x\n", encoding="utf-8")
    logs: list[tuple[str, str]] = []
    session = CompletionSession(tmp_path, Config(), lambda level, message: logs.append((level, message)))

    def broken(self):
        raise MemoryError("no room for the edit graph")

    monkeypatch.setattr(RepoIndex, "prepare_edits", broken)
    index = session.build_index(NoProgress())
    assert isinstance(index, RepoIndex) and index.n_fragments > 0
    assert any(level == "warning" and "not prepared for edits" in message for level, message in logs), logs


# -- repomem.toml: warnings capped, deep nesting named by its key -----------------------------------


def _repository_config(tmp_path: Path, monkeypatch, text: str) -> list[str]:
    from repomem.config import load_config

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REPOMEM_CONFIG", raising=False)
    (tmp_path / "repomem.toml").write_text(text)
    return load_config(tmp_path)[1]


def test_a_hundred_thousand_unknown_sections_are_twenty_warnings_and_a_count(tmp_path, monkeypatch):
    warnings = _repository_config(tmp_path, monkeypatch, "".join(f"[colour{i}]\n" for i in range(100_000)))
    assert len(warnings) == 21
    assert warnings[0] == f"{tmp_path / 'repomem.toml'}: unknown config section [colour0] ignored"
    assert warnings[-1] == "and 99,980 more config warnings"
    few = _repository_config(tmp_path, monkeypatch, "".join(f"[colour{i}]\n" for i in range(20)))
    assert len(few) == 20 and "more" not in few[-1]


@pytest.mark.parametrize(("text", "said"), [
    ("[colours]\nred = 1\n", "unknown config section [colours] ignored"),
    ("retrieval = 3\n", "config section [retrieval] must be a table; default kept"),
    ("top_k = 3\n", "unknown config key top_k ignored (outside any section; it is a key of [retrieval])"),
    # A key in the wrong section is told where it belongs, as one outside every section is.
    ("[completion]\nalpha = 0.3\n", "unknown config key completion.alpha ignored (it is a key of [retrieval])"),
    ("[completion.lsp]\ntop_k = 3\n", "unknown config key completion.lsp.top_k ignored (it is a key of [retrieval])"),
    ("[completion]\nflavour = 1\n", "unknown config key completion.flavour ignored"),
    # Every folder name ends with "": every folder was excluded, silently.
    ('[scan]\nexcluded_dir_suffixes = [""]\n', "config scan.excluded_dir_suffixes=[''] must not hold an empty "
                                                "name; default ['.egg-info', '.dist-info'] kept"),
])
def test_section_problems_name_their_file_and_a_list_holds_no_empty_name(tmp_path, monkeypatch, text, said):
    """Problems about one key named the file it came from; those about a whole section (or a key
    outside every section) did not, and a user with their own config and a repository's could not
    tell which file to fix. A list setting with an empty name is refused (the suffix "" matched
    every folder)."""
    assert _repository_config(tmp_path, monkeypatch, text) == [f"{tmp_path / 'repomem.toml'}: {said}"]


@pytest.mark.parametrize(("text", "key"), [
    ("a = " + "[" * 5000 + "]" * 5000, "a"),
    ("[retrieval]\nalpha = 0.5\n[completion]\n# [[[[ a comment\nstop = '[[[['\nstrategy = "
     + "{x = " * 3000 + "1" + "}" * 3000, "completion.strategy"),
    ('[[memory.extra]]\nname = "a\\"[[["\nlist = [\n  ' + "[" * 3000 + "]" * 3000 + "\n]\n", "memory.extra.list"),
])
def test_toml_nested_too_deeply_names_its_key(tmp_path, monkeypatch, text, key):
    (warning,) = _repository_config(tmp_path, monkeypatch, text)
    assert warning == f"repomem.toml: {key} is nested too deeply; defaults used"


def test_deep_nesting_elsewhere_is_a_named_problem_not_a_recursion_error(tmp_path):
    """The other TOML that repomem reads: `--set` values and dev set files."""
    from repomem.config import with_assignments
    from repomem.evaluation.build import load_devset

    _, problems = with_assignments(Config(), ["retrieval.alpha=" + "[" * 5000 + "]" * 5000])
    assert [p.render(outcome=False) for p in problems] == ["retrieval.alpha: the value is nested too deeply"]
    devset = tmp_path / "devset.toml"
    devset.write_text("[[repos]]\nname = 'x'\nfiles = " + "[" * 5000 + "]" * 5000 + "\n")
    failure = load_devset(devset)
    assert isinstance(failure, Failure) and failure.message == f"{devset}: repos.files is nested too deeply"
