"""`repomem eval build | run | report`: thin adapters over the evaluation modules."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from repomem.backends.base import BackendTokenizer, TokenCountFailed
from repomem.backends.factory import open_backend
from repomem.cli.backend_options import add_backend_options, open_chosen_backends
from repomem.cli.errors import UserError, alpha_value, check_top_k, finite_float, ok
from repomem.cli.progress_bars import RichProgress
from repomem.cli.terminal_text import shown
from repomem.config import (
    BLOCK_ORDERS,
    Config,
    ConfigProblem,
    measured_model,
    model_defaults,
    with_assignments,
    with_overrides,
)
from repomem.config.sections import ALPHA_MAX
from repomem.failures import Failure, FailureKind
from repomem.strategies import EVAL_DEFAULT_STRATEGIES, STRATEGY_NAMES

DEFAULT_REPORT_DIR = Path("eval/results")


def _open_backend(args: argparse.Namespace, config: Config, err: Console):
    with RichProgress(err) as progress:
        return ok(open_backend(config, progress, model_path=getattr(args, "model", None) or "",
                               endpoint=getattr(args, "endpoint", None) or "",
                               vllm_model=getattr(args, "vllm", None) or ""))


def _unwritable_folder(folder: Path) -> str | None:
    """Why `folder` could not be created or written in, judged from its nearest existing ancestor
    (a file on the way, a read-only place), or None: `eval build` fetched every package (minutes)
    before it found out."""
    above = Path(os.path.abspath(folder))
    while not os.path.lexists(above) and above != above.parent:
        above = above.parent
    if not above.is_dir():
        return f"{above} is not a folder, so no folder can be made in it"
    if not os.access(above, os.W_OK | os.X_OK):
        return f"{above} cannot be written in"
    return None


def cmd_eval_build(args: argparse.Namespace, out: Console, err: Console) -> int:
    from repomem.evaluation.build import build_benchmark, load_devset, shipped_devset

    devset = ok(load_devset(shipped_devset(args.devset) or Path(args.devset)))
    # Refused before the packages are fetched (minutes), not when the tasks are written at the end.
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise UserError(Failure(FailureKind.BAD_OPTION, f"--out {args.out} is a file; name a folder for the tasks"))
    unwritable = _unwritable_folder(Path(args.out))
    if unwritable is not None:
        raise UserError(Failure(FailureKind.BAD_OPTION, f"--out {args.out}: {unwritable}"))
    if args.prompt_tokens < 64:  # as eval run: a prompt of no context is no task
        raise UserError(Failure(FailureKind.BAD_OPTION, "--prompt-tokens must be at least 64"))
    if args.seed is not None or args.tasks_per_repo is not None:
        import dataclasses

        if args.tasks_per_repo is not None and args.tasks_per_repo < 1:
            raise UserError(Failure(FailureKind.BAD_OPTION, "--tasks-per-repo must be at least 1"))
        devset = dataclasses.replace(
            devset, seed=devset.seed if args.seed is None else args.seed,
            tasks_per_repo=devset.tasks_per_repo if args.tasks_per_repo is None else args.tasks_per_repo)
    backend = _open_backend(args, Config(), err)
    try:
        with RichProgress(err) as progress:
            report = ok(build_benchmark(devset, Path(args.out), BackendTokenizer(backend), progress,
                                        max_prompt_tokens=args.prompt_tokens))
    except TokenCountFailed as error:
        raise UserError(error.failure) from None
    finally:
        backend.close()
    table = Table(title=shown(f"repomem eval build: {report.out}"))  # a folder name is never markup
    table.add_column("repository")
    splits = sorted(report.tasks)
    for split in splits:
        table.add_column(split, justify="right")
    for repo in sorted({name for name, _ in report.repo_tasks}):
        table.add_row(repo, *(str(report.repo_tasks.get((repo, split), 0)) for split in splits))
    table.add_row("all", *(str(report.tasks[split]) for split in splits), style="bold")
    out.print(table)
    for note in report.notes:  # e.g. a language without call resolution yet: line tasks only
        err.print(note)
    err.print(shown(f"{report.seconds:.0f} s; tasks in {report.out}/<split>.jsonl, repositories in "
                    f"{report.out}/repositories", style="dim"), soft_wrap=True)
    return 0


def _parse_floats(text: str, option: str) -> tuple[float, ...]:
    try:
        values = tuple(finite_float(v) for v in text.split(","))
    except argparse.ArgumentTypeError:
        raise UserError(Failure(FailureKind.BAD_OPTION, f"{option} takes finite numbers separated by commas, "
                                                        f"got {text!r}")) from None
    if any(not 0 <= v <= ALPHA_MAX for v in values):
        raise UserError(Failure(FailureKind.BAD_OPTION, f"{option}: values must be from 0 to {ALPHA_MAX:g}"))
    return values


def _measured_model(args: argparse.Namespace, assigned: Config) -> str:
    """The embedded model a run's --model or --hf names, else the one its --set assignments name
    (`assigned`: Config() under them; `model.embedded_model`, `model.hf_model`, or the default when
    neither, nor a server, is given): the model whose measured levers apply
    (config.measured_model); "" for a model server or another checkpoint."""
    from repomem.backends.factory import embedded_model_name

    if args.endpoint or args.vllm:
        return ""
    named = args.model or args.hf
    if not named:
        return measured_model(assigned)
    return named if embedded_model_name(named) else ""


def _same_file(first: Path, second: Path) -> bool:
    """Whether two paths name one file: alike once resolved, or one existing file under two names."""
    if first.resolve() == second.resolve():
        return True
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist yet
        return False


def _check_files_apart(args: argparse.Namespace, results: Path) -> None:
    """Refuses a run whose --results, --generations, --defer and --tasks name one file twice:
    --defer empties its file as it starts (the generation store or the results it named were
    lost), and records or answers appended to another role's file spoil it (a tasks file holding
    records no longer reads as tasks)."""
    named = [("--results", results)]
    named += [(option, Path(path)) for option, path in (("--generations", args.generations),
                                                         ("--defer", args.defer)) if path]
    named += [("--tasks", Path(path)) for path in args.tasks]  # one tasks file twice is refused by its task ids
    for position, (option, path) in enumerate(named):
        for other_option, other in named[position + 1:]:
            if option != other_option and _same_file(path, other):
                raise UserError(Failure(FailureKind.BAD_OPTION, f"{option} {path} and {other_option} {other} name the "
                                                                "same file; give each its own file"))


def cmd_eval_run(args: argparse.Namespace, out: Console, err: Console) -> int:
    strategies = tuple(s.strip() for s in args.strategies.split(",") if s.strip())
    unknown = [s for s in strategies if s not in STRATEGY_NAMES]
    if unknown or not strategies:  # `--strategies ,` read "unknown 'empty'", as if a strategy were named so
        raise UserError(Failure(FailureKind.BAD_OPTION,
                                f"--strategies: {f'unknown {unknown[0]!r}' if unknown else 'names none'}; "
                                f"choose from {', '.join(STRATEGY_NAMES)}"))
    if args.limit is not None and args.limit < 1:
        raise UserError(Failure(FailureKind.BAD_OPTION, "--limit must be at least 1"))
    check_top_k(args.k)
    if args.max_new_tokens < 1:
        raise UserError(Failure(FailureKind.BAD_OPTION, "--max-new-tokens must be at least 1"))
    if args.prompt_tokens is not None and args.prompt_tokens < 64:
        raise UserError(Failure(FailureKind.BAD_OPTION, "--prompt-tokens must be at least 64"))
    if args.threads is not None and args.threads < 1:
        raise UserError(Failure(FailureKind.BAD_OPTION, "--threads must be at least 1"))
    if args.retrieval_only and args.prompt_only:
        raise UserError(Failure(FailureKind.BAD_OPTION, "--retrieval-only and --prompt-only exclude each other"))
    if args.workers < 1:
        raise UserError(Failure(FailureKind.BAD_OPTION, "--workers must be at least 1"))
    alphas = _parse_floats(args.alphas, "--alphas") if args.alphas else ()
    if args.defer and not args.generations:
        raise UserError(Failure(FailureKind.BAD_OPTION,
                                "--defer needs --generations (the store whose answers it defers)"))
    if args.results and Path(args.results).is_dir():
        raise UserError(Failure(FailureKind.BAD_OPTION, f"--results {args.results} is a folder; name a JSONL file"))
    # The evaluator (and with it the engine) is imported once the options are known to be good.
    from repomem.evaluation.run import RunSettings, claim_results, run_evaluation, stop_at_once
    from repomem.evaluation.tasks import draw_tasks

    tasks = ok(draw_tasks([Path(path) for path in args.tasks], args.limit, args.seed))
    settings = RunSettings(
        strategies=strategies, alpha=args.alpha, k=args.k, order=args.order, max_new_tokens=args.max_new_tokens,
        max_prompt_tokens=args.prompt_tokens, retrieval_only=args.retrieval_only, alphas=alphas,
        prompt_only=args.prompt_only, overrides=tuple(args.set), typing=args.typing,
        right_context=args.right_context,
    )
    results = Path(args.results) if args.results else Path(args.tasks[0]).parent / "results.jsonl"
    _check_files_apart(args, results)
    # The levers measured with the model the run asks for (SettingRules.models), under --set; the
    # model may be named by --set itself (model.embedded_model=...), so it is read with them applied.
    assigned, _ = with_assignments(Config(), settings.overrides)
    config = with_overrides(Config(), **model_defaults(_measured_model(args, assigned)))
    if args.threads is not None:
        config = with_overrides(config, model={"threads": args.threads})
    # --set applies before the backend opens: some settings shape it (model.endpoint_logprobs,
    # context_tokens). run_evaluation lays the same assignments over this config again, to no effect.
    moved: list[ConfigProblem] = []
    config, problems = with_assignments(config, settings.overrides, moved)
    if problems:
        raise UserError(Failure(FailureKind.BAD_OPTION, f"--set: {problems[0].render(outcome=False)}"))
    for notice in moved:
        err.print(f"repomem: warning: {notice.render()}", style="yellow", markup=False, highlight=False)
    unused = [option for option, value in (("--generations", args.generations), ("--defer", args.defer)) if value]
    if args.retrieval_only and unused:  # a run without a model asks for no generation: they did nothing, silently
        verb = "does" if len(unused) == 1 else "do"
        err.print(f"repomem: warning: {' and '.join(unused)} {verb} nothing with --retrieval-only (no model runs)",
                  style="yellow", markup=False, highlight=False)
    if results.exists() and not args.retrieval_only:
        # A results file another run writes is refused before the model opens (seconds to a minute,
        # or a server's connection); run_evaluation claims it again for the run itself.
        claimed = claim_results(results)
        if isinstance(claimed, Failure):
            raise UserError(claimed)
        os.close(claimed)
    backends = [] if args.retrieval_only else open_chosen_backends(args, config, err)

    def log(message: str) -> None:
        err.print(message, style="dim", markup=False, highlight=False)

    try:
        with RichProgress(err) as progress:
            summary = ok(run_evaluation(tasks, Path(args.repos), results, settings, config=config, backends=backends,
                                         workers=args.workers, progress=progress, log=log,
                                         generations=Path(args.generations) if args.generations else None,
                                         defer=Path(args.defer) if args.defer else None))
    except KeyboardInterrupt:  # before the tasks ran (indexing), or a second Ctrl-C while they stopped
        stop_at_once(backends)  # a graceful stop of the model's child waits on its answer
        print(_resume_line(results), file=sys.stderr)
        return 130
    finally:
        for backend in backends:
            backend.close()
    print(f"{summary.written} results written, {summary.skipped} already there, {summary.failed} failed, "
          f"{summary.reused} generations reused ({summary.recalled} from the generation store), "
          f"{summary.seconds:.0f} s -> {summary.results}")
    if summary.deferred:
        print(f"{summary.deferred} results deferred: their prompts are in {args.defer}; answer them into the "
              "generation store (scripts/answer_requests.py), then run this again with --generations")
    if summary.batch_sizes:
        sizes = summary.batch_sizes
        print(f"{sum(sizes)} generations in {len(sizes)} batches (mean {sum(sizes) / len(sizes):.1f}, "
              f"largest {max(sizes)})")
    if summary.interrupted:
        print(_resume_line(summary.results), file=sys.stderr)
        return 130
    if summary.failed:
        print(f"repomem: {summary.failed} result{'s' if summary.failed > 1 else ''} failed (each record says why in "
              f"its \"error\": {summary.results})", file=sys.stderr)
        return 1
    return 0


def _resume_line(results: Path) -> str:
    return (f"repomem: interrupted; the finished results are kept in {results}: run the same command again to "
            "resume (it skips them)")


def cmd_eval_report(args: argparse.Namespace, out: Console, err: Console) -> int:
    for path in args.results:
        if not Path(path).is_file():
            # A named pipe or a device exists: "no such file" sent the user looking for a typo.
            what = ("a folder, not a results file" if Path(path).is_dir()
                    else "not a regular file" if Path(path).exists() else "no such file")
            raise UserError(Failure(FailureKind.MISSING_RESULTS, f"{path}: {what}"))
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise UserError(Failure(FailureKind.BAD_OPTION, f"--out {args.out} is a file; name a folder for the report"))
    from repomem.evaluation.report import markdown, summarize
    from repomem.evaluation.run import read_results

    records: list[dict[str, Any]] = []
    for path in args.results:
        read = read_results(Path(path))
        if not read:
            raise UserError(Failure(FailureKind.NO_RESULTS,
                                    f"{path}: no results records in it (not a results file of `repomem "
                                    "eval run`, or one of another version)"))
        records.extend(read)
    report = ok(summarize(records, backend=args.backend))
    from repomem.evaluation.plots import alpha_sweep, prompt_bars, strategy_bars  # matplotlib: ~0.5 s

    target = Path(args.out)
    text = markdown(report, args.title)
    summary = {"model": [row.__dict__ for row in report.model_rows],
               "retrieval": [row.__dict__ for row in report.retrieval_rows],
               "prompt": [row.__dict__ for row in report.prompt_rows], "k": report.k,
               "backend": report.backend, "order": report.order, "prompt_tokens": report.prompt_tokens}
    try:  # a folder under a file, in /proc or read-only: an internal error (NotADirectoryError) before
        target.mkdir(parents=True, exist_ok=True)
        figures = [p for p in (strategy_bars(report, target / "strategies.png"),
                               alpha_sweep(report, target / "alpha-sweep.png"),
                               prompt_bars(report, target / "prompt.png")) if p is not None]
        if figures:
            text += "\n" + "\n".join(f"![{p.stem}]({p.name})" for p in figures) + "\n"
        (target / "report.md").write_text(text, encoding="utf-8")
        (target / "report.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    except OSError as error:
        raise UserError(Failure(FailureKind.WRITE_FAILED, f"--out {args.out}: cannot write the report there "
                                                          f"({error.strerror or error})")) from None
    print(text)  # plain: markdown must not be re-wrapped to the terminal width
    # --out as written, never markup (`[/x]` raised a MarkupError after the report was written), and
    # on one line: a path broken at the width of a log cannot be copied
    err.print(shown(f"wrote {target / 'report.md'}, report.json and {len(figures)} figure(s)", style="dim"),
              soft_wrap=True)
    return 0


def add_eval_parser(commands: Any) -> None:
    evaluation = commands.add_parser("eval", help="RepoEval-protocol evaluation: build tasks, run, report")
    actions = evaluation.add_subparsers(dest="eval_command", required=True)

    build = actions.add_parser("build", help="RepoEval-protocol tasks from pinned package sources")
    build.add_argument("--devset", default="quick",
                       help="a dev set shipped in eval/devsets/ (quick: 3 repositories, ten: 10) or a TOML file "
                            "(default: %(default)s)")
    build.add_argument("--out", required=True, help="folder for <split>.jsonl and repositories/")
    build.add_argument("--seed", type=int, default=None, help="override the dev set's seed")
    build.add_argument("--tasks-per-repo", type=int, default=None, help="override the dev set's count")
    build.add_argument("--prompt-tokens", type=int, default=2000, help="left context kept, in tokens (default 2000)")
    build.add_argument("--model", default=None, help="GGUF whose tokenizer counts tokens (default: embedded model)")
    build.add_argument("--endpoint", default=None, help="or an OpenAI-compatible server's tokenizer")
    build.set_defaults(handler=cmd_eval_build)

    run = actions.add_parser("run", help="run strategies on RepoEval tasks (resumable)")
    run.add_argument("--tasks", action="append", required=True, help="a tasks JSONL file (repeat for several splits)")
    run.add_argument("--repos", required=True, help="folder holding one folder per repository")
    run.add_argument("--results", default=None, help="results JSONL (default: results.jsonl beside the tasks)")
    run.add_argument("--strategies", default=",".join(EVAL_DEFAULT_STRATEGIES),
                     help="comma-separated (default: all but those that embed every window first: "
                          f"{', '.join(sorted(set(STRATEGY_NAMES) - set(EVAL_DEFAULT_STRATEGIES)))})")
    run.add_argument("--limit", type=int, default=None, help="tasks per split, drawn by --seed, balanced over repos")
    run.add_argument("--seed", type=int, default=0, help="which tasks --limit draws (default 0)")
    run.add_argument("--alpha", type=alpha_value, default=None, help="FragRel's alpha (default 0.5)")
    run.add_argument("--alphas", default="", help="also fragrel at each of these alphas, "
                     "e.g. 0,0.25,0.5,1,2 (0: its levers, graph off)")
    run.add_argument("--k", type=int, default=None, help="fragments retrieved (default 10)")
    run.add_argument("--order", choices=BLOCK_ORDERS, default="similarity",
                     help="block order: similarity (the most BM25-similar block last; default, RepoCoder's order "
                          "for BM25), score (the best-scored block last: FragRel as published) or stable")
    run.add_argument("--max-new-tokens", type=int, default=100, help="generation cap (protocol: 100)")
    run.add_argument("--prompt-tokens", type=int, default=None,
                     help="whole prompt budget, blocks get half (default 2048)")
    run.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: all cores)")
    run.add_argument("--retrieval-only", action="store_true", help="no model: retrieval metrics only")
    run.add_argument("--prompt-only", action="store_true",
                     help="build each prompt with the model's tokenizer but generate nothing: retrieval and "
                          "prompt-level metrics (answer in the blocks that fit, duplicated block tokens)")
    run.add_argument("--typing", choices=("word",), default="",
                     help="word: the cursor after half of a name of the hole's first line, as in an editor while a "
                          "name is typed (the prediction is the typed text and the answer)")
    run.add_argument("--right-context", action="store_true",
                     help="the code after the hole in the file and the prompt (fill in the middle), as an editor "
                          "completes a line between others (RepoEval's protocol: the left context only)")
    run.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                     help="a config override for this run, e.g. relations.same_file_weight=1 (repeatable; "
                          "recorded with every result)")
    run.add_argument("--generations", default=None, metavar="JSONL",
                     help="a generation store kept across runs: a task's prompt answered by an earlier run (same "
                          "model, cap and stops) is not generated again (greedy decoding gives the same answer)")
    run.add_argument("--defer", default=None, metavar="JSONL",
                     help="write every prompt the generation store cannot answer to this file instead of "
                          "generating it (with --generations): answer the file on another machine "
                          "(scripts/answer_requests.py), append the answers to the store and run again")
    run.add_argument("--workers", type=int, default=1,
                     help="tasks evaluated at once (threads): requests in flight against the servers, or the "
                          "batch an in-process model gathers (default 1); records are the same for any number")
    add_backend_options(run, endpoints=True)
    run.set_defaults(handler=cmd_eval_run)

    report = actions.add_parser("report", help="markdown tables and PNG plots from results")
    report.add_argument("results", nargs="+", help="results JSONL file(s)")
    report.add_argument("--out", default=str(DEFAULT_REPORT_DIR),
                        help="folder for report.md, report.json and plots (default: %(default)s)")
    report.add_argument("--backend", default=None, help="which backend's model results (default: the most common)")
    report.add_argument("--title", default="RepoEval-protocol results", help="the report's heading")
    report.set_defaults(handler=cmd_eval_report)
