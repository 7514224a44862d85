"""`eval report` aggregation: model results grouped by run (model, order, prompt budget)."""

from __future__ import annotations

from pathlib import Path

from repomem.evaluation.report import markdown, summarize


def _record(task: int, strategy: str, backend: str, em: bool, prompt_tokens: int = 2048) -> dict:
    return {"version": 1, "task_id": f"r/line/{task}", "split": "line", "repo": "r", "strategy": strategy,
            "alpha": 0.5 if strategy == "fragrel" else 0.0, "k": 10, "order": "score", "mode": "model",
            "backend": backend, "prompt_tokens": prompt_tokens, "em": em, "es": 1.0 if em else 0.5,
            "hit_rank": 1, "prompt_hit": True, "timings_ms": {"total": 1000.0, "generate": 900.0, "retrieve": 2.0}}


def test_shards_of_one_model_are_one_table_and_other_models_their_own():
    # Two shards of one model (run against two servers: the records name the model, not the URL).
    shard_a = [_record(t, s, "openai:qwen.gguf", em=t % 2 == 0) for t in range(0, 4) for s in ("vanilla", "fragrel")]
    shard_b = [_record(t, s, "openai:qwen.gguf", em=True) for t in range(4, 6) for s in ("vanilla", "fragrel")]
    other = [_record(t, "vanilla", "openai:codellama", em=False) for t in range(3)]
    report = summarize(shard_a + shard_b + other)
    assert report.backend == "openai:qwen.gguf"  # the largest run comes first
    qwen = [r for r in report.model_rows if r.backend == "openai:qwen.gguf"]
    assert {r.n for r in qwen} == {6} and {r.strategy for r in qwen} == {"vanilla", "fragrel"}
    assert qwen[0].em == 100.0 * 4 / 6
    llama = [r for r in report.model_rows if r.backend == "openai:codellama"]
    assert len(llama) == 1 and llama[0].n == 3 and llama[0].em == 0.0
    text = markdown(report)
    assert text.count("## Completion") == 2 and "model `openai:codellama`" in text
    only = summarize(shard_a + other, backend="openai:codellama")
    assert {r.backend for r in only.model_rows} == {"openai:codellama"}
    assert summarize(other, backend="nope").kind == "no-results"


def test_repocoder_oracle_counts_a_task_right_in_any_round():
    # Task 0 right in round 1 only, task 1 in round 2 only, task 2 in neither, task 3 in both.
    rounds = [[True, False], [False, True], [False, False], [True, True]]
    records = [_record(t, "vanilla", "m", em=r[0]) for t, r in enumerate(rounds)]
    records += [{**_record(t, "repocoder", "m", em=r[-1]), "round_em": r} for t, r in enumerate(rounds)]
    rows = {r.strategy: r for r in summarize(records).model_rows}
    assert rows["repocoder"].em == 50.0 and rows["repocoder"].oracle_em == 75.0
    assert rows["vanilla"].oracle_em is None  # one round: no oracle
    assert "| 75.0 |" in markdown(summarize(records))
    # A run with overrides is labelled with them; its oracle is still the strategy's.
    overridden = [{**r, "config": "completion.iterative_rounds=3"} for r in records if r["strategy"] == "repocoder"]
    rows = {r.strategy: r for r in summarize(records[:4] + overridden).model_rows}
    assert rows["repocoder [completion.iterative_rounds=3]"].oracle_em == 75.0


def test_the_called_name_counts_as_a_whole_word_only():
    from repomem.evaluation.metrics import names_the_call

    assert names_the_call("x = compute_tax(a)\n", "compute_tax")
    assert names_the_call("from .pricing import compute_tax", "compute_tax")
    assert not names_the_call("x = compute_taxes(a)", "compute_tax")
    assert not names_the_call("x = _compute_tax(a)", "compute_tax")
    assert not names_the_call("", "compute_tax")


def test_the_right_function_is_the_first_call_of_the_first_line_whatever_its_arguments():
    from repomem.evaluation.metrics import called_name, same_call

    assert called_name("    x = self.pkg.compute_tax(\n        a, b)") == "compute_tax"
    assert same_call("return compute_tax(total, 'A')", "return compute_tax(\n    amount, tax_class)")
    assert not same_call("return _accuracy_reduce(tp, fp)", "return _precision_recall_reduce(tp)")
    assert not same_call("x = 1", "x = f(1)") and not same_call("f(1)", "x = 1")  # no call to compare


def test_records_made_under_other_settings_are_reported_apart_never_pooled():
    # A default changed between two runs into one file: `config` (the --set overrides) is the same.
    before = [{**_record(t, "fragrel", "m", em=False), "settings": "aaaa"} for t in range(4)]
    after = [{**_record(t, "fragrel", "m", em=True), "settings": "bbbb"} for t in range(4)]
    vanilla = [{**_record(t, "vanilla", "m", em=False), "settings": "aaaa"} for t in range(4)]
    rows = {r.strategy: r for r in summarize(before + after + vanilla).model_rows}
    assert rows["fragrel (settings aaaa)"].em == 0.0 and rows["fragrel (settings bbbb)"].em == 100.0
    assert "vanilla" in rows  # one setting throughout: its label is unchanged
    assert {r.strategy for r in summarize(after + vanilla).model_rows} == {"fragrel", "vanilla"}


