"""experiments/round_margin.py: the file-only round's answer shown only past a margin, scored on records."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

from tests.script_run import run_script

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "round_margin.py"


def _module():
    spec = importlib.util.spec_from_file_location("round_margin", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_margin_zero_is_the_engines_rule_and_a_missing_confidence_is_never_shown():
    shown = _module().shown_with_margin
    round_em = np.array([[1, 0], [0, 1], [0, 1], [1, 0]], dtype=float)
    round_logprob = np.array([[-0.2, -0.2], [-0.3, -0.1], [-0.1, -0.15], [-0.5, -np.inf]])
    assert shown(round_em, round_logprob, 0.0).tolist() == [1, 1, 0, 1]  # the retrieving answer on a tie
    assert shown(round_em, round_logprob, 0.3).tolist() == [1, 0, 0, 1]  # the file alone needs 0.3 more
    assert shown(round_em, round_logprob, -0.1).tolist() == [0, 1, 1, 1]  # -inf stays below any margin


def test_the_table_scores_each_margin_against_the_shipped_rule_and_vanilla(tmp_path: Path):
    records = []
    for task in range(6):
        split = "line" if task < 3 else "api"
        records.append({"task_id": f"r/{split}/{task}", "split": split, "strategy": "vanilla", "alpha": 0.0,
                        "em": task % 2 == 0, "round_em": [task % 2 == 0], "round_logprob": [-0.3]})
        records.append({"task_id": f"r/{split}/{task}", "split": split, "strategy": "fragrel", "alpha": 0.5,
                        "em": True, "round_em": [True, False], "round_logprob": [-0.2, -0.19]})
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = run_script(SCRIPT, str(path))
    assert result.returncode == 0, result.stderr
    rows = {line.split("|")[1].strip(): line for line in result.stdout.splitlines() if line.startswith("| ")}
    # margin 0 shows the file-only answer (surer by 0.01) and loses every task; +0.02 keeps the retrieving one
    assert "| +0.00 | 0.0 |" in rows["+0.00"] and "| +0.02 | 100.0 | +100.0" in rows["+0.02"]
    lonely = tmp_path / "vanilla-only.jsonl"
    lonely.write_text("".join(json.dumps(r) + "\n" for r in records if r["strategy"] == "vanilla"))
    refused = run_script(SCRIPT, str(lonely))
    assert refused.returncode == 2 and "no task has both" in refused.stderr and "Traceback" not in refused.stderr
