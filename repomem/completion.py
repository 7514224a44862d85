"""Completion strategies over one RepoService and one backend.

- infile: the current file only.
- vanilla: BM25 retrieval (alpha = 0), RepoCoder's sparse retriever.
- fragrel: FragRel retrieval (alpha from the config, eq. 10).
- repocoder / repocoder+fragrel: two rounds; the second queries with the last lines before the
  cursor plus the first round's draft (RepoCoder's iterative retrieval), BM25 or FragRel.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from repomem.backends.base import Backend, Generation, GenerationRequest
from repomem.config import STRATEGIES, CompletionConfig, Config
from repomem.failures import Failure
from repomem.positions import Cursor, text_before_cursor
from repomem.postprocess import CompletionShape, clean_completion, completion_shape
from repomem.progress import Progress
from repomem.prompt import ContextBlock, Prompt, PromptBudget, build_prompt
from repomem.scoring import ScoredFragment
from repomem.service import RepoService



@dataclass(frozen=True)
class Completion:
    text: str  # what the user sees
    raw: str  # the model's continuation before post-processing
    strategy: str
    prompt: Prompt
    fragments: tuple[ScoredFragment, ...]  # retrieved (final round), best first
    generation: Generation
    shape: CompletionShape
    rounds: int
    timings_ms: dict[str, float]


class _CountFailed(Exception):
    def __init__(self, failure: Failure):
        super().__init__(failure.message)
        self.failure = failure


class _Counter:
    """The backend's tokenizer as prompt.Tokenizer; a failing count aborts the prompt build."""

    def __init__(self, backend: Backend):
        self._backend = backend

    def count(self, text: str) -> int:
        value = self._backend.count(text)
        if isinstance(value, Failure):
            raise _CountFailed(value)
        return value


def open_backend(config: CompletionConfig, progress: Progress | None = None, model_path: str = "",
                 endpoint: str = "", api_key: str = "") -> Backend | Failure:
    """The configured backend: an endpoint, a GGUF path, or the default model (pulled if needed)."""
    endpoint = endpoint or config.endpoint
    if endpoint:
        from repomem.backends.openai_http import OpenAIBackend

        return OpenAIBackend.connect(endpoint, api_key=api_key, deadline_s=min(config.deadline_s, 15.0),
                                     context_tokens=config.context_tokens)
    from repomem.backends.llama import LlamaBackend
    from repomem.models import pull_default_model

    path = model_path or config.model_path
    if path:
        return LlamaBackend.open(Path(path).expanduser(), config.context_tokens, config.threads)
    pulled = pull_default_model(progress=progress)
    if isinstance(pulled, Failure):
        return pulled
    return LlamaBackend.open(pulled, config.context_tokens, config.threads)


_DEFINITION = re.compile(r"^(\s*)(async\s+def|def|class)\s")
STABLE_MEMO_SIZE = 64


