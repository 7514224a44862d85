"""`repomem daemon` as a user runs it: real `python -m repomem` processes, one daemon in a cache
folder of this module's own. Forwarded commands answer as a fresh process does (output, errors,
exit codes), a saved file is seen and the index written after the answer, the daemon is its
user's alone, and it ends when idle or asked."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from repomem.cache import cache_root
from repomem.cli.daemon_client import HEADER, OPT_OUT, package_folder
from tests.cli_process import run, run_at_a_terminal
from tests.repos import copy_example
from tests.small_model import SMALL_MODEL_SETTINGS

TIMEOUT_S = 120


def repomem(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m repomem ARGS` from nothing, as a user's shell starts it; without a daemon (env
    with REPOMEM_NO_DAEMON) the same command forked from the tests' zygote, which runs it in its
    own process as a fresh one would (tests/cli_zygote.py), ~2 s sooner."""
    if env.get(OPT_OUT):
        return run(*args, cwd=cwd, env=env, timeout=TIMEOUT_S)
    return subprocess.run([sys.executable, "-m", "repomem", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=TIMEOUT_S)


def _environment(cache: Path, daemon: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (OPT_OUT, "REPOMEM_DEBUG")}
    env["REPOMEM_CACHE"] = str(cache)
    if not daemon:
        env[OPT_OUT] = "1"
    return env


@pytest.fixture(scope="module")
def cache() -> Iterator[Path]:
    # Short: a Unix socket's path holds 107 bytes, and pytest's folders are long.
    folder = Path(tempfile.mkdtemp(prefix="rmd-"))
    # The embedded model, pulled once, and its saved prompt states, as the other tests use them.
    for shared in ("models", "prompt-states"):
        (cache_root() / shared).mkdir(parents=True, exist_ok=True)
        (folder / shared).symlink_to(cache_root() / shared)
    started = repomem("daemon", "start", "--idle-minutes", "10", env=_environment(folder, True))
    assert started.returncode == 0, started.stderr
    assert "daemon started: pid" in started.stdout
    yield folder
    children = _children(_status(folder)["pid"])
    stopped = repomem("daemon", "stop", env=_environment(folder, True))
    assert stopped.returncode == 0 and "daemon stopped" in stopped.stdout
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in children)  # the kept model's process ended with it
    assert not (folder / "daemon" / "socket").exists()
    shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    """Running, not ended (a zombie nobody reaped has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _status(cache: Path) -> dict:
    answer = repomem("daemon", "status", "--json", env=_environment(cache, True))
    assert answer.returncode == 0, answer.stderr
    return json.loads(answer.stdout)


def _without_timings(text: str) -> dict:
    answer = json.loads(text)
    answer.pop("timings_ms")
    return answer


def test_forwarded_commands_answer_as_a_fresh_process(cache: Path, package_repo: Path) -> None:
    commands_before = _status(cache)["commands"]
    both = {}
    for daemon in (True, False):
        env = _environment(cache, daemon)
        both[daemon] = [
            repomem("retrieve", "pkg/models.py:20", "--json", env=env, cwd=package_repo),
            repomem("retrieve", "pkg/models.py:20", env=env, cwd=package_repo),
            repomem("retrieve", "pkg/missing.py:1", env=env, cwd=package_repo),
            repomem("retrieve", "pkg/models.py:9999", env=env, cwd=package_repo),
            repomem("retrieve", "pkg/models.py:20", "--k", "0", env=env, cwd=package_repo),
        ]
    forwarded, fresh = both[True], both[False]
    assert forwarded[0].returncode == fresh[0].returncode == 0
    assert _without_timings(forwarded[0].stdout) == _without_timings(fresh[0].stdout)
    assert forwarded[1].stdout == fresh[1].stdout  # the table, as wide as a pipe's
    for one, other in zip(forwarded[2:], fresh[2:]):
        assert one.returncode == other.returncode == 2
        assert one.stderr == other.stderr and one.stderr.startswith("repomem: error: ")
        assert "Traceback" not in one.stderr
    status = _status(cache)
    assert status["commands"] == commands_before + 5  # the daemon ran them, the fresh process did not
    assert str(package_repo.resolve()) in [r["root"] for r in status["repositories"]]


def _wait_until_watched(cache: Path, root: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(r["root"] == str(root.resolve()) and r["watching"] for r in _status(cache).get("repositories", [])):
            return
        time.sleep(0.2)
    raise AssertionError("the daemon never watched the repository")


def test_a_saved_file_is_seen_and_the_index_written_after_the_answer(cache: Path, package_repo: Path) -> None:
    daemon_env, fresh_env = _environment(cache, True), _environment(cache, False)
    assert repomem("retrieve", "pkg/models.py:20", env=daemon_env, cwd=package_repo).returncode == 0
    _wait_until_watched(cache, package_repo)
    with (package_repo / "pkg/helpers.py").open("a") as stream:
        stream.write("\n\ndef zebra_stripes(name):\n    return slugify(name) + '-zebra'\n")
    forwarded = repomem("retrieve", "pkg/models.py:20", "--json", "--k", "50", env=daemon_env, cwd=package_repo)
    assert forwarded.returncode == 0, forwarded.stderr
    assert "zebra_stripes" in forwarded.stdout
    assert _status(cache)["commands"] > 0  # answered after the daemon wrote the index
    # A fresh process finds the index on disk up to date, and ranks as the daemon did.
    report = json.loads(repomem("index", "--json", env=fresh_env, cwd=package_repo).stdout)
    assert report["action"] == "unchanged"
    files = report["files"]
    fresh = repomem("retrieve", "pkg/models.py:20", "--json", "--k", "50", env=fresh_env, cwd=package_repo)
    assert _without_timings(forwarded.stdout) == _without_timings(fresh.stdout)
    # A new file: the names changed, so the daemon scans, and `index` writes at once.
    (package_repo / "pkg/extra.py").write_text("def extra():\n    return 1\n")
    report = json.loads(repomem("index", "--json", env=daemon_env, cwd=package_repo).stdout)
    # (this small index is rebuilt rather than updated: index.compact_ratio)
    assert report["action"] in ("updated", "built") and report["files"] == files + 1
    assert json.loads(repomem("index", "--json", env=fresh_env, cwd=package_repo).stdout)["action"] == "unchanged"


def _children(pid: int) -> set[int]:
    found = set()
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat_file.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(stat_file.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def test_complete_keeps_the_model_open_between_commands(cache: Path, tmp_path: Path) -> None:
    """The embedded model: the second completion through the daemon starts no model and answers as
    the first; the model's process is the daemon's child until the daemon ends."""
    shop = copy_example(tmp_path / "shop")
    daemon_env = _environment(cache, True)
    answers = [repomem("complete", "shop/report.py:9", "--json", env=daemon_env, cwd=shop) for _ in range(2)]
    for answer in answers:
        assert answer.returncode == 0, answer.stderr
    first, second = (json.loads(answer.stdout) for answer in answers)
    assert second["timings_ms"]["load_model"] < 50 < first["timings_ms"]["load_model"]
    # What a fresh process prints here (tests/e2e/test_completion.py).
    assert first["completion"] == second["completion"] == "compute_tax(amount_cents, tax_class)"
    assert len(_children(_status(cache)["pid"])) == 1  # the model's process, kept


def test_the_daemon_is_private_and_declines_another_installation(cache: Path) -> None:
    folder = cache / "daemon"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "socket").stat().st_mode) == 0o600
    again = repomem("daemon", "start", env=_environment(cache, True))
    assert again.returncode == 0 and "already running" in again.stdout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(str(folder / "socket"))
        conn.sendall(json.dumps({"argv": ["index"], "cwd": "/", "env": {}, "package": "/another/repomem",
                                 "terminals": [False, False]}).encode() + b"\n")
        kind, length = HEADER.unpack(conn.recv(HEADER.size, socket.MSG_WAITALL))
        assert kind == b"d" and b"another repomem" in conn.recv(length, socket.MSG_WAITALL)
    assert package_folder() == _status(cache)["package"]


def test_an_idle_daemon_exits_and_a_bad_option_is_one_line(tmp_path: Path) -> None:
    folder = Path(tempfile.mkdtemp(prefix="rmi-"))
    try:
        env = _environment(folder, True)
        bad = repomem("daemon", "start", "--idle-minutes", "0", env=env)
        assert bad.returncode == 2
        assert bad.stderr.strip().startswith("repomem: error: --idle-minutes must be more than 0")
        assert repomem("daemon", "start", "--idle-minutes", "0.02", env=env).returncode == 0
        pid = _status(folder)["pid"]
        deadline = time.monotonic() + 30
        while (folder / "daemon" / "socket").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not (folder / "daemon" / "socket").exists()
        assert "idle for 1 s: exiting" in (folder / "daemon" / "log").read_text()
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:  # the process ends right after its socket
            time.sleep(0.05)
        assert not _alive(pid)
        assert repomem("daemon", "status", env=env).stdout.startswith("no daemon running")
        assert repomem("daemon", "stop", env=env).stdout.strip() == "no daemon running"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_daemon_start_without_the_option_takes_the_users_idle_minutes(tmp_path: Path) -> None:
    """`daemon start` by hand took 30 minutes whatever `[daemon] idle_minutes` said; the option
    still wins over the setting."""
    folder = Path(tempfile.mkdtemp(prefix="rmj-"))
    try:
        env = _environment(folder, True)
        env["REPOMEM_CONFIG"] = str(_user_config(folder, "[daemon]\nidle_minutes = 0.02\n"))
        started = repomem("daemon", "start", env=env)
        assert started.returncode == 0, started.stderr
        assert "exits after 0.02 idle minutes" in started.stdout, started.stdout
        deadline = time.monotonic() + 30
        while (folder / "daemon" / "socket").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "idle for 1 s: exiting" in (folder / "daemon" / "log").read_text()
        again = repomem("daemon", "start", "--idle-minutes", "5", env=env)
        assert "exits after 5 idle minutes" in again.stdout, again.stdout
    finally:
        repomem("daemon", "stop", env=_environment(folder, True))
        shutil.rmtree(folder, ignore_errors=True)


def _user_config(folder: Path, text: str) -> Path:
    path = folder / "user.toml"
    path.write_text(f'{SMALL_MODEL_SETTINGS}\n{text}')
    return path


def test_a_command_at_a_terminal_starts_a_daemon_for_the_next_ones(package_repo: Path) -> None:
    """No daemon running: a command a person runs at a terminal answers in its own process, then
    starts one that loads and watches the repository; the next command is its, with the same
    answer. Not from a script (no terminal), nor with `daemon.auto_start` off in the user config."""
    folder = Path(tempfile.mkdtemp(prefix="rma-"))
    try:
        env = _environment(folder, True)
        env["REPOMEM_CONFIG"] = str(_user_config(folder, "[daemon]\nauto_start = false\nidle_minutes = 5\n"))
        status, _, shown = run_at_a_terminal(["retrieve", "pkg/models.py:20"], env, package_repo)
        assert status == 0 and "daemon" not in shown
        scripted = repomem("retrieve", "pkg/models.py:20", env=_environment(folder, True), cwd=package_repo)
        assert scripted.returncode == 0 and "daemon" not in scripted.stderr
        assert not _status(folder)["running"]

        env["REPOMEM_CONFIG"] = str(_user_config(folder, "[daemon]\nidle_minutes = 5\n"))
        status, first, shown = run_at_a_terminal(["retrieve", "pkg/models.py:20", "--json"], env, package_repo)
        assert status == 0
        assert "repomem: started a daemon" in shown and "exits after 5 idle minutes" in shown
        _wait_until_watched(folder, package_repo)  # loaded, prepared for edits and watched unasked
        assert _status(folder)["commands"] == 0
        second = repomem("retrieve", "pkg/models.py:20", "--json", env=env, cwd=package_repo)
        assert second.returncode == 0 and "daemon" not in second.stderr
        assert _status(folder)["commands"] == 1  # the daemon answered it
        assert _without_timings(second.stdout) == _without_timings(first)
        assert "idle exit after 300 s" in (folder / "daemon" / "log").read_text()
    finally:
        repomem("daemon", "stop", env=_environment(folder, True))
        shutil.rmtree(folder, ignore_errors=True)


def test_a_completion_at_a_terminal_leaves_its_model_open_for_the_next(tmp_path: Path) -> None:
    """After `complete`, the daemon it starts opens that command's model as well (the 0.5B here,
    named by the user config): the next completion starts no model and answers the same."""
    shop = copy_example(tmp_path / "shop")
    folder = Path(tempfile.mkdtemp(prefix="rmc-"))
    try:
        for shared in ("models", "prompt-states"):
            (folder / shared).symlink_to(cache_root() / shared)
        env = _environment(folder, True)
        env["REPOMEM_CONFIG"] = str(_user_config(folder, ""))
        status, first, shown = run_at_a_terminal(["complete", "shop/report.py:9", "--json"], env, shop)
        assert status == 0 and "keeps this repository's index and the model in memory" in shown
        log = folder / "daemon" / "log"
        deadline = time.monotonic() + TIMEOUT_S
        while "watching its folders" not in (log.read_text() if log.exists() else "") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "opened the model llama.cpp:qwen2.5-coder-0.5b" in log.read_text()
        second = repomem("complete", "shop/report.py:9", "--json", env=env, cwd=shop)
        assert second.returncode == 0, second.stderr
        answers = [json.loads(first), json.loads(second.stdout)]
        assert answers[1]["timings_ms"]["load_model"] < 50 < answers[0]["timings_ms"]["load_model"]
        assert answers[0]["completion"] == answers[1]["completion"] == "compute_tax(amount_cents, tax_class)"
        assert _status(folder)["commands"] == 1
    finally:
        repomem("daemon", "stop", env=_environment(folder, True))
        shutil.rmtree(folder, ignore_errors=True)


def test_a_closed_or_full_output_is_said_as_without_the_daemon(cache: Path, tmp_path: Path) -> None:
    """With standard output closed, the connection to the daemon took its number and the answer
    went back to the daemon: exit 0, nothing printed. And a full output (/dev/full) was reported as
    the daemon's connection lost."""
    shop = copy_example(tmp_path / "shop")
    daemon_env = _environment(cache, True)
    assert repomem("retrieve", "shop/cart.py:5", env=daemon_env, cwd=shop).returncode == 0  # the daemon has it
    command = [sys.executable, "-m", "repomem", "retrieve", "shop/cart.py:5"]
    closed = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=daemon_env,
                            cwd=shop, timeout=TIMEOUT_S, preexec_fn=lambda: os.close(1))
    assert closed.returncode != 0 and "standard output is closed" in closed.stderr, closed.stderr
    with open("/dev/full", "w") as full:
        answer = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, text=True, env=daemon_env, cwd=shop,
                                timeout=TIMEOUT_S)
    assert answer.returncode == 1 and "cannot write the output" in answer.stderr, answer.stderr
    assert "lost the daemon's connection" not in answer.stderr


