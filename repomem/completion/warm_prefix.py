"""The warm prefix: an editor's prompts in one function keep the same start (order "stable").

An editor asks for a completion at nearly every keystroke, and the cursor mostly stays in one
function. When consecutive prompts share their beginning, the model's prompt cache evaluates only
what changed (the last lines typed) instead of the whole prompt. Order "stable" keeps three things
per function, decided at its first completion:

- the retrieved fragments, ordered by path and line, reused while the cursor stays in the
  function (renewed to the same windows under the ids an edit gave them);
- where the prompt began the current file (its first line), aimed at again by the next fits:
  the left context keeps that start while it fits, and blocks the file from there on would show
  count as shown while the fit settles, so the same candidates settle on the same prompt;
- a lever's own choices (the continuation's shown lines), in named slots dropped with the function.

The first prompt in a function leaves 1/16 of the budget free (64 tokens of 1,024, about five
lines): the rest of a line and the next lines typed then fit from the same start.

The engine holds one `WarmPrefix` and asks it at the stages named below; nothing else in the
engine knows what order "stable" means.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from repomem.retrieval.scoring import ScoredFragment


@dataclass(frozen=True)
class FunctionKey:
    """A function as order "stable" remembers it: its file, its definition line's text and how many
    definition lines of that text come before it there. Not its line number: lines typed above
    move the functions below, and one was then given the memory (retrieved blocks, the prompt's
    start) of another that had moved onto its old line. `line` (not compared): where the
    definition is now, which the prompt's remembered start is counted from."""

    path: str
    definition: str
    same_before: int
    line: int = field(compare=False)

    @classmethod
    def of(cls, path: str, definition_line: int, file_lines: Sequence[str]) -> FunctionKey:
        """The function whose definition is at 0-based `definition_line` of `file_lines` (-1: the
        module level)."""
        if not 0 <= definition_line < len(file_lines):
            return cls(path, "" if definition_line < 0 else f"line {definition_line}", 0, definition_line)
        text = file_lines[definition_line].strip()
        same_before = sum(1 for line in file_lines[:definition_line] if text in line and line.strip() == text)
        return cls(path, text, same_before, definition_line)


STABLE_MEMO_SIZE = 64  # functions whose blocks are remembered
FIRST_LINE_SLOT = "first-line"  # FunctionMemory slot: where its last prompt began the file, from its definition
HEADROOM_SHARE = 16  # the first prompt in a function leaves 1/16 of the budget free


class FunctionMemory:
    """What a function's first completion decided, kept while the cursor stays in it (order
    "stable"): its retrieved fragments, least recently used dropped past `size` functions, and
    named slots (a lever's own, the prompt's first line) dropped with them."""

    def __init__(self, size: int):
        self.size = size
        self._fragments: OrderedDict[FunctionKey, list[ScoredFragment]] = OrderedDict()
        # Each slot's entries, least recently set first, at most `size` of them: a slot is set for
        # functions whose fragments were never kept too (nothing retrieved, no index yet).
        self._slots: dict[str, OrderedDict[FunctionKey, Any]] = {}

    def fragments(self, key: FunctionKey,
                  renew: Callable[[list[ScoredFragment]], list[ScoredFragment] | None]) -> list[ScoredFragment] | None:
        """The function's remembered fragments, marked recently used, as `renew` finds them in the
        index now (the same windows under the ids an edit gave them); None when it cannot (a stale
        entry keeps its place until replaced)."""
        remembered = self._fragments.get(key)
        renewed = None if remembered is None else renew(remembered)
        if renewed is None:
            return None
        self._fragments[key] = renewed
        self._fragments.move_to_end(key)
        return renewed

    def remember_fragments(self, key: FunctionKey, fragments: list[ScoredFragment]) -> None:
        self._fragments[key] = fragments
        self._fragments.move_to_end(key)  # a function in use, whose old entry could not be renewed
        while len(self._fragments) > self.size:
            dropped, _ = self._fragments.popitem(last=False)
            for slot in self._slots.values():
                slot.pop(dropped, None)

    def get(self, slot: str, key: FunctionKey) -> Any | None:
        return self._slots.get(slot, {}).get(key)

    def set(self, slot: str, key: FunctionKey, value: Any) -> None:
        entries = self._slots.setdefault(slot, OrderedDict())
        entries[key] = value
        entries.move_to_end(key)
        while len(entries) > self.size:
            entries.popitem(last=False)


