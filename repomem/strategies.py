"""The one table of completion strategies.

The CLI (`--strategy`), the language server (`strategy` setting), `repomem.toml`
(`completion.strategy`), `eval run --strategies` and `eval report` all read this table; nothing
else compares strategy names. A strategy is a way of choosing the context a model sees:

- `retriever` names how fragments are found (see `repomem.completion.retrievers`, which maps each
  name to its implementation): "none" shows the model the current file only, "sparse" ranks
  windows by BM25 over the index's postings and, when `environment` is on, by FragRel's eq. 10;
  "summary-tree" walks the repository's summary tree to a few files first (HAT, issue 14);
  "memory-walk", "gist-lookup" and "entity-walk" are the memories that ask the model while they
  retrieve (MemWalker, ReadAgent, QRMeM; repomem/completion/memory_retrievers.py).
- `environment`: rank with eq. 10's alpha from the config (FragRel); off means alpha = 0, which
  is plain BM25 (RepoCoder's sparse retriever) exactly.
- `rounds`: 2 is RepoCoder's iterative retrieval: the second round queries with the last lines
  before the cursor plus the first round's draft.
- `names_in_scope`: the code graph also adds context: the current file's import statements that bind
  repository code (its import edges), shown above the blocks when the left context no longer shows
  them (`retrieval.scope_imports` lines); and repomem's own prompt levers apply, such as blocks
  slid to show what followed their match (`completion.continuation_lines`). Off for RepoCoder's and
  the paper's exact prompts.
- `as_published`: ignore repomem's own ranking levers (`retrieval.anchor_matches`, the
  "similarity" block order) and rank and order exactly as the FragRel paper does.

Adding a strategy is one line here (and, for a new way of retrieving, one retriever module).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Strategy:
    name: str
    summary: str  # one line for --help, the language server's settings and reports
    retriever: str  # a key of repomem.completion.retrievers.RETRIEVERS
    environment: bool  # eq. 10 with the configured alpha; False = alpha 0 (plain BM25)
    rounds: int  # generation rounds; RepoCoder's iterative retrieval uses 2
    asks_model: bool = False  # the retriever itself calls the model (memory.max_calls per completion)
    # FragRel exactly as published: eq. 10's top K and blocks ordered by s_rel, whatever
    # retrieval.anchor_matches and the "similarity" block order say (the paper, one setting away).
    as_published: bool = False
    # The import edges add the cursor file's hidden imports of repository code above the blocks.
    names_in_scope: bool = False

    @property
    def retrieves(self) -> bool:
        """Whether the prompt carries fragments of other files."""
        return self.retriever != "none"

    def alpha(self, configured: float) -> float:
        """Eq. 10's alpha this strategy ranks with, given the configured (or requested) one."""
        return configured if self.environment else 0.0


STRATEGY_TABLE: tuple[Strategy, ...] = (
    Strategy("infile", "the current file only", "none", False, 1),
    Strategy("vanilla", "BM25 over 20-line windows (RepoCoder's sparse retriever)", "sparse", False, 1),
    Strategy("fragrel", "BM25 re-weighted by code-graph relations (FragRel eq. 10), BM25's best match kept "
             "nearest the code, the file's imports of repository code in scope, blocks showing what "
             "followed their match", "sparse", True, 1, names_in_scope=True),
    Strategy("fragrel-paper", "FragRel exactly as published: eq. 10's ranking and block order", "sparse", True, 1,
             as_published=True),
    Strategy("repocoder", "two rounds of BM25, the second querying with the first draft", "sparse", False, 2),
    Strategy("repocoder+fragrel", "two rounds of FragRel, the second querying with the first draft",
             "sparse", True, 2, names_in_scope=True),
    Strategy("hat", "a summary tree walked best-first to the best-matching files (HAT), then BM25 in them",
             "summary-tree", False, 1),
    Strategy("memwalker", "the model navigates the summary tree from the root to windows (MemWalker)",
             "memory-walk", False, 1, asks_model=True),
    Strategy("readagent", "gists of the best pages; the model looks a few up in full (ReadAgent)",
             "gist-lookup", False, 1, asks_model=True),
    Strategy("qrmem", "definitions of the names at the cursor from the entity graph, expanded while the "
             "model says it needs more (QRMeM)", "entity-walk", False, 1, asks_model=True),
)

STRATEGY_NAMES: tuple[str, ...] = tuple(s.name for s in STRATEGY_TABLE)
_BY_NAME = {s.name: s for s in STRATEGY_TABLE}

BASELINE = "vanilla"  # what reports measure every other strategy against


def strategy_named(name: str) -> Strategy | None:
    return _BY_NAME.get(name)


def rank_of(name: str) -> int:
    """Position in the table (reports list strategies in this order; unknown names last)."""
    return STRATEGY_NAMES.index(name) if name in _BY_NAME else len(STRATEGY_NAMES)
