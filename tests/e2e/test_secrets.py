"""No planted secret reaches the index or a prompt: a real index, the real embedded model (its
requests recorded on the way out), and the CLI as a user runs it."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from repomem.completion.engine import CompletionEngine
from repomem.failures import Failure
from repomem.positions import locate
from repomem.service import RepoService
from tests.cli_process import run
from tests.http_servers import serve_http
from tests.repos import write_repo

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
        env = {**os.environ, "PLANTED_SECRET": DB_PASSWORD, "REPOMEM_CONFIG": str(tmp_path / "none.toml")}
        completed = subprocess.run([sys.executable, "-m", "repomem", "complete", f"{repo}/service/client.py:12",
                                    "--strategy", "infile", "--max-tokens", "2", "--json"],
                                   capture_output=True, text=True, env=env, timeout=600)
    finally:
        server.shutdown()
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["backend"].startswith("llama.cpp:")
    assert "completion.endpoint ignored" in completed.stderr and "completion.api_key_env ignored" in completed.stderr
    assert _Counting.requests == []
