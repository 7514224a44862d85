"""What the loop cut (`postprocess.loop_end`) would cut of real lines and of a model's answers,
for each number of repeats, to choose `LOOP_REPEATS`.

    python scripts/loop_cut_counts.py --tasks corpora/ten/line.jsonl --tasks corpora/ten/api.jsonl \
        --records eval/results/devset-ten-em-gpu/records.jsonl.xz \
        --records eval/results/languages-em-gpu/records.jsonl.xz --out counts.md

Prints the table (the one in eval/results/loop-cut/README.md) and writes it to `--out`.

A task's real line (its ground truth) that the cut would shorten is a right answer the product
could no longer give; a right answer cut is the same seen in a model's records; a wrong answer
cut is a generation stopped sooner (the characters after the cut: decoding saved). Each task's
prompt is the file's text the model was shown (a run it holds is no loop); records are matched to
their task by id, and a record without its task is judged with no file text (stricter).
"""

from __future__ import annotations

import argparse
import ast
import json
import lzma
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.completion.postprocess import LOOP_REPEATS, loop_end  # noqa: E402

COUNTS = (3, 4, 5, 6, 8, 12)


def read_jsonl(path: Path) -> list[dict]:
    opened = lzma.open(path, "rt") if path.suffix == ".xz" else path.open()
    with opened as handle:
        return [json.loads(line) for line in handle if line.strip()]


def task_of(row: dict) -> tuple[str, str, str]:
    """(task id, ground truth, the file's text the model was shown)."""
    metadata = row["metadata"]
    if isinstance(metadata, str):
        metadata = ast.literal_eval(metadata)  # RepoEval's files hold a Python dict's repr
    return metadata["task_id"], metadata["ground_truth"], row["prompt"]


def characters_cut(text: str, shown: str, repeats: int) -> int | None:
    """How many characters the cut drops from `text` (its first looping line ends it), or None."""
    offset = 0
    for line in text.split("\n"):
        end = loop_end(line, shown, repeats)
        if end is not None:
            return len(text) - (offset + end)
        offset += len(line) + 1
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=Path, action="append", default=[])
    parser.add_argument("--records", type=Path, action="append", default=[])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    tasks = {task_id: (truth, shown) for path in args.tasks for task_id, truth, shown in map(task_of, read_jsonl(path))}
    records = [record for path in args.records for record in read_jsonl(path)]
    rows = ["| repeats | real lines cut | right answers cut | wrong answers cut | their characters dropped |",
            "| ---: | ---: | ---: | ---: | ---: |"]
    examples: list[str] = []
    # The cut before it read the file (2026-12-04): 12 repeats, whatever the file showed.
    for repeats, reads_file in [(12, False), *((count, True) for count in COUNTS)]:
        truths_cut = [truth for truth, shown in tasks.values()
                      if characters_cut(truth, shown if reads_file else "", repeats) is not None]
        right = wrong = dropped = 0
        for record in records:
            shown = tasks.get(record["task_id"], ("", ""))[1] if reads_file else ""
            cut = characters_cut(record["prediction"], shown, repeats)
            if cut is None:
                continue
            if record["em"]:
                right += 1
                if repeats >= LOOP_REPEATS and reads_file:
                    examples.append(f"- {repeats} repeats cut a right answer: `{record['prediction'].strip()[:100]}`")
            else:
                wrong += 1
                dropped += cut
        mark = " (shipped)" if repeats == LOOP_REPEATS else ""
        mark = mark if reads_file else ", a run the file shows cut too (before)"
        rows.append(f"| {repeats}{mark} | {len(truths_cut)} | {right} | {wrong} | {dropped:,} |")
        if repeats == LOOP_REPEATS - 1 and reads_file:
            examples += [f"- {repeats} repeats cut the real line `{truth.strip()[:100]}`" for truth in truths_cut[:5]]
    report = "\n".join([f"{len(tasks):,} tasks' real lines, {len(records):,} answers", "", *rows, "",
                        *sorted(set(examples)), ""])
    print(report)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
