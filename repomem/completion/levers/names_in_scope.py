"""Names in scope: the cursor file's hidden imports of repository code, pinned above the blocks.

When the prompt's left context no longer shows the current file's import statements that bind
repository code (resolved through the index's import edges), up to `prompt.scope_imports` of
their lines are shown above the retrieved blocks, taken from the left context's room. A small
model otherwise calls a similar-looking name (docs/eval-history.md). Statements the fitted left
context shows after all are not repeated: the prompt is fitted again without them.
"""

from __future__ import annotations

from repomem.completion.levers.base import Pins, PromptLever
from repomem.completion.prompt import Prompt
from repomem.config import Config
from repomem.languages.registry import language_named


class NamesInScope(PromptLever):
    name = "names-in-scope"

    @classmethod
    def applies(cls, config: Config) -> bool:
        return config.prompt.scope_imports > 0

    def __init__(self, round):
        super().__init__(round)
        self.spans: list[tuple[int, int]] | None = None  # read at the first fit

    def _hidden_imports(self) -> list[tuple[int, int]]:
        round = self.round
        prefixes = language_named(round.context.language).import_prefixes
        if not prefixes:
            return []
        cursor = round.request.cursor
        return round.service.repository_imports(cursor.path, round.file_lines, prefixes, cursor.line,
                                                round.config.prompt.scope_imports)

    def pin(self, pins: Pins) -> None:
        if self.spans is None:
            self.spans = self._hidden_imports()
        pins.import_spans.extend(self.spans)

    def restart_fit(self) -> None:
        self.spans = None

    def refit(self, prompt: Prompt, unsettled: bool) -> bool:
        still_hidden = [span for span in self.spans or () if span[1] <= prompt.left_first_line]
        if still_hidden == (self.spans or []):
            return False
        self.spans = still_hidden
        return True
