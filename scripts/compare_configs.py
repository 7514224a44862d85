"""Exact match of several configurations, paired task by task, across results files.

`eval report` compares the strategies of one run. A configuration that differs in settings
(`eval run --set ...`, `--order`) is another run, often another file; this script pairs any of
them on the tasks they all finished and measures each against the first (the baseline):

    python scripts/compare_configs.py \
        --config vanilla=corpora/em/paper.jsonl:vanilla \
        --config fragrel=corpora/em/paper.jsonl:fragrel \
        --config vanilla+pack=corpora/em/anchored.jsonl:vanilla \
        --config anchored=corpora/em/anchored.jsonl:fragrel \
        --out eval/results/devset-anchored

A run with `--alphas` holds FragRel at several alphas: name one as `fragrel@0` (the levers, graph off).

Per split: EM and ES (percent), Δ EM vs the baseline with a 95% paired-bootstrap interval, tasks
won and lost (right where the baseline was wrong, and the reverse), and what entered the prompt
(the answer in a block; a block line within ES 0.9 of the answer's first line). Per repository:
Δ EM. Writes report.md, report.json and em.png under --out.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from repomem.evaluation.metrics import same_call
from repomem.evaluation.report import format_interval, paired_bootstrap
from repomem.evaluation.run import read_results, records_named, strategy_and_alpha


@dataclass(frozen=True)
class ConfigRow:
    split: str
    config: str
    n: int
    em: float  # percent
    es: float  # percent
    em_delta: tuple[float, float, float] | None  # vs the baseline: mean, 2.5%, 97.5% (points)
    es_delta: float | None  # points
    won: int  # right where the baseline was wrong
    lost: int
    prompt_hit: float | None  # percent: a prompt block holds the answer
    near_hit: float | None  # percent: a prompt block line within ES 0.9 of the answer's first line
    name_hit: float | None  # percent of API tasks: the called name appears in the prompt
    call_match: float | None  # percent of API tasks whose prediction calls the right function
    call_delta: tuple[float, float, float] | None  # its difference to the baseline (points)
    by_repo: dict[str, tuple[int, float]]  # repository -> (tasks, Δ EM in points)


def parse_config(text: str) -> tuple[str, Path, str]:
    name, _, rest = text.partition("=")
    path, _, strategy = rest.rpartition(":")
    if not name or not path or not strategy:
        raise argparse.ArgumentTypeError(f"expected NAME=FILE:STRATEGY[@ALPHA], got {text!r}")
    try:
        strategy_and_alpha(strategy)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"{error} in {text!r}") from None
    return name, Path(path), strategy


def load(configs: list[tuple[str, Path, str]]) -> dict[str, dict[str, dict]]:
    """config name -> task id -> its model record (errors left out)."""
    out: dict[str, dict[str, dict]] = {}
    cache: dict[Path, list[dict]] = {}
    for name, path, strategy in configs:
        records = cache.setdefault(path, read_results(path))
        strategy, alpha = strategy_and_alpha(strategy)  # fragrel@0: FragRel at alpha 0 (a run's --alphas)
        chosen = records_named(records, strategy, alpha)
        if not chosen:  # said as such, not as "no task finished by every configuration"
            at = "" if alpha is None else f" at alpha {alpha:g}"
            raise SystemExit(f"compare_configs: {name}: {path} holds no finished model records of {strategy}{at}")
        alphas = {r.get("alpha") for r in chosen}
        if len(alphas) > 1:
            raise SystemExit(f"compare_configs: {name}: {path} holds {strategy} at alphas "
                             f"{', '.join(str(a) for a in sorted(alphas, key=str))}; name one as {strategy}@ALPHA")
        # The protocol too: with the prompt left to right (the 0.5B's default) records made with and
        # without the code after the hole (`--right-context`) share their settings fingerprint, and
        # the newest of a task's two records stood for it unseen.
        settings = {(r.get("config") or "", r.get("settings") or "", r.get("typing") or "",
                     bool(r.get("right_context"))) for r in chosen}
        if len(settings) > 1:
            seen = ", ".join(sorted(f"{overrides or 'defaults'} / {fingerprint or 'unrecorded'}"
                                    + (f" / typing {typing}" if typing else "")
                                    + (" / right context" if right else "")
                                    for overrides, fingerprint, typing, right in settings))
            raise SystemExit(f"compare_configs: {name}: the {strategy} records of {path} were made under "
                             f"{len(settings)} different settings ({seen}); keep one run per file")
        out[name] = {r["task_id"]: r for r in chosen}  # the newest record of a task (a retried failure)
    # Paired on the task id: the same id must be the same task in every file (tasks rebuilt into a
    # folder reuse their ids). Records written before they carried a digest are taken on their id.
    for task_id in set.intersection(*(set(records) for records in out.values())) if out else ():
        digests = {records[task_id].get("task_digest") for records in out.values()} - {None}
        if len(digests) > 1:
            raise SystemExit(f"compare_configs: task {task_id} is another task in some of the files "
                             "(its hole or ground truth differ): compare runs of the same tasks file")
    return out


def _percent(values: list[bool | None]) -> float | None:
    """Percent true; None unless every record has the field (a rate over some records would mislead)."""
    if not values or any(v is None for v in values):
        return None
    return 100.0 * sum(bool(v) for v in values) / len(values)


def _calls(records: list[dict]) -> np.ndarray | None:
    """Whether each prediction calls the function its answer calls; None when a record lacks the
    answer (the slimmed copies of the first GPU rounds in eval/results kept none)."""
    if any("ground_truth" not in r for r in records):
        return None
    return np.array([same_call(r["prediction"], r["ground_truth"]) for r in records])


def compare(by_config: dict[str, dict[str, dict]]) -> list[ConfigRow]:
    names = list(by_config)
    common = set.intersection(*(set(records) for records in by_config.values())) if names else set()
    rows = []
    for split in ("line", "api"):
        ids = sorted(t for t in common if by_config[names[0]][t]["split"] == split)
        if not ids:
            continue
        base = [by_config[names[0]][t] for t in ids]
        base_em = np.array([bool(r["em"]) for r in base])
        api = split == "api"
        base_call = _calls(base) if api else None
        for name in names:
            records = [by_config[name][t] for t in ids]
            em = np.array([bool(r["em"]) for r in records])
            es = np.array([float(r["es"]) for r in records])
            is_base = name == names[0]
            calls = _calls(records) if api else None
            by_repo: dict[str, list[int]] = defaultdict(list)
            for r, b in zip(records, base):
                by_repo[r["repo"]].append(int(bool(r["em"])) - int(bool(b["em"])))
            rows.append(ConfigRow(
                split=split, config=name, n=len(ids), em=100.0 * em.mean(), es=100.0 * es.mean(),
                em_delta=None if is_base else paired_bootstrap(em, base_em),
                es_delta=None if is_base else 100.0 * float(es.mean() - np.mean([b["es"] for b in base])),
                won=int(np.sum(em & ~base_em)), lost=int(np.sum(~em & base_em)),
                prompt_hit=_percent([r.get("prompt_hit") for r in records]),
                near_hit=_percent([r.get("prompt_near_hit") for r in records]),
                name_hit=_percent([r.get("prompt_name_hit") for r in records]),
                call_match=None if calls is None else 100.0 * float(np.mean(calls)),
                call_delta=None if is_base or calls is None or base_call is None
                else paired_bootstrap(calls, base_call),
                by_repo={repo: (len(d), 100.0 * float(np.mean(d))) for repo, d in sorted(by_repo.items())},
            ))
    return rows


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}"


def markdown(rows: list[ConfigRow], sources: list[tuple[str, Path, str]]) -> str:
    out = ["# Configurations compared on the same tasks (exact match)", "",
           "Paired on the tasks every configuration finished. Δ vs the first row of each split, in points, "
           "with a 95% paired-bootstrap interval; won / lost: tasks right where the baseline was wrong, and "
           "the reverse. In prompt: a block that fit holds the answer (the hole's line, or the called "
           "definition); near: a block line within edit similarity 0.9 of the answer's first line; name: the "
           "called function's name appears in the prompt (API tasks); right function: the prediction calls the "
           "function the answer calls, whatever the arguments (API tasks), with its Δ.", "",
           "| split | configuration | n | EM | ES | Δ EM | Δ ES | won / lost | in prompt | near | name | "
           "right function | Δ right function |",
           "|---|---|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---|"]
    for r in rows:
        es_delta = "" if r.es_delta is None else f"{r.es_delta:+.1f}"
        won_lost = "" if r.em_delta is None else f"{r.won} / {r.lost}"
        out.append(f"| {r.split} | {r.config} | {r.n} | {r.em:.1f} | {r.es:.1f} | {format_interval(r.em_delta)} | "
                   f"{es_delta} | {won_lost} | {_cell(r.prompt_hit)} | {_cell(r.near_hit)} | {_cell(r.name_hit)} | "
                   f"{_cell(r.call_match)} | {format_interval(r.call_delta)} |")
    repos = sorted({repo for r in rows for repo in r.by_repo})
    out += ["", "## Δ EM vs the baseline per repository (points; tasks in brackets)", "",
            "| split | configuration | " + " | ".join(repos) + " |", "|---|---|" + "---:|" * len(repos)]
    for r in rows:
        if r.em_delta is None:
            continue
        cells = [f"{r.by_repo[repo][1]:+.1f} ({r.by_repo[repo][0]})" if repo in r.by_repo else "" for repo in repos]
        out.append(f"| {r.split} | {r.config} | " + " | ".join(cells) + " |")
    out += ["", "Sources: " + "; ".join(f"`{name}` = `{path.name}` strategy `{strategy}`"
                                         for name, path, strategy in sources), ""]
    return "\n".join(out)


def plot(rows: list[ConfigRow], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    compared = [r for r in rows if r.em_delta is not None]
    splits = [s for s in ("line", "api") if any(r.split == s for r in compared)]
    figure, axes = plt.subplots(1, len(splits), figsize=(5 * len(splits), 3), squeeze=False)
    for axis, split in zip(axes[0], splits):
        chosen = [r for r in compared if r.split == split]
        means = [r.em_delta[0] for r in chosen]
        errors = [[r.em_delta[0] - r.em_delta[1] for r in chosen], [r.em_delta[2] - r.em_delta[0] for r in chosen]]
        axis.barh([r.config for r in chosen], means, xerr=errors, color="tab:blue", capsize=4)
        axis.axvline(0, color="black", linewidth=0.8)
        axis.set_title(f"{split}: Δ EM vs {rows[0].config} (n={chosen[0].n})")
        axis.set_xlabel("points (95% paired bootstrap)")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=parse_config, action="append", required=True,
                        help="NAME=FILE:STRATEGY[@ALPHA]; the first is the baseline")
    parser.add_argument("--out", type=Path, help="folder for report.md, report.json and em.png")
    args = parser.parse_args(argv)
    missing = [str(path) for _, path, _ in args.config if not path.is_file()]
    if missing:
        print(f"compare_configs: no such results file: {', '.join(missing)}", file=sys.stderr)
        return 2
    names = [name for name, _, _ in args.config]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:  # the later one replaced the earlier, the baseline among them, without a word
        print(f"compare_configs: --config {twice[0]} is named twice; give each configuration its own name",
              file=sys.stderr)
        return 2
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        print(f"compare_configs: --out {args.out} is a file; name a folder for the report", file=sys.stderr)
        return 2
    rows = compare(load(args.config))
    if not rows:
        print("compare_configs: no task finished by every configuration", file=sys.stderr)
        return 2
    table = Table(title="EM on the same tasks")
    columns = ("split", "configuration", "n", "EM", "ES", "Δ EM [95%]", "won / lost", "in prompt", "near", "name",
               "right fn", "Δ right fn")
    for column in columns:
        table.add_column(column)
    for r in rows:
        table.add_row(r.split, r.config, str(r.n), f"{r.em:.1f}", f"{r.es:.1f}", format_interval(r.em_delta),
                      "" if r.em_delta is None else f"{r.won} / {r.lost}", _cell(r.prompt_hit), _cell(r.near_hit),
                      _cell(r.name_hit), _cell(r.call_match), format_interval(r.call_delta))
    Console().print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.md").write_text(markdown(rows, args.config), encoding="utf-8")
        (args.out / "report.json").write_text(json.dumps([asdict(r) for r in rows], indent=1), encoding="utf-8")
        plot(rows, args.out / "em.png")
        print(f"wrote {args.out}/report.md, report.json, em.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
