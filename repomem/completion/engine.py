"""Completion over one RepoService and one backend, as the strategy table (repomem.strategies) says.

A request goes through small steps: read the cursor once (`request.read_cursor`), then per round
retrieve (the strategy's retriever), fit the prompt into the token budget, generate and clean up.
RepoCoder's strategies run a second round whose query slides over the first round's draft.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from repomem.backends.base import Backend, BackendTokenizer, Generation, GenerationRequest, TokenCountFailed
from repomem.completion.continuation import (
    ContinuedSpans,
    blocks_at,
    continued_blocks,
    spans_of,
    strongest_clone,
    with_clone_at,
)
from repomem.completion.model_calls import MemoryModel, ModelCall
from repomem.completion.packing import pack_blocks
from repomem.completion.postprocess import CompletionShape, clean_completion
from repomem.completion.prompt import ContextBlock, Prompt, PromptBudget, build_prompt
from repomem.completion.request import CompletionRequest, CursorContext, read_cursor
from repomem.completion.retrievers import RETRIEVERS, RoundQuery
from repomem.completion.rounds import RoundAnswer, choose_round
from repomem.config import Config
from repomem.failures import Failure
from repomem.index.scan import secret_reason
from repomem.index.secrets import secret_file_reason
from repomem.languages.registry import language_named
from repomem.positions import Cursor
from repomem.retrieval.scoring import ScoredFragment
from repomem.service import RepoService
from repomem.strategies import STRATEGY_NAMES, Strategy, strategy_named

STABLE_MEMO_SIZE = 64  # functions whose blocks are remembered for --order stable


@dataclass(frozen=True)
class Completion:
    text: str  # what the user sees
    raw: str  # the model's continuation before post-processing
    strategy: str
    prompt: Prompt
    fragments: tuple[ScoredFragment, ...]  # retrieved for the round shown, best first
    generation: Generation
    shape: CompletionShape
    rounds: int
    timings_ms: dict[str, float]
    model_calls: tuple[ModelCall, ...] = ()  # a memory strategy's calls while retrieving, in order
    # Every round's answer, first round first, when more than one ran (RepoCoder's rounds, the
    # draft-signature round); `chosen_round` indexes the one shown (completion.round_choice).
    round_answers: tuple[RoundAnswer, ...] = ()
    chosen_round: int = 0

    @property
    def drafts(self) -> tuple[str, ...]:
        """Raw continuations of the rounds before the last, first round first."""
        return tuple(answer.raw for answer in self.round_answers[:-1])


@dataclass(frozen=True)
class PreparedPrompt:
    """A round's context before the model runs: what the cursor shows, what was retrieved, what fit."""

    context: CursorContext
    fragments: tuple[ScoredFragment, ...]  # retrieved, best first
    prompt: Prompt
    model_calls: tuple[ModelCall, ...] = ()
    timings_ms: dict[str, float] = dataclasses.field(default_factory=dict)  # so far: retrieve, prompt, memory_model


def _tail_lines(context: CursorContext, count: int) -> list[str]:
    """The visible code's last `count` non-blank lines before the cursor line."""
    return [line for line in context.left_lines[:-1] if line.strip()][-count:]


