"""`repomem summarise` against local OpenAI-compatible servers of our choosing: a server that fails
is one line on stderr naming its error and exit 2 (as `complete` says one), a run where some
summaries failed says what was written and what failed, an empty repository says there is nothing
to summarise, the two calls that measured the cost are not paid twice, and a failing call costs
the backend's retries only."""

from __future__ import annotations

import http.server
import inspect
import json
from pathlib import Path

import pytest

from tests.cli_process import run
from tests.http_servers import answer_json, answer_stream, serve_http
from tests.repos import write_repo

SERVER_ERROR = "CUDA out of memory"
# llama-cpp-python's server for a model loaded without logits_all (its HTTP 500).
LOGPROBS_REFUSED = "logprobs is not supported for models created with logits_all=False"


class _ModelServer(http.server.BaseHTTPRequestHandler):
    """A model list, a tokenizer (a token per 4 characters) and completions: HTTP 500 with an
    OpenAI error body for a prompt holding any of `failing`, the connection closed without an
    answer for one holding any of `dropping`, llama-cpp-python's HTTP 500 refusing `logprobs` for a
    request carrying them when `refuses_logprobs`, else a streamed one-line summary."""

    failing: tuple[str, ...] = ()
    dropping: tuple[str, ...] = ()
    refuses_logprobs = False
    completions: list[str] = []  # the prompts of POST /v1/completions, in order
    logprobs: list[bool] = []  # whether each of them asked for log-probabilities

    def do_GET(self):  # noqa: N802
        answer_json(self, {"data": [{"id": "qwen2.5-coder-0.5b-instruct"}]})

    def do_POST(self):  # noqa: N802
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        if self.path.endswith("tokenize"):
            answer_json(self, {"tokens": list(range(len(request.get("prompt") or "") // 4 + 1))})
            return
        type(self).completions.append(request["prompt"])
        type(self).logprobs.append("logprobs" in request)
        if "logprobs" in request and type(self).refuses_logprobs:
            answer_json(self, {"error": {"message": LOGPROBS_REFUSED, "type": "internal_server_error"}}, status=500)
            return
        if any(name in request["prompt"] for name in type(self).dropping):
            return  # closed with no answer: a server that went away (as one that refuses connections)
        if any(name in request["prompt"] for name in type(self).failing):
            answer_json(self, {"error": {"message": SERVER_ERROR, "type": "server_error"}}, status=500)
            return
        answer_stream(self, "Helpers for the tests.", request["prompt"], 5)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _ModelServer.failing, _ModelServer.dropping, _ModelServer.refuses_logprobs = (), (), False
    _ModelServer.completions, _ModelServer.logprobs = [], []
    served, url = serve_http(_ModelServer)
    yield url
    served.shutdown()
    served.server_close()


# Three files whose prompts are the shortest (short.py), the longest (long.py) and one between: the
# two calibration calls are on the first two.
FILES = {"short.py": "X = 1\n",
         "middle.py": '"""Middle."""\n\n\ndef middle(value):\n    return value\n',
         "long.py": '"""Long."""\n\n\n' + "".join(f"def long_{n}(value, other):\n    return value + {n}\n\n\n"
                                                    for n in range(12))}


def _summarise(repo: Path, url: str, *options: str):
    return run("summarise", str(repo), "--endpoint", url, *options)


def _written(repo: Path) -> list[dict]:
    path = repo / ".repomem" / "written-summaries.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def test_a_server_failing_every_call_is_one_line_naming_its_error(tmp_path, server):
    """It printed "wrote 0 summaries …; 3 failed (… answered HTTP 500)" on stdout, exit 1, after an
    estimate measured on failed calls; the server's own words were lost."""
    repo = write_repo(tmp_path / "repo", FILES)
    _ModelServer.failing = ("",)
    for options in (("--yes",), ("--dry-run",)):
        result = _summarise(repo, server, *options)
        assert result.returncode == 2, result.stderr
        assert result.stdout == ""
        assert result.stderr.strip().splitlines() == [
            f"repomem: error: no summary written: {server} answered HTTP 500: {SERVER_ERROR}"]
    assert _written(repo) == []


def test_some_summaries_failing_says_what_was_written_and_what_failed(tmp_path, server):
    repo = write_repo(tmp_path / "repo", FILES)
    _ModelServer.failing = ("middle.py",)
    result = _summarise(repo, server, "--yes")
    assert result.returncode == 2, result.stderr
    assert result.stdout.startswith("wrote 2 summaries in ")
    (error,) = [line for line in result.stderr.splitlines() if line.startswith("repomem: error:")]
    assert error == (f"repomem: error: 1 of 3 summaries failed: {server} answered HTTP 500: {SERVER_ERROR}; "
                     "the 2 written are kept, and `repomem summarise` again asks for the rest")
    assert sorted(record["text"] for record in _written(repo)) == ["Helpers for the tests."] * 2
    again = _summarise(repo, server, "--yes")  # the one left, failing again: the measuring call says so
    assert again.returncode == 2 and again.stderr.strip().splitlines()[-1] == (
        f"repomem: error: no summary written: {server} answered HTTP 500: {SERVER_ERROR}")


def test_a_run_stops_after_failures_in_a_row(tmp_path, server):
    """Every unit past the calibration calls paid the server's retries before the run said anything."""
    from repomem.completion.summarise import FAILURES_IN_A_ROW

    files = {**FILES, **{f"pkg/m{n}.py": f"def m{n}(value):\n    return value * {n}\n" for n in range(6)}}
    repo = write_repo(tmp_path / "repo", files)
    _ModelServer.failing = ("pkg/m",)
    result = _summarise(repo, server, "--yes", "--json")
    assert result.returncode == 2, result.stderr
    assert f"{FAILURES_IN_A_ROW} of 9 summaries failed and {6 - FAILURES_IN_A_ROW} were not asked for " \
           f"(stopped after {FAILURES_IN_A_ROW} failures in a row): {server} answered HTTP 500" in result.stderr
    outcome = json.loads(result.stdout)
    # short.py and long.py (the measuring calls' answers, kept although the run stopped) and middle.py
    assert (outcome["to_write"], outcome["written"], outcome["failed"]) == (9, 3, FAILURES_IN_A_ROW)
    assert outcome["error"] == f"{server} answered HTTP 500: {SERVER_ERROR}"
    failing_calls = [prompt for prompt in _ModelServer.completions if "pkg/m" in prompt]
    assert len(set(failing_calls)) == FAILURES_IN_A_ROW


def test_the_calls_that_measured_the_cost_are_written_by_the_run_not_asked_again(tmp_path, server):
    """--dry-run writes nothing (it pays its two calls); --yes writes every summary with one call
    each: the two calibration answers are among them, not asked for again."""
    repo = write_repo(tmp_path / "repo", FILES)
    dry = _summarise(repo, server, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["to_write"] == 3 and len(_ModelServer.completions) == 2 and _written(repo) == []
    _ModelServer.completions = []
    result = _summarise(repo, server, "--yes")
    assert result.returncode == 0, result.stderr
    assert len(_ModelServer.completions) == 3 and len(_written(repo)) == 3


def test_nothing_to_summarise_is_one_line_not_a_table_of_zeros(tmp_path, server):
    empty = write_repo(tmp_path / "empty", {"README.txt": "no code here\n"})
    result = _summarise(empty, server, "--yes")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "nothing to summarise: the index holds no file to summarise"
    assert "summaries to write" not in result.stderr and _ModelServer.completions == []
    repo = write_repo(tmp_path / "repo", FILES)
    assert _summarise(repo, server, "--yes").returncode == 0
    again = _summarise(repo, server, "--yes")
    assert again.returncode == 0 and again.stdout.strip() == "nothing to summarise: all 3 summaries are written already"


def test_a_failing_call_costs_its_retries_and_no_retry_without_log_probabilities(tmp_path, server):
    """Each failing file cost four requests: a server error (HTTP 500, a dropped connection) was
    taken for a refusal of the log-probabilities field and asked again without them before the
    backend's retries. Only the refusal that names them (llama-cpp-python's) is asked again so."""
    from repomem.backends.openai_http import OpenAIBackend

    tries = 1 + inspect.signature(OpenAIBackend).parameters["retries"].default
    # (short.py and long.py answer the two calls that measure the cost, which precede the run)
    repo = write_repo(tmp_path / "repo", {**FILES, "other.py": '"""Other."""\n\n\ndef other(value):\n    return 2\n'})
    _ModelServer.failing, _ModelServer.dropping = ("middle.py",), ("other.py",)
    result = _summarise(repo, server, "--yes")
    assert result.returncode == 2, result.stderr
    for name in ("middle.py", "other.py"):
        asked = [with_them for prompt, with_them in zip(_ModelServer.completions, _ModelServer.logprobs)
                 if name in prompt]
        assert asked == [True] * tries, (name, asked)
    assert len(_written(repo)) == 2


def test_a_server_refusing_log_probabilities_is_asked_once_without_them(tmp_path, server):
    repo = write_repo(tmp_path / "repo", FILES)
    _ModelServer.refuses_logprobs = True
    result = _summarise(repo, server, "--yes")
    assert result.returncode == 0, result.stderr
    assert len(_written(repo)) == 3
    assert _ModelServer.logprobs == [True, False, False, False]  # refused once, then never asked again
