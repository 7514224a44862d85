"""What do the editor's kept blocks cost: a completion with the blocks its function's first
completion retrieved (order "stable", the editor's default) against one with blocks retrieved for
its own cursor?

    python experiments/stable_blocks.py --tasks corpora/devset/line.jsonl --repos corpora/devset/repositories \
        [--limit 100 --seed 3] [--right-context] [--out eval/results/stable-blocks/records.jsonl]

Order "stable" keeps a function's blocks from its first completion so that later prompts in it
share their beginning with the model's cache (warm answers in ~0.01-0.3 s). Replayed on RepoEval's
line tasks in the editor's configuration (the "lsp" surface, as `line_below.py` sets it up): for
each task inside a function whose hole is below the function's first line, one engine first makes
the prompt at the end of that first line (the function's first completion: it remembers the
blocks) and then completes the hole; another completes the hole alone (blocks retrieved for the
hole's own cursor). One JSON line per task and a summary.
"""

from __future__ import annotations

from line_below import EditorReplay, arguments, prepared_at, scored

from repomem.completion.request import enclosing_definition
from repomem.evaluation.run import task_cursor
from repomem.failures import Failure
from repomem.positions import Cursor


def main() -> int:
    args = arguments(__doc__, "eval/results/stable-blocks/records.jsonl")
    replay = EditorReplay(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as out:
        for number, task in enumerate(replay.tasks, start=1):
            service = replay.service(task.repo)
            text = (service.root / task.path).read_text(encoding="utf-8", errors="replace")
            cursor = task_cursor(service.root, task, text, "", args.right_context)
            lines = cursor.text.split("\n")
            definition = enclosing_definition(lines, task.lineno)
            if definition < 0 or definition + 1 >= task.lineno or not lines[definition + 1].strip():
                continue  # at module level, or the hole is the function's first line
            first = Cursor(cursor.root, cursor.path, definition + 1, len(lines[definition + 1]), cursor.text)
            kept, retrieved = replay.engine(service), replay.engine(service)
            prepared_at(kept, first)  # the function's first completion: its blocks are kept
            with_kept, own = kept.complete(cursor), retrieved.complete(cursor)
            if isinstance(with_kept, Failure) or isinstance(own, Failure):
                continue
            row = {"task_id": task.task_id, "repo": task.repo, **scored("kept", with_kept.text, task.ground_truth),
                   **scored("own", own.text, task.ground_truth),
                   "kept_fragments": [f.fragment for f in with_kept.fragments],
                   "own_fragments": [f.fragment for f in own.fragments]}
            replay.record(out, number, task.task_id, row, "kept", "own")
    return replay.finish(args, "kept", "own", "no task had an earlier line in its function",
                         same_blocks=lambda rows: sum(r["kept_fragments"] == r["own_fragments"] for r in rows))


if __name__ == "__main__":
    raise SystemExit(main())