class PromptStart(NamedTuple):
    """Where one fit should start the current file. `aim`: the file line the function's previous
    prompt began at (None: no previous prompt, or the fit starts afresh); `hint`: the same line
    counted in the fit's left lines (None when it lies above them); `headroom`: tokens the search
    for the first kept line leaves free (0 outside order "stable")."""

    aim: int | None
    hint: int | None
    headroom: int

    def afresh(self) -> PromptStart:
        """The same headroom without the previous start (the cursor moved below it)."""
        return PromptStart(None, self.hint, self.headroom)


COLD_START = PromptStart(None, None, 0)


def first_kept_line(n_lines: int, fits: Callable[[int, int], bool], start: PromptStart) -> int | None:
    """The first line of the left context to keep: the fewest lines dropped that fit, or the
    previous start while it fits; None when not even the cursor line fits.

    `fits(first_line, spared)`: whether the prompt from `first_line` on fits the budget less
    `spared` tokens; the prompt grows with every line kept, which the search relies on. A hint
    inside the left context decides from at most two counts instead of ~log2(lines) + 1 and gives
    what the search would: 0 when all of it fits, else the hint when the lines from it on fit.
    When the hint no longer fits, a quarter of the room below the search's answer is cleared at
    once, so the next keystrokes keep the new start."""
    hint, spared = start.hint, max(0, start.headroom)
    hinted = hint is not None and 0 < hint < n_lines
    if hinted and fits(0, spared):
        return 0
    if hinted and fits(hint, 0):
        return hint
    low, high = 0, max(n_lines - 1, 0)
    if not fits(high, 0):
        return None
    while low < high:
        middle = (low + high) // 2
        if fits(middle, spared):
            high = middle
        else:
            low = middle + 1
    if hint is not None and low > 0:
        if low <= hint < n_lines:
            return hint
        return min(n_lines - 1, low + (n_lines - low) // 4)
    return low


@dataclass
class WarmPrefix:
    """The engine's memory of order "stable", one per engine (an editor session)."""

    memory: FunctionMemory

    @classmethod
    def new(cls, size: int = STABLE_MEMO_SIZE) -> WarmPrefix:
        return cls(FunctionMemory(size))

    @staticmethod
    def key(order: str, path: str, definition_line: int, file_lines: Sequence[str]) -> FunctionKey | None:
        """The function a request's prompts are remembered by; None outside order "stable", and at
        the module level (-1): a file's every statement outside a function, and every cursor of a
        language whose definitions are not found (shell, Ruby), shared one memory, so a cursor at
        the bottom of a file was given the blocks retrieved for one at its top."""
        if order != "stable" or definition_line < 0:
            return None
        return FunctionKey.of(path, definition_line, file_lines)

    def fragments(self, key: FunctionKey,
                  renew: Callable[[list[ScoredFragment]], list[ScoredFragment] | None]) -> list[ScoredFragment] | None:
        return self.memory.fragments(key, renew)

    def remember_fragments(self, key: FunctionKey, fragments: list[ScoredFragment]) -> None:
        if fragments:
            self.memory.remember_fragments(key, fragments)

    def start(self, key: FunctionKey | None, visible_from: int, max_prompt_tokens: int) -> PromptStart:
        """Where the next fit in the function should start the file (`visible_from`: the first file
        line the prompt may show, the fit's left line 0)."""
        if key is None:
            return COLD_START
        below_definition = self.memory.get(FIRST_LINE_SLOT, key)
        aim = None if below_definition is None else key.line + below_definition  # moved with the function
        hint = aim - visible_from if aim is not None and aim >= visible_from else None
        return PromptStart(aim if hint is not None else None, hint, max_prompt_tokens // HEADROOM_SHARE)

    def remember_start(self, key: FunctionKey | None, first_line: int) -> None:
        if key is not None:
            self.memory.set(FIRST_LINE_SLOT, key, first_line - key.line)
