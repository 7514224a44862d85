"""Completion caches of the language server: no model call when the answer is already known.

- `CompletionCache`: an LRU of finished completions keyed by the document's text on both sides
  of the cursor (hashed) and the answers' generation (settings and index): asking again at the same place, or coming
  back to it after an undo, costs nothing.
- `ForwardTypingCache`: the completion last shown in each document. When the user types the
  first characters of it, the rest is still the answer (what the model would continue with
  greedy decoding anyway), so it is returned without a model call; typed out in full, a line the
  model ended has nothing more to add.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass


def text_digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", errors="surrogatepass"), digest_size=16).digest()


@dataclass(frozen=True)
class CursorState:
    """A document split at the cursor. `left` is kept whole (the forward-typing check needs its
    prefix); the right side only as a digest."""

    path: str
    left: str  # text before the cursor
    right_digest: bytes  # digest of the text after the cursor
    # bumped by every settings change and every index installed: cached answers are then stale
    # (one made from the open file alone while the index was built was given again after it)
    answers_generation: int

    @classmethod
    def of(cls, path: str, text: str, offset: int, answers_generation: int) -> CursorState:
        return cls(path, text[:offset], text_digest(text[offset:]), answers_generation)

    def key(self) -> tuple[str, bytes, bytes, int]:
        return (self.path, text_digest(self.left), self.right_digest, self.answers_generation)


@dataclass(frozen=True)
class CachedCompletion:
    text: str
    completion_id: str  # the shown completion it came from (accept / reject / explain)
    # One line whose generation stopped at its end: typed out in full, the answer there is "".
    ends_line: bool = False


class CompletionCache:
    def __init__(self, entries: int):
        self._entries = max(entries, 1)
        self._items: OrderedDict[tuple[str, bytes, bytes, int], CachedCompletion] = OrderedDict()

    def get(self, state: CursorState) -> CachedCompletion | None:
        key = state.key()
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def put(self, state: CursorState, completion: CachedCompletion) -> None:
        key = state.key()
        self._items[key] = completion
        self._items.move_to_end(key)
        while len(self._items) > self._entries:
            self._items.popitem(last=False)

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


def typing_parts(typed: str, text: str) -> bool:
    """Whether characters `typed` at a completion's cursor part from its `text` (or the part of it
    written so far): neither begins the other."""
    return not text.startswith(typed) and not typed.startswith(text)


class ForwardTypingCache:
    def __init__(self) -> None:
        self._shown: dict[str, tuple[CursorState, CachedCompletion]] = {}  # by path

    def remember(self, state: CursorState, completion: CachedCompletion) -> None:
        if completion.text:
            self._shown[state.path] = (state, completion)

    def continuation(self, state: CursorState) -> CachedCompletion | None:
        """The rest of the last shown completion if the user has typed a proper prefix of it
        since (same text after the cursor, same settings); "" once typed in full where it ended its
        line; else None."""
        typed, completion = self._typed_since_shown(state)
        if completion is None or not completion.text.startswith(typed):
            return None
        if typed == completion.text:
            return CachedCompletion("", completion.completion_id) if completion.ends_line else None
        return CachedCompletion(completion.text[len(typed):], completion.completion_id, completion.ends_line)

    def parted(self, state: CursorState) -> bool:
        """Whether the user typed on the line of the last shown completion (at its cursor, nothing
        after it changed) something that it does not begin with: the completion was not taken.
        Typing all of it and on is taking it (the next completion waits for the cursor to rest)."""
        typed, completion = self._typed_since_shown(state)
        return completion is not None and "\n" not in typed and typing_parts(typed, completion.text)

    def _typed_since_shown(self, state: CursorState) -> tuple[str, CachedCompletion | None]:
        """(what was typed at the last shown completion's cursor since, that completion), or
        ("", None) when `state` does not follow it (another document, text changed elsewhere)."""
        shown = self._shown.get(state.path)
        if shown is None:
            return "", None
        before, completion = shown
        if (before.right_digest != state.right_digest or before.answers_generation != state.answers_generation
                or len(state.left) <= len(before.left) or not state.left.startswith(before.left)):
            return "", None
        return state.left[len(before.left):], completion

    def forget(self, path: str) -> None:
        self._shown.pop(path, None)

    def clear(self) -> None:
        self._shown.clear()
