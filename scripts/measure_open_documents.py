"""The language server's memory with many open documents (issue 34: 3,000 open documents took 1.3 GB).

    python scripts/measure_open_documents.py [--documents 3000] [--lines 120] [--out FILE.json]

Starts `repomem serve` over stdio with pygls's LanguageClient on a copy of the example repository,
waits for the index, asks one `repomem.explain` (retrieval warm), then opens `--documents` new
Python modules (each distinct, `--lines` long) with didOpen, asking `repomem.explain` in the last
one opened after every 100 (the server overlays open buffers on the index before a retrieval),
then closes them all. The server's RSS (from /proc, the model's child process not included) is
read after each step. Prints a JSON report (and writes it with --out).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

ROOT = Path(__file__).resolve().parent.parent
EXPLAIN_EVERY = 100  # documents opened between two retrievals


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def module_text(number: int, lines: int) -> str:
    """A distinct module of about `lines` lines: functions over the example's names."""
    parts = [f'"""Generated module {number}."""\n', "from .pricing import compute_tax\n", "\n"]
    function = 0
    while sum(part.count("\n") for part in parts) < lines:
        parts.append(f"def total_{number}_{function}(cart, tax_class, discount_{function}=0):\n"
                     f"    subtotal = cart.total_cents() - discount_{function}\n"
                     f"    tax = compute_tax(subtotal, tax_class)\n"
                     f"    label_{function} = 'order {number}-{function}'\n"
                     f"    return subtotal + tax + {function * 7 + number % 13}\n\n")
        function += 1
    return "".join(parts)


async def explain(client: LanguageClient, uri: str) -> float:
    started = time.monotonic()
    await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="repomem.explain",
        arguments=[{"textDocument": {"uri": uri}, "position": {"line": 4, "character": 4}}]))
    return time.monotonic() - started


async def measure(repo: Path, documents: int, lines: int) -> dict:
    client = LanguageClient("repomem-open-documents", "1")
    logs: list[str] = []

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def on_log(params: types.LogMessageParams) -> None:
        logs.append(params.message)

    await client.start_io(sys.executable, "-m", "repomem", "serve")
    pid = client._server.pid
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities(),
                                                         root_uri=repo.as_uri(),
                                                         initialization_options={"debounceMs": 0}))
    client.initialized(types.InitializedParams())
    started = time.monotonic()
    while "repomem: ready" not in logs:
        if time.monotonic() - started > 600:
            raise SystemExit(f"server not ready: {logs}")
        await asyncio.sleep(0.2)
    report: dict = {"documents": documents, "lines_per_document": lines}
    await explain(client, (repo / "shop" / "report.py").as_uri())
    report["rss_ready_mb"] = round(rss_mb(pid), 1)
    uris = []
    slowest = 0.0
    for number in range(documents):
        path = repo / "shop" / f"opened_{number:05d}.py"
        uris.append(path.as_uri())
        client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
            uri=uris[-1], language_id="python", version=1, text=module_text(number, lines))))
        if (number + 1) % EXPLAIN_EVERY == 0 or number == documents - 1:
            slowest = max(slowest, await explain(client, uris[-1]))
    report["rss_open_mb"] = round(rss_mb(pid), 1)
    report["slowest_explain_s"] = round(slowest, 2)
    report["explain_first_document_s"] = round(await explain(client, uris[0]), 2)
    report["rss_open_after_first_mb"] = round(rss_mb(pid), 1)
    for uri in uris:
        client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    await explain(client, (repo / "shop" / "report.py").as_uri())
    report["rss_closed_mb"] = round(rss_mb(pid), 1)
    report["per_open_document_kb"] = round((report["rss_open_mb"] - report["rss_ready_mb"]) * 1024 / documents, 1)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=3000)
    parser.add_argument("--lines", type=int, default=120)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        repo = Path(scratch) / "shop"
        shutil.copytree(ROOT / "examples" / "shop", repo)
        report = asyncio.run(measure(repo, args.documents, args.lines))
    text = json.dumps(report, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
