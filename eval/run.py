"""`repomem eval run`: RepoEval tasks through the same RepoService / CompletionEngine as the CLI and
the language server, one record per (task, strategy) appended to a JSONL results file.

Protocol (docs/design.md section 6): left context only, greedy decoding of up to 100 tokens, the prompt
never shows lines above `context_start_lineno`, and the leakage rule: a window of the hole's own
file is offered only if it ends at or before `context_start_lineno`.

As in an editor, the hole's file is indexed as it stands at the cursor: cut at the hole (an
unsaved-buffer overlay, per task; the index is rolled back to the repository's checkpoint after
each task, so a record does not depend on the tasks before it nor on `--workers`). Indexing the
whole file would leak the answer through the code graph even where no window is offered: the
hole's own call edge relates the lines above it to the very definition it calls.

Resumable: a record's key is (task, strategy, alpha, k, order, mode, backend); a rerun skips keys
already in the results file. Records are appended one whole line at a time and flushed, so Ctrl-C
or a kill loses at most the record being written (a torn last line is dropped on the next run).

Ctrl-C stops at once: the task in flight is abandoned, not waited for (an answer takes 10-20 s on
the CPU, and a server that hangs, its token counts included, held the run for their deadlines).
Every backend is stopped (`kill`: the embedded model's child is killed, a server's connections are
shut), which ends the calls waiting on it, and a worker still busy after INTERRUPT_JOIN_S is left
behind (only the main thread writes records, so nothing it does reaches the results).
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import hashlib
import json
import lzma
import os
import queue
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from repomem.backends.base import Backend
from repomem.backends.batching import BatchingBackend, supports_batches
from repomem.backends.memo import DEFERRED, DeferredRequests, GenerationStore, MemoBackend
from repomem.completion.engine import Completion, CompletionEngine
from repomem.completion.model_calls import ModelCall
from repomem.completion.prompt import Prompt
from repomem.completion.request import CompletionRequest
from repomem.completion.retrievers import RETRIEVERS, RetrievalFailed, RoundQuery
from repomem.config import Config, settings_digest, with_assignments, with_overrides
from repomem.evaluation.metrics import (
    definition_hit_rank,
    duplicate_block_tokens,
    edit_similarity,
    exact_match,
    has_enough_lines,
    line_hit_rank,
    names_the_call,
    near_line_hit,
    same_call,
)
from repomem.evaluation.tasks import EvalTask, typed_prefix
from repomem.failures import Failure, FailureKind
from repomem.positions import Cursor, read_text_file, text_before_cursor, uncompletable
from repomem.progress import NoProgress, Progress
from repomem.regular_files import cut_torn_tail
from repomem.retrieval.scoring import ScoredFragment
from repomem.service import RepoService
from repomem.strategies import BASELINE, EVAL_DEFAULT_STRATEGIES, STRATEGY_NAMES, strategy_named

RESULTS_VERSION = 1
# Consecutive failed tasks after which a run stops (a dead model server fails every task).
MAX_CONSECUTIVE_FAILURES = 3
# Seconds one generation may take in an evaluation. The interactive default (60 s) would cut
# predictions short on a loaded CPU and score the cut text; batch work waits instead.
EVAL_DEADLINE_S = 1800.0
# Seconds Ctrl-C waits for the workers once their backends are stopped (see the module's doc).
INTERRUPT_JOIN_S = 0.5


@dataclass(frozen=True)
class RunSettings:
    strategies: tuple[str, ...] = EVAL_DEFAULT_STRATEGIES
    alpha: float | None = None  # FragRel's alpha; None = the config's (0.5)
    k: int | None = None  # fragments retrieved; None = the config's (10)
    # "similarity": the most BM25-similar block last (RepoCoder's order; for FragRel, its anchored best
    # match nearest the code); "score": the best-scored block last; "stable": by path and line.
    order: str = "similarity"
    max_new_tokens: int = 100  # docs/design.md section 6
    max_prompt_tokens: int | None = None  # whole prompt (blocks get half); None = the config's (2048)
    retrieval_only: bool = False  # no model: retrieval metrics only
    # Build each task's prompt with the backend's tokenizer but run no model: retrieval and
    # prompt-level metrics (is the answer in the blocks that fit, how much of them repeats).
    prompt_only: bool = False
    # Config overrides as "section.key=value" (e.g. "relations.same_file_weight=1"): a named
    # configuration, recorded in every record and its resume key.
    overrides: tuple[str, ...] = ()
    # "word": the cursor after half of a name of the hole's first line (tasks.typed_prefix), as an
    # editor asks while a name is being typed; the prediction is the typed text and the answer.
    typing: str = ""
    # The code after the hole in the buffer and the prompt (fill in the middle), as an editor
    # completes a line written between others; RepoEval's protocol shows the left context only.
    right_context: bool = False

    @property
    def mode(self) -> str:
        return "retrieval" if self.retrieval_only else "prompt" if self.prompt_only else "model"

    @property
    def without_model(self) -> bool:
        return self.retrieval_only or self.prompt_only
    alphas: tuple[float, ...] = ()  # also FragRel at each of these alphas (a sweep; 0 = its levers, graph off)


@dataclass(frozen=True)
class Variant:
    """One way of answering a task: a strategy at an alpha."""

    strategy: str
    alpha: float


@dataclass(frozen=True)
class RunSummary:
    results: Path
    written: int  # records this run added
    skipped: int  # records already in the results file
    failed: int  # records holding an error
    reused: int  # generations answered from memory (RepoCoder's first round) or the generation store
    seconds: float
    interrupted: bool
    batch_sizes: tuple[int, ...] = ()  # generations per batch, when an in-process model batched them
    recalled: int = 0  # of `reused`, answered by the generation store (an earlier run's generation)
    deferred: int = 0  # records not written: their prompts went to the requests file (--defer)


def _fragrel_alpha(config: Config, settings: RunSettings) -> float:
    return config.retrieval.alpha if settings.alpha is None else settings.alpha


def evaluation_config(config: Config, settings: RunSettings) -> Config:
    """The protocol's choices (docs/design.md section 6) over the user's config."""
    return with_overrides(
        config,
        retrieval={"alpha": _fragrel_alpha(config, settings),
                   "top_k": config.retrieval.top_k if settings.k is None else settings.k},
        completion={
            # RepoEval's protocol is left to right; with the code after the hole (the editor's
            # protocol) the prompt fills in the middle as the user's setting says, as an editor's.
            "max_new_tokens": settings.max_new_tokens, "order": settings.order,
            "fill_in_middle": settings.right_context and config.completion.fill_in_middle,
            "max_prompt_tokens": settings.max_prompt_tokens or config.completion.max_prompt_tokens,
            "deadline_s": max(config.completion.deadline_s, EVAL_DEADLINE_S),
        },
    )


def retrieval_settings(settings: RunSettings) -> RunSettings:
    """`settings` as far as they shape a record: a retrieval-only record holds no prompt and no
    answer, so the block order and the prompt and answer budgets are left at their defaults (a
    second run with `--order score` wrote every record again, under another settings id, and the
    report then found no vanilla to set the others against)."""
    if not settings.retrieval_only:
        return settings
    default = RunSettings()
    return dataclasses.replace(settings, order=default.order, max_new_tokens=default.max_new_tokens,
                               max_prompt_tokens=default.max_prompt_tokens)


# Retrieval-only runs rank with one round of the sparse retriever: BM25 (alpha 0) and FragRel.
RETRIEVAL_ONLY_PLAIN = BASELINE
RETRIEVAL_ONLY_RELATED = "fragrel"


def run_variants(config: Config, settings: RunSettings) -> list[Variant]:
    alpha = _fragrel_alpha(config, settings)
    if settings.without_model:
        plain, related = RETRIEVAL_ONLY_PLAIN, RETRIEVAL_ONLY_RELATED
        variants = [Variant(plain, 0.0)] if plain in settings.strategies else []
        # FragRel at alpha 0 keeps its levers and ranks by BM25 alone: the graph's own share is
        # FragRel against it (issue 36), not against vanilla, which has none of the levers.
        for value in sorted({alpha if related in settings.strategies else None, *settings.alphas} - {None}):
            variants.append(Variant(related, float(value)))
        # Strategies that retrieve another way (the summary tree), and FragRel as published, are
        # measured as they are; those that ask the model while retrieving need one, so only
        # prompt-only runs (which load it) do.
        for name in settings.strategies:
            strategy = strategy_named(name)
            if strategy is not None and (strategy.retriever not in ("sparse", "none") or strategy.as_published) \
                    and strategy.rounds == 1 and (settings.prompt_only or not strategy.asks_model):
                variants.append(Variant(name, strategy.alpha(alpha)))
        return variants
    variants = [Variant(name, strategy_named(name).alpha(alpha)) for name in settings.strategies]
    # `--alphas` in a model run: fragrel at each further alpha, beside the strategies asked for.
    extra = sorted(set(settings.alphas) - {v.alpha for v in variants if v.strategy == RETRIEVAL_ONLY_RELATED})
    return variants + [Variant(RETRIEVAL_ONLY_RELATED, float(value)) for value in extra]


def comparable_record(record: dict[str, Any]) -> dict[str, Any]:
    """A record without what depends on the run rather than the task: wall times, the prompt
    tokens the server's cache held from whichever request it served before, and the answers'
    log-probabilities (a prompt evaluated from another cached prefix sums in other batches: the
    same greedy answer, its log-probability in the third decimal). The rest is the same for any
    order of tasks and any number of workers."""
    out = {k: v for k, v in record.items() if k not in ("timings_ms", "round_logprob")}
    if isinstance(out.get("tokens"), dict):
        out["tokens"] = {k: v for k, v in out["tokens"].items() if k != "cached"}
    return out


def settings_fingerprint(config: Config) -> str:
    """A short hash of every setting that shapes a record, defaults included: `config` in a record
    holds only the `--set` overrides, so without this a changed default (or repomem.toml) would
    resume into, and be reported with, records made under other settings."""
    return settings_digest(config, digest_size=4)


def record_key(record: dict[str, Any]) -> tuple:
    return (record["task_id"], record["strategy"], round(float(record["alpha"]), 6), record["k"], record["order"],
            record["mode"], record["backend"], record.get("prompt_tokens", 0), record.get("config", ""),
            record.get("settings", ""), record.get("typing", ""), record.get("task_digest", ""),
            record.get("right_context", False))


def task_digest(task: EvalTask) -> str:
    """Which task a record answers, beyond its id: tasks rebuilt into the same folder reuse their
    ids (`repo/split/k`), so a rerun resumed from records of another hole, with another ground
    truth, and reported them as new."""
    what = json.dumps([task.path, task.lineno, task.context_start_lineno, task.ground_truth])
    return hashlib.blake2b(what.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def _holds_ground_truth(file_lines: Sequence[str], task: EvalTask) -> bool:
    """Whether the file holds the task's ground truth at its hole: the ground truth's first line
    (stripped) ends one of the file's lines the ground truth spans from `lineno` on (a hole may
    start inside a line). A tasks file built from other versions of the repositories, or with its
    holes moved, was scored with the answer above the cursor or under it."""
    truth = [line.strip() for line in task.ground_truth.split("\n")]
    first = next((line for line in truth if line), "")
    spanned = file_lines[task.lineno:task.lineno + len(truth)]
    return not first or any(line.strip().endswith(first) for line in spanned)


def strategy_and_alpha(name: str) -> tuple[str, float | None]:
    """`fragrel@0.5` -> ("fragrel", 0.5), a bare name -> (name, None): how the scripts name one
    strategy of a run that swept alphas (`--alphas`). ValueError if the part after @ is no number."""
    strategy, at, alpha = name.partition("@")
    if not at:
        return strategy, None
    try:
        return strategy, float(alpha)
    except ValueError:
        raise ValueError(f"ALPHA must be a number, got {alpha!r}") from None


def records_named(records: list[dict[str, Any]], strategy: str, alpha: float | None = None) -> list[dict[str, Any]]:
    """The model records of `strategy` (at `alpha`; any alpha if None), failed ones left out. The
    slimmed copies in eval/results (records.jsonl.xz) carry no mode: they are model records."""
    return [r for r in records if r.get("mode", "model") == "model" and r["strategy"] == strategy
            and "error" not in r and (alpha is None or r.get("alpha") == alpha)]


def _real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# What readers of records take for granted: a line of the results version with a field missing or
# of another type (a hand-edited or merged file, another tool's records) ended `eval report` and a
# resumed `eval run` in an internal error (KeyError 'k', int('ten'), float(None)). Slimmed copies in
# eval/results keep fewer fields (no mode, no K, some no alpha): what is there must be well typed.
_TYPED_IF_GIVEN = {"task_id": str, "strategy": str, "split": str, "alpha": _real, "k": _whole, "order": str,
                   "mode": str, "backend": str, "prompt_tokens": _whole, "es": _real, "memory_calls": _real,
                   "error": str, "hit_rank": lambda value: value is None or _whole(value),
                   "timings_ms": lambda value: isinstance(value, dict) and all(map(_real, value.values()))}
# A record with a mode is tabled by split and alpha and resumed by its run's fields; a model record
# without K is a slimmed one, which says its verdict (`em`) and is given the run's fields where read.
_NEEDED_WITH_MODE = ("split", "alpha", "backend", "order")
_NEEDED_SLIMMED = ("split", "alpha", "em")


def _record_shape(record: dict[str, Any]) -> bool:
    """Whether a record holds what every reader of records takes for granted (see _TYPED_IF_GIVEN)."""
    def holds(name: str, kind: Any) -> bool:
        value = record[name]
        return isinstance(value, kind) if isinstance(kind, type) else kind(value)

    if not all(holds(name, kind) for name, kind in _TYPED_IF_GIVEN.items() if name in record):
        return False
    if "task_id" not in record or "strategy" not in record:
        return False
    if "mode" not in record:
        return True
    if "k" not in record and record["mode"] == "model":
        return all(name in record for name in _NEEDED_SLIMMED)
    return "k" in record and all(name in record for name in _NEEDED_WITH_MODE)


def read_results(path: Path) -> list[dict[str, Any]]:
    """Records of a results file, plain or xz-compressed (the slimmed copies in eval/results, which
    carry no version: a record there is one with a task and a strategy); a torn or foreign line,
    and a record missing a field it is grouped by or holding one of another type, is skipped."""
    if not path.is_file():
        return []
    records = []
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            version = record.get("version")
            if (version == RESULTS_VERSION or (version is None and {"task_id", "strategy"} <= record.keys())) \
                    and _record_shape(record):
                records.append(record)
    return records


def claim_results(results: Path) -> int | Failure:
    """A descriptor to append records to `results` (read and write, created if missing), held under
    an exclusive lock until it is closed, or why not.

    A results file must be a regular file or not exist: a named pipe there waited for a writer
    forever, `/proc/self/status` opened (as root) and failed at the first record. Two runs on one
    file each did every record (neither sees the other's until it is written): the second is
    refused (flock, released when the first one's descriptor closes, even when it is killed)."""
    refused = f"--results {results}"
    try:
        results.parent.mkdir(parents=True, exist_ok=True)
        # Non-blocking: a pipe opened for writing without a reader must not wait (nor fail) before fstat.
        descriptor = os.open(results, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as error:
        return Failure(FailureKind.WRITE_FAILED, f"{refused}: cannot write there ({error.strerror or error})")
    status = os.fstat(descriptor)
    problem = None
    if not stat.S_ISREG(status.st_mode):
        problem = f"{refused} is not a regular file (a results file must be a regular file or not exist)"
    elif not status.st_mode & 0o222:  # procfs and sysfs files: regular, mode 0444, and root still opens them
        problem = f"{refused} is read-only (a results file must be a regular file or not exist)"
    else:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            busy = error.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
            problem = (f"{refused} is being written by another `repomem eval run`; wait for it to finish or name "
                       "another results file" if busy else f"{refused}: cannot lock it ({error.strerror or error})")
    if problem is not None:
        os.close(descriptor)
        return Failure(FailureKind.BAD_OPTION, problem)
    os.set_blocking(descriptor, True)
    return descriptor


def leakage_exclusions(service: RepoService, path: str, context_start_lineno: int) -> np.ndarray:
    """Ids of the hole file's fragments that end after `context_start_lineno` (the leakage rule).

    With the file cut at the hole they hold only lines the prompt shows: never offered, but free
    to feed their neighbours' s_env as any visible code does. A symbolic link to the hole's file
    in the repository is indexed from the disk, answer and all: none of its windows is offered."""
    view = service.view()
    return np.union1d(view.fragments_ending_after(path, context_start_lineno),
                      np.asarray([i for alias in view.same_file_paths(path)
                                  for i in view.fragments_ending_after(alias, 0).tolist()], dtype=np.int64))


def resolve_task_file(repos_dir: Path, task: EvalTask) -> Path | Failure:
    """The task's file through every symbolic link, or why the task is refused. Task files come
    from elsewhere: a link in a cloned repository (or a repository folder that is a link) would
    have the run read a file outside --repos, send it to a model and index its folder."""
    top = repos_dir.resolve()
    repo_folder = repos_dir / task.repo
    named = f"{task.repo}/{task.path} ({task.task_id})"
    try:
        repo = repo_folder.resolve(strict=True)
        target = (repo_folder / task.path).resolve(strict=True)
    except FileNotFoundError:
        return Failure(FailureKind.MISSING_TASK_FILE, f"files missing under {repos_dir}, e.g. {named}")
    except (OSError, RuntimeError):  # a symbolic link loop (RuntimeError before Python 3.13)
        return Failure(FailureKind.TASK_OUTSIDE, f"files that are symbolic link loops, e.g. {named}")
    if repo == top or not repo.is_relative_to(top):
        return Failure(FailureKind.TASK_OUTSIDE, f"repository folders outside {repos_dir}, e.g. {named}: "
                                                 f"{task.repo} leads to {repo}")
    if not target.is_relative_to(repo):
        return Failure(FailureKind.TASK_OUTSIDE,
                       f"files outside their repository folder, e.g. {named} leads to {target}")
    if not target.is_file():
        return Failure(FailureKind.MISSING_TASK_FILE, f"files missing under {repos_dir}, e.g. {named} is not a file")
    return target


def line_count(text: str) -> int:
    """Lines as an editor shows them: a final newline does not start one more."""
    return text.count("\n") + (not text.endswith("\n"))


def task_cursor(root: Path, task: EvalTask, file_text: str, typed: str = "", right_context: bool = False) -> Cursor:
    """The cursor at the start of the hole, or after `typed` (the start of its first line), over
    the file cut there (nothing after it is visible), or with `right_context` over the file whose
    hole lines alone are taken out (`typed` on a line of their own; the code after them follows)."""
    lines = file_text.split("\n")
    hole_lines = len(task.ground_truth.rstrip("\n").split("\n"))
    after = lines[task.lineno + hole_lines:] if right_context else []
    return Cursor(root, task.path, task.lineno, len(typed), "\n".join([*lines[: task.lineno], typed, *after]))


def _right_context_fields(cursor: Cursor, prediction: str, prompt: Prompt) -> dict[str, Any]:
    """With the code after the hole: the suffix tokens the prompt showed, and whether the answer's
    first line is the next line below the hole (the model skipped the line to write; the
    completion shown is then empty)."""
    below = next((line for line in cursor.text.split("\n")[cursor.line + 1:] if line.strip()), None)
    first = next((line for line in prediction.split("\n") if line.strip()), "")
    return {"suffix_tokens": prompt.suffix_tokens,
            "next_line_echo": below is not None and first.rstrip() == below.rstrip()}


def _hit_ranks(service: RepoService, task: EvalTask, fragments: Sequence[ScoredFragment]) -> int | None:
    # The retrieval's top k only: a completion's candidates may go on with the clone search's.
    fragments = fragments[: service.config.retrieval.top_k]
    if task.definition is not None:
        return definition_hit_rank([(f.path, f.start_line, f.end_line) for f in fragments], task.definition)
    return line_hit_rank([service.view().fragment_text(f) for f in fragments], task.ground_truth)


def _model_call_fields(calls: Sequence[ModelCall]) -> dict[str, Any]:
    """A memory strategy's model calls while it retrieved: how many, and each prompt and answer."""
    return {"memory_calls": len(calls), "model_calls": [call.record() for call in calls]} if calls else {}


def _fragment_rows(fragments: Sequence[ScoredFragment]) -> list[list[Any]]:
    return [[f.path, f.start_line, f.end_line, round(f.s_ind, 4), round(f.s_env, 4), round(f.s_rel, 4)]
            for f in fragments]


class ServicePool:
    """RepoService copies per repository, shared by the evaluation workers.

    A task checks a copy out for its whole evaluation, so the buffer overlay of its file (cut at
    the hole) is seen by that task alone, and the copy is rolled back to the repository's checkpoint
    before it is checked in: every task sees the index `prepare` built plus its own overlay, so
    records do not depend on the order tasks ran in nor on the number of workers. A copy is opened
    only when every copy of its repository is busy.
    """

    def __init__(self, repos_dir: Path, config: Config, log: Callable[[str], None] = lambda message: None):
        self.repos_dir = repos_dir
        self.config = config
        self.log = log
        self._checkpoints: dict[str, bytes | Failure] = {}
        self._idle: dict[str, list[RepoService]] = {}
        self._lock = threading.Lock()
        self._preparing = threading.Lock()
        self.copies = 0  # services opened, every repository together

    def prepare(self, repo: str, progress: Progress | None = None, embed_windows: bool = False) -> None:
        """Build or update the repository's index on disk and keep its checkpoint (once, before
        workers start; a Failure is kept and becomes the error of that repository's tasks).
        `embed_windows` (strategy dense): every window embedded too, with progress."""
        with self._preparing:
            if repo not in self._checkpoints:
                self._prepare(repo, progress or NoProgress(), embed_windows)

    def _prepare(self, repo: str, progress: Progress, embed_windows: bool) -> None:
        opened = RepoService.open(self.repos_dir / repo, self.config)
        if isinstance(opened, Failure):
            self._checkpoints[repo] = opened
            return
        self.log(f"indexing {repo}")
        report = opened.ensure_index(progress)
        if isinstance(report, Failure):
            self._checkpoints[repo] = report
            return
        self.log(f"{repo}: {report.action}, {report.files} files, {report.fragments} fragments, "
                 f"{report.seconds:.1f} s")
        if embed_windows:
            # Otherwise the first dense task embedded them, minutes a repository under a task bar
            # standing still; the vectors are kept beside the index, where every copy finds them.
            embedded = opened.update_window_embeddings(progress)
            # A failure (no embedding model) stays the dense records' error; the other strategies run.
            self.log(f"{repo}: {embedded.message}" if isinstance(embedded, Failure)
                     else f"{repo}: {embedded} windows embedded")
        self._checkpoints[repo] = opened.checkpoint()
        self.checkin(repo, opened)
        self.copies += 1

    def checkout(self, repo: str) -> RepoService | Failure:
        self.prepare(repo)
        with self._lock:
            idle = self._idle.get(repo)
            if idle:
                return idle.pop()
            self.copies += 1
        checkpoint = self._checkpoints[repo]
        if isinstance(checkpoint, Failure):
            return checkpoint
        opened = RepoService.open(self.repos_dir / repo, self.config)
        if isinstance(opened, Failure):
            return opened
        opened.rollback(checkpoint)
        return opened

    def checkin(self, repo: str, service: RepoService) -> None:
        """Take a copy back, rolled back to the repository's checkpoint."""
        checkpoint = self._checkpoints[repo]
        assert not isinstance(checkpoint, Failure)
        service.rollback(checkpoint)
        with self._lock:
            self._idle.setdefault(repo, []).append(service)


class Evaluator:
    """Runs tasks of one repositories folder with one backend; services come from a pool, so
    several evaluators (one per worker thread) can share it."""

    def __init__(self, repos_dir: Path, config: Config, settings: RunSettings, backend: Backend | None,
                 log: Callable[[str], None] = lambda message: None, pool: ServicePool | None = None,
                 cancel: Callable[[], bool] | None = None, store: GenerationStore | None = None,
                 deferred: DeferredRequests | None = None):
        self.repos_dir = repos_dir
        self.config = evaluation_config(config, settings)
        self.settings = settings
        self.settings_id = settings_fingerprint(evaluation_config(config, retrieval_settings(settings)))
        self.backend = MemoBackend(backend, store, deferred) if backend is not None else None
        self.log = log
        self.pool = pool or ServicePool(repos_dir, self.config, log)
        self.cancel = cancel
        self._texts: dict[tuple[str, str], str] = {}

    @property
    def backend_name(self) -> str:
        return self.backend.name if self.backend is not None and self.settings.mode == "model" else ""

    def check(self, tasks: Sequence[EvalTask]) -> None | Failure:
        """Before any work starts: every task's repository folder lies under --repos, its file lies
        inside that folder (symbolic links followed) and holds the hole's line. A run with a task
        that breaks this is refused whole, one line counting the tasks of the first kind found:
        a task file that does not match its repositories is not worth half a run."""
        if not self.repos_dir.is_dir():
            return Failure(FailureKind.MISSING_REPOS,
                           f"{self.repos_dir}: no such folder (--repos names the folder holding "
                           "one folder per repository)")
        refused: dict[FailureKind, list[Failure]] = {}
        # Per resolved file, its lines and their count as an editor shows them; None: unreadable,
        # left to the task's record.
        lines: dict[Path, tuple[list[str], int] | None] = {}
        for task in tasks:
            target = resolve_task_file(self.repos_dir, task)
            if isinstance(target, Failure):
                refused.setdefault(target.kind, []).append(target)
                continue
            if target not in lines:
                text = read_text_file(target)
                lines[target] = None if isinstance(text, Failure) else (text.split("\n"), line_count(text))
            file_lines, count = lines[target] or (None, None)
            if count is not None and task.lineno >= count:
                refused.setdefault(FailureKind.TASK_PAST_END, []).append(Failure(
                    FailureKind.TASK_PAST_END, f"a line past the end of their file, e.g. {task.repo}/{task.path} "
                                               f"({task.task_id}): line {task.lineno + 1} of {count}"))
            elif file_lines is not None and not _holds_ground_truth(file_lines, task):
                refused.setdefault(FailureKind.TASK_NOT_IN_FILE, []).append(Failure(
                    FailureKind.TASK_NOT_IN_FILE, f"a hole whose ground truth is not what their file holds there, "
                                                  f"e.g. {task.repo}/{task.path} ({task.task_id}): line "
                                                  f"{task.lineno + 1} is {file_lines[task.lineno].strip()[:60]!r}"))
        for kind in (FailureKind.TASK_OUTSIDE, FailureKind.MISSING_TASK_FILE, FailureKind.TASK_PAST_END,
                     FailureKind.TASK_NOT_IN_FILE):
            if kind in refused:
                failures = refused[kind]
                return dataclasses.replace(failures[0], message=f"{len(failures)} of {len(tasks)} tasks name "
                                                                f"{failures[0].message}")
        return None

    def _file_text(self, service: RepoService, task: EvalTask) -> str | Failure:
        key = (task.repo, task.path)
        if key not in self._texts:
            text = read_text_file(service.root / task.path)
            if isinstance(text, Failure):
                return text
            self._texts = {key: text}  # tasks come grouped by file often enough; keep one
        return self._texts[key]

    def _base_record(self, task: EvalTask, variant: Variant) -> dict[str, Any]:
        return {
            "version": RESULTS_VERSION, "task_id": task.task_id, "split": task.split, "repo": task.repo,
            "path": task.path,
            "strategy": variant.strategy, "alpha": variant.alpha, "k": self.config.retrieval.top_k,
            "order": self.settings.order if not self.settings.retrieval_only else "",
            "mode": self.settings.mode, "backend": self.backend_name,
            "prompt_tokens": 0 if self.settings.retrieval_only else self.config.completion.max_prompt_tokens,
            "config": ",".join(self.settings.overrides), "settings": self.settings_id,
            "ground_truth": task.ground_truth, "task_digest": task_digest(task),
            **({"typing": self.settings.typing, "typed": typed_prefix(task)} if self.settings.typing else {}),
            **({"right_context": True} if self.settings.right_context else {}),
        }

    def evaluate(self, task: EvalTask, variants: Sequence[Variant]) -> list[dict[str, Any]]:
        """Records of one task, one per variant (errors are records too)."""
        if self.backend is not None:
            self.backend.forget(task.task_id)
        service = self.pool.checkout(task.repo)
        if isinstance(service, Failure):
            return [{**self._base_record(task, v), "error": service.message} for v in variants]
        try:
            return self._evaluate(service, task, variants)
        finally:
            self.pool.checkin(task.repo, service)

    def _evaluate(self, service: RepoService, task: EvalTask, variants: Sequence[Variant]) -> list[dict[str, Any]]:
        text = self._file_text(service, task)
        # A huge, minified or binary file is no cursor's file (positions.uncompletable)
        problem = text if isinstance(text, Failure) else uncompletable(task.path, text, self.config.scan)
        if problem is not None:
            return [{**self._base_record(task, v), "error": problem.message} for v in variants]
        assert service.index_loaded
        typed = typed_prefix(task) if self.settings.typing else ""
        cursor = task_cursor(service.root, task, text, typed, self.settings.right_context)
        cut = service.set_buffer(task.path, cursor.text)
        if isinstance(cut, Failure) and cut.kind != FailureKind.NOT_INDEXED:
            return [{**self._base_record(task, v), "error": cut.message} for v in variants]
        # With the code after the hole the buffer holds everything but the answer: an editor offers
        # any of its windows, and none of them can hold the hole's lines.
        leak = np.zeros(0, dtype=np.int64) if self.settings.right_context \
            else leakage_exclusions(service, task.path, task.context_start_lineno)
        out = []
        for variant in variants:
            record = self._base_record(task, variant)
            if self.settings.retrieval_only:
                record.update(self._retrieval_only(service, task, cursor, leak, variant))
            elif self.settings.prompt_only:
                record.update(self._prompt_only(service, task, cursor, leak, variant))
            else:
                record.update(self._with_model(service, task, cursor, leak, variant, typed))
            out.append(record)
        return out  # the pool rolls the service back (buffer and all) when it is checked in

    def _retrieval_only(self, service: RepoService, task: EvalTask, cursor: Cursor, leak: np.ndarray,
                        variant: Variant) -> dict[str, Any]:
        started = time.perf_counter()
        strategy = strategy_named(variant.strategy)
        if strategy is not None and strategy.retriever not in ("sparse", "none"):
            query, _ = text_before_cursor(cursor, service.config.retrieval.query_lines)
            try:
                fragments = RETRIEVERS[strategy.retriever](service.view(self.config),
                                                           RoundQuery(cursor, query, variant.alpha, None, leak))
            except RetrievalFailed as error:
                return {"error": error.failure.message, "error_kind": error.failure.kind}
        else:
            anchored = 0 if strategy is not None and strategy.as_published else None
            fragments = service.view().retrieve_at(cursor, alpha=variant.alpha, unlisted=leak,
                                                   anchored=anchored).fragments
        elapsed = (time.perf_counter() - started) * 1000
        return {"hit_rank": _hit_ranks(service, task, fragments), "fragments": _fragment_rows(fragments),
                "timings_ms": {"retrieve": round(elapsed, 3)}}

    def _engine_request(self, engine: CompletionEngine, task: EvalTask, cursor: Cursor, leak: np.ndarray,
                        variant: Variant, **choices):
        # completion.fill_in_middle: off under RepoEval's protocol, the user's with the code after
        # the hole (evaluation_config).
        return engine.request(cursor, variant.strategy, order=self.settings.order,
                              use_suffix=self.config.completion.fill_in_middle,
                              max_new_tokens=self.settings.max_new_tokens, unlisted=leak, alpha=variant.alpha,
                              visible_from=task.context_start_lineno, cancel=self.cancel, **choices)

    def _prompt_only(self, service: RepoService, task: EvalTask, cursor: Cursor, leak: np.ndarray,
                     variant: Variant) -> dict[str, Any]:
        assert self.backend is not None
        engine = CompletionEngine(service, self.backend, self.config)
        request = self._engine_request(engine, task, cursor, leak, variant)
        prepared = request if isinstance(request, Failure) else engine.prepare(request)
        if isinstance(prepared, Failure):
            return {"error": prepared.message, "error_kind": prepared.kind}
        strategy = strategy_named(variant.strategy)
        return {
            "hit_rank": _hit_ranks(service, task, prepared.fragments) if strategy.retrieves else None,
            "fragments": _fragment_rows(prepared.fragments),
            **self._prompt_fields(service, task, cursor, prepared.fragments, prepared.prompt, strategy.retrieves),
            **_model_call_fields(prepared.model_calls),
            "timings_ms": {name: round(value, 3) for name, value in prepared.timings_ms.items()},
            # No answer to echo the line below, but the prompt's share of the code after the hole
            # is known without one (a model record says it too).
            **({"suffix_tokens": prepared.prompt.suffix_tokens} if self.settings.right_context else {}),
        }

    def _prompt_fields(self, service: RepoService, task: EvalTask, cursor: Cursor,
                       fragments: Sequence[ScoredFragment], prompt: Prompt, retrieves: bool) -> dict[str, Any]:
        """What the model is shown: whether the answer is in the blocks that fit the prompt, and how
        many block tokens repeat the visible file or another block."""
        assert self.backend is not None
        in_prompt = prompt.fragment_ids
        used = [f for f in fragments if f.fragment in in_prompt]
        texts = [b.text for b in prompt.blocks]
        window_texts = [b.text for b in prompt.blocks if not b.summary]  # not the names in scope
        visible = "\n".join(cursor.text.split("\n")[prompt.left_first_line : cursor.line + 1])
        duplicated, total = duplicate_block_tokens(texts, visible, self._line_tokens)
        fields: dict[str, Any] = {
            # The blocks' own lines for a line task (a block may show more or other lines than its
            # window: packing, continuation); the called definition's span for an API task.
            "prompt_hit": (line_hit_rank(window_texts, task.ground_truth) if task.definition is None
                           else _hit_ranks(service, task, used)) is not None if retrieves else None,
            "prompt_blocks": len(prompt.blocks), "prompt_first_line": prompt.left_first_line,
            # 0-based positions in `fragments` of those whose lines reached the prompt
            "in_prompt": [rank for rank, f in enumerate(fragments) if f.fragment in in_prompt],
            "block_tokens": prompt.block_tokens, "duplicate_block_tokens": duplicated,
            "block_line_tokens": total,
            # The prompt's identity: two runs (two commits, two machines) built the same prompt
            # for the task when these agree (the first 16 hex digits of its SHA-256).
            "prompt_sha256": hashlib.sha256(prompt.text.encode("utf-8")).hexdigest()[:16],
        }
        # A block line within ES 0.9 of the answer's first line: what a small model copies (for an API
        # task, another call of the same function with the same arguments).
        fields["prompt_near_hit"] = near_line_hit(texts, task.ground_truth) if retrieves else None
        if task.definition is not None and task.definition.name:
            # The called name anywhere in the prompt (blocks or the visible file): the embedded model
            # got no API task right without it on the dev set (docs/eval-history.md).
            fields["prompt_name_hit"] = names_the_call(prompt.text, task.definition.name)
        return fields

    def _line_tokens(self, line: str) -> int:
        assert self.backend is not None
        counted = self.backend.count(line)
        return counted if isinstance(counted, int) else 0

    def _with_model(self, service: RepoService, task: EvalTask, cursor: Cursor, leak: np.ndarray,
                    variant: Variant, typed: str = "") -> dict[str, Any]:
        assert self.backend is not None
        engine = CompletionEngine(service, self.backend, self.config)  # fresh: no memory across tasks
        request = self._engine_request(engine, task, cursor, leak, variant, enough=has_enough_lines(task.ground_truth))
        deferred_before = self.backend.deferred_requests
        result = request if isinstance(request, Failure) else engine.run(request)
        if isinstance(result, Failure):
            if result.kind == DEFERRED and not isinstance(request, Failure):
                self._defer_second_opinion(engine, request)
            return {"error": result.message, "error_kind": result.kind}
        if self.backend.deferred_requests > deferred_before:
            # A later generation (a follow-up round, a second opinion) was written out: the engine
            # showed the answer it had, but the direct run's answer needs that one too. The replay
            # writes the record.
            return {"error": "a generation of this task was deferred", "error_kind": DEFERRED}
        return self._model_fields(service, task, cursor, result, typed)

    @staticmethod
    def _defer_second_opinion(engine: CompletionEngine, request: CompletionRequest) -> None:
        """`--defer`: the task's prompt was written out, not answered. The second opinion's prompt
        (PromptLever.second_opinion) does not depend on that answer, only whether it is asked does
        (an answer with a confidence, as the answering GPU backends report), so it is written out
        too, and one pass of answering completes the task."""
        other = engine.second_opinion_strategy(request)
        if other is not None:
            engine.run(dataclasses.replace(request, strategy=strategy_named(other)))

    def _model_fields(self, service: RepoService, task: EvalTask, cursor: Cursor, result: Completion,
                      typed: str = "") -> dict[str, Any]:
        prediction = typed + result.raw  # the line as it stands once the completion is taken
        prompt = result.prompt
        timings = {name: round(value, 3) for name, value in result.timings_ms.items()}
        timings["total"] = round(sum(result.timings_ms.values()), 3)
        retrieves = strategy_named(result.strategy).retrieves
        return {
            "prediction": prediction, "completion": result.text,
            "em": exact_match(prediction, task.ground_truth), "es": edit_similarity(prediction, task.ground_truth),
            # Every round's exact match and mean log-probability per token, first round first
            # (RepoCoder's oracle is the best of them; the report chooses by confidence from them
            # whatever completion.round_choice showed), and the round shown.
            "round_em": [exact_match(typed + a.raw, task.ground_truth) for a in result.round_answers]
            if result.round_answers else [exact_match(prediction, task.ground_truth)],
            "round_logprob": [a.mean_logprob for a in result.round_answers]
            if result.round_answers else [result.generation.mean_logprob],
            "chosen_round": result.chosen_round,
            **({"call_match": same_call(prediction, task.ground_truth)} if task.definition is not None else {}),
            "hit_rank": _hit_ranks(service, task, result.fragments) if retrieves else None,
            "fragments": _fragment_rows(result.fragments), "rounds": result.rounds,
            **self._prompt_fields(service, task, cursor, result.fragments, prompt, retrieves),
            "tokens": {"prompt": result.generation.prompt_tokens, "cached": result.generation.cached_tokens,
                       "blocks": prompt.block_tokens, "left": prompt.left_tokens,
                       "generated": result.generation.completion_tokens},
            "finish_reason": result.generation.finish_reason, "timings_ms": timings,
            **_model_call_fields(result.model_calls),
            **(_right_context_fields(cursor, prediction, prompt) if self.settings.right_context else {}),
        }


def run_evaluation(
    tasks: Sequence[EvalTask],
    repos_dir: Path,
    results: Path,
    settings: RunSettings,
    *,
    config: Config | None = None,
    backends: Sequence[Backend] = (),
    workers: int = 1,
    progress: Progress | None = None,
    log: Callable[[str], None] = lambda message: None,
    generations: Path | None = None,
    defer: Path | None = None,
) -> RunSummary | Failure:
    """Evaluate `tasks` with every variant of `settings`, appending records to `results`.

    `workers` threads evaluate tasks at once; worker i generates through `backends[i % len]` (several
    servers of one model), and an in-process backend that batches (transformers, vLLM) gathers the
    workers' requests into batches. Records are written in task order whatever `workers` is.
    `generations`: a JSONL generation store shared with earlier and later runs (see
    repomem.backends.memo.GenerationStore); a prompt it already answered for the task costs nothing.
    `defer`: every prompt the store cannot answer is written to this JSONL file instead of generated
    (its records are not written), for a GPU machine to answer into the store
    (scripts/answer_requests.py); the same run again with the store then writes every record.
    """
    started = time.perf_counter()
    progress = progress or NoProgress()
    if not settings.retrieval_only and not backends:
        return Failure(FailureKind.NO_BACKEND, "a model run needs a backend (or use --retrieval-only)")
    if workers < 1:
        return Failure(FailureKind.BAD_OPTION, "--workers must be at least 1")
    models = sorted({b.name for b in backends})
    if len(models) > 1:
        return Failure(FailureKind.MIXED_MODELS, f"the endpoints serve different models ({', '.join(models)}); one run "
                                                 "evaluates one model")
    unknown = [s for s in settings.strategies if strategy_named(s) is None]
    if unknown:
        return Failure(FailureKind.BAD_STRATEGY,
                       f"unknown strategy {unknown[0]!r}; choose from {', '.join(STRATEGY_NAMES)}")
    config, problems = with_assignments(config or Config(), settings.overrides)
    if problems:
        return Failure(FailureKind.BAD_OPTION, f"--set: {problems[0].render(outcome=False)}")
    existed = results.exists()
    claimed = claim_results(results)
    if isinstance(claimed, Failure):
        return claimed
    with os.fdopen(claimed, "a", encoding="utf-8") as handle:  # the lock lasts as long as the descriptor
        summary = _run_claimed(tasks, repos_dir, results, handle, settings, config, backends, workers, progress,
                               log, generations, defer, started)
        if isinstance(summary, Failure) and not existed and os.fstat(handle.fileno()).st_size == 0:
            # Claiming created the file; a run refused before its first record (tasks leaving
            # --repos, say) leaves nothing behind. A second run is refused by the lock, not waiting.
            results.unlink(missing_ok=True)
        return summary


def _run_claimed(tasks: Sequence[EvalTask], repos_dir: Path, results: Path, handle: TextIO, settings: RunSettings,
                 config: Config, backends: Sequence[Backend], workers: int, progress: Progress,
                 log: Callable[[str], None], generations: Path | None, defer: Path | None,
                 started: float) -> RunSummary | Failure:
    """run_evaluation once `results` is this run's (`handle`, locked, appends to it)."""
    stop = threading.Event()
    # A batch never waits for more requests than there are workers to send them.
    batchers = [BatchingBackend(b, max_batch=min(config.model.batch_size, workers),
                                gather_s=config.model.batch_gather_ms / 1000)
                if workers > 1 and supports_batches(b) else None for b in backends]
    shared = [batcher or backend for batcher, backend in zip(batchers, backends)]
    store = None
    if generations is not None and not settings.without_model:
        store = GenerationStore.open(generations)
        if isinstance(store, Failure):
            return store
    deferred = None
    if defer is not None and not settings.without_model:
        deferred = DeferredRequests.open(defer)
        if isinstance(deferred, Failure):
            return deferred
    pool = ServicePool(repos_dir, evaluation_config(config, settings), log)
    evaluators = [Evaluator(repos_dir, config, settings, shared[i % len(shared)] if shared else None, log, pool,
                            stop.is_set, store, deferred) for i in range(workers)]
    try:
        summary = _run(tasks, results, handle, settings, evaluators, pool, progress, stop, started,
                       lambda: stop_at_once(backends))
    finally:
        if store is not None:
            store.close()
        if deferred is not None:
            deferred.close()
        for batcher in batchers:
            if batcher is not None:
                batcher.stop()
    if isinstance(summary, Failure):
        return summary
    return dataclasses.replace(summary, batch_sizes=tuple(n for b in batchers if b is not None for n in b.batch_sizes))


def stop_at_once(backends: Sequence[Backend]) -> None:
    """Ctrl-C: end every call waiting on `backends` now (those that can: the embedded model's child
    is killed, a server's connections shut); the process is exiting."""
    for backend in backends:
        kill = getattr(backend, "kill", None)
        if kill is not None:
            kill()


def _run(tasks: Sequence[EvalTask], results: Path, handle: TextIO, settings: RunSettings, evaluators: list[Evaluator],
         pool: ServicePool, progress: Progress, stop: threading.Event, started: float,
         stop_backends: Callable[[], None] = lambda: None) -> RunSummary | Failure:
    first = evaluators[0]
    problem = first.check(tasks)
    if problem is not None:
        return problem
    variants = run_variants(first.config, settings)
    if not variants:
        return Failure(FailureKind.BAD_STRATEGY,
                       f"retrieval-only runs compare {RETRIEVAL_ONLY_PLAIN}, "
                       f"{RETRIEVAL_ONLY_RELATED} and strategies with their own retriever (hat); "
                       "name at least one")
    # A failed record is tried again (the newest record of a task wins where records are read); a
    # record written before records carried their task's digest stands for its task id as it did.
    done = {record_key(r) for r in read_results(results) if "error" not in r}
    pending: list[tuple[EvalTask, list[Variant]]] = []
    skipped = 0
    for task in tasks:  # in the caller's order: select_tasks interleaves splits and repositories
        todo = [v for v in variants if record_key(base := first._base_record(task, v)) not in done
                and record_key({**base, "task_digest": ""}) not in done]
        skipped += len(variants) - len(todo)
        if todo:
            pending.append((task, todo))
    embed_windows = any(strategy_named(v.strategy).embeds_windows for _, todo in pending for v in todo)
    for repo in dict.fromkeys(task.repo for task, _ in pending):
        # Indexes are built here, once, before any worker runs (a Failure is a task error).
        pool.prepare(repo, progress, embed_windows)
    cut_torn_tail(handle.fileno())
    written = failed = consecutive = deferred = 0
    interrupted = False
    jobs: queue.SimpleQueue[tuple[int, EvalTask, list[Variant]]] = queue.SimpleQueue()
    for position, (task, todo) in enumerate(pending):
        jobs.put((position, task, todo))
    finished: queue.SimpleQueue[tuple[int, list[dict[str, Any]] | BaseException]] = queue.SimpleQueue()

    def work(evaluator: Evaluator) -> None:
        while not stop.is_set():
            try:
                position, task, todo = jobs.get_nowait()
            except queue.Empty:
                return
            try:
                finished.put((position, evaluator.evaluate(task, todo)))
            except BaseException as error:  # handed to the writer, which raises it  # noqa: BLE001
                finished.put((position, error))
                return

    threads = [threading.Thread(target=work, args=(e,), name=f"eval-worker-{i}", daemon=True)
               for i, e in enumerate(evaluators[: max(1, min(len(evaluators), len(pending)))])]
    for thread in threads:
        thread.start()
    progress.start("tasks", sum(len(todo) for _, todo in pending))
    held: dict[int, list[dict[str, Any]]] = {}  # finished out of order, written once their turn comes
    next_position = 0
    try:
        while next_position < len(pending):
            try:
                position, outcome = finished.get(timeout=0.2)  # a timeout lets Ctrl-C through
            except queue.Empty:
                if not any(thread.is_alive() for thread in threads) and finished.empty():
                    break
                continue
            if isinstance(outcome, BaseException):
                raise outcome
            held[position] = outcome
            while next_position in held:
                records = held.pop(next_position)
                next_position += 1
                progress.advance(len(records))
                # A record whose prompt was deferred is written by the run that replays it.
                kept = [r for r in records if r.get("error_kind") != DEFERRED]
                deferred += len(records) - len(kept)
                records = kept
                if not records:
                    continue
                for record in records:
                    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                handle.flush()
                written += len(records)
                errors = [r for r in records if "error" in r]
                failed += len(errors)
                consecutive = consecutive + 1 if errors and len(errors) == len(records) else 0
                if consecutive >= MAX_CONSECUTIVE_FAILURES:
                    return Failure(FailureKind.RUN_FAILING,
                                   f"{consecutive} tasks in a row failed, stopping: "
                                   f"{errors[-1]['error']} (finished results are kept in {results})")
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
        stop_backends()  # the calls in flight end now, abandoned (see the module's doc)
    finally:
        stop.set()  # workers take no new task; generations in flight end at their next token
        until = time.monotonic() + INTERRUPT_JOIN_S
        for thread in threads:
            thread.join(max(until - time.monotonic(), 0) if interrupted else None)
    reused = sum(e.backend.reused for e in evaluators if e.backend is not None)
    recalled = sum(e.backend.recalled for e in evaluators if e.backend is not None)
    return RunSummary(results, written, skipped, failed, reused, time.perf_counter() - started, interrupted,
                      recalled=recalled, deferred=deferred)
