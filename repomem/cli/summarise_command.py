"""`repomem summarise`: model-written summaries of a repository, kept in its index (issue 14).

Says what it will cost (units, prompt tokens, time at the measured rate of one call) before it
starts, asks on a terminal (or takes --yes), shows progress, and resumes after an interruption:
every summary is on disk as soon as the model wrote it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from rich.console import Console
from rich.table import Table

from repomem.cli.backend_options import add_backend_options, open_chosen_backends
from repomem.cli.errors import UserError
from repomem.cli.progress_bars import RichProgress
from repomem.cli.terminal_text import shown
from repomem.failures import Failure, FailureKind


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else \
        f"{seconds / 3600:.1f} h"


def cmd_summarise(args: argparse.Namespace, out: Console, err: Console) -> int:
    from repomem.cli.service_setup import ensure_index, index_root, open_service
    from repomem.completion import summarise

    if args.limit is not None and args.limit < 1:
        raise UserError(Failure(FailureKind.BAD_OPTION, "--limit must be at least 1"))
    root = index_root(args.path)  # a folder that is not there is said first
    if not (args.yes or args.dry_run or sys.stdin.isatty()):
        raise UserError(Failure(FailureKind.NEEDS_CONFIRMATION,
                                "add --yes to write summaries, or --dry-run to see what "
                                "they would cost (stdin is not a terminal to ask on)"))
    kinds = summarise.SUMMARY_KINDS if args.kind == "all" else (args.kind,)
    service = open_service(root)
    ensure_index(service, err)
    backend = open_chosen_backends(args, service.config, err)[0]
    store = service.memories.open_written_summaries()
    try:
        with RichProgress(err) as progress:
            planned = summarise.plan(service.view(), backend, store, kinds, args.limit, progress)
        if isinstance(planned, Failure):  # the server fails: no estimate, nothing to ask or write
            raise UserError(dataclasses.replace(planned, message=f"no summary written: {planned.message}"))
        work, answered = planned
        if not args.dry_run:  # summaries of text the repository no longer has go
            store.compact(summarise.live_keys(service.view()))
        estimate = {"to_write": len(work.units), "already_written": work.already, "prompt_tokens": work.prompt_tokens,
                    "seconds_per_call": round(work.seconds_per_call, 2), "estimated_s": round(work.estimated_s, 1),
                    "model": backend.name}
        if args.json and (args.dry_run or not work.units):  # nothing to write: the estimate says so
            print(json.dumps({**estimate, **({} if args.dry_run else {"written": 0, "failed": 0})}, indent=2))
            return 0
        if not work.units:  # one line, not a table of zeros
            out.print(f"nothing to summarise: all {work.already:,} summaries are written already" if work.already
                      else "nothing to summarise: the index holds no file to summarise", markup=False, highlight=False)
            return 0
        table = Table(title=shown(f"repomem summarise: {service.root}"), show_header=False)
        table.add_column("what", style="bold")
        table.add_column("value", justify="right")
        for name, value in (("model", shown(backend.name)),  # a model file's name is never markup
                            ("summaries to write", f"{len(work.units):,}"),
                            ("already written (skipped)", f"{work.already:,}"),
                            ("prompt tokens", f"{work.prompt_tokens:,}"),
                            ("one call (mean of two measured)", f"{work.seconds_per_call:.1f} s"),
                            ("estimated time", _minutes(work.estimated_s))):
            table.add_row(name, value)
        err.print(table)
        if args.dry_run:
            return 0
        if not args.yes and input("write them? [y/N] ").strip().lower() not in ("y", "yes"):
            return 0
        try:
            with RichProgress(err) as progress:
                report = summarise.run(service.view(), backend, store, work, answered, progress)
        except KeyboardInterrupt:
            done = sum(1 for unit in work.units if store.has(backend.name, unit.key))
            print(f"repomem: interrupted after {done:,} of {len(work.units):,} summaries; they are kept, and "
                  "`repomem summarise` again goes on from there", file=sys.stderr)
            return 130
    finally:
        backend.close()
    summary = {"written": report.written, "failed": report.failed, "seconds": round(report.seconds, 1),
               "file": str(store.path)}
    if report.failure is not None:
        summary["error"] = report.failure.message
    if args.json:
        print(json.dumps({**estimate, **summary}, indent=2))
    elif report.written:
        out.print(f"wrote {report.written:,} summaries in {_minutes(report.seconds)} to {store.path}",
                  markup=False, highlight=False)
        if service.config.memory.summaries != "model":
            out.print('set memory.summaries = "model" in repomem.toml to use them', markup=False, highlight=False)
    if report.failure is None:
        return 0
    # A failure of the server is a failure of the command, as `complete` says one: one line, exit 2.
    failed = f"{report.failed:,} of {len(work.units):,} summaries failed" + (
        f" and {report.not_tried:,} were not asked for (stopped after {summarise.FAILURES_IN_A_ROW} "
        "failures in a row)" if report.not_tried else "")
    raise UserError(dataclasses.replace(report.failure, message=(
        f"no summary written: {failed}: {report.failure.message}" if not report.written else
        f"{failed}: {report.failure.message}; the {report.written:,} written are kept, and "
        "`repomem summarise` again asks for the rest")))


def add_summarise_parser(commands) -> None:
    parser = commands.add_parser("summarise", help="write model summaries of files and pages into the index")
    parser.add_argument("path", nargs="?", default=None,
                        help="repository folder (default: the repository around the current folder)")
    parser.add_argument("--kind", choices=("files", "pages", "all"), default="files",
                        help="files (the summary tree's leaves), pages (ReadAgent's gists) or all (default files)")
    parser.add_argument("--limit", type=int, default=None, help="write at most this many now (the rest later)")
    parser.add_argument("--dry-run", action="store_true", help="say what it would cost, write nothing")
    parser.add_argument("--yes", action="store_true", help="do not ask before writing")
    parser.add_argument("--json", action="store_true", help="the estimate and the outcome as JSON")
    add_backend_options(parser)
    parser.set_defaults(handler=cmd_summarise)
