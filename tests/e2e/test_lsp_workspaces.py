"""The language server in workspaces and positions editors really send: a folder whose path has
a space (its URIs percent-encoded), a client that names its workspace folders only, the empty
line after a file's last newline, a position past the end of a line, and unsaved buffers that
outweigh a small repository. `repomem serve` over stdio (pytest-lsp), its model a recording
OpenAI-compatible server of this module's (these tests are about the server, not the model)."""

from __future__ import annotations

import asyncio
import http.server
import json
import sys
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from tests.http_servers import answer_json, serve_http
from tests.repos import copy_example

pytestmark = pytest.mark.asyncio(loop_scope="function")
ANSWER = "pute_tax(amount_cents, tax_class)"  # after a typed `com`


class CannedModel(http.server.BaseHTTPRequestHandler):
    """Lists one model, counts a token per four characters, streams ANSWER; keeps the prompts."""

    protocol_version = "HTTP/1.1"
    prompts: list[str] = []

    def do_GET(self):  # noqa: N802
        answer_json(self, {"object": "list", "data": [{"id": "canned"}]})

    def do_POST(self):  # noqa: N802
        payload = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self.path.endswith("tokenize"):
            text = payload.get("prompt") or payload.get("input") or ""
            answer_json(self, {"tokens": list(range(max(1, len(text) // 4)))})
            return
        type(self).prompts.append(payload.get("prompt", ""))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        event = {"choices": [{"text": ANSWER, "index": 0, "finish_reason": "stop"}]}
        self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\ndata: [DONE]\n\n")
        self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def model_url():
    server, url = serve_http(CannedModel)
    yield url
    server.shutdown()


def settings(url: str) -> dict:
    return {"repomem": {"endpoint": url, "debounceMs": 0, "warmAfterMs": 0, "maxNewTokens": 16}}


async def wait_for_log(client: LanguageClient, needle: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(needle in message.message for message in client.log_messages):
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"no log message with {needle!r}: {[m.message for m in client.log_messages]}")


def opened(client: LanguageClient, path: Path, text: str) -> str:
    uri = path.as_uri()  # percent-encoded where the path has a space, as editors send it
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=text)))
    return uri


async def complete(client: LanguageClient, uri: str, line: int, character: int) -> types.CompletionList:
    return await client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri), position=types.Position(line=line, character=character)))


SERVE = ClientServerConfig(server_command=[sys.executable, "-m", "repomem", "serve"])


@pytest.fixture
def spaced(tmp_path) -> Path:
    return copy_example(tmp_path / "my shop é")


async def ready(client: LanguageClient, model_url: str, **workspace) -> None:
    """`initialize` with the workspace given (`root_uri`, `workspace_folders`), then ready."""
    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), initialization_options=settings(model_url),
        **workspace))
    await wait_for_log(client, "repomem: ready")


@pytest_lsp.fixture(config=SERVE)
async def client_by_root(lsp_client: LanguageClient, spaced: Path, model_url: str):
    await ready(lsp_client, model_url, root_uri=spaced.as_uri())
    yield
    await lsp_client.shutdown_session()


async def test_a_workspace_whose_path_has_a_space_completes_at_its_lines_and_past_their_ends(
        client_by_root: LanguageClient, spaced: Path):
    """pygls keeps documents by their URI percent-decoded: every document of such a folder was
    taken for one the client never opened (no answers, nothing logged). A position past a line's
    end was moved onto its last character (the completion went in before the typed `m`), and the
    empty line after the file's last newline was out of range."""
    text = "from .pricing import compute_tax\n\n\ndef tax(amount_cents, tax_class):\n    return com"
    uri = opened(client_by_root, spaced / "shop" / "taxes.py", text)
    answer = await complete(client_by_root, uri, 4, 14)
    assert [item.text_edit.new_text for item in answer.items] == ["com" + ANSWER]
    edit = answer.items[0].text_edit
    assert (edit.range.start.character, edit.range.end.character) == (11, 14)
    past = await complete(client_by_root, uri, 4, 40)  # past the line's end: at its end
    assert [(i.text_edit.range.start.character, i.text_edit.range.end.character) for i in past.items] == [(11, 14)]
    assert CannedModel.prompts[-1].endswith("    return com")  # the whole line before the cursor
    ended = opened(client_by_root, spaced / "shop" / "ended.py", "def f(amount):\n    return amount\n")
    last = await complete(client_by_root, ended, 2, 0)  # the line after the final newline
    assert [item.text_edit.new_text for item in last.items] == [ANSWER]