class CompletionEngine:
    """Completes cursors of one repository with one backend.

    With order "stable", the blocks are retrieved once per function (at the first completion in
    it) and reused, ordered by path and line, while the cursor stays in that function: every prompt
    then shares its whole block section, and the backend's prompt cache skips it.
    """

    def __init__(self, service: RepoService, backend: Backend, config: Config | None = None):
        self.service = service
        self.backend = backend
        self.config = config or service.config
        self._tokenizer = BackendTokenizer(backend)
        self._stable: OrderedDict[tuple[str, int], list[ScoredFragment]] = OrderedDict()
        self._first_lines: dict[tuple[str, int], int] = {}  # where the function's last prompt began
        self._continued: dict[tuple[str, int], ContinuedSpans] = {}  # the lines its blocks first showed

    def request(
        self,
        cursor: Cursor,
        strategy: str | None = None,
        *,
        order: str | None = None,
        use_suffix: bool | None = None,
        max_new_tokens: int | None = None,
        alpha: float | None = None,
        visible_from: int = 0,
        excluded: np.ndarray | None = None,
        unlisted: np.ndarray | None = None,
        cancel: Callable[[], bool] | None = None,
        enough: Callable[[str], bool] | None = None,
    ) -> CompletionRequest | Failure:
        """A request at `cursor`, every choice not given taken from the config."""
        settings = self.config.completion
        scan = self.config.scan
        reason = secret_reason(cursor.root, cursor.path, scan)
        if reason is None:
            held = secret_file_reason(cursor.text, scan.secret_min_length, scan.secret_min_entropy)
            reason = None if held is None else f"holds {held}"
        if reason is not None:
            return Failure("secret-file", f"{cursor.path} {reason}: repomem never completes in it, nor sends its "
                                          "text to a model")
        name = strategy or settings.strategy
        chosen = strategy_named(name)
        if chosen is None:
            return Failure("bad-strategy", f"unknown strategy {name!r}; choose one of {', '.join(STRATEGY_NAMES)}")
        order = order or settings.order
        if chosen.as_published and order == "similarity":
            order = "score"  # the paper's prompt: the best block by s_rel sits nearest the code
        return CompletionRequest(
            cursor=cursor, strategy=chosen,
            alpha=chosen.alpha(self.config.retrieval.alpha if alpha is None else alpha),
            order=order,
            use_suffix=settings.fill_in_middle if use_suffix is None else use_suffix,
            max_new_tokens=max_new_tokens or settings.max_new_tokens,
            visible_from=visible_from, excluded=excluded, unlisted=unlisted, cancel=cancel, enough=enough,
        )

    def complete(self, cursor: Cursor, strategy: str | None = None, **choices) -> Completion | Failure:
        """Complete at `cursor`; `choices` as in `request`."""
        request = self.request(cursor, strategy, **choices)
        if isinstance(request, Failure):
            return request
        return self.run(request)

    def run(self, request: CompletionRequest) -> Completion | Failure:
        context = read_cursor(request, self.config.retrieval.query_lines, self.backend.template.supports_fim,
                              self.service.mask)
        timings: dict[str, float] = {"retrieve": 0.0, "prompt": 0.0, "generate": 0.0}
        query = context.query
        model = self._memory_model(request)
        rounds: list[Completion] = []
        for round_number in range(1, self._round_count(request.strategy) + 1):
            if rounds:
                # RepoCoder: the query window slides over the draft: last lines before the cursor + draft.
                draft = rounds[-1].raw if context.shape.multiline else rounds[-1].text
                query = "\n".join((context.query + draft).split("\n")[-self.config.retrieval.query_lines :])
            result = self._round(request, context, query, round_number, timings, model)
            if isinstance(result, Failure) or result.generation.finish_reason == "cancelled":
                return result
            rounds.append(result)
        called = self._draft_call(request, rounds[-1])
        if called is not None:
            # Same query, same blocks; the one signature joins the names in scope. A second
            # generation that fails or is cut leaves the first draft standing.
            second = self._round(request, context, query, 2, timings, model, draft_signature=called,
                                 fragments=rounds[-1].fragments)
            if not isinstance(second, Failure) and second.generation.finish_reason in ("stop", "length"):
                rounds.append(second)
        if len(rounds) == 1:
            return rounds[0]
        answers = tuple(RoundAnswer(r.raw, r.generation.mean_logprob) for r in rounds)
        # RepoCoder's own strategy stays as published (its last round); the choice is one of
        # repomem's levers, for the graph-aware strategies.
        choice = self.config.completion.round_choice if request.strategy.names_in_scope else "last"
        chosen = choose_round([a.mean_logprob for a in answers], choice)
        # The shown round's prompt, blocks and answer; the whole request's timings and round count.
        return dataclasses.replace(rounds[chosen], timings_ms=rounds[-1].timings_ms, rounds=rounds[-1].rounds,
                                   round_answers=answers, chosen_round=chosen)

    def _round_count(self, strategy: Strategy) -> int:
        """Generation rounds: the strategy's own, or completion.iterative_rounds for an iterative one."""
        configured = self.config.completion.iterative_rounds
        return configured if strategy.rounds > 1 and configured > 0 else strategy.rounds

    def _draft_call(self, request: CompletionRequest, draft: Completion) -> str | None:
        """The signature line for retrieval.draft_signature: of the first repository function or
        class the draft's first line calls through the file's imports, unless the prompt already
        shows its definition; None when off or nothing qualifies."""
        if (not self.config.retrieval.draft_signature or not request.strategy.names_in_scope
                or request.strategy.rounds != 1 or draft.generation.finish_reason not in ("stop", "length")):
            return None
        first_line = next((line for line in draft.raw.split("\n") if line.strip()), "")
        called = self.service.called_signature(request.cursor.path, first_line,
                                               self.config.retrieval.scope_signature_chars)
        if called is None:
            return None
        name, line = called
        if f"{name}()" in line or f"{name}(" not in line:
            return None  # no parameters to show: the draft's arguments cannot improve (and a bare
            # `def name(): ...` got copied as a def line on the dev set)
        kind = "def" if line.startswith("def ") else "class"
        if re.search(rf"\b{kind} {re.escape(name)}\b", draft.prompt.text):
            return None  # a block (or the visible file) shows the definition itself
        return self.service.mask(line)

    def _memory_model(self, request: CompletionRequest) -> MemoryModel | None:
        """The request's budgeted access to the model, for strategies that ask it while retrieving."""
        if not request.strategy.asks_model:
            return None
        return MemoryModel(self.backend, self.service.mask, self.config.memory.max_calls,
                           self.config.completion.deadline_s, request.cancel)

    # -- the steps of one round ----------------------------------------------------------------

    def prepare(self, request: CompletionRequest) -> PreparedPrompt | Failure:
        """The first round's prompt without running the model (prompt-level evaluation, explain)."""
        context = read_cursor(request, self.config.retrieval.query_lines, self.backend.template.supports_fim,
                              self.service.mask)
        return self._prepare(request, context, context.query, 1, {"retrieve": 0.0, "prompt": 0.0},
                             self._memory_model(request))

    def _prepare(self, request: CompletionRequest, context: CursorContext, query: str, round_number: int,
                 timings: dict[str, float], model: MemoryModel | None, draft_signature: str | None = None,
                 fragments: Sequence[ScoredFragment] | None = None) -> PreparedPrompt | Failure:
        """`fragments`: the round's blocks when already known (the draft-signature round keeps the
        first round's, which `--order stable` may have remembered rather than retrieved)."""
        started = time.perf_counter()
        fragments = list(fragments) if fragments is not None else self._fragments(request, context, query,
                                                                                  round_number, model)
        timings["retrieve"] += (time.perf_counter() - started) * 1000
        if model is not None:  # part of "retrieve": what the memory's own model calls cost
            timings["memory_model"] = sum(call.seconds for call in model.calls) * 1000
        started = time.perf_counter()
        prompt = self._fit_prompt(request, context, fragments, draft_signature)
        if isinstance(prompt, Failure):
            return prompt
        timings["prompt"] += (time.perf_counter() - started) * 1000
        return PreparedPrompt(context, tuple(fragments), prompt, tuple(model.calls) if model is not None else (),
                              dict(timings))

    def _round(self, request: CompletionRequest, context: CursorContext, query: str, round_number: int,
               timings: dict[str, float], model: MemoryModel | None, draft_signature: str | None = None,
               fragments: Sequence[ScoredFragment] | None = None) -> Completion | Failure:
        prepared = self._prepare(request, context, query, round_number, timings, model, draft_signature, fragments)
        if isinstance(prepared, Failure):
            return prepared
        prompt = prepared.prompt
        generation = self._generate(request, context, prompt)
        if isinstance(generation, Failure):
            return generation
        timings["generate"] += generation.seconds * 1000
        raw = generation.text
        if context.healed:
            raw = raw[len(context.healed):] if raw.startswith(context.healed) else raw.lstrip(" ")
        text = clean_completion(raw, context.shape, self.backend.template.sentinels, context.suffix or "",
                                self.config.completion.max_lines)
        return Completion(
            text=text, raw=raw, strategy=request.strategy.name, prompt=prompt, fragments=prepared.fragments,
            generation=generation, shape=context.shape, rounds=round_number, timings_ms=dict(timings),
            model_calls=prepared.model_calls,
        )

    def _stable_key(self, request: CompletionRequest, context: CursorContext) -> tuple[str, int] | None:
        return (request.cursor.path, context.definition_line) if request.order == "stable" else None

    def _fragments(self, request: CompletionRequest, context: CursorContext, query: str,
                   round_number: int, model: MemoryModel | None) -> list[ScoredFragment]:
        """The round's fragments: remembered for the function (stable order, first round) or retrieved."""
        first_retrieval = round_number == 1 and request.strategy.retrieves
        memo_key = self._stable_key(request, context) if first_retrieval else None
        if memo_key is not None:
            remembered = self._stable.get(memo_key)
            if remembered is not None and self.service.fragments_live([f.fragment for f in remembered]):
                self._stable.move_to_end(memo_key)
                return remembered
        retrieve = RETRIEVERS[request.strategy.retriever]
        anchored = 0 if request.strategy.as_published else None
        fragments = retrieve(self.service, RoundQuery(request.cursor, query, request.alpha, request.excluded,
                                                      request.unlisted, model, anchored))
        settings = self.config.completion
        if (settings.clone_search > 0 and settings.clone_position >= 0 and settings.continuation_lines > 0
                and request.strategy.names_in_scope):
            # Clones of the code just above the cursor, for the clone the blocks move up: a query
            # of those lines alone finds them where the whole query window ranks them below top-k.
            tail = _tail_lines(context, settings.continuation_match_lines)
            if tail:
                found = retrieve(self.service, RoundQuery(request.cursor, "\n".join(tail), request.alpha,
                                                          request.excluded, request.unlisted, model, anchored))
                have = {f.fragment for f in fragments}
                fragments = [*fragments, *(f for f in found[: settings.clone_search] if f.fragment not in have)]
        if memo_key is not None and fragments:
            self._stable[memo_key] = fragments
            while len(self._stable) > STABLE_MEMO_SIZE:
                dropped, _ = self._stable.popitem(last=False)
                self._first_lines.pop(dropped, None)
                self._continued.pop(dropped, None)
        return fragments

    def _fit_prompt(self, request: CompletionRequest, context: CursorContext,
                    fragments: list[ScoredFragment], draft_signature: str | None = None) -> Prompt | Failure:
        """Blocks and the current file within the token budget; blocks repeating what the prompt
        already shows of the current file are dropped and the fit is redone. `draft_signature`
        joins the names in scope (shown even when no import statement is hidden)."""
        settings = self.config.completion
        cursor = request.cursor
        candidates = [
            ContextBlock(f.fragment, f.path, f.start_line, f.end_line, self.service.fragment_text(f), f.s_rel,
                         summary=f.text is not None, similarity=f.s_ind)
            for f in fragments
        ]
        stable_key = self._stable_key(request, context)
        if settings.continuation_lines > 0 and request.strategy.names_in_scope:
            candidates = self._continued_blocks(candidates, context, cursor.path, stable_key)
        select = None
        if settings.pack_blocks:
            def select(chosen, block_budget, cost):
                return pack_blocks(chosen, settings.pack_max_lines, self.service.span_text, block_budget, cost)
        budget = PromptBudget(settings.max_prompt_tokens, settings.context_share, settings.max_suffix_tokens)
        hint = self._first_lines.get(stable_key) if stable_key else None
        visible_from = min(max(request.visible_from, 0), cursor.line)
        if hint is not None:
            hint = hint - visible_from if hint >= visible_from else None
        file_lines = cursor.text.split("\n")
        scope = self._scope_imports(request, context, file_lines)
        # None until the first fit shows what the left context keeps (names it calls need no signature).
        signatures: list[str] | None = None if scope and self.config.retrieval.scope_signatures > 0 else []
        forced = [draft_signature] if draft_signature else []
        try:
            while True:
                prompt = build_prompt(
                    left_lines=context.left_lines, suffix=context.suffix, candidates=candidates,
                    tokenizer=self._tokenizer, template=self.backend.template, budget=budget, order=request.order,
                    style=settings.style, repo=self.service.root.name, path=cursor.path, first_line_hint=hint,
                    select=select,
                    pinned=[_scope_block(cursor.path, file_lines, scope, [*(signatures or ()), *forced])]
                    if scope or forced else (),
                )
                if isinstance(prompt, Failure):
                    return prompt
                # build_prompt counts lines of `left_lines`; the rest of the engine uses file lines.
                prompt = dataclasses.replace(prompt, left_first_line=prompt.left_first_line + visible_from)
                shown = (prompt.left_first_line, cursor.line + context.suffix_lines)
                duplicates = {id(b) for b in prompt.blocks
                              if b.path == cursor.path and not b.summary
                              and b.start_line <= shown[1] and b.end_line > shown[0]}
                # Import statements the left context shows after all are not repeated above it.
                still_hidden = [span for span in scope if span[1] <= prompt.left_first_line]
                if duplicates or still_hidden != scope:
                    candidates = [c for c in candidates if id(c) not in duplicates]
                    scope = still_hidden
                    continue
                if signatures is None:
                    signatures = self._scope_signatures(cursor, file_lines, scope, prompt.left_first_line)
                    if signatures:
                        continue
                break
        except TokenCountFailed as error:
            return error.failure
        if stable_key is not None:
            self._first_lines[stable_key] = prompt.left_first_line
        return prompt

    def _continued_blocks(self, candidates: list[ContextBlock], context: CursorContext, cursor_path: str,
                          stable_key: tuple[str, int] | None) -> list[ContextBlock]:
        """The candidates slid to show what followed their match (completion.continuation_lines).
        With order "stable" a function's first completion decides the lines and later ones show
        the same, so their prompts keep sharing the block section as the cursor moves."""
        if stable_key is not None and stable_key in self._continued:
            shown = blocks_at(candidates, self._continued[stable_key], self.service.file_lines)
            if shown is not None:
                return shown
        settings = self.config.completion
        tail = _tail_lines(context, settings.continuation_match_lines)
        # Several windows of one file are common among the candidates: read (and mask) it once.
        file_lines = functools.cache(self.service.file_lines)
        continued = continued_blocks(candidates, file_lines, cursor_path, tail,
                                     settings.continuation_lines, settings.continuation_min_similarity)
        if settings.clone_position >= 0:
            clone = strongest_clone(continued, file_lines, cursor_path, tail, settings.continuation_min_similarity)
            continued = with_clone_at(continued, clone, settings.clone_position)
        if stable_key is not None:
            self._continued[stable_key] = spans_of(candidates, continued)
        return continued

    def _scope_imports(self, request: CompletionRequest, context: CursorContext,
                       file_lines: list[str]) -> list[tuple[int, int]]:
        """Line spans of the cursor file's imports of repository code above the cursor (or above
        what the request may show), retrieval.scope_imports lines at most; [] when off or when the
        strategy's prompt is RepoCoder's or the paper's exactly."""
        limit = self.config.retrieval.scope_imports
        if limit <= 0 or not request.strategy.names_in_scope:
            return []
        language = language_named(context.language)
        if not language.import_prefixes:
            return []
        return self.service.repository_imports(request.cursor.path, file_lines, language.import_prefixes,
                                               request.cursor.line, limit)

    def _scope_signatures(self, cursor: Cursor, file_lines: list[str], scope: list[tuple[int, int]],
                          left_first_line: int) -> list[str]:
        """Signature lines for what the shown import statements bind (retrieval.scope_signatures)."""
        shown = "\n".join(line for start, end in scope for line in file_lines[start:end])
        visible = "\n".join(file_lines[left_first_line : cursor.line + 1])
        settings = self.config.retrieval
        return self.service.imported_signatures(cursor.path, shown, visible, settings.scope_signatures,
                                                settings.scope_signature_chars)

    def _generate(self, request: CompletionRequest, context: CursorContext, prompt: Prompt) -> Generation | Failure:
        stops = list(self.backend.template.stops)
        if not context.shape.multiline and context.shape.line_prefix.strip():
            stops.append("\n")
        return self.backend.generate(GenerationRequest(
            prompt=self.service.mask(prompt.text),  # the last gate before text leaves repomem
            max_tokens=request.max_new_tokens, stop=stops,
            deadline_s=self.config.completion.deadline_s, cancel=request.cancel, enough=request.enough,
        ))


def _scope_block(path: str, file_lines: list[str], spans: list[tuple[int, int]],
                 signatures: Sequence[str] = ()) -> ContextBlock:
    """The import statements (and the signatures of what they bind) as one block of the current
    file (its lines, not a window: id -1)."""
    imports = [line for start, end in spans for line in file_lines[start:end]]
    text = "\n".join([*imports, *dict.fromkeys(signatures)])  # each signature once
    first, end = (spans[0][0], spans[-1][1]) if spans else (0, 0)
    return ContextBlock(-1, path, first, end, text, float("inf"), summary=True)
