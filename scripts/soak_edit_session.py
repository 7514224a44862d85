"""A soak test of a long editing session: does memory or an edit's time grow without bound?

    python scripts/soak_edit_session.py COPY --edits 5000                # in-process, as the server edits
    python scripts/soak_edit_session.py COPY --edits 5000 --compaction never
    python scripts/soak_edit_session.py COPY --edits 2000 --trace         # + tracemalloc / gc diffs
    python scripts/soak_edit_session.py COPY --server --edits 2000        # through `repomem serve`

COPY is a copy of an indexed repository (say `cp -a Django-5.1.4 /tmp/soak/dj`, its .repomem
included, so the index loads instead of being built): the session never writes its files, but a
compaction saves nothing either, so any indexed tree works. Opt-in; not a test.

In process (the default): `RepoService.open(COPY)`, `ensure_index()`, `prepare_for_edits()` and
`settle_long_lived()`, as the language server does, then open / edit / close cycles over a few
Python files of 200-800 lines (seeded): a file is opened (its disk text as a buffer), takes a run
of edits (`bench_index_edit.typed_buffers`, keystroke by keystroke, or `whole_edits`, alternately),
and at most `--open` files stay open (the oldest is closed: `drop_buffer`). Every `--query-every`
edits, `view().retrieve_at` answers a cursor in the edited buffer and one in another file. With
`--compaction server` (the default) the index is rebuilt as the server rebuilds it once
`needs_compaction()` says so (a fresh service loads the tree's index, the open buffers are overlaid
again, the compaction floor held, `lsp.session.settle_replaced_index`; `--keep-freed`: only
`settle_long_lived`, as before the freed memory was given back); `never` keeps editing the same index (its
fragments, W's delta and the postings then grow by design until a rebuild).

Every `--every` edits it records: the resident memory (/proc/self/statm), the edits' median / p95
ms since the last record, a query's median ms, the index's sizes (fragments and live ones,
postings segments, W_delta's entries, vocabulary, the kept edit graph's nodes and slots, pending
cover changes, tree memo entries) and the objects the collector tracks. `--trace`: tracemalloc
from the first record on, and at each record the 12 source lines whose allocations grew most since
the first, and the object types whose counts grew most. Prints a table and writes JSON (`--out`).

`--server`: the same cycles through `repomem serve` over stdio (pygls's LanguageClient, as
scripts/bench_editor_walk.py drives it), its model an endpoint nobody answers (so it never loads):
didOpen / didChange (full text) / didClose, and after every `--query-every` changes (default 1
here) the `repomem.explain` command, which overlays the changed buffers on the index and retrieves
(no model runs; the server edits its index only when a request needs it), recording the server
process's resident memory (/proc/PID/statm) and the commands' round trips; the server compacts as
it does for an editor.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import statistics
import sys
import time
import tracemalloc
from collections import Counter, OrderedDict
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # for scripts.*

from repomem.cyclic_gc import settle_long_lived  # noqa: E402
from repomem.failures import Failure  # noqa: E402
from repomem.lsp.session import settle_replaced_index  # noqa: E402
from repomem.service import RepoService  # noqa: E402
from scripts.bench_index_edit import typed_buffers, whole_edits  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_mb(pid: int | str = "self") -> float:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 2**20


def pick_files(root: Path, paths: list[str], count: int, seed: int) -> list[str]:
    """`count` Python files of 200-800 lines, seeded."""
    sized = []
    for path in paths:
        text = (root / path).read_text(encoding="utf-8", errors="replace")
        if 200 <= text.count("\n") <= 800 and "def " in text:
            sized.append(path)
    if len(sized) < count:
        raise SystemExit(f"{root} holds {len(sized)} Python files of 200-800 lines; the session edits {count}")
    return random.Random(seed).sample(sorted(sized), count)


def buffers_of(lines: list[str], cycle: int, per_cycle: int) -> Iterator[str]:
    """One open file's edits: keystrokes on even cycles, whole statements and functions on odd."""
    if cycle % 2 == 0:
        yield from typed_buffers(lines)
    else:
        yield from whole_edits(lines, per_cycle)


def session(root: Path, files: list[str], n_edits: int, per_cycle: int, max_open: int, seed: int
            ) -> Iterator[tuple[str, str, str | None]]:
    """The session's events: ("open", path, text), ("edit", path, text), ("close", path, None)."""
    rng = random.Random(seed)
    opened: OrderedDict[str, None] = OrderedDict()
    done = cycle = 0
    while done < n_edits:
        path = rng.choice(files)
        text = (root / path).read_text(encoding="utf-8")
        if path not in opened:
            opened[path] = None
            yield "open", path, text
            while len(opened) > max_open:
                yield "close", opened.popitem(last=False)[0], None
        opened.move_to_end(path)
        for buffer in buffers_of(text.splitlines(), cycle, per_cycle):
            if done >= n_edits:
                break
            yield "edit", path, buffer
            done += 1
        cycle += 1
    for path in list(opened):
        yield "close", path, None


