"""The open documents as the protocol numbers their lines.

pygls splits a document into lines with `str.splitlines`, which also breaks at a form feed, a
vertical tab, U+001C-U+001E, U+0085 (NEL), U+2028 and U+2029; a client breaks lines only at
"\n", "\r\n" and "\r" (LSP: "the end of line sequence"). Below such a character (a form feed is a
page break in Python, C and Lisp sources; U+2028 stands in JavaScript strings) every incremental
change landed on the wrong line of the server's copy, which from then on held text the user did
not have, and a position's column was converted on the wrong line.

An incremental change's position past its line's end means the line's end (LSP 3.17, Position:
"If the character value is greater than the line length it defaults back to the line length").
pygls moves such a position onto the line's last character, its line end included: text inserted
one past a line's end landed at the start of the next line, and a range ending past the end of
the last line kept that line's last character after the new text.

A change to a document the client never opened (or closed already) has no text to apply to: pygls
raised KeyError, which every editor showed as an "Error in server" pop-up. The change is dropped
(the server says so in its log, lsp/server.py `did_change`).
"""

from __future__ import annotations

import re
from collections.abc import Generator, Sequence
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.workspace import TextDocument, Workspace

from repomem.lsp.client_quirks import with_utf32_offered

# One line and its end: the protocol's three line ends only; a last line without an end too.
_PROTOCOL_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


class ProtocolLinesDocument(TextDocument):
    """pygls's text document, its lines split where the client splits them."""

    _lines_of: str | None = None  # the source `_lines` were split from
    _lines: tuple[str, ...] = ()

    @property
    def lines(self) -> Sequence[str]:
        # Split once a text: a change read them twice (here and in pygls's splice), and answering
        # reads them again; each split walks the whole text (a 2.5 MB file: tens of ms a keystroke).
        source = self.source
        if self._lines_of is not source:
            self._lines, self._lines_of = tuple(_PROTOCOL_LINE.findall(source)), source
        return self._lines

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        """The change spliced into the text by offsets (pygls's splice wrote the text again line
        by line, in Python), its positions past a line's end taken as that end."""
        lines = self.lines
        start, end = self._at_most_line_end(lines, change.range.start), self._at_most_line_end(lines, change.range.end)
        if start.line >= len(lines):  # at the document's end (pygls's case too)
            self._source = self.source + change.text
            return
        # A new range: pygls converts positions in place, and the client's object is not ours.
        server = self.position_codec.range_from_client_units(lines, types.Range(start, end))
        source = self.source
        top = sum(map(len, lines[: server.start.line]))  # where the first changed line starts
        first = top + server.start.character
        kept_end = server.end.line < len(lines)  # else the change runs to the document's end
        last = max(first, top + sum(map(len, lines[server.start.line : server.end.line])) + server.end.character) \
            if kept_end else len(source)
        self._source = source[:first] + change.text + source[last:]
        # The lines, the changed ones split again: not the whole text split once more. A line
        # before them that ends in a lone "\r" joins them when they now begin with "\n" (one break).
        lower = server.start.line
        if lower > 0 and lines[lower - 1].endswith("\r") and self._source.startswith("\n", top):
            lower -= 1
            top -= len(lines[lower])
        upper = server.end.line + 1 if kept_end else len(lines)
        below = sum(map(len, lines[upper:]))
        changed = tuple(_PROTOCOL_LINE.findall(self._source, top, len(self._source) - below))
        self._lines, self._lines_of = lines[:lower] + changed + lines[upper:], self._source

    def _at_most_line_end(self, lines: Sequence[str], position: types.Position) -> types.Position:
        """`position`, its character moved back to its line's end (before the line end) if past it;
        a line past the document's end is left to pygls (the document's end)."""
        if not 0 <= position.line < len(lines):
            return types.Position(position.line, position.character)
        content = lines[position.line].rstrip("\r\n")
        return types.Position(position.line, min(position.character, self.position_codec.client_num_units(content)))


class ProtocolLinesWorkspace(Workspace):
    """pygls's workspace, opening ProtocolLinesDocuments."""

    @classmethod
    def like(cls, workspace: Workspace) -> ProtocolLinesWorkspace:
        """A new workspace with `workspace`'s root, folders and encodings (and no documents yet)."""
        return cls(workspace.root_uri, workspace._sync_kind, list(workspace.folders.values()),
                   workspace.position_encoding)

    def _create_text_document(self, doc_uri: str, source: str | None = None, version: int | None = None,
                              language_id: str | None = None) -> TextDocument:
        return ProtocolLinesDocument(doc_uri, source=source, version=version, language_id=language_id,
                                     sync_kind=self._sync_kind, position_codec=self.position_codec)

    def update_text_document(self, text_doc: types.VersionedTextDocumentIdentifier,
                             change: types.TextDocumentContentChangeEvent) -> None:
        """pygls's, except that a change to a document not open is dropped (see above)."""
        if unquote(text_doc.uri) in self.text_documents:
            super().update_text_document(text_doc, change)


class ProtocolLinesProtocol(LanguageServerProtocol):
    """pygls's protocol, whose workspace opens ProtocolLinesDocuments once `use_protocol_lines` ran
    (pygls makes the workspace at `initialize`, before the server's own handler, which calls it).
    A client that counts positions in code points without saying so (lsp/client_quirks.py) is
    read as offering UTF-32 before pygls chooses the position encoding of the workspace and of
    the answer's capabilities."""

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[Any, Any, types.InitializeResult]:
        return (yield from super().lsp_initialize(with_utf32_offered(params)))

    def use_protocol_lines(self) -> None:
        if not isinstance(self._workspace, ProtocolLinesWorkspace):
            self._workspace = ProtocolLinesWorkspace.like(self._workspace)
