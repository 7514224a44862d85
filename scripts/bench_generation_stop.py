"""Benchmark: generation that stops once the completion is settled, against generating to the
token cap and cutting afterwards (what repomem did before), in the same run, with the embedded
model through the product's own backend (the llama.cpp child process, reached over HTTP).

    python scripts/bench_generation_stop.py [--cursors 16] [--repo DIR] [--out FILE]

Cursors are what a user meets while typing in Django 5.1.4 (pinned, hash-checked; or --repo):
half on a new line just opened under a statement inside a function (Enter pressed, the editor
indented it: the completion is that line), half right after a block opener such as `if x:`
(the completion is the block's body). Each cursor's prompt is evaluated once first (an answer to the
token cap), so both modes then pay the decoding only, as a warm completion in an editor does; the
two modes alternate which goes first. Checks that both modes show the same completion, and reports the
tokens generated and the decoding time per mode. Not a test: machines are noisy.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.backends.factory import open_backend  # noqa: E402
from repomem.completion.engine import CompletionEngine  # noqa: E402
from repomem.failures import Failure  # noqa: E402
from repomem.positions import locate  # noqa: E402
from repomem.service import RepoService  # noqa: E402
from scripts.bench_sources import django_or  # noqa: E402

_OPENER = re.compile(r"^\s+(if|for|while|with|try|else|elif|except)\b.*:\s*$")
_STATEMENT = re.compile(r"^(\s{8,})[a-z_][\w.]* = \S.*[^,(\[{\\:]$")  # an assignment inside a function


def cursors(service: RepoService, count: int, seed: int) -> list[tuple[str, str, int, str]]:
    """(kind, path, 1-based line, the file's text as the user has it) for `count` cursors."""
    rng = random.Random(seed)
    files = sorted(f.path for f in service.view().indexed_files() if f.language == "python" and f.fragments > 4)
    out: list[tuple[str, str, int, str]] = []
    while len(out) < count:
        path = rng.choice(files)
        text = (service.root / path).read_text(encoding="utf-8")
        lines = text.split("\n")
        kind = "new line" if len(out) % 2 == 0 else "block opener"
        pattern = _STATEMENT if kind == "new line" else _OPENER
        spots = [i for i, line in enumerate(lines) if pattern.match(line)]
        if not spots:
            continue
        at = rng.choice(spots)
        if kind == "new line":  # Enter after the statement: a new line at its indent
            indent = _STATEMENT.match(lines[at]).group(1)
            lines.insert(at + 1, indent)
            out.append((kind, path, at + 2, "\n".join(lines)))
        else:  # the opener just typed; what follows it is the code after the cursor
            out.append((kind, path, at + 1, text))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=None, help="tree to complete in (default: Django 5.1.4)")
    parser.add_argument("--cursors", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-generation-stop.json")
    args = parser.parse_args()
    console = Console()
    source = django_or(args.repo)
    work = Path(tempfile.mkdtemp(prefix="repomem-stop-")) / source.name
    shutil.copytree(source, work, ignore=shutil.ignore_patterns(".repomem"))
    service = RepoService.open(work)
    assert isinstance(service, RepoService)
    console.print("index ...")
    service.ensure_index()
    backend = open_backend(service.config)
    if isinstance(backend, Failure):
        raise SystemExit(backend.message)
    engine = CompletionEngine(service, backend)
    rows = []
    try:
        for number, (kind, path, line, text) in enumerate(cursors(service, args.cursors, args.seed)):
            cursor = locate(service.root, path, text, line, None)
            assert not isinstance(cursor, Failure), cursor
            # The prompt evaluated once, and a first answer to the cap: both modes then decode from the
            # cache (logits from a fresh evaluation and from the cache can differ in the last bits).
            engine.complete(cursor, enough=lambda _text: False)
            modes = ("settled", "to the cap") if number % 2 == 0 else ("to the cap", "settled")
            result = {}
            for mode in modes:
                enough = None if mode == "settled" else (lambda _text: False)
                started = time.perf_counter()
                answer = engine.complete(cursor, enough=enough)
                seconds = time.perf_counter() - started
                assert not isinstance(answer, Failure), answer
                result[mode] = {"completion": answer.text, "generated": answer.generation.completion_tokens,
                                "seconds": seconds, "finish": answer.generation.finish_reason}
            same = result["settled"]["completion"] == result["to the cap"]["completion"]
            rows.append({"kind": kind, "path": path, "line": line, "same": same, **result})
            console.print(f"{number + 1}/{args.cursors} {kind} {path}:{line}: "
                          f"{result['to the cap']['generated']} -> {result['settled']['generated']} tokens, "
                          f"{result['to the cap']['seconds']:.2f} -> {result['settled']['seconds']:.2f} s"
                          + ("" if same else "  [DIFFERENT COMPLETION]"))
    finally:
        backend.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"repo": source.name, "backend": backend.name, "rows": rows}, indent=2) + "\n")

    table = Table(title=f"generation stopped when settled vs to the cap ({backend.name}, {len(rows)} cursors)")
    for column in ("cursors", "n", "tokens: cap / settled (median)", "seconds: cap / settled (median)",
                   "p95 seconds: cap / settled", "same completion"):
        table.add_column(column)
    for kind in ("new line", "block opener", None):
        chosen = [r for r in rows if kind is None or r["kind"] == kind]
        if not chosen:
            continue

        def median(mode: str, key: str, rows: list = chosen) -> float:
            return statistics.median(r[mode][key] for r in rows)

        def p95(mode: str, rows: list = chosen) -> float:
            values = sorted(r[mode]["seconds"] for r in rows)
            return values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]

        table.add_row(kind or "all", str(len(chosen)),
                      f"{median('to the cap', 'generated'):.0f} / {median('settled', 'generated'):.0f}",
                      f"{median('to the cap', 'seconds'):.2f} / {median('settled', 'seconds'):.2f}",
                      f"{p95('to the cap'):.2f} / {p95('settled'):.2f}",
                      f"{sum(r['same'] for r in chosen)} of {len(chosen)}")
    console.print(table)
    console.print(f"written to {args.out}")


if __name__ == "__main__":
    main()