def test_an_index_folder_deleted_under_the_daemon_is_built_again(cache: Path, tmp_path: Path) -> None:
    """`.repomem` deleted while the daemon kept the repository: `index` said "unchanged" (index
    size 0 B) and wrote nothing, where a command of its own rebuilt it."""
    shop = copy_example(tmp_path / "shop")
    daemon_env = _environment(cache, True)
    first = repomem("index", "--json", env=daemon_env, cwd=shop)
    assert first.returncode == 0, first.stderr
    shutil.rmtree(shop / ".repomem")
    again = repomem("index", "--json", env=daemon_env, cwd=shop)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["action"].startswith("built") and (shop / ".repomem" / "CURRENT").is_file()


def test_a_daemon_whose_socket_was_deleted_listens_again_and_none_other_is_started(package_repo: Path) -> None:
    """The socket file deleted under a running daemon (a tmp cleaner): every command at a terminal
    started a daemon that lost the lock at once, each saying "started a daemon (pid X)" of a process
    gone. Now none is started nor said, and the daemon listens on its socket again."""
    folder = Path(tempfile.mkdtemp(prefix="rmd-"))
    try:
        env = _environment(folder, True)
        env["REPOMEM_CONFIG"] = str(_user_config(folder, "[daemon]\nidle_minutes = 5\n"))
        started = repomem("daemon", "start", "--idle-minutes", "5", env=env)
        assert started.returncode == 0, started.stderr
        pid = _status(folder)["pid"]
        (folder / "daemon" / "socket").unlink()
        status, _, shown = run_at_a_terminal(["retrieve", "pkg/models.py:20"], env, package_repo)
        assert status == 0 and "started a daemon" not in shown, shown
        deadline = time.monotonic() + 30
        while not (folder / "daemon" / "socket").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _status(folder)["pid"] == pid
        assert "the socket was deleted: listening again" in (folder / "daemon" / "log").read_text()
        again = repomem("retrieve", "pkg/models.py:20", env=env, cwd=package_repo)
        assert again.returncode == 0 and _status(folder)["commands"] == 1  # it answered
    finally:
        repomem("daemon", "stop", env=_environment(folder, True))
        shutil.rmtree(folder, ignore_errors=True)


