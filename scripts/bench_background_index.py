"""Completions while the language server builds its index: what the build's CPU priority buys.

    python scripts/bench_background_index.py [--rounds 3] [--repo DIR] [--out eval/results/bench-background-index.json]

Starts `repomem serve` over stdio with a real LSP client (pygls's LanguageClient) on a copy of
Django 5.1.4 (pinned, hash-checked; or --repo) whose index is not built yet, so the server builds
it at start (on two cores: its thread and forked parse workers) while the embedded model loads.
As soon as the model is in, the client asks for completions in open files, one after another,
each at a new place (a function line cut after its `= ` or `return `, 10 places of 5 files: a
cold prompt each time, from the open file alone since no index is ready), until the server says
it is ready. Three modes, in turns per round (the order rotates):

- `alone`: nothing to build (a `repomem.toml` excludes every top folder and the one top-level
  source file is set aside, so the index is empty and ready at once, and the prompts hold the
  open file alone, as before any index is ready): the model's own time for the same asks;
- `nice 0`: the build at the model's priority (`indexNice: 0`, as before);
- `nice 10`: the build 10 nice steps lower (`indexNice: 10`, the default).

Reports per mode the asks answered while the build ran (p50 / p95 / mean seconds, each ask's
time to its first non-empty answer) and the seconds from start to "ready" (the build's cost of
yielding). Not a test: a benchmark, its figures in docs/editors.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from lsprotocol import types
from pygls.lsp.client import LanguageClient
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.config import Config  # noqa: E402
from scripts.bench_editor_walk import Editor, choose_files  # noqa: E402
from scripts.bench_sources import django_or  # noqa: E402

MODES = {"alone": None, "nice 0": 0, "nice 10": 10}
FILES = 5
PLACES_PER_FILE = 2
GIVE_UP_S = 600.0


def _set_aside(repo: Path, aside: bool) -> None:
    """`alone`'s tree: every top folder excluded from the scan and the top-level sources moved
    out of the way (aside), or the tree as it was."""
    settings = repo / "repomem.toml"
    top_sources = [p for p in repo.iterdir() if p.is_file() and p.suffix in (".js", ".py")]
    if aside:
        folders = [p.name for p in repo.iterdir() if p.is_dir() and not p.name.startswith(".")]
        settings.write_text("[scan]\nexcluded_dirs = " + json.dumps([*Config().scan.excluded_dirs, *folders]) + "\n")
        for source in top_sources:
            source.rename(source.with_name(source.name + ".aside"))
    else:
        settings.unlink()
        for aside_file in repo.glob("*.aside"):
            aside_file.rename(aside_file.with_name(aside_file.name.removesuffix(".aside")))


async def run_mode(repo: Path, places: list[tuple[str, int, str]], nice: int | None, console: Console) -> dict:
    """One server from a cold start; the asks answered before it said ready."""
    index_folder = repo / ".repomem"
    if index_folder.is_dir():
        shutil.rmtree(index_folder)
    if nice is None:
        _set_aside(repo, True)
    client = LanguageClient("repomem-bench-background-index", "1")
    messages: list[str] = []
    model_in = asyncio.Event()
    client.feature(types.WINDOW_SHOW_MESSAGE)(lambda params: messages.append(params.message))
    client.feature(types.WINDOW_LOG_MESSAGE)(lambda params: messages.append(params.message))
    client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)(lambda params: None)

    @client.feature(types.PROGRESS)
    def progress(params) -> None:
        value = params.value if isinstance(params.value, dict) else {}
        if "-model-" in str(params.token) and value.get("kind") == "end":
            model_in.set()

    await client.start_io(sys.executable, "-m", "repomem", "serve")
    started = time.perf_counter()
    settings = {} if nice is None else {"indexNice": nice}
    await client.initialize_async(types.InitializeParams(
        capabilities=types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True)),
        root_uri=repo.as_uri(), initialization_options={"repomem": settings}))
    client.initialized(types.InitializedParams())
    editor = Editor(client)
    for path in dict.fromkeys(path for path, _, _ in places):
        editor.open((repo / path).as_uri(), (repo / path).read_text(encoding="utf-8"))
    await asyncio.wait_for(model_in.wait(), GIVE_UP_S)
    model_s = time.perf_counter() - started

    def ready() -> bool:
        return any(m.startswith("repomem: ready (") for m in messages)

    while nice is None and not ready():  # the empty index: the asks come after it
        await asyncio.sleep(0.1)
    asks = []
    for path, line, prefix in places:
        if nice is not None and ready():
            break
        uri = (repo / path).as_uri()
        editor.replace_line_tail(uri, line, len(prefix), "")  # the line cut: a new place, a cold prompt
        seconds, text, count = await editor.ask(uri, line, len(prefix))
        during = nice is None or not ready()
        asks.append({"path": path, "line": line + 1, "seconds": round(seconds, 3), "asks": count,
                     "during_build": during, "completion": text[:60]})
        console.print(f"  {seconds:6.2f} s  {'during the build' if during else 'after it':>16}  {path}:{line + 1}  "
                      f"{text[:40]!r}")
    while nice is not None and not ready():
        if time.perf_counter() - started > GIVE_UP_S:
            raise SystemExit(f"the server did not get ready: {messages[-5:]}")
        await asyncio.sleep(0.1)
    ready_s = time.perf_counter() - started
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    if nice is None:
        _set_aside(repo, False)
    lowered = [m for m in messages if "lower CPU priority" in m]
    return {"model_in_s": round(model_s, 2), "ready_s": round(ready_s, 2), "asks": asks, "lowered": lowered}


def summary(runs: list[dict], common: set[tuple[int, str, int]]) -> dict:
    """`common`: (round, path, line) of the asks every mode answered during its build."""
    seconds = [a["seconds"] for run in runs for a in run["asks"] if a["during_build"]]
    paired = [a["seconds"] for number, run in enumerate(runs) for a in run["asks"]
              if (number, a["path"], a["line"]) in common]
    return {"asks_during_build": len(seconds), "common_asks": len(paired),
            "common_mean_s": statistics.fmean(paired) if paired else None,
            "common_median_s": statistics.median(paired) if paired else None,
            "p50_s": float(np.percentile(seconds, 50)) if seconds else None,
            "p95_s": float(np.percentile(seconds, 95)) if seconds else None,
            "mean_s": statistics.fmean(seconds) if seconds else None,
            "ready_s": [run["ready_s"] for run in runs], "model_in_s": [run["model_in_s"] for run in runs]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-background-index.json")
    args = parser.parse_args()
    console = Console(width=150)
    source = django_or(args.repo)
    results: dict[str, list[dict]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as scratch:
        repo = Path(scratch) / source.name
        shutil.copytree(source, repo, ignore=shutil.ignore_patterns("__pycache__", ".repomem"))
        places = [(path, cut.line, cut.prefix) for path, cuts in choose_files(repo, FILES, args.seed)
                  for cut in cuts[:PLACES_PER_FILE]]
        names = list(MODES)
        for round_number in range(args.rounds):
            order = names[round_number % len(names):] + names[: round_number % len(names)]
            for mode in order:
                console.print(f"round {round_number + 1}, {mode}")
                run = asyncio.run(run_mode(repo, places, MODES[mode], console))
                console.print(f"  model in after {run['model_in_s']:.1f} s, ready after {run['ready_s']:.1f} s "
                              f"{run['lowered']}")
                results[mode].append(run)
    asked = [{(number, a["path"], a["line"]) for number, run in enumerate(runs) for a in run["asks"]
              if a["during_build"]} for runs in results.values()]
    common = set.intersection(*asked)
    report = {"repo": source.name, "rounds": args.rounds, "places": len(places),
              "summary": {mode: summary(runs, common) for mode, runs in results.items()}, "runs": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    table = Table(title=f"completions while the index of {source.name} builds, {args.rounds} rounds")
    for column in ("mode", "asks", "p50 s", "p95 s", "mean s", "the asks all modes made: mean / median s",
                   "ready after (s)"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    for mode, row in report["summary"].items():
        if row["asks_during_build"] == 0:
            table.add_row(mode, "0", "", "", "", "", "")
            continue
        ready = "" if mode == "alone" else ", ".join(f"{s:.1f}" for s in row["ready_s"])
        both = f"{row['common_mean_s']:.2f} / {row['common_median_s']:.2f} ({row['common_asks']})" \
            if row["common_asks"] else ""
        table.add_row(mode, str(row["asks_during_build"]), f"{row['p50_s']:.2f}", f"{row['p95_s']:.2f}",
                      f"{row['mean_s']:.2f}", both, ready)
    console.print(table)
    console.print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
