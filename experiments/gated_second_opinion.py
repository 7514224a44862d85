"""The file-only round only when the retrieving answer is unsure, replayed from evaluation records.

    python experiments/gated_second_opinion.py eval/results/devset-ten-em-gpu/records.jsonl.xz \
        [--first fragrel@0.5] [--second infile] [--quick accelerate,optuna,torchmetrics] [--plot gate.png]

The default completes the retrieving prompt, then the file-only one, and shows the answer the model
is surer of (mean log-probability per token, the retrieving one on a tie). When the retrieving
answer is already sure, the second answer seldom wins: asking for it only below a threshold
(`prompt.file_only_below`) saves that generation. Every number comes from records of real
generations of both prompts on every task, so the gated exact match is the one a gated run would
have. One threshold for both splits (the engine cannot tell a line task from an API one), chosen
on the quick set's repositories (the highest exact match there, then the fewest second
generations) from a grid of round values, and reported on the others, so its figures are not tuned
on the tasks they describe.

Cost: the share of completions that generate twice, and the prompt + generated tokens the model
evaluates per completion (what a CPU pays for: about 8 ms a prompt token on two cores).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from opinion_selection import OWN_ROUND, UnknownOpinion, own_logprob, own_records
from prompt_by_repository import QUICK

from repomem.evaluation.report import format_interval, paired_bootstrap
from repomem.evaluation.run import read_results

# Thresholds on the retrieving answer's mean log-probability per token; +inf asks always (the
# file-only round as it was), -inf never (the retrieving answer alone).
GRID = (float("inf"), -0.005, -0.01, -0.02, -0.03, -0.05, -0.075, -0.1, -0.15, -0.2, -0.3, -0.5, float("-inf"))


def _own_answers(records: list[dict], name: str) -> dict[str, dict]:
    """task id -> {em, logprob, tokens, split, repo} of the named strategy's own prompt."""
    out = {}
    for record in own_records(records, name):
        out[record["task_id"]] = {
            "em": bool(record["round_em"][OWN_ROUND]), "logprob": own_logprob(record),
            "tokens": int(record["tokens"]["prompt"]) + int(record["tokens"]["generated"]),
            "split": record["split"], "repo": record["repo"]}
    return out


def gate(first: list[dict], second: list[dict], threshold: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(EM asking always, EM gated) per task as 0/1 arrays, the share asked, mean tokens gated."""
    always = np.array([b["em"] if b["logprob"] > a["logprob"] else a["em"] for a, b in zip(first, second)])
    asked = np.array([a["logprob"] < threshold for a in first])
    gated = np.where(asked, always, np.array([a["em"] for a in first]))
    tokens = np.array([a["tokens"] + (b["tokens"] if ask else 0) for a, b, ask in zip(first, second, asked)])
    return always.astype(int), gated.astype(int), float(asked.mean()), float(tokens.mean())


def choose(first: list[dict], second: list[dict]) -> float:
    """The grid's threshold with the highest exact match on these tasks, then the fewest asked."""
    return max(GRID, key=lambda t: (gate(first, second, t)[1].sum(), -gate(first, second, t)[2]))


def table(records: list[dict], first_name: str, second_name: str, quick: set[str],
          fixed: float | None = None) -> tuple[str, float, dict]:
    """The markdown table, the threshold (`fixed`, else chosen on the quick set) and each split's
    (share asked %, EM %) over the grid."""
    first, second = _own_answers(records, first_name), _own_answers(records, second_name)
    tasks = sorted(set(first) & set(second))
    tuning = [t for t in tasks if first[t]["repo"] in quick]
    if fixed is None and not tuning:
        raise ValueError(f"no task of the quick set's repositories ({', '.join(sorted(quick))}); "
                         "name them with --quick or give --threshold")
    threshold = choose([first[t] for t in tuning], [second[t] for t in tuning]) if fixed is None else fixed
    chosen_how = (f"chosen on {', '.join(sorted(quick))} (highest EM, then fewest second generations)"
                  if fixed is None else "given, not tuned on these tasks")
    lines = [f"# The file-only round only when the retrieving answer is unsure: `{first_name}`, then `{second_name}` "
             f"below a threshold", "",
             f"Threshold on `{first_name}`'s mean log-probability per token, one for both splits, {chosen_how}: "
             f"**{threshold:g}**. EM in %, "
             "Δ against asking always with a 95% paired bootstrap interval; tokens = prompt + generated tokens "
             "the model evaluates per completion.", "",
             "| split | set | tasks | asked for | retrieving alone EM | always asked EM | gated EM | Δ gated − always "
             "| tokens always | tokens gated |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    curves: dict[str, list[tuple[float, float]]] = {}
    for split in ("line", "api"):
        ids = [t for t in tasks if first[t]["split"] == split]
        if not ids:
            continue
        sets = {("quick (tuned)" if fixed is None else "quick"): [t for t in ids if first[t]["repo"] in quick],
                "other": [t for t in ids if first[t]["repo"] not in quick], "all": ids}
        for name, chosen in sets.items():
            if not chosen:
                continue
            a, b = [first[t] for t in chosen], [second[t] for t in chosen]
            always, gated, share, tokens = gate(a, b, threshold)
            _, _, _, tokens_always = gate(a, b, float("inf"))
            alone = np.mean([x["em"] for x in a]) * 100
            lines.append(f"| {split} | {name} | {len(chosen)} | {share * 100:.0f}% | {alone:.1f} | "
                         f"{always.mean() * 100:.1f} | {gated.mean() * 100:.1f} | "
                         f"{format_interval(paired_bootstrap(gated, always))} | {tokens_always:.0f} | {tokens:.0f} |")
        a, b = [first[t] for t in ids], [second[t] for t in ids]
        curves[split] = [(gate(a, b, t)[2] * 100, gate(a, b, t)[1].mean() * 100) for t in GRID]
    return "\n".join(lines) + "\n", threshold, curves


def plot(curves: dict, threshold_note: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    for split, points in curves.items():
        points = sorted(points)
        axis.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=split)
    axis.set_xlabel("completions that generate the file-only answer too (%)")
    axis.set_ylabel("exact match (%)")
    axis.set_title(f"Gated file-only round, thresholds swept, all tasks ({threshold_note})", fontsize=9)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, nargs="+", help="results files (.jsonl or .jsonl.xz)")
    parser.add_argument("--first", default="fragrel@0.5", help="the retrieving strategy (STRATEGY[@ALPHA])")
    parser.add_argument("--second", default="infile", help="the second opinion's strategy")
    parser.add_argument("--quick", default=",".join(QUICK), help="the repositories the threshold is chosen on")
    parser.add_argument("--threshold", type=float, help="apply this threshold instead of choosing one")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--plot", type=Path, metavar="PNG", help="exact match against the share asked twice")
    args = parser.parse_args()
    missing = [path for path in args.records if not path.is_file()]
    if missing:
        parser.error(f"no such file: {missing[0]}")
    records = [r for path in args.records for r in read_results(path)]
    try:
        text, threshold, curves = table(records, args.first, args.second, set(args.quick.split(",")), args.threshold)
    except (UnknownOpinion, ValueError) as error:
        parser.error(str(error))
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    if args.plot:
        plot(curves, f"chosen: {threshold:g}", args.plot)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
