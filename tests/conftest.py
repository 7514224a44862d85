"""Fixtures shared by every tier: small real repositories written to a temporary folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

from tests.e2e.editors import EDITOR_SUMMARIES
from tests.repos import PACKAGE_FILES, synthetic_files, write_repo

# A developer's `repomem daemon` never answers the commands of the tests (nor sees their
# repositories); tests/e2e/test_daemon.py starts its own, in a cache folder of its own.
os.environ["REPOMEM_NO_DAEMON"] = "1"


@pytest.fixture
def package_repo(tmp_path: Path) -> Path:
    return write_repo(tmp_path / "repo", PACKAGE_FILES)


@pytest.fixture
def synthetic_repo(tmp_path: Path) -> Path:
    return write_repo(tmp_path / "synthetic", synthetic_files(9))


# Two pytest-xdist workers (pyproject's addopts) and two tiers of different shape: the end-to-end
# tests run one after another in one worker (each drives a llama.cpp generation over both cores or
# an editor against wall-clock limits: two at once wait on each other's spinning threads), and the
# fast tier (unit + parity: Python on one core) runs beside them in the other worker at the lowest
# priority, so it takes the core the end-to-end tests leave idle (editors polling, processes
# starting) and yields it whenever they want it. Alone, the fast tier spreads over both workers.
WITH_E2E = pytest.StashKey[bool]()
E2E_PREFIX = "tests/e2e/"


class TierScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with two scopes where the run holds end-to-end tests: all of them,
    and all the rest (each scope goes to one worker whole); otherwise a test module a scope."""

    with_e2e = False

    def schedule(self) -> None:
        if self.collection is None and self.registered_collections:
            collection = next(iter(self.registered_collections.values()))
            self.with_e2e = any(nodeid.startswith(E2E_PREFIX) for nodeid in collection)
        super().schedule()

    def _split_scope(self, nodeid: str) -> str:
        if nodeid.startswith(E2E_PREFIX):
            return "e2e"
        return "fast" if self.with_e2e else super()._split_scope(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log) -> TierScheduling:
    return TierScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[WITH_E2E] = any(item.nodeid.startswith(E2E_PREFIX) for item in items)


@pytest.fixture(autouse=True)
def _fast_tier_yields_the_cores(request: pytest.FixtureRequest) -> None:
    if (os.environ.get("PYTEST_XDIST_WORKER") and request.config.stash.get(WITH_E2E, False)
            and not request.node.nodeid.startswith(E2E_PREFIX) and os.getpriority(os.PRIO_PROCESS, 0) < 19):
        os.setpriority(os.PRIO_PROCESS, 0, 19)


SUMMARIES = pytest.StashKey[list[str]]()


def pytest_testnodedown(node, error) -> None:
    """A worker's editor summaries (tests/e2e/editors.py), kept for the terminal summary."""
    lines = getattr(node, "workeroutput", {}).get(EDITOR_SUMMARIES, [])
    node.config.stash.setdefault(SUMMARIES, []).extend(lines)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    for line in config.stash.get(SUMMARIES, []):
        terminalreporter.write_line(line)
