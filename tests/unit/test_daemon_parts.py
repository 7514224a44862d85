"""Parts of `repomem daemon` that need no daemon process: a daemon whose code changed declines and
stops, and the services it keeps are reused only for the same settings and git environment."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest

from repomem.cli.daemon_client import HEADER, package_folder, read_frame
from repomem.cli.daemon_server import Daemon
from repomem.cli.main import main
from repomem.cli.service_setup import KeptServices
from repomem.service import RepoService
from tests.repos import copy_example, write_repo


def _request(argv: list[str], cwd: str = "/", env: dict[str, str] | None = None) -> bytes:
    """A client's request line for `argv` (this environment unless `env` is given)."""
    return json.dumps({"argv": argv, "cwd": cwd, "env": dict(os.environ) if env is None else env,
                       "package": package_folder(), "terminals": [False, False]}).encode() + b"\n"


def test_a_daemon_whose_code_changed_declines_and_stops() -> None:
    daemon = Daemon(idle_s=60, repositories=1, run_command=main)
    daemon.code = ()  # as if a source file of the package changed since the daemon started
    served, client = socket.socketpair()
    with served, client:
        client.sendall(_request(["index"], env={}))
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


def _command(daemon: Daemon) -> bytes:
    """One forwarded command through `_serve` and what the loop does after it; its exit status."""
    served, client = socket.socketpair()
    with served, client:
        client.sendall(_request(["retrieve"]))
        assert daemon._serve(served) is False
        daemon._let_go_of_cut_off_updates()
        frames = []
        stream = client.makefile("rb")
        served.close()
        while (frame := read_frame(stream)) is not None:
            frames.append(frame)
    return dict(frames)[b"x"]


@pytest.mark.parametrize("ending", ["interrupted", "a bug", "answered"])
def test_a_command_stopped_midway_through_an_update_lets_go_of_its_repositorys_service(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ending: str) -> None:
    """A client's hang-up interrupts its command between any two steps (an index update among
    them), and a bug stops it anywhere: a service whose update was cut off may hold a half-updated
    index, so it is let go of, unsaved, and the next command opens the repository afresh. One whose
    update ended is kept."""
    from repomem.cli import service_setup

    shop = copy_example(tmp_path / "shop")
    monkeypatch.setattr(service_setup, "KEPT", KeptServices(limit=2))
    other = service_setup.KEPT.reuse(_opened(write_repo(tmp_path / "other", {"a.py": "x = 1\n"})))

    def command(argv, out, err) -> int:
        service = service_setup.KEPT.reuse(_opened(shop))
        service.ensure_index()

        def stopped(*args) -> None:
            raise KeyboardInterrupt if ending == "interrupted" else RuntimeError("a bug midway")

        if ending != "answered":  # the next update stops after the refresh began
            monkeypatch.setattr(service, "_apply", stopped)
            (shop / "shop/cart.py").write_text((shop / "shop/cart.py").read_text() + "\n\ndef more():\n    pass\n")
        service.ensure_index(save=False)
        service_setup.KEPT.unsaved.add(service.root)  # as an update in memory leaves it
        return 0

    daemon = Daemon(idle_s=60, repositories=2, run_command=command)
    status = _command(daemon)
    kept = service_setup.KEPT
    if ending == "answered":
        assert status == b"\0\0\0\0" and shop.resolve() in kept.services and shop.resolve() in kept.unsaved
    else:
        assert status != b"\0\0\0\0"
        assert shop.resolve() not in kept.services and shop.resolve() not in kept.unsaved  # nothing half done saved
    assert kept.services[other.root] is other  # another repository's service is not the command's


