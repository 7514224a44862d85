"""Definition blocks: compact signature blocks of what the cursor's file imports or calls.

Relations that add context instead of re-ranking it: `prompt.definition_blocks` definitions
in other files, reached through the code graph's import and call edges, join each retrieval's
fragments in front, each a header and docstring line (retrieval/definitions.py). Off (0) by
default: on the dev set it did not raise exact match (docs/eval-history.md).
"""

from __future__ import annotations

from repomem.completion.levers.base import PromptLever
from repomem.config import Config
from repomem.retrieval.scoring import ScoredFragment


class DefinitionBlocks(PromptLever):
    name = "definition-blocks"

    @classmethod
    def applies(cls, config: Config) -> bool:
        return config.prompt.definition_blocks > 0

    def found(self, query_text: str, fragments: list[ScoredFragment]) -> list[ScoredFragment]:
        settings = self.round.config.prompt
        definitions = self.round.service.definitions_at(self.round.request.cursor, query_text,
                                                        settings.definition_blocks, settings.definition_lines)
        return [*definitions, *fragments]
