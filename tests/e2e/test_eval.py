"""RepoEval harness: scorer parity, task format, selection, leakage rule, resume, and the real CLI
(`repomem eval run` with the embedded model, `repomem eval report`, Ctrl-C)."""

from __future__ import annotations

import dataclasses
import http.server
import json
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from repomem.evaluation.metrics import (
    definition_hit_rank,
    edit_similarity,
    exact_match,
    has_enough_lines,
    line_hit_rank,
)
from repomem.evaluation.run import (
    RunSettings,
    comparable_record,
    read_results,
    record_key,
    run_evaluation,
    task_cursor,
)
from repomem.evaluation.tasks import (
    EvalTask,
    TaskDefinition,
    draw_tasks,
    load_tasks,
    select_tasks,
    typed_prefix,
)
from repomem.failures import Failure
from tests.cli_process import run
from tests.http_servers import answer_json, answer_stream, serve_http
from tests.parity.reference import levenshtein
from tests.repos import copy_example, synthetic_files, write_repo
from tests.small_model import EVAL_SMALL_MODEL

ROOT = Path(__file__).resolve().parents[2]

# -- scorer ------------------------------------------------------------------------------------


def test_edit_similarity_matches_a_plain_levenshtein():
    rng = random.Random(7)
    alphabet = "ab c\n(x)=_"
    for _ in range(300):
        a = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30)))
        b = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30)))
        lines_a = "\n".join(line.strip() for line in a.split("\n") if line.strip())
        lines_b = "\n".join(line.strip() for line in b.split("\n") if line.strip())
        # With one-line ground truths, truncation keeps one line: compare on equal line counts.
        truth = lines_b
        prediction = "\n".join(lines_a.split("\n")[: len(truth.split("\n"))]) if truth else ""
        longest = max(len(prediction), len(truth))
        expected = 1.0 if longest == 0 else 1 - levenshtein(prediction, truth) / longest
        assert edit_similarity(a, b) == pytest.approx(expected), (a, b)


def test_exact_match_follows_repocoder_line_rules():
    truth = "    total = compute_tax(amount,\n        tax_class)"
    assert exact_match("total = compute_tax(amount,\n\n   tax_class)\nprint('more lines are ignored')", truth)
    assert not exact_match("total = compute_tax(amount,", truth)  # too few lines
    assert not exact_match("total = compute_tax(amount, tax_class)", truth)
    assert exact_match("\n  x = 1  \n", "x = 1")
    assert edit_similarity("x = 2", "x = 1") == pytest.approx(0.8)


def test_enough_lines_waits_for_the_newline_that_ends_the_last_line():
    enough = has_enough_lines("a = 1\nb = 2")
    assert not enough("a = 1\nb = 2")  # the second line may still grow
    assert not enough("\na = 1\n\n")
    assert enough("a = 1\n\nb = 2\n")


def test_hit_ranks():
    assert line_hit_rank(["x = 1\n  y = 2", "z = 3"], "    y = 2") == 1
    assert line_hit_rank(["x = 1", "z = 3\ny = 2"], "y = 2") == 2
    assert line_hit_rank(["x = 1"], "y = 2") is None
    definition = TaskDefinition("pkg/a.py", 40, "f")
    spans = [("pkg/a.py", 0, 20), ("pkg/b.py", 30, 50), ("pkg/a.py", 30, 50)]
    assert definition_hit_rank(spans, definition) == 3
    assert definition_hit_rank(spans[:2], definition) is None


# -- tasks ---------------------------------------------------------------------------------------


def _task_line(task_id: str, repo: str, path: str, lines: list[str], lineno: int, start: int = 0,
               line_key: str = "lineno", **extra) -> str:
    metadata = {"task_id": task_id, "ground_truth": lines[lineno], "fpath_tuple": [repo, *path.split("/")],
                "context_start_lineno": start, line_key: lineno, **extra}
    return json.dumps({"prompt": "".join(line + "\n" for line in lines[start:lineno]), "metadata": metadata})


def test_load_tasks_reads_the_official_format(tmp_path: Path):
    lines = ["import os", "x = 1", "y = x + 1"]
    path = tmp_path / "line_level_completion_2k_context_codex.test.jsonl"
    path.write_text(_task_line("r/0", "r", "pkg/m.py", lines, 2, line_key="line_no") + "\n\n")
    (task,) = load_tasks(path)
    assert (task.split, task.repo, task.path, task.lineno, task.ground_truth) == ("line", "r", "pkg/m.py", 2,
                                                                                   "y = x + 1")
    api = tmp_path / "api.jsonl"
    api.write_text(_task_line("r/1", "r", "m.py", lines, 1, split="api",
                              definition={"path": "d.py", "line": 3, "name": "f"}) + "\n")
    (task,) = load_tasks(api)
    assert task.split == "api" and task.definition == TaskDefinition("d.py", 3, "f")


@pytest.mark.parametrize("content, expected", [
    ('{"prompt": "x"}\n', "1: not a RepoEval task"),
    ("not json\n", "1: not a RepoEval task"),
    ("", "no tasks"),
])
def test_bad_task_files_are_one_clear_failure(tmp_path: Path, content: str, expected: str):
    path = tmp_path / "tasks.jsonl"
    path.write_text(content)
    failure = load_tasks(path)
    assert not isinstance(failure, list) and expected in failure.message
    assert "no such file" in load_tasks(tmp_path / "absent.jsonl").message


