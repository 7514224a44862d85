"""Where Enter at the end of a line leaves the document and the cursor, as editors indent: the
new line takes the line's indentation, one level more after a line that opens a block (`:`, as
Python modes indent). The language server starts the next line's completion there right after
an accepted completion ended a line (lsp/scheduler.py, speculation after an accept)."""

from __future__ import annotations

INDENT_UNIT = "    "


def enter_at_end(text: str, line: int, ending: str) -> tuple[str, int, str] | None:
    """(the text with Enter pressed at the end of `line`, the new line's 0-based number, its
    indentation), or None where `line` (0-based) does not end with `ending` (what was accepted:
    the cursor would not stand at the line's end) or is blank."""
    lines = text.split("\n")
    if not 0 <= line < len(lines):
        return None
    current = lines[line]
    if not current.strip() or current != current.rstrip() or not current.endswith(ending.rstrip()):
        return None
    indent = current[: len(current) - len(current.lstrip())]
    if current.endswith(":"):
        indent += "\t" if indent.startswith("\t") else INDENT_UNIT
    return "\n".join([*lines[: line + 1], indent, *lines[line + 1 :]]), line + 1, indent