def test_the_settings_fingerprint_follows_what_shapes_a_record_not_how_it_runs():
    from repomem.config import Config, with_overrides
    from repomem.evaluation.run import record_key, settings_fingerprint

    config = Config()
    same = [with_overrides(config, model={"threads": 1, "endpoint": "http://x"}, completion={"deadline_s": 5}),
            with_overrides(config, relations={"workers": 1}), with_overrides(config, index={"workers": 1})]
    assert {settings_fingerprint(c) for c in same} == {settings_fingerprint(config)}
    other = [with_overrides(config, prompt={"continuation_lines": 0}),
             with_overrides(config, retrieval={"alpha": 1}), with_overrides(config, bm25={"k1": 1.2})]
    assert len({settings_fingerprint(c) for c in [config, *other]}) == 4
    # A run resumes only from records made under its own settings.
    record = {**_record(0, "fragrel", "m", em=True), "settings": settings_fingerprint(config)}
    assert record_key(record) != record_key({**record, "settings": settings_fingerprint(other[0])})


def test_the_slimmed_copies_in_eval_results_are_reported_as_model_records():
    """eval/results' records.jsonl.xz carry no mode and no K; `eval report` refused them ("not a
    results file of `eval run`") although their README's report was made from them."""
    slim = [{key: value for key, value in _record(t, s, "m", em=t % 2 == 0).items() if key not in ("mode", "k")}
            for t in range(4) for s in ("vanilla", "fragrel")]
    report = summarize(slim)
    assert {(row.strategy, row.n) for row in report.model_rows} == {("vanilla", 4), ("fragrel", 4)}
    assert report.k == 10 and not report.notes
    slimmer = [{key: value for key, value in r.items() if key not in ("backend", "order")} for r in slim]
    assert [row.em for row in summarize(slimmer).model_rows] == [row.em for row in report.model_rows]
    # Records that are no model record (a task id and a verdict, nothing else) are still refused.
    assert summarize([{"version": 1, "task_id": "x", "em": "yes"}]).kind == "no-results"


def _retrieval(task: int, strategy: str, rank: int | None, k: int = 10, error: str = "") -> dict:
    record = {"version": 1, "task_id": f"r/line/{task}", "split": "line", "repo": "r", "strategy": strategy,
              "alpha": 0.5 if strategy == "fragrel" else 0.0, "k": k, "order": "", "mode": "retrieval",
              "backend": "", "hit_rank": rank, "timings_ms": {"retrieve": 2.0}}
    return {**record, "error": error} if error else record


def test_what_the_retrieval_table_leaves_out_is_said_under_it():
    """A task failed for one strategy left every strategy's row, and records at a smaller K were
    dropped, each without a word, exit 0."""
    records = [_retrieval(t, s, 1) for t in range(3) for s in ("vanilla", "fragrel")]
    records += [_retrieval(3, "vanilla", 1), _retrieval(3, "fragrel", None, error="line 1 is 20,000 characters")]
    records += [_retrieval(t, "fragrel", 2, k=5) for t in range(2)]
    report = summarize(records)
    assert {row.n for row in report.retrieval_rows} == {3}
    assert len(report.notes) == 2
    assert report.notes[0].startswith("1 retrieval records failed") and "20,000 characters" in report.notes[0]
    assert report.notes[1].startswith("2 retrieval and prompt records at K = 5 are not tabled")
    text = markdown(report)
    assert "## Left out of the tables" in text and report.notes[1] in text


def test_the_alpha_sweep_plots_fragrel_alone():
    """Other strategies at an alpha of their own (vanilla and hat at 0, fragrel-paper at 0.5) were
    joined into the FragRel sweep's line, which zigzagged up and down at one alpha."""
    from repomem.evaluation.plots import alpha_sweep
    from repomem.evaluation.report import Report, RetrievalRow

    def row(strategy: str, alpha: float) -> RetrievalRow:
        return RetrievalRow("line", strategy, alpha, 3, 10.0, 20.0, 30.0, 0.3, None, 1.0, 2.0)

    report = Report((), (row("vanilla", 0.0), row("hat", 0.0), row("fragrel-paper", 0.5), row("fragrel", 0.5)),
                    10, "", "", 0)
    assert alpha_sweep(report, Path("/nonexistent/sweep.png")) is None  # one FragRel point: no line to draw


