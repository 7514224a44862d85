"""Continuation: blocks slid to show what followed their match, the strongest clone moved up.

A window of another file whose lines match the visible code's last lines slides down, keeping
its length, until it shows `prompt.continuation_lines` non-blank lines past the match
(completion/continuation.py); then the candidate that best matches with a line shown after it
moves up to `prompt.clone_position` (-1: stays). On the dev set this is what made `fragrel`
beat BM25 in exact match (docs/eval-history.md, fifth round).

Promotion lives here, not in clone search, because order "stable" remembers the two together: a
function's first completion decides each window's shown lines and their order, and its later
completions show the same, so their prompts keep sharing the block section as the cursor moves.
"""

from __future__ import annotations

import functools

from repomem.completion.continuation import blocks_at, continued_blocks, spans_of, strongest_clone, with_clone_at
from repomem.completion.levers.base import PromptLever
from repomem.completion.prompt import ContextBlock
from repomem.config import Config


class Continuation(PromptLever):
    name = "continuation"

    @classmethod
    def applies(cls, config: Config) -> bool:
        return config.prompt.continuation_lines > 0

    def blocks(self, blocks: list[ContextBlock]) -> list[ContextBlock]:
        round = self.round
        key = round.stable_key
        remembered = round.memory.get(self.name, key) if key is not None else None
        if remembered is not None:
            shown = blocks_at(blocks, remembered, round.view.file_lines)
            if shown is not None:
                return shown
        settings = round.config.prompt
        tail = round.tail(settings.continuation_match_lines)
        # Several windows of one file are common among the candidates: read (and mask) it once.
        file_lines = functools.cache(round.view.file_lines)
        path = round.request.cursor.path
        continued = continued_blocks(blocks, file_lines, path, tail, settings.continuation_lines,
                                     settings.continuation_min_similarity)
        if settings.clone_position >= 0:
            clone = strongest_clone(continued, file_lines, path, tail, settings.continuation_min_similarity)
            continued = with_clone_at(continued, clone, settings.clone_position)
        if key is not None:
            round.memory.set(self.name, key, spans_of(blocks, continued))
        return continued