def index_sizes(service: RepoService) -> dict[str, int]:
    """The loaded index's structures that an edit grows."""
    index = service.index_for_measurement()
    derived = index._derived
    graph = derived.edit_graph
    trees = derived.trees
    return {
        "fragments": int(index.n_fragments), "live": int(index.live.sum()), "base": int(index.w_base.shape[0]),
        "segments": len(index.segments), "postings": int(sum(s.tf.nnz for s in index.segments)),
        "delta_nnz": int(index.delta_entries[0].shape[0]), "vocabulary": len(index.vocabulary),
        "files": len(index.files), "calls": len(index.calls),
        "graph_nodes": -1 if graph is None else int(graph.n_nodes),
        "graph_dead": -1 if graph is None else int(graph.n_dead),
        "cover_changes": len(derived.cover_changes),
        "trees": -1 if trees is None else len(trees._trees),
        "gc_objects": len(gc.get_objects()),
    }


def summary(ms: list[float]) -> tuple[float, float]:
    return (round(statistics.median(ms), 2), round(float(np.percentile(ms, 95)), 2)) if ms else (0.0, 0.0)


def in_process(args: argparse.Namespace) -> dict:
    service = RepoService.open(args.copy.resolve())
    assert not isinstance(service, Failure), service
    report = service.ensure_index()
    assert not isinstance(report, Failure), report
    service.prepare_for_edits()
    settle_long_lived() if args.keep_freed else settle_replaced_index()  # as the server installs it
    paths = sorted(f.path for f in service.view().indexed_files() if f.language == "python" and f.fragments > 2)
    files = pick_files(args.copy, paths, args.files, args.seed)
    others = [path for path in paths if path not in files]
    rng = random.Random(args.seed + 1)
    records: list[dict] = []
    edit_ms: list[float] = []
    query_ms: list[float] = []
    compactions: list[float] = []
    compacted: list[dict] = []  # the process right after each compaction
    open_texts: dict[str, str] = {}
    baseline = None

    def record(done: int) -> None:
        nonlocal baseline
        gc.collect()
        row = {"edits": done, "rss_mb": round(resident_mb(), 1), "edit_ms": summary(edit_ms),
               "query_ms": summary(query_ms), "compactions": len(compactions), **index_sizes(service)}
        records.append(row)
        edit_ms.clear()
        query_ms.clear()
        print(json.dumps(row), flush=True)
        if args.trace:
            row["traced_mb"] = round(tracemalloc.get_traced_memory()[0] / 2**20, 1)
            snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
            types = Counter(type(o).__name__ for o in gc.get_objects())
            if baseline is None:
                baseline = (snapshot, types)
                return
            grown = snapshot.compare_to(baseline[0], "lineno")[:12]
            row["trace_top"] = [str(stat) for stat in grown]
            row["types_grown"] = (types - baseline[1]).most_common(12)
            for line in row["trace_top"]:
                print("   ", line, flush=True)
            print("    types:", row["types_grown"], flush=True)

    def compact() -> None:
        """As lsp/session.py's build_index / install_index / sync_buffers(rebuilt=True)."""
        began = time.perf_counter()
        builder = RepoService(service.root, service.config)
        built = builder.ensure_index(structure=True)
        assert not isinstance(built, Failure), built
        builder.prepare_for_edits()
        service.install_index(builder.hand_over_index())
        if args.keep_freed:
            settle_long_lived()  # what the server did before it gave the freed memory back
        else:
            settle_replaced_index()
        for path, text in open_texts.items():
            assert service.set_buffer(path, text) is None
        service.hold_compaction_floor()
        compactions.append(time.perf_counter() - began)
        gc.collect()
        after = {"edits": done, "rss_mb": round(resident_mb(), 1)}
        if args.trace:
            after["traced_mb"] = round(tracemalloc.get_traced_memory()[0] / 2**20, 1)
        compacted.append(after)
        print("    compacted:", json.dumps(after), flush=True)

    if args.trace:
        tracemalloc.start(args.trace_frames)
    done = 0
    record(0)
    for kind, path, text in session(args.copy, files, args.edits, args.per_cycle, args.open, args.seed):
        if kind == "close":
            open_texts.pop(path, None)
            assert service.drop_buffer(path) is None
            continue
        assert text is not None
        if kind == "open" and path not in open_texts:
            open_texts[path] = text
            assert service.set_buffer(path, text) is None
            continue
        open_texts[path] = text
        began = time.perf_counter()
        assert service.set_buffer(path, text) is None
        edit_ms.append((time.perf_counter() - began) * 1000)
        done += 1
        if done % args.query_every == 0:
            line = rng.randint(1, max(1, text.count("\n")))
            for file, at in ((path, line), (rng.choice(others), None)):
                if at is None:
                    at = rng.randint(1, max(1, (args.copy / file).read_text(encoding="utf-8").count("\n")))
                cursor = service.cursor_at(args.copy / file, at, None)
                if isinstance(cursor, Failure):
                    continue
                began = time.perf_counter()
                service.view().retrieve_at(cursor, k=10, alpha=0.5)
                query_ms.append((time.perf_counter() - began) * 1000)
        if args.compaction == "server" and service.needs_compaction():
            compact()
        if done % args.every == 0:
            record(done)
    return {"mode": "in-process", "files": files, "compaction_s": [round(s, 2) for s in compactions],
            "compacted": compacted, "records": records}


