"""Prompt levers: each way repomem changes what the model is shown, one module each.

The strategy table (repomem.strategies) lists, per strategy, the levers it uses, by name; the
engine runs them at its stages through the hooks of `levers.base.PromptLever` and names none of
them. A lever's settings switch it on or off (`PromptLever.applies`).

Adding a lever: write one module here with a `PromptLever` subclass that fills the hooks it
needs, add it to LEVERS below, and list its name in the strategies that should use it
(docs/extending.md walks through one).
"""

from __future__ import annotations

from repomem.completion.levers.anchored_match import AnchoredMatch
from repomem.completion.levers.base import PromptLever
from repomem.completion.levers.clone_search import CloneSearch
from repomem.completion.levers.confident_round import ConfidentRound
from repomem.completion.levers.continuation import Continuation
from repomem.completion.levers.definition_blocks import DefinitionBlocks
from repomem.completion.levers.draft_signature import DraftSignature
from repomem.completion.levers.names_in_scope import NamesInScope
from repomem.completion.levers.packing import Packing
from repomem.completion.levers.scope_signatures import ScopeSignatures

LEVERS: dict[str, type[PromptLever]] = {lever.name: lever for lever in (
    AnchoredMatch, DefinitionBlocks, CloneSearch, Continuation, Packing, NamesInScope, ScopeSignatures,
    DraftSignature, ConfidentRound,
)}
