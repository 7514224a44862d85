"""The one config tree: every tuning constant of repomem lives here.

Defaults follow docs/design.md (RepoCoder windows, FragRel eqs. 7-10, BM25 Okapi). A user overrides
them in ``repomem.toml`` at the repository root; an unknown key or a value of the wrong type falls
back to the default and is reported (never an exception), as jedi-language-server does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from repomem.regular_files import read_regular
from repomem.strategies import STRATEGY_NAMES


@dataclass(frozen=True)
class ScanConfig:
    max_file_bytes: int = 1_000_000  # bytes; larger files are skipped with a reason
    max_line_chars: int = 10_000  # characters; minified / generated files are skipped
    excluded_dirs: tuple[str, ...] = (
        ".git", ".hg", ".svn", ".venv", "venv", ".env", "env", "node_modules", "__pycache__",
        "build", "dist", ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache",
        ".repomem", "site-packages", ".eggs", ".idea", ".vscode",
    )
    excluded_dir_suffixes: tuple[str, ...] = (".egg-info", ".dist-info")
    # Secrets are never indexed nor sent to a model (docs/design.md section 8); fnmatch patterns on the
    # file name, whatever its case (a symbolic link is judged by its target's name too). Files that
    # hold credentials under other names are found by their content (index/secrets.secret_file_reason).
    # lsp/vscode/secret_files.js holds the same list.
    secret_patterns: tuple[str, ...] = (
        ".env*", "*.env", "*.pem", "*.key", "*.crt", "*.cer", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.ppk",
        "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".netrc", "_netrc", ".pgpass", ".my.cnf", ".htpasswd",
        ".npmrc", ".pypirc", ".yarnrc", ".yarnrc.yml", ".git-credentials", ".dockercfg", ".s3cfg", ".boto",
        ".vault-token", "credentials", "credentials.*", "credentials*.json", "kubeconfig", "kubeconfig.*",
        "*.kubeconfig", "*.kdbx", "*.tfstate", "*.tfstate.*", "*.tfvars", "secrets.*", "secret.*",
    )
    # Secrets written inside code (provider keys, private-key blocks, tokens, high-entropy strings
    # assigned to secret-sounding names) are masked before indexing and in every prompt.
    mask_secrets: bool = True
    secret_min_length: int = 12  # characters of an assigned value before its entropy is judged
    secret_min_entropy: float = 3.5  # bits per character (detect-secrets: hex 3.0, base64 4.5)


@dataclass(frozen=True)
class GraphConfig:
    """Code graph of docs/design.md section 2."""

    # "statement": module roots, statements, definitions and clauses (blocks collapsed into their
    # owner); "named": every named tree-sitter node, the paper's reading (exact but far larger).
    granularity: str = "statement"
    syntax_weight: float = 0.5  # parent <-> child in a syntax tree
    directory_weight: float = 0.3  # directory <-> sub-directory / file
    file_root_weight: float = 1.0  # file node <-> root of its syntax tree
    call_weight: float = 0.8  # call site <-> definition of the callee
    # tau: node strengths below count as 0. docs/design.md's example 1e-3 relates nearly every pair of
    # fragments of a large repository through the 0.3 directory edges (Django: 40k of 51k
    # fragments per row, hours to build); 1e-2 keeps a few hops around each fragment.
    strength_cutoff: float = 1e-2
    # Each node's search stops after this many strongest nodes (0 = exact). Definitions called
    # from thousands of places reach 30k nodes. 1,024 keeps 86% of 2,048's stored relations and
    # builds Django's relation rows in 4.2 s instead of 7.0; on the dev set (1,200 tasks, GPU)
    # exact match did not move: +0.3 [+0.0, +0.8] line, +0.0 [-0.5, +0.5] API (eval/README.md).
    max_reach: int = 1024
    max_reexport_hops: int = 4  # `from .x import f` chains followed when resolving a name
    max_base_class_depth: int = 8  # in-repo base classes searched for self.m() / cls.m()
    # A file with more kept syntax nodes is searched as text but left out of the code graph.
    # Relation rows cost ~0.45 s per 1k nodes of one file (each reaches max_reach siblings):
    # 100k one-line statements took 112 s to index. Django's largest file has 4.8k nodes. 0 = no limit.
    max_file_nodes: int = 10_000


@dataclass(frozen=True)
class FragmentConfig:
    window_lines: int = 20  # RepoCoder's window
    stride_lines: int = 10  # RepoCoder's slide


@dataclass(frozen=True)
class RelationConfig:
    """Fragment relation W (eq. 8, optionally eq. 7)."""

    # "graph" = eq. 8 over the code graph; "context" = eq. 7 gamma^|i-j| between windows of one
    # file; "graph+context" = elementwise max of both.
    kind: str = "graph"
    context_gamma: float = 0.5  # gamma of eq. 7
    relation_cutoff: float = 1e-3  # fragment relations w_ij below this are dropped (keeps W sparse)
    # Each fragment keeps its strongest relations only (W = union of every row's top list, so it
    # stays symmetric): bounds W's size and the query's matrix-vector product.
    max_relations_per_fragment: int = 64
    # Eq. 8 relations between two windows of one file are multiplied by this (1 = the paper).
    # Overlapping windows of a file share syntax nodes and carried 80% of W's weight, so s_env
    # (a weighted mean) was mostly the file's own mean BM25. With 0 the environment is what a
    # fragment relates to in other files (dev set, alpha 0.5: hit@10 -0.2 -> +0.5 on line tasks,
    # -1.2 -> +0.7 on API tasks vs BM25, both within noise; eval/README.md). Eq. 7 is not scaled.
    same_file_weight: float = 0.0
    workers: int = 2  # threads for building W (the numba kernel releases the GIL)
    # A query's W @ s_ind runs on this many threads (row blocks; scipy releases the GIL) once W
    # holds at least `parallel_product_entries` entries: Django 3.6 -> 2.4 ms on two threads.
    # Below it a thread's hand-off costs more than it saves.
    product_threads: int = 2
    parallel_product_entries: int = 500_000


@dataclass(frozen=True)
class BM25Config:
    k1: float = 1.5
    b: float = 0.75
    epsilon: float = 0.25  # idf floor factor of rank-bm25's BM25Okapi
    split_subwords: bool = True  # also index snake_case / camelCase parts of identifiers
    lowercase: bool = True


@dataclass(frozen=True)
class RetrievalConfig:
    query_lines: int = 20  # the query is the last N lines before the cursor
    alpha: float = 0.5  # eq. 10 weight of the environment score (0 = plain BM25)
    top_k: int = 10
    # The first this-many of the top K are BM25's best matches whatever eq. 10 says; the rest follow
    # by s_rel. Relations then add to the lexical best match instead of displacing it (0 = the
    # paper's ranking; strategy fragrel-paper ignores it). See eval/README.md.
    anchor_matches: int = 1
    # The current file's windows over the query lines are never offered (the prompt shows them).
    # True: they still feed their neighbours' s_env, so the environment starts at the cursor
    # (what the code being written calls and is called by); False: they are left out of eq. 9.
    visible_feed_environment: bool = True
    # Milliseconds; 0 = none. When the BM25 pass alone has used it up, the environment pass
    # (W · s_ind) is skipped and the ranking is plain BM25 for that query: a late answer is
    # worth less to an editor than a slightly weaker one. This is the CLI's and the evaluator's
    # budget (default: exact FragRel); the language server's requests run on a copy of the config
    # with server.retrieval_budget_ms in its place (lsp/settings.py for_server_requests).
    time_budget_ms: float = 0.0
    # Relations that add context instead of re-ranking it: this many definitions that the cursor's
    # file imports or calls (resolved through import and call edges, other files only) join the
    # retrieved fragments as compact signature blocks (header and docstring line), those whose
    # names share most words with the query first. 0 = off (the paper's retrieval).
    definition_blocks: int = 0
    definition_lines: int = 8  # lines of one signature block at most
    # Names in scope: when the prompt's left context no longer shows the current file's import
    # statements that bind repository code (resolved through the index's import edges), up to this
    # many of their lines are shown above the retrieved blocks, taken from the left context's room.
    # A small model otherwise calls a similar-looking name (eval/README.md). 0 = off (RepoCoder's prompt).
    scope_imports: int = 12
    # Beside those imports, one compact signature line (parameters and defaults, no annotations;
    # a class's __init__) for up to this many of the repository functions and classes they bind,
    # leaving out names the visible code already calls: a small model that names the right
    # function still misses its arguments (retrieval/signatures.py). 0 = off.
    scope_signatures: int = 0
    scope_signature_chars: int = 120  # characters of one signature line at most
    # A second generation guided by the first: when the draft calls a repository function or class
    # that the file imports (resolved through the import edges, defined in another file) and the
    # prompt does not show its definition, the draft is generated again with that one signature
    # beside the names in scope (only the name the model already chose: shown signatures of other
    # names drew calls to them, eval/README.md). Single-round graph-aware strategies; off = one
    # generation.
    draft_signature: bool = False
    # Strategy "hat": the summary tree's best-first walk stops after reaching this many files or
    # expanding this many folders (repomem/memory/summary_tree.py).
    summary_walk_files: int = 8
    summary_walk_steps: int = 64


@dataclass(frozen=True)
class MemoryConfig:
    """The memory strategies of issue 14 (repomem/memory/): MemWalker, ReadAgent, QRMeM and the
    summaries they read. Each model call costs a prompt of a few hundred tokens and an answer of a
    few; `max_calls` bounds them per completion."""

    # "extractive": signatures and docstrings (instant, the default); "model": the summaries
    # `repomem summarise` wrote into the index (per content hash), extractive where none exists.
    summaries: str = "extractive"
    max_calls: int = 6  # model calls per completion at most, every memory strategy
    answer_tokens: int = 12  # tokens of one navigation, look-up or reflection answer at most
    # MemWalker: children listed per step (the node's children best first by BM25 of their
    # summaries against the query: a folder of 300 files would not fit a small model's prompt),
    # and windows the walk collects before it stops.
    walk_children: int = 10
    walk_leaves: int = 3
    summary_lines: int = 2  # lines of each child's summary shown to the model
    # ReadAgent: pages end at a syntax boundary (a top-level definition or statement) once they
    # hold this many lines; gists of this many pages (the best by BM25 of their text) are shown,
    # and the model looks up at most `lookup_pages` of them in full.
    page_lines: int = 40
    gist_pages: int = 12
    lookup_pages: int = 3
    # QRMeM: names at the cursor looked up in the entity graph at first, evidence kept per round,
    # and reflections (one model call each) before the walk stops.
    entity_names: int = 6
    entity_evidence: int = 4
    reflect_rounds: int = 2
    summary_tokens: int = 60  # tokens of one model-written summary at most


@dataclass(frozen=True)
class CompletionConfig:
    # A name of repomem.strategies.STRATEGY_TABLE. "fragrel": BM25's best match first, the rest by
    # eq. 10, and the file's imports of repository code in scope (the code graph's import edges);
    # on the dev set it is not worse than plain BM25 on either split (eval/README.md, issue 11).
    strategy: str = "fragrel"
    max_prompt_tokens: int = 2048  # whole prompt, in the backend's tokens
    context_share: float = 0.5  # share of the prompt for retrieved blocks (RepoCoder: half)
    # Code after the cursor kept for fill-in-the-middle. Everything after the cursor is re-read by
    # the model at each keystroke (it follows the edit point): 64 tokens cost ~0.5 s on 2 cores.
    max_suffix_tokens: int = 64
    max_new_tokens: int = 64
    # "stable" (default): a function's blocks are retrieved at its first completion and kept, by path
    # and line, so prompts inside it share their prefix (warm p50 0.66 s vs 16.7 s); "score": RepoCoder's
    # most-similar-last order, re-retrieved at every cursor, where "most similar" is the retriever's
    # score (s_rel for FragRel); "similarity": the same, but blocks ordered by BM25 similarity (s_ind)
    # alone, so the block nearest the code is the most lexically similar one whatever ranked it in.
    order: str = "stable"
    style: str = "comments"  # "comments" (RepoCoder) or "repo" (the model family's file-separator form)
    fill_in_middle: bool = True  # use the code after the cursor when the model supports FIM
    max_lines: int = 16  # of a block completion
    # Show each retrieved line once: windows overlapping a better block of the same file lose the
    # shared lines and join it (completion/packing.py). Off until an EM run decides (eval/README.md).
    pack_blocks: bool = False
    pack_max_lines: int = 40  # a packed block grows to at most this many lines (two windows)
    # Blocks that show what followed the match (completion/continuation.py): a window of another
    # file whose lines match the visible code's last `continuation_match_lines` non-blank lines
    # (mean token Jaccard >= continuation_min_similarity) slides down, keeping its length, until it
    # shows this many non-blank lines past the match. Graph-aware strategies only (RepoCoder's and
    # the paper's prompts stay exact); 0 = off. On the dev set it is what made `fragrel` beat
    # BM25 in exact match (eval/README.md, fifth round).
    continuation_lines: int = 4
    continuation_match_lines: int = 3
    continuation_min_similarity: float = 0.5
    # The candidate that best matches the visible code's last lines (the continuation's match, with
    # a line shown after it) moves up to this place in the candidates' order (0 = first; only ever
    # up), so a clone ranked below what the block budget holds is shown; 1 keeps BM25's best match
    # first. -1 = off. Graph-aware strategies, with the continuation on.
    clone_position: int = 1
    # With clone_position on: this many more candidates, retrieved by a query of those last lines
    # alone (clones the whole query window ranks below top-k), for the clone to be chosen from.
    # Both on: line EM +1.8 over the continuation alone on all 600 dev line tasks (eval/README.md,
    # seventh round); 0 = off.
    clone_search: int = 10
    # Which of a graph-aware multi-round strategy's answers is shown (repocoder+fragrel's rounds,
    # the draft-signature round): "last" is RepoCoder's (the last round's); "confident" is the round
    # whose answer the model gave the highest mean log-probability per token, the last on a tie or
    # when the backend reports none (the embedded model's child). `repocoder` itself always shows
    # its last round, as published. On the dev set (transformers on a GPU) "confident" won 22 and
    # lost 10 of the tasks where it differs from "last", over repocoder and repocoder+fragrel on
    # both splits (eval/README.md, ninth round).
    round_choice: str = "confident"
    # Generation rounds of the iterative strategies (repocoder, repocoder+fragrel): 0 = the
    # strategy's own (RepoCoder's 2); each later round queries with the previous round's draft.
    iterative_rounds: int = 0
    deadline_s: float = 60.0  # a generation returns by then; so does the embedded model's start (or fails)
    context_tokens: int = 4096  # model window for the embedded backend (prompt + generation)
    threads: int = 0  # llama.cpp threads (0 = all cores)
    # Layers of the embedded model offloaded to a GPU: -1 = all (a CPU-only build of llama.cpp
    # ignores it), 0 = none.
    gpu_layers: int = -1
    # Run the embedded model in a child process (llama.cpp's server on loopback): a crash there
    # never takes repomem down, and llama.cpp's CUDA build cannot share a process with numba.
    # False loads it in this process (CPU builds only; saves ~1 s of start-up).
    isolate_model: bool = True
    # With a request that can be cancelled, the child evaluates a long uncached prompt this many
    # tokens at a time and checks for a stop in between: llama.cpp cannot stop a prompt's
    # evaluation halfway. 0 = in one piece (the CLI and evaluation: chunked evaluation may round
    # differently); the language server sets server.prefill_chunk_tokens.
    prefill_chunk_tokens: int = 0
    model_path: str = ""  # a GGUF file instead of the default model
    hf_model: str = ""  # a Hugging Face checkpoint folder or GGUF file, run by transformers
    # Evaluation with several workers and an in-process batching backend (transformers, vLLM):
    # prompts per forward pass, and how long the first waits for others to join (milliseconds).
    batch_size: int = 16
    batch_gather_ms: float = 50.0
    endpoint: str = ""  # an OpenAI-compatible server (vLLM) instead of the embedded model
    api_key_env: str = "REPOMEM_API_KEY"  # environment variable holding the server's API key


@dataclass(frozen=True)
class IndexConfig:
    dir_name: str = ".repomem"  # index folder under the repository root
    cache_dir: str = ""  # if set, indexes live here instead, one sub-folder per repository
    keep_snapshots: int = 1  # older complete snapshots kept besides the current one
    compact_ratio: float = 0.25  # rebuild W when this share of fragments changed since the base
    workers: int = 2  # processes parsing files in a full build
    # Python's cyclic collector runs after this many allocations during a full build (0 = Python's
    # default, 700): the build's objects live on; collecting often cost 5% of the parse workers' CPU.
    gc_young_threshold: int = 50_000


@dataclass(frozen=True)
class ServerConfig:
    """The language server (`repomem serve`); client settings override these per session."""

    # Milliseconds an inline-completion request waits before it starts; a newer request for the
    # same document within this window answers instead (typing bursts start one generation).
    debounce_ms: int = 75
    # Milliseconds: retrieval.time_budget_ms for the server's requests only (its copy of the config;
    # the CLI and the evaluator keep retrieval.time_budget_ms as set).
    retrieval_budget_ms: float = 50.0
    # A completion request still waiting after this many milliseconds is answered with an empty
    # incomplete list while the model runs on; the client's next ask gets the finished answer.
    # Below eglot's 10 s request time-out, so clients see an answer, never a time-out error.
    answer_within_ms: int = 8000
    # Where the cursor rests this long (the end of an edit, or a position the editor reports with
    # repomem/didMoveCursor) with nothing asked, the completion there starts speculatively: asked
    # there, it is ready or under way; asked elsewhere, the model's prompt cache is warm. 0 = off.
    warm_after_ms: int = 400
    # The prompt budget (tokens) with the embedded model (llama.cpp, no endpoint, no HF model),
    # unless the client sets maxPromptTokens: a cold prompt costs ~7 ms a token on two cores, so
    # the 2,048 a GPU server takes in its stride is ~15 s here. 1,024 is the budget the dev set's
    # CPU exact-match runs used (docs/editors.md). 0 = completion.max_prompt_tokens.
    embedded_prompt_tokens: int = 1024
    # completion.prefill_chunk_tokens with the embedded model: a request the user typed over
    # holds the model for its whole cold prompt (~7 s for 1,024 tokens here) unless the prompt is
    # evaluated in chunks. Off (0) by default: chunk boundaries follow the prompt cache's state,
    # which changes the evaluation order and flipped the example's near tie between runs (256
    # makes abandoned prompts stop within ~2 s, at that price).
    prefill_chunk_tokens: int = 0
    completion_cache_entries: int = 256  # LRU of finished completions, keyed by document text and cursor
    # Open buffers overlaid on the index, the most recently edited or asked in (lsp/session.py):
    # each costs ~200 KB and ~30 ms to index, so 3,000 open documents took over 1 GB. The others are
    # kept as text only and retrieved as the disk has them until they are edited or asked in again.
    indexed_buffers: int = 64
    shown_completions: int = 256  # completions remembered for accept / reject / explain, by id
    # JSONL of accept / reject events with the fragments that fed each completion; local only.
    # "" = feedback.jsonl in the repository's index folder.
    feedback_log: str = ""
    progress_interval_ms: int = 200  # at most one $/progress report per this many milliseconds
    backend_retry_s: float = 10.0  # after a model that failed to load or connect, wait this long to retry
    # A message claiming more bytes than this is dropped (the stdio loop, lsp/framing.py); read
    # before any repository is known, so only the default applies.
    max_message_bytes: int = 64 << 20
    # `serve --tcp` / `--socket` (lsp/listen.py; defaults only, as above): a client has this many
    # seconds in all, from connecting, to send an admissible `initialize` (a silent or
    # byte-at-a-time client is closed then). Clients authenticate side by side, at most
    # `pending_clients` at once (more are closed at once), so none can keep the others out.
    auth_timeout_s: float = 5.0
    pending_clients: int = 16
    max_initialize_bytes: int = 1 << 20  # a first message claiming more is refused unread


@dataclass(frozen=True)
class Config:
    scan: ScanConfig = field(default_factory=ScanConfig)
    graph: GraphConfig = field(default_factory=GraphConfig)
    fragments: FragmentConfig = field(default_factory=FragmentConfig)
    relations: RelationConfig = field(default_factory=RelationConfig)
    bm25: BM25Config = field(default_factory=BM25Config)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    completion: CompletionConfig = field(default_factory=CompletionConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    server: ServerConfig = field(default_factory=ServerConfig)


CONFIG_FILE_NAME = "repomem.toml"

BLOCK_ORDERS = ("score", "similarity", "stable")  # see CompletionConfig.order
PROMPT_STYLES = ("comments", "repo")  # see CompletionConfig.style
ROUND_CHOICES = ("last", "confident")  # see CompletionConfig.round_choice
SUMMARY_KINDS = ("extractive", "model")  # see MemoryConfig.summaries

_CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("graph", "granularity"): ("statement", "named"),
    ("relations", "kind"): ("graph", "context", "graph+context"),
    ("completion", "strategy"): STRATEGY_NAMES,
    ("completion", "order"): BLOCK_ORDERS,
    ("completion", "style"): PROMPT_STYLES,
    ("completion", "round_choice"): ROUND_CHOICES,
    ("memory", "summaries"): SUMMARY_KINDS,
}


def _coerce(value: Any, default: Any) -> Any:
    """Return `value` converted to the type of `default`, or raise TypeError."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
    elif isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif isinstance(default, str):
        if isinstance(value, str):
            return value
    elif isinstance(default, tuple):
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        if isinstance(value, list):
            odd = next(v for v in value if not isinstance(v, str))
            raise TypeError(f"expected a list of strings, got {_toml_type(odd)} {odd!r} in it")
        raise TypeError(f"expected a list of strings, got {_toml_type(value)}")
    raise TypeError(f"expected {_toml_type(default)}, got {_toml_type(value)}")


