"""experiments/paired_ablation.py: a variant answered only where its prompt changed, the base run's
answers elsewhere."""

from __future__ import annotations

import json
import lzma
from pathlib import Path

from tests.script_run import run_script

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "paired_ablation.py"


def _record(task: int, prompt: str, right: bool, config: str = "base") -> dict:
    return {"task_id": f"r/line/{task}", "split": "line", "repo": "r", "strategy": "fragrel", "alpha": 0.5,
            "config": config, "settings": f"hash-{config}", "prompt_sha256": prompt, "em": right}


def _write(path: Path, records: list[dict]) -> Path:
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in records)
    return path


def test_select_then_merge(tmp_path):
    base = [_record(t, f"p{t}", t % 2 == 0) for t in range(4)]
    # Another configuration in the same file is not the base; the last record of a task wins.
    base += [_record(0, "other", False, config="other"), _record(3, "p3", True)]
    base_file = _write(tmp_path / "base.jsonl.xz", base)
    variant = [{**_record(t, "q1" if t == 1 else f"p{t}", False, "v"), "alpha": 0.0} for t in range(4)]
    prompts = _write(tmp_path / "prompts.jsonl", variant)
    tasks = _write(tmp_path / "tasks.jsonl", [{"prompt": "x", "metadata": {"task_id": f"r/line/{t}"}}
                                              for t in range(4)])
    common = ["--base", str(base_file), "--base-config", "base", "--prompts", str(prompts)]

    chosen = tmp_path / "changed.jsonl"
    run = run_script(SCRIPT, "select", *common, "--tasks", str(tasks), "--out", str(chosen))
    assert run.returncode == 0, run.stderr
    assert [json.loads(line)["metadata"]["task_id"] for line in chosen.read_text().splitlines()] == ["r/line/1"]

    merged = tmp_path / "merged.jsonl"
    answers = _write(tmp_path / "answers.jsonl", [{**_record(1, "q1", True, "v"), "alpha": 0.0}])
    run = run_script(SCRIPT, "merge", *common, "--answers", str(answers), "--out", str(merged))
    assert run.returncode == 0, run.stderr
    records = [json.loads(line) for line in merged.read_text().splitlines()]
    # Every record carries the variant's configuration and settings hash, as one run's would.
    assert [(r["task_id"], r["em"], r["config"], r["settings"], r["alpha"], r["answer_from"]) for r in records] == [
        ("r/line/0", True, "v", "hash-v", 0.0, "base (the same prompt)"),
        ("r/line/1", True, "v", "hash-v", 0.0, "variant"),
        ("r/line/2", True, "v", "hash-v", 0.0, "base (the same prompt)"),
        ("r/line/3", True, "v", "hash-v", 0.0, "base (the same prompt)"),
    ]

    # An answer to another prompt than the one --prompt-only built is refused, and so is a missing one.
    wrong = _write(tmp_path / "wrong.jsonl", [_record(1, "q1-moved", True, "v")])
    run = run_script(SCRIPT, "merge", *common, "--answers", str(wrong), "--out", str(merged))
    assert run.returncode == 1 and "not the one --prompt-only built" in run.stderr and "Traceback" not in run.stderr
    run = run_script(SCRIPT, "merge", *common, "--out", str(merged))
    assert run.returncode == 1 and "has no record of it" in run.stderr
    # A run stopped early: --answered-only leaves the unanswered changed task out and says so.
    run = run_script(SCRIPT, "merge", *common, "--answered-only", "--out", str(merged))
    assert run.returncode == 0, run.stderr
    assert [json.loads(line)["task_id"] for line in merged.read_text().splitlines()] == [
        "r/line/0", "r/line/2", "r/line/3"]
    assert "0 of 1 changed prompts answered" in run.stderr