def through_server(args: argparse.Namespace) -> dict:
    """The same cycles through `repomem serve` (see above)."""
    from lsprotocol import types as lsp
    from pygls.lsp.client import LanguageClient

    files = pick_files(args.copy, sorted(str(p.relative_to(args.copy)) for p in args.copy.rglob("*.py")
                                         if ".repomem" not in p.parts), args.files, args.seed)
    records: list[dict] = []

    async def run() -> None:
        client = LanguageClient("repomem-soak", "1")
        messages: list[str] = []
        client.feature(lsp.WINDOW_SHOW_MESSAGE)(lambda params: messages.append(params.message))
        client.feature(lsp.WINDOW_LOG_MESSAGE)(lambda params: messages.append(params.message))
        client.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CREATE)(lambda params: None)
        client.feature(lsp.PROGRESS)(lambda params: None)
        await client.start_io(sys.executable, "-m", "repomem", "serve", cwd=str(args.copy))
        assert client._server is not None
        pid = client._server.pid
        # An endpoint nobody answers: the model never loads, every request but completions works.
        await client.initialize_async(lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(), root_uri=args.copy.as_uri(),
            initialization_options={"repomem": {"endpoint": "http://127.0.0.1:9"}}))
        client.initialized(lsp.InitializedParams())
        started = time.perf_counter()
        while not any(m.startswith("repomem: ready (") or m.startswith("repomem: ready") for m in messages):
            if time.perf_counter() - started > 600:
                raise SystemExit(f"the server did not get ready: {messages[-5:]}")
            await asyncio.sleep(0.2)
        versions: dict[str, int] = {}
        rng = random.Random(args.seed + 1)
        edit_ms: list[float] = []
        done = 0

        def note(done: int) -> None:
            row = {"edits": done, "rss_mb": round(resident_mb(pid), 1), "explain_ms": summary(edit_ms),
                   "rebuilds": sum("ready" in m for m in messages) - 1,
                   "errors": [m[:200] for m in messages if "error" in m.lower() or "warning" in m.lower()][-3:]}
            records.append(row)
            edit_ms.clear()
            print(json.dumps(row), flush=True)

        note(0)
        for kind, path, text in session(args.copy, files, args.edits, args.per_cycle, args.open, args.seed):
            uri = (args.copy / path).as_uri()
            if kind == "close":
                client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri=uri)))
                versions.pop(path, None)
                continue
            assert text is not None
            if kind == "open" and path not in versions:
                versions[path] = 1
                client.text_document_did_open(lsp.DidOpenTextDocumentParams(
                    lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
                continue
            versions[path] += 1
            client.text_document_did_change(lsp.DidChangeTextDocumentParams(
                lsp.VersionedTextDocumentIdentifier(version=versions[path], uri=uri),
                [lsp.TextDocumentContentChangeWholeDocument(text=text)]))
            done += 1
            if done % args.query_every == 0:
                # The explain command overlays the changed buffers first (sync_buffers), then
                # retrieves: its round trip holds the index's edit and a retrieval.
                line = rng.randint(0, max(0, text.count("\n") - 1))
                began = time.perf_counter()
                at = {"textDocument": {"uri": uri}, "position": {"line": line, "character": 0}}
                await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
                    command="repomem.explain", arguments=[at]))
                edit_ms.append((time.perf_counter() - began) * 1000)
            if done % args.every == 0:
                note(done)
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()

    asyncio.run(run())
    return {"mode": "server", "files": files, "records": records}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("copy", type=Path, help="a copy of an indexed repository (see above)")
    parser.add_argument("--edits", type=int, default=5000)
    parser.add_argument("--every", type=int, default=250, help="edits between records")
    parser.add_argument("--files", type=int, default=6, help="files the session edits")
    parser.add_argument("--open", type=int, default=3, help="files open at once")
    parser.add_argument("--per-cycle", type=int, default=40, help="whole edits of a file per cycle")
    parser.add_argument("--query-every", type=int, help="edits between retrievals (10; with --server 1)")
    parser.add_argument("--compaction", choices=("server", "never"), default="server")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--trace", action="store_true", help="tracemalloc and object-count diffs")
    parser.add_argument("--trace-frames", type=int, default=1)
    parser.add_argument("--keep-freed", action="store_true",
                        help="a compaction only settles the collector (settle_long_lived), without giving "
                             "the freed memory back, as the server did before")
    parser.add_argument("--server", action="store_true", help="through `repomem serve` (see above)")
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "soak-edit-session.json")
    args = parser.parse_args()
    args.copy = args.copy.resolve()
    if args.query_every is None:
        args.query_every = 1 if args.server else 10
    result = through_server(args) if args.server else in_process(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
