"""No corpus secret reaches a model server, whatever file the cursor is in: the secret corpus
(tests/data/secrets: every file type it holds, indexed or not) as one repository, a recording
OpenAI-compatible server (tests/e2e/test_secrets.py) as the model, and completions with the cursor
in each file in turn, through the engine, the CLI (`repomem complete --endpoint`) and the language
server (`repomem serve`, driven by pytest-lsp). Every request the server hears (model list,
tokenizer, completions) is searched for every planted secret. A file that is a credentials file
by its content (`secret_file_reason`) is refused instead, and says so."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from repomem.index.secrets import secret_file_reason
from tests.cli_process import run
from tests.e2e.test_secrets import _RecordingModelServer
from tests.http_servers import serve_http
from tests.secret_corpus import CorpusFile, HeardText, corpus_files, leaked


@pytest.fixture(scope="module")
def corpus() -> list[CorpusFile]:
    return corpus_files()


@pytest.fixture(scope="module")
def repo(tmp_path_factory, corpus) -> Path:
    root = tmp_path_factory.mktemp("cursors") / "corpus"
    (root / ".git").mkdir(parents=True)
    for file in corpus:
        (root / file.path).write_text(file.text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def server():
    _RecordingModelServer.heard = []
    httpd, url = serve_http(_RecordingModelServer)
    yield url
    httpd.shutdown()


def cursors(file: CorpusFile, inside: bool = False) -> list[tuple[int, int]]:
    """0-based (line, column) cursors: the end of the first and of the last line holding a secret
    (its value in the cursor's own line, left of the cursor), the start of the line after the
    first, and the file's end (the whole file above the cursor). `inside`: also the middle of each
    one-line secret value (its halves, masked apart, looked like no secret: both were sent)."""
    lines = file.text.rstrip("\n").split("\n")
    secret_lines = sorted({p.line for p in file.planted if p.secret})
    chosen = {(line, len(lines[line])) for line in secret_lines[:1] + secret_lines[-1:]}
    chosen |= {(line + 1, 0) for line in secret_lines[:1] if line + 1 < len(lines)}
    chosen.add((len(lines) - 1, len(lines[-1])))
    if inside:
        for planted in file.planted:
            at = lines[planted.line].find(planted.value) if planted.secret and "\n" not in planted.value else -1
            if at >= 0 and len(planted.value) >= 8:
                chosen.add((planted.line, at + len(planted.value) // 2))
    return sorted(chosen)


def assert_nothing_leaked(corpus: list[CorpusFile], heard: list[str]) -> None:
    text = HeardText("\n".join(heard))
    leaks = [f"{file.path}: {planted.shape}" for file in corpus for planted in file.planted
             if planted.secret and leaked(planted.value, text)]
    assert not leaks, leaks


def test_the_engine_sends_no_secret_with_the_cursor_anywhere(repo, server, corpus, monkeypatch):
    from repomem.backends.openai_http import OpenAIBackend
    from repomem.completion.engine import CompletionEngine
    from repomem.failures import Failure
    from repomem.positions import locate
    from repomem.service import RepoService

    (repo.parent / "no-user-config.toml").write_text("")
    monkeypatch.setenv("REPOMEM_CONFIG", str(repo.parent / "no-user-config.toml"))
    _RecordingModelServer.heard = []
    service = RepoService.open(repo)
    assert not isinstance(service.ensure_index(), Failure)
    backend = OpenAIBackend.connect(server)
    assert not isinstance(backend, Failure), backend
    engine = CompletionEngine(service, backend)
    completed, refused, inside_secrets = 0, set(), 0
    for file in corpus:
        for line, column in cursors(file, inside=True):
            cursor = locate(repo, file.path, file.text, line + 1, column + 1)
            assert not isinstance(cursor, Failure), (file.path, cursor)
            result = engine.complete(cursor, max_new_tokens=1)
            if isinstance(result, Failure) and result.kind == "secret-at-cursor":
                inside_secrets += 1
            elif isinstance(result, Failure):
                assert result.kind == "secret-file", (file.path, result)
                refused.add(file.path)
            else:
                completed += 1
    assert inside_secrets > 20  # the cursors in the middle of secrets: refused, not sent in halves
    assert refused == {file.path for file in corpus if secret_file_reason(file.text)}
    assert refused >= {"pull-secret.yml", "id_deploy.txt", "netrc.txt"}
    prompts = [entry for entry in _RecordingModelServer.heard if entry.startswith("POST /v1/completions")]
    assert completed > 80 and len(prompts) == completed
    assert any("[REDACTED]" in prompt for prompt in prompts)
    assert_nothing_leaked(corpus, _RecordingModelServer.heard)


# One file of each kind the CLI meets (a process each costs ~2.7 s; the engine test takes every file).
CLI_FILES = ("settings.py", "services.yml", "integrations.json", "run-log.ipynb", "SETUP.md", "deploy.cfg",
             "netrc.txt", "pull-secret.yml", "main.go")


def test_the_cli_sends_no_secret_with_the_cursor_in_each_file(repo, server, corpus):
    _RecordingModelServer.heard = []
    corpus = [file for file in corpus if file.path in CLI_FILES]
    assert len(corpus) == len(CLI_FILES)
    (repo.parent / "no-user-config.toml").write_text("")
    env = {**os.environ, "REPOMEM_CONFIG": str(repo.parent / "no-user-config.toml")}
    env.pop("REPOMEM_DEBUG", None)
    outcomes = {}
    for file in corpus:
        line = len(file.text.rstrip("\n").split("\n"))
        done = run("complete", f"{repo / file.path}:{line}", "--endpoint", server, "--max-tokens", "1", "--json",
                   env=env)
        outcomes[file.path] = done.returncode
        if done.returncode:
            assert done.returncode == 2 and "repomem never completes in it" in done.stderr, (file.path, done.stderr)
            assert "Traceback" not in done.stderr
        else:
            assert "[REDACTED]" not in json.loads(done.stdout)["completion"]
    assert {path for path, code in outcomes.items() if code} == {f.path for f in corpus if secret_file_reason(f.text)}
    assert_nothing_leaked(corpus_files(), _RecordingModelServer.heard)


SERVE = ClientServerConfig(server_command=[sys.executable, "-m", "repomem", "serve"])


@pytest_lsp.fixture(scope="module", config=SERVE)
async def client(lsp_client: LanguageClient, repo: Path, server: str):
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=repo.as_uri(),
        initialization_options={"repomem": {"endpoint": server, "maxNewTokens": 1, "debounceMs": 0,
                                            "answerWithinMs": 120000}},
    ))
    deadline = asyncio.get_running_loop().time() + 240
    while not any("repomem: ready" in m.message for m in lsp_client.log_messages):
        assert asyncio.get_running_loop().time() < deadline, [m.message for m in lsp_client.log_messages]
        await asyncio.sleep(0.1)
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio(loop_scope="module")
async def test_the_language_server_sends_no_secret_with_the_cursor_in_each_file(client: LanguageClient, corpus,
                                                                             repo: Path):
    _RecordingModelServer.heard = []
    answered = 0
    for file in corpus:
        uri = (repo / file.path).as_uri()
        client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
            uri=uri, language_id="plaintext", version=1, text=file.text)))
        for line, column in cursors(file)[-2:]:
            result = await client.text_document_completion_async(types.CompletionParams(
                types.TextDocumentIdentifier(uri), types.Position(line=line, character=column)))
            answered += result is not None
    assert answered > 0
    assert any(entry.startswith("POST /v1/completions") for entry in _RecordingModelServer.heard)
    assert_nothing_leaked(corpus, _RecordingModelServer.heard)


# A secret typed key by key: the editor sends its buffer at every keystroke, the cursor after what
# is typed, the literal not closed yet (or closed by the editor's quote pairing, right of the cursor).
TYPED = "Xq9vLz3Kp7RtW2mNc4Hs8Jd1"
TYPED_LINES = {  # path: the line's head, before the value
    "app/settings.py": 'DB_PASSWORD = "',
    "deploy/values.yml": "  api_key: '",
    "config/integrations.json": '  "client_secret": "',
    "scripts/release.sh": 'export GITHUB_TOKEN="',
}


@pytest.mark.parametrize("paired", [False, True], ids=["unpaired", "quotes-paired"])
def test_a_secret_typed_key_by_key_reaches_no_model_server(tmp_path, server, monkeypatch, paired: bool):
    """From the first character typed on, no request the model server hears (prompts, tokenizer
    calls) carries any part of the value (before, its first 11 characters went out: too short to be
    taken for a secret). With the cursor after it, the literal open left of the cursor, completion
    is refused (a completion there would be the rest of the secret); with the cursor on the next
    line, the literal still open at its line's end is masked, whatever its length."""
    from repomem.backends.openai_http import OpenAIBackend
    from repomem.completion.engine import CompletionEngine
    from repomem.failures import Failure
    from repomem.positions import locate
    from repomem.service import RepoService

    (tmp_path / "no-user-config.toml").write_text("")
    monkeypatch.setenv("REPOMEM_CONFIG", str(tmp_path / "no-user-config.toml"))
    repo = tmp_path / "typing"
    (repo / ".git").mkdir(parents=True)
    for path, head in TYPED_LINES.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(f"# {path}\n{head.strip()}\nvalue = 1\n", encoding="utf-8")
    service = RepoService.open(repo)
    assert not isinstance(service.ensure_index(), Failure)
    backend = OpenAIBackend.connect(server)
    assert not isinstance(backend, Failure), backend
    engine = CompletionEngine(service, backend)
    _RecordingModelServer.heard = []
    refused = completed = 0
    for path, head in TYPED_LINES.items():
        for typed in range(1, len(TYPED) + 1):
            line = head + TYPED[:typed]
            text = f"# {path}\n{line}{head[-1] if paired else ''}\nvalue = 1\n"
            places = [(2, len(line) + 1)] + ([] if paired else [(3, len("value = 1") + 1)])
            for number, column in places:
                cursor = locate(repo, path, text, number, column)
                assert not isinstance(cursor, Failure), cursor
                result = engine.complete(cursor, max_new_tokens=1)
                if number == 2:
                    assert isinstance(result, Failure) and result.kind == "secret-at-cursor", (path, typed, result)
                    refused += 1
                else:
                    assert not isinstance(result, Failure), (path, typed, result)
                    completed += 1
    heard = "\n".join(_RecordingModelServer.heard)
    leaks = [TYPED[:typed] for typed in range(3, len(TYPED) + 1) if TYPED[:typed] in heard]
    assert not leaks, leaks
    assert refused == len(TYPED_LINES) * len(TYPED)
    if not paired:  # the line above the cursor reached the server, its value masked
        sent = json.dumps(TYPED_LINES["app/settings.py"] + "[REDACTED]")[1:-1]  # as a request's JSON holds it
        assert completed == refused and heard.count(sent) >= len(TYPED)
