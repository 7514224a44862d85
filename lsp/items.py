"""Completion text -> the LSP items editors show: each one replaces the word being typed.

The model continues the text at the cursor, but clients filter and insert by the word before it:
eglot, Helix and most completion menus match an item's `filterText` (or label) against the typed
prefix `com` in `return com|`, and Vim's complete() replaces from the start column. An item that
carried only the text after the cursor was filtered away ("No match") or inserted after the typed
prefix a second time (`int( * compute_t * compute_tax(...)`). So every item spells the whole word:
label, filterText and insertText start with the typed prefix, and its edit's range starts where
the word starts.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types

ACCEPT_COMMAND = "repomem.didAccept"  # also a command, so an item's `command` can report acceptance
LABEL_CHARS = 80  # a label is the completion's first line, cut to this many characters


def typed_word(line_text: str, character: int) -> str:
    """The identifier characters (letters, digits, `_`; as Python, Vim's 'iskeyword' and Emacs's
    symbol syntax agree on for code) immediately before `character` (0-based, code points)."""
    start = character
    while start > 0 and (line_text[start - 1].isalnum() or line_text[start - 1] == "_"):
        start -= 1
    return line_text[start:character]


def _accept(completion_id: str | None) -> types.Command:
    return types.Command(title="repomem: accepted", command=ACCEPT_COMMAND, arguments=[completion_id])


def _word_range(position: types.Position, word: str, client_units: int) -> types.Range:
    """From the word's start to the cursor; `client_units` is the word's length in the client's
    position encoding (UTF-16 code units by default)."""
    start = types.Position(line=position.line, character=max(position.character - client_units, 0))
    return types.Range(start, position)


def completion_item(text: str, word: str, position: types.Position, word_units: int,
                    completion_id: str | None) -> types.CompletionItem:
    """One `textDocument/completion` item carrying the whole completion, replacing `word`."""
    whole = word + text
    label = whole.split("\n")[0].rstrip()[:LABEL_CHARS] or whole.strip()[:LABEL_CHARS]
    data: Any = {"id": completion_id}
    return types.CompletionItem(
        label=label, kind=types.CompletionItemKind.Snippet, detail="repomem", filter_text=whole,
        insert_text=whole, insert_text_format=types.InsertTextFormat.PlainText, data=data,
        text_edit=types.TextEdit(_word_range(position, word, word_units), whole), command=_accept(completion_id),
    )


def inline_item(text: str, word: str, position: types.Position, word_units: int,
                completion_id: str | None) -> types.InlineCompletionItem:
    """One `textDocument/inlineCompletion` item (LSP 3.18): the same replacement of the word."""
    whole = word + text
    return types.InlineCompletionItem(insert_text=whole, filter_text=whole,
                                      range=_word_range(position, word, word_units), command=_accept(completion_id))
