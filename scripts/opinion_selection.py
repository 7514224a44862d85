"""How far choosing among answers can go: several prompts' answers, the surer one shown, and the ceiling.

The file-only round shows the surer of two answers (the retrieving prompt's and the file-only
one's, by mean log-probability per token). This asks the same of any set of prompts a run already
answered, with no model: for each set of opinions, the exact match of showing the surer answer
(the first-named on a tie, as the engine does) and the ceiling, a chooser that always picks a
right answer when one of them has it. If the ceiling itself is near the baseline, no chooser
will get far: better answers must enter the pool.

    python scripts/opinion_selection.py eval/results/devset-ten-em-gpu/records.jsonl.xz \
        --sets fragrel@0.5+infile fragrel@0+infile fragrel@0.5+fragrel@0+vanilla+infile

An opinion is a strategy (`vanilla`, `infile`) or `strategy@alpha`; its answer is the record's
own prompt's (`round_em[0]`, `round_logprob[0]`), so a record made with the file-only round on
counts as its retrieving answer alone. Exact match in %, Δ in points with 95% paired-bootstrap
intervals (the report's seed) over the tasks every named opinion answered.
"""

from __future__ import annotations

import argparse
import json
import lzma
from pathlib import Path

import numpy as np

from repomem.evaluation.report import format_interval, paired_bootstrap

OWN_ROUND = 0  # round_em[0] / round_logprob[0]: the answer to the strategy's own prompt


def read_records(path: Path) -> list[dict]:
    """Records of a results file, plain or xz-compressed JSON lines (the slim copies in eval/results)."""
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def opinion_name(record: dict) -> str:
    """`fragrel@0.5` for a strategy that ranks with an alpha, the bare name otherwise."""
    return f"{record['strategy']}@{record['alpha']:g}" if record["strategy"].startswith("fragrel") \
        else record["strategy"]


def answers_by_task(records: list[dict]) -> dict[str, dict[str, tuple[bool, float]]]:
    """task id -> opinion -> (exact match, mean log-probability per token) of its own prompt."""
    answers: dict[str, dict[str, tuple[bool, float]]] = {}
    for record in records:
        if "error" in record or not record.get("round_em"):
            continue
        logprob = (record.get("round_logprob") or [None])[OWN_ROUND]
        answers.setdefault(record["task_id"], {})[opinion_name(record)] = (
            bool(record["round_em"][OWN_ROUND]), -np.inf if logprob is None else float(logprob))
    return answers


def surer(opinions: dict[str, tuple[bool, float]], names: list[str]) -> bool:
    """Exact match of the answer the model was surest of; the first-named wins a tie."""
    best = max(range(len(names)), key=lambda i: (opinions[names[i]][1], -i))
    return opinions[names[best]][0]


def table(records: list[dict], sets: list[list[str]], baseline: str) -> str:
    answers = answers_by_task(records)
    split_of = {r["task_id"]: r["split"] for r in records}
    needed = {name for names in sets for name in names} | {baseline}
    tasks = sorted(t for t, opinions in answers.items() if needed <= opinions.keys())
    reference = " + ".join(sets[0])
    lines = [f"Exact match in % over {len(tasks)} tasks; the surer answer of each set of opinions, the "
             f"ceiling (a right answer whenever one of them has it). Δ in points vs {baseline} and vs "
             f"{reference}, 95% paired bootstrap.", ""]
    for split in ("line", "api"):
        ids = [t for t in tasks if split_of[t] == split]
        if not ids:
            continue
        base = np.array([answers[t][baseline][0] for t in ids])
        first = np.array([surer(answers[t], sets[0]) for t in ids])
        lines += [f"### {split} ({len(ids)} tasks, {baseline} {base.sum() * 100 / base.size:.1f})", "",
                  f"| opinions | surer answer | Δ vs {baseline} | Δ vs {reference} | ceiling | Δ vs {baseline} |",
                  "|---|---:|---|---|---:|---|"]
        for names in sets:
            shown = np.array([surer(answers[t], names) for t in ids])
            ceiling = np.array([any(answers[t][n][0] for n in names) for t in ids])
            lines.append(f"| {' + '.join(names)} | {shown.sum() * 100 / shown.size:.1f} | "
                         f"{format_interval(paired_bootstrap(shown, base))} | "
                         f"{format_interval(paired_bootstrap(shown, first))} | "
                         f"{ceiling.sum() * 100 / ceiling.size:.1f} | "
                         f"{format_interval(paired_bootstrap(ceiling, base))} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, nargs="+", help="results files (.jsonl or .jsonl.xz)")
    parser.add_argument("--sets", nargs="+", required=True, metavar="A+B[+...]",
                        help="sets of opinions, e.g. fragrel@0.5+infile; the first is the reference")
    parser.add_argument("--baseline", default="vanilla")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    missing = [path for path in args.records if not path.is_file()]
    if missing:
        parser.error(f"no such file: {missing[0]}")
    records = [r for path in args.records for r in read_records(path)]
    sets = [names.split("+") for names in args.sets]
    known = {opinion_name(r) for r in records}
    unknown = sorted({n for names in sets for n in names} - known) or ([args.baseline] if args.baseline not in known
                                                                      else [])
    if unknown:
        parser.error(f"no records of {', '.join(unknown)} (these have: {', '.join(sorted(known))})")
    text = table(records, sets, args.baseline)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
