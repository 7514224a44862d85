"""What real clients send that the protocol's types refuse, read as what they meant.

pygls turns every message's params into lsprotocol types before a handler runs; params that do
not fit are answered "Invalid Params" and the user sees nothing. Clients we ship set-ups for, or
that people use with this server, send such params:

- vscode-languageclient 9 (its inline completion is a proposed feature) passes VS Code's own
  `InlineCompletionContext` through unconverted: `triggerKind` 0 (VS Code's Invoke; LSP numbers
  Invoked 1, Automatic 2) and `selectedCompletionInfo.range` as VS Code's `Range` serializes
  itself, a two-element list. The server reads neither (an answer depends on the document and the
  position only), so a trigger kind outside LSP's is read as Invoked and a selected completion that
  does not fit is dropped.
- lsp-mode before its encoding negotiation (8.0, Debian 12's `elpa-lsp-mode`) offers no
  `general.positionEncodings`, so the protocol's UTF-16 applies, but counts a position's
  `character` in Emacs characters, i.e. code points (`lsp--cur-position`: point minus the line's
  beginning; `lsp--line-character-to-point` moves as many characters). After an emoji on a line
  every position it sent was one unit short: `m` typed after `"🙂" + co` went in before the `o` of
  the server's copy, which from then on held text the user did not have, and the completion's
  range came back one character early. It is read as offering UTF-32, which pygls then chooses
  and the server answers in. lsp-mode says it is "emacs" (`clientInfo.name`); so does
  lsp-bridge, which counts UTF-16 as the protocol says, and declares neither the synchronization
  nor the workspace folders that every lsp-mode declares.

The other way round, cattrs reads what no client means: a number from `int(value)` ("3" as 3, 2.7
as 2, true as 1) and a text from `str(value)` (null as "None"). A position that is not an integer
was answered at another one (the custom messages, read by hand in lsp/server.py, refused it), and
a change carrying `"text": null` wrote "None" into the server's copy of the document, which from
then on held text the user did not have. Those fields must hold their JSON type, else the message
is invalid params (a request's error answer; a notification is dropped).
"""

from __future__ import annotations

from typing import Any

import cattrs
from lsprotocol import types
from pygls.protocol import default_converter


def _inline_completion_context(converter: cattrs.Converter, value: Any) -> types.InlineCompletionContext:
    fields = value if isinstance(value, dict) else {}
    kind = fields.get("triggerKind")
    trigger = (types.InlineCompletionTriggerKind.Automatic if kind == types.InlineCompletionTriggerKind.Automatic
               else types.InlineCompletionTriggerKind.Invoked)
    selected = None
    if fields.get("selectedCompletionInfo") is not None:
        try:
            selected = converter.structure(fields["selectedCompletionInfo"], types.SelectedCompletionInfo)
        except (cattrs.BaseValidationError, ValueError, TypeError, KeyError):
            selected = None
    return types.InlineCompletionContext(trigger_kind=trigger, selected_completion_info=selected)


# The fields held to their JSON type (see above); Position first, as the others' ranges hold one.
TYPED_FIELDS: dict[type, dict[str, type]] = {
    types.Position: {"line": int, "character": int},
    types.TextDocumentItem: {"text": str},
    types.TextDocumentContentChangePartial: {"text": str},
    types.TextDocumentContentChangeWholeDocument: {"text": str},
}


def _holding_json_types(converter: cattrs.Converter, cls: type, fields: dict[str, type]) -> Any:
    """`cls`'s structure hook, refusing a value whose `fields` are not of their JSON types."""
    structure = converter.get_structure_hook(cls)

    def hook(value: Any, target: type) -> Any:
        if isinstance(value, dict):
            for name, kind in fields.items():
                given = value.get(name)
                if name in value and (not isinstance(given, kind) or isinstance(given, bool)):
                    raise TypeError(f"{cls.__name__}.{name} must be a JSON {kind.__name__}, got {given!r}")
        return structure(value, target)

    return hook


def counts_code_points(params: types.InitializeParams) -> bool:
    """Whether the client is lsp-mode counting positions in code points without saying so."""
    capabilities = params.capabilities
    general = capabilities.general
    if general is not None and general.position_encodings:
        return False  # it negotiates: pygls picks from what it offers
    sync = capabilities.text_document.synchronization if capabilities.text_document else None
    workspace = capabilities.workspace
    return (params.client_info is not None and params.client_info.name == "emacs"
            and sync is not None and sync.will_save_wait_until is True
            and workspace is not None and workspace.workspace_folders is True)


def with_utf32_offered(params: types.InitializeParams) -> types.InitializeParams:
    """`params`, its client read as offering UTF-32 positions where it counts code points unsaid."""
    if counts_code_points(params):
        general = params.capabilities.general or types.GeneralClientCapabilities()
        general.position_encodings = [types.PositionEncodingKind.Utf32]
        params.capabilities.general = general
    return params


def lenient_converter() -> cattrs.Converter:
    """pygls's converter, with the hooks above."""
    converter = default_converter()
    converter.register_structure_hook(types.InlineCompletionContext,
                                      lambda value, _: _inline_completion_context(converter, value))
    for cls, fields in TYPED_FIELDS.items():
        converter.register_structure_hook(cls, _holding_json_types(converter, cls, fields))
    return converter
