"""Clone search: more candidates, found by the visible code's last lines alone.

The clone a small model copies (the same test written for another metric, the same argument
handling in a sibling command) matches the few lines just above the cursor; the whole query
window often ranks it below top K. This lever retrieves again with those lines
(`prompt.continuation_match_lines` of them) and adds up to `prompt.clone_search` of what it
finds to the candidates, for the continuation lever to promote the strongest clone among them
(what it gains: docs/repoeval-devset.md#the-continuation-and-clone-search).
"""

from __future__ import annotations

from repomem.completion.levers.base import PromptLever
from repomem.config import Config
from repomem.retrieval.scoring import ScoredFragment


class CloneSearch(PromptLever):
    name = "clone-search"

    @classmethod
    def applies(cls, config: Config) -> bool:
        settings = config.prompt
        return settings.clone_search > 0 and settings.clone_position >= 0 and settings.continuation_lines > 0

    def candidates(self, fragments: list[ScoredFragment]) -> list[ScoredFragment]:
        settings = self.round.config.prompt
        tail = self.round.tail(settings.continuation_match_lines)
        if not tail:
            return fragments
        found = self.round.retrieve("\n".join(tail))
        have = {f.fragment for f in fragments}
        return [*fragments, *(f for f in found[: settings.clone_search] if f.fragment not in have)]
