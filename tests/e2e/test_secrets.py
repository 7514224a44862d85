"""No planted secret reaches the index or a prompt: a real index, the real embedded model (its
requests recorded on the way out), and the CLI as a user runs it."""

from __future__ import annotations

import http.server
import json
import os
from pathlib import Path
from typing import Any

import pytest

from repomem.completion.engine import CompletionEngine
from repomem.failures import Failure
from repomem.positions import locate
from repomem.service import RepoService
from tests.cli_process import run
from tests.http_servers import serve_http
from tests.repos import write_repo
from tests.small_model import SMALL_MODEL_SETTINGS

OPENAI = "sk-live-" + "Zx81QpLm29VbNc74TyRu0Ws5"
AWS_ID = "AKIA" + "Q3EXAMPLE7Z2KXMP"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
DB_PASSWORD = "9fK2pX7qLmN4vB8wR1tY6zH3"
PLANTED = (OPENAI, AWS_ID, AWS_SECRET, DB_PASSWORD)

SETTINGS = f'''"""Service settings."""

API_KEY = "{OPENAI}"
AWS_ACCESS_KEY_ID = "{AWS_ID}"
aws_secret_access_key = "{AWS_SECRET}"
DATABASE_URL = "postgres://app:{DB_PASSWORD}@db.internal:5432/app"


def api_headers(user):
    """Headers for the billing API."""
    return {{"Authorization": f"Bearer {{API_KEY}}", "X-User": user}}
'''

CLIENT = '''"""Calls the billing API."""

from service.settings import api_headers


def charge(user, amount):
    headers = api_headers(user)
    return post("/charge", headers=headers, amount=amount)


def refund(user, amount):
    headers = '''


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return write_repo(tmp_path / "billing", {"service/__init__.py": "", "service/settings.py": SETTINGS,
                                             "service/client.py": CLIENT})


class Recording:
    """The real backend, with every request it is sent kept for inspection."""

    def __init__(self, inner):
        self.inner, self.prompts = inner, []
        self.name, self.template, self.context_tokens = inner.name, inner.template, inner.context_tokens

    def count(self, text):
        return self.inner.count(text)

    def generate(self, request):
        self.prompts.append(request.prompt)
        return self.inner.generate(request)

    def close(self):
        pass


def test_no_planted_secret_reaches_the_index_or_a_prompt(repo: Path, llama):
    service = RepoService.open(repo)
    report = service.ensure_index()
    assert not isinstance(report, Failure), report
    assert dict(report.masked) == {"service/settings.py": 4}
    vocabulary = " ".join(map(str, service.index.vocabulary))
    assert not any(secret in vocabulary for secret in PLANTED)
    recording = Recording(llama)
    engine = CompletionEngine(service, recording)
    client = (repo / "service" / "client.py").read_text()
    last = client.split("\n")
    # In client.py (settings.py is retrieved), then inside settings.py itself (the left context
    # holds the secrets), then after the secrets with the code below the cursor (fill in the middle).
    for path, text, line, column in (
        ("service/client.py", client, len(last), len(last[-1]) + 1),
        ("service/settings.py", SETTINGS, 11, 13),
        ("service/settings.py", SETTINGS, 7, 1),
    ):
        cursor = locate(repo, path, text, line, column)
        assert not isinstance(cursor, Failure), cursor
        result = engine.complete(cursor, "vanilla", max_new_tokens=2)
        assert not isinstance(result, Failure), result
    assert len(recording.prompts) == 3
    assert "settings.py" in recording.prompts[0] and "api_headers" in recording.prompts[0]  # retrieved
    for prompt in recording.prompts:
        assert "[REDACTED]" in prompt
        assert not any(secret in prompt for secret in PLANTED), prompt


def test_index_verbose_counts_masked_secrets_and_json_prompts_carry_none(repo: Path):
    index = run("index", str(repo), "-v")
    assert index.returncode == 0, index.stderr
    assert "masked 4 secrets in service/settings.py" in index.stdout
    completed = run("complete", f"{repo}/service/settings.py:11", "--json", "--max-tokens", "2")
    assert completed.returncode == 0, completed.stderr
    answer = json.loads(completed.stdout)
    assert not any(secret in completed.stdout for secret in PLANTED)
    assert "[REDACTED]" in answer["prompt"]


class _Counting(http.server.BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_GET(self):  # noqa: N802
        type(self).requests.append(f"{self.command} {self.path} {self.headers.get('Authorization')}")
        self.send_response(500)
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args):
        pass


