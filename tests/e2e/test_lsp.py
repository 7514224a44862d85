"""The language server end to end: `repomem serve` over stdio, driven by a real LSP client
(pytest-lsp), with the real embedded model and a real index of the example repository.

One server serves the whole module (tests run in file order and build on each other's state);
settings keep model calls short (24 new tokens, 512-token prompts: prompt evaluation costs ~10 ms a
token on two cores)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from tests.repos import copy_example

pytestmark = pytest.mark.asyncio(loop_scope="module")

# FragRel, not the default BM25: these tests read its scores (explain's s_env and lifts).
# answerWithinMs: these tests read answers, and a loaded 2-core machine can take longer than the
# budget that keeps eglot from timing out (test_editors checks that budget).
SETTINGS = {"maxNewTokens": 24, "maxPromptTokens": 512, "debounceMs": 10, "strategy": "fragrel",
            "answerWithinMs": 120000}
BAD_SETTINGS = {"colour": "blue", "topK": -1}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return copy_example(tmp_path_factory.mktemp("lsp") / "shop")


async def wait_for_log(client: LanguageClient, needle: str, timeout_s: float = 120.0, after: int = 0) -> str:
    """The first window/logMessage (from index `after` on) containing `needle`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for message in client.log_messages[after:]:
            if needle in message.message:
                return message.message
        await asyncio.sleep(0.1)
    pytest.fail(f"no log message with {needle!r}: {[m.message for m in client.log_messages[after:]]}")


INITIALIZED: list[types.InitializeResult] = []  # the server's answer to this module's `initialize`


@pytest_lsp.fixture(scope="module",
                    config=ClientServerConfig(server_command=[sys.executable, "-m", "repomem", "serve"]))
async def client(lsp_client: LanguageClient, workspace: Path):
    INITIALIZED.append(await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=workspace.as_uri(),
        initialization_options={"repomem": {**SETTINGS, **BAD_SETTINGS}},
    )))
    await wait_for_log(lsp_client, "repomem: ready", timeout_s=240)
    yield
    await lsp_client.shutdown_session()


OPENED: set[str] = set()  # the documents this module's server has been sent didOpen for


def open_document(client: LanguageClient, path: Path, text: str | None = None) -> str:
    uri = path.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=path.read_text() if text is None else text)))
    OPENED.add(uri)
    return uri


def opened(client: LanguageClient, path: Path) -> str:
    """`path`'s uri, opened as on disk unless an earlier test opened it: the server completes open
    documents only, and a test run alone (`pytest -k`) must not depend on the tests before it."""
    return path.as_uri() if path.as_uri() in OPENED else open_document(client, path)


def change_document(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
    ))


def insert_text(client: LanguageClient, uri: str, version: int, line: int, character: int, text: str) -> None:
    """An incremental change, as editors send while typing."""
    position = types.Position(line=line, character=character)
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(range=types.Range(position, position), text=text)],
    ))


def inline_params(uri: str, line: int, character: int) -> types.InlineCompletionParams:
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=types.Position(line=line, character=character),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
    )


async def inline(client: LanguageClient, uri: str, line: int, character: int) -> types.InlineCompletionList:
    return await client.text_document_inline_completion_async(inline_params(uri, line, character))


async def explain(client: LanguageClient, uri: str, line: int, character: int) -> dict:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="repomem.explain",
        arguments=[{"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}],
    ))


def configure(client: LanguageClient, settings: dict) -> None:
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"repomem": {**SETTINGS, **settings}}))


async def test_start_up_reports_progress_and_rejects_bad_settings(client: LanguageClient):
    reports = [r for token, values in client.progress_reports.items() if "repomem-index" in str(token)
               for r in values]
    assert isinstance(reports[0], types.WorkDoneProgressBegin)
    assert isinstance(reports[-1], types.WorkDoneProgressEnd) and reports[-1].message == "done", reports
    assert any(isinstance(r, types.WorkDoneProgressReport) for r in reports)
    shown = [m.message for m in client.messages]
    assert any("unknown repomem setting 'colour'" in m for m in shown), shown
    assert any("topK=-1" in m and "5 kept" in m for m in shown), shown  # the repomem.toml value


async def test_the_server_offers_ghost_text_and_the_menu(client: LanguageClient):
    """Clients ask only for what the server offers: without inlineCompletionProvider Neovim 0.12
    never asked for ghost text (tests/e2e/test_nvim.py found it)."""
    capabilities = INITIALIZED[-1].capabilities
    assert capabilities.inline_completion_provider is not None, capabilities
    assert capabilities.completion_provider is not None, capabilities