def typed(client: LanguageClient, uri: str, version: int, start: tuple[int, int], end: tuple[int, int],
          text: str) -> None:
    """An incremental change replacing start..end (line, character) with `text`."""
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(*start), types.Position(*end)), text=text)]))


async def test_an_edit_past_a_lines_end_lands_at_the_lines_end(client_by_root: LanguageClient, spaced: Path):
    """LSP 3.17: a character past the line's length means the line's end. pygls moved such a
    position of an incremental change onto the line's last character, its line end included: `m`
    typed one past the end of `    return co` landed at the start of the next line, and a range
    ending past the end of the last line left its last character after the new text. The server's
    copy then held text the editor did not, and completed it."""
    uri = opened(client_by_root, spaced / "shop" / "typed.py", "def tax(a, b):\n    return co\n    pass\n")
    typed(client_by_root, uri, 2, (1, 14), (1, 14), "m")  # the line holds 13 characters
    answer = await complete(client_by_root, uri, 1, 14)
    assert [(i.text_edit.range.start.character, i.text_edit.range.end.character, i.text_edit.new_text)
            for i in answer.items] == [(11, 14, "com" + ANSWER)]
    assert CannedModel.prompts[-1].endswith("    return com")
    last = opened(client_by_root, spaced / "shop" / "last.py", "def tax(a, b):\n    return co")
    typed(client_by_root, last, 2, (1, 11), (1, 99), "com")  # `co` and past the end: `com`
    answer = await complete(client_by_root, last, 1, 99)  # past the end: at the line's end
    assert [item.text_edit.new_text for item in answer.items] == ["com" + ANSWER]
    assert CannedModel.prompts[-1].endswith("    return com")


@pytest.fixture
def plain(tmp_path) -> Path:
    return copy_example(tmp_path / "shop")


@pytest_lsp.fixture(config=SERVE)
async def client_by_folders(lsp_client: LanguageClient, plain: Path, model_url: str):
    await ready(lsp_client, model_url, root_uri=None,
                workspace_folders=[types.WorkspaceFolder(uri=plain.as_uri(), name="shop")])
    yield
    await lsp_client.shutdown_session()


async def test_a_client_naming_workspace_folders_only_gets_the_first_indexed(
        client_by_folders: LanguageClient, plain: Path, tmp_path: Path):
    """LSP 3.17 deprecates rootUri: `rootUri: null` with workspace folders was "no workspace
    folder, no completions"; a document outside the folder got empty answers without a word."""
    uri = opened(client_by_folders, plain / "shop" / "taxes.py", "def tax(a, b):\n    return com")
    assert [item.text_edit.new_text for item in (await complete(client_by_folders, uri, 1, 14)).items] == \
        ["com" + ANSWER]
    outside = tmp_path / "elsewhere.py"
    outside.write_text("x = 1\n")
    away = opened(client_by_folders, outside, "x = com")
    assert not (await complete(client_by_folders, away, 0, 7)).items
    await wait_for_log(client_by_folders, "is outside the workspace folder")


async def test_unsaved_buffers_that_outweigh_a_small_repository_are_compacted_once(
        client_by_folders: LanguageClient, plain: Path):
    """A rebuild reads the disk and overlays the open buffers again: past index.compact_ratio of a
    small repository, the server rebuilt without end (47 builds in 10 idle seconds, 88% CPU)."""
    grown = (plain / "shop" / "pricing.py").read_text() + "".join(
        f"\n\ndef helper_{i}(value):\n    return value + {i}\n" for i in range(40))
    uri = opened(client_by_folders, plain / "shop" / "pricing.py", grown)
    assert (await complete(client_by_folders, uri, 3, 0)) is not None  # the buffer is overlaid for it
    await asyncio.sleep(6)
    builds = sum("index unchanged" in m.message or "indexed" in m.message.split(":")[0]
                 for m in client_by_folders.log_messages)
    rebuilds = sum("indexing at a lower CPU priority" in m.message for m in client_by_folders.log_messages)
    assert rebuilds <= 2, (rebuilds, builds)


