"""File-only round: the answer from the file alone, shown when the model is surer of it.

A small model given retrieved blocks sometimes copies a near miss from them where the file alone
led it right (how often: docs/repoeval-devset.md#the-file-only-round, the file-only answer right and
the default's wrong). With `prompt.file_only_round` on, the `infile` prompt is completed as well and
the answer with the higher mean log-probability per token is shown, the retrieving one on a tie:
no threshold to tune. A second generation, so only where the backend reports log-probabilities
(every backend, the embedded model too; the language server turns it off with the embedded model,
`[prompt.lsp_embedded] file_only_round`); eval/README.md has the measurement.
"""

from __future__ import annotations

from repomem.completion.levers.base import PromptLever
from repomem.completion.rounds import RoundAnswer
from repomem.config import Config

FILE_ONLY_STRATEGY = "infile"


class FileOnlyRound(PromptLever):
    name = "file-only-round"

    @classmethod
    def applies(cls, config: Config) -> bool:
        return config.prompt.file_only_round

    def second_opinion(self, shown: RoundAnswer) -> str | None:
        return FILE_ONLY_STRATEGY if shown.mean_logprob is not None else None
