"""scripts/compare_configs.py: FragRel at one alpha of a run that measured several (--alphas)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

from repomem.evaluation.run import RESULTS_VERSION
from tests.script_run import run_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compare_configs.py"


def _record(task: int, strategy: str, alpha: float, em: bool) -> dict:
    return {"version": RESULTS_VERSION, "task_id": f"r/line/{task}", "split": "line", "repo": "r",
            "strategy": strategy, "alpha": alpha,
            "mode": "model", "em": em, "es": 1.0 if em else 0.5, "prediction": "x = 1\n", "ground_truth": "x = 1\n"}


def _compare(results: Path, *configs: str, out: Path | None = None) -> subprocess.CompletedProcess:
    arguments = [f"--config={c.replace('FILE', str(results))}" for c in configs]
    return run_script(SCRIPT, *arguments, *(["--out", str(out)] if out is not None else []))


def test_one_alpha_is_named_and_an_ambiguous_choice_is_refused(tmp_path):
    results = tmp_path / "results.jsonl"
    records = [_record(t, "vanilla", 0.0, t < 2) for t in range(8)]
    records += [_record(t, "fragrel", 0.5, t < 6) for t in range(8)]  # the graph on: 6 right
    records += [_record(t, "fragrel", 0.0, t < 3) for t in range(8)]  # graph off: 3 right
    results.write_text("".join(json.dumps(r) + "\n" for r in records))

    mixed = _compare(results, "vanilla=FILE:vanilla", "fragrel=FILE:fragrel")
    assert mixed.returncode != 0 and "fragrel@ALPHA" in mixed.stderr
    typo = _compare(results, "vanilla=FILE:vanilla", "fragrel=FILE:fragrel@half")
    assert typo.returncode == 2 and "ALPHA must be a number" in typo.stderr and "Traceback" not in typo.stderr

    done = _compare(results, "vanilla=FILE:vanilla", "graph=FILE:fragrel@0.5", "levers=FILE:fragrel@0",
                    out=tmp_path / "out")
    assert done.returncode == 0, done.stderr
    rows = {r["config"]: r for r in json.loads((tmp_path / "out" / "report.json").read_text())}
    assert rows["graph"]["em"] == 75.0 and rows["levers"]["em"] == 37.5 and rows["vanilla"]["em"] == 25.0
    assert (rows["graph"]["won"], rows["levers"]["won"]) == (4, 1)


def test_records_with_and_without_the_code_after_the_hole_are_not_taken_for_one_run(tmp_path):
    """`eval run --right-context` left to right (the 0.5B's default) writes the settings
    fingerprint a RepoEval run writes: one file holding both is refused, not read as one run."""
    results = tmp_path / "results.jsonl"
    records = [{**_record(t, "fragrel", 0.5, True), "settings": "6985eff7"} for t in range(4)]
    records += [{**_record(t, "fragrel", 0.5, False), "settings": "6985eff7", "right_context": True}
                for t in range(4)]
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    mixed = _compare(results, "fragrel=FILE:fragrel")
    assert mixed.returncode != 0 and "right context" in mixed.stderr and "keep one run per file" in mixed.stderr
    results.write_text("".join(json.dumps(r) + "\n" for r in records[4:]))
    assert _compare(results, "fragrel=FILE:fragrel").returncode == 0


def test_the_file_only_rounds_share_is_split_from_the_prompts(tmp_path):
    """experiments/second_opinion_share.py: round_em[0] is the strategy's own prompt, em the answer shown."""
    share_script = SCRIPT.parents[1] / "experiments" / "second_opinion_share.py"
    spec = importlib.util.spec_from_file_location("second_opinion_share", share_script)
    share = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(share)
    records = [_record(t, "vanilla", 0.0, t < 2) for t in range(10)]
    for t in range(10):  # own prompt right in 4 tasks; the file-only answer shown and right in 2 more
        record = _record(t, "fragrel", 0.5, t < 6)
        record["round_em"] = [t < 4, t in (4, 5, 9)]
        records.append(record)
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    text = share.table([results], "fragrel@0.5", "vanilla")
    all_row = next(line for line in text.splitlines() if line.startswith("| **all**"))
    cells = [cell.strip() for cell in all_row.strip("|").split("|")]
    assert cells[1:4] == ["10", "20.0", "40.0"] and cells[5] == "60.0"
    assert cells[4].startswith("+20.0") and cells[6].startswith("+40.0") and cells[7].startswith("+20.0")
    alone = share.table([results], "fragrel@0.5", share.NO_BASELINE)
    all_row = next(line for line in alone.splitlines() if line.startswith("| **all**"))
    cells = [cell.strip() for cell in all_row.strip("|").split("|")]
    assert cells[1:4] == ["10", "40.0", "60.0"] and cells[4].startswith("+20.0")
    assert "vanilla" not in alone


def test_a_slimmed_xz_copy_is_read_as_it_is_committed(tmp_path):
    """eval/results keeps records xz-compressed and slimmed: the first GPU rounds' without a version
    or the answer. They compare as they are (the right-function column left blank where the answer
    is missing), and a line that is no record (a generation store's) is skipped."""
    import lzma

    full = [_record(t, "vanilla", 0.0, t < 2) | {"split": "api", "task_id": f"r/api/{t}", "prediction": "total(a)\n",
                                                 "ground_truth": "total(b)\n"} for t in range(6)]
    slim = [{k: v for k, v in r.items() if k not in ("version", "ground_truth", "mode")}
            | {"strategy": "fragrel", "alpha": 0.5, "em": r["task_id"] < "r/api/4"} for r in full]
    with lzma.open(tmp_path / "slim.jsonl.xz", "wt") as handle:
        handle.write('{"key": "ab12", "text": "x = 1\\n"}\n')
        handle.writelines(json.dumps(r) + "\n" for r in slim)
    (tmp_path / "full.jsonl").write_text("".join(json.dumps(r) + "\n" for r in full))

    done = run_script(SCRIPT, f"--config=vanilla={tmp_path / 'full.jsonl'}:vanilla",
                      f"--config=fragrel={tmp_path / 'slim.jsonl.xz'}:fragrel@0.5", "--out", str(tmp_path / "out"))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    rows = {r["config"]: r for r in json.loads((tmp_path / "out" / "report.json").read_text())}
    assert rows["vanilla"]["n"] == 6
    assert (round(rows["vanilla"]["em"], 6), round(rows["fragrel"]["em"], 6)) == (round(100 / 3, 6), round(200 / 3, 6))
    assert rows["vanilla"]["call_match"] == 100.0 and rows["fragrel"]["call_match"] is None
    assert rows["fragrel"]["call_delta"] is None and (rows["fragrel"]["won"], rows["fragrel"]["lost"]) == (2, 0)


def test_a_name_given_twice_a_strategy_not_in_its_file_and_a_file_as_out_are_one_line_each(tmp_path):
    """A second `--config a=...` replaced the first (the baseline) and the table showed the other
    strategy's numbers under its name; a strategy the file does not hold read "no task finished
    by every configuration"; `--out` naming a file ended in a traceback."""
    results = tmp_path / "results.jsonl"
    records = [_record(t, s, 0.0, t < 2) for t in range(4) for s in ("vanilla", "infile")]
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    twice = _compare(results, "a=FILE:vanilla", "a=FILE:infile")
    assert twice.returncode == 2 and "--config a is named twice" in twice.stderr
    absent = _compare(results, "a=FILE:vanilla", "b=FILE:fragrel")
    assert absent.returncode != 0 and "holds no finished model records of fragrel" in absent.stderr
    taken = tmp_path / "taken"
    taken.write_text("")
    into_file = _compare(results, "a=FILE:vanilla", "b=FILE:infile", out=taken)
    assert into_file.returncode == 2 and "is a file" in into_file.stderr
    for result in (twice, absent, into_file):
        assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