# -- lines with characters that count differently in each position encoding ----------------------

# (the line, as the user has it once `m` is typed; the cursor is at its end, after `com`)
WIDE_LINES = ('    label = "\U0001F642" + com',  # beyond the BMP: 2 UTF-16 units, 4 UTF-8 bytes
              "    合計 = 金額 + com",  # CJK names: 1 UTF-16 unit, 3 UTF-8 bytes each
              '    label = "e\u0301" + com')  # a combining accent: a code point of its own
# The clients: what each offers (general.positionEncodings) and how it counts its positions.
# lsp-mode 8.0 offers none and counts code points; lsp-bridge, also "emacs", counts UTF-16.
CLIENTS = {"vscode": (None, None, "utf-16"), "neovim-0.12": (["utf-8", "utf-16", "utf-32"], None, "utf-8"),
           "lsp-mode-8": (None, "emacs", "utf-32"), "lsp-bridge": (None, "emacs", "utf-16")}


def units(text: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    return len(text) if encoding == "utf-32" else len(text.encode("utf-16-le")) // 2


@pytest_lsp.fixture(config=SERVE, params=list(CLIENTS))
async def client_counting(lsp_client: LanguageClient, plain: Path, model_url: str, request):
    offered, name, _ = CLIENTS[request.param]
    capabilities = client_capabilities("visual-studio-code")
    if request.param == "lsp-bridge":  # its initialize declares few capabilities (core/lspserver.py)
        capabilities = types.ClientCapabilities(workspace=types.WorkspaceClientCapabilities(configuration=True))
    capabilities.general = types.GeneralClientCapabilities(position_encodings=offered)
    result = await lsp_client.initialize_session(types.InitializeParams(
        capabilities=capabilities, initialization_options=settings(model_url), root_uri=plain.as_uri(),
        client_info=types.ClientInfo(name=name, version="GNU Emacs 28.2") if name else None))
    lsp_client.counting = (request.param, result.capabilities.position_encoding)
    await wait_for_log(lsp_client, "repomem: ready")
    yield
    await lsp_client.shutdown_session()


async def test_a_completion_after_an_emoji_a_cjk_name_or_an_accent_replaces_the_typed_word(
        client_counting: LanguageClient, plain: Path):
    """Each client's positions in its own units: `m` typed at the end of `... + co` (an incremental
    change), then a completion and ghost text asked there. The server's copy must hold the line as
    typed (the prompt ends with it) and both items replace exactly `com`. lsp-mode 8.0 counts code
    points and offers no encoding: read as UTF-16, its `m` went in before the `o` of the server's
    copy after an emoji (`"🙂" + cmo`), and the items' range started a character early."""
    name, negotiated = client_counting.counting
    encoding = CLIENTS[name][2]
    for number, line in enumerate(WIDE_LINES):
        uri = opened(client_counting, plain / "shop" / f"wide_{number}.py",
                     f"def tax(amount_cents, tax_class):\n{line[:-1]}\n    pass\n")
        end = units(line, encoding)
        typed(client_counting, uri, 2, (1, end - 1), (1, end - 1), "m")
        answer = await complete(client_counting, uri, 1, end)
        assert CannedModel.prompts[-1].endswith(line), (name, line, CannedModel.prompts[-1][-40:])
        assert [(i.text_edit.range.start.character, i.text_edit.range.end.character, i.text_edit.new_text)
                for i in answer.items] == [(end - 3, end, "com" + ANSWER)], (name, line)
        ghost = await client_counting.text_document_inline_completion_async(types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri), position=types.Position(line=1, character=end),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic)))
        assert [(i.range.start.character, i.range.end.character, i.insert_text) for i in ghost.items] == \
            [(end - 3, end, "com" + ANSWER)], (name, line)
    assert negotiated == encoding  # what the server says it counts in
