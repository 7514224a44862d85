"""How far choosing among answers can go: several prompts' answers, the surer one shown, and the ceiling.

The file-only round shows the surer of two answers (the retrieving prompt's and the file-only
one's, by mean log-probability per token). This asks the same of any set of prompts a run already
answered, with no model: for each set of opinions, the exact match of showing the surer answer
(the first-named on a tie, as the engine does) and the ceiling, a chooser that always picks a
right answer when one of them has it. If the ceiling itself is near the baseline, no chooser
will get far: better answers must enter the pool.

    python experiments/opinion_selection.py eval/results/devset-ten-em-gpu/records.jsonl.xz \
        --sets fragrel@0.5,infile fragrel@0,infile fragrel@0.5,fragrel@0,vanilla,infile

An opinion is a strategy (`vanilla`, `repocoder+fragrel`: the records must hold it at one alpha
and one configuration) or `strategy@alpha`; sets are comma-separated. Its answer is the record's
own prompt's (`round_em[0]`, `round_logprob[0]`), so a record made with the file-only round on
counts as its retrieving answer alone. Exact match in %, Δ in points with 95% paired-bootstrap
intervals (the report's seed) over the tasks every named opinion answered.

`--shown FILE` writes the first set's shown answers as records (the first-named opinion's record,
its prompt's figures kept, the answer and its scores taken from the surer opinion's record):
the default derived from a run of fragrel's own prompt and one of `infile`, for
`scripts/compare_configs.py` to pair against other configurations.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from repomem.evaluation.report import format_interval, paired_bootstrap
from repomem.evaluation.run import read_results, records_named, strategy_and_alpha

OWN_ROUND = 0  # round_em[0] / round_logprob[0]: the answer to the strategy's own prompt


class UnknownOpinion(ValueError):
    """A named opinion the records cannot answer: none, or more than one alpha or configuration."""


def answers_by_task(records: list[dict], names: Iterable[str]) -> dict[str, dict[str, tuple[bool, float]]]:
    """task id -> named opinion -> (exact match, mean log-probability per token) of its own prompt.
    UnknownOpinion if a name matches no records, or records of several alphas or configurations."""
    answers: dict[str, dict[str, tuple[bool, float]]] = {}
    for name in dict.fromkeys(names):
        for record in own_records(records, name):
            answers.setdefault(record["task_id"], {})[name] = (bool(record["round_em"][OWN_ROUND]),
                                                               own_logprob(record))
    return answers


def own_records(records: list[dict], name: str) -> list[dict]:
    """The records of one named opinion (STRATEGY[@ALPHA]) that hold their rounds' exact match.
    UnknownOpinion if the name matches none, or records of several alphas or configurations."""
    try:
        strategy, alpha = strategy_and_alpha(name)
    except ValueError as error:
        raise UnknownOpinion(f"{name}: {error}") from None
    chosen = [r for r in records_named(records, strategy, alpha) if r.get("round_em")]
    runs = {(r.get("alpha"), r.get("config", "")) for r in chosen}
    if not runs:
        have = sorted({f"{r['strategy']}@{r.get('alpha', 0):g}" for r in records
                       if "error" not in r and r.get("round_em")})
        raise UnknownOpinion(f"no records of {name} (these have: {', '.join(have)})")
    if len(runs) > 1:
        raise UnknownOpinion(f"{name} names records of {len(runs)} runs (alphas or configurations): "
                             f"{', '.join(sorted(f'@{a:g} {c}'.strip() for a, c in runs))}; name one alpha "
                             "or pass one configuration's results")
    return chosen


def own_logprob(record: dict) -> float:
    """The own prompt's answer's mean log-probability per token; -inf when none was recorded."""
    logprob = (record.get("round_logprob") or [None])[OWN_ROUND]
    return -np.inf if logprob is None else float(logprob)


def surest(logprobs: list[float]) -> int:
    """Position of the answer the model was surest of (mean log-probability per token); the first
    wins a tie."""
    return max(range(len(logprobs)), key=lambda i: (logprobs[i], -i))


def surer(opinions: dict[str, tuple[bool, float]], names: list[str]) -> bool:
    """Exact match of the answer the model was surest of; the first-named wins a tie."""
    return opinions[names[surest([opinions[name][1] for name in names])]][0]


# A record's fields that describe its answer (the rest describe its prompt and its run).
ANSWER_FIELDS = ("prediction", "completion", "em", "es", "call_match", "tokens", "finish_reason")


def shown_records(records: list[dict], names: list[str]) -> list[dict]:
    """Per task every named opinion answered: the first-named opinion's record with the surer
    opinion's answer (ANSWER_FIELDS: runs with the file-only round off, whose answer is their own
    prompt's), `chosen_round` its position in `names`, and `config` naming
    the set; `round_em` / `round_logprob` hold each opinion's, in the order named."""
    by_name = {name: {r["task_id"]: r for r in own_records(records, name)} for name in dict.fromkeys(names)}
    shown = []
    for task_id, first in by_name[names[0]].items():
        if not all(task_id in by_name[name] for name in names):
            continue
        opinions = [by_name[name][task_id] for name in names]
        logprobs = [own_logprob(r) for r in opinions]
        best = surest(logprobs)
        record = dict(first)
        record.update({field: opinions[best][field] for field in ANSWER_FIELDS if field in opinions[best]})
        record["em"] = bool(opinions[best]["round_em"][OWN_ROUND])  # its own prompt's, as `surer` counts
        record.update(config=f"surer of {', '.join(names)} ({first.get('config', '')})".replace(" ()", ""),
                      chosen_round=best, round_em=[bool(r["round_em"][OWN_ROUND]) for r in opinions],
                      round_logprob=[None if np.isinf(x) else x for x in logprobs])
        shown.append(record)
    return shown


