"""Which round a multi-round completion shows (prompt.round_choice): RepoCoder's last round, or
the round the model was most confident in (mean log-probability per token), and the report's
column that replays that choice from the records."""

from __future__ import annotations

import pytest

from repomem.backends.base import Generation
from repomem.completion.engine import CompletionEngine
from repomem.completion.rounds import choose_round
from repomem.config import with_overrides
from repomem.evaluation.report import _confident_hits
from repomem.positions import locate
from tests.unit.test_scope_imports import Words, long_report


class Confident(Words):
    """Answers with scripted (text, summed log-probability) pairs, three tokens each, and keeps
    every prompt."""

    def __init__(self, answers: list[tuple[str, float | None]]):
        super().__init__()
        self.answers, self.prompts = list(answers), []

    def generate(self, request):
        self.prompts.append(request.prompt)
        text, logprob = self.answers.pop(0)
        return Generation(text, self.count(request.prompt), 3, 0, "stop", 0.01,
                          None if logprob is None else logprob / 3)


def test_choose_round_takes_the_most_confident_the_later_on_a_tie_and_the_last_when_unknown():
    assert choose_round([-0.1, -0.5], "confident") == 0
    assert choose_round([-0.5, -0.1], "confident") == 1
    assert choose_round([-0.3, -0.3], "confident") == 1
    assert choose_round([-0.1, -0.9, -0.05], "confident") == 2
    assert choose_round([-0.1, None], "confident") == 1
    assert choose_round([-0.1, -0.5], "last") == 1
    assert choose_round([-0.1], "confident") == 0


def _engine(service, answers, choice):
    config = with_overrides(service.config, completion={"max_prompt_tokens": 300, "fill_in_middle": False},
                            prompt={"round_choice": choice, "file_only_round": False})  # rounds alone
    backend = Confident(answers)
    return CompletionEngine(service, backend, config), backend


def test_repocoder_shows_the_confident_round_with_its_own_prompt(tmp_path):
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    # First draft: 3 tokens at -0.375 in all (mean -0.125); second: mean -0.5.
    for choice, shown in (("confident", 0), ("last", 1)):
        engine, backend = _engine(service, [("compute_tax(amount_cents, tax_class)\n", -0.375),
                                            ("compute_tax(amount)\n", -1.5)], choice)
        result = engine.complete(cursor, "repocoder+fragrel", order="score")
        assert len(backend.prompts) == 2 and result.rounds == 2
        assert [a.raw for a in result.round_answers] == ["compute_tax(amount_cents, tax_class)\n",
                                                         "compute_tax(amount)\n"]
        assert [a.mean_logprob for a in result.round_answers] == [-0.125, -0.5]
        assert result.chosen_round == shown
        assert result.raw == result.round_answers[shown].raw
        assert result.prompt.text == backend.prompts[shown]  # the shown answer's own prompt
        assert result.drafts == ("compute_tax(amount_cents, tax_class)\n",)
        assert result.timings_ms["generate"] > 0


def test_one_answer_in_every_round_is_shown_with_the_first_rounds_prompt(tmp_path):
    """The same answer twice: the first round's prompt goes with it, whichever round was surer by a
    hair (its retrieved blocks are what explain the answer)."""
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    engine, backend = _engine(service, [("compute_tax(amount_cents)\n", -0.375), ("compute_tax(amount_cents)\n", -0.3)],
                              "confident")
    result = engine.complete(cursor, "repocoder+fragrel", order="score")
    assert result.chosen_round == 0 and result.prompt.text == backend.prompts[0]
    assert [a.mean_logprob for a in result.round_answers] == pytest.approx([-0.125, -0.1])  # the second: surer
    # Three rounds, the surest answer given twice: the first round that gave it.
    answers = [("compute_tax(amount)\n", -0.3), ("compute_tax(amount_cents)\n", -0.9),
               ("compute_tax(amount_cents)\n", -0.6)]
    engine, backend = _engine(service, answers, "confident")
    engine = CompletionEngine(service, backend, with_overrides(engine.config, completion={"iterative_rounds": 3}))
    result = engine.complete(cursor, "repocoder+fragrel", order="score")
    assert result.chosen_round == 0 and result.raw == "compute_tax(amount)\n"
    engine, backend = _engine(service, [answers[1], answers[0], answers[2]], "confident")
    engine = CompletionEngine(service, backend, with_overrides(engine.config, completion={"iterative_rounds": 3}))
    result = engine.complete(cursor, "repocoder+fragrel", order="score")
    assert result.chosen_round == 1 and result.raw == "compute_tax(amount)\n"
    engine, backend = _engine(service, [("x = 1\n", -3.0), *answers[1:]], "confident")
    engine = CompletionEngine(service, backend, with_overrides(engine.config, completion={"iterative_rounds": 3}))
    result = engine.complete(cursor, "repocoder+fragrel", order="score")
    assert result.chosen_round == 1 and result.prompt.text == backend.prompts[1]  # round 3 was surer


def test_repocoder_as_published_shows_its_last_round_whatever_the_confidence(tmp_path):
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    engine, _ = _engine(service, [("compute_tax(amount_cents)\n", -0.375), ("compute_tax(amount)\n", -3.0)],
                        "confident")
    result = engine.complete(cursor, "repocoder", order="score")
    assert result.chosen_round == 1 and result.raw == "compute_tax(amount)\n"
    assert [a.mean_logprob for a in result.round_answers] == [-0.125, -1.0]  # recorded all the same