def test_a_hostile_repository_config_reaches_no_server(repo: Path, tmp_path: Path):
    """The repository names an "attacker" server and asks for a secret variable as its API key:
    the completion runs on the embedded model and the server hears nothing."""
    server, url = serve_http(_Counting)
    try:
        (repo / "repomem.toml").write_text(
            f'[completion]\nendpoint = "{url}"\n'
            'api_key_env = "PLANTED_SECRET"\n')
        user = tmp_path / "user.toml"  # the user's own: the small model, nothing about servers
        user.write_text(SMALL_MODEL_SETTINGS)
        env = {**os.environ, "PLANTED_SECRET": DB_PASSWORD, "REPOMEM_CONFIG": str(user)}
        completed = run("complete", f"{repo}/service/client.py:12", "--strategy", "infile", "--max-tokens", "2",
                        "--json", env=env, timeout=600)
    finally:
        server.shutdown()
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["backend"].startswith("llama.cpp:")
    assert "model.endpoint ignored" in completed.stderr and "model.api_key_env ignored" in completed.stderr
    assert _Counting.requests == []


class _RecordingModelServer(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible model server that keeps every request it hears (path and body): its
    model list, a tokenizer (one token per 4 characters) and a streamed completion of one token."""

    heard: list[str] = []

    def _answer(self, payload: dict | str, stream: bool = False) -> None:
        body = payload if isinstance(payload, str) else json.dumps(payload)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if stream else "application/json")
        self.send_header("Content-Length", str(len(body.encode())))
        self.end_headers()
        self.wfile.write(body.encode())

    def do_GET(self):  # noqa: N802
        type(self).heard.append(f"GET {self.path}")
        self._answer({"data": [{"id": "qwen2.5-coder-0.5b-instruct"}]})

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode("utf-8", "replace")
        type(self).heard.append(f"POST {self.path} {body}")
        request = json.loads(body)
        if self.path.endswith("tokenize"):
            text = request.get("prompt") or request.get("input") or ""
            self._answer({"tokens": list(range(len(text) // 4 + 1))})
            return
        event = {"choices": [{"text": " x", "finish_reason": "length"}],
                 "usage": {"prompt_tokens": len(request["prompt"]) // 4, "completion_tokens": 1}}
        self._answer(f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n", stream=True)

    def log_message(self, *args):
        pass


def _windows(lines: list[str], size: int, stride: int) -> list[list[str]]:
    return [lines[start:start + size] for start in range(0, max(len(lines) - size, 0) + stride, stride)]


def test_no_corpus_secret_reaches_a_model_server_from_a_cursor_in_another_file(tmp_path: Path, monkeypatch):
    """The secret corpus (tests/data/secrets) as a repository, completed from cursors in other files
    whose code is each corpus file's code, window by window (so retrieval brings every window of
    it): every request the model server hears (prompts and tokenizer calls) is searched for every
    planted secret. Each secret's line reached the server, masked; none of the values did, but for
    the shapes the corpus's unit test lists as missed."""
    from repomem.index.secrets import mask_secrets
    from repomem.languages.registry import language_of
    from tests.secret_corpus import HeardText, corpus_files, leaked, score

    (tmp_path / "no-user-config.toml").write_text("")
    monkeypatch.setenv("REPOMEM_CONFIG", str(tmp_path / "no-user-config.toml"))
    files = [file for file in corpus_files() if language_of(file.path) is not None]  # what repomem indexes
    assert {file.path.rsplit(".", 1)[-1] for file in files} >= {"py", "sh", "js", "ts", "go"}
    missed = {line.split(": ", 2)[1] for line in score(files, lambda text: mask_secrets(text)[0]).missed}
    callers: dict[str, str] = {}
    for file in files:
        code = file.text
        for planted in file.planted:
            code = code.replace(planted.value, "")
        for number, window in enumerate(_windows(code.split("\n"), 12, 6)):
            callers[f"callers/{file.path.replace('.', '_')}_{number}.py"] = "\n".join(window) + "\n"
    written = {**{file.path: file.text for file in files}, **callers}
    ends = [(path, *_last_line_end(text)) for path, text in callers.items()]
    report = _completed_at(tmp_path / "corpus", written, ends, None)
    assert {path for path, _ in report.masked} == {file.path for file in files if any(p.secret for p in file.planted)}
    heard = HeardText("\n".join(_RecordingModelServer.heard))
    prompts = [json.loads(entry.split(" ", 2)[2])["prompt"] for entry in _RecordingModelServer.heard
               if entry.startswith("POST /v1/completions")]
    assert len(prompts) == len(callers)
    sent = "\n".join(prompts)
    for file in files:
        masked_lines = mask_secrets(file.text)[0].split("\n")
        for planted in file.planted:
            if not planted.secret:
                continue
            shape = f"{file.path}: {planted.shape}"
            assert masked_lines[planted.line].strip() in sent, f"{shape}: its line never reached the server"
            assert leaked(planted.value, heard) == (planted.shape in missed), shape
    assert len(missed) <= 3  # the corpus's own misses (tests/unit/test_secret_corpus.py)


