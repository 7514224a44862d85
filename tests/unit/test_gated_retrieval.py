"""experiments/gated_retrieval.py: a short file-only draft first, retrieval only when it is unsure, replayed."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from tests.script_run import run_script

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _module():
    sys.path.insert(0, str(EXPERIMENTS))  # it imports its sibling experiments as the command line does
    spec = importlib.util.spec_from_file_location("gated_retrieval", EXPERIMENTS / "gated_retrieval.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _record(repo: str, task: int, strategy: str, right: bool, logprob: float, seconds: float, tokens: int) -> dict:
    return {"task_id": f"{repo}/line/{task}", "split": "line", "repo": repo, "strategy": strategy,
            "alpha": 0.5 if strategy == "fragrel" else 0.0, "em": right, "round_em": [right],
            "round_logprob": [logprob], "tokens": {"prompt": tokens - 10, "generated": 10},
            "timings_ms": {"retrieve": 5.0, "prompt": 100.0, "generate": seconds * 1000 - 100.0}}


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _files(tmp_path: Path, repos: tuple[str, ...]) -> tuple[Path, Path, Path]:
    """Task 0: the draft is sure and right (retrieving would be wasted). Task 1: the draft is unsure
    and wrong, the retrieving answer surer and right. Task 2: the draft unsure but surer than the
    retrieving answer, and right."""
    drafts, owns, seconds = [], [], []
    for repo in repos:
        drafts += [_record(repo, 0, "infile", True, -0.01, 2.0, 300), _record(repo, 1, "infile", False, -0.5, 2.0, 300),
                   _record(repo, 2, "infile", True, -0.3, 2.0, 300)]
        owns += [_record(repo, 0, "fragrel", False, -0.2, 7.0, 1000),
                 _record(repo, 1, "fragrel", True, -0.1, 7.0, 1000),
                 _record(repo, 2, "fragrel", False, -0.4, 7.0, 1000)]
        seconds += [_record(repo, 0, "infile", True, -0.02, 7.0, 1000),
                    _record(repo, 1, "infile", False, -0.6, 7.0, 1000),
                    _record(repo, 2, "infile", False, -0.5, 7.0, 1000)]
    return (_write(tmp_path / "draft.jsonl", drafts), _write(tmp_path / "own.jsonl", owns),
            _write(tmp_path / "second.jsonl", seconds))


def test_the_draft_is_shown_when_sure_and_the_surer_answer_otherwise(tmp_path: Path):
    module = _module()
    tasks = module.paired_tasks(*_files(tmp_path, ("accelerate", "other")), "fragrel@0.5")
    first = [t for t in tasks if t.repo == "accelerate"]
    assert [t.gated(-0.05) for t in first] == [(True, 2.0, 300, False), (True, 9.0, 1300, True),
                                               (True, 9.0, 1300, True)]
    # The default: task 0's file-only answer is surer (right), task 1 the retrieving one, task 2 the
    # retrieving one (wrong); both long prompts each time.
    assert [t.default() for t in first] == [(True, 14.0, 2000), (True, 14.0, 2000), (False, 14.0, 2000)]
    # Never retrieving loses task 1; every threshold above its draft's -0.5 wins all three, and the
    # one that retrieves least among them (task 1 alone: below task 2's draft, -0.3) is kept.
    chosen = module.choose(first)
    assert -0.5 < chosen <= -0.3 and [t.gated(chosen)[3] for t in first] == [False, True, False]
    text = module.table(tasks, {"accelerate"}, -0.01, tuned=True)
    assert "| line | other | 3 | 67% | 66.7 | 33.3 | 66.7 | 100.0 |" in text


def test_the_command_line_refuses_a_missing_file_and_an_untuned_set_in_one_line(tmp_path: Path):
    draft, own, second = _files(tmp_path, ("other",))
    script = EXPERIMENTS / "gated_retrieval.py"
    for args in (["--draft", str(tmp_path / "none.jsonl"), "--retrieving", str(own), "--second", str(second)],
                 ["--draft", str(draft), "--retrieving", str(own), "--second", str(second)],
                 ["--draft", str(draft), "--retrieving", str(own), "--second", str(second), "--strategy", "bm25"]):
        run = run_script(script, *args, cwd=EXPERIMENTS)
        assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
        assert run.stderr.strip().splitlines()[-1].startswith("gated_retrieval.py: error:")
    ok = run_script(script, "--draft", str(draft), "--retrieving", str(own), "--second", str(second),
                    "--threshold", "-0.05", "--plot", str(tmp_path / "gate.png"), cwd=EXPERIMENTS)
    assert ok.returncode == 0 and "given, not tuned" in ok.stdout and (tmp_path / "gate.png").stat().st_size > 0