@dataclass
class SetRow:
    """One set of opinions on one split: exact match (%) and Δ (points, 95% interval) vs the baseline."""

    names: list[str]
    shown: float
    shown_delta: tuple[float, float, float]
    shown_vs_reference: tuple[float, float, float]
    ceiling: float
    ceiling_delta: tuple[float, float, float]


def set_rows(records: list[dict], sets: list[list[str]], baseline: str) -> tuple[int, dict[str, tuple]]:
    """Tasks compared, and per split: (tasks, baseline EM %, one SetRow per set)."""
    answers = answers_by_task(records, [baseline, *(name for names in sets for name in names)])
    split_of = {r["task_id"]: r["split"] for r in records}
    needed = {name for names in sets for name in names} | {baseline}
    tasks = sorted(t for t, opinions in answers.items() if needed <= opinions.keys())
    by_split: dict[str, tuple] = {}
    for split in ("line", "api"):
        ids = [t for t in tasks if split_of[t] == split]
        if not ids:
            continue
        base = np.array([answers[t][baseline][0] for t in ids])
        first = np.array([surer(answers[t], sets[0]) for t in ids])
        rows = []
        for names in sets:
            shown = np.array([surer(answers[t], names) for t in ids])
            ceiling = np.array([any(answers[t][n][0] for n in names) for t in ids])
            rows.append(SetRow(names, shown.sum() * 100 / shown.size, paired_bootstrap(shown, base),
                               paired_bootstrap(shown, first), ceiling.sum() * 100 / ceiling.size,
                               paired_bootstrap(ceiling, base)))
        by_split[split] = (len(ids), base.sum() * 100 / base.size, rows)
    return len(tasks), by_split


def table(records: list[dict], sets: list[list[str]], baseline: str) -> str:
    n_tasks, by_split = set_rows(records, sets, baseline)
    reference = " + ".join(sets[0])
    lines = [f"Exact match in % over {n_tasks} tasks; the surer answer of each set of opinions, the "
             f"ceiling (a right answer whenever one of them has it). Δ in points vs {baseline} and vs "
             f"{reference}, 95% paired bootstrap.", ""]
    for split, (n_split, base_em, rows) in by_split.items():
        lines += [f"### {split} ({n_split} tasks, {baseline} {base_em:.1f})", "",
                  f"| opinions | surer answer | Δ vs {baseline} | Δ vs {reference} | ceiling | Δ vs {baseline} |",
                  "|---|---:|---|---|---:|---|"]
        for row in rows:
            lines.append(f"| {' + '.join(row.names)} | {row.shown:.1f} | {format_interval(row.shown_delta)} | "
                         f"{format_interval(row.shown_vs_reference)} | {row.ceiling:.1f} | "
                         f"{format_interval(row.ceiling_delta)} |")
        lines.append("")
    return "\n".join(lines)


def plot(records: list[dict], sets: list[list[str]], baseline: str, path: Path, goal: float) -> None:
    """Δ EM vs the baseline per set: the surer answer (with its interval) beside its ceiling, one
    panel per split, and the goal as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _, by_split = set_rows(records, sets, baseline)
    figure, axes = plt.subplots(1, len(by_split), figsize=(6 * len(by_split), 4.5), squeeze=False)
    for axis, (split, (n_split, base_em, rows)) in zip(axes[0], by_split.items()):
        positions = np.arange(len(rows))
        shown = [row.shown_delta[0] for row in rows]
        errors = [[row.shown_delta[0] - row.shown_delta[1] for row in rows],
                  [row.shown_delta[2] - row.shown_delta[0] for row in rows]]
        axis.bar(positions - 0.2, shown, width=0.4, yerr=errors, capsize=3, label="surer answer shown")
        axis.bar(positions + 0.2, [row.ceiling_delta[0] for row in rows], width=0.4, alpha=0.45,
                 label="ceiling (a perfect chooser)")
        axis.axhline(goal, color="black", linestyle="--", linewidth=1, label=f"goal: +{goal:g}")
        axis.set_xticks(positions, ["\n+ ".join(row.names) for row in rows], fontsize=7)
        axis.set_title(f"{split} (n = {n_split}, {baseline} {base_em:.1f}% EM)")
        axis.set_ylabel(f"Δ EM vs {baseline}, points")
        axis.legend(fontsize=8, loc="upper left")
    figure.suptitle("Choosing among recorded answers (error bars: 95% paired bootstrap)", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, nargs="+", help="results files (.jsonl or .jsonl.xz)")
    parser.add_argument("--sets", nargs="+", required=True, metavar="A,B[,...]",
                        help="sets of opinions, e.g. fragrel@0.5,infile; the first set is the reference")
    parser.add_argument("--baseline", default="vanilla")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--plot", type=Path, metavar="PNG", help="also draw the Δ of each set and its ceiling")
    parser.add_argument("--goal", type=float, default=5.0, help="the goal line of the plot (points over the baseline)")
    parser.add_argument("--shown", type=Path, metavar="JSONL",
                        help="also write the first set's shown answers as records (see the module's text)")
    args = parser.parse_args()
    missing = [path for path in args.records if not path.is_file()]
    if missing:
        parser.error(f"no such file: {missing[0]}")
    records = [r for path in args.records for r in read_results(path)]
    sets = [[name.strip() for name in names.split(",")] for names in args.sets]
    try:
        answers_by_task(records, [args.baseline, *(name for names in sets for name in names)])
    except UnknownOpinion as error:
        parser.error(str(error))
    text = table(records, sets, args.baseline)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    if args.plot:
        plot(records, sets, args.baseline, args.plot, args.goal)
    if args.shown:
        args.shown.write_text("".join(json.dumps(r) + "\n" for r in shown_records(records, sets[0])),
                              encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
