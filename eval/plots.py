"""Adapter for matplotlib: the report's PNG figures (headless, Agg)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from repomem.evaluation.report import Report  # noqa: E402

FIGURE_DPI = 120


def strategy_bars(report: Report, path: Path) -> Path | None:
    """EM and ES per strategy, one panel per split (model runs); None without model rows."""
    primary = [r for r in report.model_rows if r.backend == report.backend and r.order == report.order
               and r.prompt_tokens == report.prompt_tokens]  # the report's first run
    if not primary:
        return None
    splits = list(dict.fromkeys(r.split for r in primary))
    figure, axes = plt.subplots(1, len(splits), figsize=(5.5 * len(splits), 4), squeeze=False)
    for axis, split in zip(axes[0], splits):
        rows = [r for r in primary if r.split == split]
        names = [r.strategy for r in rows]
        positions = range(len(rows))
        axis.bar([p - 0.2 for p in positions], [r.em for r in rows], width=0.4, label="EM")
        axis.bar([p + 0.2 for p in positions], [r.es for r in rows], width=0.4, label="ES")
        for p, r in zip(positions, rows):
            if r.em_delta is not None:
                axis.errorbar(p - 0.2, r.em, yerr=[[r.em_delta[0] - r.em_delta[1]], [r.em_delta[2] - r.em_delta[0]]],
                              color="black", capsize=3, linewidth=1)
        axis.set_xticks(list(positions), names, rotation=25, ha="right")
        axis.set_title(f"{split} (n = {rows[0].n})")
        axis.set_ylabel("percent")
        axis.set_ylim(0, 100)
        axis.legend()
    figure.suptitle(f"RepoEval-protocol completion, {report.backend}\n"
                    "(error bars: 95% paired-bootstrap interval of the EM difference to vanilla)", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=FIGURE_DPI)
    plt.close(figure)
    return path


SWEPT_STRATEGY = "fragrel"  # the strategy `eval run --alphas` sweeps


def alpha_sweep(report: Report, path: Path) -> Path | None:
    """hit@K and MRR against alpha per split (the FragRel paper's Figure 4, on retrieval): the
    rows of FragRel's own ranking only (other strategies at an alpha of theirs zigzagged the line)."""
    points: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for row in report.retrieval_rows:
        if row.strategy == SWEPT_STRATEGY:
            points[row.split].append((row.alpha, row.hit_at_k, row.mrr * 100))
    points = {split: sorted(values) for split, values in points.items() if len(values) > 1}
    if not points:
        return None
    figure, axis = plt.subplots(figsize=(6.5, 4))
    for split, values in points.items():
        alphas = [v[0] for v in values]
        axis.plot(alphas, [v[1] for v in values], marker="o", label=f"{split}: hit@{report.k}")
        axis.plot(alphas, [v[2] for v in values], marker="s", linestyle="--", label=f"{split}: MRR × 100")
    axis.set_xlabel("α (weight of the environment score, eq. 10; 0 = BM25)")
    axis.set_ylabel("percent")
    axis.set_title("FragRel α sweep, retrieval only")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=FIGURE_DPI)
    plt.close(figure)
    return path


def prompt_bars(report: Report, path: Path) -> Path | None:
    """Share of tasks whose prompt holds the answer, per configuration and split (prompt rows)."""
    if not report.prompt_rows:
        return None
    splits = list(dict.fromkeys(r.split for r in report.prompt_rows))
    labels = list(dict.fromkeys(f"{r.strategy} α={r.alpha:g}" for r in report.prompt_rows))
    figure, axes = plt.subplots(1, len(splits), figsize=(6 * len(splits), 0.45 * len(labels) + 1.5),
                                squeeze=False, sharey=True)
    for axis, split in zip(axes[0], splits):
        rows = {f"{r.strategy} α={r.alpha:g}": r for r in report.prompt_rows if r.split == split}
        values = [rows[label].prompt_hit if label in rows else 0.0 for label in labels]
        axis.barh(range(len(labels)), values, color="tab:blue")
        for position, label in enumerate(labels):
            row = rows.get(label)
            if row is not None and row.prompt_hit_delta is not None:
                low, high = row.prompt_hit_delta[1], row.prompt_hit_delta[2]
                axis.errorbar(row.prompt_hit, position, xerr=[[row.prompt_hit_delta[0] - low],
                                                              [high - row.prompt_hit_delta[0]]],
                              color="black", capsize=3, linewidth=1)
        axis.set_yticks(range(len(labels)), labels, fontsize=8)
        axis.invert_yaxis()
        axis.set_xlabel("percent of tasks whose prompt holds the answer")
        axis.set_title(f"{split} (n = {next(iter(rows.values())).n})")
        axis.grid(axis="x", alpha=0.3)
    figure.suptitle("What enters the prompt (error bars: 95% paired-bootstrap interval of the difference "
                    "to vanilla)", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=FIGURE_DPI)
    plt.close(figure)
    return path
