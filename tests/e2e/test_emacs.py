"""repomem in the real Emacs with eglot: lsp/emacs/repomem.el loaded into `emacs --batch -Q`,
driven by tests/e2e/emacs_driver.el on a copy of examples/shop, with the embedded model.

One Emacs session serves the whole module: the driver runs every check in order and prints one
`CHECK <name> ok|FAIL <json details>` line per check; the tests below assert them one by one.
The session's results go to $REPOMEM_EDITOR_RESULTS/editor-emacs.json when that is set (the README's
editor matrix)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.repos import copy_example

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "lsp" / "emacs" / "repomem.el"
DRIVER = Path(__file__).with_name("emacs_driver.el")
# The editor matrix's row is written where REPOMEM_EDITOR_RESULTS points (eval/results when the
# matrix is re-recorded): a plain test run leaves the checkout as it was.
RESULTS_DIR = os.environ.get("REPOMEM_EDITOR_RESULTS")
SESSION_LIMIT_S = 300  # the whole Emacs session; about 60 s on a quiet 2-core machine
GONE_WITHIN_S = 15


def unavailable(reason: str) -> None:
    """Skip, except in CI, where the editor is installed on purpose and must run."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: the Emacs tests must run)")
    pytest.skip(reason)


# -- processes ---------------------------------------------------------------------------------------


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(parent pid, start time in clock ticks, state) of a process, or None once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()  # the name in parentheses may hold spaces
    return int(fields[1]), int(fields[19]), fields[0]


def descendants(root: int) -> dict[tuple[int, int], str]:
    """The processes below `root`, as (pid, start time) -> command line; the start time tells a
    process from a later one that reused its pid."""
    parents: dict[int, list[int]] = {}
    starts: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            parents.setdefault(stat[0], []).append(int(entry.name))
            starts[int(entry.name)] = stat[1]
    found: dict[tuple[int, int], str] = {}
    queue = list(parents.get(root, []))
    while queue:
        pid = queue.pop()
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            command = "?"
        found[(pid, starts[pid])] = command.strip()
        queue.extend(parents.get(pid, []))
    return found


def alive(process: tuple[int, int]) -> bool:
    stat = _stat(process[0])
    return stat is not None and stat[1] == process[1] and stat[2] != "Z"


class TreeWatcher(threading.Thread):
    """Every process seen below the editor while it runs: the language server and its model child
    must all be gone soon after the editor quits."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.seen: dict[tuple[int, int], str] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.note(descendants(self.pid))
            self.stop.wait(0.25)

    def note(self, found: dict[tuple[int, int], str]) -> None:
        """Add processes found below the editor, each under its latest command line: one seen
        between its fork and its exec still shows its parent's (VS Code's extension host forks
        itself, then becomes `repomem serve`). One that has exited but is not yet reaped has an
        empty command line: the one read while it ran is kept (the server now exits within a
        second of `exit`, so a late look often finds it so)."""
        for process, command in found.items():
            if command or process not in self.seen:
                self.seen[process] = command


# -- the session -------------------------------------------------------------------------------------


@dataclass
class Session:
    workspace: Path
    returncode: int | None
    output: str
    checks: dict[str, tuple[bool, str]] = field(default_factory=dict)
    info: dict[str, object] = field(default_factory=dict)
    seen: dict[tuple[int, int], str] = field(default_factory=dict)
    left: dict[tuple[int, int], str] = field(default_factory=dict)
    gone_after_s: float | None = None  # from Emacs's exit until the last process below it was gone
    wall_s: float = 0.0
    events: Path | None = None  # eglot's protocol log of the session (and .stderr: the server's)

    def check(self, name: str) -> None:
        assert name in self.checks, f"the driver never ran check {name!r}; Emacs said:\n{self.output[-4000:]}"
        ok, details = self.checks[name]
        assert ok, f"{name}: {details}\n(eglot's protocol log: {self.events})"


def parse(lines: list[str], session: Session) -> None:
    for line in lines:
        kind, _, rest = line.partition(" ")
        name, _, value = rest.partition(" ")
        if kind == "CHECK":
            verdict, _, details = value.partition(" ")
            session.checks[name] = (verdict == "ok", json.loads(details) if details else "")
        elif kind == "INFO":
            session.info[name] = json.loads(value)


def find_eglot(emacs: str, env: dict[str, str]) -> Path:
    """eglot's folder as a plain `emacs --batch` finds it (site-start adds Debian's elpa-eglot,
    Emacs 29 has it built in); the session itself runs with -Q and this folder on its load path."""
    probe = subprocess.run([emacs, "--batch", "--eval", '(princ (or (locate-library "eglot") ""))'],
                           env=env, capture_output=True, text=True, timeout=60)
    if not probe.stdout.strip():
        unavailable("eglot not installed: apt-get install elpa-eglot (or Emacs 29+)")
    eglot = Path(probe.stdout.strip()).parent
    version = subprocess.run([emacs, "--batch", "-Q", "-L", str(eglot), "-l", str(CONFIG), "--eval",
                              "(princ (or (repomem--eglot-version) \"\"))"],
                             env=env, capture_output=True, text=True, timeout=60)
    if "needs eglot" in version.stderr:
        unavailable(f"eglot too old for lsp/emacs/repomem.el: {version.stderr.strip()}")
    return eglot


def record(session: Session) -> None:
    """The editor matrix's row: versions, per-check results, first-answer seconds."""
    if not RESULTS_DIR:
        return
    (Path(RESULTS_DIR) / "editor-emacs.json").write_text(json.dumps({
        "editor": "emacs",
        "emacs_version": session.info.get("emacs_version"),
        "eglot_version": session.info.get("eglot_version"),
        "client": "lsp/emacs/repomem.el (eglot, completion-at-point)",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "recorded": time.strftime("%Y-%m-%d"),
        "checks": {name: {"ok": ok, "details": details[:400]} for name, (ok, details) in session.checks.items()},
        "ready_s": session.info.get("ready_s"),
        "first_answer_s": session.info.get("first_answer_s"),
        "slowest_request_s": session.info.get("slowest_request_s"),
        "session_wall_s": round(session.wall_s, 1),
        "processes_left": sorted(session.left.values()),
        "processes_gone_after_exit_s": session.gone_after_s,
    }, indent=2) + "\n")


