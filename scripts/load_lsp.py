"""Load test of the language server: typing at a steady speed with inline completions.

    python scripts/load_lsp.py [--pairs 1000] [--chars-per-second 8] [--pause-after-line 1.0] [--repo DIR]
                               [--kill-model 10 --out eval/results/bench-lsp-soak.json]

Starts `repomem serve` over stdio with pygls's LanguageClient on a copy of the example repository
(or --repo), waits for the index, opens a new file and types Python into it one character per
didChange (incremental), asking for an inline completion after each keystroke as editors do,
with a short pause after each line (people stop to read what they wrote, and ghost text). Like
VS Code, a keystroke arriving while the previous request is still open sends `$/cancelRequest`
for it. The server's RSS is sampled from /proc every 0.5 s. Reports p50/p95 latency of answered
requests, how many were cancelled or superseded, errors, and RSS at start / end / peak with the
slope of a line fitted to the second half (flat memory: close to 0 MB/min). With --kill-model N
(the soak), the model's child process is killed with SIGKILL N times, evenly over the typing; after
each kill the user pauses on one request, which the server must answer with a completion from a
restarted model (typing at 8 chars/s on 2 cores supersedes nearly every other request).
Results: eval/results/bench-lsp.json and a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from lsprotocol import types
from pygls.lsp.client import LanguageClient
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent

# What the simulated user types, over and over (each round in a new function name), so that
# completions are asked for at every kind of place: names, calls, arguments, new lines.
TYPED = '''

def order_total_with_tax_{n}(cart, tax_class):
    subtotal = cart.total_cents()
    tax = compute_tax(subtotal, tax_class)
    lines = cart.summary().splitlines()
    for line in lines:
        print(line)
    return subtotal + tax
'''


def rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class RssSampler(threading.Thread):
    def __init__(self, pid: int, interval_s: float = 0.5):
        super().__init__(daemon=True)
        self.pid = pid
        self.interval_s = interval_s
        self.samples: list[tuple[float, int]] = []  # (seconds since start, bytes)
        self._stop_event = threading.Event()
        self._origin = time.monotonic()

    def run(self) -> None:
        while not self._stop_event.is_set():
            value = rss_bytes(self.pid)
            if value:
                self.samples.append((time.monotonic() - self._origin, value))
            self._stop_event.wait(self.interval_s)

    def stop(self) -> None:
        self._stop_event.set()


def model_children(server_pid: int) -> list[int]:
    """Pids of the server's model processes (repomem.backends.llama_child)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().split(")")[-1].split()[1]) != server_pid:
                continue
            if b"repomem.backends.llama_child" in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