CALLED_SECRETS = {  # path: (text, planted); each reached the server before (a review's, see tests/unit/test_secrets.py)
    "src/app/DataSourceConfig.java": ('''package app;

public class DataSourceConfig {
    public javax.sql.DataSource dataSource() {
        HikariDataSource ds = new HikariDataSource();
        ds.setJdbcUrl("jdbc:postgresql://db.internal:5432/app");
        ds.setUsername("app");
        ds.setPassword("Pq4wLx9Zr2TmK8vN");
        return ds;
    }

    public java.util.Properties mail() {
        java.util.Properties props = new java.util.Properties();
        props.setProperty("mail.smtp.password", "Xq9vLz3Kp7RtW2mN");
        return props;
    }
}
''', ("Pq4wLx9Zr2TmK8vN", "Xq9vLz3Kp7RtW2mN")),
    "app/legacy_db.py": ('''"""Legacy database access."""

DATABASE_URL = "postgres://app:p@ssHn3vQ8kLm2Zx7Rw@db.internal:5432/app"

PASSWORD = \\
    "Rk7mWq2Lz9Xp4TvB"


def fetch(url):
    return requests.get(url, auth=("admin", "Wz5pLq8Kx2Nv7RtM"))
''', ("Hn3vQ8kLm2Zx7Rw", "Rk7mWq2Lz9Xp4TvB", "Wz5pLq8Kx2Nv7RtM")),
}


def test_secrets_given_to_setters_pairs_and_continuations_reach_no_model_server(tmp_path: Path, monkeypatch):
    """Passwords passed to a setter, a (user, password) pair, a dotted property name, after a line
    continuation and in a URL with "@" in the password: from a cursor in another file (retrieved)
    and in the file itself (left context, and right context as fill in the middle), no request the
    model server hears (prompts, tokenizer calls) carries one."""

    (tmp_path / "no-user-config.toml").write_text("")
    monkeypatch.setenv("REPOMEM_CONFIG", str(tmp_path / "no-user-config.toml"))
    repo = tmp_path / "called"
    files = {path: text for path, (text, _) in CALLED_SECRETS.items()}
    for path, (text, planted) in CALLED_SECRETS.items():
        for value in planted:
            text = text.replace(value, "")
        stem, extension = path.rsplit(".", 1)
        files[f"callers/{stem.rsplit('/', 1)[-1]}_caller.{extension}"] = "\n".join(text.split("\n")[:-3]) + "\n"
    cursors = [(path, *place) for path, text in files.items() for place in (_last_line_end(text), (1, 1))]
    report = _completed_at(repo, files, cursors, "vanilla")
    heard = "\n".join(_RecordingModelServer.heard)
    assert "setPassword" in heard and "/tokenize" in heard
    assert [value for _, planted in CALLED_SECRETS.values() for value in planted if value in heard] == []
    assert {path: count for path, count in report.masked if path in CALLED_SECRETS} == {
        path: len(planted) for path, (_, planted) in CALLED_SECRETS.items()}


def _last_line_end(text: str) -> tuple[int, int]:
    """The 1-based line and column at the end of the text's last line (before its final break)."""
    lines = text.split("\n")
    return len(lines) - 1, len(lines[-2]) + 1


def _completed_at(repo: Path, files: dict[str, str], cursors: list[tuple[str, int, int]],
                  strategy: str | None) -> Any:
    """Write `files` into `repo`, index it and complete once at each (path, line, column) against
    the recording server (its `heard` list starts empty); the index's report."""
    from repomem.backends.openai_http import OpenAIBackend
    from repomem.config import load_config, with_overrides

    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text, encoding="utf-8")
    config, _ = load_config(repo)
    config = with_overrides(config, completion={"max_prompt_tokens": 4096}, model={"context_tokens": 8192})
    service = RepoService.open(repo, config)
    report = service.ensure_index()
    assert not isinstance(report, Failure), report
    _RecordingModelServer.heard = []
    server, url = serve_http(_RecordingModelServer)
    try:
        backend = OpenAIBackend.connect(url)
        assert not isinstance(backend, Failure), backend
        engine = CompletionEngine(service, backend)
        for path, line, column in cursors:
            cursor = locate(repo, path, files[path], line, column)
            assert not isinstance(cursor, Failure), cursor
            result = engine.complete(cursor, strategy, max_new_tokens=1) if strategy else \
                engine.complete(cursor, max_new_tokens=1)
            assert not isinstance(result, Failure), result
    finally:
        server.shutdown()
    return report