def test_records_of_two_versions_of_one_task_id_are_said_to_be_paired_all_the_same():
    """A hole moved and rebuilt under the same id: vanilla's new record was paired with fragrel's
    old one, without a word."""
    records = [{**_record(0, "vanilla", "m", em=True), "task_digest": "new"},
               {**_record(0, "fragrel", "m", em=False), "task_digest": "old"},
               {**_record(1, "vanilla", "m", em=True), "task_digest": "b"},
               {**_record(1, "fragrel", "m", em=True), "task_digest": "b"}]
    notes = summarize(records).notes
    assert len(notes) == 1 and notes[0].startswith("1 task ids (the first: r/line/0) have records of different")


def test_records_of_the_wrong_shape_are_skipped_where_results_are_read(tmp_path: Path):
    """A line that parses as JSON and carries the results version but lacks a field, or holds one of
    another type (a hand-edited or merged file, another tool's records), ended `eval report` and a
    resumed `eval run` in an internal error (KeyError 'k', int('ten'), float(None), ...)."""
    import json

    from repomem.evaluation.run import read_results

    good = [_retrieval(t, s, 1) for t in range(2) for s in ("vanilla", "fragrel")]
    bad = [{"version": 1}, {"version": 1, "mode": "retrieval", "task_id": "a"},
           {**good[0], "k": "ten"}, {**good[0], "alpha": None}, {**good[0], "hit_rank": "x"},
           {**good[0], "timings_ms": None}, {**good[0], "task_id": ["a"]},
           {key: value for key, value in good[0].items() if key != "split"},
           {"task_id": "a", "split": "line", "strategy": "vanilla", "alpha": 0, "em": True, "es": "x"},
           {"task_id": "a", "split": "line", "strategy": "vanilla", "alpha": "zero", "em": True}]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in [*good, *bad]), encoding="utf-8")
    records = read_results(path)
    assert records == good
    assert {row.n for row in summarize(records).retrieval_rows} == {2}


def test_strategies_that_share_no_task_are_not_tabled_as_zeros():
    """Two runs on other tasks in one results file: every row read n = 0, 0.0 and a Δ of
    +0.0 [+0.0, +0.0], and a bar chart of zeros was drawn, as if it were a measurement."""
    model = [_record(0, "vanilla", "m", em=True), _record(1, "fragrel", "m", em=True)]
    nothing = summarize(model)  # no table left: one clear failure, not an empty report and exit 0
    assert nothing.kind == "no-results" and "line: no task was finished by every strategy" in nothing.message
    # Another split with shared tasks is still reported; the split without is said to be left out.
    api = [{**_record(t, s, "m", em=True), "split": "api"} for t in (5, 6) for s in ("vanilla", "fragrel")]
    report = summarize([*model, *api])
    assert {row.split for row in report.model_rows} == {"api"}
    assert any(note.startswith("line: no task was finished by every strategy") for note in report.notes)
    assert "| line | vanilla | 0 |" not in markdown(report)
    retrieval = [_retrieval(0, "vanilla", 1), _retrieval(1, "fragrel", 1)]
    assert "no task was finished" in summarize(retrieval).message
    # Some shared tasks: compared on those, and the others are said to be left out.
    report = summarize([*retrieval, _retrieval(2, "vanilla", 1), _retrieval(2, "fragrel", 2)])
    assert {row.n for row in report.retrieval_rows} == {1}
    assert any(note.startswith("line: 2 tasks not finished by every strategy") for note in report.notes)


def test_a_task_that_failed_for_one_strategy_leaves_every_model_row_and_is_said():
    """A failed model record counted as a wrong answer: a server that failed vanilla's requests
    (three tasks of four) read as fragrel's gain, Δ EM +75 where both were right everywhere. Such
    a task now leaves every row, as in the retrieval and prompt tables, and a note says so."""
    records = [_record(t, s, "openai:qwen.gguf", em=True) for t in range(4) for s in ("vanilla", "fragrel")]
    for record in records[:6:2]:  # vanilla's records of tasks 0, 1, 2
        record.update(em=False, es=0.0, error="HTTP 503 from the model server")
    report = summarize(records)
    assert {(row.strategy, row.n, row.em) for row in report.model_rows} == {("vanilla", 1, 100.0),
                                                                            ("fragrel", 1, 100.0)}
    fragrel = next(row for row in report.model_rows if row.strategy == "fragrel")
    assert fragrel.em_delta is not None and fragrel.em_delta[0] == 0.0
    assert {(row.strategy, row.errors) for row in report.model_rows} == {("vanilla", 3), ("fragrel", 0)}
    assert any(note.startswith("3 model records failed") and "HTTP 503" in note for note in report.notes)
    # Every task failed somewhere: no row reads as measured, the note stays.
    for record in records[1:6:2]:
        record.update(error="HTTP 503 from the model server")
    everywhere = summarize(records)
    assert [row.n for row in everywhere.model_rows] == [1, 1]
    records[7]["error"] = "HTTP 503 from the model server"
    assert summarize(records).model_rows == ()
