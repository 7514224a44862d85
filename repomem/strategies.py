"""The one table of completion strategies.

The CLI (`--strategy`), the language server (`strategy` setting), `repomem.toml`
(`completion.strategy`), `eval run --strategies` and `eval report` all read this table; nothing
else compares strategy names. A strategy is a way of choosing the context a model sees:

- `retriever` names how fragments are found (see `repomem.completion.retrievers`, which maps each
  name to its implementation): "none" shows the model the current file only, "sparse" ranks
  windows by BM25 over the index's postings and, when `environment` is on, by FragRel's eq. 10;
  "dense" ranks them by the cosine of sentence embeddings (RepoCoder's dense retriever);
  "summary-tree" walks the repository's summary tree to a few files first (HAT, issue 14);
  "memory-walk", "gist-lookup" and "entity-walk" are the memories that ask the model while they
  retrieve (MemWalker, ReadAgent, QRMeM; repomem/completion/memory_retrievers.py).
- `environment`: rank with eq. 10's alpha from the config (FragRel); off means alpha = 0, which
  is plain BM25 (RepoCoder's sparse retriever) exactly.
- `rounds`: 2 is RepoCoder's iterative retrieval: the second round queries with the last lines
  before the cursor plus the first round's draft.
- `levers`: repomem's prompt levers the strategy uses, by name, in the order the engine runs them
  (repomem/completion/levers/: one module each; a lever's settings switch it on). The graph-aware
  strategies use them all: BM25's best match anchored, the file's hidden imports of repository
  code pinned above the blocks (the code graph's import edges), blocks slid to show what followed
  their match, ... RepoCoder's and the paper's exact prompts use none of those.
- `as_published`: rank and order exactly as the FragRel paper does (no "similarity" block order;
  with no anchored-match lever listed, eq. 10's top K as it comes).
- `published_prompt`: the blocks always in RepoCoder's commented form, whatever `completion.style`
  says: the published baselines (RepoCoder's sparse and dense retrievers, its iterative rounds,
  FragRel as published) stay the prompts their papers measured. The other strategies write the
  configured form (the comments, or with the 1.5B the model family's repository form).

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
    # FragRel exactly as published: blocks ordered by s_rel whatever the "similarity" block order
    # says (the paper, one setting away).
    as_published: bool = False
    levers: tuple[str, ...] = ()  # names of repomem.completion.levers.LEVERS, in the order they run
    published_prompt: bool = False  # RepoCoder's commented blocks whatever completion.style says

    def prompt_style(self, configured: str) -> str:
        """The prompt form this strategy writes, given the configured `completion.style`."""
        return "comments" if self.published_prompt else configured

    @property
    def embeds_windows(self) -> bool:
        """Whether the strategy needs every window embedded first (minutes on a large repository)."""
        return self.retriever == "dense"

    @property
    def retrieves(self) -> bool:
        """Whether the prompt carries fragments of other files."""
        return self.retriever != "none"

    def alpha(self, configured: float) -> float:
        """Eq. 10's alpha this strategy ranks with, given the configured (or requested) one."""
        return configured if self.environment else 0.0


# Packing changes how any strategy's blocks are laid out (off unless prompt.pack_blocks);
# definition blocks join what the sparse retriever finds (off unless prompt.definition_blocks).
LAYOUT_LEVERS = ("packing",)
SPARSE_LEVERS = ("definition-blocks", *LAYOUT_LEVERS)
# repomem's own levers. Names in scope pin before the signatures that sign them; clone search
# adds the candidates the continuation promotes from.
GRAPH_LEVERS = ("anchored-match", "definition-blocks", "clone-search", "shared-callees", "imported-usage",
                "continuation", "packing", "names-in-scope", "scope-signatures", "draft-signature", "confident-round",
                "file-only-round")

STRATEGY_TABLE: tuple[Strategy, ...] = (
    Strategy("infile", "the current file only", "none", False, 1, levers=LAYOUT_LEVERS),
    Strategy("vanilla", "BM25 over 20-line windows (RepoCoder's sparse retriever)", "sparse", False, 1,
             levers=SPARSE_LEVERS, published_prompt=True),
    Strategy("dense", "cosine of all-MiniLM-L6-v2 embeddings over 20-line windows (RepoCoder's dense retriever)",
             "dense", False, 1, levers=SPARSE_LEVERS, published_prompt=True),
    Strategy("fragrel", "BM25 re-weighted by code-graph relations (FragRel eq. 10), BM25's best match kept "
             "nearest the code, the file's imports of repository code in scope, blocks showing what "
             "followed their match", "sparse", True, 1, levers=GRAPH_LEVERS),
    Strategy("fragrel-paper", "FragRel exactly as published: eq. 10's ranking and block order", "sparse", True, 1,
             as_published=True, levers=SPARSE_LEVERS, published_prompt=True),
    Strategy("repocoder", "two rounds of BM25, the second querying with the first draft", "sparse", False, 2,
             levers=SPARSE_LEVERS, published_prompt=True),
    Strategy("repocoder+fragrel", "two rounds of FragRel, the second querying with the first draft",
             "sparse", True, 2, levers=GRAPH_LEVERS),
    Strategy("hat", "a summary tree walked best-first to the best-matching files (HAT), then BM25 in them",
             "summary-tree", False, 1, levers=LAYOUT_LEVERS),
    Strategy("memwalker", "the model navigates the summary tree from the root to windows (MemWalker)",
             "memory-walk", False, 1, asks_model=True, levers=LAYOUT_LEVERS),
    Strategy("readagent", "gists of the best pages; the model looks a few up in full (ReadAgent)",
             "gist-lookup", False, 1, asks_model=True, levers=LAYOUT_LEVERS),
    Strategy("qrmem", "definitions of the names at the cursor from the entity graph, expanded while the "
             "model says it needs more (QRMeM)", "entity-walk", False, 1, asks_model=True,
             levers=LAYOUT_LEVERS),
)

STRATEGY_NAMES: tuple[str, ...] = tuple(s.name for s in STRATEGY_TABLE)
# What `eval run` measures unless told: every strategy but those that embed every window first.
EVAL_DEFAULT_STRATEGIES: tuple[str, ...] = tuple(s.name for s in STRATEGY_TABLE if not s.embeds_windows)
_BY_NAME = {s.name: s for s in STRATEGY_TABLE}

BASELINE = "vanilla"  # what reports measure every other strategy against


def strategy_named(name: str) -> Strategy | None:
    return _BY_NAME.get(name)


def rank_of(name: str) -> int:
    """Position in the table (reports list strategies in this order; unknown names last)."""
    return STRATEGY_NAMES.index(name) if name in _BY_NAME else len(STRATEGY_NAMES)
