"""Reusing llama.cpp's KV cache for prompts that share pieces, not only a beginning.

In an editor, consecutive prompts share most of their text, moved: after Enter the retrieved
blocks change order or one is replaced, and the file's window slides by a line. llama.cpp's
prompt cache (llama-cpp-python's prefix match) keeps only the longest common beginning, so a
completion on a new line re-read most of its tokens (an editor walk, with and without the runs
this module keeps: docs/measurements.md#editor-and-the-embedded-model).

`reuse_plan` finds the long shared runs; `with_chunk_reuse` gives a llama_cpp.Llama class that,
before each prompt, keeps the cached cells of those runs, moves them to their new positions
(llama.cpp re-rotates their keys, a K-shift) and evaluates only the tokens between them. A moved
cell was computed after other text than it now follows, so the answer approximates a cold
evaluation's: llama.cpp's own server offers the same (`--cache-reuse`) for editor plugins. The
language server turns it on for the embedded model ([model.lsp_embedded] reuse_chunk_tokens); the CLI and
`eval run` keep exact prompts (model.reuse_chunk_tokens = 0). A request may also ask that no run be
moved for it (`GenerationRequest.prefix_only`: the editor's completion below an accepted line,
whose moved cells would not have seen that line): the cache then keeps its common beginning only.

The model's child process (repomem.backends.llama_child) uses this module: it must not load
repomem's engine.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from repomem.backends.base import common_prefix

MAX_CANDIDATES = 8  # cache places tried per prompt position (repetitive text has many)
MAX_RUNS = 512  # runs the chain is chosen among (quadratic)
MAX_MOVES = 2  # times a cell may be moved before it is evaluated again (scripts/bench_kv_reuse.py)
# How a client of the model's child asks that no run be moved for one prompt
# (GenerationRequest.prefix_only): this request header, "1", which the child's server hands to the
# model as `prefix_only` below.
PREFIX_ONLY_HEADER = "X-Repomem-Prefix-Only"


@dataclass(frozen=True)
class Run:
    """prompt[prompt_start : prompt_start + length] == cached[cached_start : cached_start + length]."""

    prompt_start: int
    cached_start: int
    length: int


def reuse_plan(cached: Sequence[int], prompt: Sequence[int], min_run: int,
               movable: Sequence[bool] | None = None) -> tuple[int, list[Run]]:
    """(the common beginning's length, the shared runs after it), the runs at least `min_run`
    tokens, in increasing order in both the prompt and the cache (moving them never makes two
    cross), chosen to cover the most prompt tokens. A cached token whose `movable` is false may
    stay in the common beginning but is in no run."""
    start = common_prefix(cached, prompt)
    if min_run <= 0 or start >= len(prompt) - min_run or start >= len(cached) - min_run:
        return start, []
    if movable is not None:  # a negative id matches no prompt token
        cached = [token if ok else -1 - i for i, (token, ok) in enumerate(zip(cached, movable))]
    places: dict[tuple[int, ...], list[int]] = {}
    for i in range(start, len(cached) - min_run + 1):
        bucket = places.setdefault(tuple(cached[i:i + min_run]), [])
        if len(bucket) < MAX_CANDIDATES:
            bucket.append(i)
    runs: list[Run] = []
    j = start
    while j <= len(prompt) - min_run and len(runs) < MAX_RUNS:
        longest = 0
        for i in places.get(tuple(prompt[j:j + min_run]), ()):
            length = min_run
            while i + length < len(cached) and j + length < len(prompt) and cached[i + length] == prompt[j + length]:
                length += 1
            runs.append(Run(j, i, length))
            longest = max(longest, length)
        # Inside a run every later start is the same run, shorter: skip to its end.
        j += max(longest - min_run + 1, 1)
    return start, _heaviest_chain(runs)


def _heaviest_chain(runs: list[Run]) -> list[Run]:
    """The runs increasing and disjoint in both orders with the most tokens (weighted longest
    increasing chain, O(len(runs)^2))."""
    runs = sorted(runs, key=lambda run: (run.prompt_start, run.cached_start))
    best: list[int] = []
    before: list[int] = []
    for k, run in enumerate(runs):
        weight, parent = run.length, -1
        for m in range(k):
            earlier = runs[m]
            if (earlier.prompt_start + earlier.length <= run.prompt_start
                    and earlier.cached_start + earlier.length <= run.cached_start
                    and best[m] + run.length > weight):
                weight, parent = best[m] + run.length, m
        best.append(weight)
        before.append(parent)
    if not runs:
        return []
    k = max(range(len(runs)), key=best.__getitem__)
    chain = []
    while k >= 0:
        chain.append(runs[k])
        k = before[k]
    return chain[::-1]


def reused_tokens(cached: Sequence[int], prompt: Sequence[int], min_run: int) -> int:
    """Prompt tokens a model with `with_chunk_reuse(..., min_run)` does not evaluate again."""
    start, runs = reuse_plan(cached, prompt, min_run)
    return min(start + sum(run.length for run in runs), max(len(prompt) - 1, 0))


def with_chunk_reuse(llama_class: type, min_run: int, max_moves: int = MAX_MOVES) -> type:
    """`llama_class` (llama_cpp.Llama) arranging its KV cache by `reuse_plan` before each prompt,
    a cell moved at most `max_moves` times since it was evaluated; the class itself when `min_run`
    is 0."""
    if min_run <= 0:
        return llama_class

    class ChunkReusingLlama(llama_class):
        def __init__(self, *args, **settings):
            # A second sequence holds the runs while the text before each is evaluated: llama.cpp
            # decodes a sequence's tokens only right after its last cached position. Unified, the
            # two sequences share the n_ctx cells (no memory added) and copying between them
            # only relabels cells.
            module = sys.modules[llama_class.__module__].llama_cpp
            defaults = module.llama_context_default_params

            def two_sequences():
                params = defaults()
                params.n_seq_max = 2
                params.kv_unified = True
                return params

            module.llama_context_default_params = two_sequences
            try:
                super().__init__(*args, **settings)
            finally:
                module.llama_context_default_params = defaults
            # Per position: how often the cell there was moved since it was evaluated. Every move
            # keeps an evaluation made after other text, so the bound stops errors compounding.
            self._moves = [0] * self._n_ctx
            self._fresh_from = 0  # cells from here on were evaluated by llama-cpp-python since
            # Set by the caller before a completion (one at a time): its prompt keeps only the
            # cache's common beginning, as without this class (GenerationRequest.prefix_only).
            self.prefix_only = False

        def generate(self, tokens, *args, **settings):
            tokens = list(tokens)
            self._moves[self._fresh_from:] = [0] * (len(self._moves) - self._fresh_from)
            kept = self.n_tokens if not settings.get("reset", True) else 0
            if settings.get("reset", True) and self.n_tokens > 0 and self.prefix_only:
                kept = common_prefix(self._input_ids.tolist(), tokens)  # llama-cpp-python's prefix match
            elif settings.get("reset", True) and self.n_tokens > 0:
                try:
                    kept = self._arrange_cache(tokens)
                except RuntimeError:  # a failed decode: the prompt is evaluated cold, as without
                    self.n_tokens = 0
                    self._ctx.kv_cache_clear()
                    kept = 0
            self._fresh_from = min(kept, max(len(tokens) - 1, 0))
            return super().generate(tokens, *args, **settings)

        def _arrange_cache(self, prompt: list[int]) -> int:
            """Arrange the cache for `prompt`; the prompt tokens it then holds (a beginning)."""
            movable = [moves < max_moves for moves in self._moves[:self.n_tokens]]
            start, runs = reuse_plan(self._input_ids.tolist(), prompt, min_run, movable)
            if not runs or not _can_shift(self._ctx):
                return start  # llama-cpp-python's prefix match does the rest
            memory = self._ctx
            kept_end = start  # drop every cached cell outside the beginning and the runs
            for run in runs:
                if run.cached_start > kept_end:
                    memory.kv_cache_seq_rm(-1, kept_end, run.cached_start)
                kept_end = run.cached_start + run.length
            memory.kv_cache_seq_rm(-1, kept_end, -1)
            for run in runs:  # the runs to sequence 1
                memory.kv_cache_seq_cp(0, 1, run.cached_start, run.cached_start + run.length)
                memory.kv_cache_seq_rm(0, run.cached_start, run.cached_start + run.length)
            # Runs moving left go first, from the left; then those moving right, from the right:
            # a run's new place is then always free (the runs keep their order).
            for run in [run for run in runs if run.prompt_start < run.cached_start] + \
                       [run for run in reversed(runs) if run.prompt_start > run.cached_start]:
                memory.kv_cache_seq_shift(1, run.cached_start, run.cached_start + run.length,
                                          run.prompt_start - run.cached_start)
            moves = list(self._moves)
            position = start
            for run in runs:
                self._evaluate_at(prompt[position:run.prompt_start], position)
                self._moves[position:run.prompt_start] = [0] * (run.prompt_start - position)
                end = run.prompt_start + run.length
                memory.kv_cache_seq_cp(1, 0, run.prompt_start, end)
                memory.kv_cache_seq_rm(1, run.prompt_start, end)
                self.input_ids[run.prompt_start:end] = prompt[run.prompt_start:end]
                self._moves[run.prompt_start:end] = [count + 1 for count in
                                                     moves[run.cached_start:run.cached_start + run.length]]
                position = end
            self.n_tokens = position
            self._requires_eval = True  # the last logits are stale: llama-cpp-python re-reads a token
            return position

        def _evaluate_at(self, tokens: list[int], position: int) -> None:
            """Decode `tokens` in sequence 0 at positions position.. (its last cached one is position - 1)."""
            for offset in range(0, len(tokens), self.n_batch):
                batch = tokens[offset:offset + self.n_batch]
                self._batch.set_batch(batch=batch, n_past=position + offset, logits_all=False)
                self._ctx.decode(self._batch)
            self.input_ids[position:position + len(tokens)] = tokens

    return ChunkReusingLlama


def _can_shift(context) -> bool:
    import llama_cpp

    return bool(llama_cpp.llama_memory_can_shift(context.memory))