@dataclass(frozen=True)
class Emacs:
    binary: str
    eglot: Path  # eglot's folder, put on the load path of `emacs -Q`
    env: dict[str, str]
    base: Path  # this module's temporary folder

    def command(self, *arguments: str) -> list[str]:
        return [self.binary, "--batch", "-Q", "-L", str(self.eglot), *arguments]


@pytest.fixture(scope="module")
def emacs(tmp_path_factory) -> Emacs:
    binary = shutil.which("emacs")
    if binary is None:
        unavailable("emacs not installed: apt-get install emacs-nox elpa-eglot")
    base = tmp_path_factory.mktemp("emacs")
    home = base / "home"
    home.mkdir()
    # A private HOME and XDG folders: no user configuration leaks in.
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_DATA_HOME": str(home / ".local/share"),
           "XDG_STATE_HOME": str(home / ".local/state")}
    env.pop("REPOMEM_CONFIG", None)
    return Emacs(binary, find_eglot(binary, env), env, base)


@pytest.fixture(scope="module")
def session(emacs: Emacs, model_path) -> Iterator[Session]:
    base = emacs.base
    workspace = copy_example(base / "shop")
    results = base / "results.txt"
    # The model comes from the cache the model_path fixture filled (<cache>/models/<file>).
    env = {**emacs.env, "REPOMEM_CACHE": str(Path(model_path).parent.parent), "REPOMEM_TEST_PYTHON": sys.executable,
           "REPOMEM_TEST_WORKSPACE": str(workspace), "REPOMEM_TEST_RESULTS": str(results),
           "REPOMEM_TEST_EVENTS": str(base / "events.txt")}

    started = time.monotonic()
    process = subprocess.Popen(
        emacs.command("-l", str(CONFIG), "-l", str(DRIVER)),
        cwd=workspace, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )
    watcher = TreeWatcher(process.pid)
    watcher.start()
    try:
        output, _ = process.communicate(timeout=SESSION_LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        output += f"\n[test] Emacs killed after {SESSION_LIMIT_S} s"
    watcher.stop.set()
    watcher.join()
    lines = results.read_text().splitlines() if results.exists() else []
    result = Session(workspace, process.returncode, output, seen=dict(watcher.seen), events=base / "events.txt")
    parse(lines, result)

    # Quitting Emacs must take the server and its model child with it. (Emacs 28's jsonrpc-shutdown
    # kills the server with SIGKILL right after eglot sends `exit`: the model child has to notice
    # on its own.)
    exited = time.monotonic()
    deadline = exited + GONE_WITHIN_S
    while time.monotonic() < deadline and any(alive(p) for p in result.seen):
        time.sleep(0.1)
    result.left = {p: command for p, command in result.seen.items() if alive(p)}
    if not result.left:
        result.gone_after_s = round(time.monotonic() - exited, 1)
    result.wall_s = time.monotonic() - started
    if result.checks:
        record(result)
    try:
        yield result
    finally:
        for pid, start in result.seen:
            if alive((pid, start)):
                os.kill(pid, signal.SIGKILL)


# -- the checks, in the driver's order ---------------------------------------------------------------


def test_attaches_and_is_ready(session):
    """eglot starts `repomem serve` for shop/report.py, the whole example is the project, and the
    server reports `repomem: ready`."""
    session.check("attach")


def test_settings_reach_the_server(session):
    """eglot's workspace/didChangeConfiguration carries repomem-settings (an empty object would
    put the server back on its defaults)."""
    session.check("settings")


def test_completes_the_unfinished_line(session):
    """completion-at-point at the end of `    return ` inserts the model's completion."""
    session.check("complete_line")
    assert isinstance(session.info.get("first_answer_s"), float)


def test_completion_replaces_the_word_before_point(session):
    """At `    return com` the item replaces `com` (no `comcompute_tax`) and eglot does not filter it
    away against the symbol before point."""
    session.check("complete_word")


def test_completion_after_an_emoji_replaces_the_word_before_point(session):
    """At `    label = "🙂"; return com` (the emoji two UTF-16 units, one Emacs character) the item
    replaces `com` and nothing else of the line."""
    session.check("after_emoji")


def test_completion_inside_a_call_is_exactly_the_items_edit(session):
    """At `    return int(amount_cents` the buffer becomes what the item's textEdit says, the start of
    the line untouched (no duplicated fragments)."""
    session.check("complete_in_call")


def test_accepts_are_logged_and_offers_are_not(session):
    """Inserting a completion logs an accept with the item's id (eglot never runs the item's command;
    repomem.el's exit function sends repomem/didAccept); listing candidates logs nothing."""
    session.check("offered_not_inserted")
    log = session.workspace / ".repomem" / "feedback.jsonl"
    events = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    accepts = {event.get("id") for event in events if event.get("event") == "accept"}
    inserted = session.info.get("accepted_ids") or []
    assert inserted, "no completion was inserted, so no accept could be logged"
    assert set(inserted) <= accepts, f"inserted {inserted}, accepts logged: {events}"
    assert session.info.get("offered_id") not in accepts, f"an offered, not inserted completion was logged: {events}"


def test_a_slow_first_request_is_answered_then_completed(session):
    """A request still generating past the server's answer budget (100 ms here; 8 s by default,
    below eglot's 10 s) gets an empty incomplete list, no error; asking again at the same spot
    inserts the completion that went on meanwhile."""
    session.check("slow_first_request")


def test_no_request_times_out(session):
    """No completion request hit jsonrpc's 10 s timeout: the server answers in time (an empty
    list while it is still generating)."""
    session.check("no_timeouts")


def test_explain(session):
    """M-x repomem-explain lists the fragments behind the completion at point."""
    session.check("explain")


def test_quitting_leaves_no_process(session):
    """eglot-shutdown, then quitting Emacs, leaves no language server nor model process."""
    session.check("shutdown")
    assert "DONE" in session.output, session.output[-4000:]
    assert session.returncode == 0, session.output[-4000:]
    assert any("repomem" in command for command in session.seen.values()), session.seen
    assert not session.left, f"still running {GONE_WITHIN_S} s after Emacs quit: {session.left}"


def test_config_byte_compiles_without_warnings(emacs: Emacs):
    """lsp/emacs/repomem.el and the settings file it loads compile cleanly (compiled from a copy: no
    .elc in the repository)."""
    copy = emacs.base / "compile" / CONFIG.name
    copy.parent.mkdir()
    shutil.copy(CONFIG, copy)
    shutil.copy(CONFIG.with_name("repomem-settings.el"), copy.parent)  # loaded from beside it
    compiled = subprocess.run(emacs.command("--eval", "(setq byte-compile-error-on-warn t)",
                                            "-f", "batch-byte-compile", str(copy)),
                              env=emacs.env, capture_output=True, text=True, timeout=120)
    assert compiled.returncode == 0 and copy.with_suffix(".elc").exists(), compiled.stdout + compiled.stderr
    assert "Warning" not in compiled.stderr, compiled.stderr
