"""Ablation of FragRel's relation matrix W on the RepoEval-protocol dev set (a benchmark, not a test).

    nice -n 15 python scripts/fragrel_ablation.py                  # every variant
    nice -n 15 python scripts/fragrel_ablation.py --only default tau-0.05 --fresh

Why: on retrieval-only metrics FragRel (alpha 0.5) barely moves plain BM25 (alpha 0). Each variant
changes one index setting (graph granularity, tau, relation kind, relations kept per fragment,
tokenizer), or post-processes W in memory (cross-file relations only), and is evaluated
retrieval-only through `run_evaluation` at alpha 0 (vanilla) and 0.25 / 0.5 / 1. Every variant
gets its own index folder (corpora/ablation-index/<variant>) and results file
(corpora/ablation/<variant>.jsonl, resumable); a variant that runs past --variant-timeout is dropped
and reported. For the default index the script also measures how W is built up (neighbours per
fragment, same-file vs cross-file weight mass) and whether the called definition of an API task is
related through W to anything the query can match.

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
from unittest import mock

import numpy as np
import scipy.sparse as sp
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import repomem.evaluation.run as evaluation_run  # noqa: E402
from repomem.config import Config, with_overrides  # noqa: E402
from repomem.evaluation.report import RetrievalRow, summarize  # noqa: E402
from repomem.evaluation.run import (  # noqa: E402
    Evaluator,
    RunSettings,
    leakage_exclusions,
    read_results,
    run_evaluation,
    task_cursor,
)
from repomem.evaluation.tasks import EvalTask, load_tasks  # noqa: E402
from repomem.failures import Failure  # noqa: E402
from repomem.index import RepoIndex  # noqa: E402
from repomem.positions import read_text_file  # noqa: E402
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
    cross_file_only: bool = False  # W post-processed in memory: same-file w_ij set to 0
    index_of: str = ""  # reuse this variant's index folder (same index settings, nothing saved)


VARIANTS = (
    AblationVariant("default", "statement graph, tau 0.01, 64 relations/fragment, kind graph", {}),
    AblationVariant("tau-0.001", "strength_cutoff tau = 0.001 (DESIGN's example)",
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
    # Only the in-memory W differs from default, so its index is default's (loaded, never saved).
    AblationVariant("cross-file-only", "default W with every same-file w_ij zeroed (diagnostic)", {},
                    cross_file_only=True, index_of="default"),
)


def variant_config(variant: AblationVariant) -> Config:
    index_folder = INDEX_ROOT / (variant.index_of or variant.name)
    return with_overrides(Config(), index={"cache_dir": str(index_folder)}, **variant.overrides)


# -- W post-processing and statistics --------------------------------------------------------------


def same_file_mask(index: RepoIndex, matrix: sp.csr_matrix) -> tuple[sp.coo_matrix, np.ndarray]:
    coo = matrix.tocoo()
    return coo, index.fragment_file[coo.row] == index.fragment_file[coo.col]


def keep_cross_file_relations_only(index: RepoIndex) -> None:
    """Zero every w_ij between fragments of one file, in memory, and recompute the row sums of eq. 9."""
    for name in ("w_base", "w_delta"):
        coo, same = same_file_mask(index, getattr(index, name))
        kept = ~same
        setattr(index, name, sp.csr_matrix((coo.data[kept], (coo.row[kept], coo.col[kept])), shape=coo.shape))
    live = index.live.astype(float)
    n_base = index.w_base.shape[0]
    rowsum = index.w_delta @ live
    rowsum[:n_base] += index.w_base @ live[:n_base]
    index.rowsum = rowsum


class CrossFileEvaluator(Evaluator):
    """An Evaluator whose indexes keep cross-file relations only, applied once per opened repository."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._pruned: set[str] = set()

    def service(self, repo: str) -> RepoService | Failure:
        service = super().service(repo)
        if isinstance(service, RepoService) and repo not in self._pruned:
            assert service.index is not None
            keep_cross_file_relations_only(service.index)
            self._pruned.add(repo)
        return service


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


def definition_fragments(index: RepoIndex, path: str, line: int) -> np.ndarray:
    record = index.record(path)
    if record is None:
        return np.zeros(0, dtype=np.int64)
    ids = np.arange(record.first_fragment, record.first_fragment + record.n_fragments)
    ids = ids[index.live[ids]]
    return ids[(index.fragment_start[ids] <= line) & (index.fragment_end[ids] > line)]


