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
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from repomem.failures import Failure
from repomem.index.scan import is_text_name

SPLITS = ("line", "api", "function")


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


def load_tasks(path: Path) -> list[EvalTask] | Failure:
    """All tasks of one JSONL file; the first malformed line is a Failure naming it."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return Failure("missing-tasks", f"{path}: no such file")
    except (OSError, UnicodeDecodeError) as error:
        return Failure("unreadable-tasks", f"{path}: cannot read ({error})")
    default_split = split_of(path.name)
    tasks: list[EvalTask] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            task = _task_from(json.loads(line), default_split)
        except (ValueError, TypeError) as error:
            return Failure("bad-task", f"{path}:{number}: not a RepoEval task ({error})")
        if task.task_id in seen:
            return Failure("bad-task", f"{path}:{number}: task_id {task.task_id!r} appears twice")
        seen.add(task.task_id)
        tasks.append(task)
    if not tasks:
        return Failure("no-tasks", f"{path}: no tasks")
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
    drawn_by_split: list[list[EvalTask]] = []
    for split in sorted(by_split):
        queues = []
        for repo in sorted(by_split[split]):
            pool = list(by_split[split][repo])
            random.Random(f"{seed}:{split}:{repo}").shuffle(pool)
            queues.append(pool)
        drawn_by_split.append(_round_robin(queues, limit))
    return _round_robin(drawn_by_split, None)


def _round_robin(queues: Sequence[Sequence[EvalTask]], limit: int | None) -> list[EvalTask]:
    """First items of every queue, then second items, ...; at most `limit` in all."""
    wanted = sum(len(q) for q in queues) if limit is None else limit
    out: list[EvalTask] = []
    position = 0
    while len(out) < wanted and any(position < len(q) for q in queues):
        for queue in queues:
            if position < len(queue) and len(out) < wanted:
                out.append(queue[position])
        position += 1
    return out
