"""The seam every prompt lever plugs into: what a lever sees of one round, and the hooks it may fill.

A prompt lever is one way repomem changes what the model is shown beyond the strategy's
retriever: keep BM25's best match first, slide a window to show what followed its match, pin the
file's hidden imports above the blocks, ... The engine runs a round in fixed stages and, at each,
hands the round's state to the strategy's levers in table order (repomem.strategies):

    retrieve   `ranking`     how the retriever ranks (its query)
               `found`       what one retrieval returned: add to it or change it
               `candidates`  the round's candidates once retrieved (may retrieve again)
    fit        `blocks`      the candidate blocks before they are fitted into the budget
               `selection`   how the blocks are chosen within the block budget
               `pins`        lines pinned above the blocks, refitted after each fit (`refit`)
    generate   `follow_up`   lines to pin in one more generation after the last round
               `shown_round` which of several rounds' answers is shown

Every hook defaults to leaving things as they are, so a lever fills only the ones it needs. A
lever object lives for one round (the engine makes one per round from its class), so it may keep
state between its hooks; what must outlive the round (a function's remembered spans in order
"stable", completion/warm_prefix.py) goes in `LeverRound.memory`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from repomem.completion.prompt import BlockSelection, ContextBlock, Prompt
from repomem.completion.request import CompletionRequest, CursorContext
from repomem.completion.retrieval_round import RoundQuery
from repomem.completion.rounds import RoundAnswer
from repomem.completion.warm_prefix import FunctionKey, FunctionMemory
from repomem.config import Config
from repomem.repo_view import RepoView
from repomem.retrieval.scoring import ScoredFragment


@dataclass
class Pins:
    """What the levers pin above the blocks this fit: the current file's import statements (line
    spans, 0-based, end exclusive) and extra lines (signatures). `lines_need_imports`: lines shown
    only beside shown imports (a signature of what no shown import binds would be out of place)."""

    import_spans: list[tuple[int, int]] = field(default_factory=list)
    lines_need_imports: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def block(self, path: str, file_lines: Sequence[str]) -> ContextBlock | None:
        """The pins as one block of the current file (its lines, not a window: id -1), shown
        outside the block budget; None when nothing is pinned."""
        if not self.import_spans and not self.lines:
            return None
        imports = [line for start, end in self.import_spans for line in file_lines[start:end]]
        extra = self.lines_need_imports if self.import_spans else []
        text = "\n".join([*imports, *dict.fromkeys([*extra, *self.lines])])  # each signature once
        first, end = (self.import_spans[0][0], self.import_spans[-1][1]) if self.import_spans else (0, 0)
        return ContextBlock(-1, path, first, end, text, float("inf"), summary=True)


@dataclass
class LeverRound:
    """What a lever sees of one round. `retrieve(text)` runs the strategy's retriever on another
    query with the round's masks and the levers' `ranking` and `found` hooks."""

    request: CompletionRequest
    context: CursorContext
    config: Config
    view: RepoView  # what the request may read of the repository (never the service)
    number: int  # 1 for the first round
    stable_key: FunctionKey | None  # set in order "stable"
    memory: FunctionMemory
    file_lines: list[str]  # the cursor's file, all of it, secrets masked
    retrieve: Callable[[str], list[ScoredFragment]]
    pinned_lines: tuple[str, ...] = ()  # a follow-up round's lines (PromptLever.follow_up)
    pins: Pins = field(default_factory=Pins)

    def tail(self, count: int) -> list[str]:
        """The visible code's last `count` non-blank lines before the cursor line."""
        return [line for line in self.context.left_lines[:-1] if line.strip()][-count:]


class PromptLever:
    """One prompt lever; subclasses set `name` (the strategy table lists it) and fill hooks."""

    name: ClassVar[str] = ""
    # Levers whose hooks must have run before this one's at each stage (e.g. a lever that reads
    # `round.pins.import_spans` runs after the one that pins them): where a strategy lists both,
    # it lists these first (checked when the levers are loaded, repomem/completion/levers/__init__.py).
    after: ClassVar[tuple[str, ...]] = ()

    def __init__(self, round: LeverRound):
        self.round = round

    @classmethod
    def applies(cls, config: Config) -> bool:
        """Whether the lever's settings switch it on (checked once per round)."""
        return True

    # -- retrieve ----------------------------------------------------------------------------------

    def ranking(self, query: RoundQuery) -> RoundQuery:
        return query

    def found(self, query_text: str, fragments: list[ScoredFragment]) -> list[ScoredFragment]:
        return fragments

    def candidates(self, fragments: list[ScoredFragment]) -> list[ScoredFragment]:
        return fragments

    # -- fit ---------------------------------------------------------------------------------------

    def blocks(self, blocks: list[ContextBlock]) -> list[ContextBlock]:
        return blocks

    def selection(self) -> BlockSelection | None:
        return None

    def pin(self, pins: Pins) -> None:
        """Add what the lever pins for the next fit to `pins`."""

    def refit(self, prompt: Prompt, unsettled: bool) -> bool:
        """After a fit: whether what the lever pins changed, so the prompt is fitted again.
        `unsettled`: an earlier step already asks for another fit (a lever that waits for a
        settled prompt returns False then)."""
        return False

    def restart_fit(self) -> None:
        """Forget what this round's fits so far taught the lever (what `pin` and `refit` keep): the
        engine fits the prompt afresh, and a start line from the discarded fit must not decide."""

    # -- generate ----------------------------------------------------------------------------------

    def follow_up(self, draft_raw: str, draft_prompt: Prompt, finish_reason: str) -> Sequence[str]:
        """Lines to pin in one more generation after the last round's draft (none: no more)."""
        return ()

    def shown_round(self, answers: Sequence[RoundAnswer]) -> int | None:
        """Index of the round whose answer is shown (None: the engine's default, the last)."""
        return None

    def second_opinion(self, shown: RoundAnswer) -> str | None:
        """A strategy whose answer is generated too and shown instead when the model is surer of it
        (higher mean log-probability per token), given the answer chosen so far (None: none)."""
        return None
