"""Retrieval only when a cheap file-only draft is unsure (issue 36, item 3), replayed from records.

    python experiments/gated_retrieval.py --draft DRAFT.jsonl --retrieving OWN.jsonl --second FILE.jsonl \
        [--strategy fragrel@0.5] [--quick accelerate,optuna,torchmetrics] [--out gate.md] [--plot gate.png]

The default completes the retrieving prompt, then the file-only prompt of the same budget, and
shows the answer the model is surer of (mean log-probability per token). Draft first turns that
round: the model first completes a *short* file-only prompt (the draft: `infile` run with a smaller
`--prompt-tokens`); when the draft's mean log-probability is at least a threshold it is shown and
nothing is retrieved, otherwise the retrieving prompt is completed too and the surer of the two
answers is shown. On a CPU that is what the first answer waits for: a short prompt instead of two
long ones.

Three results files of real generations on the same tasks, each named by `--strategy`-style
names (STRATEGY[@ALPHA]): DRAFT (`infile` at the short budget), OWN (the retrieving strategy with
`prompt.file_only_round=false`: its own prompt's answer) and FILE (`infile` at the retrieving
budget: the default's second opinion, the same prompt). So every exact match below is the one a
run of that policy would have. One threshold for both splits (the engine cannot tell a line task
from an API one), chosen on the quick set's repositories (highest exact match, then the least
retrieval) and reported on the others too. Cost per completion: the model's seconds as measured
in those runs (prompt evaluation and decoding on this CPU) and the tokens it evaluated.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from opinion_selection import OWN_ROUND, UnknownOpinion, own_logprob, own_records
from prompt_by_repository import QUICK

from repomem.evaluation.report import format_interval, paired_bootstrap
from repomem.evaluation.run import read_results

QUANTILES = 41  # thresholds tried: quantiles 0, 2.5, ..., 100% of the quick set's draft confidences


@dataclass(frozen=True)
class Answer:
    right: bool
    logprob: float  # mean log-probability per generated token
    seconds: float  # the model's time for this prompt (prompt evaluation and decoding)
    tokens: int  # prompt + generated tokens evaluated


@dataclass(frozen=True)
class Task:
    split: str
    repo: str
    draft: Answer
    own: Answer
    second: Answer

    def default(self) -> tuple[bool, float, int]:
        """The default as shipped: both long prompts, the surer answer (the retrieving one on a tie)."""
        right = self.second.right if self.second.logprob > self.own.logprob else self.own.right
        return right, self.own.seconds + self.second.seconds, self.own.tokens + self.second.tokens

    def gated(self, threshold: float) -> tuple[bool, float, int, bool]:
        """Draft first: (exact match, seconds, tokens, retrieved) at `threshold`."""
        if self.draft.logprob >= threshold:
            return self.draft.right, self.draft.seconds, self.draft.tokens, False
        right = self.draft.right if self.draft.logprob > self.own.logprob else self.own.right
        return right, self.draft.seconds + self.own.seconds, self.draft.tokens + self.own.tokens, True


def _answers(path: Path, name: str) -> dict[str, tuple[dict, Answer]]:
    """task id -> (record, its own prompt's answer) of the named opinion in one results file."""
    out = {}
    for record in own_records(read_results(path), name):
        timings = record.get("timings_ms") or {}
        seconds = (float(timings.get("prompt", 0.0)) + float(timings.get("generate", 0.0))) / 1000
        tokens = int(record["tokens"]["prompt"]) + int(record["tokens"]["generated"])
        out[record["task_id"]] = (record, Answer(bool(record["round_em"][OWN_ROUND]), own_logprob(record),
                                                 seconds, tokens))
    return out


def paired_tasks(draft: Path, own: Path, second: Path, strategy: str) -> list[Task]:
    """The tasks all three files answered, in task order."""
    drafts, owns, seconds = _answers(draft, "infile"), _answers(own, strategy), _answers(second, "infile")
    common = sorted(set(drafts) & set(owns) & set(seconds))
    if not common:
        raise ValueError("no task is in all three files")
    return [Task(owns[t][0]["split"], owns[t][0]["repo"], drafts[t][1], owns[t][1], seconds[t][1]) for t in common]


def choose(tasks: list[Task]) -> float:
    """The threshold with the highest exact match on these tasks, then the least retrieval."""
    confidences = np.array(sorted(t.draft.logprob for t in tasks))
    grid = sorted({*np.quantile(confidences, np.linspace(0, 1, QUANTILES)).tolist(), float("inf")})

    def merit(threshold: float) -> tuple[int, int]:
        outcomes = [t.gated(threshold) for t in tasks]
        return sum(o[0] for o in outcomes), -sum(o[3] for o in outcomes)

    return max(grid, key=merit)


def _seconds(mean: float) -> str:
    """Mean seconds per completion; "n/a" for records without timings (slimmed GPU records)."""
    return f"{mean:.2f}" if mean > 0 else "n/a"


def table(tasks: list[Task], quick: set[str], threshold: float, tuned: bool) -> str:
    how = (f"chosen on {', '.join(sorted(quick))} (highest EM over both splits, then least retrieval)"
           if tuned else "given, not tuned on these tasks")
    lines = [f"Threshold on the draft's mean log-probability per token, one for both splits, {how}: "
             f"**{threshold:.4g}**. EM in %; Δ against the default as shipped, with a 95% paired bootstrap "
             "interval; seconds and tokens: what the model spent per completion in these runs.", "",
             "| split | set | tasks | retrieved for | draft EM | retrieving alone EM | default EM | gated EM "
             "| Δ gated − default | seconds default | seconds gated | tokens default | tokens gated |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for split in ("line", "api"):
        ids = [t for t in tasks if t.split == split]
        sets = {"quick (tuned)" if tuned else "quick": [t for t in ids if t.repo in quick],
                "other": [t for t in ids if t.repo not in quick], "all": ids}
        for name, chosen in sets.items():
            if not chosen:
                continue
            default = np.array([t.default() for t in chosen], dtype=float)
            gated = np.array([t.gated(threshold) for t in chosen], dtype=float)
            draft = np.mean([t.draft.right for t in chosen]) * 100
            alone = np.mean([t.own.right for t in chosen]) * 100
            delta = format_interval(paired_bootstrap(gated[:, 0], default[:, 0]))
            lines.append(f"| {split} | {name} | {len(chosen)} | {gated[:, 3].mean() * 100:.0f}% | {draft:.1f} | "
                         f"{alone:.1f} | {default[:, 0].mean() * 100:.1f} | {gated[:, 0].mean() * 100:.1f} | {delta} | "
                         f"{_seconds(default[:, 1].mean())} | {_seconds(gated[:, 1].mean())} | "
                         f"{default[:, 2].mean():.0f} | {gated[:, 2].mean():.0f} |")
    return "\n".join(lines) + "\n"


def plot(tasks: list[Task], threshold: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid = np.quantile([t.draft.logprob for t in tasks], np.linspace(0, 1, QUANTILES)).tolist() + [float("inf")]
    timed = any(t.own.seconds > 0 for t in tasks)
    cost = 1 if timed else 2  # seconds, or tokens for records without timings
    figure, axis = plt.subplots(figsize=(6.5, 4))
    for split, colour in (("line", "tab:blue"), ("api", "tab:orange")):
        ids = [t for t in tasks if t.split == split]
        if not ids:
            continue
        curve = sorted((np.mean([t.gated(g)[cost] for t in ids]), np.mean([t.gated(g)[0] for t in ids]) * 100)
                       for g in grid)
        axis.plot([c[0] for c in curve], [c[1] for c in curve], marker=".", color=colour, label=f"{split}: draft first")
        default = np.array([t.default() for t in ids], dtype=float)
        axis.plot(default[:, cost].mean(), default[:, 0].mean() * 100, marker="*", markersize=12, color=colour,
                  linestyle="none", label=f"{split}: default")
        chosen = np.array([t.gated(threshold) for t in ids], dtype=float)
        axis.plot(chosen[:, cost].mean(), chosen[:, 0].mean() * 100, marker="o", markersize=8, fillstyle="none",
                  color=colour, linestyle="none", label=f"{split}: chosen threshold")
    axis.set_xlabel("the model's seconds per completion (this CPU)" if timed else
                    "tokens the model evaluates per completion (prompt + generated)")
    axis.set_ylabel("exact match (%)")
    axis.set_title("Draft first: thresholds swept, all tasks", fontsize=9)
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draft", type=Path, required=True, help="records of infile at the draft's budget")
    parser.add_argument("--retrieving", type=Path, required=True,
                        help="records of the retrieving strategy's own prompt (file-only round off)")
    parser.add_argument("--second", type=Path, required=True, help="records of infile at the retrieving budget")
    parser.add_argument("--strategy", default="fragrel@0.5", help="the retrieving strategy (STRATEGY[@ALPHA])")
    parser.add_argument("--quick", default=",".join(QUICK), help="the repositories the threshold is chosen on")
    parser.add_argument("--threshold", type=float, help="apply this threshold instead of choosing one")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--plot", type=Path, metavar="PNG", help="exact match against seconds, thresholds swept")
    args = parser.parse_args()
    missing = [path for path in (args.draft, args.retrieving, args.second) if not path.is_file()]
    if missing:
        parser.error(f"no such file: {missing[0]}")
    quick = set(args.quick.split(","))
    try:
        tasks = paired_tasks(args.draft, args.retrieving, args.second, args.strategy)
        tuning = [t for t in tasks if t.repo in quick]
        if args.threshold is None and not tuning:
            raise ValueError(f"no task of the quick set's repositories ({', '.join(sorted(quick))}); "
                             "name them with --quick or give --threshold")
        threshold = choose(tuning) if args.threshold is None else args.threshold
    except (UnknownOpinion, ValueError) as error:
        parser.error(str(error))
    text = table(tasks, quick, threshold, args.threshold is None)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    if args.plot:
        plot(tasks, threshold, args.plot)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
