"""Is the line below a taken answer answered as well from the answer's prompt, continued, as from a
prompt built afresh (completion.continue_lines, an editor's default)?

    python experiments/line_below.py --tasks corpora/devset/line.jsonl --repos corpora/devset/repositories \
        [--limit 60 --seed 3] [--right-context] [--out eval/results/line-below/records.jsonl]

An editor's user takes a one-line answer and presses Enter; the language server then continues the
prompt the answer came from (its blocks retrieved for the line above, the answer after it) rather
than building one for the new cursor. Replayed on RepoEval's line tasks with the editor's
configuration (the "lsp" surface: the embedded 0.5B, 1,024-token prompts, blocks kept per
function): for each task whose hole has a code line above it, the prompt at the start of that line
above (the hole and that line taken out), the line above taken as its answer (the file's real
line, as if the model had written it: `CompletionEngine.taken`), then the hole's completion twice,
from that prompt continued and from a prompt built afresh (by an engine that also made the prompt
at the line above, so that it keeps the blocks and the start chosen there, as the editor's does).
One JSON line per task and a summary: exact match of both, their paired difference, and how often
the two answers are the same.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO

import numpy as np

from repomem.backends.factory import open_backend
from repomem.completion.engine import CompletionEngine, PreparedPrompt
from repomem.config import config_from_mapping, with_overrides
from repomem.evaluation.metrics import edit_similarity, exact_match
from repomem.evaluation.report import format_interval, paired_bootstrap
from repomem.evaluation.run import task_cursor
from repomem.evaluation.tasks import draw_tasks
from repomem.failures import Failure
from repomem.positions import Cursor
from repomem.service import RepoService


def arguments(description: str, out: str) -> argparse.Namespace:
    """The options the editor-configuration replays share (this script's and its siblings')."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=Path, required=True)
    parser.add_argument("--repos", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=60, help="tasks per split drawn (as eval run's --limit)")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--right-context", action="store_true", help="the code after the hole visible, as in an editor")
    parser.add_argument("--out", type=Path, default=Path(out))
    return parser.parse_args()