def test_a_blank_ground_truth_or_an_id_of_another_task_file_is_refused(tmp_path: Path):
    """A task with nothing to score against was an exact match whatever the model wrote; two task
    files numbering their tasks alike ran whole and were reported as half (records pair by id)."""
    lines = ["import os", "x = 1", "", "y = x + 1"]
    blank = tmp_path / "blank.jsonl"
    blank.write_text(_task_line("r/0", "r", "m.py", lines, 2) + "\n")
    failure = load_tasks(blank)
    assert isinstance(failure, Failure) and "ground_truth is blank" in failure.message
    first, second = tmp_path / "a_line.jsonl", tmp_path / "b_line.jsonl"
    first.write_text(_task_line("r/0", "r", "m.py", lines, 1) + "\n")
    second.write_text(_task_line("r/1", "r", "m.py", lines, 3) + "\n" + _task_line("r/0", "r", "m.py", lines, 3) + "\n")
    for limit in (None, 1):
        failure = draw_tasks([first, second], limit, 0)
        assert isinstance(failure, Failure), limit
        assert failure.message.startswith(f"{second}:2: task_id 'r/0' appears twice"), failure.message
    assert len(draw_tasks([first], None, 0)) == 1


def test_select_tasks_is_seeded_and_balanced_over_repositories():
    tasks = [EvalTask(f"{repo}/{i}", split, repo, "m.py", "", "x", 0, 1)
             for split in ("line", "api") for repo in ("a", "b", "c") for i in range(20)]
    chosen = select_tasks(tasks, 6, seed=1)
    assert chosen == select_tasks(tasks, 6, seed=1)
    assert chosen != select_tasks(tasks, 6, seed=2)
    for split in ("line", "api"):
        repos = [t.repo for t in chosen if t.split == split]
        assert len(repos) == 6 and sorted(repos) == ["a", "a", "b", "b", "c", "c"]
    assert len(select_tasks(tasks, None, 0)) == len(tasks)


def _task_files(folder: Path, prompt_chars: int = 10, per_repo: int = 20) -> list[Path]:
    """Two task files (line and api splits), three repositories each, a few odd lines between tasks."""
    lines = ["import os", "x = 1", "y = x + 1"]
    paths = []
    for split in ("line", "api"):
        path = folder / f"{split}.jsonl"
        with open(path, "w", encoding="utf-8") as handle:
            for i in range(per_repo):
                for repo in ("a", "b", "c"):
                    record = json.loads(_task_line(f"{split}/{repo}/{i}", repo, "m.py", lines, 2))
                    record["prompt"] = "#" * prompt_chars + "\u00e9\u2028\n"  # multi-byte and a U+2028
                    handle.write(json.dumps(record, ensure_ascii=False) + ("\r\n" if i % 3 else "\n\n"))
        paths.append(path)
    return paths


