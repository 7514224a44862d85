"""RepoEval tasks in the official format (RepoCoder, microsoft/CodeT), read into typed values.

One JSONL line per task: ``{"prompt": ..., "metadata": {"task_id", "ground_truth", "fpath_tuple",
"context_start_lineno", "lineno" (or RepoCoder's "line_no"), ...}}``. ``fpath_tuple`` is the repository
name followed by the path parts of the file. Lines are 0-based: the hole starts at ``lineno`` and the
prompt shows lines ``[context_start_lineno, lineno)``. Tasks built by ``repomem eval build`` also carry
``split`` and, for API tasks, the ``definition`` the hole calls (for definition recall).

A task file comes from elsewhere and names paths: each part of ``fpath_tuple`` must be a plain
name (no ``..``, ``.``, separator, empty part, NUL or non-UTF-8 name), so the repository is a folder
right under ``--repos`` and the file lies inside it. A file breaking the rule is refused whole
(exit 2, its line named), as a malformed line is: nothing is read, indexed or sent before that.
Links are checked where they are followed, when a run starts (``run.resolve_task_file``).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from array import array
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeVar

from repomem.failures import Failure, FailureKind
from repomem.index.scan import is_text_name
from repomem.regular_files import open_regular

SPLITS = ("line", "api", "function")
T = TypeVar("T")


@dataclass(frozen=True)
class TaskDefinition:
    """Where the function or class an API hole calls is defined."""

    path: str  # repository-relative, POSIX
    line: int  # 0-based line of the def / class statement
    name: str


@dataclass(frozen=True)
class EvalTask:
    task_id: str
    split: str  # "line" | "api" | "function"
    repo: str  # folder name under the repositories folder
    path: str  # file of the hole, repository-relative, POSIX
    prompt: str  # lines [context_start_lineno, lineno) of the file
    ground_truth: str
    context_start_lineno: int  # 0-based
    lineno: int  # 0-based first line of the hole
    definition: TaskDefinition | None = None


# A name long enough to be typed halfway (`validated_value = se|`): an editor's completion after a
# partly typed word, which RepoEval's cursors at a line start never ask for.
_TYPED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")


def typed_prefix(task: EvalTask) -> str:
    """The hole's first line up to the middle of one of its names of four or more characters,
    chosen by the task id (the same cut in every run), at least two of its letters typed; "" when
    the line has none (a closing bracket, `x = 1`): then the cursor stays at the line start."""
    line = task.ground_truth.split("\n")[0]
    names = [match for match in _TYPED_NAME.finditer(line) if match.start() >= len(line) - len(line.lstrip())]
    if not names:
        return ""
    chosen = names[int(hashlib.sha256(task.task_id.encode("utf-8")).hexdigest(), 16) % len(names)]
    return line[: chosen.start() + (len(chosen.group()) + 1) // 2]


def split_of(file_name: str) -> str:
    """The split an official file name implies ("line_level_completion_2k_...": line)."""
    lowered = file_name.lower()
    for split in SPLITS:
        if lowered.startswith(split) or f"{split}_level" in lowered:
            return split
    return "line"


def _plain_name(part: str) -> bool:
    """One folder or file name that stays where it is put: no `..`, `.`, separator or NUL."""
    return part not in ("", ".", "..") and not any(char in part for char in "/\\\0") and is_text_name(part)


def _whole_number(value: object) -> bool:
    """An int that is not a bool (JSON's `true` reads as a bool, which Python counts as an int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _task_from(record: object, default_split: str) -> EvalTask:
    if not isinstance(record, dict) or not isinstance(record.get("metadata"), dict):
        raise ValueError("expected an object with 'prompt' and 'metadata'")
    meta = record["metadata"]
    lineno = meta.get("lineno", meta.get("line_no"))
    fpath = meta.get("fpath_tuple")
    if not isinstance(fpath, list) or len(fpath) < 2 or not all(isinstance(p, str) for p in fpath):
        raise ValueError("metadata.fpath_tuple must list the repository and the file's path parts")
    if not all(_plain_name(part) for part in fpath):
        raise ValueError(f"metadata.fpath_tuple {fpath!r} must hold plain names (a repository folder under "
                         "--repos, then the file's path inside it): no '..', '.', '/', '\\' or empty parts")
    fields = {"task_id": meta.get("task_id"), "ground_truth": meta.get("ground_truth"),
              "prompt": record.get("prompt")}
    for name, value in fields.items():
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string")
    if not fields["ground_truth"].strip():
        # Nothing to score against: any answer was an exact match (RepoCoder's scorer says so too).
        raise ValueError("ground_truth is blank")
    start = meta.get("context_start_lineno")
    if not _whole_number(lineno) or not _whole_number(start) or not 0 <= start <= lineno:
        raise ValueError("context_start_lineno and lineno must be integers with 0 <= context_start_lineno <= lineno")
    definition = None
    raw = meta.get("definition")
    if isinstance(raw, dict) and isinstance(raw.get("path"), str) and _whole_number(raw.get("line")):
        if raw["line"] < 0:
            raise ValueError("metadata.definition.line must be >= 0 (0-based)")
        definition = TaskDefinition(raw["path"], raw["line"], str(raw.get("name", "")))
    split = meta.get("split") if meta.get("split") in SPLITS else default_split
    return EvalTask(
        task_id=fields["task_id"], split=split, repo=fpath[0], path="/".join(fpath[1:]),
        prompt=fields["prompt"], ground_truth=fields["ground_truth"], context_start_lineno=start,
        lineno=lineno, definition=definition,
    )


class _BadTaskFile(Exception):
    """A task file refused whole: its Failure names the file and, for a bad line, the line."""

    def __init__(self, failure: Failure):
        super().__init__(failure.message)
        self.failure = failure


def _tasks_of(path: Path, seen: set[str] | None = None) -> Iterator[tuple[int, EvalTask]]:
    """Each task of one JSONL file with the byte offset of its line, read a line at a time (a
    million-task file read whole took 800 MB); _BadTaskFile for the first malformed line, or a
    task id already in `seen` (the ids of the run's other task files, which this one adds to:
    two files numbering their tasks alike were run whole and then reported as half)."""
    default_split = split_of(path.name)
    seen = set() if seen is None else seen
    try:
        with open_regular(path) as handle:  # a named pipe as --tasks waited for a writer forever
            offset = 0
            for number, raw in enumerate(handle, start=1):
                start, offset = offset, offset + len(raw)
                line = raw.decode("utf-8")
                if not line.strip():
                    continue
                try:
                    task = _task_from(json.loads(line), default_split)
                except (ValueError, TypeError) as error:
                    raise _BadTaskFile(Failure(FailureKind.BAD_TASK,
                                               f"{path}:{number}: not a RepoEval task ({error})")) from None
                if task.task_id in seen:
                    raise _BadTaskFile(Failure(FailureKind.BAD_TASK, f"{path}:{number}: task_id {task.task_id!r} "
                                               "appears twice (in this task file or an earlier one of the run)"))
                seen.add(task.task_id)
                yield start, task
    except FileNotFoundError:
        raise _BadTaskFile(Failure(FailureKind.MISSING_TASKS, f"{path}: no such file")) from None
    except (OSError, UnicodeDecodeError) as error:
        raise _BadTaskFile(Failure(FailureKind.UNREADABLE_TASKS, f"{path}: cannot read ({error})")) from None


def load_tasks(path: Path, seen: set[str] | None = None) -> list[EvalTask] | Failure:
    """All tasks of one JSONL file; the first malformed line is a Failure naming it (`seen`: see
    `_tasks_of`)."""
    try:
        tasks = [task for _, task in _tasks_of(path, seen)]
    except _BadTaskFile as error:
        return error.failure
    if not tasks:
        return Failure(FailureKind.NO_TASKS, f"{path}: no tasks")
    return tasks


def select_tasks(tasks: Sequence[EvalTask], limit: int | None, seed: int) -> list[EvalTask]:
    """`limit` tasks per split, drawn by `seed`, balanced over repositories (round robin).

    The same (tasks, limit, seed) always gives the same tasks, so every strategy of a run, and a
    resumed run, see the same ones. Order: the draw order, splits interleaved, so a run stopped
    early has as many tasks of every split and repository as possible.
    """
    by_split: dict[str, dict[str, list[EvalTask]]] = defaultdict(lambda: defaultdict(list))
    for task in tasks:
        by_split[task.split][task.repo].append(task)
    return _draw(by_split, limit, seed)


def draw_tasks(paths: Sequence[Path], limit: int | None, seed: int) -> list[EvalTask] | Failure:
    """`select_tasks(all tasks of `paths`, limit, seed)`, without holding them all.

    Every line is still read and checked (a bad line anywhere refuses its file, before anything
    runs), and the draw needs each queue's length; but with a `limit` only where each task's line
    starts is kept, by split and repository, and only the drawn lines are parsed again into tasks:
    `--limit 2` on a million-task file held every prompt (800 MB) for two of them."""
    seen: set[str] = set()  # task ids, across the files: a report pairs records by id
    if limit is None:
        tasks: list[EvalTask] = []
        for path in paths:
            loaded = load_tasks(path, seen)
            if isinstance(loaded, Failure):
                return loaded
            tasks.extend(loaded)
        return select_tasks(tasks, None, seed)
    # A line's place, packed in one int (array("q") holds 8 bytes a task): offset * files + file number.
    by_split: dict[str, dict[str, array[int]]] = defaultdict(lambda: defaultdict(lambda: array("q")))
    for number, path in enumerate(paths):
        try:
            count = 0
            for offset, task in _tasks_of(path, seen):
                by_split[task.split][task.repo].append(offset * len(paths) + number)
                count += 1
        except _BadTaskFile as error:
            return error.failure
        if not count:
            return Failure(FailureKind.NO_TASKS, f"{path}: no tasks")
    # Shuffling a queue's places moves them exactly as shuffling its tasks did (random.shuffle's
    # swaps depend only on the length): the same tasks as select_tasks, in the same order.
    places = _draw(by_split, limit, seed)
    try:
        with ExitStack() as files:
            handles = [files.enter_context(open(path, "rb")) for path in paths]
            return [_task_at(handles, paths, place) for place in places]
    except (OSError, ValueError, TypeError) as error:  # UnicodeDecodeError is a ValueError
        return Failure(FailureKind.UNREADABLE_TASKS, f"a task file changed while it was read ({error}); run again")


def _task_at(handles: Sequence[BinaryIO], paths: Sequence[Path], place: int) -> EvalTask:
    """The task whose line starts at a packed place (draw_tasks), read again: it was checked."""
    offset, number = divmod(place, len(paths))
    handles[number].seek(offset)
    return _task_from(json.loads(handles[number].readline().decode("utf-8")), split_of(paths[number].name))


def _draw(by_split: Mapping[str, Mapping[str, Sequence[T]]], limit: int | None, seed: int) -> list[T]:
    """Each (split, repository) queue shuffled by `seed`, `limit` per split taken round robin over
    its repositories, then the splits interleaved."""
    drawn_by_split: list[list[T]] = []
    for split in sorted(by_split):
        queues = []
        for repo in sorted(by_split[split]):
            pool = list(by_split[split][repo])
            random.Random(f"{seed}:{split}:{repo}").shuffle(pool)
            queues.append(pool)
        drawn_by_split.append(_round_robin(queues, limit))
    return _round_robin(drawn_by_split, None)


def _round_robin(queues: Sequence[Sequence[T]], limit: int | None) -> list[T]:
    """First items of every queue, then second items, ...; at most `limit` in all."""
    wanted = sum(len(q) for q in queues) if limit is None else limit
    out: list[T] = []
    position = 0
    while len(out) < wanted and any(position < len(q) for q in queues):
        for queue in queues:
            if position < len(queue) and len(out) < wanted:
                out.append(queue[position])
        position += 1
    return out
