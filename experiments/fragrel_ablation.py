"""Ablation of FragRel's relation matrix W on the RepoEval-protocol dev set (a benchmark, not a test).

    nice -n 15 python experiments/fragrel_ablation.py                  # every variant
    nice -n 15 python experiments/fragrel_ablation.py --only default tau-0.05 --fresh

Why: on retrieval-only metrics FragRel (alpha 0.5) barely moves plain BM25 (alpha 0). Each variant
changes one index setting (graph granularity, tau, relation kind, relations kept per fragment,
tokenizer, same-file relation weight, whether the query's own windows seed s_env) and is evaluated
retrieval-only through `run_evaluation` at alpha 0 (vanilla) and 0.25 / 0.5 / 1. Every variant
gets its own index folder (corpora/ablation-index/<variant>) and results file
(corpora/ablation/<variant>.jsonl, resumable); a variant that runs past --variant-timeout is dropped
and reported. For the default index the script also measures how W is built up (neighbours per
fragment, same-file vs cross-file weight mass). The evaluation indexes each hole's file cut at the
hole (repomem.evaluation.run), so nothing after the hole reaches W.

Output: eval/results/ablation.md and eval/results/ablation.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.config import Config, with_overrides  # noqa: E402
from repomem.evaluation.report import RetrievalRow, summarize  # noqa: E402
from repomem.evaluation.run import RunSettings, read_results, run_evaluation  # noqa: E402
from repomem.evaluation.tasks import EvalTask, load_tasks  # noqa: E402
from repomem.failures import Failure  # noqa: E402
from repomem.index.repo_index import RepoIndex  # noqa: E402
from repomem.service import RepoService  # noqa: E402

DEVSET = ROOT / "corpora" / "devset"
RESULTS_DIR = ROOT / "corpora" / "ablation"
INDEX_ROOT = ROOT / "corpora" / "ablation-index"
OUTPUT_MD = ROOT / "eval" / "results" / "ablation.md"
OUTPUT_JSON = ROOT / "eval" / "results" / "ablation.json"
SPLIT_FILES = ("line.jsonl", "api.jsonl")
FRAGREL_ALPHAS = (0.25, 0.5, 1.0)  # vanilla (alpha 0) comes with every run


@dataclasses.dataclass(frozen=True)
class AblationVariant:
    name: str
    description: str
    overrides: dict[str, dict[str, Any]]
    index_of: str = ""  # reuse this variant's index folder (same index settings: retrieval-only changes)


VARIANTS = (
    AblationVariant("default", "statement graph, tau 0.01, 64 relations/fragment, kind graph, same-file "
                               "weight 0, visible windows seed s_env", {}),
    AblationVariant("tau-0.001", "strength_cutoff tau = 0.001 (the design card's example)",
                    {"graph": {"strength_cutoff": 1e-3}}),
    AblationVariant("tau-0.05", "strength_cutoff tau = 0.05", {"graph": {"strength_cutoff": 0.05}}),
    AblationVariant("named", "graph.granularity = named (every named node, the paper's reading)",
                    {"graph": {"granularity": "named"}}),
    AblationVariant("context", "relations.kind = context (eq. 7, gamma^|i-j| within a file)",
                    {"relations": {"kind": "context"}}),
    AblationVariant("graph+context", "relations.kind = graph+context (elementwise max)",
                    {"relations": {"kind": "graph+context"}}),
    AblationVariant("max-rel-256", "max_relations_per_fragment = 256",
                    {"relations": {"max_relations_per_fragment": 256}}),
    AblationVariant("no-subwords", "bm25.split_subwords = false (whole identifiers only)",
                    {"bm25": {"split_subwords": False}}),
    AblationVariant("same-file-1", "relations.same_file_weight = 1 (eq. 8 as in the paper; visible windows seed)",
                    {"relations": {"same_file_weight": 1.0}}),
    AblationVariant("no-visible-seed", "retrieval.visible_feed_environment = false (query windows feed no s_env)",
                    {"retrieval": {"visible_feed_environment": False}}, index_of="default"),
    AblationVariant("paper", "same_file_weight 1 and no visible seed (the previous default)",
                    {"relations": {"same_file_weight": 1.0}, "retrieval": {"visible_feed_environment": False}},
                    index_of="same-file-1"),
)


def variant_config(variant: AblationVariant) -> Config:
    index_folder = INDEX_ROOT / (variant.index_of or variant.name)
    return with_overrides(Config(), index={"cache_dir": str(index_folder)}, **variant.overrides)


# -- W post-processing and statistics --------------------------------------------------------------


def same_file_mask(index: RepoIndex, matrix: sp.csr_matrix) -> tuple[sp.coo_matrix, np.ndarray]:
    coo = matrix.tocoo()
    return coo, index.fragment_file[coo.row] == index.fragment_file[coo.col]


def w_statistics(index: RepoIndex) -> dict[str, float]:
    """Neighbours per live fragment and how W's weight splits between same-file and cross-file pairs."""
    matrix = index.relation_matrix()
    live = index.live
    coo, same = same_file_mask(index, matrix)
    both_live = live[coo.row] & live[coo.col]
    neighbours = np.bincount(coo.row[both_live], minlength=index.n_fragments)[live]
    same_neighbours = np.bincount(coo.row[both_live & same], minlength=index.n_fragments)[live]
    mass = float(coo.data[both_live].sum())
    same_mass = float(coo.data[both_live & same].sum())
    # Mean weight of one relation: same-file pairs share syntax nodes, so each of them weighs more.
    same_weights = coo.data[both_live & same]
    cross_weights = coo.data[both_live & ~same]
    return {
        "fragments": int(live.sum()),
        "neighbours_mean": float(neighbours.mean()) if neighbours.size else 0.0,
        "neighbours_median": float(np.median(neighbours)) if neighbours.size else 0.0,
        "same_file_neighbours_mean": float(same_neighbours.mean()) if same_neighbours.size else 0.0,
        "isolated_share": float((neighbours == 0).mean()) if neighbours.size else 0.0,
        "same_file_mass_share": same_mass / mass if mass else 0.0,
        "cross_file_mass_share": 1 - same_mass / mass if mass else 0.0,
        "same_file_weight_mean": float(same_weights.mean()) if same_weights.size else 0.0,
        "cross_file_weight_mean": float(cross_weights.mean()) if cross_weights.size else 0.0,
    }


