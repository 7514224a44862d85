"""Parts of `repomem daemon` that need no daemon process: a daemon whose code changed declines and
stops, and the services it keeps are reused only for the same settings and git environment."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from repomem.cli.daemon_client import HEADER, package_folder, read_frame
from repomem.cli.daemon_server import Daemon
from repomem.cli.main import main
from repomem.cli.service_setup import KeptServices
from repomem.service import RepoService
from tests.repos import copy_example, write_repo


def test_a_daemon_whose_code_changed_declines_and_stops() -> None:
    daemon = Daemon(idle_s=60, repositories=1, run_command=main)
    daemon.code = ()  # as if a source file of the package changed since the daemon started
    served, client = socket.socketpair()
    with served, client:
        client.sendall(json.dumps({"argv": ["index"], "cwd": "/", "env": {}, "package": package_folder(),
                                   "terminals": [False, False]}).encode() + b"\n")
        assert daemon._serve(served) is True  # it stops
        kind, why = read_frame(client.makefile("rb"))
    assert kind == b"d" and b"code changed" in why
    assert daemon.commands == 0


def test_status_and_stop_are_answered_without_a_command() -> None:
    daemon = Daemon(idle_s=60, repositories=1, run_command=main)
    for control, stops in (("status", False), ("stop", True)):
        served, client = socket.socketpair()
        with served, client:
            client.sendall(json.dumps({"control": control}).encode() + b"\n")
            assert daemon._serve(served) is stops
            answer = json.loads(client.makefile("rb").readline())
        assert answer.get("pid") == os.getpid() if control == "status" else answer == {"stopping": True}
    assert HEADER.size == 5


def _opened(root: Path) -> RepoService:
    service = RepoService.open(root)
    assert isinstance(service, RepoService)
    return service


def test_kept_services_are_reused_for_the_same_settings_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = KeptServices(limit=2)
    shop = copy_example(tmp_path / "shop")
    first = kept.reuse(_opened(shop))
    assert kept.reuse(_opened(shop)) is first
    (shop / "repomem.toml").write_text("[retrieval]\ntop_k = 3\n")  # settings changed: a new service
    second = kept.reuse(_opened(shop))
    assert second is not first and second.config.retrieval.top_k == 3
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))  # git would list other files
    third = kept.reuse(_opened(shop))
    assert third is not second
    # Past the limit, the least recently used repository is dropped.
    others = [write_repo(tmp_path / name, {"a.py": "x = 1\n"}) for name in ("one", "two")]
    for root in others:
        kept.reuse(_opened(root))
    assert list(kept.services) == [root.resolve() for root in others]
