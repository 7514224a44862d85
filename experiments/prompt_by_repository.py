"""Per-repository prompt-level rows of `eval run --prompt-only` results: one configuration against another.

    python experiments/prompt_by_repository.py RESULTS.jsonl [--strategy fragrel] [--quick a,b,c] > table.md
    python experiments/prompt_by_repository.py NEW.jsonl --base BASE.jsonl --base-strategy fragrel \
        [--alpha 0] [--base-alpha 0.5] [--metric prompt_near_hit] > table.md

For each split and repository: tasks, the metric (default: the answer in a prompt block,
`prompt_hit`) for the base (default: vanilla in the same file) and the strategy, and the difference
in points with a 95% paired bootstrap interval; the quick set's repositories and the others are
summed separately, so a lever that helps only where it was tuned shows as such.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

QUICK = ("accelerate", "optuna", "torchmetrics")  # eval/devsets/quick.toml
RESAMPLES = 2000


def paired_interval(pairs: list[tuple[int, int]], seed: int = 0) -> tuple[float, float]:
    """95% bootstrap interval of mean(b - a) in points, resampling tasks."""
    rng = random.Random(seed)
    n = len(pairs)
    means = sorted(sum(b - a for a, b in (pairs[rng.randrange(n)] for _ in range(n))) * 100 / n
                   for _ in range(RESAMPLES))
    return means[int(0.025 * RESAMPLES)], means[int(0.975 * RESAMPLES) - 1]


def row(label: str, pairs: list[tuple[int, int]]) -> str:
    n = len(pairs)
    base = sum(a for a, _ in pairs) * 100 / n
    other = sum(b for _, b in pairs) * 100 / n
    low, high = paired_interval(pairs)
    return f"| {label} | {n} | {base:.1f} | {other:.1f} | {other - base:+.1f} [{low:+.1f}, {high:+.1f}] |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--strategy", default="fragrel")
    parser.add_argument("--alpha", type=float, default=None, help="the strategy's records at this alpha only")
    parser.add_argument("--base", type=Path, default=None, help="the base's results (default: RESULTS)")
    parser.add_argument("--base-strategy", default="vanilla")
    parser.add_argument("--base-alpha", type=float, default=None)
    parser.add_argument("--metric", default="prompt_hit", help="a boolean record field, e.g. prompt_near_hit")
    parser.add_argument("--quick", default=",".join(QUICK), help="the quick set's repositories")
    args = parser.parse_args(argv)
    quick = set(args.quick.split(","))
    base_label = args.base_strategy if args.base is None else f"{args.base_strategy} ({args.base.stem})"
    other_label = args.strategy if args.base is None else f"{args.strategy} ({args.results.stem})"
    # (split, repo, task) -> side -> 0/1
    hits: dict[tuple[str, str, str], dict[str, int]] = defaultdict(dict)
    sides = (("base", args.base or args.results, args.base_strategy, args.base_alpha),
             ("other", args.results, args.strategy, args.alpha))
    for side, path, strategy, alpha in sides:
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("strategy") != strategy or record.get(args.metric) is None:
                continue
            if alpha is not None and float(record.get("alpha", 0.0)) != alpha:
                continue
            hits[(record["split"], record["repo"], record["task_id"])][side] = int(record[args.metric])
    print(f"`{args.metric}`, % ({base_label} vs {other_label}; Δ in points, 95% paired bootstrap)\n")
    for split in sorted({key[0] for key, sides_of in hits.items() if len(sides_of) == 2}):
        print(f"### {split}\n\n| repository | tasks | {base_label} | {other_label} | Δ |\n|---|---:|---:|---:|---|")
        by_repo: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for (task_split, repo, _), strategies in sorted(hits.items()):
            if task_split == split and len(strategies) == 2:
                by_repo[repo].append((strategies["base"], strategies["other"]))
        for repo in sorted(by_repo, key=lambda name: (name not in quick, name)):
            print(row(repo, by_repo[repo]))
        for label, chosen in (("quick three", [r for r in by_repo if r in quick]),
                              ("the others", [r for r in by_repo if r not in quick]), ("all", list(by_repo))):
            pairs = [pair for repo in chosen for pair in by_repo[repo]]
            if pairs:
                print(row(f"**{label}**", pairs))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