async def test_inline_completion_uses_an_unsaved_buffer(client: LanguageClient, workspace: Path):
    report = workspace / "shop" / "report.py"
    uri = open_document(client, report)
    logged = len(client.log_messages)
    result = await inline(client, uri, 8, 11)
    assert result.items and result.items[0].insert_text.startswith("compute_tax("), result.items
    # Where the answer's time went, one line in the client's log.
    line = await wait_for_log(client, "completion at shop/report.py:9:12:", after=logged)
    spent = re.search(r"retrieve \d+ ms, prompt \d+ ms, model \d+ ms \((\d+) prompt tokens, (\d+) from its cache, "
                      r"(\d+) written, stop\)", line)
    assert spent is not None, line
    prompt_tokens, cached, written = (int(group) for group in spent.groups())
    assert prompt_tokens > 100 and cached <= prompt_tokens and written >= 5, line

    # A module that exists only as an unsaved buffer, then a call to it typed in another file: the
    # name can only come from retrieval over the buffer (and the fallback completion carries it).
    open_document(client, workspace / "shop" / "labels.py",
                  "def shipping_label_for_order(order_id: int) -> str:\n    return f'SHIP-{order_id}'\n")
    edited = report.read_text().replace("    return \n", "    return 0\n\n\ndef print_label(order_id: int) -> None:\n"
                                                        "    print(shipping_\n")
    change_document(client, uri, 2, edited)
    line = edited.split("\n").index("    print(shipping_")
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=types.Position(line=line, character=19),
    ))
    assert result.items and "label_for_order(" in result.items[0].insert_text, result.items
    change_document(client, uri, 3, report.read_text())  # back to the file as on disk


async def test_a_name_typed_halfway_is_completed_as_the_model_spells_it(client: LanguageClient, workspace: Path):
    """Token healing inside a word, at a spot with no completion shown before: the prompt ends
    before `comp` and the model's first tokens are held to it. A prompt ending mid-word had the
    0.5B model answer `_tax(amount_cents, tax_class)`, i.e. `comp_tax(...)`."""
    text = ("from .pricing import compute_tax\n\n\ndef tax_for_invoice(amount_cents: int, tax_class: str) -> int:\n"
            "    return comp")
    uri = open_document(client, workspace / "shop" / "invoice_tax.py", text)
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=types.Position(line=4, character=15)))
    assert result.items and result.items[0].insert_text.startswith("compute_tax("), result.items
    assert result.items[0].text_edit.range.start == types.Position(line=4, character=11)
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))


async def test_the_line_below_a_taken_answer_reads_no_prompt_again(client: LanguageClient, workspace: Path):
    """An answer accepted, Enter pressed, a completion asked on the new line: its prompt is the
    answer's own continued (completion.continueLines, on in an editor), so the model reads only the
    newline and the indentation, retrieves nothing, and writes the line on."""
    text = ("from .pricing import compute_tax\n\n\ndef tax_on_invoice(amount_cents: int, tax_class: str) -> int:\n"
            "    tax = \n\n\ndef refund(amount_cents: int) -> int:\n    return -amount_cents\n")
    uri = open_document(client, workspace / "shop" / "invoice_lines.py", text)
    shown = (await inline(client, uri, 4, 10)).items[0]
    answer = shown.insert_text.split("\n")[0]
    assert answer.strip(), shown
    insert_text(client, uri, 2, 4, 10, answer + "\n    ")  # accepted, then Enter, as Python modes indent
    logged = len(client.log_messages)
    await inline(client, uri, 5, 4)
    line = await wait_for_log(client, "completion at shop/invoice_lines.py:6:5:", after=logged)
    spent = re.search(r"retrieve (\d+) ms, prompt \d+ ms, model \d+ ms \((\d+) prompt tokens, (\d+) from its cache, "
                      r"(\d+) written", line)
    assert spent is not None, line
    retrieve_ms, prompt_tokens, cached, written = (int(group) for group in spent.groups())
    assert retrieve_ms == 0 and prompt_tokens - cached <= 4 and written >= 1, line
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))


