"""What the file-only round adds: a strategy's own answer against the one the model was surer of.

With `prompt.file_only_round` a graph-aware strategy also completes from the file alone and shows
the answer with the higher mean log-probability; its records keep every round's exact match
(`round_em`: the retrieving answer first, the file-only answer second). This splits the strategy's
gain over a baseline into the retrieving prompt's part and the second opinion's, per split and per
repository, paired task by task:

    python experiments/second_opinion_share.py corpora/go/gpu-all/results.jsonl --strategy fragrel@0.5 \
        --out eval/results/languages-em-gpu/go/file-only-round.md

Exact match in %, Δ in points with 95% paired-bootstrap intervals (the report's seed).
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

from repomem.evaluation.report import format_interval, paired_bootstrap
from repomem.evaluation.run import read_results, records_named, strategy_and_alpha

RETRIEVING_ROUND = 0  # round_em[0]: the strategy's own prompt; round_em[1]: the file-only answer
NO_BASELINE = "none"  # --baseline none: the file-only round's share alone (a run of the strategy only)


def table(results: list[Path], strategy: str, baseline: str) -> str:
    name, alpha = strategy_and_alpha(strategy)
    records = [r for path in results for r in read_results(path)]
    chosen = {r["task_id"]: r for r in records_named(records, name, alpha)}
    compared = baseline != NO_BASELINE
    base = {r["task_id"]: r for r in records_named(records, baseline)} if compared else {}
    tasks = sorted(t for t in chosen if (t in base or not compared) and len(chosen[t].get("round_em") or []) == 2)
    lines = [f"Exact match in % ({f'{baseline}; ' if compared else ''}{strategy} from its own prompt alone; "
             f"{strategy} with the file-only round, the answer the model was surer of). Δ in points, 95% paired "
             "bootstrap.", ""]
    for split in ("line", "api"):
        by_repo: dict[str, list[str]] = defaultdict(list)
        for task in tasks:
            if chosen[task]["split"] == split:
                by_repo[chosen[task]["repo"]].append(task)
        if not by_repo:
            continue
        if compared:
            lines += [f"### {split}", "", f"| repository | tasks | {baseline} | own prompt | Δ vs {baseline} | "
                      f"with the file-only round | Δ vs {baseline} | Δ of the file-only round |",
                      "|---|---:|---:|---:|---|---:|---|---|"]
        else:
            lines += [f"### {split}", "", "| repository | tasks | own prompt | with the file-only round | "
                      "Δ of the file-only round | file-only answer shown |", "|---|---:|---:|---:|---|---:|"]
        every = [t for repo_ids in by_repo.values() for t in repo_ids]
        for repo, ids in [*sorted(by_repo.items()), ("**all**", every)]:
            own = np.array([bool(chosen[t]["round_em"][RETRIEVING_ROUND]) for t in ids])
            shown = np.array([bool(chosen[t]["em"]) for t in ids])
            if not compared:
                changed = sum(1 for t in ids if chosen[t].get("chosen_round", RETRIEVING_ROUND) != RETRIEVING_ROUND)
                lines.append(f"| {repo} | {len(ids)} | {100 * own.mean():.1f} | {100 * shown.mean():.1f} | "
                             f"{format_interval(paired_bootstrap(shown, own))} | {changed} |")
                continue
            baseline_em = np.array([bool(base[t]["em"]) for t in ids])
            lines.append(f"| {repo} | {len(ids)} | {100 * baseline_em.mean():.1f} | {100 * own.mean():.1f} | "
                         f"{format_interval(paired_bootstrap(own, baseline_em))} | {100 * shown.mean():.1f} | "
                         f"{format_interval(paired_bootstrap(shown, baseline_em))} | "
                         f"{format_interval(paired_bootstrap(shown, own))} |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, nargs="+")
    parser.add_argument("--strategy", default="fragrel@0.5", help="STRATEGY[@ALPHA] with the file-only round")
    parser.add_argument("--baseline", default="vanilla", help=f"'{NO_BASELINE}': the strategy's own prompt only")
    parser.add_argument("--out", type=Path, help="write the markdown here (else print it)")
    args = parser.parse_args()
    missing = [str(p) for p in args.results if not p.is_file()]
    if missing:
        print(f"second_opinion_share: no such results file: {', '.join(missing)}")
        return 2
    text = table(args.results, args.strategy, args.baseline)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
