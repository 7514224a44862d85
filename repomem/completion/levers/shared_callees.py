"""Shared callees: usage of what comes next, found through the code graph's call edges.

The functions that already call the repository functions the cursor's function called above the
cursor (resolved call edges: the same definitions, not the same words) tend to call next what the
cursor's function is about to; a block from just above their last shared call shows the model that
usage to copy (retrieval/shared_callees.py). Up to `prompt.shared_callees` such blocks join the
candidates at `prompt.shared_callee_position`. Off by default.
"""

from __future__ import annotations

from repomem.completion.levers.base import PromptLever
from repomem.config import Config
from repomem.retrieval.scoring import ScoredFragment

# Lines shown above the last shared call: the call itself and what set up its arguments.
LINES_BEFORE_SHARED_CALL = 2


class SharedCallees(PromptLever):
    name = "shared-callees"

    @classmethod
    def applies(cls, config: Config) -> bool:
        return config.prompt.shared_callees > 0

    def candidates(self, fragments: list[ScoredFragment]) -> list[ScoredFragment]:
        round = self.round
        settings = round.config.prompt
        request = round.request
        found = round.service.shared_callee_blocks(request.cursor, round.context.definition_line, request.excluded,
                                                   request.unlisted, settings.shared_callees,
                                                   settings.shared_callee_lines, LINES_BEFORE_SHARED_CALL)
        if not found:
            return fragments
        shown = {(f.path, f.start_line) for f in found}
        rest = [f for f in fragments if (f.path, f.start_line) not in shown]
        position = min(settings.shared_callee_position, len(rest))
        return [*rest[:position], *found, *rest[position:]]