async def test_the_line_below_a_shown_answer_is_ready_line_after_line(client: LanguageClient, workspace: Path):
    """While an answer is shown the line below it is completed (lineAhead, off by default): taken and
    Enter pressed, the next ask there is answered without the model, and the one below that is
    started in turn."""
    configure(client, {"lineAhead": True})
    try:
        text = ("from .pricing import compute_tax\n\n\ndef tax_on_credit(amount_cents: int, tax_class: str) -> int:\n"
                "    tax = \n\n\ndef refund(amount_cents: int) -> int:\n    return -amount_cents\n")
        uri = open_document(client, workspace / "shop" / "credit_lines.py", text)
        line, character, version = 4, 10, 2
        for _ in range(3):
            logged = len(client.log_messages)
            answer = (await inline(client, uri, line, character)).items[0].insert_text.split("\n")[0]
            assert answer.strip(), answer
            # The line below starts while the answer is shown (the server says where its time went).
            await wait_for_log(client, f"completion at shop/credit_lines.py:{line + 2}:", after=logged, timeout_s=60)
            indent = "    " + ("    " if answer.endswith(":") else "")
            insert_text(client, uri, version, line, character, answer + "\n" + indent)  # taken, then Enter
            line, character, version = line + 1, len(indent), version + 1
            started = time.perf_counter()
            below = await inline(client, uri, line, character)
            assert below.items, below
            assert time.perf_counter() - started < 1.0  # done while the answer above was shown: cached
        client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    finally:
        configure(client, {})


async def test_typing_a_shown_completion_reuses_it(client: LanguageClient, workspace: Path):
    uri = opened(client, workspace / "shop" / "report.py")
    first = (await inline(client, uri, 8, 11)).items[0]  # from the LRU cache: same text, same cursor
    assert first.insert_text.startswith("compute_tax(")
    insert_text(client, uri, 4, 8, 11, "comp")
    started = time.perf_counter()
    typed = (await inline(client, uri, 8, 15)).items
    elapsed = time.perf_counter() - started
    # The item replaces the word being typed: the whole call again, over the typed "comp".
    assert typed and typed[0].insert_text == first.insert_text
    assert typed[0].range.start == types.Position(line=8, character=11)
    assert typed[0].range.end == types.Position(line=8, character=15)
    # Same completion id: no new model call was made (the model would have produced a new one).
    assert typed[0].command.arguments == first.command.arguments
    assert elapsed < 2.0
    change_document(client, uri, 5, (workspace / "shop" / "report.py").read_text())


async def test_explain_returns_scored_fragments_and_their_lifts(client: LanguageClient, workspace: Path):
    uri = opened(client, workspace / "shop" / "report.py")
    shown = (await inline(client, uri, 8, 11)).items[0]
    answer = await explain(client, uri, 8, 11)
    assert answer["completion_id"] == shown.command.arguments[0] and answer["strategy"] == "fragrel"
    fragments = answer["fragments"]
    assert fragments and {"s_ind", "s_env", "s_rel", "lifted_by", "in_prompt"} <= set(fragments[0])
    pricing = [f for f in fragments if f["path"] == "shop/pricing.py"]
    assert pricing and any(f["in_prompt"] for f in pricing)
    for f in fragments:
        assert f["s_rel"] == pytest.approx(f["s_ind"] + 0.5 * f["s_env"], abs=1e-3)
    lifted = [f["lifted_by"] for f in fragments if f["lifted_by"]]
    assert lifted and all(0 < lift["weight"] <= 1 and 0 < lift["share"] <= 1 for lift in lifted)
    bad = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="repomem.explain", arguments=["nonsense"]))
    assert bad["fragments"] == [] and "expected" in bad["error"]


async def test_accept_and_reject_are_logged_locally(client: LanguageClient, workspace: Path):
    uri = opened(client, workspace / "shop" / "report.py")
    shown = (await inline(client, uri, 8, 11)).items[0]
    completion_id = shown.command.arguments[0]
    client.protocol.notify("repomem/didAccept", {"id": completion_id})
    client.protocol.notify("repomem/didReject", {"id": completion_id})
    client.protocol.notify("repomem/didReject", {"id": "no-such-completion"})
    log = workspace / ".repomem" / "feedback.jsonl"
    for _ in range(100):
        if log.is_file() and len(log.read_text().splitlines()) >= 2:
            break
        await asyncio.sleep(0.1)
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["event"] for e in events] == ["accept", "reject"]
    assert events[0]["completion"] == shown.insert_text and events[0]["path"] == "shop/report.py"
    assert any(f["path"] == "shop/pricing.py" and f["in_prompt"] for f in events[0]["fragments"])
    await wait_for_log(client, "unknown or expired completion id 'no-such-completion'")


