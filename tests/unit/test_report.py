"""`eval report` aggregation: model results grouped by run (model, order, prompt budget)."""

from __future__ import annotations

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
