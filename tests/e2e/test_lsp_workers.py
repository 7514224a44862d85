"""`repomem serve` building the index of a repository big enough for parse workers (forked
processes), with the protocol reading stdin on another thread: the build must finish."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from repomem.index.parse_pool import PARALLEL_MIN_FILES
from tests.repos import synthetic_files, write_repo

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    files = synthetic_files(PARALLEL_MIN_FILES + 16, n_functions=2)
    return write_repo(tmp_path_factory.mktemp("lsp-workers") / "many", files)


@pytest_lsp.fixture(scope="module",
                    config=ClientServerConfig(server_command=[sys.executable, "-m", "repomem", "serve"]))
async def client(lsp_client: LanguageClient, workspace: Path):
    @lsp_client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: types.RegistrationParams) -> None:  # the server's file watcher
        return None

    await lsp_client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=workspace.as_uri(),
        initialization_options={"repomem": {"maxNewTokens": 8}},
    ))
    yield
    await lsp_client.shutdown_session()


async def test_a_repository_that_needs_parse_workers_becomes_ready(client: LanguageClient, workspace: Path):
    deadline = time.monotonic() + 120
    # "repomem: ready" once both are in (the model's own "model ready" may come first).
    while time.monotonic() < deadline and not any("repomem: ready" in m.message for m in client.log_messages):
        await asyncio.sleep(0.2)
    messages = [m.message for m in client.log_messages]
    assert any("repomem: ready" in m for m in messages), messages
    assert any("indexed" in m or "built" in m for m in messages), messages
    # The build (its thread and forked workers) ran below the model's priority (server.index_nice).
    if sys.platform.startswith("linux"):
        assert any("indexing at a lower CPU priority than completions (nice " in m for m in messages), messages
    assert (workspace / ".repomem").is_dir()
