"""Interactive latency in an editor: a real LSP client walks Django files as a user would.

    python scripts/bench_editor_walk.py [--files 12] [--repo DIR] [--set maxPromptTokens=1024 ...]
                                        [--out eval/results/bench-editor-walk.json]

Starts `repomem serve` over stdio with pygls's LanguageClient (the embedded model on this CPU),
on Django 5.1.4 (pinned, hash-checked; or --repo), waits until the server says it is ready, then
for each of `--files` files (seeded choice of files with several functions) plays what a user of
the shipped editor set-ups does, sending what those set-ups send:

1. open the file (didOpen) with one line of a function cut after its `= ` or `return ` (the user
   is about to write the rest);
2. 1 s later the cursor reaches that line: `repomem/didMoveCursor`, which lsp/nvim/repomem.lua
   and lsp/emacs/repomem.el send when the cursor rests;
3. 2 s after opening, ask (`textDocument/completion`): **first in file**;
4. type the first 3 characters of the line's real rest, one didChange per character at 8
   characters/s, and ask: **warm**;
5. move into another function: cut one of its lines the same way (a didChange), 1 s later ask:
   **first in function**; type 3 characters and ask: **warm**;
6. write the rest of that line and press Enter (one didChange; the new line indented as the
   line above) and ask: **new line** (a whole line to complete, also a warm completion);
7. with `--accept` only: accept that answer (its text typed in, `repomem/didAccept`), 0.5 s
   later press Enter (the next line indented as an editor does, lsp/next_line.py) and ask:
   **after accept** (where the server may have started the completion at the accept).

Each answer is also checked against the file: the line as it would read once the item is accepted
(items replace the word being typed, lsp/items.py) against the line the file really has, counted
as "right" per kind (a new line against the file's next line).

Each request's latency is the time to the first non-empty answer: an answer that comes back
empty because the model was still working past the server's answer budget (an incomplete list
marked pending) is asked again every 0.5 s, as completion menus do, and the re-asks count in its
time; an empty answer not so marked is the server's final word (nothing to offer there), and the
request ends with it, counted as unanswered. Reports
p50 / p95 per kind, how many answers were empty, and the targets of the design card's §7 (first
completion in a newly opened file p95 <= 2 s; first in a function p95 <= 3 s; warm, a new line and
after an accept p50 <= 0.15 s, p95 <= 0.5 s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from lsprotocol import types
from pygls.lsp.client import LanguageClient
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lsp.items import typed_word  # noqa: E402
from lsp.next_line import enter_at_end  # noqa: E402
from scripts.bench_sources import django_or  # noqa: E402

CUT = re.compile(r"^(\s+(?:[\w.\[\]]+ = |return ))(\S.{4,})$")  # an assignment or return with a real rest
TYPED_CHARS = 3
CHARS_PER_SECOND = 8.0
OPEN_TO_CURSOR_S = 1.0
OPEN_TO_ASK_S = 2.0
REASK_S = 0.5
ACCEPT_TO_ENTER_S = 0.5  # --accept: from accepting a line to pressing Enter
GIVE_UP_S = 60.0
# Each kind's bounds in seconds by percentile (a new line and after an accept are warm completions too).
WARM_BOUNDS = {"p50": 0.15, "p95": 0.5}
TARGETS = {"first in file": {"p95": 2.0}, "first in function": {"p95": 3.0}, "warm": WARM_BOUNDS,
           "new line": WARM_BOUNDS, "after accept": WARM_BOUNDS}


@dataclass
class Cut:
    line: int  # 0-based
    prefix: str  # the line up to the cursor
    rest: str  # what the line really continues with


def function_cuts(lines: list[str]) -> list[Cut]:
    """One cut line per function (the first qualifying line of its body)."""
    cuts, in_function = [], False
    for number, line in enumerate(lines):
        if line.lstrip().startswith("def "):
            in_function = True
            continue
        match = CUT.match(line)
        if in_function and match:
            cuts.append(Cut(number, match.group(1), match.group(2)))
            in_function = False
    return cuts


def choose_files(repo: Path, count: int, seed: int) -> list[tuple[str, list[Cut]]]:
    candidates = []
    for path in sorted((repo / "django").rglob("*.py")):
        try:
            lines = path.read_text(encoding="utf-8").split("\n")
        except (OSError, UnicodeDecodeError):
            continue
        cuts = function_cuts(lines)
        if len(cuts) >= 3 and 150 <= len(lines) <= 3000 and "/tests/" not in str(path):
            candidates.append((path.relative_to(repo).as_posix(), cuts))
    random.Random(seed).shuffle(candidates)
    return candidates[:count]


class Editor:
    """The client side: one LanguageClient, the document versions, the requests timed."""

    def __init__(self, client: LanguageClient):
        self.client = client
        self.versions: dict[str, int] = {}
        self.texts: dict[str, str] = {}
        self.last_id: str | None = None  # the completion id of the last answer

    def open(self, uri: str, text: str) -> None:
        self.versions[uri], self.texts[uri] = 1, text
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
            uri=uri, language_id="python", version=1, text=text)))

    def replace_line_tail(self, uri: str, line: int, character: int, new_tail: str) -> None:
        """The user deletes the rest of a line from `character` on and types `new_tail` (one change)."""
        lines = self.texts[uri].split("\n")
        old = lines[line]
        lines[line] = old[:character] + new_tail
        self.texts[uri] = "\n".join(lines)
        self.versions[uri] += 1
        start, end = types.Position(line=line, character=character), types.Position(line=line, character=len(old))
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start, end), text=new_tail)]))

    def cursor_rests(self, uri: str, line: int, character: int) -> None:
        self.client.protocol.notify("repomem/didMoveCursor", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": character}})

    async def ask(self, uri: str, line: int, character: int) -> tuple[float, str, int]:
        """Seconds to the first non-empty answer, its text, and how many asks it took."""
        started = time.perf_counter()
        asks = 0
        while time.perf_counter() - started < GIVE_UP_S:
            asks += 1
            position = types.Position(line=line, character=character)
            answer = await self.client.text_document_completion_async(types.CompletionParams(
                text_document=types.TextDocumentIdentifier(uri), position=position))
            items = answer.items if isinstance(answer, types.CompletionList) else (answer or [])
            if items:
                self.last_id = (items[0].data or {}).get("id") if isinstance(items[0].data, dict) else None
                return time.perf_counter() - started, items[0].insert_text or "", asks
            if not still_working(answer):
                return time.perf_counter() - started, "", asks  # the server's answer: nothing to offer here
            await asyncio.sleep(REASK_S)
        return time.perf_counter() - started, "", asks


def still_working(answer: types.CompletionList | list | None) -> bool:
    """Whether an empty answer says the model is still working (lsp/server.py marks it in the
    list's item defaults, as the shipped set-ups read it) rather than that it has nothing here."""
    defaults = answer.item_defaults if isinstance(answer, types.CompletionList) else None
    data = defaults.data if defaults is not None else None
    return isinstance(data, dict) and bool(data.get("pending"))


async def walk(repo: Path, files: list[tuple[str, list[Cut]]], settings: dict, console: Console,
               accept: bool = False) -> dict:
    client = LanguageClient("repomem-bench-editor", "1")
    messages: list[str] = []
    # The server's line per answered completion (lsp/session.completion_timings), with when it came.
    timings: list[tuple[float, str]] = []

    def logged(params: types.LogMessageParams) -> None:
        messages.append(params.message)
        if params.message.startswith("repomem: completion at "):
            timings.append((time.perf_counter(), params.message))

    client.feature(types.WINDOW_SHOW_MESSAGE)(lambda params: messages.append(params.message))
    client.feature(types.WINDOW_LOG_MESSAGE)(logged)
    client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)(lambda params: None)
    client.feature(types.PROGRESS)(lambda params: None)
    await client.start_io(sys.executable, "-m", "repomem", "serve")
    started = time.perf_counter()
    await client.initialize_async(types.InitializeParams(
        capabilities=types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True)),
        root_uri=repo.as_uri(), initialization_options={"repomem": settings}))
    client.initialized(types.InitializedParams())
    while not any(m.startswith("repomem: ready (") for m in messages):
        if time.perf_counter() - started > 600:
            raise SystemExit(f"the server did not get ready: {messages[-5:]}")
        await asyncio.sleep(0.2)
    ready_s = time.perf_counter() - started
    console.print(f"ready after {ready_s:.1f} s: {[m for m in messages if 'ready (' in m][0]}")
    editor = Editor(client)
    records = []

    last_answer = [time.perf_counter()]

    async def ask(kind: str, path: str, uri: str, line: int, character: int, real_line: str) -> str:
        seconds, text, asks = await editor.ask(uri, line, character)
        current = editor.texts[uri].split("\n")[line]
        accepted = current[: character - len(typed_word(current, character))] + text.split("\n")[0]
        # The completions the server answered at this line since the last answer: speculations
        # (where the cursor rested, while typing) and the asked one, each with where its time went.
        server = [message for at, message in timings
                  if at >= last_answer[0] and message.startswith(f"repomem: completion at {path}:{line + 1}:")]
        last_answer[0] = time.perf_counter()
        records.append({"kind": kind, "path": path, "line": line + 1, "seconds": round(seconds, 3),
                        "asks": asks, "answered": bool(text), "completion": text[:80],
                        "right": bool(text) and accepted.rstrip() == real_line.rstrip(), "server": server})
        console.print(f"{kind:>17}  {seconds:6.2f} s  {asks} ask(s)  {path}:{line + 1}  {text[:50]!r}")
        return text

    async def type_and_ask(path: str, uri: str, cut: Cut) -> None:
        for count in range(1, TYPED_CHARS + 1):
            await asyncio.sleep(1 / CHARS_PER_SECOND)
            editor.replace_line_tail(uri, cut.line, len(cut.prefix), cut.rest[:count])
        await ask("warm", path, uri, cut.line, len(cut.prefix) + TYPED_CHARS, cut.prefix + cut.rest)

    for path, cuts in files:
        uri = (repo / path).as_uri()
        lines = (repo / path).read_text(encoding="utf-8").split("\n")
        first, second = cuts[0], cuts[len(cuts) // 2]
        after_second = lines[second.line + 1]
        lines[first.line] = first.prefix
        opened = time.perf_counter()
        editor.open(uri, "\n".join(lines))
        await asyncio.sleep(OPEN_TO_CURSOR_S)
        editor.cursor_rests(uri, first.line, len(first.prefix))
        await asyncio.sleep(max(0.0, opened + OPEN_TO_ASK_S - time.perf_counter()))
        await ask("first in file", path, uri, first.line, len(first.prefix), first.prefix + first.rest)
        await type_and_ask(path, uri, first)
        editor.replace_line_tail(uri, second.line, len(second.prefix), "")
        await asyncio.sleep(OPEN_TO_CURSOR_S)
        await ask("first in function", path, uri, second.line, len(second.prefix), second.prefix + second.rest)
        await type_and_ask(path, uri, second)
        # The rest of the line written, Enter pressed, the new line indented as the editor does: a
        # completion of a whole line (where generation used to run to the token cap).
        indent = second.prefix[: len(second.prefix) - len(second.prefix.lstrip())]
        await asyncio.sleep(1 / CHARS_PER_SECOND)
        editor.replace_line_tail(uri, second.line, len(second.prefix) + TYPED_CHARS,
                                 second.rest[TYPED_CHARS:] + "\n" + indent)
        answer = await ask("new line", path, uri, second.line + 1, len(indent), after_second)
        first_line = answer.split("\n")[0]
        if accept and first_line.strip() and editor.last_id:
            editor.replace_line_tail(uri, second.line + 1, len(indent), first_line)  # accepted
            client.protocol.notify("repomem/didAccept", {"id": editor.last_id})
            await asyncio.sleep(ACCEPT_TO_ENTER_S)
            below = enter_at_end(editor.texts[uri], second.line + 1, first_line)
            if below is not None:
                _, new_line, new_indent = below
                editor.replace_line_tail(uri, second.line + 1, len(indent + first_line), "\n" + new_indent)
                await ask("after accept", path, uri, new_line, len(new_indent), lines[second.line + 2])
        client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return {"ready_s": round(ready_s, 2), "records": records}


def summarise(records: list[dict]) -> dict:
    kinds: dict[str, dict] = {}
    for kind in ("first in file", "first in function", "warm", "new line", "after accept"):
        seconds = [r["seconds"] for r in records if r["kind"] == kind]
        if seconds:
            kinds[kind] = {"n": len(seconds), "p50_s": float(np.percentile(seconds, 50)),
                           "p95_s": float(np.percentile(seconds, 95)), "max_s": max(seconds),
                           "unanswered": sum(1 for r in records if r["kind"] == kind and not r["answered"]),
                           "reasked": sum(1 for r in records if r["kind"] == kind and r["asks"] > 1),
                           "right": sum(1 for r in records if r["kind"] == kind and r.get("right"))}
    return kinds


# A process on the CPU half the time: 50 ms spinning, 50 ms asleep.
BUSY_HALF_THE_TIME = ("import time\nwhile True:\n    end = time.perf_counter() + 0.05\n"
                      "    while time.perf_counter() < end:\n        pass\n    time.sleep(0.05)\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=None)
    parser.add_argument("--files", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a language-server setting (lsp/README.md), e.g. maxPromptTokens=1024")
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-editor-walk.json")
    parser.add_argument("--accept", action="store_true",
                        help="also accept each new line's answer, press Enter and ask (\"after accept\")")
    parser.add_argument("--busy", type=int, default=0,
                        help="processes beside the walk, each on the CPU half of every 100 ms (the editor, a "
                             "browser, a build: what a user's machine runs besides)")
    args = parser.parse_args()
    console = Console(width=150)
    source = django_or(args.repo)
    settings: dict = {}
    for pair in args.set:
        name, _, value = pair.partition("=")
        settings[name] = json.loads(value) if value[:1] in "-0123456789[{tf" else value
    with tempfile.TemporaryDirectory() as scratch:
        # A copy: the walk's buffers never touch the fetched sources; the copy keeps any index built
        # beside them, so repeated runs load it instead of building.
        repo = Path(scratch) / source.name
        shutil.copytree(source, repo, ignore=shutil.ignore_patterns("__pycache__"))
        files = choose_files(repo, args.files, args.seed)
        beside = [subprocess.Popen([sys.executable, "-c", BUSY_HALF_THE_TIME]) for _ in range(args.busy)]
        try:
            result = asyncio.run(walk(repo, files, settings, console, args.accept))
        finally:
            for process in beside:
                process.kill()
                process.wait()
    result.update({"repo": source.name, "settings": settings, "files": len(files),
                   "protocol": {"open_to_cursor_s": OPEN_TO_CURSOR_S, "open_to_ask_s": OPEN_TO_ASK_S,
                                "typed_chars": TYPED_CHARS, "chars_per_second": CHARS_PER_SECOND,
                                "reask_s": REASK_S, "accept": args.accept, "busy_processes": args.busy,
                                "accept_to_enter_s": ACCEPT_TO_ENTER_S}})
    result["summary"] = summarise(result["records"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    table = Table(title=f"editor walk over {result['files']} {result['repo']} files, settings {settings or 'default'}")
    for column in ("request", "n", "p50 s", "p95 s", "max s", "re-asked", "no answer", "right", "target"):
        table.add_column(column, justify="right" if column != "request" else "left")
    for kind, row in result["summary"].items():
        target = "; ".join(f"{which} <= {bound:g} s: {'met' if row[f'{which}_s'] <= bound else 'NOT met'}"
                           for which, bound in TARGETS.get(kind, {}).items())
        table.add_row(kind, str(row["n"]), f"{row['p50_s']:.2f}", f"{row['p95_s']:.2f}", f"{row['max_s']:.2f}",
                      str(row["reasked"]), str(row["unanswered"]), str(row["right"]), target)
    console.print(table)
    console.print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
