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
from pathlib import Path

import numpy as np

from repomem.backends.factory import open_backend
from repomem.completion.engine import CompletionEngine
from repomem.config import config_from_mapping, with_overrides
from repomem.evaluation.metrics import edit_similarity, exact_match
from repomem.evaluation.report import format_interval, paired_bootstrap
from repomem.evaluation.run import task_cursor
from repomem.evaluation.tasks import draw_tasks
from repomem.failures import Failure
from repomem.service import RepoService


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=Path, required=True)
    parser.add_argument("--repos", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=60, help="tasks per split drawn (as eval run's --limit)")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--right-context", action="store_true", help="the code after the hole visible, as in an editor")
    parser.add_argument("--out", type=Path, default=Path("eval/results/line-below/records.jsonl"))
    args = parser.parse_args()
    tasks = draw_tasks([args.tasks], args.limit, args.seed)
    if isinstance(tasks, Failure):
        print(tasks.message, file=sys.stderr)
        return 2
    config = config_from_mapping({}, "lsp")[0]
    backend = open_backend(config)
    if isinstance(backend, Failure):
        print(backend.message, file=sys.stderr)
        return 2
    services: dict[str, RepoService] = {}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    with args.out.open("w", encoding="utf-8") as out:
        for number, task in enumerate(tasks, start=1):
            service = services.get(task.repo)
            if service is None:
                opened = RepoService.open((args.repos / task.repo).resolve(), config)
                assert not isinstance(opened, Failure), opened
                assert not isinstance(opened.ensure_index(), Failure)
                service = services[task.repo] = opened
            text = (service.root / task.path).read_text(encoding="utf-8", errors="replace")
            lines = text.split("\n")
            above = lines[task.lineno - 1] if task.lineno > 0 else ""
            if not above.strip() or above != above.rstrip():
                continue  # no answer above to take (a blank line), or one ending in spaces no model ends on
            first = task_cursor(service.root, dataclasses.replace(task, lineno=task.lineno - 1,
                                                                  ground_truth=above + "\n" + task.ground_truth),
                                text, "", args.right_context)
            cursor = task_cursor(service.root, task, text, "", args.right_context)
            continuing = CompletionEngine(service, backend, with_overrides(config, completion={"continue_lines": True}))
            afresh = CompletionEngine(service, backend, with_overrides(config, completion={"continue_lines": False}))
            request = continuing.request(first)
            assert not isinstance(request, Failure), request
            prepared = continuing.prepare(request)
            assert not isinstance(prepared, Failure), prepared
            continuing.taken(first, prepared, above)
            if not continuing.continues(cursor):
                continue
            # The editor asked at the line above too: a prompt built afresh keeps the blocks and the
            # start its function's first completion chose (order "stable"), as in the editor.
            above_request = afresh.request(first)
            assert not isinstance(above_request, Failure), above_request
            assert not isinstance(afresh.prepare(above_request), Failure)
            continued, fresh = continuing.complete(cursor), afresh.complete(cursor)
            if isinstance(continued, Failure) or isinstance(fresh, Failure):
                continue
            truth = task.ground_truth
            row = {"task_id": task.task_id, "repo": task.repo, "continued": continued.text, "fresh": fresh.text,
                   "continued_em": exact_match(continued.text, truth), "fresh_em": exact_match(fresh.text, truth),
                   "continued_es": edit_similarity(continued.text, truth),
                   "fresh_es": edit_similarity(fresh.text, truth),
                   "continued_prompt_tokens": continued.generation.prompt_tokens,
                   "fresh_prompt_tokens": fresh.generation.prompt_tokens}
            rows.append(row)
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(f"{number}/{len(tasks)} {task.task_id}: continued {row['continued_em']:d} fresh {row['fresh_em']:d}"
                  f" {'same' if continued.text == fresh.text else 'differ'}", flush=True)
    backend.close()
    if not rows:
        print("no task had a code line above its hole", file=sys.stderr)
        return 1
    continued_em = np.array([r["continued_em"] for r in rows])
    fresh_em = np.array([r["fresh_em"] for r in rows])
    summary = {"tasks": len(rows), "right_context": args.right_context, "seed": args.seed, "limit": args.limit,
               "continued_em": round(100 * continued_em.mean(), 1), "fresh_em": round(100 * fresh_em.mean(), 1),
               "continued_minus_fresh": format_interval(paired_bootstrap(continued_em, fresh_em)),
               "won": int((continued_em & ~fresh_em).sum()), "lost": int((fresh_em & ~continued_em).sum()),
               "same_answer": sum(r["continued"] == r["fresh"] for r in rows),
               "continued_es": round(float(np.mean([r["continued_es"] for r in rows])), 3),
               "fresh_es": round(float(np.mean([r["fresh_es"] for r in rows])), 3)}
    args.out.with_suffix(".summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
