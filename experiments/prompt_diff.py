"""Per-task diff of what FragRel and plain BM25 put into the prompt (the quality issue's question
"why does it lose?"), from `repomem eval run --prompt-only` (or model) records.

    python experiments/prompt_diff.py corpora/devset/results-prompt.jsonl --out eval/results/prompt-diff.md

For every task where exactly one of the two prompts holds the answer (`--by prompt`), or, for model
records, exactly one prediction is right (`--by em`), the blocks FragRel brought into the prompt
("lifted") and the ones it pushed out ("displaced") are sorted into kinds: a window of the hole's
own file, a window overlapping another block of the prompt, a test file, the hole's folder,
anything else. For lifted blocks it also reports how much of their s_rel came from s_env, and for
every split how often the block nearest the code (the one a small model copies from) changed.

    python experiments/prompt_diff.py corpora/em/paper.jsonl --by em            # vanilla vs fragrel, EM flips
    python experiments/prompt_diff.py corpora/em/anchored.jsonl --by em \
        --config prompt.pack_blocks=true,prompt.anchor_matches=1
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path, PurePosixPath

from rich.console import Console
from rich.table import Table

from repomem.evaluation.run import read_results

KINDS = ("hole's file", "overlaps a prompt block", "test file", "hole's folder", "other")


def nearest_block(record: dict) -> tuple | None:
    """(path, first line) of the prompt block nearest the code: the best in-prompt fragment by the
    record's block order (s_rel for "score", s_ind for "similarity"); None for "stable" or no block."""
    rows = [record["fragments"][i] for i in record["in_prompt"]]
    if not rows or record.get("order") not in ("score", "similarity"):
        return None
    column = 3 if record["order"] == "similarity" else 5  # fragment rows: path, start, end, s_ind, s_env, s_rel
    best = max(rows, key=lambda row: row[column])
    return (best[0], best[1])


def shows_scope(record: dict) -> bool:
    """The prompt carries the names-in-scope block (a block that is no retrieved fragment)."""
    return int(record.get("prompt_blocks", 0)) > len(record.get("in_prompt", ()))