def _toml_type(value: Any) -> str:
    """A value's type as a TOML file's author knows it."""
    if isinstance(value, bool):
        return "a boolean"
    return {int: "an integer", float: "a number", str: "a string", list: "a list", tuple: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)


# Values that must be > 0, and values that must lie in (0, 1].
_POSITIVE = frozenset({
    ("scan", "max_file_bytes"), ("scan", "max_line_chars"),
    ("graph", "syntax_weight"), ("graph", "directory_weight"), ("graph", "file_root_weight"),
    ("graph", "call_weight"), ("fragments", "window_lines"), ("fragments", "stride_lines"),
    ("relations", "relation_cutoff"), ("retrieval", "query_lines"), ("retrieval", "top_k"),
    ("completion", "max_prompt_tokens"), ("completion", "max_new_tokens"), ("completion", "max_lines"),
    ("completion", "pack_max_lines"), ("completion", "continuation_match_lines"),
    ("retrieval", "definition_lines"), ("retrieval", "summary_walk_files"),
    ("retrieval", "summary_walk_steps"), ("memory", "max_calls"), ("memory", "answer_tokens"),
    ("memory", "walk_children"), ("memory", "walk_leaves"), ("memory", "summary_lines"), ("memory", "page_lines"),
    ("memory", "gist_pages"), ("memory", "lookup_pages"), ("memory", "entity_names"), ("memory", "entity_evidence"),
    ("memory", "summary_tokens"),
    ("completion", "deadline_s"), ("completion", "context_tokens"), ("index", "workers"),
    ("relations", "workers"), ("server", "completion_cache_entries"), ("server", "shown_completions"),
    ("server", "progress_interval_ms"), ("server", "answer_within_ms"), ("server", "indexed_buffers"),
})
_UNIT = frozenset({
    ("graph", "syntax_weight"), ("graph", "directory_weight"), ("graph", "file_root_weight"),
    ("graph", "call_weight"), ("graph", "strength_cutoff"), ("relations", "relation_cutoff"),
    ("completion", "context_share"),
})


