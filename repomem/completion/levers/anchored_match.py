"""Anchored best match: BM25's best matches keep the head of eq. 10's top K.

FragRel's eq. 10 re-ranks by the environment and can push the window that lexically matches the
code best (often the clone a small model copies) below what the block budget holds. With this
lever the first `prompt.anchor_matches` places go to BM25's best whatever eq. 10 says; the
rest follow by s_rel, so relations add to the lexical best match instead of displacing it. Without
it (fragrel-paper) the ranking is the paper's.
"""

from __future__ import annotations

import dataclasses

from repomem.completion.levers.base import PromptLever
from repomem.completion.retrieval_round import RoundQuery


class AnchoredMatch(PromptLever):
    name = "anchored-match"

    def ranking(self, query: RoundQuery) -> RoundQuery:
        return dataclasses.replace(query, anchored=self.round.config.prompt.anchor_matches)
