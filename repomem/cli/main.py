"""Command line: `repomem index` and `repomem retrieve` (a thin adapter over RepoService).

Failures a user can cause print one line on stderr and exit with 2; nothing prints a traceback
unless REPOMEM_DEBUG=1.

The engine (the index, numpy, numba, scipy: about 1 s of imports on these cores) is imported by the
commands that use it, not here: `--help`, a usage error or `repomem model path` answer at once.
"""

from __future__ import annotations

import argparse
import errno
import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from rich.console import Console
from rich.table import Table

from repomem.cli.backend_options import add_backend_options, model_override, open_chosen_backends, start_model_ahead
from repomem.cli.daemon_client import FORWARDED
from repomem.cli.errors import EXIT_USAGE, OneLineParser, UserError, alpha_value, check_top_k, ok
from repomem.cli.process_exit import exit_now, exit_status
from repomem.cli.progress_bars import RichProgress
from repomem.cli.terminal_text import literal, shown
from repomem.config import BLOCK_ORDERS
from repomem.failures import Failure, FailureKind
from repomem.strategies import STRATEGY_NAMES, STRATEGY_TABLE, strategy_named

if TYPE_CHECKING:
    from repomem.repo_view import Retrieval
    from repomem.service import IndexReport, RepoService


def _human_bytes(count: int) -> str:
    value = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return f"{value:.1f} GB"


def _report_json(report: IndexReport) -> dict[str, Any]:
    from repomem.records import JSON_VERSION

    return {
        "version": JSON_VERSION,
        "repo": str(report.root),
        "action": report.action,
        "reason": report.reason,
        "files": report.files,
        "fragments": report.fragments,
        "nodes": report.nodes,
        "edges": report.edges,
        "seconds": round(report.seconds, 3),
        "index_bytes": report.index_bytes,
        "changed": report.changed,
        "removed": report.removed,
        "skipped": [{"path": p, "reason": r} for p, r in report.skipped],
        "secrets_masked": [{"path": p, "count": n} for p, n in report.masked],
        "outside_graph": list(report.over_node_limit),
    }


