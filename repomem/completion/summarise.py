"""Writing model summaries of a repository into its index (`repomem summarise`, issue 14).

What is summarised: every file (from its extractive summary: path, docstring, signatures) and,
with `kinds` including "pages", every ReadAgent page (from its text). Each unit is keyed by the
hash of what the model reads, so a unit already written by the same model is skipped: an
interrupted run resumes where it stopped, and after edits only what changed is summarised again.

The cost is said before the work starts: units to write, their prompt tokens (counted with the
backend's tokenizer) and the time measured on two calibration calls (`plan`); `run` then writes
one summary per call, durably, with progress.

A server that fails (an HTTP error after its retries, a timeout, an answer that is no completion)
is said before anything is asked of the user: a calibration call that fails so ends `plan` with
that failure, and `run` stops after FAILURES_IN_A_ROW failures in a row instead of paying the
retries of every unit left. A failure of one unit (its prompt past the window, an empty answer) is
counted and the run goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from repomem.backends.base import Backend, GenerationRequest
from repomem.failures import Failure, FailureKind
from repomem.memory.summary_tree import summary_key
from repomem.memory.written_summaries import WrittenSummaries
from repomem.progress import NoProgress, Progress
from repomem.repo_view import RepoView

SUMMARY_KINDS = ("files", "pages")
PAGE_QUESTION_LINES = 80  # lines of a page shown to the model at most
# Failures in a row after which `run` stops: the server is failing, not one unit.
FAILURES_IN_A_ROW = 3
# Failures of one unit, not of the server: the others may still be written.
UNIT_FAILURES = frozenset({FailureKind.EMPTY_SUMMARY, FailureKind.PROMPT_TOO_LONG})


@dataclass(frozen=True)
class Unit:
    kind: str  # "file" | "page"
    key: str
    label: str  # "pkg/m.py" or "pkg/m.py:40-79"
    question: str


@dataclass(frozen=True)
class Plan:
    units: tuple[Unit, ...]  # to write
    already: int  # units this model has written before (skipped)
    prompt_tokens: int  # of every unit to write, counted by the backend
    seconds_per_call: float  # mean of the two calibration calls (0 when nothing to write)
    estimated_s: float


def _file_question(extractive: str) -> str:
    return ("Below are the path, docstring and definitions of a source file.\n" + extractive +
            "\nIn one sentence, what does this file provide? Do not repeat the path.")


def _page_question(path: str, text: str) -> str:
    return (f"Below is part of the source file {path}.\n```\n{text}\n```\n"
            "In one sentence, what does this code do? Name its main functions or classes.")


def units_of(view: RepoView, kinds: tuple[str, ...]) -> list[Unit]:
    """Every unit of the repository, files first, in path order."""
    assert view.index_loaded, "call ensure_index first"
    out: list[Unit] = []
    paths = sorted(f.path for f in view.indexed_files())
    if "files" in kinds:
        for path, extractive in view.memories.file_summaries():
            out.append(Unit("file", summary_key(extractive), path, _file_question(extractive)))
    if "pages" in kinds:
        memory = view.memories.gist_memory()
        for path in paths:
            for page in memory.pages_of(path):
                text = view.span_text(path, page.start_line, min(page.end_line,
                                                                    page.start_line + PAGE_QUESTION_LINES))
                out.append(Unit("page", page.digest, f"{path}:{page.start_line + 1}-{page.end_line}",
                                _page_question(path, text)))
    return out


def live_keys(view: RepoView) -> set[str]:
    """The keys of every unit of every kind the repository has now (what a written summary must
    match to be shown): the summaries of other keys are of text that is gone."""
    assert view.index_loaded, "call ensure_index first"
    keys = {summary_key(extractive) for _, extractive in view.memories.file_summaries()}
    memory = view.memories.gist_memory()
    for indexed in view.indexed_files():
        keys.update(page.digest for page in memory.pages_of(indexed.path))
    return keys


def ask_summary(backend: Backend, mask: Callable[[str], str], unit: Unit, max_tokens: int,
                deadline_s: float) -> str | Failure:
    answer = backend.generate(GenerationRequest(
        prompt=mask(backend.template.instruction(unit.question)), max_tokens=max_tokens,
        stop=[*backend.template.stops, "\n\n"], deadline_s=deadline_s,
    ))
    if isinstance(answer, Failure):
        return answer
    text = " ".join(answer.text.split())
    return text or Failure(FailureKind.EMPTY_SUMMARY, f"the model wrote nothing for {unit.label}")


def plan(view: RepoView, backend: Backend, store: WrittenSummaries, kinds: tuple[str, ...],
         limit: int | None, progress: Progress | None = None) -> tuple[Plan, dict[str, str]] | Failure:
    """What `run` would do and cost. Two real calls, on the shortest and the longest prompt,
    measure the time of a call as a line in its prompt tokens (a fixed part for the answer, a
    part per prompt token); their summaries (key -> text) are returned for `run` to keep. A
    calibration call the server failed (not UNIT_FAILURES) is returned instead: no estimate.

    Those two summaries are written only by the run that follows in the same process, after
    --yes or a "y": a user reads --dry-run ("write nothing") and a "N" as nothing written, so they
    are not written then, nor kept in a second file for the next run (one more place whose
    summaries would have to follow the repository's edits; the next run measures two calls again)."""
    progress = progress or NoProgress()
    # One unit a key: identical pages (vendored or copied files) are one summary, written once.
    every = list({u.key: u for u in units_of(view, kinds)}.values())
    todo = [u for u in every if not store.has(backend.name, u.key)]
    already = len(every) - len(todo)
    if limit is not None:
        todo = todo[:limit]
    progress.start("counting", len(todo))
    tokens: list[int] = []
    counts = True  # a server that cannot count one prompt is not asked again (its retries, each unit)
    for unit in todo:
        counted = backend.count(view.mask(backend.template.instruction(unit.question))) if counts else None
        counts = isinstance(counted, int)
        tokens.append(counted if isinstance(counted, int) else len(unit.question) // 3)
        progress.advance()
    if not todo:
        return Plan((), already, 0, 0.0, 0.0), {}
    ends = sorted({min(range(len(todo)), key=tokens.__getitem__), max(range(len(todo)), key=tokens.__getitem__)})
    measured: list[tuple[int, float]] = []
    answers: dict[str, str] = {}
    for position in ends:
        started = time.perf_counter()
        text = ask_summary(backend, view.mask, todo[position], view.config.memory.summary_tokens,
                           view.config.completion.deadline_s)
        measured.append((tokens[position], time.perf_counter() - started))
        if isinstance(text, str):
            answers[todo[position].key] = text
        elif text.kind not in UNIT_FAILURES:
            return text
    (low_tokens, low_s), (high_tokens, high_s) = measured[0], measured[-1]
    per_token = max(0.0, (high_s - low_s) / (high_tokens - low_tokens)) if high_tokens > low_tokens else 0.0
    fixed = max(0.0, low_s - per_token * low_tokens)
    estimated = sum(fixed + per_token * n for n in tokens)
    return Plan(tuple(todo), already, sum(tokens), sum(s for _, s in measured) / len(measured), estimated), answers


@dataclass(frozen=True)
class SummariseReport:
    written: int
    failed: int
    seconds: float
    failure: Failure | None = None  # the first of the server's, else the first of a unit's
    not_tried: int = 0  # units left when FAILURES_IN_A_ROW failures stopped the run


def run(view: RepoView, backend: Backend, store: WrittenSummaries, work: Plan, answered: dict[str, str],
        progress: Progress | None = None) -> SummariseReport:
    """Write the plan's summaries, each appended durably as soon as the model answers (the
    calibration calls' `answered` ones without asking again); stop after FAILURES_IN_A_ROW
    failures of the server in a row."""
    progress = progress or NoProgress()
    progress.start("summarise", len(work.units))
    started = time.perf_counter()
    written = failed = in_a_row = 0
    shown: Failure | None = None
    # The calibration calls' answers first: a run that stops early has them written all the same.
    units = sorted(work.units, key=lambda unit: unit.key not in answered)
    for number, unit in enumerate(units, start=1):
        text = answered.get(unit.key) or ask_summary(
            backend, view.mask, unit, view.config.memory.summary_tokens, view.config.completion.deadline_s)
        progress.advance()
        if isinstance(text, str):
            store.append(unit.key, unit.kind, backend.name, text)
            written += 1
            in_a_row = 0
            continue
        failed += 1
        if shown is None or (shown.kind in UNIT_FAILURES and text.kind not in UNIT_FAILURES):
            shown = text
        in_a_row = 0 if text.kind in UNIT_FAILURES else in_a_row + 1
        if in_a_row >= FAILURES_IN_A_ROW and number < len(units):
            return SummariseReport(written, failed, time.perf_counter() - started, shown, len(units) - number)
    return SummariseReport(written, failed, time.perf_counter() - started, shown)
