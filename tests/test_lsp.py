"""The language server driven over stdio by a real LSP client (pytest-lsp), with the real model."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from .conftest import copy_example


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return copy_example(tmp_path_factory.mktemp("lsp") / "shop")


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "repomem", "serve"]))
async def client(lsp_client: LanguageClient, workspace: Path):
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=workspace.as_uri(),
    ))
    for _ in range(240):  # index + model load on the server's worker thread
        if any("ready" in message.message for message in lsp_client.log_messages):
            break
        await asyncio.sleep(0.5)
    else:
        pytest.fail(f"server never became ready: {[m.message for m in lsp_client.log_messages]}")
    yield
    await lsp_client.shutdown_session()


async def test_inline_completion_uses_an_unsaved_buffer(client: LanguageClient, workspace: Path):
    uri = (workspace / "shop" / "report.py").as_uri()
    text = (workspace / "shop" / "report.py").read_text()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=types.Position(line=8, character=11),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
    ))
    assert result.items and result.items[0].insert_text.startswith("compute_tax(")

    # A new module that exists only as an unsaved buffer, then typing a call to it elsewhere: the
    # name can only come from retrieval over the buffer.
    labels_uri = (workspace / "shop" / "labels.py").as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=labels_uri, language_id="python", version=1,
        text="def shipping_label_for_order(order_id: int) -> str:\n    return f'SHIP-{order_id}'\n")))
    edited = text.replace("    return \n", "    return 0\n\n\ndef print_label(order_id: int) -> None:\n"
                                          "    print(shipping_\n")
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=edited)],
    ))
    line = edited.split("\n").index("    print(shipping_")
    result = await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=types.Position(line=line, character=19),
    ))
    assert result.items and "label_for_order(" in result.items[0].insert_text, result.items


async def test_file_outside_the_workspace_gets_an_empty_answer(client: LanguageClient, tmp_path: Path):
    outside = tmp_path / "elsewhere.py"
    outside.write_text("x = \n")
    uri = outside.as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text="x = \n")))
    result = await client.text_document_inline_completion_async(types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=types.Position(line=0, character=4),
        context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Invoked),
    ))
    assert not result.items
