"""How a repository's file and folder names are written inside the text a model reads.

Git allows a line break in a file name. A prompt names files in comments, in a file section's
header, and in the memories' questions and summaries (one numbered option or one summary line per
name), so a name is always written as one line: its line breaks as escapes, or the rest of the name
stood in the prompt as a line of code or as the next option."""

from __future__ import annotations


def one_line(name: str) -> str:
    """`name` with its line breaks (CR, LF) written as the escapes `\\r`, `\\n`."""
    return name.replace("\r", "\\r").replace("\n", "\\n")