def cmd_index(args: argparse.Namespace, out: Console, err: Console) -> int:
    from repomem.cli.service_setup import ensure_index, index_root, open_service

    service = open_service(index_root(args.path))
    report = ensure_index(service, err, full=args.full, load=False)
    if args.json:
        print(json.dumps(_report_json(report), indent=2))
        return 0
    table = Table(title=shown(f"repomem index: {report.root}"), show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", justify="right")
    action = report.action + (f" ({report.reason})" if report.reason and report.action == "built" else "")
    for name, value in (
        ("action", action), ("files", f"{report.files:,}"), ("fragments", f"{report.fragments:,}"),
        ("graph nodes", f"{report.nodes:,}"), ("graph edges", f"{report.edges:,}"),
        ("changed / removed", f"{report.changed:,} / {report.removed:,}"),
        ("skipped", f"{len(report.skipped):,}"),
        ("secrets masked", f"{sum(n for _, n in report.masked):,} in {len(report.masked):,} files"),
        ("text only (too large for the graph)", f"{len(report.over_node_limit):,}"),
        ("seconds", f"{report.seconds:.2f}"),
        ("index size", _human_bytes(report.index_bytes)),
    ):
        table.add_row(name, value)
    out.print(table)
    if args.verbose:
        for path, reason in report.skipped:
            out.print(shown(f"skipped {path}: {reason}"))
        for path, count in report.masked:
            out.print(shown(f"masked {count} secret{'s' if count > 1 else ''} in {path}"))
        limit = service.config.graph.max_file_nodes
        for path in report.over_node_limit:
            out.print(shown(f"text only {path}: more than {limit:,} syntax nodes (graph.max_file_nodes), "
                            "searched but outside the code graph"))
    return 0


def _retrieval_json(service: RepoService, result: Retrieval, timings: dict[str, float]) -> dict[str, Any]:
    from repomem.records import JSON_VERSION, fragment_record

    cursor = result.cursor
    view = service.view()
    return {
        "version": JSON_VERSION,
        "repo": str(service.root),
        "file": cursor.path,
        "line": cursor.line + 1,
        "column": cursor.column + 1,
        "alpha": result.alpha,
        "k": result.k,
        "query": {"first_line": result.query_first_line + 1, "last_line": cursor.line + 1},
        "fragments": [fragment_record(f, rank, text=view.fragment_text(f))
                      for rank, f in enumerate(result.fragments, start=1)],
        "timings_ms": {name: round(value, 3) for name, value in timings.items()},
    }


# Columns below which retrieve's table leaves its fragment column under ~10 characters.
NARROWEST_TABLE = 50


def cmd_retrieve(args: argparse.Namespace, out: Console, err: Console) -> int:
    check_top_k(args.k)
    service, cursor = _cursor_from_args(args, err)
    from repomem.cli.service_setup import ensure_index

    started = time.perf_counter()
    ensure_index(service, err, structure=False, save_later=True)
    index_ms = (time.perf_counter() - started) * 1000
    result = service.view().retrieve_at(cursor, k=args.k, alpha=args.alpha, exclude_visible=not args.include_visible)
    timings = {"index": index_ms, **result.timings_ms}
    if args.json:
        print(json.dumps(_retrieval_json(service, result, timings), indent=2))
        return 0
    # File names are shown literally (repomem/cli/terminal_text.py): never markup, never escapes.
    heading = f"{cursor.path}:{cursor.line + 1}:{cursor.column + 1}  alpha={result.alpha:g}  k={result.k}"
    table = Table(title=shown(heading))
    for name, justify in (("#", "right"), ("fragment", "left"), ("s_ind", "right"), ("s_env", "right"),
                          ("s_rel", "right")):
        # A path too long for the column wraps: cut with "…" it lost its file name and lines.
        table.add_column(name, justify=justify, overflow="fold" if name == "fragment" else "ellipsis")  # type: ignore[arg-type]
    for rank, f in enumerate(result.fragments, start=1):
        table.add_row(str(rank), shown(f"{f.path}:{f.start_line + 1}-{f.end_line}"), f"{f.s_ind:.3f}",
                      f"{f.s_env:.3f}", f"{f.s_rel:.3f}")
    if result.fragments and out.width < NARROWEST_TABLE:
        # Too narrow for the table (COLUMNS=20 folded every path a letter a line): a line a fragment.
        out.print(shown(heading), soft_wrap=True)
        for rank, f in enumerate(result.fragments, start=1):
            out.print(shown(f"#{rank} {f.path}:{f.start_line + 1}-{f.end_line}  s_ind {f.s_ind:.3f}  "
                            f"s_env {f.s_env:.3f}  s_rel {f.s_rel:.3f}"), soft_wrap=True)
    elif result.fragments:
        out.print(table)
    else:
        out.print(shown(f"{heading}: no fragment of the repository matches the code here"), soft_wrap=True)
    if args.code:
        view = service.view()
        for rank, f in enumerate(result.fragments, start=1):
            out.rule(shown(f"#{rank} {f.path}:{f.start_line + 1}-{f.end_line}"))
            out.print(view.fragment_text(f), markup=False, highlight=False, soft_wrap=True)
    err.print(f"index {index_ms:.0f} ms, retrieve {result.timings_ms['retrieve']:.1f} ms", style="dim")
    return 0


def _cursor_from_args(args: argparse.Namespace, err: Console) -> tuple[RepoService, Any]:
    """Shared by retrieve and complete: position, repository, checked cursor."""
    from repomem.cli.service_setup import named_folder, open_service, warn_if_inside
    from repomem.positions import parse_position
    from repomem.repository_root import find_repo_root, in_git_folder

    spec = ok(parse_position(args.position))
    if args.repo is not None:
        root = named_folder(args.repo, warn_inside=False)  # warned below, for a cursor it can answer
    else:
        # A missing file still names its repository through its nearest existing folder.
        existing = spec.path.absolute()
        try:
            while not existing.exists() and existing != existing.parent:
                existing = existing.parent
        except OSError as error:  # a name longer than NAME_MAX: exists() raises, it does not say no
            from repomem.index.scan import unreadable_reason

            raise UserError(Failure(FailureKind.BAD_POSITION, f"{spec.path}: {unreadable_reason(error)}")) from None
        # The folder holding the file, not a symlink's target: a link leaving the repository is
        # still inside it (and refused as such, with its target named).
        start = existing.parent.resolve() if existing.is_symlink() else existing.resolve()
        found = find_repo_root(start)
        git_folder = "" if found is not None else in_git_folder(spec.path.absolute())
        if git_folder:  # a bare repository's files are git's own
            raise UserError(Failure(FailureKind.NOT_A_REPO, f"{spec.path} is {git_folder}"))
        if found is None:
            raise UserError(Failure(
                FailureKind.NOT_A_REPO,
                f"{spec.path} is not inside a repository (no .git or repomem.toml above it, nor an index); "
                "pass --repo PATH",
            ))
        root = found
    service = open_service(root, model_override(getattr(args, "model", None)))
    path = spec.path if spec.path.is_absolute() else Path.cwd() / spec.path
    cursor = ok(service.cursor_at(path, spec.line, spec.column))
    if args.repo is not None:  # once the cursor passed its checks: a refused one is a single error line
        warn_if_inside(root)
    return service, cursor


def cmd_complete(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.max_tokens is not None and args.max_tokens < 1:
        raise UserError(Failure(FailureKind.BAD_OPTION, "--max-tokens must be at least 1"))
    service, cursor = _cursor_from_args(args, err)
    window, served = service.config.model.context_tokens, args.endpoint or service.config.model.endpoint
    if args.max_tokens is not None and args.max_tokens >= window and not served:
        # No prompt fits beside them in a window of the model this process opens: said before it
        # starts (seconds), not at its first generation.
        raise UserError(Failure(FailureKind.BAD_OPTION, f"--max-tokens {args.max_tokens} exceeds the model window "
                                                        f"of {window} tokens (model.context_tokens)"))
    from repomem.cli.service_setup import embed_windows, ensure_index
    from repomem.completion.engine import CompletionEngine
    from repomem.records import JSON_VERSION, fragment_record

    if args.model:
        # A model file that cannot be one is said before the index is built or updated (seconds).
        from repomem.backends.factory import embedded_model_name
        from repomem.backends.models import check_gguf

        if not embedded_model_name(args.model):
            ok(check_gguf(Path(args.model)))
    settings = service.config.completion
    timings: dict[str, float] = {}
    from repomem.cli import backend_options

    key = backend_options.KeptBackend.key(args, service.config)
    kept = backend_options.KEPT_BACKEND.take(key) if backend_options.KEPT_BACKEND is not None else None
    ahead = None if kept is not None else start_model_ahead(args, service.config)  # it loads during the index step
    try:
        started = time.perf_counter()
        strategy = args.strategy or settings.strategy
        if strategy_named(strategy).retrieves:
            ensure_index(service, err, save_later=True)
        if strategy_named(strategy).embeds_windows:
            embed_windows(service, err)
        timings["index"] = (time.perf_counter() - started) * 1000
        started = time.perf_counter()
        backend = kept if kept is not None else open_chosen_backends(args, service.config, err, ahead)[0]
        # the model's start still to wait for after the index step, or the connection to a server
        timings["load_model"] = (time.perf_counter() - started) * 1000
    finally:
        if ahead is not None:
            ahead.discard()  # an error came first, or another model was opened
    try:
        engine = CompletionEngine(service, backend)
        result = ok(engine.complete(cursor, strategy, order=args.order, use_suffix=not args.no_suffix,
                                     max_new_tokens=args.max_tokens))
    except BaseException as error:
        backend_options.release_backend(backend, key, error)
        raise
    backend_options.release_backend(backend, key, None)
    timings.update(result.timings_ms)
    if result.generation.finish_reason == "deadline" and not result.text.strip():
        # An empty answer is otherwise indistinguishable from a model that had nothing to add.
        err.print(f"repomem: warning: the model did not finish within {service.config.completion.deadline_s:g} s "
                  "(completion.deadline_s): no completion", style="yellow", markup=False, highlight=False,
                  soft_wrap=True)
    if args.json:
        prompt = result.prompt
        in_prompt = prompt.fragment_ids
        print(json.dumps({
            "version": JSON_VERSION,
            "repo": str(service.root), "file": cursor.path, "line": cursor.line + 1, "column": cursor.column + 1,
            "strategy": result.strategy, "backend": backend.name, "template": prompt.template, "fim": prompt.fim,
            "completion": result.text, "raw": result.raw, "multiline": result.shape.multiline,
            "finish_reason": result.generation.finish_reason, "rounds": result.rounds,
            "confidence": result.generation.mean_logprob,
            "round_answers": [{"round": number, "raw": answer.raw, "confidence": answer.mean_logprob,
                               "shown": number - 1 == result.chosen_round}
                              for number, answer in enumerate(result.round_answers, start=1)],
            "prompt": prompt.text,
            "tokens": {"prompt": result.generation.prompt_tokens, "cached": result.generation.cached_tokens,
                       "blocks": prompt.block_tokens, "left": prompt.left_tokens, "suffix": prompt.suffix_tokens,
                       "generated": result.generation.completion_tokens},
            "fragments": [fragment_record(f, rank, in_prompt=f.fragment in in_prompt)
                          for rank, f in enumerate(result.fragments, start=1)],
            "model_calls": [call.record() for call in result.model_calls],
            "timings_ms": {name: round(value, 3) for name, value in timings.items()},
        }, indent=2))
        return 0
    print(result.text)
    memory = (f" · {len(result.model_calls)} memory calls {timings.get('memory_model', 0.0):.0f} ms"
              if result.model_calls else "")
    err.print(shown(f"{result.strategy} · {backend.name} · prompt {result.generation.prompt_tokens} tokens "
                    f"({result.generation.cached_tokens} cached) · generate {timings['generate']:.0f} ms{memory}",
                    style="dim"), soft_wrap=True)  # backend.name may hold a model file's name
    return 0


def cmd_serve(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.tcp is not None and not 1 <= args.tcp <= 65535:
        raise UserError(Failure(FailureKind.BAD_OPTION, f"--tcp takes a port from 1 to 65535, got {args.tcp}"))
    if args.token_file is not None and args.tcp is None:
        raise UserError(Failure(FailureKind.BAD_OPTION, "--token-file goes with --tcp (a Unix socket needs no token)"))
    from repomem.lsp.model_ahead import start_for_folder

    ahead = start_for_folder(Path.cwd())  # it loads while the server's modules import
    from repomem.lsp.listen import ListenError
    from repomem.lsp.server import serve

    where = f"127.0.0.1:{args.tcp}" if args.tcp is not None else str(args.socket)
    try:
        return serve(args.tcp, args.socket, args.token_file, ahead)
    except ListenError as error:
        raise UserError(error.failure) from None
    except OSError as error:  # the port is taken, or not ours to bind; the socket's folder is missing
        raise UserError(Failure(FailureKind.SERVE_FAILED,
                                f"cannot listen on {where}: {error.strerror or error}")) from None


def _repository_around_cwd() -> Path | None:
    """The repository the current folder is in (None: the user's settings alone): `repomem model`
    run in a subfolder reads the repository's settings, as `complete` on a file there does."""
    from repomem.repository_root import find_repo_root

    return find_repo_root(Path.cwd())


def cmd_model(args: argparse.Namespace, out: Console, err: Console) -> int:
    from repomem.backends.bf16_layers import copies_of, recorded_choice, verify_widened, widened_path
    from repomem.backends.models import EMBEDDED_MODELS, model_named, model_path, pull_model, verify_model
    from repomem.config import load_config, problem_lines, read_settings, resolved_config

    if args.action == "list":
        if args.name:  # `model list NAME` listed every model and the name went unread
            raise UserError(Failure(FailureKind.BAD_OPTION,
                                    f"`repomem model list` takes no model name, got {args.name!r}"))
        # The command line (and the evaluator, by default) and the editor may run different models.
        settings = read_settings(_repository_around_cwd())
        resolved = {surface: resolved_config(settings, surface) for surface in ("cli", "lsp")}
        for line in problem_lines(resolved["cli"].problems):
            print(f"repomem: warning: {line}", file=sys.stderr)
        runs = {surface: resolved[surface].config.model.embedded_model for surface in ("cli", "lsp")}
        for model in EMBEDDED_MODELS.values():
            # A file of another size is no model (a copy cut short): `model verify` says what to do.
            present = ("not pulled" if not model_path(model).is_file()
                       else "pulled" if model_path(model).stat().st_size == model.size else "damaged")
            used = ",".join(where for surface, where in (("cli", "complete"), ("lsp", "editor"))
                            if runs[surface] == model.name) or "-"
            # The layers "auto" timed faster on this machine (model.embedded_layers), "-" if never timed.
            # (kept per model: any copy names it, and naming one asks nothing of llama.cpp)
            layers = recorded_choice(copies_of(model)[0]) or "-"
            print(f"{model.name:<20} {model.size / 1e6:>7,.0f} MB  {present:<10}  {used:<16}  {layers:<9}  "
                  f"{model_path(model)}")
        return 0
    if args.name and (args.name.lower().endswith(".gguf") or Path(args.name).is_file()):
        raise UserError(Failure(FailureKind.BAD_OPTION, f"`repomem model` pulls and checks the embedded models "
                                                        f"({', '.join(EMBEDDED_MODELS)}); a .gguf file of your own "
                                                        f"is used as it is: --model {args.name}"))
    # Without a name: the model the user's settings run (model.embedded_model).
    config, warnings = load_config(_repository_around_cwd())
    for line in warnings:  # a model name the settings get wrong is said, not silently replaced
        print(f"repomem: warning: {line}", file=sys.stderr)
    model = ok(model_named(args.name or config.model.embedded_model))
    if args.action == "path":
        print(model_path(model))
        return 0
    with RichProgress(err) as progress:
        if args.action == "verify":
            print(ok(verify_model(model_path(model), model, progress=progress, rehash=True)))
            for widened in copies_of(model):
                if widened_path(widened).exists():  # written at a first completion (model.embedded_layers)
                    print(ok(verify_widened(widened_path(widened), widened, progress=progress)))
        else:
            print(ok(pull_model(model, force=args.force, progress=progress)))
    return 0


class _PrintVersion(argparse.Action):
    """`--version`: the installed version, looked up only when asked (every command's start pays
    for the parser, not for package metadata)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("repomem")
        except PackageNotFoundError:  # run from a checkout that pip never installed
            installed = "(not installed)"
        print(f"repomem {installed}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="repomem", description="Repository-aware code completion (FragRel).")
    parser.add_argument("--version", action=_PrintVersion, help="print the installed version and exit")
    commands = parser.add_subparsers(dest="command", required=True)

    index = commands.add_parser("index", help="build or update the index of a repository")
    index.add_argument("path", nargs="?", default=None,
                       help="repository folder (default: the repository around the current folder)")
    index.add_argument("--full", action="store_true", help="rebuild from scratch")
    index.add_argument("--json", action="store_true", help="print the summary as JSON")
    index.add_argument("-v", "--verbose", action="store_true", help="list skipped files with reasons")
    index.set_defaults(handler=cmd_index)

    retrieve = commands.add_parser("retrieve", help="rank the repository's fragments for a cursor")
    retrieve.add_argument("position", help="FILE:LINE[:COL], 1-based; without COL the cursor is at the line end")
    retrieve.add_argument("--k", type=int, default=None, help="how many fragments (default: retrieval.top_k, 10)")
    retrieve.add_argument("--alpha", type=alpha_value, default=None,
                          help="weight of s_env (default: retrieval.alpha, 0.5; 0 = BM25)")
    retrieve.add_argument("--repo", default=None, help="repository root (default: found above FILE)")
    retrieve.add_argument("--json", action="store_true", help="machine-readable output (see README)")
    retrieve.add_argument("--code", action="store_true", help="also print each fragment's code")
    retrieve.add_argument("--include-visible", action="store_true",
                          help="keep fragments of the current file that overlap the query lines")
    retrieve.set_defaults(handler=cmd_retrieve)

    complete = commands.add_parser("complete", help="complete the code at a cursor with a model")
    complete.add_argument("position", help="FILE:LINE[:COL], 1-based; without COL the cursor is at the line end")
    complete.add_argument("--strategy", choices=STRATEGY_NAMES,
                          default=None,
                          help="how context is retrieved (default: completion.strategy, fragrel): "
                               + "; ".join(f"{s.name}: {s.summary}" for s in STRATEGY_TABLE))
    add_backend_options(complete)
    complete.add_argument("--order", choices=BLOCK_ORDERS, default=None,
                          help="order of retrieved blocks (default: completion.order, stable)")
    complete.add_argument("--max-tokens", type=int, default=None,
                          help="new tokens at most (default: completion.max_new_tokens, 64)")
    complete.add_argument("--no-suffix", action="store_true", help="ignore the code after the cursor (no FIM)")
    complete.add_argument("--repo", default=None, help="repository root (default: found above FILE)")
    complete.add_argument("--json", action="store_true", help="prompt, fragments, tokens and timings as JSON")
    complete.set_defaults(handler=cmd_complete)

    serve = commands.add_parser("serve", help="run the language server (stdio, --tcp or --socket)")
    listen = serve.add_mutually_exclusive_group()
    listen.add_argument("--tcp", type=int, default=None, metavar="PORT",
                        help="listen on 127.0.0.1:PORT; a client must send the token (see --token-file) "
                             "as initializationOptions.token")
    listen.add_argument("--socket", type=Path, default=None, metavar="PATH",
                        help="listen on a Unix socket only you can open (mode 0600)")
    serve.add_argument("--token-file", type=Path, default=None, metavar="FILE",
                       help="the --tcp token, created 0600 if missing (default: "
                            "$XDG_CONFIG_HOME/repomem/serve-token)")
    serve.set_defaults(handler=cmd_serve)

    model = commands.add_parser("model", help="the embedded models: fetch, locate, check, list")
    model.add_argument("action", choices=("pull", "path", "verify", "list"),
                       help="fetch a model, print its path, check it, or list the embedded models")
    model.add_argument("name", nargs="?", default="",
                       help="qwen2.5-coder-0.5b or qwen2.5-coder-1.5b (default: model.embedded_model)")
    model.add_argument("--force", action="store_true", help="fetch again even if present")
    model.set_defaults(handler=cmd_model)

    from repomem.cli.config_command import add_config_parser
    from repomem.cli.daemon_command import add_daemon_parser
    from repomem.cli.eval_commands import add_eval_parser
    from repomem.cli.summarise_command import add_summarise_parser

    add_summarise_parser(commands)
    add_eval_parser(commands)
    add_config_parser(commands)
    add_daemon_parser(commands, main, parser.parse_args)
    return parser


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """The parser, built once a process (~20 ms): a daemon parses every command with it."""
    return build_parser()


class _CommandConsole(Console):
    """rich's Console, with a reader gone away left to main(): rich's own answer is SystemExit(1),
    the status of an internal error, where `repomem retrieve ... | head -1` ends as `print` does."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # nothing more is written to it
        raise BrokenPipeError(errno.EPIPE, "the reader closed the pipe")


def main(argv: list[str] | None = None, out: Console | None = None, err: Console | None = None) -> int:
    """One command; `out` and `err`: the consoles it prints tables and bars on (a resident process
    passes those of its client's terminal)."""
    out = out or _CommandConsole()
    err = err or _CommandConsole(stderr=True)
    parser = _parser()
    args = parser.parse_args(argv)
    if sys.stdout is None and args.command != "serve":
        # Started with standard output closed (`>&-`): every result would vanish without a word.
        print("repomem: error: standard output is closed; nothing could be printed", file=sys.stderr)
        return 1
    try:
        os.getcwd()
    except OSError:  # every command finds its repository or settings from here
        print("repomem: error: the current folder no longer exists (removed after the shell entered it); "
              "cd to an existing folder", file=sys.stderr)
        return EXIT_USAGE
    from repomem.cache import cache_problem

    problem = cache_problem()
    if problem is not None:  # every command reads the cache: the index seal's key, the models
        print(f"repomem: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        status = int(args.handler(args, out, err))
        if status == 0 and args.command in FORWARDED:
            _daemon_for_next_commands(sys.argv[1:] if argv is None else argv)
        return status
    except UserError as error:
        # One line, shown literally: a message quotes the file names the user gave.
        print(f"repomem: error: {literal(error.failure.message)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("repomem: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`repomem retrieve ... | head -1`): stop quietly, as other tools do.
        try:
            descriptor = sys.stdout.fileno()
        except (OSError, ValueError):  # a daemon's command: its output goes to the client in frames
            return 141
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, descriptor)  # what is still buffered goes nowhere at the exit
        os.close(devnull)
        return 141
    except OSError as error:
        if error.errno not in (errno.ENOSPC, errno.EIO, errno.EDQUOT) or error.filename is not None:
            return _internal_error(error)
        print(f"repomem: error: cannot write the output: {error.strerror}", file=sys.stderr)
        return 1
    except SystemError as error:
        # Ctrl-C while a compiled (numba) kernel ran: the dispatcher reports the KeyboardInterrupt
        # raised meanwhile as a SystemError caused by it ("repomem: internal error" at a Ctrl-C).
        if isinstance(error.__cause__ or error.__context__, KeyboardInterrupt):
            print("repomem: interrupted", file=sys.stderr)
            return 130
        return _internal_error(error)
    except Exception as error:  # a bug: say so in one line, keep the traceback for REPOMEM_DEBUG
        return _internal_error(error)


def _daemon_for_next_commands(argv: list[str]) -> None:
    """A command a daemon could have answered ran here: the daemon the settings ask for is started
    for the next ones (repomem/cli/daemon_command.py), never from inside a daemon."""
    from repomem.cli import service_setup
    from repomem.cli.daemon_command import start_for_next_commands

    service = service_setup.LAST_OPENED
    if service_setup.KEPT is None and service is not None:
        start_for_next_commands(argv, service.root, service.config.daemon.auto_start,
                                service.config.daemon.idle_minutes)


def _internal_error(error: Exception) -> int:
    """A bug: one line, exit 1; REPOMEM_DEBUG=1 raises it again for the traceback."""
    if os.environ.get("REPOMEM_DEBUG"):
        raise error
    print(f"repomem: internal error: {error.__class__.__name__}: {error} (REPOMEM_DEBUG=1 shows details)",
          file=sys.stderr)
    return 1


def entry() -> NoReturn:
    """The `repomem` command: `main`, then the exit without the interpreter's teardown."""
    try:
        status = main()
    except SystemExit as stop:  # argparse's usage errors and --help
        status = exit_status(stop.code)
    exit_now(status)


if __name__ == "__main__":
    entry()
