"""Confident round: of several rounds' answers, the one the model was surest of is shown.

RepoCoder's second round (and the draft-signature round) turns about as many right answers
wrong as wrong answers right; the model's mean log-probability per generated token tells the two
apart better than always taking the last round (completion/rounds.py; `prompt.round_choice`,
docs/repoeval-devset.md#round-choice). Without this lever (RepoCoder as published) the last round is shown.
"""

from __future__ import annotations

from collections.abc import Sequence

from repomem.completion.levers.base import PromptLever
from repomem.completion.rounds import RoundAnswer, choose_round


class ConfidentRound(PromptLever):
    name = "confident-round"

    def shown_round(self, answers: Sequence[RoundAnswer]) -> int | None:
        chosen = choose_round([a.mean_logprob for a in answers], self.round.config.prompt.round_choice)
        # The answer chosen, with the prompt of the first round that gave it: the one whose retrieved
        # blocks explain it (`--json`, explain), not whichever prompt a confidence that differs in
        # the fourth decimal favours (a near tie one llama.cpp build broke one way, another the other).
        return next(i for i, answer in enumerate(answers) if answer.raw == answers[chosen].raw)
