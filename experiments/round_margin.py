"""Should the file-only round's answer need a margin to be shown? Re-decided per model on recorded answers.

The file-only round (prompt.file_only_round) shows the answer to the file-only prompt when the
model's mean log-probability per token for it is higher than for the retrieving prompt's answer
(the retrieving one on a tie): a margin of 0. The rule was chosen with the 0.5B. Records made with
the round on hold both answers' exact match and confidence (`round_em`, `round_logprob`), so any
margin can be scored with no model: the file-only answer shown when its confidence exceeds the
retrieving one's by more than the margin (a negative margin favours the file alone).

    python experiments/round_margin.py eval/results/devset-ten-em-gpu-1.5b/records.jsonl.xz \
        --strategy fragrel@0.5 --out eval/results/devset-ten-em-gpu-1.5b/round-margin.md

Exact match in %, Δ in points with 95% paired-bootstrap intervals against the recorded rule
(margin 0) and against `--baseline` (vanilla) over the tasks both answered.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from repomem.evaluation.report import format_interval, paired_bootstrap
from repomem.evaluation.run import read_results, records_named, strategy_and_alpha

MARGINS = (-0.1, -0.05, -0.02, 0.0, 0.02, 0.05, 0.1, 0.2)  # nats per token


def shown_with_margin(round_em: np.ndarray, round_logprob: np.ndarray, margin: float) -> np.ndarray:
    """Exact match of the answer shown per task. round_em, round_logprob: (tasks, 2), the
    retrieving prompt's answer first; a missing confidence is -inf (never shown over the other)."""
    file_only = round_logprob[:, 1] > round_logprob[:, 0] + margin
    return np.where(file_only, round_em[:, 1], round_em[:, 0])


def margin_table(records: list[dict], strategy: str, baseline: str, margins: tuple[float, ...]) -> str:
    name, alpha = strategy_and_alpha(strategy)
    rounds = {r["task_id"]: r for r in records_named(records, name, alpha) if len(r.get("round_em") or []) == 2}
    base_name, base_alpha = strategy_and_alpha(baseline)
    base = {r["task_id"]: r for r in records_named(records, base_name, base_alpha)}
    if not rounds.keys() & base.keys():
        raise ValueError(f"no task has both a {baseline} record and a {strategy} record with the file-only "
                         "round's two answers (round_em of length 2)")
    lines = [f"Exact match in % of {strategy} with the file-only round, the file-only answer shown when its "
             f"mean log-probability per token beats the retrieving answer's by more than the margin "
             f"(0: the shipped rule). Δ in points, 95% paired bootstrap.", ""]
    for split in ("line", "api"):
        ids = sorted(t for t, r in rounds.items() if r["split"] == split and t in base)
        if not ids:
            continue
        round_em = np.array([rounds[t]["round_em"] for t in ids], dtype=float)
        round_logprob = np.array([[-np.inf if x is None else x for x in rounds[t]["round_logprob"]] for t in ids])
        baseline_em = np.array([base[t]["em"] for t in ids], dtype=float)
        shipped = shown_with_margin(round_em, round_logprob, 0.0)
        ceiling = round_em.max(axis=1)
        lines += [f"### {split} ({len(ids)} tasks; {baseline} {baseline_em.mean() * 100:.1f}, "
                  f"a perfect chooser {ceiling.mean() * 100:.1f})", "",
                  f"| margin | exact match | Δ vs margin 0 | Δ vs {baseline} |", "|---:|---:|---|---|"]
        for margin in margins:
            shown = shown_with_margin(round_em, round_logprob, margin)
            lines.append(f"| {margin:+.2f} | {shown.mean() * 100:.1f} | "
                         f"{format_interval(paired_bootstrap(shown, shipped))} | "
                         f"{format_interval(paired_bootstrap(shown, baseline_em))} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, nargs="+", help="results files (.jsonl or .jsonl.xz)")
    parser.add_argument("--strategy", default="fragrel@0.5", help="the records made with the file-only round")
    parser.add_argument("--baseline", default="vanilla")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    missing = [path for path in args.records if not path.is_file()]
    if missing:
        parser.error(f"no such file: {missing[0]}")
    try:
        text = margin_table([r for path in args.records for r in read_results(path)], args.strategy, args.baseline,
                            MARGINS)
    except ValueError as error:
        parser.error(str(error))
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
