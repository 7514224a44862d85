"""The one config tree's sections: every tuning constant of repomem is declared here.

Defaults follow docs/design.md (RepoCoder windows, FragRel eqs. 7-10, BM25 Okapi). A user overrides
them in ``repomem.toml`` at the repository root; an unknown key or a value of the wrong type falls
back to the default and is reported (never an exception), as jedi-language-server does. Problems
are ConfigProblem values; only the CLI's stderr and the language server's messages word them.

Each setting is declared with `setting(default, ...)` (repomem/setting_rules.py): its type is its
default's, and its bounds or choices, who may set it, whether it is run-only, its language-server
name, its old names and its values on some surfaces sit beside it, where every validator below and
lsp/settings.py read them. docs/configuration.md is written from them (scripts/config_reference.py,
repomem/setting_reference.py).

How settings are read, trusted and resolved into one Config per surface is reading.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from repomem.setting_rules import (
    CPU_COUNT,
    setting,
)
from repomem.strategies import STRATEGY_NAMES

GRANULARITIES = ("statement", "named")  # see GraphConfig.granularity
RELATION_KINDS = ("graph", "context", "graph+context")  # see RelationConfig.kind
BLOCK_ORDERS = ("score", "similarity", "stable")  # see CompletionConfig.order
# A daemon's idle wait, at most a week (minutes): 1e9 overflowed the socket's timeout at its start.
MAX_IDLE_MINUTES = 7 * 24 * 60.0
EMBEDDED_LAYER_CHOICES = ("auto", "bf16", "int8", "quantized")  # see ModelConfig.embedded_layers
# The names of repomem.backends.models.EMBEDDED_MODELS (a unit test keeps the two equal).
EMBEDDED_MODEL_CHOICES = ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")  # see ModelConfig.embedded_model
PROMPT_STYLES = ("comments", "repo")  # see CompletionConfig.style
ROUND_CHOICES = ("last", "confident")  # see CompletionConfig.round_choice
SUMMARY_KINDS = ("extractive", "model")  # see MemoryConfig.summaries

# Tokens a repository's own settings may ask of a model: the default model's trained window
# (Qwen2.5-Coder-0.5B: 32,768); the KV cache the embedded model allocates grows with context_tokens.
MODEL_WINDOW_CAP = 32_768
# Threads and processes, whoever asks: a billion llama.cpp threads or parse workers is a crash.
MAX_THREADS = 1024


@dataclass(frozen=True)
class ScanConfig:
    max_file_bytes: int = setting(1_000_000, positive=True, repository_cap=10_000_000,  # ten times the default
                                  help="bytes; larger files are skipped with a reason")
    max_line_chars: int = setting(10_000, positive=True, repository_cap=100_000,  # ten times the default
                                  help="characters of one line; files with a longer one (minified, generated) "
                                       "are skipped")
    excluded_dirs: tuple[str, ...] = setting((
        ".git", ".hg", ".svn", ".venv", "venv", ".env", "env", "node_modules", "__pycache__",
        "build", "dist", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache",
        ".repomem", "site-packages", ".eggs", ".idea", ".vscode",
    ), help="folder names never scanned, wherever they are")
    excluded_dir_suffixes: tuple[str, ...] = setting((".egg-info", ".dist-info"),
                                                     help="folders whose name ends so are never scanned")
    # Secrets are never indexed nor sent to a model (docs/design.md section 8); fnmatch patterns on the
    # file name, whatever its case (a symbolic link is judged by its target's name too). Files that
    # hold credentials under other names are found by their content (index/secrets.secret_file_reason).
    # lsp/vscode/secret_files.js holds the same list.
    secret_patterns: tuple[str, ...] = setting((
        ".env*", "*.env", "*.pem", "*.key", "*.crt", "*.cer", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.ppk",
        "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".netrc", "_netrc", ".pgpass", ".my.cnf", ".htpasswd",
        ".npmrc", ".pypirc", ".yarnrc", ".yarnrc.yml", ".git-credentials", ".dockercfg", ".s3cfg", ".boto",
        ".vault-token", "credentials", "credentials.*", "credentials*.json", "kubeconfig", "kubeconfig.*",
        "*.kubeconfig", "*.kdbx", "*.tfstate", "*.tfstate.*", "*.tfvars", "secrets.*", "secret.*",
    ), repository="stricter only",
        help="secret files, never indexed nor completed in: fnmatch patterns on the file name, any case")
    # Secrets written inside code (provider keys, private-key blocks, tokens, high-entropy strings
    # assigned to secret-sounding names) are masked before indexing and in every prompt.
    mask_secrets: bool = setting(True, repository="stricter only",
                                 help="mask secrets written in files before indexing and in every prompt")
    secret_min_length: int = setting(12, repository="stricter only",
                                     help="characters of an assigned value before its entropy is judged")
    # detect-secrets' thresholds: hex 3.0, base64 4.5.
    secret_min_entropy: float = setting(3.5, repository="stricter only",
                                        help="bits per character above which a value given to a secret-sounding "
                                             "name is masked")


@dataclass(frozen=True)
class GraphConfig:
    """Code graph of docs/design.md section 2."""

    # "statement": module roots, statements, definitions and clauses (blocks collapsed into their
    # owner); "named": every named tree-sitter node, the paper's reading (exact but far larger).
    granularity: str = setting("statement", choices=GRANULARITIES,
                               help="graph nodes: statements, definitions and clauses, or every named syntax node "
                                    "(the paper's reading; 6x more nodes)")
    syntax_weight: float = setting(0.5, positive=True, within="(0, 1]",
                                   help="edge weight: parent <-> child in a syntax tree")
    directory_weight: float = setting(0.3, positive=True, within="(0, 1]",
                                      help="edge weight: directory <-> sub-directory or file")
    file_root_weight: float = setting(1.0, positive=True, within="(0, 1]",
                                      help="edge weight: file node <-> root of its syntax tree")
    call_weight: float = setting(0.8, positive=True, within="(0, 1]",
                                 help="edge weight: call site <-> definition of the callee")
    # docs/design.md's example 1e-3 relates nearly every pair of fragments of a large repository
    # through the 0.3 directory edges (hours to build: docs/measurements.md#graph-and-relations);
    # 1e-2 keeps a few hops around each fragment.
    strength_cutoff: float = setting(1e-2, within="(0, 1]", help="tau: node strengths below count as 0")
    # Definitions called from thousands of places reach tens of thousands of nodes. 1,024 keeps
    # most of 2,048's stored relations and builds them faster (docs/measurements.md#graph-and-relations);
    # exact match did not move (docs/repoeval-devset.md#graph-reach).
    max_reach: int = setting(1024, repository_cap=8_192, zero_is_unlimited=True,
                             help="each node's search stops after this many strongest nodes (0 = exact)")
    max_reexport_hops: int = setting(4, help="`from .x import f` chains followed when resolving a name")
    max_base_class_depth: int = setting(8, help="in-repo base classes searched for self.m() / cls.m()")
    # Relation rows cost ~0.45 s per 1k nodes of one file (each reaches max_reach siblings):
    # 100k one-line statements took 112 s to index. Real files stay well below the default
    # (docs/measurements.md#parsing-and-analysis).
    max_file_nodes: int = setting(10_000, repository_cap=100_000, zero_is_unlimited=True,
                                  help="a file with more kept syntax nodes is searched as text but left out of "
                                       "the code graph (0 = no limit)")


@dataclass(frozen=True)
class FragmentConfig:
    window_lines: int = setting(20, positive=True, help="lines of a fragment (RepoCoder's window)")
    stride_lines: int = setting(10, positive=True, help="lines between fragment starts (RepoCoder's slide)")


@dataclass(frozen=True)
class RelationConfig:
    """Fragment relation W (eq. 8, optionally eq. 7)."""

    kind: str = setting("graph", choices=RELATION_KINDS,
                        help="W: eq. 8 over the code graph, eq. 7 gamma^|i-j| between windows of one file, "
                             "or the elementwise max of both")
    context_gamma: float = setting(0.5, within="[0, 1]", help="gamma of eq. 7")
    relation_cutoff: float = setting(1e-3, positive=True, within="(0, 1]",
                                     help="fragment relations w_ij below this are dropped (keeps W sparse)")
    # W = union of every row's top list, so it stays symmetric: bounds W's size and the query's
    # matrix-vector product. At most 4,096: 2**31 asked numpy for 176 GiB on the example.
    max_relations_per_fragment: int = setting(64, maximum=4096, repository_cap=512,
                                              help="each fragment keeps this many of its strongest relations")
    # Overlapping windows of a file share syntax nodes and carried 80% of W's weight, so s_env
    # (a weighted mean) was mostly the file's own mean BM25. With 0 the environment is what a
    # fragment relates to in other files (docs/repoeval-devset.md#same-file-relations). Eq. 7 is
    # not scaled.
    same_file_weight: float = setting(0.0, within="[0, 1]",
                                      help="eq. 8 relations between two windows of one file are multiplied by "
                                           "this (1 = the paper)")
    # Eq. 6, the semantic relation: cosines of the windows' sentence embeddings (all-MiniLM-L6-v2,
    # repomem/embeddings/), in W's elementwise max with the kind above. Embedding every window
    # costs minutes on a large repository, so it is off (0) unless asked.
    semantic_neighbours: int = setting(0, maximum=4096, repository_cap=512,
                                       help="eq. 6: each fragment relates to this many of its most similar windows "
                                            "by embedding cosine (0 = off)")
    semantic_min_cosine: float = setting(0.5, within="[0, 1]", help="eq. 6 relations below this cosine are dropped")
    workers: int = setting(2, positive=True, maximum=MAX_THREADS, repository_cap=CPU_COUNT, run_only=True,
                           help="threads building W (the numba kernel releases the GIL)")
    # Row blocks; scipy releases the GIL (docs/measurements.md#a-query). Below
    # `parallel_product_entries` a thread's hand-off costs more than it saves.
    product_threads: int = setting(2, maximum=MAX_THREADS, repository_cap=CPU_COUNT, run_only=True,
                                   help="threads of a query's W @ s_ind, once W holds parallel_product_entries")
    parallel_product_entries: int = setting(500_000, run_only=True,
                                            help="entries of W from which a query's product runs on "
                                                 "product_threads threads")


@dataclass(frozen=True)
class BM25Config:
    k1: float = setting(1.5, help="BM25 Okapi's k1")
    b: float = setting(0.75, help="BM25 Okapi's b")
    epsilon: float = setting(0.25, help="idf floor factor of rank-bm25's BM25Okapi")
    split_subwords: bool = setting(True, help="also index snake_case / camelCase parts of identifiers")
    lowercase: bool = setting(True, help="match words whatever their case")


# FragRel's alpha at most: from a million on s_env alone orders the fragments already, and far
# larger weights overflowed the scores to infinity.
ALPHA_MAX = 1_000_000


@dataclass(frozen=True)
class RetrievalConfig:
    query_lines: int = setting(20, positive=True, repository_cap=1_000,
                               help="the query is the last this-many lines before the cursor")
    alpha: float = setting(0.5, maximum=ALPHA_MAX, lsp="alpha",
                           help="eq. 10 weight of the environment score (0 = plain BM25)")
    top_k: int = setting(10, positive=True, repository_cap=200, lsp="topK", help="fragments retrieved (K)")
    # True: they still feed their neighbours' s_env, so the environment starts at the cursor
    # (what the code being written calls and is called by); False: they are left out of eq. 9.
    visible_feed_environment: bool = setting(True, help="the current file's windows over the query lines (never "
                                                        "offered: the prompt shows them) feed their neighbours' "
                                                        "s_env")
    # When the BM25 pass alone has used it up, the environment pass (W · s_ind) is skipped and the
    # ranking is plain BM25 for that query: a late answer is worth less to an editor than a
    # slightly weaker one. None for the CLI and the evaluator (exact FragRel); 50 ms in the editor.
    time_budget_ms: float = setting(0.0, lsp="retrievalBudgetMs", surfaces={"lsp": 50.0},
                                    surface_moved_from={"server.retrieval_budget_ms": "lsp"},
                                    help="milliseconds of retrieval before the environment pass is skipped "
                                         "(0 = none)")
    # Strategy "hat": the summary tree's best-first walk (repomem/memory/summary_tree.py).
    summary_walk_files: int = setting(8, positive=True, repository_cap=256,
                                      help="strategy hat: the walk stops after reaching this many files")
    summary_walk_steps: int = setting(64, positive=True, repository_cap=4_096,
                                      help="strategy hat: the walk stops after expanding this many folders")


@dataclass(frozen=True)
class MemoryConfig:
    """The memory strategies of issue 14 (repomem/memory/): MemWalker, ReadAgent, QRMeM and the
    summaries they read. Each model call costs a prompt of a few hundred tokens and an answer of a
    few; `max_calls` bounds them per completion."""

    # "extractive": signatures and docstrings (instant, the default); "model": the summaries
    # `repomem summarise` wrote into the index (per content hash), extractive where none exists.
    summaries: str = setting("extractive", choices=SUMMARY_KINDS,
                             help="summaries the memory strategies read: signatures and docstrings, or what "
                                  "`repomem summarise` wrote")
    max_calls: int = setting(6, positive=True, repository_cap=32,
                             help="model calls per completion at most, every memory strategy")
    answer_tokens: int = setting(12, positive=True, repository_cap=256,
                                 help="tokens of one navigation, look-up or reflection answer at most")
    # MemWalker: a folder of 300 files would not fit a small model's prompt, so children are
    # listed best first by BM25 of their summaries against the query.
    walk_children: int = setting(10, positive=True, help="MemWalker: children listed per step")
    walk_leaves: int = setting(3, positive=True, help="MemWalker: windows the walk collects before it stops")
    summary_lines: int = setting(2, positive=True, help="MemWalker: lines of each child's summary shown")
    # ReadAgent: gists of the pages best by BM25 of their text are shown.
    page_lines: int = setting(40, positive=True,
                              help="ReadAgent: a page ends at a syntax boundary (a top-level definition or "
                                   "statement) once it holds this many lines")
    gist_pages: int = setting(12, positive=True, help="ReadAgent: pages whose gists are shown")
    lookup_pages: int = setting(3, positive=True, help="ReadAgent: pages the model may read in full")
    entity_names: int = setting(6, positive=True, help="QRMeM: names at the cursor looked up in the entity graph")
    entity_evidence: int = setting(4, positive=True, help="QRMeM: evidence kept per round")
    reflect_rounds: int = setting(2, help="QRMeM: reflections (one model call each) before the walk stops")
    summary_tokens: int = setting(60, positive=True, repository_cap=1_024,
                                  help="tokens of one model-written summary at most")


@dataclass(frozen=True)
class CompletionConfig:
    # "fragrel": BM25's best match first, the rest by eq. 10, and the file's imports of repository
    # code in scope (the code graph's import edges); on the dev set it is not worse than plain
    # BM25 on either split (docs/eval-history.md, third round).
    strategy: str = setting("fragrel", choices=STRATEGY_NAMES, lsp="strategy",
                            help="strategy of `repomem complete` and the language server "
                                 "(repomem/strategies.py)")
    # The embedded model in an editor ("lsp_embedded"): a cold prompt costs ~7 ms a token on two
    # cores, so the 2,048 a GPU server takes in its stride is ~15 s there. 1,024 is also the budget
    # of the CPU exact-match runs (docs/editors.md).
    max_prompt_tokens: int = setting(2048, positive=True, repository_cap=MODEL_WINDOW_CAP, lsp="maxPromptTokens",
                                     surfaces={"lsp_embedded": 1024},
                                     surface_moved_from={"server.embedded_prompt_tokens": "lsp_embedded"},
                                     help="whole prompt, in the backend's tokens (at most the model's window "
                                          "less max_new_tokens)")
    context_share: float = setting(0.5, within="(0, 1]", lsp="contextShare",
                                   help="share of the prompt for retrieved blocks (RepoCoder: half)")
    # Everything after the cursor is re-read by the model at each keystroke (it follows the edit
    # point): 64 tokens cost ~0.5 s on 2 cores.
    max_suffix_tokens: int = setting(64, repository_cap=MODEL_WINDOW_CAP, lsp="maxSuffixTokens",
                                     help="tokens of the code after the cursor kept for fill-in-the-middle")
    max_new_tokens: int = setting(64, positive=True, repository_cap=2_048, lsp="maxNewTokens",
                                  help="tokens generated at most")
    # "stable" (default): a function's blocks are retrieved at its first completion and kept, by path
    # and line, so prompts inside it share their prefix (warm p50 0.66 s vs 16.7 s); "score": RepoCoder's
    # most-similar-last order, re-retrieved at every cursor, where "most similar" is the retriever's
    # score (s_rel for FragRel); "similarity": the same, but blocks ordered by BM25 similarity (s_ind)
    # alone, so the block nearest the code is the most lexically similar one whatever ranked it in.
    order: str = setting("stable", choices=BLOCK_ORDERS, lsp="order",
                         help="block order: kept within a function, best-scored last, or most BM25-similar last")
    # "repo": the model family's repository form (Qwen2.5-Coder's <|repo_name|> / <|file_sep|> file
    # sections, what it was pretrained on), where the family has one; "comments": RepoCoder's
    # commented blocks. The published baselines write RepoCoder's form whatever this says
    # (Strategy.published_prompt). The 1.5B gains from the form; the 0.5B, which copies what it
    # sees, was no better with it and at a near tie answered nothing after a block that ends in an
    # unfinished line (eval/results/devset-ten-em-cpu-1.5b-repo-form).
    style: str = setting("comments", choices=PROMPT_STYLES, models={"qwen2.5-coder-1.5b": "repo"},
                         help="prompt form of repomem's own strategies: the model family's file sections (where it "
                              "has them) or RepoCoder's commented blocks; the published baselines keep RepoCoder's")
    # The shipped GGUFs are the instruct models, whose fill-in-the-middle is far weaker than their
    # left-to-right completion: with the code after the hole in the prompt the 0.5B was right on
    # well under half the lines it got right without it (the editor's protocol, `eval run
    # --right-context`: eval/results/right-context). The 1.5B reads it to its profit there (more
    # lines right, its answers closer): it keeps the form. The code after the cursor still trims
    # what the model writes (postprocess) either way.
    fill_in_middle: bool = setting(True, models={"qwen2.5-coder-0.5b": False},
                                   help="show the model the code after the cursor (fill in the middle) where its "
                                        "family has the form")
    # After a partly typed name the prompt ends before it and the model's first tokens are held to
    # the typed letters (repomem.backends.forced_start): 2 -> 14 right lines of 28 cursors. Needs a
    # backend that knows its vocabulary (the embedded model); others see the word in the prompt.
    word_healing: bool = setting(True, lsp="wordHealing",
                                 help="after a partly typed name the model writes it again, its first tokens held "
                                      "to the typed letters (the embedded model)")
    # An editor's user takes a one-line answer and presses Enter: the next prompt is the answer's
    # own, continued with it and a newline, rather than one built afresh whose every token after
    # the answer the model reads again (repomem.completion.line_below). One process answering one
    # user's cursor: the command line and the evaluator build every prompt afresh.
    continue_lines: bool = setting(False, lsp="continueLines", surfaces={"lsp": True},
                                   help="the line below a one-line answer taken with Enter continues that "
                                        "answer's prompt (no retrieval, nothing read again)")
    max_lines: int = setting(16, positive=True, lsp="maxLines", help="lines of a block completion at most")
    # Each later round queries with the previous round's draft.
    iterative_rounds: int = setting(0, repository_cap=4,  # a generation each
                                    help="generation rounds of repocoder and repocoder+fragrel (0 = the "
                                         "strategy's own, 2)")
    # The 1.5B reads a 1,000-token prompt in about a minute on two AVX2 cores (2026-12-04: the
    # bundled example's first round ran past 60 s in three runs of three, both rounds 69 s), so
    # its own default leaves room for the file-only round too.
    deadline_s: float = setting(60.0, positive=True, repository_cap=600.0, run_only=True, lsp="deadlineSeconds",
                                models={"qwen2.5-coder-1.5b": 180.0},
                                help="seconds: a generation returns by then; so does the embedded model's start "
                                     "(or fails)")


@dataclass(frozen=True)
class ModelConfig:
    """Which model runs and how: the embedded model, a GGUF file, a checkpoint or a model server,
    and the backend's resources. Each setting used to live in [completion], where it is still
    read, with a warning."""

    # Hashed as part of [completion] (settings_digest), where these settings lived until issue 58:
    # the fingerprints of evaluation records made before stay valid.
    DIGESTED_AS: ClassVar[str] = "completion"

    # The KV cache the embedded model allocates grows with it.
    context_tokens: int = setting(4096, positive=True, repository_cap=MODEL_WINDOW_CAP, run_only=True,
                                  reopens_backend=True,
                                  moved_from=("completion.context_tokens",),
                                  help="model window of the embedded backend (prompt + generation), in tokens")
    threads: int = setting(0, maximum=MAX_THREADS, repository_cap=CPU_COUNT, run_only=True, reopens_backend=True,
                           moved_from=("completion.threads",),
                           help="llama.cpp threads reading a prompt (0 = all cores)")
    # Two threads writing tokens wait on each other whenever a third process runs: backends/cpu_threads.py.
    decode_threads: int = setting(0, maximum=MAX_THREADS, repository_cap=CPU_COUNT, run_only=True,
                                  reopens_backend=True,
                                  help="llama.cpp threads writing tokens (0 = token by token the faster of "
                                       "`threads` and one fewer)")
    # A CPU-only build of llama.cpp ignores it.
    gpu_layers: int = setting(-1, minimum=-1, minimum_means="all layers", run_only=True, reopens_backend=True,
                              lsp="gpuLayers", moved_from=("completion.gpu_layers",),
                                               help="layers of the embedded model offloaded to a GPU (-1 = all, "
                                                    "0 = none)")
    # In a child process (llama.cpp's server on loopback) a crash never takes repomem down, and
    # llama.cpp's CUDA build cannot share a process with numba. False saves ~1 s of start-up.
    isolate_model: bool = setting(True, run_only=True, reopens_backend=True,
                                  moved_from=("completion.isolate_model",),
                                  help="run the embedded model in a child process (false: in this one, CPU builds "
                                       "only)")
    # llama.cpp cannot stop a prompt's evaluation halfway. 0 for the CLI and evaluation: chunked
    # evaluation may round differently. 0 in the editor too: chunk boundaries follow the prompt
    # cache's state, which changes the evaluation order and flipped the example's near tie between
    # runs (256 makes abandoned prompts stop within ~2 s, at that price).
    prefill_chunk_tokens: int = setting(0, run_only=True, reopens_backend=True, surfaces={"lsp_embedded": 0},
                                        surface_moved_from={"server.prefill_chunk_tokens": "lsp_embedded"},
                                        moved_from=("completion.prefill_chunk_tokens",),
                                        help="with a request that can be cancelled, a long uncached prompt is "
                                             "evaluated this many tokens at a time, checking for a stop (0 = whole)")
    # llama.cpp's fused attention: a cold prompt evaluates ~1.3x faster on the CPU with the layers
    # in bfloat16; its sums run in another order, so near ties may fall the other way. On where the
    # first answer in a file waits for a cold prompt (the editor); off for the CLI and evaluation,
    # whose measured answers it would move. Applied to the widened embedded files, and to a shipped
    # one that "auto" timed faster with it, where it was measured (backends.factory.fused_attention;
    # docs/editors.md#interactive-latency).
    flash_attention: bool = setting(False, run_only=True, reopens_backend=True, lsp="flashAttention",
                                    surfaces={"lsp_embedded": True},
                                    help="the embedded model, its layers widened to bfloat16 or timed faster as "
                                         "shipped, evaluates attention with llama.cpp's fused kernel (faster prompts; "
                                         "answers may differ on near ties)")
    # Prompts as they are for the CLI and evaluation: a moved cell approximates a cold evaluation
    # (repomem.backends.kv_reuse). In the editor, after Enter the retrieved blocks change and the
    # file's window slides: the prompt shares only ~150 of ~960 tokens from its beginning with the
    # last one, ~600-900 in runs (docs/editors.md).
    reuse_chunk_tokens: int = setting(0, run_only=True, reopens_backend=True, lsp="reuseChunkTokens",
                                      surfaces={"lsp_embedded": 64},
                                      surface_moved_from={"server.reuse_chunk_tokens": "lsp_embedded"},
                                      moved_from=("completion.reuse_chunk_tokens",),
                                      help="the embedded model keeps the cached tokens of every run at least this "
                                           "long that the next prompt repeats elsewhere, moved, and evaluates the "
                                           "rest (0 = only a common beginning)")
    # Each `repomem complete` starts a new model process, whose prompts then evaluate from nothing;
    # with their states kept in the user's cache the next completion in the file evaluates only what
    # changed, answering as a cold evaluation does (repomem.backends.prompt_states). Off for
    # evaluation (each task's prompt is new: a write per prompt, few reads) and in the editor (its
    # model process keeps its prompts in memory, and runs moved there are not exact).
    prompt_cache_mb: int = setting(512, run_only=True, reopens_backend=True, repository="not a repository",
                                   surfaces={"eval": 0, "lsp": 0},
                                   help="megabytes of the user's cache that keep the embedded model's evaluated "
                                        "prompts for later processes (0 = none kept)")
    # Where the CPU multiplies bfloat16, prompts may evaluate faster with the model's layers widened
    # to it (1.5x on an AMD EPYC) or not at all (an Intel Xeon), and tokens decode 1.3-2x slower;
    # where it has AMX's matrix tiles, the 0.5B's Q5_0 blocks rewritten as Q8_0 of the same values
    # read prompts 2.4x and write tokens 1.45x faster (repomem.backends.int8_layers): "auto" writes
    # the copy this machine may run, times it against the shipped file once and runs the faster
    # (repomem.backends.bf16_layers); answers may differ at near-ties. The user's machine decides,
    # not a repository: "bf16" writes 960 MB into the user's cache and would emulate bfloat16 on a
    # CPU without it.
    embedded_layers: str = setting("auto", choices=EMBEDDED_LAYER_CHOICES, repository="not a repository",
                                   run_only=True, reopens_backend=True,
                                   lsp="embeddedLayers",
                                   moved_from=("completion.embedded_layers",),
                                   help="the embedded model's layer weights: a copy for this CPU (8-bit blocks where "
                                        "it has AMX, else bfloat16 where it multiplies it) where that was timed "
                                        "faster here, once (auto), always bfloat16 (bf16), always 8-bit blocks "
                                        "(int8; the 0.5B only), or as shipped (quantized)")
    # The 1.5B completes the command line's and the evaluator's tasks better than the 0.5B on every
    # split measured, for about twice its time on a CPU; the editor, paced by keystrokes, keeps the
    # 0.5B (README, Results). It writes 1.1 GB into the user's cache: the user's machine decides,
    # not a repository.
    embedded_model: str = setting("qwen2.5-coder-1.5b", choices=EMBEDDED_MODEL_CHOICES,
                                  surfaces={"lsp": "qwen2.5-coder-0.5b"},
                                  repository="not a repository", reopens_backend=True, lsp="embeddedModel",
                                  moved_from=("completion.embedded_model",),
                                  help="the embedded model run when no model file, checkpoint or endpoint is given "
                                       "(`repomem model pull NAME` fetches it ahead)")
    model_path: str = setting("", repository="not a repository", reopens_backend=True, lsp="model",
                              moved_from=("completion.model_path",),
                              help="a GGUF file (or an embedded model's name) instead of the embedded model")
    hf_model: str = setting("", repository="not a repository", reopens_backend=True, lsp="hfModel",
                            moved_from=("completion.hf_model",),
                            help="a Hugging Face checkpoint folder or GGUF file, run by transformers")
    # Evaluation with several workers and an in-process batching backend (transformers, vLLM).
    batch_size: int = setting(16, repository_cap=64, run_only=True, moved_from=("completion.batch_size",),
                                                                    help="prompts per forward pass")
    batch_gather_ms: float = setting(50.0, run_only=True,
                                     moved_from=("completion.batch_gather_ms",),
                                     help="milliseconds the first prompt of a batch waits for others to join")
    endpoint: str = setting("", repository="not a repository", run_only=True, reopens_backend=True,
                            lsp="endpoint", moved_from=("completion.endpoint",),
                                            help="an OpenAI-compatible server (vLLM) instead of the embedded model")
    api_key_env: str = setting("REPOMEM_API_KEY", repository="not a repository", run_only=True,
                               moved_from=("completion.api_key_env",),
                               help="environment variable holding the server's API key")
    # The answers' confidence (mean log-probability per token) chooses between RepoCoder's rounds and
    # the file-only round's two answers (prompt.round_choice, prompt.file_only_round); without it one
    # answer is generated and shown. llama-cpp-python's server sorts the whole vocabulary (151,936
    # entries for Qwen2.5) for each token it reports one for, ~0.25 s a token on two cores; vLLM and
    # llama.cpp's llama-server report them at no cost worth counting.
    endpoint_logprobs: bool = setting(True, reopens_backend=True, lsp="endpointLogprobs",
                                      moved_from=("completion.endpoint_logprobs",),
                                      help="ask an OpenAI-compatible server for each token's log-probability "
                                           "(false for a server slow at it, such as llama-cpp-python's)")


@dataclass(frozen=True)
class PromptConfig:
    """The prompt levers' settings (repomem/completion/levers/, one module per lever): what each
    adds to or changes in a graph-aware strategy's candidates, or pins in its prompt. The strategy
    table says which strategies use which lever; a lever's settings switch it on. Each setting
    used to live in [retrieval] or [completion], where it is still read, with a warning."""

    # Relations then add to the lexical best match instead of displacing it (docs/eval-history.md,
    # second round).
    anchor_matches: int = setting(1, help="the first this-many of the top K are BM25's best matches whatever "
                                          "eq. 10 says (0 = the paper's ranking; fragrel-paper ignores it)",
                                  moved_from=("retrieval.anchor_matches",))
    # Relations that add context instead of re-ranking it: definitions resolved through import and
    # call edges, other files only, those whose names share most words with the query first.
    definition_blocks: int = setting(0, help="definitions the cursor's file imports or calls join the prompt as "
                                             "signature blocks, header and docstring line (0 = off, the paper's "
                                             "retrieval)",
                                     moved_from=("retrieval.definition_blocks",))
    definition_lines: int = setting(8, positive=True, help="lines of one signature block at most",
                                    moved_from=("retrieval.definition_lines",))
    # Clones the whole query window ranks below top-k. Both on:
    # docs/repoeval-devset.md#the-continuation-and-clone-search.
    clone_search: int = setting(10, help="with clone_position on: this many more candidates, from a query of the "
                                         "visible code's last lines alone (0 = off)",
                                moved_from=("completion.clone_search",))
    # Blocks that show what followed the match (completion/continuation.py): a window of another
    # file whose lines match the visible code's last `continuation_match_lines` non-blank lines
    # (mean token Jaccard >= continuation_min_similarity) slides down, keeping its length. Graph-
    # aware strategies only (RepoCoder's and the paper's prompts stay exact). On the dev set it is
    # what made `fragrel` beat BM25 in exact match (docs/eval-history.md, fifth round).
    continuation_lines: int = setting(4, help="a matching window slides down until it shows this many non-blank "
                                              "lines past its match (0 = off)",
                                      moved_from=("completion.continuation_lines",))
    continuation_match_lines: int = setting(3, positive=True,
                                            help="non-blank lines of the visible code a window's lines must match",
                                            moved_from=("completion.continuation_match_lines",))
    continuation_min_similarity: float = setting(0.5, within="[0, 1]",
                                                 help="mean token Jaccard similarity of that match at least",
                                                 moved_from=("completion.continuation_min_similarity",))
    # The candidate that best matches the visible code's last lines (the continuation's match, with
    # a line shown after it) moves up, so a clone ranked below what the block budget holds is
    # shown. Graph-aware strategies, with the continuation on.
    clone_position: int = setting(1, minimum=-1, minimum_means="off",
                                  help="the best clone of the visible code's last lines moves up to this place "
                                       "(0 = first; 1 keeps BM25's best match first; -1 = off)",
                                  moved_from=("completion.clone_position",))
    # Usage found through call edges (retrieval/shared_callees.py): functions that call the
    # repository functions the cursor's function already called go on the way the cursor's will.
    # What only the code graph finds; off until exact match decides (issue 36).
    shared_callees: int = setting(0, help="blocks from functions that call what the cursor's function already "
                                          "called (resolved call edges), from just above their last shared call "
                                          "(0 = off)")
    shared_callee_lines: int = setting(12, positive=True, help="lines of one such block at most")
    shared_callee_position: int = setting(1, help="the place in the candidates the first such block takes (0 = "
                                                  "first)")
    # retrieval/imported_usage.py: windows that call what the file imports and has not called yet,
    # the best for the query among them. Off until exact match decides (issue 36).
    imported_usages: int = setting(0, help="blocks that call a repository function the file imports and the "
                                           "cursor's function has not called yet (resolved call edges), BM25's best "
                                           "of them (0 = off)")
    imported_usage_position: int = setting(1, help="the place in the candidates the first such block takes (0 = "
                                                   "first)")
    # completion/packing.py. Off until an EM run decides (docs/eval-history.md, first section).
    pack_blocks: bool = setting(False, help="show each retrieved line once: windows overlapping a better block of "
                                            "the same file lose the shared lines and join it",
                                moved_from=("completion.pack_blocks",))
    pack_max_lines: int = setting(40, positive=True, help="lines a packed block grows to at most (two windows)",
                                  moved_from=("completion.pack_max_lines",))
    # Names in scope (resolved through the index's import edges), taken from the left context's
    # room. A small model otherwise calls a similar-looking name (docs/eval-history.md, second
    # round).
    scope_imports: int = setting(12, help="lines of the current file's imports of repository code shown above the "
                                          "blocks when the left context no longer shows them (0 = off)",
                                 moved_from=("retrieval.scope_imports",))
    # Parameters and defaults, no annotations; a class's __init__. A small model that names the
    # right function still misses its arguments (retrieval/signatures.py).
    scope_signatures: int = setting(0, help="one signature line each for up to this many repository functions and "
                                            "classes the imports in scope bind, not yet called (0 = off)",
                                    moved_from=("retrieval.scope_signatures",))
    scope_signature_chars: int = setting(120, help="characters of one signature line at most",
                                         moved_from=("retrieval.scope_signature_chars",))
    # When the draft calls a repository function or class that the file imports (resolved through
    # the import edges, defined in another file) and the prompt does not show its definition, the
    # draft is generated again with that one signature beside the names in scope (only the name
    # the model already chose: shown signatures of other names drew calls to them,
    # docs/eval-history.md, fourth round). Single-round graph-aware strategies.
    draft_signature: bool = setting(False, help="a second generation guided by the first, with the signature of "
                                                "the repository function its draft calls (off = one generation)",
                                    moved_from=("retrieval.draft_signature",))
    # The file alone is often enough, and retrieved blocks can lead a small model astray: with this
    # on, a retrieving strategy's answer is compared with a completion from the file alone (the
    # `infile` prompt) and the one the model gives the higher mean log-probability per token is
    # shown, the retrieving one on a tie. A second generation, so only where the backend reports
    # log-probabilities (every backend since the embedded model's report theirs). Off in an editor
    # with the embedded model ("lsp_embedded"): its second prompt shares no beginning with the
    # retrieving one, and llama.cpp keeps one prompt in its cache, so each completion reads both
    # prompts cold (docs/measurements.md#editor-and-the-embedded-model). What it gains:
    # docs/repoeval-devset.md#the-file-only-round. Off: one generation a completion.
    file_only_round: bool = setting(True, lsp="fileOnlyRound", surfaces={"lsp_embedded": False},
                                    surface_moved_from={"server.embedded_file_only_round": "lsp_embedded"},
                                    help="also complete from the file alone and show whichever answer the "
                                                "model is surer of (a second generation; needs log-probabilities)")
    # Rounds: repocoder+fragrel's, the draft-signature round.
    # "last" is RepoCoder's (the last round's); "confident" is the round whose answer the model gave
    # the highest mean log-probability per token, the last on a tie or when the backend reports
    # none (an endpoint with model.endpoint_logprobs off). `repocoder` itself always shows its last round, as
    # published. "confident" wins more tasks than it loses where it differs from "last"
    # (docs/repoeval-devset.md#round-choice).
    round_choice: str = setting("confident", choices=ROUND_CHOICES,
                                help="which round's answer a graph-aware multi-round strategy shows: the most "
                                     "confident or the last",
                                moved_from=("completion.round_choice",))


@dataclass(frozen=True)
class IndexConfig:
    """Where the index lives and how it is built: run-only, it never changes a result."""

    dir_name: str = setting(".repomem", folder_name=True, run_only=True,
                            help="index folder under the repository root")
    cache_dir: str = setting("", repository="not a repository", run_only=True,
                             help="if set, indexes live here instead, one sub-folder per repository")
    keep_snapshots: int = setting(1, repository_cap=8,  # each a copy of the index on disk
                                  run_only=True, help="older complete snapshots kept besides the current one")
    # Strategy "dense" ranks windows by embeddings (repomem/embeddings/window_embeddings.py); on, `repomem
    # index` computes them with the index (minutes on a large repository), off, the first dense
    # retrieval does.
    window_embeddings: bool = setting(False, run_only=True,
                                      help="embed every window (all-MiniLM-L6-v2) when indexing, for strategy dense")
    compact_ratio: float = setting(0.25, run_only=True,
                                   help="rebuild W when this share of fragments changed since the base")
    workers: int = setting(2, positive=True, maximum=MAX_THREADS, repository_cap=CPU_COUNT, run_only=True,
                           help="processes parsing files in a full build")
    # The build's objects live on; collecting often cost 5% of the parse workers' CPU.
    gc_young_threshold: int = setting(50_000, run_only=True,
                                      help="Python's cyclic collector runs after this many allocations during a "
                                           "full build (0 = Python's default, 700)")


@dataclass(frozen=True)
class ServerConfig:
    """The language server (`repomem serve`); client settings override these per session. Run-only:
    none changes what an index or an evaluation holds."""

    # A request that follows the document's last one within this window waits it out, and a newer
    # one answers instead (a typing burst starts its first and its last generation); a request
    # after a quiet spell starts at once (lsp/scheduler.py).
    debounce_ms: int = setting(75, run_only=True, lsp="debounceMs",
                               help="milliseconds a completion request that follows another within them waits "
                                    "before it starts")
    # Below eglot's 10 s request time-out, so clients see an answer, never a time-out error.
    answer_within_ms: int = setting(8000, positive=True, run_only=True, lsp="answerWithinMs",
                                    help="milliseconds after which a waiting request gets an empty incomplete list "
                                         "while the model runs on; the next ask gets the answer")
    # The cursor rests at the end of an edit, or at a position the editor reports with
    # repomem/didMoveCursor. Asked there, the completion is ready or under way; asked elsewhere, the
    # model's prompt cache is warm.
    warm_after_ms: int = setting(400, run_only=True, lsp="warmAfterMs",
                                 help="milliseconds the cursor rests, nothing asked, before the completion there "
                                      "starts speculatively (0 = off)")
    # The model has not read the function an edit is in (its prompt, with the blocks the function
    # keeps: completion.warm_prefix, is cold, ~1,000 tokens): the completion there starts at the
    # edit instead of after warm_after_ms of rest (docs/editors.md#interactive-latency).
    warm_new_function: bool = setting(True, run_only=True, lsp="warmNewFunction",
                                      help="an edit in a function no completion was started in starts the "
                                           "completion there at once, not after warmAfterMs of rest")
    # Characters typed at the cursor of a running generation leave it running (its answer may begin
    # with them), and typing that parts from the completion shown starts the next one at once
    # (lsp/scheduler.py).
    type_through: bool = setting(True, run_only=True, lsp="typeThrough",
                                 help="typing on at a completion's cursor keeps its generation running, and typing "
                                      "that parts from the shown completion starts the next one at once")
    # An accepted completion that ends a line: the next line's completion starts where Enter would
    # leave the cursor (lsp/next_line.py), before the user presses it, where completion.continue_lines
    # makes its prompt the accepted answer's, continued: a few tokens to read. (Built afresh, it read
    # the file after the cursor again, with no cached run moved (GenerationRequest.prefix_only), and
    # made the 95th percentile after an accept later: it was off until prompts continued;
    # docs/editors.md#interactive-latency.)
    speculate_below: bool = setting(True, run_only=True, lsp="speculateBelow",
                                    help="after a one-line completion accepted at the end of a line, the next "
                                         "line's completion starts where Enter would put the cursor (with "
                                         "completion.continueLines)")
    # A one-line answer shown at a line's end: the line below it, as if the user took it and pressed
    # Enter (lsp/next_line.py), is completed at once while the user reads, where the engine continues
    # the answer's prompt (completion.continue_lines: a few tokens to read, never a prompt). Typing
    # the answer out keeps it running; anything else stops it (lsp/scheduler.py). Off: an answer not
    # taken cost the next completion the generation's unfinished step, and the accept's speculation
    # (speculate_below) with continued prompts already made a new line sooner
    # (docs/editors.md#interactive-latency).
    line_ahead: bool = setting(False, run_only=True, lsp="lineAhead",
                               help="while a one-line answer is shown, the line below it is completed as if it "
                                    "were taken and Enter pressed (with completion.continueLines)")
    completion_cache_entries: int = setting(256, positive=True, repository_cap=4_096, run_only=True,
                                            lsp="completionCacheEntries",
                                            help="finished completions kept (LRU), keyed by document text and "
                                                 "cursor")
    # The index is built (at start, and again when edits call for a compaction) on a thread of its
    # own and forked parse workers; at a lower CPU priority they take only the cycles the model's
    # process leaves, so completions keep their pace while it builds (Linux: repomem/thread_priority.py).
    index_nice: int = setting(10, maximum=19, run_only=True, lsp="indexNice",
                              help="how many nice steps below the model the language server builds its index "
                                   "(0 = the same priority; Linux only)")
    # Each costs ~200 KB and ~30 ms to index, so 3,000 open documents took over 1 GB. The others
    # are kept as text only and retrieved as the disk has them until edited or asked in again.
    indexed_buffers: int = setting(64, positive=True, repository_cap=512, run_only=True,
                                   help="open buffers overlaid on the index, the most recently edited or asked in")
    # inotify on the folders the file listing depends on (repomem/index/tree_watch.py), read before
    # each retrieval: what changes on disk outside the editor (a checkout, a pull, a generated file)
    # reaches the index even from clients that send no watched-file events. One watch a folder
    # counts against fs.inotify.max_user_watches; past it, or off Linux, there is no watch.
    watch_disk: bool = setting(True, run_only=True,
                               help="watch the repository's folders and re-index what changes on disk before the "
                                    "next completion")
    shown_completions: int = setting(256, positive=True, repository_cap=4_096, run_only=True,
                                     help="completions remembered for accept / reject / explain, by id")
    # Local only.
    feedback_log: str = setting("", repository="not a repository", run_only=True, lsp="feedbackLog",
                                help="JSONL of accept / reject events with the fragments behind each completion "
                                     "(\"\" = feedback.jsonl in the index folder)")
    progress_interval_ms: int = setting(200, positive=True, run_only=True,
                                        help="milliseconds between $/progress reports at least")
    backend_retry_s: float = setting(10.0, run_only=True,
                                     help="seconds to wait before retrying a model that failed to load or connect")
    # Read before any repository is known (the stdio loop, lsp/framing.py), so only the default
    # applies.
    max_message_bytes: int = setting(64 << 20, run_only=True,
                                     help="a message claiming more bytes is dropped (default only)")
    # `serve --tcp` / `--socket` (lsp/listen.py; defaults only, as above): a silent or
    # byte-at-a-time client is closed when its time is up. Clients authenticate side by side, at
    # most `pending_clients` at once (more are closed at once), so none can keep the others out.
    auth_timeout_s: float = setting(5.0, run_only=True,
                                    help="seconds a socket client has, from connecting, to send an admissible "
                                         "initialize (default only)")
    pending_clients: int = setting(16, run_only=True,
                                   help="socket clients authenticating at once at most (default only)")
    max_initialize_bytes: int = setting(1 << 20, run_only=True,
                                        help="a first message claiming more bytes is refused unread (default only)")


@dataclass(frozen=True)
class DaemonConfig:
    """The resident process a command at a terminal starts for the next ones (`repomem daemon`,
    repomem/cli/daemon_command.py). Run-only, and the user's to decide: a repository's file
    cannot start processes on its reader's machine, nor keep them running."""

    # A command at a terminal that found no daemon pays for loading and updating the index and
    # opening the model; the next ones, through a daemon, for what changed (README: daemon).
    auto_start: bool = setting(True, repository="not a repository", run_only=True,
                               help="a command run at a terminal with no daemon running starts one in the "
                                    "background for the next commands (REPOMEM_NO_DAEMON=1 never does)")
    idle_minutes: float = setting(30.0, positive=True, maximum=MAX_IDLE_MINUTES, repository="not a repository",
                                  run_only=True,
                                  help="minutes without a command after which the daemon exits (one a command "
                                       "started, or `daemon start` without --idle-minutes)")


@dataclass(frozen=True)
class Config:
    scan: ScanConfig = field(default_factory=ScanConfig)
    graph: GraphConfig = field(default_factory=GraphConfig)
    fragments: FragmentConfig = field(default_factory=FragmentConfig)
    relations: RelationConfig = field(default_factory=RelationConfig)
    bm25: BM25Config = field(default_factory=BM25Config)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    completion: CompletionConfig = field(default_factory=CompletionConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    prompt: PromptConfig = field(default_factory=PromptConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    server: ServerConfig = field(default_factory=ServerConfig)
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