def combined_w_statistics(per_repo: dict[str, dict[str, float]]) -> dict[str, float]:
    """Fragment-weighted means over repositories (the shares are weighted by fragments too: close enough
    for a diagnostic, and the per-repository values are kept in the JSON)."""
    total = sum(s["fragments"] for s in per_repo.values())
    out: dict[str, float] = {"fragments": total}
    for key in next(iter(per_repo.values())):
        if key != "fragments":
            out[key] = sum(s[key] * s["fragments"] for s in per_repo.values()) / total if total else 0.0
    return out


# -- running ---------------------------------------------------------------------------------------


class RichTaskProgress:
    """repomem's Progress protocol on one rich task bar."""

    def __init__(self, progress: Progress, label: str):
        self.progress = progress
        self.task = progress.add_task(label, total=None)

    def start(self, stage: str, total: int) -> None:
        self.progress.update(self.task, total=total, completed=0)

    def advance(self, units: int = 1) -> None:
        self.progress.advance(self.task, units)


class VariantTimeout(Exception):
    pass


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def expire(signum: int, frame: Any) -> None:
        raise VariantTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def open_services(config: Config, repos: Sequence[str]) -> dict[str, RepoService]:
    """The variant's indexes as the evaluation saw them (loaded from its index folder)."""
    services = {}
    for repo in repos:
        service = RepoService.open(DEVSET / "repositories" / repo, config)
        if isinstance(service, Failure) or isinstance(service.ensure_index(), Failure):
            continue
        services[repo] = service
    return services


def run_variant(variant: AblationVariant, tasks: Sequence[EvalTask], progress: Progress,
                console: Console) -> dict[str, Any]:
    config = variant_config(variant)
    results = RESULTS_DIR / f"{variant.name}.jsonl"
    settings = RunSettings(retrieval_only=True, alphas=FRAGREL_ALPHAS)
    log_lines: list[str] = []

    def log(message: str) -> None:
        log_lines.append(message)
        console.log(f"[{variant.name}] {message}")

    started = time.perf_counter()
    summary = run_evaluation(tasks, DEVSET / "repositories", results, settings, config=config,
                             progress=RichTaskProgress(progress, variant.name), log=log)
    if isinstance(summary, Failure):
        raise RuntimeError(f"{variant.name}: {summary.message}")
    records = read_results(results)
    report = summarize(records)
    if isinstance(report, Failure):
        raise RuntimeError(f"{variant.name}: {report.message}")
    services = open_services(config, sorted({t.repo for t in tasks}))
    per_repo = {repo: w_statistics(service.index_for_measurement()) for repo, service in services.items()}
    out: dict[str, Any] = {
        "description": variant.description, "overrides": variant.overrides,
        "seconds": round(time.perf_counter() - started, 1),
        "index_log": log_lines, "k": report.k,
        "rows": [dataclasses.asdict(row) for row in report.retrieval_rows],
        "gained_lost": gained_and_lost(records, report.k),
        "w": {"all": combined_w_statistics(per_repo), "per_repo": per_repo} if per_repo else {},
    }
    return out