def test_sigterm_during_a_command_ends_the_daemon_and_answers_no_exit_status() -> None:
    """SIGTERM (a shutdown, `daemon stop` of a daemon with no socket) raised SystemExit(0) in the
    command, read as argparse's exit: the client of an `index` stopped midway was told 0, and the
    daemon went on serving. Now the command is not answered (its client says so, or runs it itself
    when nothing was printed) and the daemon ends."""
    import signal

    from repomem.cli import daemon_server

    def command(argv, out, err) -> int:
        print("indexing")
        daemon_server._stop_on_sigterm(signal.SIGTERM, None)  # as the signal arrives midway
        return 0

    daemon = Daemon(idle_s=60, repositories=1, run_command=command)
    served, client = socket.socketpair()
    with served, client:
        client.sendall(_request(["index"]))
        assert daemon._serve(served) is True  # the daemon stops
        served.close()
        stream = client.makefile("rb")
        kinds = []
        while (frame := read_frame(stream)) is not None:
            kinds.append(frame[0])
    assert b"o" in kinds and b"x" not in kinds


def test_a_hang_up_that_comes_after_the_command_ended_stops_nothing() -> None:
    """The hang-up's interrupt reaches the main thread between two of its steps: arriving once the
    command has ended, it broke off the cleanup after it or a save, and stopped the daemon."""
    daemon = Daemon(idle_s=60, repositories=1, run_command=main)
    daemon._hung_up, daemon._interruptible = True, False
    daemon._on_interrupt(2, None)  # dropped
    assert daemon._hung_up is False
    daemon._hung_up, daemon._interruptible = True, True
    with pytest.raises(KeyboardInterrupt):
        daemon._on_interrupt(2, None)
    daemon._hung_up = False
    with pytest.raises(KeyboardInterrupt):  # Ctrl+C at the daemon's own terminal
        daemon._on_interrupt(2, None)