class EditorReplay:
    """The tasks drawn, the editor's configuration ("lsp" surface) and its model, and each task's
    repository opened and indexed once."""

    def __init__(self, args: argparse.Namespace):
        tasks = draw_tasks([args.tasks], args.limit, args.seed)
        if isinstance(tasks, Failure):
            raise SystemExit(tasks.message)
        self.tasks, self.repos = tasks, args.repos
        self.config = config_from_mapping({}, "lsp")[0]
        backend = open_backend(self.config)
        if isinstance(backend, Failure):
            raise SystemExit(backend.message)
        self.backend = backend
        self._services: dict[str, RepoService] = {}
        self.rows: list[dict] = []

    def service(self, repo: str) -> RepoService:
        if repo not in self._services:
            opened = RepoService.open((self.repos / repo).resolve(), self.config)
            assert not isinstance(opened, Failure), opened
            assert not isinstance(opened.ensure_index(), Failure)
            self._services[repo] = opened
        return self._services[repo]

    def engine(self, service: RepoService, **completion) -> CompletionEngine:
        return CompletionEngine(service, self.backend, with_overrides(self.config, completion=completion))

    def record(self, out: IO[str], number: int, task_id: str, row: dict, first: str, second: str) -> None:
        """One task's row (answers `first` and `second`, as `scored` names them): kept, written, said."""
        self.rows.append(row)
        out.write(json.dumps(row) + "\n")
        out.flush()
        print(f"{number}/{len(self.tasks)} {task_id}: {first} {row[f'{first}_em']:d} {second} {row[f'{second}_em']:d}"
              f" {'same' if row[first] == row[second] else 'differ'}", flush=True)

    def finish(self, args: argparse.Namespace, first: str, second: str, nothing: str,
               **more: Callable[[list[dict]], object]) -> int:
        """The summary of the rows kept (`paired_summary`, and `more` of them by name), written beside
        the records and printed; 1 and `nothing` said when no task was replayed."""
        self.backend.close()
        if not self.rows:
            print(nothing, file=sys.stderr)
            return 1
        summary = {**paired_summary(self.rows, first, second, args),
                   **{name: measure(self.rows) for name, measure in more.items()}}
        args.out.with_suffix(".summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        print(json.dumps(summary, indent=2))
        return 0


def paired_summary(rows: list[dict], first: str, second: str, args: argparse.Namespace) -> dict:
    """Exact match of answers `first` and `second` (the rows' FIRST_em / SECOND_em ...), their paired
    difference, won / lost, the same answers, edit similarity."""
    a, b = np.array([r[f"{first}_em"] for r in rows]), np.array([r[f"{second}_em"] for r in rows])
    return {"tasks": len(rows), "right_context": args.right_context, "seed": args.seed, "limit": args.limit,
            f"{first}_em": round(100 * a.mean(), 1), f"{second}_em": round(100 * b.mean(), 1),
            f"{first}_minus_{second}": format_interval(paired_bootstrap(a, b)),
            "won": int((a & ~b).sum()), "lost": int((b & ~a).sum()),
            "same_answer": sum(r[first] == r[second] for r in rows),
            f"{first}_es": round(float(np.mean([r[f"{first}_es"] for r in rows])), 3),
            f"{second}_es": round(float(np.mean([r[f"{second}_es"] for r in rows])), 3)}


def prepared_at(engine: CompletionEngine, cursor: Cursor) -> PreparedPrompt:
    """The prompt `engine` makes at `cursor` without the model (what an editor's earlier ask there
    made: order "stable" remembers its blocks and start for the function)."""
    request = engine.request(cursor)
    assert not isinstance(request, Failure), request
    prepared = engine.prepare(request)
    assert not isinstance(prepared, Failure), prepared
    return prepared


def scored(name: str, text: str, truth: str) -> dict:
    return {name: text, f"{name}_em": exact_match(text, truth), f"{name}_es": edit_similarity(text, truth)}


def main() -> int:
    args = arguments(__doc__, "eval/results/line-below/records.jsonl")
    replay = EditorReplay(args)
    tasks = replay.tasks
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as out:
        for number, task in enumerate(tasks, start=1):
            service = replay.service(task.repo)
            text = (service.root / task.path).read_text(encoding="utf-8", errors="replace")
            lines = text.split("\n")
            above = lines[task.lineno - 1] if task.lineno > 0 else ""
            if not above.strip() or above != above.rstrip():
                continue  # no answer above to take (a blank line), or one ending in spaces no model ends on
            first = task_cursor(service.root, dataclasses.replace(task, lineno=task.lineno - 1,
                                                                  ground_truth=above + "\n" + task.ground_truth),
                                text, "", args.right_context)
            cursor = task_cursor(service.root, task, text, "", args.right_context)
            continuing = replay.engine(service, continue_lines=True)
            afresh = replay.engine(service, continue_lines=False)
            continuing.taken(first, prepared_at(continuing, first), above)
            if not continuing.continues(cursor):
                continue
            # The editor asked at the line above too: a prompt built afresh keeps the blocks and the
            # start its function's first completion chose (order "stable"), as in the editor.
            prepared_at(afresh, first)
            continued, fresh = continuing.complete(cursor), afresh.complete(cursor)
            if isinstance(continued, Failure) or isinstance(fresh, Failure):
                continue
            row = {"task_id": task.task_id, "repo": task.repo, **scored("continued", continued.text, task.ground_truth),
                   **scored("fresh", fresh.text, task.ground_truth),
                   "continued_prompt_tokens": continued.generation.prompt_tokens,
                   "fresh_prompt_tokens": fresh.generation.prompt_tokens}
            replay.record(out, number, task.task_id, row, "continued", "fresh")
    return replay.finish(args, "continued", "fresh", "no task had a code line above its hole")


if __name__ == "__main__":
    raise SystemExit(main())
