"""Draft signature: a second generation guided by the first (prompt.draft_signature).

When the draft calls a repository function or class that the file imports (resolved through the
import edges, defined in another file) and the prompt does not show its definition, the draft is
generated again with that one signature pinned beside the names in scope: only the name the model
already chose (shown signatures of other names drew calls to them, docs/eval-history.md). The
same blocks are kept. Single-round strategies only; off by default.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from repomem.completion.levers.base import PromptLever
from repomem.completion.levers.signature_lines import called_signature
from repomem.completion.prompt import Prompt
from repomem.config import Config


class DraftSignature(PromptLever):
    name = "draft-signature"

    @classmethod
    def applies(cls, config: Config) -> bool:
        return config.prompt.draft_signature

    def follow_up(self, draft_raw: str, draft_prompt: Prompt, finish_reason: str) -> Sequence[str]:
        round = self.round
        if round.request.strategy.rounds != 1 or finish_reason not in ("stop", "length"):
            return ()
        first_line = next((line for line in draft_raw.split("\n") if line.strip()), "")
        symbols = round.view.symbols
        called = None if symbols is None else called_signature(
            symbols, round.request.cursor.path, first_line, round.config.prompt.scope_signature_chars,
            round.view.unmasked_lines)
        if called is None:
            return ()
        name, line = called
        if f"{name}()" in line or f"{name}(" not in line:
            return ()  # no parameters to show: the draft's arguments cannot improve (and a bare
            # `def name(): ...` got copied as a def line on the dev set)
        kind = "def" if line.startswith("def ") else "class"
        if re.search(rf"\b{kind} {re.escape(name)}\b", draft_prompt.text):
            return ()  # a block (or the visible file) shows the definition itself
        return (round.view.mask(line),)
