"""Does the model read the options a memory strategy shows it, or pick by position?

    python experiments/memory_choice_probe.py RESULTS.jsonl [--calls 40] [--model NAME]

Takes the navigation (MemWalker) and look-up (ReadAgent) calls recorded in evaluation results and
asks the model each question twice, as recorded and with its numbered options in reversed order
(the same options, renumbered), greedy both times; compares how often each answer was option 1,
and how often both answers name the same option (content) rather than the same position, beside
how often a chooser at random would (the mean of 1/options). A model that reads would keep its
choice when the order flips. `--model` names a packaged model
(`repomem model list`; default: the embedded default), so calls recorded with one model probe
another. Results: eval/results/memory-choice-probe[-NAME].json and a table.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.backends.base import GenerationRequest  # noqa: E402
from repomem.backends.factory import open_gguf  # noqa: E402
from repomem.backends.models import SMALL_MODEL, model_named, pull_model  # noqa: E402
from repomem.completion.model_calls import chosen_numbers  # noqa: E402
from repomem.config import Config  # noqa: E402
from repomem.failures import Failure  # noqa: E402

OPTION = re.compile(r"^(\d+)\. (.*)$")
PURPOSES = ("navigate", "look-up")


def options_of(prompt: str) -> tuple[list[str], int, int] | None:
    """The numbered option lines (without "0. ... go back"), and where they start and end."""
    lines = prompt.split("\n")
    start = next((i for i, line in enumerate(lines) if line.endswith(("Its parts:", "in the repository:"))), None)
    if start is None:
        return None
    body = []
    for line in lines[start + 1:]:
        match = OPTION.match(line)
        if match is None or match.group(1) == "0":
            break
        body.append(match.group(2))
    return (body, start + 1, start + 1 + len(body)) if len(body) >= 2 else None


def reversed_prompt(prompt: str) -> tuple[str, list[str]] | None:
    found = options_of(prompt)
    if found is None:
        return None
    body, first, last = found
    lines = prompt.split("\n")
    flipped = list(reversed(body))
    lines[first:last] = [f"{n}. {text}" for n, text in enumerate(flipped, start=1)]
    return "\n".join(lines), body


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--calls", type=int, default=40, help="calls to ask again, per purpose")
    parser.add_argument("--model", default=SMALL_MODEL.name, help="a packaged model's name (repomem model list)")
    parser.add_argument("--out", type=Path, help="default: eval/results/memory-choice-probe[-NAME].json")
    args = parser.parse_args()
    suffix = "" if args.model == SMALL_MODEL.name else f"-{args.model}"
    out = args.out or ROOT / "eval" / "results" / f"memory-choice-probe{suffix}.json"
    calls: dict[str, list[dict]] = {p: [] for p in PURPOSES}
    for line in args.results.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line being written by a running evaluation
        for call in record.get("model_calls", ()):
            if call["purpose"] in calls and len(calls[call["purpose"]]) < args.calls and options_of(call["prompt"]):
                calls[call["purpose"]].append(call)
    packaged = model_named(args.model)
    model = packaged if isinstance(packaged, Failure) else pull_model(packaged)
    if isinstance(model, Failure):
        print(model.message, file=sys.stderr)
        return 1
    backend = open_gguf(model, Config())
    if isinstance(backend, Failure):
        print(backend.message, file=sys.stderr)
        return 1
    rows = {}
    try:
        for purpose, chosen in calls.items():
            first_is_1 = flipped_is_1 = same_option = asked = 0
            answers = []  # per call: options shown, the option chosen as shown and reversed (as shown's numbers)
            for call in chosen:
                flipped = reversed_prompt(call["prompt"])
                if flipped is None:
                    continue
                prompt, body = flipped
                n = len(body)
                stops = [*backend.template.stops, "\n"]
                shown = backend.generate(GenerationRequest(call["prompt"], 12, stops, 60.0))
                answer = backend.generate(GenerationRequest(prompt, 12, stops, 60.0))
                if isinstance(shown, Failure) or isinstance(answer, Failure):
                    continue
                original = chosen_numbers(shown.text, range(1, n + 1), 1)
                if not original:
                    continue
                again = chosen_numbers(answer.text, range(1, n + 1), 1)
                answers.append({"options": n, "shown": original[0], "reversed": n + 1 - again[0] if again else None})
                asked += 1
                first_is_1 += original[0] == 1
                flipped_is_1 += bool(again) and again[0] == 1
                same_option += bool(again) and n + 1 - again[0] == original[0]
            chance = sum(1 / a["options"] for a in answers) / max(len(answers), 1)
            rows[purpose] = {"calls": asked, "first_answer_is_1": first_is_1, "reversed_answer_is_1": flipped_is_1,
                             "same_option_both_orders": same_option, "same_option_by_chance": round(chance, 3),
                             "answers": answers}
    finally:
        backend.close()
    out.write_text(json.dumps({"results": str(args.results), "model": backend.name, "rows": rows}, indent=2)
                   + "\n", encoding="utf-8")
    table = Table(title=f"memory choices of {backend.name}: option order reversed")
    for column in ("purpose", "calls", "answer 1 (as shown)", "answer 1 (reversed)", "same option",
                   "same option by chance"):
        table.add_column(column, justify="right")
    for purpose, row in rows.items():
        n = max(row["calls"], 1)
        table.add_row(purpose, str(row["calls"]), f"{100 * row['first_answer_is_1'] / n:.0f}%",
                      f"{100 * row['reversed_answer_is_1'] / n:.0f}%",
                      f"{100 * row['same_option_both_orders'] / n:.0f}%", f"{100 * row['same_option_by_chance']:.0f}%")
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
