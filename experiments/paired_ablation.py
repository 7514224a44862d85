"""A lever switched off, paid for only where it changes the prompt: answers of a variant configuration
on the tasks whose prompt it changes, the base run's answers on the others.

A model's answer is a function of its prompt (greedy decoding, the same model and cap), so where a
variant's prompt equals the base run's to the byte, its answer is the base run's. The generation
store (`eval run --generations`) gives this for free when the base run kept one; this script is for
base runs that did not (records carry each prompt's SHA-256, `prompt_sha256`). Two steps:

    # 1. the variant's prompts, no model (`--prompt-only` is seconds a task), and the tasks to answer
    repomem eval run --tasks line.jsonl ... --strategies fragrel --prompt-only --set KEY=VALUE --results P.jsonl
    python experiments/paired_ablation.py select --base BASE.jsonl --prompts P.jsonl \
        --tasks line.jsonl --out CHANGED.jsonl
    repomem eval run --tasks CHANGED.jsonl ... --strategies fragrel --set KEY=VALUE --results G.jsonl
    # 2. the variant's records for every task: the answered ones, the base run's where the prompt is the same
    python experiments/paired_ablation.py merge --base BASE.jsonl --prompts P.jsonl --answers G.jsonl \
        --out VARIANT.jsonl

`--base` may repeat (plain or .xz records) and `--base-config` picks one configuration among them;
a task answered twice keeps its last record. `merge` refuses an answered record whose prompt is not
the one `--prompt-only` built (the code or the index moved between the two steps). The merged
records compare with `scripts/compare_configs.py` like any run's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from repomem.evaluation.run import read_results

# What names the run a record belongs to: a copied record takes the variant's (`--alpha 0` is a
# variant too), so that the merged file reads as one run's.
RUN_FIELDS = ("config", "settings", "alpha", "k", "order")


def by_task(paths: list[Path], strategy: str, config: str | None = None) -> dict[str, dict]:
    """task id -> record of `strategy` (and of `config`, when given), the last one read winning."""
    records: dict[str, dict] = {}
    for path in paths:
        for record in read_results(path):
            if record["strategy"] == strategy and (config is None or record.get("config") == config):
                records[record["task_id"]] = record
    return records


def changed_tasks(base: dict[str, dict], prompts: dict[str, dict]) -> list[str]:
    """Tasks whose variant prompt differs from the base run's (every prompted task must be in the base)."""
    missing = sorted(set(prompts) - set(base))
    if missing:
        raise SystemExit(f"{len(missing)} prompted tasks have no base record, e.g. {missing[0]}")
    return sorted(task for task, record in prompts.items() if record["prompt_sha256"] != base[task]["prompt_sha256"])


def merged_records(base: dict[str, dict], prompts: dict[str, dict], answers: dict[str, dict],
                   answered_only: bool = False) -> list[dict]:
    """The variant's record of every prompted task: answered where its prompt changed, else the
    base run's record, relabelled with the variant's run (its `--prompt-only` record's RUN_FIELDS).
    `answered_only`: a changed task not answered yet is left out (a run stopped early) instead of
    refused; the pairing is then over the tasks left, not the whole draw."""
    out = []
    for task in sorted(prompts):
        if prompts[task]["prompt_sha256"] != base[task]["prompt_sha256"]:
            record = answers.get(task)
            if record is None and answered_only:
                continue
            if record is None:
                raise SystemExit(f"{task}: its prompt changed and --answers has no record of it")
            if record["prompt_sha256"] != prompts[task]["prompt_sha256"]:
                raise SystemExit(f"{task}: the answered prompt is not the one --prompt-only built")
            record = {**record, "answer_from": "variant"}
        else:
            variant = {key: prompts[task][key] for key in RUN_FIELDS if key in prompts[task]}
            record = {**base[task], **variant, "answer_from": "base (the same prompt)"}
        out.append(record)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["select", "merge"])
    parser.add_argument("--base", type=Path, action="append", required=True, help="the base run's records")
    parser.add_argument("--base-config", default=None, help="the base run's configuration among them")
    parser.add_argument("--prompts", type=Path, action="append", required=True,
                        help="the variant's --prompt-only records")
    parser.add_argument("--strategy", default="fragrel")
    parser.add_argument("--tasks", type=Path, help="select: the tasks file the prompts were built from")
    parser.add_argument("--answers", type=Path, action="append", default=[],
                        help="merge: the variant's answered records")
    parser.add_argument("--answered-only", action="store_true",
                        help="merge: leave out changed tasks not answered yet (a run stopped early)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    base = by_task(args.base, args.strategy, args.base_config)
    prompts = by_task(args.prompts, args.strategy)
    changed = changed_tasks(base, prompts)
    if args.step == "select":
        if args.tasks is None:
            parser.error("select needs --tasks")
        wanted = set(changed)
        with args.tasks.open(encoding="utf-8") as source, args.out.open("w", encoding="utf-8") as out:
            for line in source:
                if line.strip() and json.loads(line)["metadata"]["task_id"] in wanted:
                    out.write(line if line.endswith("\n") else line + "\n")
        print(f"{len(changed)} of {len(prompts)} prompts changed -> {args.out}")
        return 0
    records = merged_records(base, prompts, by_task(args.answers, args.strategy), args.answered_only)
    with args.out.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
    answered = sum(1 for record in records if record["answer_from"] == "variant")
    print(f"{len(records)} records ({answered} of {len(changed)} changed prompts answered by the variant) "
          f"-> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
