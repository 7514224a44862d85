"""Completion over one RepoService and one backend, as the strategy table (repomem.strategies) says.

A request goes through small steps: read the cursor once (`request.read_cursor`), then per round
retrieve (the strategy's retriever), fit the prompt into the token budget, generate and clean up.
RepoCoder's strategies run a second round whose query slides over the first round's draft.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from repomem.backends.base import (
    Backend,
    BackendTokenizer,
    Generation,
    GenerationRequest,
    TokenCountFailed,
    constrains_start,
)
from repomem.completion.levers import LEVERS
from repomem.completion.levers.base import LeverRound, Pins, PromptLever
from repomem.completion.line_below import ANSWERS_KEPT, AnsweredLine, answered_line, continued_prompt
from repomem.completion.model_calls import MemoryModel, ModelCall
from repomem.completion.postprocess import CompletionShape, clean_completion, completion_settled
from repomem.completion.prompt import BLOCK_WORDS, ContextBlock, Prompt, PromptBudget, build_prompt, frames_blocks
from repomem.completion.request import CompletionRequest, CursorContext, SecretAtCursor, read_cursor
from repomem.completion.retrievers import RETRIEVERS, RetrievalFailed, RoundQuery
from repomem.completion.rounds import RoundAnswer
from repomem.completion.warm_prefix import FunctionKey, PromptStart, WarmPrefix
from repomem.config import Config
from repomem.failures import Failure, FailureKind
from repomem.index.scan import secret_reason
from repomem.index.secrets import secret_file_reason
from repomem.languages.registry import line_comment_of
from repomem.positions import Cursor
from repomem.repo_view import RepoView, masked
from repomem.retrieval.scoring import ScoredFragment
from repomem.service import RepoService
from repomem.strategies import STRATEGY_NAMES, Strategy, strategy_named

# Tokens of a model's window kept free beside the prompt and the tokens to generate: a server
# may put a beginning-of-text token before the prompt, which the fit's count leaves out.
WINDOW_MARGIN_TOKENS = 8
# The smallest prompt a window must leave room for: the line at the cursor and a little above it.
MIN_PROMPT_TOKENS = 32


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
    # draft-signature round); `chosen_round` indexes the one shown (prompt.round_choice).
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


class CompletionEngine:
    """Completes cursors of one repository with one backend.

    With order "stable", the blocks are retrieved once per function (at the first completion in
    it) and reused, ordered by path and line, while the cursor stays in that function: every prompt
    then shares its whole block section, and the backend's prompt cache skips it
    (completion/warm_prefix.py).
    """

    def __init__(self, service: RepoService, backend: Backend, config: Config | None = None):
        self.service = service
        self.backend = backend
        self.config = config or service.config
        self._tokenizer = BackendTokenizer(backend, lambda text: masked(text, self.config.scan))
        # Order "stable": what each function's first completion chose (blocks, shown spans, first line).
        self._warm = WarmPrefix.new()
        # The last one-line answers, whose prompts the line below each continues (completion.continue_lines).
        self._answered: deque[AnsweredLine] = deque(maxlen=ANSWERS_KEPT)

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
        prefix_only: bool = False,
        written: Callable[[str], None] | None = None,
    ) -> CompletionRequest | Failure:
        """A request at `cursor`, every choice not given taken from the config."""
        settings = self.config.completion
        scan = self.config.scan
        reason = secret_reason(cursor.root, cursor.path, scan)
        if reason is None:
            held = secret_file_reason(cursor.text, scan.secret_min_length, scan.secret_min_entropy)
            reason = None if held is None else f"holds {held}"
        if reason is not None:
            return Failure(FailureKind.SECRET_FILE,
                           f"{cursor.path} {reason}: repomem never completes in it, nor sends its "
                           "text to a model")
        name = strategy or settings.strategy
        chosen = strategy_named(name)
        if chosen is None:
            return Failure(FailureKind.BAD_STRATEGY,
                           f"unknown strategy {name!r}; choose one of {', '.join(STRATEGY_NAMES)}")
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
            prefix_only=prefix_only, written=written,
        )

    def complete(self, cursor: Cursor, strategy: str | None = None, **choices) -> Completion | Failure:
        """Complete at `cursor`; `choices` as in `request`."""
        request = self.request(cursor, strategy, **choices)
        if isinstance(request, Failure):
            return request
        return self.run(request)

    def run(self, request: CompletionRequest) -> Completion | Failure:
        view = self.service.view(self.config)
        context = self._read_cursor(view, request)
        if isinstance(context, Failure):
            return context
        below = None
        if self.config.completion.continue_lines:
            below = continued_prompt(reversed(self._answered), request.cursor, context.healed,
                                     request.max_new_tokens, self.backend.context_tokens)
        if below is None:
            result = self._run(view, request, context)
        else:
            prompt, above = below
            result = self._round(view, request, context, context.query, 1,
                                 {"retrieve": 0.0, "prompt": 0.0, "generate": 0.0}, None,
                                 continued=PreparedPrompt(context, above.fragments, prompt))
        if self.config.completion.continue_lines and not isinstance(result, Failure) \
                and result.generation.finish_reason != "cancelled":
            generation = result.generation
            answered = answered_line(request.cursor, result.prompt, result.fragments, generation.text,
                                     context.healed, result.text, generation.prompt_tokens,
                                     generation.completion_tokens, 0 if below is None else below[1].continued + 1)
            if answered is not None:
                self._answered.append(answered)
        return result

    def answered_after(self, previous: CompletionEngine) -> None:
        """Take over `previous`'s last one-line answers (an engine made anew for the same model,
        after an index was installed or a setting changed): the line below an answer taken before
        still continues the prompt the model's cache holds."""
        self._answered.extend(previous._answered)

    def taken(self, cursor: Cursor, prepared: PreparedPrompt, text: str) -> None:
        """Remember `text` (one line) as the answer shown at `cursor` after `prepared`'s prompt and
        taken: what an evaluation replays (the file's real line, as if the model had written it), so
        that the line below continues it as it would in an editor (completion.continue_lines)."""
        answered = answered_line(cursor, prepared.prompt, prepared.fragments, prepared.context.healed + text,
                                 prepared.context.healed, text, prepared.prompt.n_tokens,
                                 self._tokenizer.count(prepared.context.healed + text), 0)
        if answered is not None:
            self._answered.append(answered)

    def continues(self, cursor: Cursor) -> bool:
        """Whether a completion at `cursor` would continue the prompt of an answer above it
        (completion.continue_lines) rather than build one: the language server asks before it
        speculates on the line below an accepted or shown answer, which is worth a few tokens, not
        a prompt."""
        if not self.config.completion.continue_lines or not self._answered:
            return False
        request = self.request(cursor)
        if isinstance(request, Failure):
            return False
        context = self._read_cursor(self.service.view(self.config), request)
        return not isinstance(context, Failure) and continued_prompt(
            reversed(self._answered), cursor, context.healed, request.max_new_tokens,
            self.backend.context_tokens) is not None

    def _run(self, view: RepoView, request: CompletionRequest, context: CursorContext) -> Completion | Failure:
        """A completion from prompts built for the cursor: the strategy's rounds, a lever's follow-up
        round, a second opinion."""
        timings: dict[str, float] = {"retrieve": 0.0, "prompt": 0.0, "generate": 0.0}
        query = context.query
        model = self._memory_model(view, request)
        rounds: list[Completion] = []
        for round_number in range(1, self._round_count(request.strategy) + 1):
            if rounds:
                # RepoCoder: the query window slides over the draft: last lines before the cursor + draft.
                draft = rounds[-1].raw if context.shape.multiline else rounds[-1].text
                query = "\n".join((context.query + draft).split("\n")[-self.config.retrieval.query_lines :])
            result = self._round(view, request, context, query, round_number, timings, model)
            if isinstance(result, Failure) or result.generation.finish_reason == "cancelled":
                return result
            rounds.append(result)
        # A lever may ask for one more generation after the draft (same query, same blocks, its
        # lines pinned); one that fails or is cut leaves the draft standing.
        draft = rounds[-1]
        _, follow = self._lever_round(view, request, context, draft.rounds + 1, model)
        pinned = next((lines for lever in follow
                       if (lines := lever.follow_up(draft.raw, draft.prompt, draft.generation.finish_reason))), ())
        if pinned:
            second = self._round(view, request, context, query, 2, timings, model, pinned_lines=tuple(pinned),
                                 fragments=draft.fragments)
            if not isinstance(second, Failure) and second.generation.finish_reason in ("stop", "length"):
                rounds.append(second)
        if len(rounds) == 1:
            return self._with_second_opinion(view, request, context, rounds[0], follow, timings)
        answers = tuple(RoundAnswer(r.raw, r.generation.mean_logprob) for r in rounds)
        chosen = next((shown for lever in follow if (shown := lever.shown_round(answers)) is not None),
                      len(answers) - 1)
        # The shown round's prompt, blocks and answer; the whole request's timings and round count.
        shown = dataclasses.replace(rounds[chosen], timings_ms=rounds[-1].timings_ms, rounds=rounds[-1].rounds,
                                    round_answers=answers, chosen_round=chosen)
        return self._with_second_opinion(view, request, context, shown, follow, timings)

    def _with_second_opinion(self, view: RepoView, request: CompletionRequest, context: CursorContext,
                             result: Completion, follow: Sequence[PromptLever],
                             timings: dict[str, float]) -> Completion:
        """Another strategy's answer (PromptLever.second_opinion), shown when the model is surer of
        it than of the answer chosen so far; recorded as one more round."""
        confidence = result.generation.mean_logprob
        shown = RoundAnswer(result.raw, confidence)
        other = next((name for lever in follow if (name := lever.second_opinion(shown))), None)
        if other is None or confidence is None:
            return result
        # The other strategy's prompt keeps no memory of the function (order "stable"): its start,
        # remembered, became the start the next main prompt aimed at (a file-only prompt starts far
        # higher), and the same completion asked again sent another prompt.
        other_request = dataclasses.replace(request, strategy=strategy_named(other),
                                            order="score" if request.order == "stable" else request.order)
        alone = self._round(view, other_request, context, context.query, 1, timings, None)
        if isinstance(alone, Failure) or alone.generation.finish_reason not in ("stop", "length") \
                or alone.generation.mean_logprob is None:
            return dataclasses.replace(result, timings_ms=dict(timings))  # what it cost, the answer as it was
        answers = (*(result.round_answers or (shown,)), RoundAnswer(alone.raw, alone.generation.mean_logprob))
        # The same answer: it stays with the prompt whose retrieved blocks explain it, whichever of
        # the two the model was surer of by a hair (a near tie that one llama.cpp build broke one
        # way and another the other).
        if alone.generation.mean_logprob > confidence and alone.raw != result.raw:
            return dataclasses.replace(alone, strategy=result.strategy, timings_ms=dict(timings),
                                       rounds=result.rounds + 1, round_answers=answers, chosen_round=len(answers) - 1)
        return dataclasses.replace(result, timings_ms=dict(timings), rounds=result.rounds + 1, round_answers=answers)

    def second_opinion_strategy(self, request: CompletionRequest) -> str | None:
        """The strategy whose answer the levers would generate as a second opinion for `request`
        once its answer has a confidence (None: none). Its prompt does not depend on that answer,
        so a caller that writes prompts out instead of answering them (`eval run --defer`) can
        write this one out in the same pass."""
        view = self.service.view(self.config)
        context = self._read_cursor(view, request)
        if isinstance(context, Failure):
            return None
        _, levers = self._lever_round(view, request, context, 2, self._memory_model(view, request))
        return next((name for lever in levers if (name := lever.second_opinion(RoundAnswer("", 0.0)))), None)

    def _round_count(self, strategy: Strategy) -> int:
        """Generation rounds: the strategy's own, or completion.iterative_rounds for an iterative one."""
        configured = self.config.completion.iterative_rounds
        return configured if strategy.rounds > 1 and configured > 0 else strategy.rounds

    def _memory_model(self, view: RepoView, request: CompletionRequest) -> MemoryModel | None:
        """The request's budgeted access to the model, for strategies that ask it while retrieving."""
        if not request.strategy.asks_model:
            return None
        return MemoryModel(self.backend, view.mask, self.config.memory.max_calls,
                           self.config.completion.deadline_s, request.cancel)

    # -- the steps of one round ----------------------------------------------------------------

    def prepare(self, request: CompletionRequest) -> PreparedPrompt | Failure:
        """The first round's prompt without running the model (prompt-level evaluation, explain)."""
        view = self.service.view(self.config)
        context = self._read_cursor(view, request)
        if isinstance(context, Failure):
            return context
        return self._prepare(view, request, context, context.query, 1, {"retrieve": 0.0, "prompt": 0.0},
                             self._memory_model(view, request))

    def _read_cursor(self, view: RepoView, request: CompletionRequest) -> CursorContext | Failure:
        try:
            return read_cursor(request, self.config.retrieval.query_lines, self.backend.template.supports_fim,
                               view.mask,
                               heal_words=self.config.completion.word_healing and constrains_start(self.backend))
        except SecretAtCursor as inside:
            return inside.failure

    def _lever_round(self, view: RepoView, request: CompletionRequest, context: CursorContext, round_number: int,
                     model: MemoryModel | None,
                     pinned_lines: tuple[str, ...] = ()) -> tuple[LeverRound, list[PromptLever]]:
        """What the levers see of a round, and the strategy's levers made for it."""
        levers: list[PromptLever] = []
        retrieve = RETRIEVERS[request.strategy.retriever]

        def retrieve_text(text: str) -> list[ScoredFragment]:
            # anchored 0 is the paper's ranking; a lever's `ranking` may ask for more.
            round_query = RoundQuery(request.cursor, text, request.alpha, request.excluded, request.unlisted,
                                     model, anchored=0)
            for lever in levers:
                round_query = lever.ranking(round_query)
            found = retrieve(view, round_query)
            for lever in levers:
                found = lever.found(text, found)
            return found

        lever_round = LeverRound(request, context, self.config, view, round_number,
                                 self._stable_key(request, context), self._warm.memory,
                                 list(context.file_lines),
                                 retrieve_text, pinned_lines)
        levers.extend(LEVERS[name](lever_round) for name in request.strategy.levers
                      if LEVERS[name].applies(self.config))
        return lever_round, levers

    def _prepare(self, view: RepoView, request: CompletionRequest, context: CursorContext, query: str,
                 round_number: int,
                 timings: dict[str, float], model: MemoryModel | None, pinned_lines: tuple[str, ...] = (),
                 fragments: Sequence[ScoredFragment] | None = None) -> PreparedPrompt | Failure:
        """`fragments`: the round's blocks when already known (a follow-up round keeps the draft's,
        which `--order stable` may have remembered rather than retrieved); `pinned_lines`: a
        follow-up round's lines (PromptLever.follow_up)."""
        lever_round, levers = self._lever_round(view, request, context, round_number, model, pinned_lines)
        started = time.perf_counter()
        try:
            fragments = list(fragments) if fragments is not None else self._fragments(lever_round, levers, query)
        except RetrievalFailed as error:
            return error.failure
        timings["retrieve"] += (time.perf_counter() - started) * 1000
        if model is not None:  # part of "retrieve": what the memory's own model calls cost
            timings["memory_model"] = sum(call.seconds for call in model.calls) * 1000
        started = time.perf_counter()
        prompt = self._fit_prompt(lever_round, levers, fragments)
        if isinstance(prompt, Failure):
            return prompt
        timings["prompt"] += (time.perf_counter() - started) * 1000
        return PreparedPrompt(context, tuple(fragments), prompt, tuple(model.calls) if model is not None else (),
                              dict(timings))

    def _round(self, view: RepoView, request: CompletionRequest, context: CursorContext, query: str, round_number: int,
               timings: dict[str, float], model: MemoryModel | None, pinned_lines: tuple[str, ...] = (),
               fragments: Sequence[ScoredFragment] | None = None,
               continued: PreparedPrompt | None = None) -> Completion | Failure:
        """`continued`: the round's prompt when already made (the line below an answer, line_below)."""
        prepared = continued or self._prepare(view, request, context, query, round_number, timings, model,
                                              pinned_lines, fragments)
        if isinstance(prepared, Failure):
            return prepared
        prompt = prepared.prompt
        window = self.backend.context_tokens
        generation = self._generate(view, request, context, prompt)
        if isinstance(generation, Failure) and generation.kind == FailureKind.PROMPT_TOO_LONG \
                and self.backend.context_tokens != window:
            # The server named its window in the refusal (it had not said it before): fitted to it
            # and asked once more, as every later prompt is fitted from the start.
            prepared = self._prepare(view, request, context, query, round_number, timings, model, pinned_lines,
                                     prepared.fragments)
            if isinstance(prepared, Failure):
                return prepared
            prompt = prepared.prompt
            generation = self._generate(view, request, context, prompt)
        if isinstance(generation, Failure):
            return generation
        timings["generate"] += generation.seconds * 1000
        raw = _without_healed(generation.text, context.healed)
        template = self.backend.template
        # Stopped by the token cap or the deadline, the answer's last line is cut off in its middle.
        capped = generation.finish_reason in ("length", "deadline")
        text = template.restored(clean_completion(raw, context.shape, template.sentinels, context.after,
                                                  self.config.completion.max_lines, capped=capped))
        if _continues_the_frame(text, prompt, context, request.cursor.path):
            text = ""  # nothing shown rather than the prompt's own frame around its blocks
        return Completion(
            text=text, raw=raw, strategy=request.strategy.name, prompt=prompt, fragments=prepared.fragments,
            generation=generation, shape=context.shape, rounds=round_number, timings_ms=dict(timings),
            model_calls=prepared.model_calls,
        )

    def _stable_key(self, request: CompletionRequest, context: CursorContext) -> FunctionKey | None:
        return WarmPrefix.key(request.order, request.cursor.path, context.definition_line, context.file_lines)

    def _fragments(self, lever_round: LeverRound, levers: Sequence[PromptLever], query: str) -> list[ScoredFragment]:
        """The round's fragments: remembered for the function (stable order, first round) or
        retrieved, with what the levers add to the candidates."""
        first_retrieval = lever_round.number == 1 and lever_round.request.strategy.retrieves
        memo_key = lever_round.stable_key if first_retrieval else None
        if memo_key is not None:
            remembered = self._warm.fragments(memo_key, lever_round.view.renewed_fragments)
            if remembered is not None:
                return remembered
        fragments = lever_round.retrieve(query)
        for lever in levers:
            fragments = lever.candidates(fragments)
        if memo_key is not None:
            self._warm.remember_fragments(memo_key, fragments)
        return fragments

    def _fit_prompt(self, lever_round: LeverRound, levers: Sequence[PromptLever],
                    fragments: list[ScoredFragment]) -> Prompt | Failure:
        """Blocks, the levers' pins and the current file within the token budget. The fit is redone
        while blocks repeat what the prompt already shows of the current file (they are dropped)
        or a lever's pins change with what the fit shows."""
        request, settings = lever_round.request, self.config.completion
        cursor = request.cursor
        candidates = [
            ContextBlock(f.fragment, f.path, f.start_line, f.end_line, lever_round.view.fragment_text(f), f.s_rel,
                         summary=f.text is not None, similarity=f.s_ind)
            for f in fragments
        ]
        for lever in levers:
            candidates = lever.blocks(candidates)
        select = next((chosen for lever in levers if (chosen := lever.selection()) is not None), None)
        room = self._window_room(lever_round.request)
        if isinstance(room, Failure):
            return room
        budget = PromptBudget(room, settings.context_share, settings.max_suffix_tokens)
        visible_from = min(max(request.visible_from, 0), cursor.line)
        start = self._warm.start(lever_round.stable_key, visible_from, budget.max_prompt_tokens)
        dropped: list[ContextBlock] = []
        try:
            prompt = self._settle_fit(lever_round, levers, candidates, select, budget, visible_from, start, dropped)
            restart = None
            if not isinstance(prompt, Failure) and start.aim is not None and prompt.left_first_line > start.aim:
                # The previous start no longer fits (the cursor moved down): fit afresh, so that
                # no block is dropped for lines this prompt does not show, nor an import left out
                # as shown by the discarded fit.
                restart = start.afresh()
            elif not isinstance(prompt, Failure) and start.aim is None \
                    and any(not _shows(prompt, cursor.line, block) for block in dropped):
                # A block dropped as shown by an earlier fit, whose file began higher than this
                # one's: the prompt shows neither it nor those lines (a function's best block left
                # out of its first completion, which the next keystroke's fit, starting the file
                # where this one does, kept: a warm completion read the prompt again from there).
                # Fitted as that next one fits.
                first = prompt.left_first_line
                restart = PromptStart(first, first - visible_from, start.headroom)
            if restart is not None:
                for lever in levers:
                    lever.restart_fit()
                prompt = self._settle_fit(lever_round, levers, candidates, select, budget, visible_from, restart)
        except TokenCountFailed as error:
            return error.failure
        if isinstance(prompt, Failure):
            return prompt
        self._warm.remember_start(lever_round.stable_key, prompt.left_first_line)
        return prompt

    def _window_room(self, request: CompletionRequest) -> int | Failure:
        """completion.max_prompt_tokens, within the model's window beside the tokens to generate
        (a server of 2,048 tokens refused every default prompt: 2,048 + 64 did not fit)."""
        wanted, window = self.config.completion.max_prompt_tokens, self.backend.context_tokens
        if window <= 0:  # a server that has not said its window: the setting as it is
            return wanted
        room = window - request.max_new_tokens - WINDOW_MARGIN_TOKENS
        if room < MIN_PROMPT_TOKENS:
            return Failure(FailureKind.PROMPT_TOO_LONG,
                           f"the model's window of {window} tokens leaves no room for a prompt beside "
                           f"{request.max_new_tokens} new tokens (completion.max_new_tokens)")
        return min(wanted, room)

    def _settle_fit(self, lever_round: LeverRound, levers: Sequence[PromptLever], candidates: list[ContextBlock],
                    select, budget: PromptBudget, visible_from: int, start: PromptStart,
                    dropped: list[ContextBlock] | None = None) -> Prompt | Failure:
        """build_prompt, redone until no block repeats what the prompt shows of the current file and
        no lever's pins change. `start.aim` (a file line): where the previous prompt of this function
        began its file; blocks that the file from there on would show count as shown while the fit
        settles, so that the same candidates settle on the same prompt as last time (a block that
        only the first fits' starts overlapped would otherwise push the start down each time, and
        a warm completion would evaluate the prompt again from that block on). `visible_from`: the
        first file line the prompt may show (left_lines[0]). `dropped` gathers the candidates
        dropped as shown."""
        request, context = lever_round.request, lever_round.context
        settings = self.config.completion
        cursor = request.cursor
        while True:
            pins = Pins(lines=list(lever_round.pinned_lines))
            for lever in levers:
                lever.pin(pins)
            lever_round.pins = pins
            pinned = pins.block(cursor.path, lever_round.file_lines)
            prompt = build_prompt(
                left_lines=context.left_lines, suffix=context.suffix, candidates=candidates,
                tokenizer=self._tokenizer, template=self.backend.template, budget=budget, order=request.order,
                style=request.strategy.prompt_style(settings.style), repo=lever_round.view.root.name,
                path=cursor.path, start=start,
                select=select, pinned=() if pinned is None else (pinned,),
                comment=line_comment_of(cursor.path),
            )
            if isinstance(prompt, Failure):
                return prompt
            # build_prompt counts lines of `left_lines`; the rest of the engine uses file lines.
            prompt = dataclasses.replace(prompt, left_first_line=prompt.left_first_line + visible_from)
            first_shown = prompt.left_first_line if start.aim is None else min(start.aim, prompt.left_first_line)
            duplicates = [b for b in prompt.blocks if b.path == cursor.path and not b.summary
                          and _shows(prompt, cursor.line, b, first_shown)]
            # A block is a candidate, or several merged (packing): each candidate it shows goes. A
            # round that takes none away ends the fit (it never would otherwise).
            shown_ids = {id(b) for b in duplicates}
            shown_fragments = {fragment for b in duplicates for fragment in b.fragments}
            kept = [c for c in candidates if id(c) not in shown_ids
                    and not (c.path == cursor.path and not c.summary and c.fragment in shown_fragments)]
            if dropped is not None:
                kept_ids = {id(c) for c in kept}
                dropped.extend(c for c in candidates if id(c) not in kept_ids)
            unsettled = len(kept) < len(candidates)
            candidates = kept
            for lever in levers:
                unsettled = lever.refit(prompt, unsettled) or unsettled
            if not unsettled:
                return prompt

    def _generate(self, view: RepoView, request: CompletionRequest, context: CursorContext,
                  prompt: Prompt) -> Generation | Failure:
        if not prompt.text:
            # Nothing before the cursor, nothing retrieved, no code after it shown (an empty file,
            # line 1 column 1 left to right): no token for the model to continue, and llama.cpp's
            # server answered an empty prompt with a broken stream (a misleading error, exit 2).
            return Generation(text="", prompt_tokens=0, completion_tokens=0, cached_tokens=0,
                              finish_reason="stop", seconds=0.0)
        stops = list(self.backend.template.stops)
        if not context.shape.multiline and context.shape.line_prefix.strip():
            stops.append("\n")
        enough = request.enough
        if enough is None:  # a user's completion: stop once the tokens to come would all be cut
            sentinels, suffix, max_lines = self.backend.template.sentinels, context.after, \
                self.config.completion.max_lines
            written = request.written

            def enough(text: str) -> bool:
                after_cursor = _without_healed(text, context.healed)
                if written is not None:
                    written(after_cursor)
                return completion_settled(after_cursor, context.shape, sentinels, suffix, max_lines)
        return self.backend.generate(GenerationRequest(
            prompt=view.mask(prompt.text),  # the last gate before text leaves repomem
            max_tokens=request.max_new_tokens, stop=stops,
            deadline_s=self.config.completion.deadline_s, cancel=request.cancel, enough=enough,
            forced_start=context.forced_start, prefix_only=request.prefix_only,
        ))


