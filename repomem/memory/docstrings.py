"""The first line of text of a Python docstring, as the extractive summaries and gists show it."""

from __future__ import annotations

import re
from collections.abc import Sequence

# A docstring's opening: an optional string prefix (r, u, b, f, any case) and three quotes.
_OPENING = re.compile(r"""^[rRuUbBfF]{0,2}("{3}|'{3})""")


def docstring_line(lines: Sequence[str], first: int, end: int) -> str:
    """The docstring's first line of text where the first statement at or after line `first`
    (before `end`; comment lines such as a shebang or a licence header skipped) opens one, "" when
    it does not. An opening alone on its line (`\"\"\"` then the text below) gives the line below."""
    at = next((n for n in range(first, min(end, len(lines)))
               if lines[n].strip() and not lines[n].lstrip().startswith("#")), None)
    if at is None:
        return ""
    opened = _OPENING.match(lines[at].strip())
    if opened is None:
        return ""
    quote = opened.group(1)
    text = lines[at].strip()[opened.end():]
    if quote in text:  # closed on its own line
        return text[: text.index(quote)].strip()
    if text.strip():
        return text.strip()
    below = next((lines[n].strip() for n in range(at + 1, min(end, len(lines))) if lines[n].strip()), "")
    return "" if below.startswith(quote) else below