def test_a_lock_holder_that_does_not_listen_is_named_and_stopped() -> None:
    """A process holding the daemon's lock with no socket (a daemon starting, or stuck): `status`
    and `stop` said no daemon ran."""
    folder = Path(tempfile.mkdtemp(prefix="rmd-"))
    holder = None
    try:
        env = _environment(folder, True)
        (folder / "daemon").mkdir(mode=0o700)
        holder = subprocess.Popen([sys.executable, "-c", (
            "import fcntl, os, sys, time\n"
            f"lock = open({str(folder / 'daemon' / 'lock')!r}, 'a+')\n"
            "fcntl.flock(lock, fcntl.LOCK_EX)\n"
            "lock.write(f'{os.getpid()}\\n'); lock.flush(); print('held', flush=True)\n"
            "time.sleep(120)\n")], stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "held"
        status = repomem("daemon", "status", env=env)
        assert status.returncode == 0 and f"a daemon (pid {holder.pid}) holds the lock but does not listen" \
            in status.stdout, status.stdout
        stopped = repomem("daemon", "stop", env=env)
        assert stopped.returncode == 0 and "did not listen on its socket" in stopped.stdout, stopped.stdout
        assert holder.wait(timeout=10) != 0
    finally:
        if holder is not None and holder.poll() is None:
            holder.kill()
            holder.wait()
        shutil.rmtree(folder, ignore_errors=True)


def test_two_commands_starting_a_daemon_at_once_name_the_one_that_serves(
        package_repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Two terminals' commands each starting a daemon at once: both said "started a daemon (pid
    X)", and one of those lost the lock and exited at once. Now only the one that serves is said."""
    from repomem.cli import daemon_command

    folder = Path(tempfile.mkdtemp(prefix="rm2-"))
    try:
        monkeypatch.setenv("REPOMEM_CACHE", str(folder))
        monkeypatch.delenv(OPT_OUT, raising=False)
        monkeypatch.setattr(daemon_command, "_at_terminal", lambda: True)
        for _ in range(2):  # the second before the first's daemon listens (its imports take ~1 s)
            daemon_command.start_for_next_commands(["retrieve"], package_repo, True, 5)
        said = [line for line in capsys.readouterr().err.splitlines() if "started a daemon" in line]
        assert len(said) == 1, said
        deadline = time.monotonic() + 60
        while not (folder / "daemon" / "socket").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert f"started a daemon (pid {_status(folder)['pid']})" in said[0]
        assert "already running" not in (folder / "daemon" / "log").read_text()
    finally:
        repomem("daemon", "stop", env=_environment(folder, True))
        shutil.rmtree(folder, ignore_errors=True)


def test_another_installations_commands_do_not_keep_the_daemon_alive() -> None:
    """A daemon of another installation (another virtualenv) declines this one's commands, and each
    of them put its idle exit off again: it never exited while they ran, serving none of them."""
    folder = Path(tempfile.mkdtemp(prefix="rmo-"))
    try:
        env = _environment(folder, True)
        assert repomem("daemon", "start", "--idle-minutes", "0.05", env=env).returncode == 0  # 3 s
        pid = _status(folder)["pid"]
        deadline = time.monotonic() + 15
        while _alive(pid) and time.monotonic() < deadline:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                try:
                    conn.connect(str(folder / "daemon" / "socket"))
                    conn.sendall(json.dumps({"argv": ["index"], "cwd": "/", "env": {}, "package": "/another/repomem",
                                             "terminals": [False, False]}).encode() + b"\n")
                    conn.recv(64)
                except OSError:
                    pass  # it is exiting
            time.sleep(0.3)
        assert not _alive(pid)
        assert "idle for 3 s: exiting" in (folder / "daemon" / "log").read_text()
    finally:
        repomem("daemon", "stop", env=_environment(folder, True))
        shutil.rmtree(folder, ignore_errors=True)
