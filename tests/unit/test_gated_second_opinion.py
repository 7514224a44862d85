"""experiments/gated_second_opinion.py: the file-only round asked only below a threshold, replayed."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from tests.script_run import run_script

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def _module():
    sys.path.insert(0, str(EXPERIMENTS))  # it imports its sibling experiments as the command line does
    spec = importlib.util.spec_from_file_location("gated_second_opinion", EXPERIMENTS / "gated_second_opinion.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _record(repo: str, task: int, strategy: str, alpha: float, right: bool, logprob: float) -> dict:
    return {"task_id": f"{repo}/line/{task}", "split": "line", "repo": repo, "strategy": strategy, "alpha": alpha,
            "em": right, "round_em": [right], "round_logprob": [logprob], "tokens": {"prompt": 100, "generated": 10}}


def _records(repo: str) -> list[dict]:
    # Task 0: fragrel sure and right, infile surer but wrong (asking always loses it).
    # Task 1: fragrel unsure and wrong, infile surer and right (asking is needed).
    # Task 2: fragrel sure and right, infile less sure: asking changes nothing but costs.
    return [_record(repo, 0, "fragrel", 0.5, True, -0.01), _record(repo, 0, "infile", 0.0, False, -0.001),
            _record(repo, 1, "fragrel", 0.5, False, -0.4), _record(repo, 1, "infile", 0.0, True, -0.2),
            _record(repo, 2, "fragrel", 0.5, True, -0.02), _record(repo, 2, "infile", 0.0, True, -0.3)]


def test_the_gate_asks_only_below_the_threshold_and_is_chosen_on_the_quick_set():
    module = _module()
    records = _records("accelerate") + _records("other")
    first = module._own_answers(records, "fragrel@0.5")
    second = module._own_answers(records, "infile")
    ids = ["accelerate/line/0", "accelerate/line/1", "accelerate/line/2"]
    always, gated, share, tokens = module.gate([first[t] for t in ids], [second[t] for t in ids], -0.05)
    assert list(always) == [0, 1, 1] and list(gated) == [1, 1, 1]  # only task 1 asked
    assert share == 1 / 3 and tokens == 110 + 110 / 3
    # The grid's best on the quick set: -0.02 ... -0.3 all give 3 of 3 asking task 1 alone; the
    # first of them in grid order (the highest) is kept.
    text, threshold, curves = module.table(records, "fragrel@0.5", "infile", {"accelerate"})
    assert threshold == -0.02 and "**-0.02**" in text and "| line | other | 3 | 33% |" in text
    assert len(curves["line"]) == len(module.GRID)
    fixed_text, fixed, _ = module.table(records, "fragrel@0.5", "infile", set(), fixed=float("inf"))
    assert fixed == float("inf") and "given, not tuned" in fixed_text


def test_the_command_line_refuses_a_missing_file_and_an_untuned_set_in_one_line(tmp_path: Path):
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in _records("other")), encoding="utf-8")
    for args in ([str(tmp_path / "none.jsonl")], [str(records)], [str(records), "--first", "bm25"]):
        run = run_script(EXPERIMENTS / "gated_second_opinion.py", *args, cwd=EXPERIMENTS)
        assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
        assert run.stderr.strip().splitlines()[-1].startswith("gated_second_opinion.py: error:")
    ok = run_script(EXPERIMENTS / "gated_second_opinion.py", str(records), "--threshold", "-0.05", cwd=EXPERIMENTS)
    assert ok.returncode == 0 and "| line | other | 3 | 33% |" in ok.stdout
