"""Names the user did not write (file names, folders, a model's file) shown literally on a terminal.

A file name may hold an escape sequence (`\\x1b[31m` coloured the rest of the terminal red), a
carriage return or a bidi override (either rewrites what the line seems to say), or text rich reads
as markup (`[red]` vanished from a path and `[/red]` raised a MarkupError: an internal error, after
the answer). Such characters are shown as Python writes them in a string (`\\x1b`, `\\t`, `\\u202e`)
and the text goes to rich as a Text, which is never parsed for markup.
"""

from __future__ import annotations

import unicodedata

from rich.text import Text

# Control (Cc), format (Cf: bidi overrides, zero-width marks), surrogate (Cs: an undecodable byte
# of a file name) characters and the line and paragraph separators (Zl, Zp).
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def literal(text: str) -> str:
    """`text` with every character that would act on the terminal instead of showing written out."""
    if text.isprintable():  # the common case, at no cost
        return text
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in _HIDDEN else c for c in text)


def shown(text: str, style: str = "") -> Text:
    """`text` for a rich table cell, title, rule or print: literal, never markup."""
    return Text(literal(text), style=style)