def enclosing_definition(lines: list[str], line: int) -> int:
    """0-based line of the innermost def / class above `line` that contains it (-1 at module level)."""
    current = lines[line] if line < len(lines) else ""
    indent = len(current) - len(current.lstrip()) if current.strip() else None
    for number in range(line, -1, -1):
        match = _DEFINITION.match(lines[number])
        if match is None:
            continue
        if indent is None or len(match.group(1)) < indent or number == line:
            return number
    return -1


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
        self._counter = _Counter(backend)
        self._stable: OrderedDict[tuple[str, int], list[ScoredFragment]] = OrderedDict()
        self._first_lines: dict[tuple[str, int], int] = {}  # where the function's last prompt began

    def complete(
        self,
        cursor: Cursor,
        strategy: str | None = None,
        *,
        order: str | None = None,
        use_suffix: bool | None = None,
        max_new_tokens: int | None = None,
        cancel: Callable[[], bool] | None = None,
        excluded: np.ndarray | None = None,
        alpha: float | None = None,
        visible_from: int = 0,
        unlisted: np.ndarray | None = None,
        enough: Callable[[str], bool] | None = None,
    ) -> Completion | Failure:
        """Complete at `cursor` with `strategy`.

        `excluded`: fragment ids retrieval must neither offer nor read (text the user cannot see,
        e.g. the lines after a RepoEval hole); `unlisted`: ids it must not offer but may read as
        neighbours (the RepoEval leakage rule on windows holding only lines above the hole).
        `visible_from`: 0-based first line of the current file the prompt may show (RepoEval's
        context_start_lineno). `enough`: ends generation early (see GenerationRequest).
        """
        settings = self.config.completion
        strategy = strategy or settings.strategy
        if strategy not in STRATEGIES:
            return Failure("bad-strategy", f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
        order = order or settings.order
        use_suffix = settings.fill_in_middle if use_suffix is None else use_suffix
        max_new_tokens = max_new_tokens or settings.max_new_tokens
        lines = cursor.text.split("\n")
        current = lines[cursor.line] if cursor.line < len(lines) else ""
        visible_from = min(max(visible_from, 0), cursor.line)
        left_lines = [*lines[visible_from : cursor.line], current[: cursor.column]]
        # Token healing: BPE vocabularies glue a space to the next word (" compute"), so a prompt
        # ending in "return " steers the model off its usual tokens. The space goes back to the
        # model, and is taken off the start of what it writes.
        healed = ""
        line_prefix = left_lines[-1]
        if line_prefix.strip() and line_prefix != line_prefix.rstrip(" "):
            healed = line_prefix[len(line_prefix.rstrip(" ")):]
            left_lines[-1] = line_prefix.rstrip(" ")
        after = "\n".join([current[cursor.column :], *lines[cursor.line + 1 :]])
        suffix = after if use_suffix and after.strip() and self.backend.template.supports_fim else None
        shape = completion_shape("\n".join(left_lines), after)
        if strategy in ("fragrel", "repocoder+fragrel"):
            alpha = self.config.retrieval.alpha if alpha is None else alpha
        else:
            alpha = 0.0
        timings: dict[str, float] = {"retrieve": 0.0, "prompt": 0.0, "generate": 0.0}
        query, _ = text_before_cursor(cursor, self.config.retrieval.query_lines)
        rounds = 2 if strategy.startswith("repocoder") else 1
        result: Completion | Failure | None = None
        draft = ""
        for round_number in range(rounds):
            if round_number == 1:
                # RepoCoder: the query window slides over the draft: last lines before the cursor + draft.
                query_lines = (query + draft).split("\n")
                query = "\n".join(query_lines[-self.config.retrieval.query_lines :])
            result = self._one_round(cursor, strategy, query, alpha, left_lines, suffix, shape, order,
                                     max_new_tokens, cancel, excluded, timings, round_number + 1, healed,
                                     visible_from, enough, unlisted)
            if isinstance(result, Failure) or result.generation.finish_reason == "cancelled":
                return result
            draft = result.raw if shape.multiline else result.text
        assert result is not None
        return result

    def _one_round(
        self, cursor: Cursor, strategy: str, query: str, alpha: float, left_lines: list[str], suffix: str | None,
        shape: CompletionShape, order: str, max_new_tokens: int, cancel: Callable[[], bool] | None,
        excluded: np.ndarray | None, timings: dict[str, float], rounds: int, healed: str = "",
        visible_from: int = 0, enough: Callable[[str], bool] | None = None,
        unlisted: np.ndarray | None = None,
    ) -> Completion | Failure:
        settings = self.config.completion
        started = time.perf_counter()
        fragments: list[ScoredFragment] = []
        index = self.service.index
        if strategy != "infile" and index is not None:
            memo_key = None
            if order == "stable" and rounds == 1:
                memo_key = (cursor.path, enclosing_definition(cursor.text.split("\n"), cursor.line))
                remembered = self._stable.get(memo_key)
                if remembered is not None and all(f.fragment < index.n_fragments and index.live[f.fragment]
                                                  for f in remembered):
                    fragments = remembered
                    self._stable.move_to_end(memo_key)
            if not fragments:
                hidden, unseen = self.service.cursor_masks(cursor, excluded, unlisted)
                fragments = self.service.retrieve(query, alpha=alpha, excluded=hidden, unlisted=unseen)
                if memo_key is not None:
                    self._stable[memo_key] = fragments
                    while len(self._stable) > STABLE_MEMO_SIZE:
                        dropped, _ = self._stable.popitem(last=False)
                        self._first_lines.pop(dropped, None)
        candidates = [
            ContextBlock(f.fragment, f.path, f.start_line, f.end_line, self.service.fragment_text(f), f.s_rel)
            for f in fragments
        ]
        timings["retrieve"] += (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        budget = PromptBudget(settings.max_prompt_tokens, settings.context_share, settings.max_suffix_tokens)
        suffix_lines = 0 if suffix is None else suffix.count("\n") + 1
        stable_key = None
        if order == "stable":
            stable_key = (cursor.path, enclosing_definition(cursor.text.split("\n"), cursor.line))
        hint = self._first_lines.get(stable_key) if stable_key else None
        if hint is not None:
            hint = hint - visible_from if hint >= visible_from else None
        try:
            while True:
                prompt = build_prompt(
                    left_lines=left_lines, suffix=suffix, candidates=candidates, tokenizer=self._counter,
                    template=self.backend.template, budget=budget, order=order, style=settings.style,
                    repo=self.service.root.name, path=cursor.path,
                    first_line_hint=hint,
                )
                if isinstance(prompt, Failure):
                    return prompt
                # build_prompt counts lines of `left_lines`; the rest of the engine uses file lines.
                prompt = dataclasses.replace(prompt, left_first_line=prompt.left_first_line + visible_from)
                # Blocks repeating what the prompt already shows of the current file are dropped.
                visible = (prompt.left_first_line, cursor.line + suffix_lines)
                duplicates = {b.fragment for b in prompt.blocks
                              if b.path == cursor.path and b.start_line <= visible[1] and b.end_line > visible[0]}
                if not duplicates:
                    break
                candidates = [c for c in candidates if c.fragment not in duplicates]
        except _CountFailed as error:
            return error.failure
        if stable_key is not None:
            self._first_lines[stable_key] = prompt.left_first_line
        timings["prompt"] += (time.perf_counter() - started) * 1000
        template = self.backend.template
        stops = list(template.stops)
        if not shape.multiline and shape.line_prefix.strip():
            stops.append("\n")
        generation = self.backend.generate(GenerationRequest(
            prompt=prompt.text, max_tokens=max_new_tokens, stop=stops, deadline_s=settings.deadline_s, cancel=cancel,
            enough=enough,
        ))
        if isinstance(generation, Failure):
            return generation
        timings["generate"] += generation.seconds * 1000
        raw = generation.text
        if healed:
            raw = raw[len(healed):] if raw.startswith(healed) else raw.lstrip(" ")
        text = clean_completion(raw, shape, template.sentinels, suffix or "", settings.max_lines)
        return Completion(
            text=text, raw=raw, strategy=strategy, prompt=prompt, fragments=tuple(fragments),
            generation=generation, shape=shape, rounds=rounds, timings_ms=dict(timings),
        )