def test_drawing_tasks_from_files_gives_what_select_tasks_gives(tmp_path: Path):
    paths = _task_files(tmp_path)
    everything = [task for path in paths for task in load_tasks(path)]
    for limit in (1, 2, 7, 20, 1000, None):
        for seed in (0, 3):
            assert draw_tasks(paths, limit, seed) == select_tasks(everything, limit, seed), (limit, seed)
    # A bad line anywhere still refuses its file, with the same message, whatever the limit.
    with open(paths[1], "a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    failure = draw_tasks(paths, 2, 0)
    assert isinstance(failure, Failure) and failure.message == load_tasks(paths[1]).message
    assert f"{paths[1]}:{paths[1].read_text(encoding='utf-8').count(chr(10))}: not a RepoEval task" in failure.message


def test_a_limited_draw_does_not_hold_every_task(tmp_path: Path):
    """`eval run --limit 2` on a million-task file read it whole and held every prompt (800 MB for
    two tasks): the draw keeps where each line starts, and parses only the drawn lines again."""
    import tracemalloc

    paths = _task_files(tmp_path, prompt_chars=100_000, per_repo=60)  # 2 x 18 MB
    tracemalloc.start()
    try:
        drawn = draw_tasks(paths, 2, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not isinstance(drawn, Failure) and len(drawn) == 4
    assert peak < 4_000_000, f"{peak:,} bytes"


# -- runner ----------------------------------------------------------------------------------------


@pytest.fixture
def benchmark(tmp_path: Path) -> tuple[Path, Path]:
    """A repositories folder with one synthetic repo and line tasks over its last module."""
    repos = tmp_path / "repositories"
    write_repo(repos / "synth", synthetic_files(6))
    path = "lib/part2/mod5.py"
    lines = (repos / "synth" / path).read_text().split("\n")
    records = []
    for number, lineno in enumerate(range(30, len(lines) - 2, 9)):
        if lines[lineno].strip():
            records.append(_task_line(f"synth/{number}", "synth", path, lines, lineno, start=max(0, lineno - 25)))
    tasks = tmp_path / "line.jsonl"
    tasks.write_text("\n".join(records) + "\n")
    return tasks, repos


def test_retrieval_only_run_obeys_the_leakage_rule_and_resumes(benchmark: tuple[Path, Path], tmp_path: Path):
    tasks_file, repos = benchmark
    tasks = load_tasks(tasks_file)
    results = tmp_path / "results.jsonl"
    settings = RunSettings(retrieval_only=True, alphas=(0.0, 0.5, 2.0))
    summary = run_evaluation(tasks, repos, results, settings)
    assert summary.written == 6 * len(tasks) and summary.failed == 0
    records = read_results(results)
    by_task = {t.task_id: t for t in tasks}
    # The alpha sweep (alpha 0 is FragRel with its levers and the graph off, not vanilla), FragRel
    # as published, and the strategy with its own retriever (the summary tree) obey the rule too.
    assert {(r["strategy"], r["alpha"]) for r in records} == {
        ("vanilla", 0.0), ("fragrel", 0.0), ("fragrel", 0.5), ("fragrel", 2.0), ("fragrel-paper", 0.5), ("hat", 0.0)}
    for record in records:
        task = by_task[record["task_id"]]
        assert record["fragments"], record
        for path, start, end, *_ in record["fragments"]:
            assert path != task.path or end <= task.context_start_lineno, (task.task_id, start, end)
    # The hole's own file holds its line in later windows; other modules repeat many lines, so some
    # tasks still hit, but never through a window of the hole's file beyond the visible prompt.
    assert any(r["hit_rank"] for r in records)

    # A writer killed mid-line: the torn record is dropped and redone, nothing else is repeated.
    data = results.read_bytes()
    results.write_bytes(data[: len(data) - 40])
    again = run_evaluation(tasks, repos, results, settings)
    assert (again.written, again.skipped) == (1, 6 * len(tasks) - 1)
    assert len(read_results(results)) == 6 * len(tasks)
    assert all(json.loads(line) for line in results.read_text().splitlines())
    # The block order and the budgets shape no retrieval record: a run asking another order finds
    # every record there (it wrote them all again under another settings id, and the report then
    # found no vanilla under the first one's).
    reordered = dataclasses.replace(settings, order="score", max_prompt_tokens=1024)
    assert run_evaluation(tasks, repos, results, reordered).written == 0


def test_a_link_to_the_hole_file_shows_none_of_its_windows(benchmark: tuple[Path, Path], tmp_path: Path):
    """A symbolic link to the hole's file is indexed from the disk, answer and all: offering its
    windows would show the lines after the hole."""
    tasks_file, repos = benchmark
    (repos / "synth" / "lib" / "mirror.py").symlink_to("part2/mod5.py")
    tasks = load_tasks(tasks_file)
    results = tmp_path / "results.jsonl"
    # Every window asked for (k past their number): the leak would be offered at some rank.
    assert run_evaluation(tasks, repos, results, RunSettings(retrieval_only=True, k=500)).failed == 0
    records = read_results(results)
    assert records and all(len(r["fragments"]) > 20 for r in records)
    assert all(path != "lib/mirror.py" for r in records for path, *_ in r["fragments"])


def test_a_failed_record_is_tried_again_and_a_rebuilt_task_is_not_taken_for_the_old_one(
        benchmark: tuple[Path, Path], tmp_path: Path):
    """A failed record was final: every rerun skipped it. And records were resumed by task id
    alone: tasks rebuilt into the same folder reuse their ids (`repo/split/k`), so a hole moved to
    another line was answered by the old hole's record, its old ground truth reported as new."""
    tasks_file, repos = benchmark
    tasks = load_tasks(tasks_file)
    results = tmp_path / "results.jsonl"
    settings = RunSettings(retrieval_only=True, alphas=(0.5,))
    first = run_evaluation(tasks, repos, results, settings)
    per_task = first.written // len(tasks)
    lines = results.read_text().splitlines()
    failed = json.loads(lines[0])
    failed["error"] = "the model server went away"
    results.write_text("\n".join([json.dumps(failed), *lines[1:]]) + "\n")
    again = run_evaluation(tasks, repos, results, settings)
    assert (again.written, again.skipped) == (1, first.written - 1)  # the failed one, tried again
    newest = [r for r in read_results(results) if r["task_id"] == failed["task_id"]
              and r["strategy"] == failed["strategy"]][-1]
    assert "error" not in newest
    # The first task rebuilt one line lower, under the same id.
    path = repos / "synth" / "lib/part2/mod5.py"
    file_lines = path.read_text().split("\n")
    moved = tasks[0].lineno + 1
    assert file_lines[moved].strip()
    rebuilt = [_task_line(tasks[0].task_id, "synth", "lib/part2/mod5.py", file_lines, moved,
                          start=tasks[0].context_start_lineno),
               *tasks_file.read_text().splitlines()[1:]]
    tasks_file.write_text("\n".join(rebuilt) + "\n")
    third = run_evaluation(load_tasks(tasks_file), repos, results, settings)
    assert (third.written, third.skipped) == (per_task, first.written - per_task)


def test_a_task_whose_file_does_not_hold_its_ground_truth_is_refused(benchmark: tuple[Path, Path],
                                                                     tmp_path: Path):
    """A tasks file and a repositories folder that do not match (another snapshot, holes moved)
    were scored silently, the answer possibly above the cursor: the run is refused, in one line."""
    tasks_file, repos = benchmark
    tasks = load_tasks(tasks_file)
    path = repos / "synth" / "lib/part2/mod5.py"
    file_lines = path.read_text().split("\n")
    above = tasks[0].lineno - 1
    shifted = json.loads(tasks_file.read_text().splitlines()[0])
    shifted["metadata"]["ground_truth"] = file_lines[above] + "  # not this line"
    tasks_file.write_text("\n".join([json.dumps(shifted), *tasks_file.read_text().splitlines()[1:]]) + "\n")
    failure = run_evaluation(load_tasks(tasks_file), repos, tmp_path / "r.jsonl", RunSettings(retrieval_only=True))
    assert isinstance(failure, Failure) and failure.kind == "task-not-in-file", failure
    assert f"1 of {len(tasks)} tasks name a hole whose ground truth is not what their file holds" in failure.message


def test_the_hole_file_is_indexed_as_cut_at_the_hole(tmp_path: Path):
    """The hole's own call must not relate the lines above it to the definition it calls: the
    definition window gets no environment score from the hole's file, and the index is whole again
    after the run."""
    repos = tmp_path / "repositories"
    write_repo(repos / "r", {
        # Far apart in the folder tree: only the call relates them (0.3 per folder hop is below tau).
        "liba/core/target.py": "def rarely_called_target(value):\n    return value * 2\n",
        "appb/views/user.py": "from liba.core.target import rarely_called_target\n\n\ndef use(value):\n"
                       "    value = value + 1\n    result = rarely_called_target(value)\n    return result\n",
    })
    lines = (repos / "r" / "appb/views/user.py").read_text().split("\n")
    hole = lines.index("    result = rarely_called_target(value)")
    tasks_file = tmp_path / "api.jsonl"
    tasks_file.write_text(_task_line("r/api/0", "r", "appb/views/user.py", lines, hole, split="api",
                                     definition={"path": "liba/core/target.py", "line": 0,
                                                 "name": "rarely_called_target"})
                          + "\n")
    results = tmp_path / "results.jsonl"
    summary = run_evaluation(load_tasks(tasks_file), repos, results, RunSettings(retrieval_only=True, alphas=(1.0,)))
    assert summary.failed == 0
    for record in read_results(results):
        rows = [row for row in record["fragments"] if row[0] == "liba/core/target.py"]
        assert rows and all(row[4] == 0.0 for row in rows), record["fragments"]  # s_env of the definition
    # With the whole file indexed, the same definition window is related to user.py's code.
    from repomem.service import RepoService

    service = RepoService.open(repos / "r")
    service.ensure_index()
    assert service.index is not None and service.index.n_live_files == 2
    definition = service.view().visible_fragments("liba/core/target.py", 0, 0)
    related = service.index.relation_matrix()[definition].toarray()
    user_file = service.index.file_id("appb/views/user.py")
    assert related[:, service.index.fragment_file == user_file].sum() > 0


def test_missing_repository_files_fail_before_any_work(benchmark: tuple[Path, Path], tmp_path: Path):
    tasks_file, repos = benchmark
    tasks = load_tasks(tasks_file)
    failure = run_evaluation(tasks, tmp_path / "nowhere", tmp_path / "r.jsonl", RunSettings(retrieval_only=True))
    assert "no such folder" in failure.message
    (repos / "synth" / "lib/part2/mod5.py").unlink()
    failure = run_evaluation(tasks, repos, tmp_path / "r.jsonl", RunSettings(retrieval_only=True))
    assert f"{len(tasks)} of {len(tasks)} tasks name files missing" in failure.message
    assert not (tmp_path / "r.jsonl").exists()


# -- the real CLI with the embedded model ------------------------------------------------------------


def _repomem(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """`repomem ARGS`; an `eval run` that opens the embedded model runs the small one (EVAL_SMALL_MODEL)."""
    if args[:2] == ("eval", "run") and not {"--endpoint", "--model", "--hf", "--retrieval-only"} & set(args):
        args = (*args, *EVAL_SMALL_MODEL)
    return run(*args, cwd=cwd, timeout=timeout)


@pytest.fixture(scope="module")
def shop_benchmark(tmp_path_factory) -> tuple[Path, Path]:
    """Two tasks on the bundled example: a line hole and an API hole calling pricing.compute_tax."""
    base = tmp_path_factory.mktemp("shop-eval")
    repos = base / "repositories"
    copy_example(repos / "shop")
    checkout = (repos / "shop" / "shop" / "checkout.py").read_text().split("\n")
    line_no = checkout.index("    lines = tuple(cart.summary().splitlines())")
    (base / "line.jsonl").write_text(_task_line("shop/line/0", "shop", "shop/checkout.py", checkout, line_no) + "\n")
    pricing = (repos / "shop" / "shop" / "pricing.py").read_text().split("\n")
    definition_line = next(i for i, line in enumerate(pricing) if line.startswith("def compute_tax("))
    report = (repos / "shop" / "shop" / "report.py").read_text().split("\n")
    report[-2] = "    return compute_tax(amount_cents, tax_class)"
    (repos / "shop" / "shop" / "report.py").write_text("\n".join(report))
    (base / "api.jsonl").write_text(_task_line(
        "shop/api/0", "shop", "shop/report.py", report, len(report) - 2, split="api",
        definition={"path": "shop/pricing.py", "line": definition_line, "name": "compute_tax"}) + "\n")
    return base, repos


@pytest.mark.slow
def test_eval_run_and_report_with_the_embedded_model(shop_benchmark: tuple[Path, Path]):
    base, repos = shop_benchmark
    results = base / "results.jsonl"
    store = base / "generations.jsonl"
    run = _repomem("eval", "run", "--tasks", str(base / "line.jsonl"), "--tasks", str(base / "api.jsonl"),
                   "--repos", str(repos), "--results", str(results), "--strategies", "infile,vanilla,repocoder",
                   "--max-new-tokens", "24", "--prompt-tokens", "512", "--generations", str(store))
    assert run.returncode == 0, run.stderr
    assert "6 results written" in run.stdout and "(0 from the generation store)" in run.stdout, run.stdout
    # RepoCoder's first round is the vanilla completion: generated once per task (on this tiny repo
    # the vanilla prompt may even equal the in-file one, hence "at least").
    assert int(re.search(r"(\d+) generations reused", run.stdout).group(1)) >= 2, run.stdout
    records = {(r["task_id"], r["strategy"]): r for r in read_results(results)}
    assert len(records) == 6
    for record in records.values():
        assert "error" not in record, record
        assert 0.0 <= record["es"] <= 1.0 and isinstance(record["em"], bool)
        assert record["em"] == exact_match(record["prediction"], record["ground_truth"])
        assert record["tokens"]["generated"] <= 24
        assert record["prompt_first_line"] >= 0
    api = records[("shop/api/0", "vanilla")]
    assert api["hit_rank"] is not None and api["prompt_hit"], api  # compute_tax's definition reached the prompt
    assert api["prompt_name_hit"] and "prompt_name_hit" not in records[("shop/line/0", "vanilla")]
    assert records[("shop/api/0", "infile")]["hit_rank"] is None
    assert records[("shop/api/0", "repocoder")]["rounds"] == 2
    for task in ("shop/api/0", "shop/line/0"):  # both rounds scored, the last being the prediction's
        repocoder = records[(task, "repocoder")]
        assert len(repocoder["round_em"]) == 2 and repocoder["round_em"][-1] == repocoder["em"]
        assert records[(task, "vanilla")]["round_em"] == [records[(task, "vanilla")]["em"]]

    again = _repomem("eval", "run", "--tasks", str(base / "line.jsonl"), "--tasks", str(base / "api.jsonl"),
                     "--repos", str(repos), "--results", str(results), "--strategies", "infile,vanilla,repocoder",
                     "--max-new-tokens", "24", "--prompt-tokens", "512")
    assert again.returncode == 0 and "0 results written, 6 already there" in again.stdout, again.stdout

    # Another results file (another configuration) with the same generation store: every prompt was
    # answered for its task already, so nothing is generated and the predictions are the same.
    stored = len(store.read_text().splitlines())
    # Per task: infile, vanilla (also RepoCoder's first round) and RepoCoder's second round, fewer
    # where two prompts coincide.
    assert 2 <= stored <= 6
    replay = base / "replayed.jsonl"
    third = _repomem("eval", "run", "--tasks", str(base / "line.jsonl"), "--tasks", str(base / "api.jsonl"),
                     "--repos", str(repos), "--results", str(replay), "--strategies", "infile,vanilla,repocoder",
                     "--max-new-tokens", "24", "--prompt-tokens", "512", "--generations", str(store))
    assert third.returncode == 0, third.stderr
    recalled = int(re.search(r"\((\d+) from the generation store\)", third.stdout).group(1))
    assert recalled == stored, third.stdout
    assert len(store.read_text().splitlines()) == stored
    replayed = {(r["task_id"], r["strategy"]): r for r in read_results(replay)}
    assert {key: r["prediction"] for key, r in replayed.items()} == {key: r["prediction"] for key, r in records.items()}

    out = base / "report"
    report = _repomem("eval", "report", str(results), "--out", str(out))
    assert report.returncode == 0, report.stderr
    text = (out / "report.md").read_text()
    assert "| api | vanilla | 1 |" in text and "| line | repocoder | 1 |" in text
    assert (out / "strategies.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((out / "report.json").read_text())
    assert {row["strategy"] for row in summary["model"]} == {"infile", "vanilla", "repocoder"}


@pytest.mark.slow
def test_typing_word_puts_the_cursor_inside_a_name_and_scores_the_line_as_typed(shop_benchmark: tuple[Path, Path]):
    """`eval run --typing word`: the cursor after half of a name of the hole's line (an editor's
    completion while a name is typed); the prediction is the typed text and the model's answer."""
    base, repos = shop_benchmark
    results = base / "typed.jsonl"
    common = ["eval", "run", "--tasks", str(base / "line.jsonl"), "--tasks", str(base / "api.jsonl"),
              "--repos", str(repos), "--results", str(results), "--strategies", "vanilla",
              "--max-new-tokens", "24", "--prompt-tokens", "512"]
    run = _repomem(*common, "--typing", "word")
    assert run.returncode == 0 and "2 results written" in run.stdout, (run.stdout, run.stderr)
    tasks = {t.task_id: t for path in ("line.jsonl", "api.jsonl") for t in load_tasks(base / path)}
    for record in read_results(results):
        typed = typed_prefix(tasks[record["task_id"]])
        assert record["typing"] == "word" and record["typed"] == typed and len(typed.strip()) >= 2
        assert record["ground_truth"].startswith(typed) and not record["ground_truth"].startswith(typed + " ")
        assert record["prediction"].startswith(typed)
        assert record["em"] == exact_match(record["prediction"], record["ground_truth"])
    # Kept apart from the cursor-at-line-start records of the same configuration (the resume key).
    record = read_results(results)[0]
    assert record_key(record) != record_key({k: v for k, v in record.items() if k not in ("typing", "typed")})


@pytest.mark.slow
def test_right_context_shows_the_code_after_the_hole_as_an_editor_does(shop_benchmark: tuple[Path, Path]):
    """`eval run --right-context`: the file keeps everything but the hole's lines, and the prompt
    fills in the middle with the code below; the records say so and stay apart from the
    left-context ones."""
    base, repos = shop_benchmark
    tasks = {t.task_id: t for path in ("line.jsonl", "api.jsonl") for t in load_tasks(base / path)}
    for task in tasks.values():
        text = (repos / task.repo / task.path).read_text()
        cursor = task_cursor(repos / task.repo, task, text, right_context=True)
        lines = text.split("\n")
        assert cursor.text.split("\n") == [*lines[: task.lineno], "", *lines[task.lineno + 1:]]
        assert task_cursor(repos / task.repo, task, text).text.split("\n") == [*lines[: task.lineno], ""]
    results = base / "right.jsonl"
    # Filling in the middle, as the editor does with any model but the 0.5B (this test's model,
    # which completes left to right by default: eval/results/right-context).
    run = _repomem("eval", "run", "--tasks", str(base / "line.jsonl"), "--tasks", str(base / "api.jsonl"),
                   "--repos", str(repos), "--results", str(results), "--strategies", "vanilla",
                   "--max-new-tokens", "24", "--prompt-tokens", "512", "--right-context",
                   "--set", "completion.fill_in_middle=true")
    assert run.returncode == 0 and "2 results written" in run.stdout, (run.stdout, run.stderr)
    records = read_results(results)
    assert len(records) == 2 and all(r["right_context"] for r in records), records
    for record in records:
        task = tasks[record["task_id"]]
        below = next((line for line in (repos / task.repo / task.path).read_text().split("\n")[task.lineno + 1:]
                      if line.strip()), None)
        # The line task has code below its hole; the API task's hole is its file's last line.
        assert (record["suffix_tokens"] > 0) == (below is not None), record
        first = next((line for line in record["prediction"].split("\n") if line.strip()), "")
        assert record["next_line_echo"] == (below is not None and first.rstrip() == below.rstrip())
        assert record["completion"] == "" or not record["next_line_echo"]
    record = records[0]
    assert record_key(record) != record_key({k: v for k, v in record.items() if k != "right_context"})
    # The editor's own setting decides whether the prompt fills in the middle: the 0.5B's default
    # does not.
    plain = base / "right-plain.jsonl"
    run = _repomem("eval", "run", "--tasks", str(base / "line.jsonl"), "--repos", str(repos), "--results", str(plain),
                   "--strategies", "vanilla", "--max-new-tokens", "24", "--prompt-tokens", "512", "--right-context")
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert [r["suffix_tokens"] for r in read_results(plain)] == [0]


@pytest.mark.slow
def test_right_context_prompt_only_records_say_how_many_suffix_tokens_the_prompt_showed(
        shop_benchmark: tuple[Path, Path]):
    """`--prompt-only --right-context`: no answer (no `next_line_echo`), but the suffix's share of
    the prompt is the same as the model run's, and is recorded."""
    base, repos = shop_benchmark
    common = ["--tasks", str(base / "line.jsonl"), "--tasks", str(base / "api.jsonl"), "--repos", str(repos),
              "--strategies", "vanilla", "--max-new-tokens", "24", "--prompt-tokens", "512", "--right-context",
              "--set", "completion.fill_in_middle=true"]
    prompts = base / "right-prompt-only.jsonl"
    run = _repomem("eval", "run", *common, "--results", str(prompts), "--prompt-only")
    assert run.returncode == 0 and "2 results written" in run.stdout, (run.stdout, run.stderr)
    records = {r["task_id"]: r for r in read_results(prompts)}
    # The line task has code below its hole; the API task's hole is its file's last line.
    assert records["shop/line/0"]["suffix_tokens"] > 0 and records["shop/api/0"]["suffix_tokens"] == 0, records
    assert not any("next_line_echo" in r for r in records.values())


@pytest.mark.slow
def test_deferred_prompts_answered_elsewhere_replay_as_a_direct_run(shop_benchmark: tuple[Path, Path],
                                                                    tmp_path: Path):
    """`eval run --defer` writes the prompts instead of generating them (no records), the answering
    script fills a store from that file alone, and the same run with the store writes the records a
    direct run writes, generating nothing. fragrel at alpha 0 (`--alphas 0`) rides along, and the
    file-only round's prompt (the embedded model reports confidences) is written out in the same
    pass as the prompt it second-guesses: one answering pass completes the run."""
    base, repos = shop_benchmark
    common = ("--tasks", str(base / "line.jsonl"), "--tasks", str(base / "api.jsonl"), "--repos", str(repos),
              "--strategies", "vanilla,fragrel", "--alphas", "0", "--max-new-tokens", "12", "--prompt-tokens", "128")
    direct = tmp_path / "direct.jsonl"
    assert _repomem("eval", "run", *common, "--results", str(direct)).returncode == 0
    results, store, requests = tmp_path / "results.jsonl", tmp_path / "store.jsonl", tmp_path / "requests.jsonl"
    deferring = _repomem("eval", "run", *common, "--results", str(results), "--generations", str(store),
                         "--defer", str(requests))
    assert deferring.returncode == 0, deferring.stderr
    assert "0 results written" in deferring.stdout and "6 results deferred" in deferring.stdout, deferring.stdout
    assert read_results(results) == []
    entries = [json.loads(line) for line in requests.read_text().splitlines()]
    # Per task: vanilla's, fragrel's at two alphas and the file-only round's prompt; shared ones once.
    assert 2 <= len(entries) <= 8 and len({e["key"] for e in entries}) == len(entries)
    assert {e["task"] for e in entries} == {"shop/line/0", "shop/api/0"}
    assert all(e["enough_lines"] == 1 and e["max_tokens"] == 12 for e in entries)
    answers = tmp_path / "answers.jsonl"
    answered = subprocess.run([sys.executable, str(ROOT / "scripts" / "answer_requests.py"), str(requests),
                               "--out", str(answers), "--batch", "2", *EVAL_SMALL_MODEL],
                              capture_output=True, text=True, timeout=600)
    assert answered.returncode == 0, answered.stderr
    assert f"{len(entries)} answers" in answered.stdout, answered.stdout
    with open(store, "a", encoding="utf-8") as handle:
        handle.write(answers.read_text())
    replay = _repomem("eval", "run", *common, "--results", str(results), "--generations", str(store),
                      "--defer", str(tmp_path / "again.jsonl"))
    assert replay.returncode == 0, replay.stderr
    assert "6 results written" in replay.stdout and "results deferred" not in replay.stdout, replay.stdout
    assert (tmp_path / "again.jsonl").read_text() == ""
    replayed = {(r["task_id"], r["strategy"], r["alpha"]): r for r in read_results(results)}
    assert {key[1:] for key in replayed} == {("vanilla", 0.0), ("fragrel", 0.5), ("fragrel", 0.0)}
    assert {(r["task_id"], r["strategy"], r["alpha"]): r["prediction"] for r in read_results(direct)} == \
        {key: r["prediction"] for key, r in replayed.items()}


@pytest.mark.slow
def test_ctrl_c_keeps_finished_results_and_a_rerun_resumes(shop_benchmark: tuple[Path, Path]):
    base, repos = shop_benchmark
    results = base / "interrupted.jsonl"
    command = [sys.executable, "-m", "repomem", "eval", "run", "--tasks", str(base / "line.jsonl"),
               "--tasks", str(base / "api.jsonl"), "--repos", str(repos), "--results", str(results),
               "--strategies", "vanilla,fragrel,repocoder+fragrel", "--max-new-tokens", "24", "--prompt-tokens", "256",
               *EVAL_SMALL_MODEL]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (results.exists() and results.read_text().count("\n") >= 3):
        time.sleep(0.05)
    signalled = time.monotonic()
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=120)
    kept = read_results(results)
    if process.returncode == 0:  # finished before the signal landed: nothing to resume
        assert len(kept) == 6
        return
    assert process.returncode == 130, stderr
    # The answer in flight is abandoned, the model's child killed (its graceful stop waited up to 5 s).
    assert time.monotonic() - signalled < 2, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert 3 <= len(kept) < 6
    resumed = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{6 - len(kept)} results written, {len(kept)} already there" in resumed.stdout
    assert len(read_results(results)) == 6


class _HangsOnceAResultIsWritten(http.server.BaseHTTPRequestHandler):
    """A served model (its model list, token counts and streamed one-line answers) that stops
    answering anything, token counts included, once `results` holds a record: a server that hangs
    (a stuck GPU) mid-run. `release` ends the hang."""

    results: Path | None = None
    hanging = threading.Event()
    release = threading.Event()

    def do_GET(self):  # noqa: N802
        answer_json(self, {"data": [{"id": "qwen2.5-coder-0.5b"}]})

    def do_POST(self):  # noqa: N802
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        results = type(self).results
        if results is not None and results.exists() and results.read_text():
            type(self).hanging.set()
            type(self).release.wait(120)
        if self.path.endswith("tokenize"):
            text = request.get("prompt") or request.get("input") or ""
            answer_json(self, {"tokens": list(range(len(text) // 4 + 1))})
            return
        answer_stream(self, "x = 1\n", request["prompt"], 3)

    def log_message(self, *args):
        pass

    def handle(self):
        try:
            super().handle()
        except ConnectionError:  # the run went away mid-answer: what it was sent is lost, as it should be
            pass


def test_ctrl_c_abandons_the_request_in_flight_at_once(shop_benchmark: tuple[Path, Path]):
    """Ctrl-C waited for the request in flight: the answer being generated (10-20 s on the CPU, the
    embedded model's child stopped gracefully) or, against a server that hangs, its token counts'
    deadlines one after another (minutes). The run now ends within a second: exit 130, the records
    written kept, one line saying how to resume, and the same command resumes."""
    base, repos = shop_benchmark
    results = base / "hung.jsonl"
    handler = type("Handler", (_HangsOnceAResultIsWritten,), {
        "results": results, "hanging": threading.Event(), "release": threading.Event()})
    server, url = serve_http(handler)
    command = [sys.executable, "-m", "repomem", "eval", "run", "--tasks", str(base / "line.jsonl"),
               "--tasks", str(base / "api.jsonl"), "--repos", str(repos), "--results", str(results),
               "--strategies", "vanilla", "--endpoint", url, "--set", "model.endpoint_logprobs=false"]
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert handler.hanging.wait(120), process.communicate(timeout=60)
        time.sleep(0.3)  # the run waits on the server now
        signalled = time.monotonic()
        process.send_signal(signal.SIGINT)
        try:
            stdout, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
        took = time.monotonic() - signalled
        assert process.returncode == 130, stderr
        assert took < 1.5, f"{took:.1f} s from Ctrl-C to exit"
        kept = read_results(results)
        assert len(kept) == 1 and "error" not in kept[0], kept  # the first task's; the second's was in flight
        said = [line for line in stderr.splitlines() if line.startswith("repomem:")]
        assert said == [f"repomem: interrupted; the finished results are kept in {results}: run the same command "
                        "again to resume (it skips them)"], stderr
        assert "Traceback" not in stderr
        handler.results = None  # the server answers again
        handler.release.set()
        resumed = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        assert "1 results written, 1 already there" in resumed.stdout, resumed.stdout
    finally:
        handler.release.set()
        server.shutdown()
        server.server_close()


@pytest.mark.slow
def test_workers_and_several_endpoints_write_the_same_records(shop_benchmark: tuple[Path, Path], llama_server):
    """Three workers over two clients of a real server write, in the same order, the records one
    worker writes (wall times and cache hits aside); results name the model, not the server's URL.
    Log-probabilities are not asked for (model.endpoint_logprobs): llama-cpp-python's server
    sorts the whole vocabulary for each one (~0.25 s a token here), and without them fragrel's
    file-only round generates nothing more."""
    base, repos = shop_benchmark
    url, _ = llama_server
    common = ["eval", "run", "--tasks", str(base / "line.jsonl"), "--tasks", str(base / "api.jsonl"),
              "--repos", str(repos), "--strategies", "vanilla,fragrel", "--max-new-tokens", "6",
              "--prompt-tokens", "128", "--set", "model.endpoint_logprobs=false"]
    runs = {}
    for workers, endpoints in ((1, [url]), (3, [url, url])):
        results = base / f"workers-{workers}.jsonl"
        run = _repomem(*common, "--results", str(results), "--workers", str(workers),
                       *[arg for endpoint in endpoints for arg in ("--endpoint", endpoint)])
        assert run.returncode == 0, run.stderr
        assert "4 results written" in run.stdout, run.stdout
        runs[workers] = [comparable_record(r) for r in read_results(results)]
    assert runs[1] == runs[3]
    assert all("error" not in r for r in runs[1]), runs[1]
    # No confidence reported, so fragrel's file-only round generated nothing more.
    assert all(r["rounds"] == 1 and r["round_logprob"] == [None] for r in read_results(base / "workers-1.jsonl"))
    assert {r["backend"] for r in runs[1]} == {"openai:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"}


def test_prompt_only_runs_measure_what_enters_the_prompt(shop_benchmark: tuple[Path, Path]):
    base, repos = shop_benchmark
    results = base / "results-prompt.jsonl"
    common = ["eval", "run", "--tasks", str(base / "line.jsonl"), "--tasks", str(base / "api.jsonl"),
              "--repos", str(repos), "--results", str(results), "--prompt-only", "--prompt-tokens", "512",
              "--strategies", "vanilla,fragrel,hat,qrmem"]
    for extra in ([], ["--set", "prompt.pack_blocks=true"]):
        run = _repomem(*common, *extra)
        assert run.returncode == 0, run.stderr
        assert "8 results written" in run.stdout, run.stdout  # four strategies on two tasks
    records = read_results(results)
    asked = [r for r in records if r["strategy"] == "qrmem" and r.get("memory_calls")]
    assert asked and all(len(r["model_calls"]) == r["memory_calls"] and r["model_calls"][0]["prompt"]
                         and r["timings_ms"]["memory_model"] > 0 for r in asked)  # QRMeM's reflections, recorded
    assert {r["mode"] for r in records} == {"prompt"} and {r["config"] for r in records} == {
        "", "prompt.pack_blocks=true"}
    for record in records:
        assert "prediction" not in record and record["prompt_blocks"] >= 1, record
        assert 0 <= record["duplicate_block_tokens"] <= record["block_line_tokens"]
    api = [r for r in records if r["split"] == "api"]
    assert all(r["prompt_hit"] for r in api)  # compute_tax's definition fits a 256-token block budget
    plain = {(r["task_id"], r["strategy"]): r for r in records if not r["config"]}
    packed = {(r["task_id"], r["strategy"]): r for r in records if r["config"]}
    def distinct(record: dict) -> int:  # block line tokens that neither the file nor another block shows
        return record["block_line_tokens"] - record["duplicate_block_tokens"]
    # Packing shows each line of a file once, so the same block budget holds at least as much distinct
    # code. (Not fewer duplicates in every task: the room it frees can admit another file's block that
    # repeats a line of the visible file, such as `from .cart import Cart` for qrmem here.)
    for key, record in packed.items():
        assert distinct(record) >= distinct(plain[key]), (key, record, plain[key])
    assert sum(map(distinct, packed.values())) > sum(map(distinct, plain.values()))
    report = _repomem("eval", "report", str(results), "--out", str(base / "prompt-report"))
    assert report.returncode == 0, report.stderr
    assert "What enters the prompt" in report.stdout and "pack_blocks=true" in report.stdout


def test_eval_bad_input_is_one_line_and_exit_2(shop_benchmark: tuple[Path, Path], tmp_path: Path):
    base, repos = shop_benchmark
    cases = [
        (["eval", "run", "--tasks", str(tmp_path / "absent.jsonl"), "--repos", str(repos)], "no such file"),
        (["eval", "run", "--tasks", str(base / "line.jsonl"), "--repos", str(tmp_path / "nope"),
          "--retrieval-only"], "no such folder"),
        (["eval", "run", "--tasks", str(base / "line.jsonl"), "--repos", str(repos), "--strategies", "magic"],
         "unknown 'magic'"),
        (["eval", "run", "--tasks", str(base / "line.jsonl"), "--repos", str(repos), "--strategies", " , "],
         "--strategies: names none; choose from"),
        (["eval", "run", "--tasks", str(base / "line.jsonl"), "--repos", str(repos), "--limit", "0"], "--limit"),
        (["eval", "report", str(tmp_path / "none.jsonl")], "no such file"),
        (["eval", "run", "--tasks", str(base / "line.jsonl"), "--repos", str(repos), "--retrieval-only",
          "--set", "pack_blocks"], "expected section.key=value"),
        (["eval", "run", "--tasks", str(base / "line.jsonl"), "--repos", str(repos), "--retrieval-only",
          "--set", "prompt.pack_max_lines=0"], "must be > 0"),
        # Refused before the model is opened (the embedded one would take seconds to start).
        (["eval", "run", "--tasks", str(base / "line.jsonl"), "--repos", str(repos),
          "--set", "model.endpoint_logprobs=maybe"], "model.endpoint_logprobs"),
    ]
    for args, expected in cases:
        result = _repomem(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert expected in result.stderr and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    # A setting named where it used to live is applied where it lives now, and said so.
    moved = _repomem("eval", "run", "--tasks", str(base / "line.jsonl"), "--repos", str(repos), "--retrieval-only",
                     "--results", str(tmp_path / "moved.jsonl"), "--set", "completion.pack_blocks=true")
    assert moved.returncode == 0, moved.stderr
    assert "warning: --set: completion.pack_blocks has moved to prompt.pack_blocks" in " ".join(moved.stderr.split())
    # A generation store or a defer file named for a run without a model did nothing, without a word.
    unused = _repomem("eval", "run", "--tasks", str(base / "line.jsonl"), "--repos", str(repos), "--retrieval-only",
                      "--results", str(tmp_path / "unused.jsonl"), "--generations", str(tmp_path / "store.jsonl"))
    assert unused.returncode == 0, unused.stderr
    assert "warning: --generations does nothing with --retrieval-only" in " ".join(unused.stderr.split())


def test_one_file_named_for_two_roles_is_refused_before_anything_is_written(shop_benchmark: tuple[Path, Path],
                                                                             tmp_path: Path):
    """`--defer` naming the generation store (or the results) emptied it as the run started, and
    `--results` naming a tasks file appended records to it: hours of answers or records lost."""
    base, repos = shop_benchmark
    tasks = tmp_path / "line.jsonl"
    tasks.write_text((base / "line.jsonl").read_text())
    store = tmp_path / "generations.jsonl"
    store.write_text('{"key": "k", "text": "x", "finish_reason": "stop"}\n')
    before = {path: path.read_bytes() for path in (tasks, store)}
    common = ("eval", "run", "--tasks", str(tasks), "--repos", str(repos))
    cases = [((*common, "--generations", str(store), "--defer", str(tmp_path / "." / "generations.jsonl")),
              "--generations"),
             ((*common, "--results", str(tasks), "--retrieval-only"), "--tasks")]
    for args, other in cases:
        result = _repomem(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert "name the same file" in result.stderr and other in result.stderr and "Traceback" not in result.stderr
        assert {path: path.read_bytes() for path in before} == before