def _shows(prompt: Prompt, cursor_line: int, block: ContextBlock, first_line: int | None = None) -> bool:
    """Whether the prompt's part of the current file holds lines of `block`, a block of that file:
    from its first line (or `first_line`) to the last of the code after the cursor it kept (a block
    farther below is not shown, however long the file runs on; the suffix's first line is the
    cursor line's rest, so it shows suffix_lines - 1 lines below)."""
    first = prompt.left_first_line if first_line is None else first_line
    return block.start_line <= cursor_line + max(prompt.suffix_lines - 1, 0) and block.end_line > first


def _continues_the_frame(text: str, prompt: Prompt, context: CursorContext, path: str) -> bool:
    """Whether the completion's first line is a line of the frame around the prompt's blocks
    (prompt.frames_blocks) that the visible file does not itself have: the model wrote the frame
    on, not code."""
    first = next((line for line in text.split("\n") if line.strip()), "")
    comment = line_comment_of(path)
    # The line's own check first: it is false for nearly every answer, the prompt scan is not free.
    if not frames_blocks(first, comment) or not prompt.blocks or BLOCK_WORDS not in prompt.text:
        return False
    return not any(frames_blocks(line, comment) for line in context.left_lines)


def _without_healed(raw: str, healed: str) -> str:
    """The model's text after the cursor: what was taken off the cursor line (healed: trailing
    spaces, or a word being typed) and written back by the model is not part of the completion. A
    prefix of `raw` maps to a prefix of the result, so a completion settled on part of the text is
    settled on all of it."""
    if not healed:
        return raw
    if raw.startswith(healed):
        return raw[len(healed):]
    if healed.strip():
        return ""  # a forced start cut short (cancelled): nothing past the cursor yet
    return raw.lstrip(" ")