async def test_cancel_and_newer_requests_stop_a_generation(client: LanguageClient, workspace: Path):
    # A body far longer than the test waits: the model carries the pattern of __init__ on into
    # reset (generation stops once a completion is settled, so a short one would be over at once).
    configure(client, {"maxNewTokens": 400, "maxLines": 400})
    text = ('"""Stock levels."""\n\n\nclass Inventory:\n    """Counts of every product, by sku."""\n\n'
            "    def __init__(self):\n" + "".join(f"        self.count_{i} = {i}\n" for i in range(40)) +
            "\n    def reset(self):")
    uri = open_document(client, workspace / "shop" / "inventory.py", text)
    line, character = text.count("\n"), len(text.split("\n")[-1])
    logged = len(client.log_messages)
    # $/cancelRequest while the model generates: the generation stops between tokens.
    cancelled = asyncio.ensure_future(client.protocol.send_request_async(
        types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(uri, line, character), msg_id="cancel-me"))
    # Past the prompt's read on a slow host (2.5 s was too short once: "cancelled after 0 tokens"),
    # long before 400 tokens are written (~33 ms each here).
    await asyncio.sleep(5.0)
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="cancel-me"))
    with pytest.raises(Exception, match="cancel"):
        await asyncio.wait_for(cancelled, 60)
    message = await wait_for_log(client, "generation cancelled after", after=logged)
    assert 1 <= int(message.split("after ")[1].split()[0]) < 400
    # A newer request for the same document stops the older one the same way.
    logged = len(client.log_messages)
    older = asyncio.ensure_future(inline(client, uri, line, character))
    await asyncio.sleep(1.5)
    configure(client, {})
    newer = await asyncio.wait_for(inline(client, uri, line, character), 120)
    assert not (await asyncio.wait_for(older, 60)).items
    await wait_for_log(client, "generation cancelled after", after=logged)
    assert newer is not None
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))


async def test_where_the_cursor_rests_the_completion_is_ready_before_it_is_asked(client: LanguageClient,
                                                                                workspace: Path):
    text = ("from .pricing import compute_tax\n\n\ndef tax_on_refund(refund_cents: int, tax_class: str) -> int:\n"
            "    return ")
    uri = open_document(client, workspace / "shop" / "refund_tax.py", text)
    line, character = 4, 11
    client.protocol.notify("repomem/didMoveCursor", {"textDocument": {"uri": uri},
                                                    "position": {"line": line, "character": character}})
    # The speculative generation runs while the user is still reading; let it finish.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        await asyncio.sleep(1.0)
        answer = await explain(client, uri, line, character)
        if answer["completion_id"]:  # the completion at this state is known: the generation ended
            break
    started = time.perf_counter()
    result = await inline(client, uri, line, character)
    assert result.items and result.items[0].insert_text.strip()
    assert time.perf_counter() - started < 1.0  # from the cache: no model call when asked
    assert list(result.items[0].command.arguments) == [answer["completion_id"]]
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))


async def test_after_an_accept_the_next_line_is_completed_before_enter(client: LanguageClient, workspace: Path):
    """An accepted completion that ends a line starts the next line's completion where Enter
    leaves the cursor; Enter that makes that text finds it (speculation at rest held off here).
    The file's name holds a space, so its URI is percent-encoded, as pygls keeps documents decoded
    and the scheduler keeps them as the client wrote them."""
    configure(client, {"warmAfterMs": 600_000, "speculateBelow": True})
    try:
        text = ("from .pricing import compute_tax\n\n\ndef tax_on_refund(refund_cents: int, tax_class: str) -> int:\n"
                "    tax = ")
        uri = open_document(client, workspace / "shop" / "refund below.py", text)
        assert "%20" in uri
        shown = (await inline(client, uri, 4, 10)).items[0]
        accepted = shown.insert_text.split("\n")[0]
        assert accepted.strip(), shown
        insert_text(client, uri, 2, 4, 10, accepted)
        client.protocol.notify("repomem/didAccept", {"id": shown.command.arguments[0]})
        insert_text(client, uri, 3, 4, 10 + len(accepted), "\n    ")  # Enter, as Python modes indent
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            answer = await explain(client, uri, 5, 4)
            if answer["completion_id"]:  # known there before anything asked at that line
                break
            await asyncio.sleep(0.5)
        assert answer["completion_id"], answer
        below = await inline(client, uri, 5, 4)
        assert below.items and list(below.items[0].command.arguments) == [answer["completion_id"]]
        client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    finally:
        configure(client, {})


