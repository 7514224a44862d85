"""Packing: each retrieved line shown once (prompt.pack_blocks).

Windows overlapping a better block of the same file lose the shared lines and join it, up to
`prompt.pack_max_lines` lines (completion/packing.py). It is the block selection within the
block budget, so a merged block never crowds out the window it grew from. Off by default.
"""

from __future__ import annotations

from repomem.completion.levers.base import PromptLever
from repomem.completion.packing import pack_blocks
from repomem.completion.prompt import BlockSelection
from repomem.config import Config


class Packing(PromptLever):
    name = "packing"

    @classmethod
    def applies(cls, config: Config) -> bool:
        return config.prompt.pack_blocks

    def selection(self) -> BlockSelection | None:
        max_lines = self.round.config.prompt.pack_max_lines
        span_text = self.round.view.span_text

        def select(chosen, block_budget, cost):
            return pack_blocks(chosen, max_lines, span_text, block_budget, cost)

        return select