def test_without_log_probabilities_the_last_round_is_shown(tmp_path):
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    engine, _ = _engine(service, [("compute_tax(amount_cents)\n", -0.3), ("compute_tax(amount)\n", None)],
                        "confident")
    result = engine.complete(cursor, "repocoder+fragrel", order="score")
    assert result.chosen_round == 1 and result.raw == "compute_tax(amount)\n"
    engine, _ = _engine(service, [("compute_tax(amount_cents)\n", -0.3)], "confident")
    single = engine.complete(cursor, "fragrel", order="score")
    assert single.round_answers == () and single.chosen_round == 0


def test_iterative_rounds_sets_how_many_rounds_an_iterative_strategy_runs(tmp_path):
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    answers = [("compute_tax(amount)\n", -1.5), ("compute_tax(amount_cents)\n", -0.9),
               ("compute_tax(amount_cents, tax_class)\n", -0.3)]
    engine, backend = _engine(service, answers, "confident")
    engine = CompletionEngine(service, backend, with_overrides(engine.config, completion={"iterative_rounds": 3}))
    result = engine.complete(cursor, "repocoder+fragrel", order="score")
    assert len(backend.prompts) == 3 and len(result.round_answers) == 3 and result.chosen_round == 2
    assert result.drafts == ("compute_tax(amount)\n", "compute_tax(amount_cents)\n")
    engine, backend = _engine(service, answers[:1], "confident")
    engine = CompletionEngine(service, backend, with_overrides(engine.config, completion={"iterative_rounds": 3}))
    assert engine.complete(cursor, "fragrel", order="score").round_answers == ()  # single-round: unchanged
    assert len(backend.prompts) == 1


def test_the_report_replays_the_confident_choice_from_the_records():
    records = [
        {"em": False, "round_em": [True, False], "round_logprob": [-0.1, -0.4]},  # confident: right
        {"em": True, "round_em": [False, True], "round_logprob": [-0.4, -0.1]},
        {"em": True, "round_em": [True, True], "round_logprob": [-0.2, -0.2]},
        {"em": False, "round_em": [True, False], "round_logprob": [-0.1, None]},  # unknown: as shown
        {"em": True, "round_em": [True], "round_logprob": [-0.3]},  # one round: as shown
    ]
    assert _confident_hits(records).tolist() == [True, True, True, False, True]
    assert _confident_hits([{"em": True, "round_em": [True], "round_logprob": [None]}]) is None


def test_the_generation_store_keeps_the_log_probability(tmp_path):
    from repomem.backends.base import GenerationRequest
    from repomem.backends.memo import GenerationStore

    request = GenerationRequest(prompt="x = ", max_tokens=4, stop=("\n",), deadline_s=5)
    store = GenerationStore.open(tmp_path / "gen.jsonl")
    store.put(GenerationStore.key("t", "m", request), Generation("1", 2, 2, 0, "stop", 0.1, -0.375))
    store.put(GenerationStore.key("u", "m", request), Generation("2", 2, 2, 0, "stop", 0.1))
    store.close()
    again = GenerationStore.open(tmp_path / "gen.jsonl")
    assert again.get(GenerationStore.key("t", "m", request)).mean_logprob == -0.375
    assert again.get(GenerationStore.key("u", "m", request)).mean_logprob is None
    again.close()


def _file_only_engine(service, answers, on=True):
    engine, backend = _engine(service, answers, "confident")
    config = with_overrides(engine.config, prompt={"file_only_round": on})
    return CompletionEngine(service, backend, config), backend


def test_the_file_only_round_is_shown_when_the_model_is_surer_of_it(tmp_path):
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    # fragrel's answer: mean -0.5; the file alone: mean -0.125 -> the file-only answer is shown.
    engine, backend = _file_only_engine(service, [("compute_tax(amount)\n", -1.5),
                                                  ("compute_tax(amount_cents, tax_class)\n", -0.375)])
    result = engine.complete(cursor, "fragrel", order="score")
    assert len(backend.prompts) == 2
    assert "relevant code fragments" in backend.prompts[0] and "relevant code fragments" not in backend.prompts[1]
    assert result.raw == "compute_tax(amount_cents, tax_class)\n" and result.chosen_round == 1
    assert [a.mean_logprob for a in result.round_answers] == [-0.5, -0.125]
    assert result.strategy == "fragrel" and result.prompt.text == backend.prompts[1] and result.rounds == 2
    # The other way round, and on a tie, the retrieving answer stays.
    for alone in (-3.0, -1.5):
        engine, backend = _file_only_engine(service, [("compute_tax(amount)\n", -1.5), ("x = 1\n", alone)])
        kept = engine.complete(cursor, "fragrel", order="score")
        assert kept.raw == "compute_tax(amount)\n" and kept.chosen_round == 0 and len(kept.round_answers) == 2
        assert kept.prompt.text == backend.prompts[0]
    # The same answer from the file alone, however much surer: shown with the retrieving prompt.
    engine, backend = _file_only_engine(service, [("compute_tax(amount)\n", -1.5), ("compute_tax(amount)\n", -0.3)])
    same = engine.complete(cursor, "fragrel", order="score")
    assert same.chosen_round == 0 and same.prompt.text == backend.prompts[0] and len(same.round_answers) == 2


def test_the_file_only_round_needs_log_probabilities_a_graph_aware_strategy_and_the_setting(tmp_path):
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    for strategy, logprob, on in (("fragrel", None, True), ("vanilla", -1.5, True), ("fragrel-paper", -1.5, True),
                                  ("fragrel", -1.5, False)):
        engine, backend = _file_only_engine(service, [("compute_tax(amount)\n", logprob)], on)
        result = engine.complete(cursor, strategy, order="score")
        assert len(backend.prompts) == 1 and result.round_answers == (), (strategy, logprob, on)