async def test_an_edit_in_a_function_not_yet_read_starts_its_completion_before_any_ask(
        client: LanguageClient, workspace: Path):
    """warmNewFunction (on by default): the edit that enters a function no completion was made in
    starts the completion there at once (resting speculation held off here); known before asked."""
    configure(client, {"warmAfterMs": 600_000})
    try:
        text = ("from .pricing import compute_tax\n\n\ndef tax_on_credit(credit_cents: int, tax_class: str) -> int:\n"
                "    tax = 0\n")
        uri = open_document(client, workspace / "shop" / "credit_new_function.py", text)
        insert_text(client, uri, 2, 5, 0, "    return ")  # typed into the function, one change
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            answer = await explain(client, uri, 5, 11)
            if answer["completion_id"]:  # the completion at this state is known: nobody asked
                break
            await asyncio.sleep(0.5)
        assert answer["completion_id"], answer
        client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    finally:
        configure(client, {})


async def test_disk_changes_reach_retrieval(client: LanguageClient, workspace: Path):
    report = workspace / "shop" / "report.py"
    uri = opened(client, report)  # alone (`-k`), the change below went to a document never opened
    query = "def refund_fee_cents(amount_cents: int) -> int:\n    return fee_for_refund("
    text = report.read_text() + "\n\n" + query + "\n"
    change_document(client, uri, 10, text)
    line = text.split("\n").index("    return fee_for_refund(")
    before = await explain(client, uri, line, 26)
    assert all(f["path"] != "shop/refunds.py" for f in before["fragments"])
    # A file written by another program, reported by the client's file watcher.
    (workspace / "shop" / "refunds.py").write_text(
        "def fee_for_refund(amount_cents: int) -> int:\n    return amount_cents // 100\n")
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[types.FileEvent(
        uri=(workspace / "shop" / "refunds.py").as_uri(), type=types.FileChangeType.Created)]))
    after = await explain(client, uri, line, 26)
    assert any(f["path"] == "shop/refunds.py" for f in after["fragments"]), after["fragments"]
    # Saving the buffer writes it to disk and a new index snapshot.
    current = workspace / ".repomem" / "CURRENT"
    snapshot = current.read_text()
    report.write_text(text)
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri)))
    for _ in range(100):
        if current.read_text() != snapshot:
            break
        await asyncio.sleep(0.1)
    assert current.read_text() != snapshot


async def test_file_events_that_change_nothing_write_no_snapshot(client: LanguageClient, workspace: Path):
    """A save of the index is itself a change a client's watcher reports (lsp-mode watches every
    folder): saving again for those reports wrote snapshots for ever. Events for the index's and
    git's own files, and for a file as indexed, write nothing; a real change writes one."""
    current = workspace / ".repomem" / "CURRENT"
    before = current.read_text()
    # Saves the tests before queued (their buffers, closed, leave the index) land first: counted
    # from a quiet index, every save below is one this test's events made.
    quiet_since, deadline = time.monotonic(), time.monotonic() + 60
    while time.monotonic() - quiet_since < 1.5 and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        if current.read_text() != before:
            before, quiet_since = current.read_text(), time.monotonic()

    def reported(*paths: Path) -> None:
        client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
            types.FileEvent(uri=path.as_uri(), type=types.FileChangeType.Changed) for path in paths]))

    reported(current, workspace / ".repomem" / before.strip() / "manifest.json", workspace / ".git" / "index",
             workspace / "shop" / "pricing.py")
    (workspace / "shop" / "fees.py").write_text("def service_fee_cents(amount_cents: int) -> int:\n"
                                                "    return amount_cents // 50\n")
    reported(workspace / "shop" / "fees.py")  # handled after the others, on the same thread
    for _ in range(300):  # the model thread may finish a generation first (a loaded CI host)
        if current.read_text() != before:
            break
        await asyncio.sleep(0.1)
    after = current.read_text()
    assert after != before
    number = re.compile(r"(\d+)")
    assert int(number.search(after).group(1)) == int(number.search(before).group(1)) + 1, (before, after)


async def test_a_file_deleted_while_open_still_completes(client: LanguageClient, workspace: Path):
    doomed = workspace / "shop" / "doomed.py"
    doomed.write_text("from .pricing import compute_tax\n\n\ndef doomed_tax(amount_cents):\n    return \n")
    uri = open_document(client, doomed)
    doomed.unlink()
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[types.FileEvent(
        uri=uri, type=types.FileChangeType.Deleted)]))
    result = await inline(client, uri, 4, 11)
    assert result.items and result.items[0].insert_text.strip()
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
    answer = await explain(client, opened(client, workspace / "shop" / "report.py"), 8, 11)
    assert answer["fragments"] and all(f["path"] != "shop/doomed.py" for f in answer["fragments"])


