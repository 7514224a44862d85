"""A backend wrapper that answers a request it has seen before from memory.

The evaluator runs every strategy on one task in turn: RepoCoder's first round is exactly the
vanilla (or FragRel) completion, same prompt, same decoding, so it is generated once. Greedy
decoding makes the remembered answer the one a second call would give. The memory is cleared
between tasks (`forget`), which also keeps the `enough` predicate of one task from serving another.

A `GenerationStore` keeps answers across runs in one JSONL file (`eval run --generations`): two
configurations that build the same prompt for a task (most tasks, for a lever that changes a few
prompts) then cost one generation, which on a CPU is what decides how many tasks a comparison can
afford. Its key is the task (its `enough` predicate), the model, the prompt as sent, the token cap
and the stop strings.

`DeferredRequests` is the other half of generating elsewhere (`eval run --defer`): a prompt the
store cannot answer is written out, with its key, instead of generated, so a GPU machine can answer
every prompt of a run in large batches (scripts/answer_requests.py) without the repositories, and a
second run replays them all from the store.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import IO

from repomem.backends.base import Backend, Generation, GenerationRequest, constrains_start
from repomem.failures import Failure, FailureKind
from repomem.regular_files import drop_torn_tail

_KEPT = ("stop", "length")  # finish reasons worth keeping: a cut or cancelled answer is not the answer


class GenerationStore:
    """Greedy answers by (task, model, prompt, cap, stops), in memory and appended to one JSONL file."""

    def __init__(self, path: Path, answers: dict[str, Generation], handle: IO[str]):
        self.path = path
        self._answers = answers
        self._handle = handle
        self._lock = threading.Lock()  # evaluator threads share one store

    @classmethod
    def open(cls, path: Path) -> GenerationStore | Failure:
        """Load the answers a file holds (a torn last line is dropped) and append to it from now on."""
        if path.exists() and not path.is_file():
            return Failure(FailureKind.BAD_OPTION, f"--generations {path}: not a file")
        answers: dict[str, Generation] = {}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_file():
                drop_torn_tail(path)
                with open(path, encoding="utf-8", errors="replace") as handle:
                    for line in handle:
                        entry = _parse(line)
                        if entry is not None:
                            answers[entry[0]] = entry[1]
            handle = open(path, "a", encoding="utf-8")
        except OSError as error:
            return Failure(FailureKind.BAD_OPTION, f"--generations {path}: {error.strerror or error}")
        return cls(path, answers, handle)

    def __len__(self) -> int:
        return len(self._answers)

    @staticmethod
    def key(scope: str, model: str, request: GenerationRequest) -> str:
        # A forced start joins the key only when there is one: every store written before it stays valid.
        forced = [request.forced_start] if request.forced_start else []
        payload = json.dumps([scope, model, request.prompt, request.max_tokens, list(request.stop), *forced])
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def get(self, key: str) -> Generation | None:
        with self._lock:
            return self._answers.get(key)

    def put(self, key: str, answer: Generation) -> None:
        if answer.finish_reason not in _KEPT:
            return
        line = json.dumps({"key": key, "text": answer.text, "prompt_tokens": answer.prompt_tokens,
                           "completion_tokens": answer.completion_tokens, "finish_reason": answer.finish_reason,
                           "seconds": round(answer.seconds, 3),
                           **({"mean_logprob": answer.mean_logprob} if answer.mean_logprob is not None else {})})
        with self._lock:
            self._answers[key] = answer
            self._handle.write(line + "\n")
            self._handle.flush()  # an interrupted run keeps every answer it paid for

    def close(self) -> None:
        with self._lock:
            self._handle.close()


def _parse(line: str) -> tuple[str, Generation] | None:
    try:
        entry = json.loads(line)
        tokens = int(entry["completion_tokens"])
        mean = entry.get("mean_logprob")
        total = entry.get("logprob")  # the sum, as the first stores with log-probabilities kept it
        if not isinstance(mean, int | float) and isinstance(total, int | float) and tokens > 0:
            mean = total / tokens
        return entry["key"], Generation(str(entry["text"]), int(entry["prompt_tokens"]), tokens, 0,
                                        str(entry["finish_reason"]), float(entry["seconds"]),
                                        float(mean) if isinstance(mean, int | float) else None)
    except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: nested past json's depth
        return None  # a foreign or damaged line costs one generation, nothing else


DEFERRED = FailureKind.DEFERRED  # a request written out instead of generated


class DeferredRequests:
    """Requests the store could not answer, appended to one JSONL file: the store's key, the task,
    and what a generator needs (prompt, token cap, stop strings, the line count that ends it, and
    the text the answer must start with, if any)."""

    def __init__(self, path: Path, handle: IO[str]):
        self.path = path
        self._handle = handle
        self._lock = threading.Lock()
        self._written: set[str] = set()  # one line per key, however many variants share a prompt
        self.count = 0

    @classmethod
    def open(cls, path: Path) -> DeferredRequests | Failure:
        if path.exists() and not path.is_file():
            return Failure(FailureKind.BAD_OPTION, f"--defer {path}: not a file")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return cls(path, open(path, "w", encoding="utf-8"))
        except OSError as error:
            return Failure(FailureKind.BAD_OPTION, f"--defer {path}: {error.strerror or error}")

    def put(self, key: str, scope: str, model: str, request: GenerationRequest) -> None:
        # The evaluator's `enough` predicate says how many lines end the answer (a callable cannot
        # travel): see repomem.evaluation.metrics.EnoughLines.
        lines = getattr(request.enough, "lines", None)
        entry = {"key": key, "task": scope, "model": model, "prompt": request.prompt,
                 "max_tokens": request.max_tokens, "stop": list(request.stop),
                 **({"enough_lines": lines} if isinstance(lines, int) else {}),
                 **({"forced_start": request.forced_start} if request.forced_start else {})}
        with self._lock:
            if key in self._written:
                return
            self._written.add(key)
            self.count += 1
            self._handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
            self._handle.flush()

    def close(self) -> None:
        with self._lock:
            self._handle.close()


class MemoBackend:
    def __init__(self, inner: Backend, store: GenerationStore | None = None,
                 deferred: DeferredRequests | None = None):
        self.inner = inner
        self.name = inner.name
        self.template = inner.template
        self.store = store
        self.deferred = deferred  # where a request the store cannot answer goes instead of the model
        self._answers: dict[tuple[str, int, tuple[str, ...], str], Generation] = {}
        self._scope = ""  # the task being evaluated: what the `enough` predicate depends on
        # A deferred request carries its forced start to the answering script (its backend must hold it).
        self.constrains_start = constrains_start(inner)
        # Requests written out since construction: a caller compares it before and after a task to
        # see whether any generation of it (a follow-up, a second opinion) is still to be answered.
        self.deferred_requests = 0
        self.reused = 0  # requests answered from memory or the store since construction
        self.recalled = 0  # of those, answered by the store (an earlier run)

    @property
    def context_tokens(self) -> int:
        """The inner backend's window, read at each use: a server may state it late (a refusal)."""
        return self.inner.context_tokens

    def count(self, text: str) -> int | Failure:
        return self.inner.count(text)

    def generate(self, request: GenerationRequest) -> Generation | Failure:
        key = (request.prompt, request.max_tokens, tuple(request.stop), request.forced_start)
        remembered = self._answers.get(key)
        if remembered is not None:
            self.reused += 1
            return remembered  # its own seconds: a strategy's latency is what it would have cost
        keyed = self.store is not None or self.deferred is not None
        stored_key = GenerationStore.key(self._scope, self.name, request) if keyed else ""
        stored = self.store.get(stored_key) if self.store is not None else None
        if stored is not None:
            self.reused += 1
            self.recalled += 1
            self._answers[key] = stored
            return stored
        if self.deferred is not None:
            self.deferred.put(stored_key, self._scope, self.name, request)
            self.deferred_requests += 1
            return Failure(FailureKind.DEFERRED,
                           "generation deferred: answer the requests file, then run again with the store")
        answer = self.inner.generate(request)
        if isinstance(answer, Generation) and answer.finish_reason not in ("cancelled", "deadline"):
            self._answers[key] = answer
            if self.store is not None:
                self.store.put(stored_key, answer)
        return answer

    def forget(self, scope: str = "") -> None:
        """Start a new task: `scope` names it (the store's answers are per task)."""
        self._answers.clear()
        self._scope = scope

    def close(self) -> None:
        self.inner.close()