# Every number a setting holds is at most this, unless _MAXIMA says less: TOML integers are
# unbounded, and window_lines = 10**23 overflowed numpy deep in the index build (an internal
# error, not a warning). 2**31 - 1 fits every C int and numpy int32 a setting reaches, and in
# seconds or milliseconds it stays below threading.TIMEOUT_MAX.
SETTING_CEILING = 2**31 - 1
_MAXIMA: dict[tuple[str, str], int] = {
    # W keeps up to this many entries per fragment: 2**31 asked numpy for 176 GiB on the example.
    ("relations", "max_relations_per_fragment"): 4096,
    # Threads and processes, whoever asks: a billion llama.cpp threads or parse workers is a crash.
    ("index", "workers"): 1024, ("relations", "workers"): 1024, ("relations", "product_threads"): 1024,
    ("completion", "threads"): 1024,
}


def _range_problem(section: str, key: str, value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    if isinstance(value, str):
        if (section, key) == ("index", "dir_name") and (
            value in ("", ".", "..") or "/" in value or "\\" in value
        ):
            return "must be a plain folder name"
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"  # NaN / inf would pass every comparison below, or print as invalid JSON
    highest = _MAXIMA.get((section, key), SETTING_CEILING)
    if value > highest:
        return f"must be at most {highest:,}"
    if (section, key) == ("completion", "gpu_layers"):
        return "must be -1 (all layers) or more" if value < -1 else None
    if (section, key) == ("completion", "clone_position"):
        return "must be -1 (off) or more" if value < -1 else None
    if value < 0:
        return "must be >= 0"
    if (section, key) in _POSITIVE and value <= 0:
        return "must be > 0"
    if (section, key) in _UNIT and not 0 < value <= 1:
        return "must lie in (0, 1]"
    if (section, key) in (("relations", "context_gamma"), ("relations", "same_file_weight"),
                          ("completion", "continuation_min_similarity")) and value > 1:
        return "must lie in [0, 1]"
    return None


def config_from_mapping(data: dict[str, Any]) -> tuple[Config, list[str]]:
    """Build a Config from a nested mapping; bad entries fall back to defaults with a warning."""
    warnings: list[str] = []
    base = Config()
    sections: dict[str, Any] = {}
    for section_name, section_value in data.items():
        if section_name not in {f.name for f in dataclasses.fields(Config)}:
            warnings.append(f"unknown config section [{section_name}] ignored")
            continue
        if not isinstance(section_value, dict):
            warnings.append(f"config section [{section_name}] must be a table; default kept")
            continue
        default_section = getattr(base, section_name)
        known = {f.name for f in dataclasses.fields(default_section)}
        changes: dict[str, Any] = {}
        for key, value in section_value.items():
            if key not in known:
                warnings.append(f"unknown config key {section_name}.{key} ignored")
                continue
            default_value = getattr(default_section, key)
            try:
                coerced = _coerce(value, default_value)
            except TypeError as error:
                warnings.append(f"config {section_name}.{key}: {error}; default {default_value!r} kept")
                continue
            choices = _CHOICES.get((section_name, key))
            if choices is not None and coerced not in choices:
                warnings.append(
                    f"config {section_name}.{key}={coerced!r} is not one of {', '.join(choices)};"
                    f" default {default_value!r} kept"
                )
                continue
            problem = _range_problem(section_name, key, coerced)
            if problem is not None:
                warnings.append(f"config {section_name}.{key}={coerced!r} {problem}; default {default_value!r} kept")
                continue
            changes[key] = coerced
        sections[section_name] = dataclasses.replace(default_section, **changes)
    return dataclasses.replace(base, **sections), warnings


# Keys a repository's own repomem.toml may not set: they send its code or the user's keys to a
# server, or name a file or folder outside the repository to read or write. They come from the
# user's config (user_config_path), the command line or the editor; or the user trusts the
# repository by listing it in `[trust] repositories` of the user's config.
REPOSITORY_FORBIDDEN_KEYS = frozenset({
    ("completion", "endpoint"), ("completion", "api_key_env"), ("completion", "model_path"),
    ("completion", "hf_model"), ("server", "feedback_log"), ("index", "cache_dir"),
})
TRUST_SECTION = "trust"
# Secret protection a repository's own repomem.toml may only make stricter (a cloned repository is
# what would switch it off): its secret-file patterns are added to the user's, its thresholds count
# where they are lower, and masking stays on. A repository the user trusts sets them as it likes.
STRICTER_ONLY_KEYS = frozenset({
    ("scan", "secret_patterns"), ("scan", "mask_secrets"), ("scan", "secret_min_length"),
    ("scan", "secret_min_entropy"),
})


# Resource settings a repository's own repomem.toml may not raise past these: a cloned repository
# must not make repomem start 24 index workers or reserve a million-token model window. The
# user's config, the command line and the editor may; so may a repository the user trusts. A
# repository's value above its cap is lowered to the cap, with one warning. None: this machine's
# CPU count (threads and processes).
REPOSITORY_CAPS: dict[tuple[str, str], int | float | None] = {
    ("index", "workers"): None, ("relations", "workers"): None, ("relations", "product_threads"): None,
    ("completion", "threads"): None,
    # Tokens: the default model's trained window (Qwen2.5-Coder-0.5B: 32,768); the KV cache the
    # embedded model allocates grows with context_tokens.
    ("completion", "context_tokens"): 32_768, ("completion", "max_prompt_tokens"): 32_768,
    ("completion", "max_suffix_tokens"): 32_768, ("completion", "max_new_tokens"): 2_048,
    ("completion", "iterative_rounds"): 4,  # a generation each
    ("completion", "batch_size"): 64,
    ("completion", "deadline_s"): 600.0,  # seconds a generation may hold the model
    ("memory", "max_calls"): 32, ("memory", "answer_tokens"): 256, ("memory", "summary_tokens"): 1_024,
    ("scan", "max_file_bytes"): 10_000_000, ("scan", "max_line_chars"): 100_000,  # ten times the defaults
    ("graph", "max_reach"): 8_192, ("graph", "max_file_nodes"): 100_000,  # 0 (no limit) is above
    ("relations", "max_relations_per_fragment"): 512,
    ("retrieval", "top_k"): 200, ("retrieval", "query_lines"): 1_000,
    ("retrieval", "summary_walk_files"): 256, ("retrieval", "summary_walk_steps"): 4_096,
    ("index", "keep_snapshots"): 8,  # each a copy of the index on disk
    ("server", "completion_cache_entries"): 4_096, ("server", "shown_completions"): 4_096,
    ("server", "indexed_buffers"): 512,  # ~200 KB of index each
}
_UNLIMITED_AT_ZERO = frozenset({("graph", "max_reach"), ("graph", "max_file_nodes")})


def _repository_cap(user_section: dict[str, Any], section: str, key: str, asked: Any) -> tuple[Any, str | None]:
    """`asked` (a repository's value of a REPOSITORY_CAPS key), or the cap with a warning when it
    is above (the user's own value, where higher, is the cap); a value of the wrong type is left
    for config_from_mapping to report."""
    if isinstance(asked, bool) or not isinstance(asked, (int, float)):
        return asked, None
    cap = REPOSITORY_CAPS[(section, key)]
    if cap is None:
        cap = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    users = user_section.get(key)
    if isinstance(users, (int, float)) and not isinstance(users, bool) and users > cap:
        cap = users
    unlimited = asked == 0 and (section, key) in _UNLIMITED_AT_ZERO
    if not unlimited and not asked > cap:  # NaN is reported by config_from_mapping
        return asked, None
    return cap, (f"{CONFIG_FILE_NAME}: {section}.{key}={asked!r}{' (no limit)' if unlimited else ''} is more than "
                 f"a repository's own settings may ask for ({cap:,}); {cap:,} used (set it in {user_config_path()} "
                 f"or on the command line, or trust the repository there under [{TRUST_SECTION}])")


def user_config_path() -> Path:
    """REPOMEM_CONFIG, else $XDG_CONFIG_HOME/repomem/config.toml, else ~/.config/repomem/config.toml."""
    if os.environ.get("REPOMEM_CONFIG"):
        return Path(os.environ["REPOMEM_CONFIG"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "repomem" / "config.toml"


def _read_toml(path: Path, label: str) -> tuple[dict[str, Any], list[str]]:
    if not path.exists():
        return {}, []
    if not path.is_file():
        return {}, [f"{label} is not a regular file; defaults used"]
    try:
        data = tomllib.loads(read_regular(path).decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as error:
        return {}, [f"{label}: {str(error).splitlines()[0] if str(error) else error.__class__.__name__}; "
                    "defaults used"]
    return data, []


def _trusted(user: dict[str, Any], repo_root: Path) -> bool:
    listed = user.get(TRUST_SECTION, {}).get("repositories", []) if isinstance(user.get(TRUST_SECTION), dict) else []
    if not isinstance(listed, list):
        return False
    root = repo_root.resolve()
    return any(isinstance(entry, str) and Path(entry).expanduser().resolve() == root for entry in listed)


def _stricter_only(user_section: dict[str, Any], section: str, key: str, asked: Any) -> tuple[Any, str | None]:
    """The value `section.key` (of STRICTER_ONLY_KEYS) takes when a repository asks for `asked` over
    the user's setting or the default: patterns added, thresholds lowered, masking kept on. Returns
    it (None: leave the key as the user has it) and None, "weaker" (the repository asked for less
    protection) or why the asked value is unusable."""
    default = getattr(getattr(Config(), section), key)
    try:
        asked = _coerce(asked, default)
    except TypeError as error:
        return None, str(error)
    problem = _range_problem(section, key, asked)
    if problem is not None:
        return None, f"{asked!r} {problem}"
    try:
        current = _coerce(user_section.get(key, default), default)
    except TypeError:
        current = default  # the user's own value is unusable: config_from_mapping falls back to this
    if isinstance(default, tuple):
        return list(dict.fromkeys((*current, *asked))), None
    if isinstance(default, bool):
        return current or asked, "weaker" if current and not asked else None
    return min(current, asked), "weaker" if asked > current else None


def load_config(repo_root: Path) -> tuple[Config, list[str]]:
    """The user's config (user_config_path), then the repository's ``repomem.toml`` over it, minus
    the keys a repository may not set unless the user trusts it (REPOSITORY_FORBIDDEN_KEYS), and
    with its secret protection settings counted only where they are stricter (STRICTER_ONLY_KEYS)."""
    user, warnings = _read_toml(user_config_path(), str(user_config_path()))
    repo, repo_warnings = _read_toml(repo_root / CONFIG_FILE_NAME, CONFIG_FILE_NAME)
    warnings += repo_warnings
    trusted = _trusted(user, repo_root)
    merged: dict[str, Any] = {name: dict(value) if isinstance(value, dict) else value
                              for name, value in user.items() if name != TRUST_SECTION}
    weakened: list[str] = []  # the repository's settings that would lower secret protection, said once
    for section, values in repo.items():
        if not isinstance(values, dict) or not isinstance(merged.get(section, {}), dict):
            merged[section] = values
            continue
        kept = {}
        for key, value in values.items():
            if (section, key) in REPOSITORY_FORBIDDEN_KEYS and not trusted:
                warnings.append(f"{CONFIG_FILE_NAME}: {section}.{key} ignored: a repository's own settings may not "
                                f"send data elsewhere or name paths outside it (set it in {user_config_path()} or "
                                f"on the command line, or trust the repository there under [{TRUST_SECTION}])")
                continue
            if (section, key) in STRICTER_ONLY_KEYS and not trusted:
                value, refused = _stricter_only(merged.get(section, {}), section, key, value)
                if refused == "weaker":
                    weakened.append(f"{section}.{key}")
                elif refused is not None:
                    warnings.append(f"{CONFIG_FILE_NAME}: {section}.{key}: {refused}; ignored")
                if value is None:
                    continue
            if (section, key) in REPOSITORY_CAPS and not trusted:
                value, capped = _repository_cap(merged.get(section, {}), section, key, value)
                if capped is not None:
                    warnings.append(capped)
            kept[key] = value
        merged[section] = {**merged.get(section, {}), **kept}
    if weakened:
        warnings.append(f"{CONFIG_FILE_NAME}: {', '.join(weakened)}: a repository's own settings may only add secret "
                        "file patterns, lower the masking thresholds or keep masking on; the stricter value was kept "
                        f"(set it in {user_config_path()} or on the command line, or trust the repository there under "
                        f"[{TRUST_SECTION}])")
    config, problems = config_from_mapping(merged)
    return config, warnings + problems


def with_overrides(config: Config, **sections: dict[str, Any]) -> Config:
    """Return `config` with some fields replaced, e.g. ``retrieval={"alpha": 0.0}``."""
    replaced = {
        name: dataclasses.replace(getattr(config, name), **values) for name, values in sections.items()
    }
    return dataclasses.replace(config, **replaced)


def with_assignments(config: Config, assignments: list[str] | tuple[str, ...]) -> tuple[Config, list[str]]:
    """`config` with "section.key=value" assignments applied (values in TOML syntax; a bare word
    is a string), each checked as repomem.toml's keys are. Returns the problems, one per bad one."""
    problems: list[str] = []
    mapping: dict[str, dict[str, Any]] = {}
    for assignment in assignments:
        name, sep, raw = assignment.partition("=")
        section, dot, key = name.strip().partition(".")
        if not sep or not dot or not key:
            problems.append(f"{assignment!r}: expected section.key=value")
            continue
        try:
            value = tomllib.loads(f"v = {raw.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw.strip()
        mapping.setdefault(section, {})[key] = value
    checked, warnings = config_from_mapping(mapping)
    problems.extend(warnings)
    if problems:
        return config, problems
    return with_overrides(config, **{section: {key: getattr(getattr(checked, section), key) for key in keys}
                                     for section, keys in mapping.items()}), []


# Settings that change how work is carried out, not what it produces (threads, where the model
# runs, how long to wait); None: the whole section. Fingerprints of an index or of evaluation
# records leave them out, so a different thread count neither rebuilds nor re-runs anything.
RUN_ONLY_SETTINGS: dict[str, frozenset[str] | None] = {
    "relations": frozenset({"workers", "product_threads", "parallel_product_entries"}),
    "completion": frozenset({"threads", "endpoint", "api_key_env", "deadline_s", "isolate_model", "gpu_layers",
                             "batch_size", "batch_gather_ms", "context_tokens", "prefill_chunk_tokens"}),
    "index": None,  # where the index lives and how many processes build it
    "server": None,
}


def settings_digest(config: Config, sections: Iterable[str] | None = None, digest_size: int = 16) -> str:
    """A hex hash of the settings of `sections` (default: every section not wholly run-only),
    defaults included, run-only settings left out."""
    names = [f.name for f in dataclasses.fields(config)] if sections is None else list(sections)
    chosen = {}
    for name in names:
        skipped = RUN_ONLY_SETTINGS.get(name, frozenset())
        if skipped is None:
            continue
        values = dataclasses.asdict(getattr(config, name))
        chosen[name] = {key: value for key, value in values.items() if key not in skipped}
    return hashlib.blake2b(json.dumps(chosen, sort_keys=True).encode(), digest_size=digest_size).hexdigest()
