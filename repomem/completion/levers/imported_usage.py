"""Imported usage: how the repository calls what the file imports and has not called yet.

The name an API completion needs is usually in scope already (the file imports it); what the model
lacks is a call of it to copy. Windows elsewhere that call exactly those definitions (resolved call
edges, retrieval/imported_usage.py), BM25's best of them for the round's query, join the candidates
at `prompt.imported_usage_position`: up to `prompt.imported_usages` of them. Off by default.
"""

from __future__ import annotations

from repomem.completion.levers.base import PromptLever
from repomem.config import Config
from repomem.retrieval.scoring import ScoredFragment


class ImportedUsage(PromptLever):
    name = "imported-usage"

    @classmethod
    def applies(cls, config: Config) -> bool:
        return config.prompt.imported_usages > 0

    def candidates(self, fragments: list[ScoredFragment]) -> list[ScoredFragment]:
        round = self.round
        settings = round.config.prompt
        request = round.request
        found = round.service.imported_usage_blocks(request.cursor, round.context.definition_line,
                                                    round.context.query, request.excluded, request.unlisted,
                                                    settings.imported_usages)
        have = {f.fragment for f in found}
        rest = [f for f in fragments if f.fragment not in have]
        position = min(settings.imported_usage_position, len(rest))
        return [*rest[:position], *found, *rest[position:]]
