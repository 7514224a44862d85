"""Retrieval only when it helps (issue 36, item 3), replayed from evaluation records.

    python scripts/gated_retrieval.py INFILE.jsonl RETRIEVING.jsonl [--strategy fragrel] [--alpha 0.5] \
        [--quick accelerate,optuna,torchmetrics] [--plot gate.png] > gate.md

The model first completes from the file alone (`infile`); when that draft's mean log-probability per
token is at least a threshold, it is shown and nothing is retrieved; otherwise the retrieving
strategy's completion is. Every number comes from records of real generations (both strategies
run on every task, with `round_logprob` reported by the backend), so the gate's exact match is the
exact match a gated run would have. The threshold is chosen on the quick set's repositories only
(the highest exact match there; ties to the one that retrieves least) and reported on the others,
so its figures are not tuned on the tasks they describe.

Cost is counted in tokens the model evaluates, which is what a CPU pays for (a prompt token costs
the embedded model about 8 ms on two cores, DESIGN.md §5): always retrieving evaluates the
retrieving prompt; the gate evaluates the draft's prompt on every task and the retrieving prompt
on the tasks it retrieves for.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from prompt_by_repository import QUICK, paired_interval

GRID = 41  # thresholds tried: quantiles 0, 2.5, ..., 100% of the drafts' confidence


def _records(path: Path, strategy: str, alpha: float | None) -> dict[str, dict]:
    out = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if record.get("strategy") != strategy or "error" in record or record.get("mode") != "model":
                continue
            if alpha is not None and abs(float(record["alpha"]) - alpha) > 1e-9:
                continue
            out[record["task_id"]] = record
    return out


def _confidence(record: dict) -> float:
    value = (record.get("round_logprob") or [None])[0]
    return float(value) if isinstance(value, int | float) else float("-inf")


def _tokens(record: dict) -> int:
    return int(record["tokens"]["prompt"]) + int(record["tokens"]["generated"])


def _gate(pairs: list[tuple[dict, dict]], threshold: float) -> tuple[list[tuple[int, int]], float, float, float]:
    """(always-retrieve EM, gated EM) per task, the share retrieved for, and mean tokens evaluated
    always and gated."""
    em_pairs, retrieved, always, gated = [], 0, 0, 0
    for draft, retrieving in pairs:
        keep_draft = _confidence(draft) >= threshold
        em_pairs.append((int(retrieving["em"]), int(draft["em"] if keep_draft else retrieving["em"])))
        retrieved += not keep_draft
        always += _tokens(retrieving)
        gated += _tokens(draft) + (0 if keep_draft else _tokens(retrieving))
    n = len(pairs)
    return em_pairs, retrieved / n, always / n, gated / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("infile", type=Path, help="records of the file-only draft (strategy infile)")
    parser.add_argument("retrieving", type=Path, help="records of the retrieving strategy")
    parser.add_argument("--strategy", default="fragrel")
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--quick", default=",".join(QUICK), help="the repositories the threshold is chosen on")
    parser.add_argument("--plot", type=Path, default=None, help="exact match against the share retrieved for")
    args = parser.parse_args()
    drafts = _records(args.infile, "infile", None)
    retrieving = _records(args.retrieving, args.strategy, args.alpha)
    quick = set(args.quick.split(","))
    by_split: dict[str, list[tuple[dict, dict]]] = defaultdict(list)
    for task, record in sorted(retrieving.items()):
        if task in drafts and drafts[task]["round_logprob"][0] is not None:
            by_split[record["split"]].append((drafts[task], record))
    if not by_split:
        print("error: no task has both a draft with a log-probability and a retrieving record", file=sys.stderr)
        return 1
    print(f"# Retrieval only when the draft is unsure: `infile` draft, else `{args.strategy}` (α={args.alpha:g})\n")
    print("Threshold on the draft's mean log-probability per token, chosen on "
          f"{', '.join(sorted(quick))} (highest EM, then least retrieval); reported on every set. EM in %, "
          "Δ against always retrieving with a 95% paired bootstrap interval; tokens = prompt + generated "
          "tokens the model evaluates per task.\n")
    print("| split | set | tasks | threshold | retrieved for | infile EM | always EM | gated EM | Δ gated − always "
          "| oracle EM | tokens always | tokens gated |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    curves = {}
    for split, pairs in sorted(by_split.items()):
        tuning = [p for p in pairs if p[1]["repo"] in quick]
        confidences = sorted(_confidence(d) for d, _ in tuning)
        candidates = [confidences[min(len(confidences) - 1, int(i * len(confidences) / (GRID - 1)))]
                      for i in range(GRID)] + [float("inf")]
        best = max(candidates, key=lambda t: (sum(b for _, b in _gate(tuning, t)[0]), -_gate(tuning, t)[1]))
        sets = {"quick (tuned)": tuning, "other": [p for p in pairs if p[1]["repo"] not in quick], "all": pairs}
        for name, chosen in sets.items():
            if not chosen:
                continue
            em_pairs, share, always, gated = _gate(chosen, best)
            n = len(chosen)
            low, high = paired_interval(em_pairs)
            always_em = sum(a for a, _ in em_pairs) * 100 / n
            gated_em = sum(b for _, b in em_pairs) * 100 / n
            draft_em = sum(int(d["em"]) for d, _ in chosen) * 100 / n
            oracle = sum(int(d["em"] or r["em"]) for d, r in chosen) * 100 / n
            print(f"| {split} | {name} | {n} | {best:.3f} | {share * 100:.0f}% | {draft_em:.1f} | {always_em:.1f} | "
                  f"{gated_em:.1f} | {gated_em - always_em:+.1f} [{low:+.1f}, {high:+.1f}] | {oracle:.1f} | "
                  f"{always:.0f} | {gated:.0f} |")
        every = sorted({_confidence(d) for d, _ in pairs})
        points = []
        for i in range(GRID):
            threshold = every[min(len(every) - 1, int(i * len(every) / (GRID - 1)))]
            em_pairs, share, _, _ = _gate(pairs, threshold)
            points.append((share * 100, sum(b for _, b in em_pairs) * 100 / len(pairs)))
        curves[split] = points
    if args.plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axis = plt.subplots(figsize=(6, 4))
        for split, points in curves.items():
            axis.plot([p[0] for p in sorted(points)], [p[1] for p in sorted(points)], marker=".", label=split)
        axis.set_xlabel("tasks retrieved for (%)")
        axis.set_ylabel("exact match (%)")
        axis.set_title("Gated retrieval: the threshold swept, all tasks")
        axis.legend()
        figure.tight_layout()
        figure.savefig(args.plot, dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