def kind_of(row: list, hole: str, others: list[list]) -> str:
    path, start, end = row[0], row[1], row[2]
    if path == hole:
        return KINDS[0]
    if any(o is not row and o[0] == path and o[1] < end and start < o[2] for o in others):
        return KINDS[1]
    if any(part.startswith("test") for part in PurePosixPath(path).parts):
        return KINDS[2]
    if PurePosixPath(path).parent == PurePosixPath(hole).parent:
        return KINDS[3]
    return KINDS[4]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--config", default="", help="the runs' --set label (default: none)")
    parser.add_argument("--out", type=Path, default=None, help="also write the tables as markdown here")
    parser.add_argument("--by", choices=("prompt", "em"), default="prompt",
                        help="what makes a task won or lost: the answer in the prompt, or exact match (model runs)")
    args = parser.parse_args(argv)
    records = [r for r in read_results(args.results) if r.get("config", "") == args.config and "in_prompt" in r]
    by_task: dict[str, dict[str, dict]] = defaultdict(dict)
    for record in records:
        if record["strategy"] == "vanilla" and record["alpha"] == 0:
            by_task[record["task_id"]]["vanilla"] = record
        elif record["strategy"] == "fragrel" and abs(record["alpha"] - args.alpha) < 1e-9:
            by_task[record["task_id"]]["fragrel"] = record
    pairs = {task: pair for task, pair in by_task.items() if len(pair) == 2}
    if not pairs:
        print("prompt_diff: no task has both a vanilla and a fragrel record with in_prompt", file=sys.stderr)
        return 2
    lines = [f"# What FragRel (α={args.alpha:g}) changes in the prompt, against BM25", "",
             f"{len(pairs)} tasks from `{args.results.name}`.", ""]
    console = Console()
    for split in ("line", "api"):
        split_pairs = {t: p for t, p in pairs.items() if p["vanilla"]["split"] == split}
        if not split_pairs:
            continue
        outcome = Counter()
        lifted: Counter = Counter()
        displaced: Counter = Counter()
        env_share: list[float] = []
        changed = 0
        nearest_changed = Counter()  # by outcome key
        # Model records: did the prediction change, when the nearest block changed and when only others did?
        prediction_changed = Counter()  # "nearest", "others" -> tasks whose prediction changed
        prompt_changed = Counter()  # "nearest", "others" -> tasks
        scope_shown = Counter()  # outcome key -> tasks whose FragRel prompt showed the names in scope
        scope_only = Counter()  # outcome key -> tasks whose blocks were the same: only the names differ
        for pair in split_pairs.values():
            vanilla, fragrel = pair["vanilla"], pair["fragrel"]
            v_rows = [vanilla["fragments"][i] for i in vanilla["in_prompt"]]
            f_rows = [fragrel["fragments"][i] for i in fragrel["in_prompt"]]
            v_keys = {(r[0], r[1]) for r in v_rows}
            f_keys = {(r[0], r[1]) for r in f_rows}
            changed += v_keys != f_keys
            field = "em" if args.by == "em" else "prompt_hit"
            key = (bool(vanilla.get(field)), bool(fragrel.get(field)))
            outcome[key] += 1
            scope_shown[key] += shows_scope(fragrel) and not shows_scope(vanilla)
            scope_only[key] += v_keys == f_keys and shows_scope(fragrel) != shows_scope(vanilla)
            nearest_moved = nearest_block(vanilla) != nearest_block(fragrel)
            nearest_changed[key] += nearest_moved
            if "prediction" in vanilla and "prediction" in fragrel and (nearest_moved or v_keys != f_keys):
                where = "nearest" if nearest_moved else "others"
                prompt_changed[where] += 1
                prediction_changed[where] += vanilla["prediction"] != fragrel["prediction"]
            if key not in ((True, False), (False, True)):
                continue
            label = "won" if key == (False, True) else "lost"
            hole = vanilla["path"]
            for row in f_rows:
                if (row[0], row[1]) not in v_keys:
                    lifted[(label, kind_of(row, hole, f_rows))] += 1
                    if row[5] > 0:
                        env_share.append(args.alpha * row[4] / row[5])
            for row in v_rows:
                if (row[0], row[1]) not in f_keys:
                    displaced[(label, kind_of(row, hole, v_rows))] += 1
        n = len(split_pairs)
        table = Table(title=f"{split}: {n} tasks; the prompt's blocks changed in {changed} "
                            f"({100 * changed / n:.0f}%), the nearest block in {sum(nearest_changed.values())}; "
                            f"{args.by}: FragRel won {outcome[(False, True)]}, lost {outcome[(True, False)]}")
        table.add_column("kind of block")
        for column in ("lifted, won", "lifted, lost", "displaced, won", "displaced, lost"):
            table.add_column(column, justify="right")
        what = "the prediction was right" if args.by == "em" else "the answer reached the prompt"
        names = {(False, True): "won", (True, False): "lost", (True, True): "both", (False, False): "neither"}
        near = ", ".join(f"{names[key]} {nearest_changed[key]} of {outcome[key]}" for key in names if outcome[key])
        lines += [f"## {split} ({n} tasks)", "",
                  f"Blocks in the prompt changed in {changed} tasks ({100 * changed / n:.0f}%). {what.capitalize()} "
                  f"with FragRel and not with BM25 in {outcome[(False, True)]} tasks (won) and the other "
                  f"way round in {outcome[(True, False)]} (lost); both in {outcome[(True, True)]}, neither in "
                  f"{outcome[(False, False)]}.", "",
                  f"The block nearest the code changed in {sum(nearest_changed.values())} tasks "
                  f"({100 * sum(nearest_changed.values()) / n:.0f}%): {near}.", "",
                  f"FragRel's prompt showed the names in scope (and BM25's did not) in "
                  f"{sum(scope_shown.values())} tasks: won {scope_shown[(False, True)]} of {outcome[(False, True)]}, "
                  f"lost {scope_shown[(True, False)]} of {outcome[(True, False)]}. Tasks whose blocks were the same "
                  f"and only the names in scope differed: {sum(scope_only.values())}, of them won "
                  f"{scope_only[(False, True)]} and lost {scope_only[(True, False)]}.", "",
                  *([f"The prediction changed in {prediction_changed['nearest']} of the {prompt_changed['nearest']} "
                     f"tasks whose nearest block changed, and in {prediction_changed['others']} of the "
                     f"{prompt_changed['others']} whose other blocks alone changed.", ""] if prompt_changed else []),
                  "| kind of block | lifted, won | lifted, lost | displaced, won | displaced, lost |",
                  "|---|---:|---:|---:|---:|"]
        for kind in KINDS:
            cells = [lifted[("won", kind)], lifted[("lost", kind)], displaced[("won", kind)],
                     displaced[("lost", kind)]]
            table.add_row(kind, *map(str, cells))
            lines.append(f"| {kind} | " + " | ".join(map(str, cells)) + " |")
        if env_share:
            share = sum(env_share) / len(env_share)
            lines += ["", f"Lifted blocks owed {100 * share:.0f}% of their s_rel to the environment on average."]
        lines.append("")
        console.print(table)
    if args.out is not None:
        args.out.write_text("\n".join(lines), encoding="utf-8")
        console.print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
