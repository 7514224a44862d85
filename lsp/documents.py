"""The open documents as the protocol numbers their lines.

pygls splits a document into lines with `str.splitlines`, which also breaks at a form feed, a
vertical tab, U+001C-U+001E, U+0085 (NEL), U+2028 and U+2029; a client breaks lines only at
"\n", "\r\n" and "\r" (LSP: "the end of line sequence"). Below such a character (a form feed is a
page break in Python, C and Lisp sources; U+2028 stands in JavaScript strings) every incremental
change landed on the wrong line of the server's copy, which from then on held text the user did
not have, and a position's column was converted on the wrong line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pygls.protocol import LanguageServerProtocol
from pygls.workspace import TextDocument, Workspace

# One line and its end: the protocol's three line ends only; a last line without an end too.
_PROTOCOL_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


class ProtocolLinesDocument(TextDocument):
    """pygls's text document, its lines split where the client splits them."""

    @property
    def lines(self) -> Sequence[str]:
        return tuple(_PROTOCOL_LINE.findall(self.source))


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


class ProtocolLinesProtocol(LanguageServerProtocol):
    """pygls's protocol, whose workspace opens ProtocolLinesDocuments once `use_protocol_lines` ran
    (pygls makes the workspace at `initialize`, before the server's own handler, which calls it)."""

    def use_protocol_lines(self) -> None:
        if not isinstance(self._workspace, ProtocolLinesWorkspace):
            self._workspace = ProtocolLinesWorkspace.like(self._workspace)