def gained_and_lost(records: Sequence[dict[str, Any]], k: int) -> dict[str, dict[str, list[int]]]:
    """Per split and alpha: tasks FragRel newly hits at k, and tasks vanilla hit that FragRel loses.

    A near-zero net delta can hide many changes both ways (W moves fragments, but not the right ones).
    """
    hits: dict[tuple[str, float], dict[str, bool]] = {}
    for record in records:
        rank = record.get("hit_rank")
        hit = rank is not None and rank <= k
        hits.setdefault((record["split"], float(record["alpha"])), {})[record["task_id"]] = hit
    out: dict[str, dict[str, list[int]]] = {}
    for (split, alpha), by_task in sorted(hits.items()):
        vanilla = hits.get((split, 0.0))
        if alpha == 0.0 or vanilla is None:
            continue
        common = by_task.keys() & vanilla.keys()
        gained = sum(by_task[t] and not vanilla[t] for t in common)
        lost = sum(vanilla[t] and not by_task[t] for t in common)
        out.setdefault(split, {})[f"{alpha:g}"] = [gained, lost]
    return out


# -- report ----------------------------------------------------------------------------------------


def best_fragrel(rows: Sequence[RetrievalRow], split: str) -> tuple[RetrievalRow | None, RetrievalRow | None]:
    """(vanilla row, fragrel row with the highest hit@K; ties go to the smaller alpha)."""
    in_split = [r for r in rows if r.split == split]
    vanilla = next((r for r in in_split if r.strategy == "vanilla" and r.alpha == 0.0), None)
    fragrel = [r for r in in_split if r.strategy == "fragrel"]
    return vanilla, max(fragrel, key=lambda r: (r.hit_at_k, -r.alpha), default=None)


def _delta(delta: Sequence[float] | None) -> str:
    if delta is None:
        return ""
    mean, low, high = delta
    return f"{mean:+.1f} [{low:+.1f}, {high:+.1f}]"