async def run_load(repo: Path, pairs: int, chars_per_second: float, pause_after_line_s: float,
                   settings: dict, kills: int = 0) -> dict:
    client = LanguageClient("repomem-load", "1")
    log_lines: list[types.LogMessageParams] = []

    @client.feature(types.WINDOW_LOG_MESSAGE)
    def on_log(params: types.LogMessageParams) -> None:
        log_lines.append(params)

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def on_show(params: types.ShowMessageParams) -> None:
        log_lines.append(types.LogMessageParams(type=params.type, message=params.message))

    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def on_progress_create(params: types.WorkDoneProgressCreateParams) -> None:
        return None

    @client.feature(types.PROGRESS)
    def on_progress(params: types.ProgressParams) -> None:
        return None

    await client.start_io(sys.executable, "-m", "repomem", "serve")
    pid = client._server.pid  # the server process, for /proc sampling
    started = time.monotonic()
    await client.initialize_async(types.InitializeParams(
        capabilities=types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True)),
        root_uri=repo.as_uri(), initialization_options={"repomem": settings},
    ))
    client.initialized(types.InitializedParams())
    while not any(m.message == "repomem: ready" for m in log_lines):
        if time.monotonic() - started > 600:
            raise SystemExit(f"server not ready: {[m.message for m in log_lines]}")
        await asyncio.sleep(0.2)
    ready_s = time.monotonic() - started
    sampler = RssSampler(pid)
    sampler.start()

    path = repo / "shop" / "orders.py"
    text = '"""Orders."""\n\nfrom .cart import Cart\nfrom .pricing import compute_tax\n'
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=text)))
    line, character = text.count("\n"), 0

    pending: dict[str, tuple[float, asyncio.Future]] = {}
    latencies: list[float] = []  # answered requests, send -> answer, seconds
    with_text_latencies: list[float] = []
    outcome = {"with_text": 0, "empty": 0, "cancelled": 0, "errors": 0}
    error_messages: list[str] = []

    def finished(request_id: str, sent: float, future: asyncio.Future) -> None:
        pending.pop(request_id, None)
        if future.cancelled():
            outcome["cancelled"] += 1
            return
        error = future.exception()
        if error is not None:
            if "cancel" in str(error).lower():
                outcome["cancelled"] += 1
            else:
                outcome["errors"] += 1
                error_messages.append(f"{error.__class__.__name__}: {error}")
            return
        elapsed = time.monotonic() - sent
        latencies.append(elapsed)
        if future.result() is not None and future.result().items:
            outcome["with_text"] += 1
            with_text_latencies.append(elapsed)
        else:
            outcome["empty"] += 1

    interval = 1.0 / chars_per_second
    typed = "".join(TYPED.format(n=n) for n in range(pairs // len(TYPED) + 2))[:pairs]
    kill_at = {int(pairs * (k + 1) / (kills + 1)) for k in range(kills)}
    killed: list[dict] = []  # when, which pid, and requests answered with text before it
    typing_started = time.monotonic()
    next_at = typing_started
    for number, char in enumerate(typed):
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        if number in kill_at:
            children = model_children(pid)
            for child in children:
                os.kill(child, 9)
            # The user pauses: one request is left to finish, so the restart is seen to answer.
            kill_started = time.monotonic()
            answer = await client.protocol.send_request_async(
                types.TEXT_DOCUMENT_INLINE_COMPLETION,
                types.InlineCompletionParams(
                    text_document=types.TextDocumentIdentifier(uri),
                    position=types.Position(line=line, character=character),
                    context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked)))
            killed.append({"at_request": number, "pids": children, "with_text_before": outcome["with_text"],
                           "answer_after_kill_s": round(time.monotonic() - kill_started, 2),
                           "answer_after_kill_has_text": bool(answer is not None and answer.items)})
            next_at = time.monotonic()
        next_at += interval + (pause_after_line_s if char == "\n" else 0.0)
        for request_id in list(pending):  # the editor drops the previous request, as VS Code does
            client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=request_id))
        position = types.Position(line=line, character=character)
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=number + 2),
            content_changes=[types.TextDocumentContentChangePartial(range=types.Range(position, position),
                                                                    text=char)],
        ))
        if char == "\n":
            line, character = line + 1, 0
        else:
            character += 1
        request_id = f"load-{number}"
        sent = time.monotonic()
        future = asyncio.ensure_future(client.protocol.send_request_async(
            types.TEXT_DOCUMENT_INLINE_COMPLETION,
            types.InlineCompletionParams(
                text_document=types.TextDocumentIdentifier(uri),
                position=types.Position(line=line, character=character),
                context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic)),
            msg_id=request_id))
        pending[request_id] = (sent, future)
        future.add_done_callback(lambda f, r=request_id, s=sent: finished(r, s, f))
    typing_s = time.monotonic() - typing_started
    deadline = time.monotonic() + 120
    while pending and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)
    sampler.stop()
    alive = client._server.returncode is None
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()

    samples = sampler.samples
    times = np.array([t for t, _ in samples]) if samples else np.zeros(0)
    values = np.array([v for _, v in samples], dtype=float) if samples else np.zeros(0)
    half = len(samples) // 2
    slope = float(np.polyfit(times[half:], values[half:], 1)[0]) * 60 / 2**20 if len(samples) - half >= 4 else 0.0
    return {
        "pairs": pairs, "chars_per_second": chars_per_second, "pause_after_line_s": pause_after_line_s,
        "settings": settings,
        "ready_s": round(ready_s, 1), "typing_s": round(typing_s, 1),
        "latency_ms": {"p50": round(1000 * percentile(latencies, 50), 1),
                       "p95": round(1000 * percentile(latencies, 95), 1),
                       "p50_with_text": round(1000 * percentile(with_text_latencies, 50), 1),
                       "p95_with_text": round(1000 * percentile(with_text_latencies, 95), 1)},
        "answered": len(latencies), **outcome, "unanswered": len(pending),
        "error_messages": error_messages[:10],
        "server_errors_logged": [m.message for m in log_lines if m.type == types.MessageType.Error][:10],
        "generations_cancelled_logged": sum("generation cancelled" in m.message for m in log_lines),
        "server_alive": alive,
        "model_kills": killed,
        "model_restarts_logged": sum("restarting the model" in m.message for m in log_lines),

        "rss_mb": {"start": round(values[0] / 2**20, 1) if len(values) else None,
                   "end": round(values[-1] / 2**20, 1) if len(values) else None,
                   "peak": round(values.max() / 2**20, 1) if len(values) else None,
                   "slope_second_half_mb_per_min": round(slope, 2),
                   "samples": [[round(t, 1), round(v / 2**20, 1)] for t, v in samples[:: max(1, len(samples) // 60)]]},
        "cpu_count": os.cpu_count(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=1000, help="didChange + inlineCompletion pairs")
    parser.add_argument("--chars-per-second", type=float, default=8.0,
                        help="typing speed (8 chars/s is about 100 words per minute)")
    parser.add_argument("--pause-after-line", type=float, default=1.0, help="seconds after each newline")
    parser.add_argument("--repo", type=Path, default=ROOT / "examples" / "shop",
                        help="repository to copy and type into (default: the bundled example)")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--kill-model", type=int, default=0, metavar="N",
                        help="kill the model's child process N times during the run (the soak)")
    parser.add_argument("--note", default="", help="free text stored with the results (e.g. other load)")
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-lsp.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="repomem-load-") as folder:
        repo = Path(folder) / args.repo.name
        shutil.copytree(args.repo, repo, ignore=shutil.ignore_patterns(".repomem", "__pycache__"))
        settings = {"maxNewTokens": args.max_new_tokens}
        results = asyncio.run(run_load(repo, args.pairs, args.chars_per_second, args.pause_after_line, settings,
                                       args.kill_model))
    results["note"] = args.note
    results["load_average_1m_at_end"] = os.getloadavg()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")

    table = Table(title=f"repomem serve: {args.pairs} didChange + inlineCompletion at "
                        f"{args.chars_per_second:g} chars/s")
    table.add_column("measure")
    table.add_column("value", justify="right")
    latency, rss = results["latency_ms"], results["rss_mb"]
    for name, value in [
        ("latency p50 / p95, answered (ms)", f"{latency['p50']} / {latency['p95']}"),
        ("latency p50 / p95, with a completion (ms)", f"{latency['p50_with_text']} / {latency['p95_with_text']}"),
        ("answered with text / empty", f"{results['with_text']} / {results['empty']}"),
        ("cancelled ($/cancelRequest)", str(results["cancelled"])),
        ("generations stopped mid-call (server log)", str(results["generations_cancelled_logged"])),
        ("errors / unanswered", f"{results['errors']} / {results['unanswered']}"),
        ("server alive at the end", str(results["server_alive"])),
        ("model processes killed / restarts logged", f"{len(results['model_kills'])} / "
                                                     f"{results['model_restarts_logged']}"),
        ("completions right after a kill (with text / kills)",
         f"{sum(k['answer_after_kill_has_text'] for k in results['model_kills'])} / {len(results['model_kills'])}"),
        ("answer right after a kill, p50 / max (s)",
         f"{percentile([k['answer_after_kill_s'] for k in results['model_kills']], 50):.1f} / "
         f"{max((k['answer_after_kill_s'] for k in results['model_kills']), default=0):.1f}"),
        ("RSS start / end / peak (MB)", f"{rss['start']} / {rss['end']} / {rss['peak']}"),
        ("RSS slope, second half (MB/min)", str(rss["slope_second_half_mb_per_min"])),
        ("index ready after (s) / typing took (s)", f"{results['ready_s']} / {results['typing_s']}"),
    ]:
        table.add_row(name, value)
    Console().print(table)
    print(f"results: {args.out}")
    recovered = all(k["answer_after_kill_has_text"] for k in results["model_kills"])
    return 0 if results["errors"] == 0 and results["server_alive"] and recovered else 1


if __name__ == "__main__":
    sys.exit(main())
