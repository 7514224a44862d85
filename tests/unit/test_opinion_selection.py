"""experiments/opinion_selection.py: the surer of several recorded answers, and the ceiling of a perfect chooser."""

from __future__ import annotations

import importlib.util
import json
import lzma
import sys
from pathlib import Path

from tests.script_run import run_script

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "opinion_selection.py"


def _module():
    spec = importlib.util.spec_from_file_location("opinion_selection", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def _record(task: int, strategy: str, alpha: float, right: list[bool], logprobs: list[float | None]) -> dict:
    """A slim record; `right`/`logprobs` per round, the own prompt's first (round_em[0])."""
    return {"task_id": f"r/line/{task}", "split": "line", "repo": "r", "strategy": strategy, "alpha": alpha,
            "em": right[-1], "round_em": right, "round_logprob": logprobs}


def _records() -> list[dict]:
    records = []
    for task in range(4):
        records.append(_record(task, "vanilla", 0.0, [task == 0], [-0.5]))
        # The file-only round's answer (second round) must not count as fragrel's own answer.
        records.append(_record(task, "fragrel", 0.5, [task in (1, 2), True], [-0.2 if task == 1 else -0.9, -0.1]))
        records.append(_record(task, "infile", 0.0, [task == 3], [-0.2 if task == 3 else -0.4]))
    return records


def test_surer_answer_first_named_on_a_tie_and_ceiling():
    module = _module()
    answers = module.answers_by_task(_records(), ["fragrel@0.5", "infile", "vanilla"])
    assert answers["r/line/1"]["fragrel@0.5"] == (True, -0.2)  # round 0, not the file-only round
    pair = ["fragrel@0.5", "infile"]
    # task 0: infile surer (wrong); 1: fragrel surer (right); 2: infile surer (wrong); 3: infile surer (right).
    assert [module.surer(answers[f"r/line/{t}"], pair) for t in range(4)] == [False, True, False, True]
    tie = {"a": (True, -0.3), "b": (False, -0.3)}
    assert module.surer(tie, ["a", "b"]) and not module.surer(tie, ["b", "a"])
    missing = {"a": (False, float("-inf")), "b": (True, -9.0)}  # no log-probability recorded: never surer
    assert module.surer(missing, ["a", "b"])

    table = module.table(_records(), [pair, ["fragrel@0.5", "vanilla", "infile"]], "vanilla")
    rows = [line for line in table.splitlines() if line.startswith("| fragrel")]
    # pair: surer 2 of 4 (50.0), ceiling tasks 1, 2, 3 (75.0); with vanilla: task 0 joins the ceiling.
    assert rows[0].split(" | ")[1] == "50.0" and rows[0].split(" | ")[4] == "75.0", rows[0]
    assert rows[1].split(" | ")[4] == "100.0", rows[1]
    assert "vanilla 25.0" in table


def test_reads_xz_and_refuses_an_opinion_it_has_no_records_of(tmp_path):
    path = tmp_path / "records.jsonl.xz"
    with lzma.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in _records())
    run = run_script(SCRIPT, str(path), "--sets", "fragrel@0.5,infile", "--out", str(tmp_path / "t.md"),
                     "--plot", str(tmp_path / "t.png"))
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| fragrel@0.5 + infile | 50.0 |" in (tmp_path / "t.md").read_text()
    unknown = run_script(SCRIPT, str(path), "--sets", "fragrel@0,infile")
    assert unknown.returncode == 2 and "no records of fragrel@0 (these have: fragrel@0.5" in unknown.stderr
    assert "Traceback" not in unknown.stderr


def test_a_bare_name_must_mean_one_run():
    module = _module()
    records = _records() + [_record(t, "fragrel", 0.0, [False], [-0.3]) for t in range(4)]
    answers = module.answers_by_task(records, ["fragrel@0"])
    assert answers["r/line/0"]["fragrel@0"] == (False, -0.3)
    for name, said in (("fragrel", "2 runs"), ("fragrel@half", "must be a number"), ("hat", "no records of hat")):
        try:
            module.answers_by_task(records, [name])
        except module.UnknownOpinion as error:
            assert said in str(error), error
        else:
            raise AssertionError(f"{name} was taken")
    # A strategy whose name holds a "+" is one opinion (sets are comma-separated).
    combined = [{**r, "strategy": "repocoder+fragrel"} for r in _records() if r["strategy"] == "fragrel"]
    assert module.answers_by_task(combined, ["repocoder+fragrel"])["r/line/1"]["repocoder+fragrel"] == (True, -0.2)


def test_shown_records_carry_the_surer_answer_under_the_first_opinions_prompt(tmp_path):
    module = _module()
    records = _records()
    for record in records:
        record.update(prediction=f"{record['strategy']} {record['task_id']}", prompt_sha256=record["strategy"])
    shown = {r["task_id"]: r for r in module.shown_records(records, ["fragrel@0.5", "infile"])}
    assert sorted(shown) == [f"r/line/{t}" for t in range(4)]
    # As test_surer_answer_first_named_on_a_tie_and_ceiling: infile surer in tasks 0, 2, 3.
    assert [shown[f"r/line/{t}"]["chosen_round"] for t in range(4)] == [1, 0, 1, 1]
    assert [shown[f"r/line/{t}"]["em"] for t in range(4)] == [False, True, False, True]
    assert shown["r/line/1"]["prediction"] == "fragrel r/line/1"
    assert shown["r/line/3"]["prediction"] == "infile r/line/3"
    assert all(r["prompt_sha256"] == "fragrel" and r["strategy"] == "fragrel" for r in shown.values())
    assert shown["r/line/0"]["round_logprob"] == [-0.9, -0.4]

    source = tmp_path / "records.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "shown.jsonl"
    run_script(SCRIPT, str(source), "--sets", "fragrel@0.5,infile", "--shown", str(out))
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["em"] for r in written] == [shown[r["task_id"]]["em"] for r in written] and len(written) == 4