def markdown_report(summary: dict[str, Any], dropped: dict[str, str]) -> str:
    variants = summary["variants"]
    k = next((v["k"] for v in variants.values()), 10)
    out = ["# FragRel ablation (retrieval only, RepoEval-protocol dev set)", "",
           "Generated by `experiments/fragrel_ablation.py`. Dev set: corpora/devset (line and API splits, 600 tasks "
           "each, repositories accelerate, optuna, torchmetrics). Line: a top-10 fragment holds the hole's line; "
           "API: a top-10 fragment holds the def line of the called function (definition recall). Percent of "
           f"tasks; Δ = best FragRel hit@{k} − vanilla hit@{k} in points with the 95% paired-bootstrap interval "
           f"of `repomem.evaluation.report`; alphas tried: {', '.join(f'{a:g}' for a in FRAGREL_ALPHAS)}.", "",
           "Gained / lost: tasks the best FragRel hits and vanilla misses, and the reverse.", "",
           f"| variant | split | vanilla hit@{k} | best FragRel hit@{k} (α) | Δ [95% CI] | gained / lost "
           "| MRR vanilla → best |",
           "|---|---|---:|---:|---|---|---|"]
    for name, data in variants.items():
        rows = [RetrievalRow(**{**row, "hit_delta": tuple(row["hit_delta"]) if row["hit_delta"] else None})
                for row in data["rows"]]
        for split in ("line", "api"):
            vanilla, best = best_fragrel(rows, split)
            if vanilla is None or best is None:
                continue
            gained, lost = data.get("gained_lost", {}).get(split, {}).get(f"{best.alpha:g}", ("", ""))
            out.append(f"| {name} | {split} | {vanilla.hit_at_k:.1f} | {best.hit_at_k:.1f} (α={best.alpha:g}) | "
                       f"{_delta(best.hit_delta)} | {gained} / {lost} | {vanilla.mrr:.3f} → {best.mrr:.3f} |")
    out += ["", f"## hit@{k} at every α", "",
            "| variant | split | " + " | ".join(f"α={a:g}" for a in (0.0, *FRAGREL_ALPHAS)) + " |",
            "|---|---|" + "---:|" * (len(FRAGREL_ALPHAS) + 1)]
    for name, data in variants.items():
        for split in ("line", "api"):
            by_alpha = {row["alpha"]: row["hit_at_k"] for row in data["rows"] if row["split"] == split}
            if by_alpha:
                out.append(f"| {name} | {split} | " + " | ".join(
                    f"{by_alpha[a]:.1f}" if a in by_alpha else "" for a in (0.0, *FRAGREL_ALPHAS)) + " |")
    out += ["", "## Variants", ""]
    for name, data in variants.items():
        out.append(f"- `{name}`: {data['description']} ({data['seconds']:.0f} s: index build or load, evaluation "
                   "of the records not already in its results file)")
    for name, reason in dropped.items():
        out.append(f"- `{name}`: dropped, {reason}")
    out += ["", "## How W is built up", "",
            "Per live fragment over the three repositories (fragment-weighted). Mass = sum of w_ij; W's diagonal is "
            "empty, so every entry is a neighbour j ≠ i.", "",
            "| variant | fragments | neighbours mean / median | same-file neighbours mean | no neighbour | "
            "same-file mass | mean w same-file / cross-file |",
            "|---|---:|---|---:|---:|---:|---|"]
    for name, data in variants.items():
        w = data.get("w", {}).get("all")
        if w:
            out.append(f"| {name} | {w['fragments']} | {w['neighbours_mean']:.1f} / {w['neighbours_median']:.0f} | "
                       f"{w['same_file_neighbours_mean']:.1f} | {100 * w['isolated_share']:.1f}% | "
                       f"{100 * w['same_file_mass_share']:.1f}% | {w['same_file_weight_mean']:.3f} / "
                       f"{w['cross_file_weight_mean']:.3f} |")
    out.append("")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", metavar="VARIANT", choices=[v.name for v in VARIANTS],
                        help="run these variants only (the report keeps earlier results of the others)")
    parser.add_argument("--fresh", action="store_true", help="discard the chosen variants' earlier results")
    parser.add_argument("--variant-timeout", type=int, default=600, help="seconds; a slower variant is dropped")
    parser.add_argument("--limit", type=int, default=0, help="first N tasks per split only (a smoke run)")
    args = parser.parse_args(argv)
    console = Console(stderr=True)

    tasks: list[EvalTask] = []
    for file_name in SPLIT_FILES:
        loaded = load_tasks(DEVSET / file_name)
        if isinstance(loaded, Failure):
            console.print(f"[red]{loaded.message}")
            return 1
        tasks += loaded[: args.limit] if args.limit else loaded
    chosen = [v for v in VARIANTS if args.only is None or v.name in args.only]
    previous = json.loads(OUTPUT_JSON.read_text()) if OUTPUT_JSON.is_file() and args.only else {}
    summary: dict[str, Any] = {"tasks": {s: sum(t.split == s for t in tasks) for s in ("line", "api")},
                               "alphas": [0.0, *FRAGREL_ALPHAS],
                               "variants": dict(previous.get("variants", {}))}
    dropped: dict[str, str] = dict(previous.get("dropped", {}))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        overall = progress.add_task("variants", total=len(chosen))
        for variant in chosen:
            if args.fresh:
                (RESULTS_DIR / f"{variant.name}.jsonl").unlink(missing_ok=True)
            try:
                with time_limit(args.variant_timeout):
                    summary["variants"][variant.name] = run_variant(variant, tasks, progress, console)
                dropped.pop(variant.name, None)
            except VariantTimeout:
                dropped[variant.name] = f"ran past {args.variant_timeout} s"
                summary["variants"].pop(variant.name, None)
                console.log(f"[yellow]{variant.name}: dropped (over {args.variant_timeout} s)")
            progress.advance(overall)
    # Variants in declaration order, whatever order the runs came in.
    order = [v.name for v in VARIANTS]
    summary["variants"] = {name: summary["variants"][name] for name in order if name in summary["variants"]}
    summary["dropped"] = dropped
    OUTPUT_JSON.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT_JSON.write_text(json.dumps(summary, indent=1) + "\n")
    text = markdown_report(summary, dropped)
    OUTPUT_MD.write_text(text)
    console.print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
