"""The line below an answer the user took: its prompt is the answer's prompt, continued.

In an editor the user takes a one-line completion (accepts it, or types it out) and presses Enter:
the next request's cursor stands on a new line below the answer, and the document is otherwise
the one the answer was made for. A fresh prompt for that cursor is fitted anew around the answer,
now in the file before the cursor: a fill-in-the-middle prompt puts all of the code after the
cursor behind it, and a left-to-right one may fit its blocks or its window's start otherwise, so
the model reads a few hundred tokens again, most of a new line's wait on two cores
(docs/editors.md#interactive-latency). Continued instead, the prompt is the one the model answered
from, then its answer and a newline: what it would have read had it gone on writing. Its cache
holds all of it but the last token or two.

The blocks are not retrieved again for the line below (the query window moved by one line; an
editor's prompt keeps its blocks per function anyway, order "stable"). A continued prompt grows
by its answers, so a chain of them stops at `MAX_CONTINUED_LINES` and the next prompt is built
afresh, as it is wherever the document is not exactly "the answer, Enter, and indentation".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from repomem.completion.prompt import Prompt
from repomem.positions import Cursor, text_offset
from repomem.retrieval.scoring import ScoredFragment

# Answers in a row one prompt may be continued by (each adds its line and a newline to the prompt).
MAX_CONTINUED_LINES = 8
# The last one-line answers kept to continue: the line below an answer may be asked twice, by a
# speculation that guessed the editor's indentation and by the request after Enter, and between
# the two the speculation's own answer comes.
ANSWERS_KEPT = 4
# Tokens a continued prompt adds to the last one beyond what the model wrote, at most: the newline,
# the new line's indentation, and the last token written, which the model's cache may not hold yet.
ADDED_TOKENS = 3


@dataclass(frozen=True)
class AnsweredLine:
    """A one-line answer shown at a cursor, and what the model read and wrote to make it."""

    path: str
    left: str  # the document before the cursor
    right: str  # the document after the cursor
    text: str  # the answer as shown: one line
    prompt: Prompt  # what the model read (its text unmasked, as built)
    fragments: tuple[ScoredFragment, ...]  # retrieved for it, best first (explain shows them for the line below)
    written: str  # what the model wrote after the prompt up to the line's end: a held start, then `text`
    tokens: int  # the prompt's tokens and the ones written (what the model's context holds)
    continued: int  # prompts before this one's that it continues (0: built afresh)


def split_at(cursor: Cursor) -> tuple[str, str]:
    """The cursor's document before and after it."""
    offset = text_offset(cursor.text.split("\n"), cursor.line, cursor.column)
    return cursor.text[:offset], cursor.text[offset:]


def answered_line(cursor: Cursor, prompt: Prompt, fragments: tuple[ScoredFragment, ...], written: str, healed: str,
                  text: str, prompt_tokens: int, written_tokens: int, continued: int) -> AnsweredLine | None:
    """The answer `text` at `cursor` as a line to continue below, or None where a continued prompt
    would not be what the document shows: an answer of several lines or none, or one that is not
    exactly what the model wrote after the held start `healed` up to a line's end (post-processing
    changed it). What the model wrote past that end (a generation stopped after the newline, on a
    line it began) is not part of the answer's line."""
    line = healed + text
    if not text or "\n" in text or not written.startswith(line) or written[len(line):][:1] not in ("", "\n"):
        return None
    left, right = split_at(cursor)
    return AnsweredLine(cursor.path, left, right, text, prompt, fragments, line, prompt_tokens + written_tokens,
                        continued)


def continued_prompt(answered: Iterable[AnsweredLine], cursor: Cursor, healed: str, max_new_tokens: int,
                     context_tokens: int) -> tuple[Prompt, AnsweredLine] | None:
    """(the prompt for `cursor`, the answer it continues) when `cursor` stands below one of the
    `answered` lines (newest first) on a new line: the document is that answer's before its cursor,
    the answer, a newline, spaces or tabs at most, the cursor, and that answer's after it; the
    chain is short enough, and the model's window holds the prompt and `max_new_tokens`
    (`context_tokens`, 0 while the backend has not said). Else None. The prompt ends where one
    built afresh would: the new line's indentation but for what the cursor's context takes off it
    for the model to write back (`healed`)."""
    left, right = split_at(cursor)
    for last in answered:
        if cursor.path != last.path or last.continued + 1 > MAX_CONTINUED_LINES or right != last.right:
            continue
        if context_tokens and last.tokens + ADDED_TOKENS + max_new_tokens > context_tokens:
            continue
        above = last.left + last.text + "\n"
        indent = left[len(above):]
        if left.startswith(above) and not indent.strip(" \t") and len(healed) <= len(indent) \
                and indent.endswith(healed):
            text = last.prompt.text + last.written + "\n" + indent[: len(indent) - len(healed)]
            return dataclasses.replace(last.prompt, text=text, n_tokens=last.tokens + ADDED_TOKENS), last
    return None
