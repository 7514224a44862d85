"""The language server while the repository changes under it as developers change it: a `git
checkout` of another branch with an editor open and no request sent. `repomem serve` over stdio
(pytest-lsp), its model the canned OpenAI-compatible server of test_lsp_workspaces (these tests are
about the index and the answers, not the model)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from tests.e2e.test_lsp_workspaces import CannedModel, model_url  # noqa: F401 (a fixture)
from tests.repos import copy_example

pytestmark = pytest.mark.asyncio(loop_scope="function")
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
MEMBERSHIP = ("def compute_member_discount_cents(amount_cents: int, tier: str) -> int:\n"
              "    rates = {'gold': 15, 'silver': 10}\n    return amount_cents * rates.get(tier, 0) // 100\n")
QUERY = "def member_total(amount_cents: int, tier: str) -> int:\n    return compute_member_discount_cents("


def git(root: Path, *args: str) -> None:
    subprocess.run([*GIT, *args], cwd=root, check=True, capture_output=True)


@pytest.fixture
def branches(tmp_path) -> Path:
    """The example as a git repository on `main`, and a branch `other` that adds a module, deletes
    one and changes another."""
    root = copy_example(tmp_path / "shop")
    (root / ".gitignore").write_text(".repomem/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "main")
    git(root, "checkout", "-q", "-b", "other")
    (root / "shop" / "membership.py").write_text(MEMBERSHIP)
    (root / "shop" / "catalog.py").unlink()
    with (root / "shop" / "payments.py").open("a") as stream:
        stream.write("\n\ndef refund_all() -> int:\n    return 0\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "other")
    git(root, "checkout", "-q", "main")
    return root


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "repomem", "serve"]))
async def client(lsp_client: LanguageClient, branches: Path, model_url: str):  # noqa: F811
    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("neovim"), root_uri=branches.as_uri(),  # no file events
        initialization_options={"repomem": {"endpoint": model_url, "debounceMs": 0, "warmAfterMs": 0,
                                            "maxNewTokens": 16}}))
    deadline = time.monotonic() + 120
    while not any("repomem: ready" in m.message for m in lsp_client.log_messages):
        assert time.monotonic() < deadline, [m.message for m in lsp_client.log_messages]
        await asyncio.sleep(0.1)
    yield
    await lsp_client.shutdown_session()


async def test_a_checkout_reaches_the_next_completion_at_the_same_place(client: LanguageClient, branches: Path):
    """A completion asked again at the same place after `git checkout other` was the one from before
    the checkout: the scheduler's cache answered it without reading the watch, and once the watch
    was read, the blocks order "stable" kept for the function were renewed, never retrieved again,
    so the branch's new module stayed out of the prompt. The watch is now read as the checkout
    happens (no request needed), and a change of several files makes both anew."""
    uri = (branches / "shop" / "member_view.py").as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=QUERY)))
    position = types.Position(line=1, character=len("    return compute_member_discount_cents("))
    params = types.CompletionParams(text_document=types.TextDocumentIdentifier(uri), position=position)
    before = await client.text_document_completion_async(params)
    assert before.items
    assert "# shop/membership.py\n" not in CannedModel.prompts[-1]
    logged = len(client.log_messages)
    git(branches, "checkout", "-q", "other")
    deadline = time.monotonic() + 10
    while not any("changes on disk indexed" in m.message for m in client.log_messages[logged:]):
        assert time.monotonic() < deadline, [m.message for m in client.log_messages[logged:]]
        await asyncio.sleep(0.05)
    prompts = len(CannedModel.prompts)
    after = await client.text_document_completion_async(params)
    assert after.items and after.items[0].command.arguments != before.items[0].command.arguments
    assert len(CannedModel.prompts) == prompts + 1
    assert "# shop/membership.py\n" in CannedModel.prompts[-1]
    assert "# shop/catalog.py\n" not in CannedModel.prompts[-1]  # gone with the checkout
