"""`repomem eval report`: results records -> markdown tables and PNG plots.

Model runs are compared on the tasks every strategy of the group finished (paired), with a 95%
paired-bootstrap interval for each strategy's difference to vanilla, so a reader can tell a gain
from noise. Retrieval-only runs give hit@1/5/K and MRR per variant, and the alpha sweep.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from repomem.completion.rounds import choose_round
from repomem.config import RetrievalConfig
from repomem.failures import Failure, FailureKind
from repomem.strategies import BASELINE, rank_of, strategy_named

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
SPLIT_ORDER = ("line", "api", "function")


@dataclass(frozen=True)
class ModelRow:
    split: str
    strategy: str
    alpha: float
    n: int
    em: float  # percent
    es: float  # percent
    hit: float | None  # percent of tasks whose top-K held the answer (None for infile)
    prompt_hit: float | None  # percent whose prompt held it
    em_delta: tuple[float, float, float] | None  # vs vanilla: mean, 2.5%, 97.5% (points)
    latency_p50: float  # seconds, whole completion
    latency_p95: float
    generate_p50: float  # seconds in the model (prompt processing + decoding), all rounds
    generate_p95: float
    retrieve_p50_ms: float
    retrieve_p95_ms: float
    errors: int  # this strategy's failed records among the split's tasks (their tasks are in no row)
    memory_calls: float = 0.0  # mean model calls per completion made while retrieving (memory strategies)
    # Multi-round strategies (RepoCoder): percent of tasks right in at least one round, the oracle the
    # FragRel paper reports beside the last round. None: one round, or records without round_em.
    oracle_em: float | None = None
    # Records of several rounds with every round's log-probability: EM had the most confident round
    # been shown (prompt.round_choice = "confident"), and its Δ vs vanilla (paired, as em_delta).
    # Single-round records count as they are. None when no record has more than one round.
    confident_em: float | None = None
    confident_delta: tuple[float, float, float] | None = None
    # API tasks: percent whose prediction calls the function the ground truth calls (any arguments).
    call_match: float | None = None
    # The run these rows come from (a report shows one table per model, order and prompt budget).
    backend: str = ""
    order: str = ""
    prompt_tokens: int = 0


@dataclass(frozen=True)
class RetrievalRow:
    split: str
    strategy: str
    alpha: float
    n: int
    hit_at_1: float  # percent
    hit_at_5: float
    hit_at_k: float
    mrr: float
    hit_delta: tuple[float, float, float] | None  # hit@K vs vanilla: mean, 2.5%, 97.5% (points)
    retrieve_p50_ms: float
    retrieve_p95_ms: float


@dataclass(frozen=True)
class PromptRow:
    """What the model is shown (eval run --prompt-only, or a model run's prompts)."""

    split: str
    strategy: str
    alpha: float
    n: int
    hit_at_k: float  # percent: a top-K fragment holds the answer
    prompt_hit: float  # percent: a block that fit the prompt holds it
    prompt_hit_delta: tuple[float, float, float] | None  # vs vanilla, points
    near_hit: float | None  # a prompt block line within ES >= 0.9 of the answer's first line
    blocks: float  # mean blocks in the prompt
    duplicate_share: float  # percent of block-line tokens already shown by the file or another block
    memory_calls: float = 0.0  # mean model calls per task made while retrieving (memory strategies)
    retrieve_p50_ms: float = 0.0  # retrieval, the memory's model calls included
    name_hit: float | None = None  # API tasks: the called name appears in the prompt (blocks or visible file)


@dataclass(frozen=True)
class Report:
    model_rows: tuple[ModelRow, ...]
    retrieval_rows: tuple[RetrievalRow, ...]
    k: int
    backend: str
    order: str
    prompt_tokens: int  # the model runs' whole-prompt budget
    prompt_rows: tuple[PromptRow, ...] = ()
    # What the tables leave out and why (failed retrievals, runs at another K), said under them.
    notes: tuple[str, ...] = ()


def paired_bootstrap(values: np.ndarray, baseline: np.ndarray) -> tuple[float, float, float]:
    """Mean of values - baseline (points) and its 95% percentile interval over resampled tasks."""
    difference = (values.astype(float) - baseline.astype(float)) * 100
    if difference.size == 0:
        return (0.0, 0.0, 0.0)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    samples = rng.integers(0, difference.size, size=(BOOTSTRAP_RESAMPLES, difference.size))
    means = difference[samples].mean(axis=1)
    return float(difference.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _split_rank(split: str) -> int:
    return SPLIT_ORDER.index(split) if split in SPLIT_ORDER else len(SPLIT_ORDER)


def _percent(flags: Iterable[bool]) -> float:
    values = list(flags)
    return 100.0 * sum(values) / len(values) if values else 0.0


def _label(record: dict[str, Any], mixed: set[str] = frozenset()) -> str:
    """A strategy, with the run's config overrides if any (`eval run --set`), and the settings
    fingerprint where records of that label were made under different settings (`mixed`)."""
    config = ",".join(part for part in (record.get("config") or "", f"typing={record['typing']}"
                                        if record.get("typing") else "",
                                        "right-context" if record.get("right_context") else "") if part)
    label = f"{record['strategy']} [{config}]" if config else record["strategy"]
    return f"{label} (settings {record.get('settings') or 'unrecorded'})" if label in mixed else label


def _paired_groups(records: Sequence[dict[str, Any]]):
    """Per split (in SPLIT_ORDER): the records of each (strategy, alpha) by task id, and the task ids
    every group finished (comparisons are paired on those); a split with no such task is left out
    (its rows of n = 0 read 0.0 and a Δ of +0.0, as if measured: `_unpaired` says why)."""
    return ((split, groups, ids) for split, groups, ids in _paired_groups_all(records) if ids)


def _unpaired(records: Sequence[dict[str, Any]], table: str) -> list[str]:
    """Notes for the tasks a table leaves out because not every strategy of their split finished
    them (the rows pair tasks): a split none of whose tasks every strategy finished is no row."""
    notes = []
    for split, groups, shared in _paired_groups_all(records):
        every = set.union(*(set(g) for g in groups.values()))
        if not shared:
            counts = ", ".join(f"{label} {len(group)}" for (label, _), group in sorted(groups.items()))
            notes.append(f"{split}: no task was finished by every strategy of the {table} table (tasks: {counts}): "
                         "not compared; run the strategies on the same tasks")
        elif len(shared) < len(every):
            notes.append(f"{split}: {len(every) - len(shared)} tasks not finished by every strategy are left out "
                         f"of the {table} table (its rows compare the {len(shared)} they share)")
    return notes


def _paired_groups_all(records: Sequence[dict[str, Any]]):
    """Per split (in SPLIT_ORDER), every split: the records of each (strategy, alpha) by task id, and
    the task ids every group finished. Records of one strategy and overrides made under different
    settings (a changed default) are kept apart, never pooled."""
    fingerprints: dict[str, set[str]] = defaultdict(set)
    for record in records:
        fingerprints[_label(record)].add(record.get("settings") or "")
    mixed = {label for label, seen in fingerprints.items() if len(seen) > 1}
    by_split: dict[str, dict[tuple[str, float], dict[str, dict[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    for record in records:
        by_split[record["split"]][(_label(record, mixed), float(record["alpha"]))][record["task_id"]] = record
    for split in sorted(by_split, key=_split_rank):
        groups = by_split[split]
        yield split, groups, sorted(set.intersection(*(set(g) for g in groups.values())))


def _oracle_em(records: Sequence[dict[str, Any]], strategy: Any) -> float | None:
    """Percent of tasks right in some round (RepoCoder's best round), for multi-round strategies."""
    if strategy is None or strategy.rounds < 2 or not records or any("round_em" not in r for r in records):
        return None
    return _percent(any(r["round_em"]) for r in records)


def _confident_hits(records: Sequence[dict[str, Any]]) -> np.ndarray | None:
    """Per record, whether the most confident round was right (prompt.round_choice =
    "confident"), or None when no record ran several rounds with known log-probabilities; a record
    without them counts as shown."""
    hits, chose = [], False
    for record in records:
        rounds, logprobs = record.get("round_em") or [], record.get("round_logprob") or []
        if len(rounds) > 1 and len(logprobs) == len(rounds) and all(v is not None for v in logprobs):
            hits.append(bool(rounds[choose_round(logprobs, "confident")]))
            chose = True
        else:
            hits.append(bool(record.get("em")))
    return np.array(hits) if chose else None


def _model_rows(records: Sequence[dict[str, Any]], run: tuple[str, str, int] = ("", "", 0)) -> list[ModelRow]:
    rows = []
    for split, groups, all_ids in _paired_groups(records):
        # A task that failed for some strategy leaves every row, as in the retrieval and prompt
        # tables (`_left_out` says so): counted as a wrong answer, a server that failed one
        # strategy's requests read as the others' gain (vanilla failed everywhere: Δ EM +100).
        ids = [i for i in all_ids if not any("error" in group[i] for group in groups.values())]
        if not ids:
            continue
        vanilla = groups.get((BASELINE, 0.0))
        for (strategy, alpha), group in sorted(groups.items(), key=lambda item: (rank_of(item[0][0]), item[0][1])):
            chosen = [group[i] for i in ids]
            em = np.array([bool(r.get("em")) for r in chosen])
            delta = None
            if vanilla is not None and strategy != BASELINE:
                delta = paired_bootstrap(em, np.array([bool(vanilla[i].get("em")) for i in ids]))
            confident = _confident_hits(chosen)
            confident_delta = None
            if confident is not None and vanilla is not None:
                confident_delta = paired_bootstrap(confident, np.array([bool(vanilla[i].get("em")) for i in ids]))
            # The slimmed copies in eval/results carry no timings: their times read 0.
            totals = [r.get("timings_ms", {}).get("total", 0.0) / 1000 for r in chosen] or [0.0]
            generate = [r.get("timings_ms", {}).get("generate", 0.0) / 1000 for r in chosen] or [0.0]
            retrieve = [r.get("timings_ms", {}).get("retrieve", 0.0) for r in chosen] or [0.0]
            with_hits = [r for r in chosen if r.get("hit_rank", None) is not None or r.get("prompt_hit") is not None]
            # The label may carry the run's overrides ("repocoder+fragrel [completion.iterative_rounds=3]").
            known = strategy_named(chosen[0]["strategy"]) if chosen else None
            retrieves = known.retrieves if known is not None else True
            rows.append(ModelRow(
                split=split, strategy=strategy, alpha=alpha, n=len(chosen),
                em=_percent(em), es=100.0 * float(np.mean([r.get("es", 0.0) for r in chosen])) if chosen else 0.0,
                hit=_percent(r.get("hit_rank") is not None for r in chosen) if retrieves else None,
                prompt_hit=_percent(bool(r.get("prompt_hit")) for r in chosen) if retrieves and with_hits else None,
                em_delta=delta, latency_p50=float(np.percentile(totals, 50)),
                latency_p95=float(np.percentile(totals, 95)), generate_p50=float(np.percentile(generate, 50)),
                generate_p95=float(np.percentile(generate, 95)), retrieve_p50_ms=float(np.percentile(retrieve, 50)),
                retrieve_p95_ms=float(np.percentile(retrieve, 95)),
                errors=sum("error" in group[i] for i in all_ids),
                memory_calls=float(np.mean([r.get("memory_calls", 0) for r in chosen])) if chosen else 0.0,
                oracle_em=_oracle_em(chosen, known),
                confident_em=None if confident is None else _percent(confident), confident_delta=confident_delta,
                call_match=(_percent(r["call_match"] for r in chosen)
                            if all("call_match" in r for r in chosen) else None),
                backend=run[0], order=run[1], prompt_tokens=run[2],
            ))
    return rows


def _retrieval_rows(records: Sequence[dict[str, Any]], k: int) -> list[RetrievalRow]:
    rows = []
    for split, groups, ids in _paired_groups(records):
        vanilla = groups.get((BASELINE, 0.0))
        # The alpha sweep in alpha order, then strategies with their own retriever in table order.
        for (strategy, alpha), group in sorted(groups.items(), key=lambda item: (
                strategy_named(item[0][0]) is not None and strategy_named(item[0][0]).retriever != "sparse",
                item[0][1], rank_of(item[0][0]))):
            ranks = [group[i].get("hit_rank") for i in ids]
            hit_k = np.array([r is not None and r <= k for r in ranks])
            delta = None
            if vanilla is not None and (strategy, alpha) != (BASELINE, 0.0):
                baseline = np.array([(r := vanilla[i].get("hit_rank")) is not None and r <= k for i in ids])
                delta = paired_bootstrap(hit_k, baseline)
            times = [group[i].get("timings_ms", {}).get("retrieve", 0.0) for i in ids] or [0.0]
            rows.append(RetrievalRow(
                split=split, strategy=strategy, alpha=alpha, n=len(ids),
                hit_at_1=_percent(r is not None and r <= 1 for r in ranks),
                hit_at_5=_percent(r is not None and r <= 5 for r in ranks),
                hit_at_k=_percent(hit_k), mrr=float(np.mean([1.0 / r if r else 0.0 for r in ranks])) if ranks else 0.0,
                hit_delta=delta, retrieve_p50_ms=float(np.percentile(times, 50)),
                retrieve_p95_ms=float(np.percentile(times, 95)),
            ))
    return rows


def _prompt_rows(records: Sequence[dict[str, Any]], k: int) -> list[PromptRow]:
    rows = []
    for split, groups, ids in _paired_groups([r for r in records if "prompt_blocks" in r and "error" not in r]):
        vanilla = groups.get((BASELINE, 0.0))
        for (strategy, alpha), group in sorted(groups.items(), key=lambda item: (rank_of(item[0][0]), item[0][1],
                                                                                 item[0][0])):
            chosen = [group[i] for i in ids]
            if not chosen or chosen[0].get("prompt_hit") is None:
                continue  # the current file only: nothing retrieved
            hits = np.array([bool(r.get("prompt_hit")) for r in chosen])
            delta = None
            if vanilla is not None and (strategy, alpha) != (BASELINE, 0.0):
                delta = paired_bootstrap(hits, np.array([bool(vanilla[i].get("prompt_hit")) for i in ids]))
            near = [r.get("prompt_near_hit") for r in chosen if r.get("prompt_near_hit") is not None]
            named = [r["prompt_name_hit"] for r in chosen if r.get("prompt_name_hit") is not None]
            duplicated = sum(r.get("duplicate_block_tokens", 0) for r in chosen)
            total = sum(r.get("block_line_tokens", 0) for r in chosen)
            rows.append(PromptRow(
                split=split, strategy=strategy, alpha=alpha, n=len(chosen),
                hit_at_k=_percent((r.get("hit_rank") or k + 1) <= k for r in chosen), prompt_hit=_percent(hits),
                prompt_hit_delta=delta, near_hit=_percent(near) if near else None,
                name_hit=_percent(named) if named else None,
                blocks=float(np.mean([r["prompt_blocks"] for r in chosen])),
                duplicate_share=100.0 * duplicated / total if total else 0.0,
                memory_calls=float(np.mean([r.get("memory_calls", 0) for r in chosen])),
                retrieve_p50_ms=float(np.median([r.get("timings_ms", {}).get("retrieve", 0.0) for r in chosen])),
            ))
    return rows


def run_of(record: dict[str, Any]) -> tuple[str, str, int]:
    """What makes model results comparable: the model (results name it, not a server's URL, so
    shards run against several servers group together), the block order and the prompt budget."""
    return (record["backend"], record["order"], record.get("prompt_tokens", 0))


DEFAULT_K = RetrievalConfig().top_k  # the K of records that do not say theirs (the slimmed copies)
SLIMMED_FIELDS = frozenset({"task_id", "split", "strategy", "alpha", "em"})


def _slimmed(record: dict[str, Any]) -> bool:
    """Whether a record without a mode is one of eval/results' slimmed model records (what they keep)."""
    return SLIMMED_FIELDS <= record.keys() and record.get("mode", "model") == "model"


def summarize(records: Sequence[dict[str, Any]], backend: str | None = None) -> Report | Failure:
    """Aggregate results records. Model rows come per run (model, order, prompt budget), the most
    common first; `backend` keeps one model only. Report.backend/order/prompt_tokens name the first."""
    if not records:
        return Failure(FailureKind.NO_RESULTS, "the results hold no records")
    failed = [r for r in records if "error" in r]
    if len(failed) == len(records):
        return Failure(FailureKind.NO_RESULTS, f"all {len(records)} records failed (the first: {failed[0]['error']})")
    # The slimmed copies in eval/results (records.jsonl.xz) carry no mode and no K: model records of
    # the default top K (run.records_named reads them so too), known by what a model record holds.
    records = [{"mode": "model", "k": DEFAULT_K, "backend": "", "order": "", **r}
               if ("mode" not in r or "k" not in r) and _slimmed(r) else r for r in records]
    model = [r for r in records if r.get("mode") == "model" and (backend is None or r["backend"] == backend)]
    if backend is not None and not model:
        return Failure(FailureKind.NO_RESULTS, f"no model results for backend {backend!r}")
    counts: dict[tuple[str, str, int], int] = defaultdict(int)
    for r in model:
        counts[run_of(r)] += 1
    runs = sorted(counts, key=lambda run: (-counts[run], run))
    chosen = runs[0] if runs else ("", "", 0)
    model_rows = [row for run in runs for row in _model_rows([r for r in model if run_of(r) == run], run)]
    retrieval = [r for r in records if r.get("mode") == "retrieval" and "error" not in r]
    ks = {int(r["k"]) for r in (*model, *retrieval)}
    k = max(ks) if ks else 10
    prompts = [r for r in records if r.get("mode") == "prompt"]
    if not (model or retrieval or prompts):  # an empty report written and exit 0 said nothing was wrong
        return Failure(FailureKind.NO_RESULTS, f"none of the {len(records)} records is a model, retrieval or "
                                               "prompt result (`mode`): not a results file of `eval run`")
    k = max({k, *(int(r["k"]) for r in prompts)})
    primary = [r for r in model if run_of(r) == chosen]
    # Tasks a table pairs out (a failed retrieval or prompt record is said by _left_out, not here).
    unpaired = [note for run in runs for note in _unpaired([r for r in model if run_of(r) == run],
                                                           f"model `{run[0]}`" if len(runs) > 1 else "model")]
    for mode in ("retrieval", "prompt"):
        unpaired += _unpaired([r for r in records if r.get("mode") == mode and int(r["k"]) == k], mode)
    report = Report(tuple(model_rows), tuple(_retrieval_rows([r for r in retrieval if int(r["k"]) == k], k)),
                    k, chosen[0], chosen[1], chosen[2],
                    tuple(_prompt_rows([r for r in (*prompts, *primary) if int(r["k"]) == k], k)),
                    (*unpaired, *_left_out(records, k)))
    if unpaired and not (report.model_rows or report.retrieval_rows or report.prompt_rows):
        return Failure(FailureKind.NO_RESULTS, f"nothing to report: {unpaired[0]}")  # not an empty report, exit 0
    return report


def _left_out(records: Sequence[dict[str, Any]], k: int) -> tuple[str, ...]:
    """What the tables do not count or cannot tell, in words: the retrieval and prompt tables'
    failed records (a task that failed for one strategy leaves every strategy's row, which pairs
    tasks), task ids whose records are of different task versions (paired by id all the same), and
    records of another K (only the largest K's are tabled)."""
    notes = []
    for mode in ("model", "retrieval", "prompt"):
        failed = [r for r in records if r.get("mode") == mode and "error" in r]
        if failed:
            tasks = len({r["task_id"] for r in failed})
            notes.append(f"{len(failed)} {mode} records failed and are not in the {mode} table ({tasks} tasks, "
                         f"left out of every strategy's row there); the first: {failed[0]['error']}")
    versions: dict[str, set[str]] = defaultdict(set)
    for r in records:
        if r.get("task_digest"):
            versions[r["task_id"]].add(r["task_digest"])
    mixed = sorted(task for task, digests in versions.items() if len(digests) > 1)
    if mixed:
        notes.append(f"{len(mixed)} task ids (the first: {mixed[0]}) have records of different versions of their task "
                     "(another hole or ground truth under the same id, `task_digest`): the tables pair them by id "
                     "all the same; report the records of each task build from a results file of their own")
    elsewhere = [r for r in records if r.get("mode") in ("retrieval", "prompt") and int(r["k"]) != k]
    if elsewhere:
        other = ", ".join(map(str, sorted({int(r["k"]) for r in elsewhere})))
        notes.append(f"{len(elsewhere)} retrieval and prompt records at K = {other} are not tabled "
                     f"(the tables are at K = {k}); report them from a results file of their own")
    return tuple(notes)


def format_interval(delta: tuple[float, float, float] | None) -> str:
    if delta is None:
        return ""
    mean, low, high = delta
    return f"{mean:+.1f} [{low:+.1f}, {high:+.1f}]"


def _name(strategy: str, alpha: float) -> str:
    """A row's label: strategies that rank with an alpha show it (a sweep has several)."""
    known = strategy_named(strategy)
    shows_alpha = (known is not None and known.environment) or alpha != 0.0
    return f"{strategy} (α={alpha:g})" if shows_alpha else strategy


def _confident_cell(row: ModelRow) -> str:
    if row.confident_em is None:
        return ""
    delta = f", {format_interval(row.confident_delta)}" if row.confident_delta is not None else ""
    return f"{row.confident_em:.1f}{delta}"


def markdown(report: Report, title: str = "RepoEval-protocol results") -> str:
    out = [f"# {title}", ""]
    for run in dict.fromkeys((row.backend, row.order, row.prompt_tokens) for row in report.model_rows):
        out += [f"## Completion (EM / ES), model `{run[0]}`, block order `{run[1]}`, prompt budget {run[2]} tokens",
                "",
                "EM and ES in percent on the tasks every strategy finished; Δ EM vs vanilla in points with a 95% "
                "paired-bootstrap interval. Hit: the answer (the hole's line, or the called definition) was among "
                f"the top-{report.k} retrieved fragments; in prompt: among the blocks that fit the prompt. Latency: "
                "seconds per task, whole completion (all rounds); model = prompt processing and decoding, "
                "all rounds (RepoCoder's first round counted although it is generated once per task); retrieve "
                "includes a memory strategy's own model calls (calls: their mean number per task). EM best "
                "round: RepoCoder's oracle, right in at least one of its rounds (the FragRel paper reports it "
                "beside the last round). EM confident round: had the round whose answer has the highest mean "
                "log-probability per token been shown (prompt.round_choice = confident), with its Δ vs "
                "vanilla. Right function: API tasks whose prediction calls the function the "
                "ground truth calls, whatever the arguments.", "",
                "| split | strategy | n | EM | ES | Δ EM vs vanilla | hit@K | in prompt | latency p50 / p95 (s) "
                "| model p50 / p95 (s) | retrieve p50 / p95 (ms) | calls | EM best round | EM confident round "
                "| right function |",
                "|---|---|---:|---:|---:|---|---:|---:|---|---|---|---:|---:|---|---:|"]
        for row in report.model_rows:
            if (row.backend, row.order, row.prompt_tokens) != run:
                continue
            hit = "" if row.hit is None else f"{row.hit:.1f}"
            prompt_hit = "" if row.prompt_hit is None else f"{row.prompt_hit:.1f}"
            errors = f" ({row.errors} errors)" if row.errors else ""
            out.append(f"| {row.split} | {_name(row.strategy, row.alpha)} | {row.n}{errors} | {row.em:.1f} | "
                       f"{row.es:.1f} | {format_interval(row.em_delta)} | {hit} | {prompt_hit} | "
                       f"{row.latency_p50:.1f} / {row.latency_p95:.1f} | {row.generate_p50:.1f} / "
                       f"{row.generate_p95:.1f} | {row.retrieve_p50_ms:.1f} / {row.retrieve_p95_ms:.1f} | "
                       f"{row.memory_calls:.1f} | {'' if row.oracle_em is None else f'{row.oracle_em:.1f}'} | "
                       f"{_confident_cell(row)} | {'' if row.call_match is None else f'{row.call_match:.1f}'} |")
        out.append("")
    if report.retrieval_rows:
        out += ["## Retrieval only (no model)", "",
                "Line tasks: a retrieved fragment holds the hole's line (stripped). API tasks (definition recall): "
                "a retrieved fragment holds the def/class line of the called function or class. Percent of tasks; "
                f"Δ hit@{report.k} vs vanilla in points with a 95% paired-bootstrap interval.", "",
                f"| split | retriever | n | hit@1 | hit@5 | hit@{report.k} | MRR | Δ hit@{report.k} vs vanilla | "
                "retrieve p50 / p95 (ms) |",
                "|---|---|---:|---:|---:|---:|---:|---|---|"]
        for row in report.retrieval_rows:
            out.append(f"| {row.split} | {_name(row.strategy, row.alpha)} | {row.n} | {row.hit_at_1:.1f} | "
                       f"{row.hit_at_5:.1f} | {row.hit_at_k:.1f} | {row.mrr:.3f} | {format_interval(row.hit_delta)} | "
                       f"{row.retrieve_p50_ms:.1f} / {row.retrieve_p95_ms:.1f} |")
        out.append("")
    if report.prompt_rows:
        out += ["## What enters the prompt", "",
                f"Hit@{report.k}: a retrieved fragment holds the answer (the hole's line, or the called definition's "
                "def line); in prompt: a block that fit the prompt's block budget holds it (Δ vs vanilla in points, "
                "95% paired bootstrap); near: a prompt block has a line within edit similarity 0.9 of the answer's "
                "first line (for an API task: another call like it); name: the called function's name appears "
                "anywhere in the prompt (API tasks); duplicated: share of block-line tokens the visible file or an "
                "earlier block already shows; calls: a memory strategy's model calls per task while retrieving; "
                "retrieve: p50 time to the prompt, those calls included.", "",
                f"| split | strategy | n | hit@{report.k} | in prompt | Δ in prompt vs vanilla | near | name | "
                "blocks | duplicated % | calls | retrieve p50 (ms) |",
                "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
        for row in report.prompt_rows:
            near = "" if row.near_hit is None else f"{row.near_hit:.1f}"
            named = "" if row.name_hit is None else f"{row.name_hit:.1f}"
            out.append(f"| {row.split} | {_name(row.strategy, row.alpha)} | {row.n} | {row.hit_at_k:.1f} | "
                       f"{row.prompt_hit:.1f} | {format_interval(row.prompt_hit_delta)} | {near} | {named} | "
                       f"{row.blocks:.2f} | {row.duplicate_share:.1f} | {row.memory_calls:.1f} | "
                       f"{row.retrieve_p50_ms:.0f} |")
        out.append("")
    if report.notes:
        out += ["## Left out of the tables", "", *(f"- {note}" for note in report.notes), ""]
    return "\n".join(out)
