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


def lenient_converter() -> cattrs.Converter:
    """pygls's converter, with the hooks above."""
    converter = default_converter()
    converter.register_structure_hook(types.InlineCompletionContext,
                                      lambda value, _: _inline_completion_context(converter, value))
    return converter