def model_children() -> list[int]:
    """Pids of model processes whose parent is a language server this test process started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            parent = int((entry / "stat").read_text().split(")")[-1].split()[1])
            grandparent = int(Path(f"/proc/{parent}/stat").read_text().split(")")[-1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if b"repomem.backends.llama_child" in command and grandparent == os.getpid():
            found.append(int(entry.name))
    return found


async def test_a_crashed_model_process_is_restarted_and_the_request_answered(client: LanguageClient,
                                                                           workspace: Path):
    report = opened(client, workspace / "shop" / "report.py")
    result = await inline(client, report, 8, 11)
    # the workspace holds a file an earlier test added: the model may write `amount_cents * compute_tax(`
    assert result.items and "compute_tax(" in result.items[0].insert_text, result.items
    children = model_children()
    assert len(children) == 1, children  # the embedded model runs beside the server, not inside it
    os.kill(children[0], signal.SIGKILL)
    logged = len(client.log_messages)
    result = await inline(client, report, 8, 10)
    assert result.items and result.items[0].insert_text.strip(), [m.message for m in client.log_messages[logged:]]
    message = await wait_for_log(client, "restarting the model", after=logged)
    assert "SIGKILL" in message
    await wait_for_log(client, "model ready", after=logged)
    restarted = model_children()
    assert len(restarted) == 1 and restarted[0] != children[0]


async def test_model_endpoint_killed_keeps_the_server_answering(client: LanguageClient, workspace: Path,
                                                                llama_server):  # noqa: F811
    url, process = llama_server
    configure(client, {"endpoint": url})
    cart = workspace / "shop" / "cart.py"
    lines = cart.read_text().split("\n")
    lines[25] = "            total += self.calculator."
    uri = open_document(client, cart, "\n".join(lines))
    result = await inline(client, uri, 25, len(lines[25]))
    assert result.items, [m.message for m in client.log_messages[-5:]]
    process.kill()
    process.wait(timeout=30)
    logged = len(client.log_messages)
    result = await inline(client, uri, 25, len(lines[25]) - 1)
    assert not result.items
    await wait_for_log(client, "no completion", after=logged)
    answer = await explain(client, uri, 25, 12)  # the rest of the server is unaffected
    assert answer["fragments"]
    configure(client, {})  # back to the embedded model
    result = await inline(client, opened(client, workspace / "shop" / "report.py"), 8, 11)
    # The call, whatever comes before it: the embedded model's near ties (`amount_cents * ...`)
    # can go either way with the order its prompt was evaluated in (prompt cache, chunks).
    assert result.items and "compute_tax(" in result.items[0].insert_text


async def test_file_outside_the_workspace_gets_an_empty_answer(client: LanguageClient, tmp_path: Path):
    outside = tmp_path / "elsewhere.py"
    outside.write_text("x = \n")
    uri = open_document(client, outside)
    assert not (await inline(client, uri, 0, 4)).items
    assert not (await inline(client, uri, 99, 0)).items  # a position past the end


async def test_changes_on_disk_no_client_reports_reach_retrieval(client: LanguageClient, workspace: Path):
    """A checkout or a generator writes files while the editor sends no watched-file events (Neovim
    before 0.9 registers none): the server's own watch finds them before the next retrieval and
    writes the index after answering. Last in the module: the index it changes is the others'."""
    query = "def restock_order(sku: str) -> int:\n    return restock_quantity_for("
    uri = open_document(client, workspace / "shop" / "restock_view.py", query + "\n")
    line, character = 1, len("    return restock_quantity_for(")
    before = await explain(client, uri, line, character)
    assert all(f["path"] != "shop/restock.py" for f in before["fragments"])
    current = workspace / ".repomem" / "CURRENT"
    snapshot = current.read_text()
    (workspace / "shop" / "restock.py").write_text(
        "def restock_quantity_for(sku: str) -> int:\n    return len(sku) * 12\n")
    after = await explain(client, uri, line, character)
    assert any(f["path"] == "shop/restock.py" for f in after["fragments"]), after["fragments"]
    for _ in range(100):  # written after the answer, on the model thread
        if current.read_text() != snapshot:
            break
        await asyncio.sleep(0.1)
    assert current.read_text() != snapshot
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri)))
