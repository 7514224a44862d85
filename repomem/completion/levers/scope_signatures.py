"""Signatures in scope: one compact signature line for what the pinned imports bind.

Beside the names in scope, one line (parameters and defaults, no annotations; a class's
`__init__`) for up to `prompt.scope_signatures` of the repository functions and classes those
imports bind, leaving out names the visible code already calls: a small model that names the
right function still misses its arguments (signature_lines.py). Computed once the fit has
settled (what the left context shows decides which names need no signature), then fitted again.
Off (0) by default.
"""

from __future__ import annotations

from repomem.completion.levers.base import Pins, PromptLever
from repomem.completion.levers.signature_lines import imported_signatures
from repomem.completion.prompt import Prompt
from repomem.config import Config


class ScopeSignatures(PromptLever):
    name = "scope-signatures"
    after = ("names-in-scope",)  # signs what names in scope pin (`round.pins.import_spans`)

    @classmethod
    def applies(cls, config: Config) -> bool:
        return config.prompt.scope_signatures > 0

    def __init__(self, round):
        super().__init__(round)
        self.lines: list[str] | None = None  # None until the fit settles; [] when nothing is wanted

    def pin(self, pins: Pins) -> None:
        if self.lines is None and not pins.import_spans:
            self.lines = []  # no hidden imports at the first fit: nothing to sign
        pins.lines_need_imports.extend(self.lines or ())

    def restart_fit(self) -> None:
        self.lines = None

    def refit(self, prompt: Prompt, unsettled: bool) -> bool:
        if unsettled or self.lines is not None:
            return False
        round = self.round
        cursor = round.request.cursor
        spans = round.pins.import_spans
        shown = "\n".join(line for start, end in spans for line in round.file_lines[start:end])
        visible = "\n".join(round.file_lines[prompt.left_first_line : cursor.line + 1])
        settings = round.config.prompt
        symbols = round.view.symbols
        found = [] if symbols is None else imported_signatures(
            symbols, cursor.path, shown, visible, settings.scope_signatures, settings.scope_signature_chars,
            round.view.unmasked_lines, round.config.bm25)
        self.lines = [round.view.mask(line) for line in found]
        return bool(self.lines)