def test_a_broken_pipe_inside_a_daemon_closes_no_descriptor_it_does_not_own(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`repomem retrieve ... | head -1` through a daemon: the command's stdout is the client's frames,
    with no descriptor; the BrokenPipeError path opened /dev/null and never closed it, one leaked
    descriptor a command until the daemon could accept no more."""
    import io

    from repomem.cli import main as cli_main

    shop = copy_example(tmp_path / "shop")
    monkeypatch.chdir(shop)
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO()))  # no fileno(), as a daemon's

    def broken(args, out, err) -> int:
        raise BrokenPipeError

    monkeypatch.setattr(cli_main, "cmd_index", broken)  # the parser is made at each call: it takes this one
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        assert cli_main.main(["index", "--json"]) == 141
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_client_that_stops_reading_holds_the_daemon_up_no_longer_than_the_send_timeout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One command at a time: a client whose reader stopped (`| less` left open, Ctrl+Z) held every
    other command up for as long as it read nothing. Past SEND_TIMEOUT_S it is taken for gone."""
    import time

    from repomem.cli import daemon_server, service_setup

    monkeypatch.setattr(daemon_server, "SEND_TIMEOUT_S", 0.5)
    monkeypatch.setattr(service_setup, "KEPT", KeptServices(limit=1))
    shop = copy_example(tmp_path / "shop")

    def command(argv, out, err) -> int:
        service_setup.KEPT.reuse(_opened(shop)).ensure_index()
        print("x" * 50_000_000)  # far more than the socket holds
        return 0

    daemon = Daemon(idle_s=60, repositories=1, run_command=command)
    served, client = socket.socketpair()
    with served, client:
        client.sendall(_request(["retrieve"]))
        started = time.perf_counter()
        assert daemon._serve(served) is False  # the client reads nothing
        assert time.perf_counter() - started < 10
    daemon._let_go_of_cut_off_updates()
    assert shop.resolve() in service_setup.KEPT.services  # stopped while it printed: its index is whole


def test_a_working_folder_the_daemon_cannot_enter_declines_the_command(tmp_path: Path) -> None:
    """A shell can stand in a folder whose path is longer than PATH_MAX (entered step by step); the
    daemon cannot enter it by its name and answered "cannot enter the working folder", exit 2,
    where the command run in its own process answered (an absolute FILE) or named the path it could
    not open. Declined, the command runs in the client's process, as without a daemon."""
    daemon = Daemon(idle_s=60, repositories=1, run_command=main)
    for cwd in ("/" + "d" * 200 + "/") * 25, str(tmp_path / "removed"):
        served, client = socket.socketpair()
        with served, client:
            client.sendall(_request(["retrieve", str(tmp_path / "a.py:1")], cwd))
            assert daemon._serve(served) is False
            kind, why = read_frame(client.makefile("rb"))
        assert kind == b"d" and b"cannot enter the working folder" in why
    assert daemon.commands == 0


def test_a_kept_model_servers_backend_is_not_reused_with_another_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """A daemon kept the backend of `complete --endpoint URL` with the API key of the first command's
    environment: after the key was changed in the shell (rotated, revoked), every `complete` through
    the daemon sent the old one and was refused (HTTP 401), where one run on its own used the new."""
    from repomem.cli.backend_options import KeptBackend
    from repomem.cli.main import _parser
    from repomem.config import Config

    args = _parser().parse_args(["complete", "a.py:1", "--endpoint", "http://127.0.0.1:9"])
    config = Config()
    monkeypatch.setenv(config.model.api_key_env, "old key")
    first = KeptBackend.key(args, config)
    assert KeptBackend.key(args, config) == first
    monkeypatch.setenv(config.model.api_key_env, "new key")
    assert KeptBackend.key(args, config) != first


def test_a_kept_model_servers_backend_is_not_reused_with_another_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy is read when the backend opens: a daemon kept the backend of a `complete --endpoint
    URL` run with `http_proxy` set and went on through that proxy after the variable was unset (or
    went direct after it was set), where one run on its own followed the shell's environment. The
    embedded model, on loopback, is never proxied: a proxy changed does not reopen it."""
    from repomem.cli.backend_options import KeptBackend
    from repomem.cli.main import _parser
    from repomem.config import Config

    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    config = Config()
    server = _parser().parse_args(["complete", "a.py:1", "--endpoint", "http://vllm.example:8000"])
    embedded = _parser().parse_args(["complete", "a.py:1"])
    direct, embedded_key = KeptBackend.key(server, config), KeptBackend.key(embedded, config)
    monkeypatch.setenv("http_proxy", "http://proxy.example:3128")
    proxied = KeptBackend.key(server, config)
    assert proxied != direct and KeptBackend.key(server, config) == proxied
    assert KeptBackend.key(embedded, config) == embedded_key
    bad = _parser().parse_args(["complete", "a.py:1", "--endpoint", "http://[::1"])
    KeptBackend.key(bad, config)  # opening it says what is wrong with it


def test_a_daemon_warmed_for_complete_with_a_model_keeps_what_that_command_reuses(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`repomem complete FILE:LINE --model qwen2.5-coder-0.5b` at a terminal starts a daemon that
    loads the repository and opens that model for the next one: it loaded the repository with the
    default settings, where the command's --model sets model.embedded_model, so the next
    `complete` found another configuration, dropped the warmed index and closed the model opened
    for it (keyed by those settings too) to open it again."""
    from repomem.cli import backend_options, service_setup
    from repomem.cli.backend_options import model_override
    from repomem.cli.main import _parser

    shop = copy_example(tmp_path / "shop")
    monkeypatch.setattr(service_setup, "KEPT", KeptServices(limit=1))
    monkeypatch.setattr(backend_options, "KEPT_BACKEND", backend_options.KeptBackend())
    argv = ["complete", "shop/report.py:9", "--model", "qwen2.5-coder-0.5b"]
    daemon = Daemon(idle_s=60, repositories=1, run_command=main, warm=[shop.resolve()], model_for=argv,
                    parse_command=_parser().parse_args)
    opened_for = []
    monkeypatch.setattr(daemon, "_model_ahead", lambda: None)
    monkeypatch.setattr(daemon, "_open_model", lambda argv, service, ahead=None: opened_for.append(service))
    daemon._warm_up()
    try:
        [warmed] = service_setup.KEPT.services.values()
        assert opened_for == [warmed]
        # What the next `complete --model qwen2.5-coder-0.5b` opens (cli/main.py's _cursor_from_args)
        assert service_setup.open_service(shop.resolve(), model_override("qwen2.5-coder-0.5b")) is warmed
    finally:
        for service in service_setup.KEPT.services.values():
            service.stop_watching()


def test_a_daemon_started_to_warm_a_large_repository_is_said_started(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """`repomem daemon start --warm REPO`: the daemon listens, then loads REPO before it answers;
    a repository that took past the status request's timeout made `start` fail with "internal
    error: KeyError: 'pid'". A --warm folder that does not exist is said before anything starts."""
    import types

    from repomem.cli import daemon_command
    from repomem.cli.errors import UserError
    from repomem.cli.main import _parser

    monkeypatch.setenv("REPOMEM_CACHE", str(tmp_path / "cache"))
    answers = iter([None, daemon_command.BUSY])  # none running; then one that loads its repositories
    monkeypatch.setattr(daemon_command, "_ask", lambda control, timeout_s=10.0: next(answers, None))
    spawned = []
    monkeypatch.setattr(daemon_command, "_spawn", lambda *args: spawned.append(args) or types.SimpleNamespace(
        pid=4242, poll=lambda: None, kill=lambda: None))
    args = _parser().parse_args(["daemon", "start", "--warm", str(tmp_path)])
    assert daemon_command._start(args) == 0
    assert "daemon started: pid 4242" in capsys.readouterr().out
    missing = _parser().parse_args(["daemon", "start", "--warm", str(tmp_path / "missing")])
    with pytest.raises(UserError, match="no such folder"):
        daemon_command._start(missing)
    assert len(spawned) == 1


def test_status_and_start_say_a_daemon_belongs_to_another_installation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """A daemon of another virtualenv runs none of this installation's commands; `daemon status`
    showed it as this one's (only `--json` had its package), and `start` said "already running"."""
    from repomem.cli import daemon_command
    from repomem.cli.errors import UserError
    from repomem.cli.main import _parser

    monkeypatch.setenv("REPOMEM_CACHE", str(tmp_path / "cache"))
    answer = {"pid": 4242, "uptime_s": 5.0, "commands": 0, "resident_mb": 100, "idle_exit_s": 1800.0,
              "repositories": [], "package": "/another/venv/repomem"}
    monkeypatch.setattr(daemon_command, "_ask", lambda control, timeout_s=10.0: answer)
    assert daemon_command._status(_parser().parse_args(["daemon", "status"])) == 0
    shown = capsys.readouterr().out
    assert "belongs to another repomem installation (/another/venv/repomem)" in shown
    assert "`repomem daemon stop` ends it" in shown
    with pytest.raises(UserError, match="another repomem installation"):
        daemon_command._start(_parser().parse_args(["daemon", "start"]))
    answer["package"] = package_folder()  # this installation's: nothing more said
    assert daemon_command._status(_parser().parse_args(["daemon", "status"])) == 0
    assert "another" not in capsys.readouterr().out


def test_a_daemon_handed_a_descriptor_that_is_not_its_lock_refuses_to_start(tmp_path: Path) -> None:
    """`--lock-fd` (how the command that starts a daemon hands it the lock it took) naming another
    file: one line, exit 2, no daemon."""
    from repomem.cli.daemon_server import _held_lock

    (tmp_path / "lock").touch()
    said = _held_lock(tmp_path / "lock", os.open(tmp_path / "other", os.O_RDWR | os.O_CREAT))  # closed there
    assert isinstance(said, str) and "is not the daemon's lock" in said