def api_definition_links(services: dict[str, RepoService], tasks: Sequence[EvalTask]) -> dict[str, Any]:
    """For API tasks: is the called definition's fragment related through W to the hole's file?

    s_env of the definition fragment can only rise with the query if some neighbour j has s_ind_j > 0;
    the query is the hole's file, so its own fragments are the natural carriers. "visible": hole-file
    windows ending at or above the hole (the user sees all of them, none holds the answer); "usable":
    those eq. 9 may read (not hidden by the leakage rule nor by the query window, which the prompt
    already shows).
    """
    counts = {"tasks": 0, "definition_in_hole_file": 0, "definition_unindexed": 0, "any_relation": 0,
              "to_hole_file": 0, "to_hole_file_visible": 0, "to_hole_file_usable": 0}
    usable_mass_shares: list[float] = []
    matrices = {repo: service.index.relation_matrix() for repo, service in services.items() if service.index}
    for task in tasks:
        if task.definition is None or task.repo not in services:
            continue
        service = services[task.repo]
        index = service.index
        assert index is not None
        counts["tasks"] += 1
        counts["definition_in_hole_file"] += task.definition.path == task.path
        targets = definition_fragments(index, task.definition.path, task.definition.line)
        if targets.size == 0:
            counts["definition_unindexed"] += 1
            continue
        hole = index.record(task.path)
        text = read_text_file(service.root / task.path)
        if hole is None or isinstance(text, Failure):
            continue
        hole_ids = np.arange(hole.first_fragment, hole.first_fragment + hole.n_fragments)
        hole_ids = hole_ids[index.live[hole_ids]]
        visible = hole_ids[index.fragment_end[hole_ids] <= task.lineno]
        hidden = service.hidden_fragments(task_cursor(service.root, task, text),
                                          leakage_exclusions(index, task.path, task.context_start_lineno))
        usable = np.setdiff1d(hole_ids, hidden)
        rows = matrices[task.repo][targets]
        neighbours = np.setdiff1d(rows.indices, targets)
        counts["any_relation"] += neighbours.size > 0
        counts["to_hole_file"] += np.intersect1d(neighbours, hole_ids).size > 0
        counts["to_hole_file_visible"] += np.intersect1d(neighbours, visible).size > 0
        counts["to_hole_file_usable"] += np.intersect1d(neighbours, usable).size > 0
        row_mass = float(rows.sum())
        usable_mass = float(rows[:, usable].sum()) if usable.size else 0.0
        usable_mass_shares.append(usable_mass / row_mass if row_mass else 0.0)
    n = counts["tasks"] or 1
    shares = {f"{key}_share": counts[key] / n for key in counts if key != "tasks"}
    return {**counts, **shares,
            "usable_hole_file_mass_share_mean": float(np.mean(usable_mass_shares)) if usable_mass_shares else 0.0}


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


def open_services(config: Config, repos: Sequence[str], cross_file_only: bool) -> dict[str, RepoService]:
    """The variant's indexes as the evaluation saw them (loaded from its index folder)."""
    services = {}
    for repo in repos:
        service = RepoService.open(DEVSET / "repositories" / repo, config)
        if isinstance(service, Failure) or isinstance(service.ensure_index(), Failure):
            continue
        assert service.index is not None
        if cross_file_only:
            keep_cross_file_relations_only(service.index)
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

    # run_evaluation builds its Evaluator itself; the diagnostic variant swaps the class for this run only.
    evaluator_class = CrossFileEvaluator if variant.cross_file_only else Evaluator
    started = time.perf_counter()
    with mock.patch.object(evaluation_run, "Evaluator", evaluator_class):
        summary = run_evaluation(tasks, DEVSET / "repositories", results, settings, config=config,
                                 progress=RichTaskProgress(progress, variant.name), log=log)
    if isinstance(summary, Failure):
        raise RuntimeError(f"{variant.name}: {summary.message}")
    records = read_results(results)
    report = summarize(records)
    if isinstance(report, Failure):
        raise RuntimeError(f"{variant.name}: {report.message}")
    services = open_services(config, sorted({t.repo for t in tasks}), variant.cross_file_only)
    per_repo = {repo: w_statistics(service.index) for repo, service in services.items() if service.index}
    out: dict[str, Any] = {
        "description": variant.description, "overrides": variant.overrides,
        "cross_file_only": variant.cross_file_only, "seconds": round(time.perf_counter() - started, 1),
        "index_log": log_lines, "k": report.k,
        "rows": [dataclasses.asdict(row) for row in report.retrieval_rows],
        "gained_lost": gained_and_lost(records, report.k),
        "w": {"all": combined_w_statistics(per_repo), "per_repo": per_repo} if per_repo else {},
    }
    if variant.name == "default":
        out["api_definition_links"] = api_definition_links(services, [t for t in tasks if t.split == "api"])
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
           "Generated by `scripts/fragrel_ablation.py`. Dev set: corpora/devset (line and API splits, 600 tasks "
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
    links = variants.get("default", {}).get("api_definition_links")
    if links:
        n = links["tasks"]
        out += ["", "## API tasks: is the called definition related to the hole's file? (default W)", "",
                "The definition fragment(s) = indexed windows holding the def line. The query is the hole's file, so "
                "its fragments are where s_ind is high; eq. 9 can lift the definition only through a w_ij to a "
                "fragment with s_ind > 0. Usable = hole-file fragments eq. 9 may read (not hidden by the leakage "
                "rule or the query window).", "",
                "| measure | tasks | share |", "|---|---:|---:|"]
        labels = {"definition_in_hole_file": "definition lies in the hole's own file",
                  "definition_unindexed": "no indexed window holds the def line",
                  "any_relation": "definition fragment has any W neighbour",
                  "to_hole_file": "... a neighbour in the hole's file",
                  "to_hole_file_visible": "... a neighbour among the hole file's windows ending above the hole",
                  "to_hole_file_usable": "... a neighbour in the hole's file that eq. 9 may read"}
        for key, label in labels.items():
            out.append(f"| {label} | {links[key]} / {n} | {100 * links[key + '_share']:.1f}% |")
        out.append(f"| mean share of the definition row's W mass on usable hole-file fragments | | "
                   f"{100 * links['usable_hole_file_mass_share_mean']:.1f}% |")
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
