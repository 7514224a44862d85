"""The memory strategies that ask the model while they retrieve (issue 14), end to end with the
embedded model through the CLI: every model call is in `--json` with its prompt and answer, the
budget holds, and what the memory found reaches the prompt. Also `repomem summarise`: the cost
before the work, the summaries on disk, and a second run that resumes instead of redoing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from repomem.completion.engine import CompletionEngine, PreparedPrompt
from repomem.failures import Failure
from repomem.service import RepoService
from tests.cli_process import assert_user_error, run
from tests.repos import copy_example

MAX_CALLS = 3


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    """The example with a small call budget and prompt (the CLI and in-process tests read both)."""
    root = copy_example(tmp_path_factory.mktemp("memories") / "shop")
    with open(root / "repomem.toml", "a", encoding="utf-8") as settings:
        settings.write(f"\n[memory]\nmax_calls = {MAX_CALLS}\n\n[completion]\nmax_prompt_tokens = 1024\n")
    return root


def _call_checks(calls: list[dict]) -> None:
    assert 1 <= len(calls) <= MAX_CALLS
    for call in calls:
        assert call["prompt"].startswith("<|im_start|>system") and "shop/report.py" in call["prompt"]
        assert call["decision"] and call["prompt_tokens"] > 0 and "error" not in call


def _prepared(shop: Path, llama, strategy: str) -> tuple[RepoService, PreparedPrompt]:
    """The prompt a strategy builds at the example's cursor, with the session's model (in process:
    the same engine the CLI runs, without generating the completion)."""
    service = RepoService.open(shop)
    assert isinstance(service, RepoService)
    service.ensure_index()
    engine = CompletionEngine(service, llama)
    request = engine.request(service.cursor_at(shop / "shop/report.py", 9, None), strategy)
    prepared = engine.prepare(request)
    assert not isinstance(prepared, Failure), prepared
    _call_checks([call.record() for call in prepared.model_calls])
    assert prepared.timings_ms["memory_model"] > 0
    return service, prepared


def test_memwalker_navigates_the_tree_and_its_windows_reach_the_prompt(shop: Path, llama):
    _, prepared = _prepared(shop, llama, "memwalker")
    calls = prepared.model_calls
    assert all(c.purpose == "navigate" for c in calls)
    assert "which part of the repository should be read" in calls[0].prompt and "1. shop/" in calls[0].prompt
    offered = [line for call in calls for line in call.prompt.split("\n") if re.match(r"\d+\. ", line)]
    assert offered and not any(line.split(" ")[1].startswith("report.py") for line in offered)  # the cursor's file
    first = prepared.fragments[0]
    assert first.fragment in prepared.prompt.fragment_ids and first.path != "shop/report.py"


def test_readagent_shows_gists_and_reads_the_pages_the_model_names(shop: Path, llama):
    service, prepared = _prepared(shop, llama, "readagent")
    (call,) = prepared.model_calls
    assert call.purpose == "look-up" and "1. shop/pricing.py lines 1-" in call.prompt
    read = [f for f in prepared.fragments if f.text is None]
    gists = [f for f in prepared.fragments if f.text is not None]
    assert read and gists and list(prepared.fragments[: len(read)]) == read  # pages read in full come first
    assert "def compute_tax(amount_cents: int, tax_class: str) -> int:" in prepared.prompt.text
    shown = [b for b in prepared.prompt.blocks if b.summary]
    assert shown and all(b.text in prepared.prompt.text.replace("\n# ", "\n") for b in shown)


def test_qrmem_gathers_the_definition_named_at_the_cursor_and_reflects(shop: Path):
    """Through the CLI, as a user runs it: the calls in --json, and the completion."""
    result = run("complete", f"{shop}/shop/report.py:9", "--strategy", "qrmem", "--json", "--max-tokens", "12")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    _call_checks(data["model_calls"])
    assert data["strategy"] == "qrmem" and data["timings_ms"]["memory_model"] > 0
    assert all(c["purpose"] == "reflect" for c in data["model_calls"])
    assert "1. def compute_tax(amount_cents: int, tax_class: str) -> int:  (in shop/pricing.py)" in \
        data["model_calls"][0]["prompt"]
    first = data["fragments"][0]
    assert (first["path"], first["start_line"], first["in_prompt"]) == ("shop/pricing.py", 6, True)
    assert data["completion"].startswith("compute_tax(")


def test_summarise_says_the_cost_writes_and_resumes(shop: Path):
    refused = run("summarise", str(shop))  # not a terminal, no --yes: nothing is asked of the model
    assert_user_error(refused, "--yes")
    first = run("summarise", str(shop), "--limit", "2", "--yes", "--json")
    assert first.returncode == 0, first.stderr
    outcome = json.loads(first.stdout)
    assert outcome["to_write"] == 2 and outcome["written"] == 2 and outcome["prompt_tokens"] > 0
    assert outcome["estimated_s"] > 0 and "summaries to write" in first.stderr
    lines = (shop / ".repomem" / "written-summaries.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and all(json.loads(line)["text"] for line in lines)
    again = run("summarise", str(shop), "--dry-run", "--json", "--limit", "1")  # one calibration call
    plan = json.loads(again.stdout)
    assert again.returncode == 0 and plan["already_written"] == 2 and plan["to_write"] == 1  # resumes
    assert len((shop / ".repomem" / "written-summaries.jsonl").read_text(encoding="utf-8").splitlines()) == 2
