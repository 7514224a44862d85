"""repomem in an interactive Emacs: `emacs -nw -Q` in a detached tmux session, typed into as a user
types, with lsp/emacs/repomem.el loaded by a small init file, on a copy of examples/shop.

tests/e2e/test_emacs.py drives eglot from `emacs --batch`, which cannot check what matters most to
someone typing: text typed while a completion request is pending is never overwritten. Emacs 28's
eglot waits for a completion with `jsonrpc-request ... :cancel-on-input t`, a `sit-for` loop that
gives up on the request (and ignores its late answer) as soon as a key arrives; in batch mode
`sit-for` never sees a key. Here the keys come through a terminal, as they do for a user.

The init file only watches (advice that appends to a log file: the completion requests eglot sends,
their answers, the server's messages) and adds one command, `M-x tty-test-dump`, that writes line 9
of the buffer to a file: the tests read Emacs's state without changing how it completes.

The session's results go to $REPOMEM_EDITOR_RESULTS/editor-emacs-tty.json when that is set (the
README's editor matrix)."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.e2e.editors import feedback_events, matrix_check
from tests.e2e.test_emacs import (
    CONFIG,
    GONE_WITHIN_S,
    RESULTS_DIR,
    TreeWatcher,
    _stat,
    alive,
    descendants,
    find_eglot,
    unavailable,
)
from tests.repos import copy_example

pytestmark = pytest.mark.slow

WIDTH, HEIGHT = 120, 40
SESSION = "emacs"  # the tmux session's name, on this module's private tmux socket
# Short prompts keep each model call to a few seconds on 2 cores; 64 new tokens make the first
# request (a cold prompt at a fresh spot) slow enough that the keys typed after it come first.
SETTINGS = "(:maxNewTokens 64 :maxPromptTokens 1024 :debounceMs 10)"
LINE = 9  # shop/report.py's unfinished line, `    return `
FRESH = "    total = "  # a spot the server has no answer for yet
TYPED = " # typed"
EXPECTED = "    return compute_tax(amount_cents, tax_class)"
READY_WITHIN_S = 240  # the first start builds the index and loads the model: minutes under load
ANSWER_WITHIN_S = 60  # eglot's own limit is 10 s; the server answers (maybe pending) before that
COMPLETE_WITHIN_S = 120  # asking again while the answer is pending
CHECKS = ("ready", "typing_while_pending", "complete_line", "accept_logged", "quit")

INIT_EL = """\
;;; init.el --- a user's set-up for tests/e2e/test_emacs_tty.py  -*- lexical-binding: t; -*-
(require 'json)
;; Debian's Emacs 28 compiles the libraries it loads to native code in background Emacs processes
;; the first time (a fresh HOME: every run); on 2 cores that steals the CPU from the model.
(setq native-comp-deferred-compilation nil
      native-comp-jit-compilation nil)
(setq inhibit-startup-screen t
      make-backup-files nil
      auto-save-default nil
      create-lockfiles nil
      eglot-connect-timeout 240)
(setq repomem-server-command (list {python} "-m" "repomem" "serve")
      repomem-settings '{settings})
(load {config} nil t)

;; Watching only: the test reads these lines; nothing below changes what eglot does.
(defvar tty-log-file {log})
(defvar tty-dump-file {dump})
(defvar tty-completion-ids nil "Ids of the completion requests eglot sent.")

(defun tty-log (kind value)
  "Append \\"<time> KIND <VALUE as JSON>\\" to the log."
  (let ((coding-system-for-write 'utf-8))
    (write-region (format "%.3f %s %s\\n" (float-time) kind (json-encode value))
                  nil tty-log-file 'append 'silent)))

(defun tty-spy-send (_connection &rest message)
  (when (member (format "%s" (plist-get message :method))
                '(":textDocument/completion" "textDocument/completion"))
    (let ((position (plist-get (plist-get message :params) :position)))
      (push (plist-get message :id) tty-completion-ids)
      (tty-log "request" (list :id (plist-get message :id) :line (plist-get position :line)
                               :character (plist-get position :character))))))

(defun tty-spy-receive (_connection message)
  (let ((id (plist-get message :id)))
    (when (and id (not (plist-get message :method)) (memql id tty-completion-ids))
      (let* ((result (plist-get message :result))
             (items (if (vectorp result) result (plist-get result :items)))
             (item (and (> (length items) 0) (elt items 0))))
        (tty-log "reply" (list :id id :items (length items)
                               :pending (if (plist-get (plist-get (plist-get result :itemDefaults) :data)
                                                       :pending)
                                            t :json-false)
                               :text (plist-get item :insertText)
                               :itemId (plist-get (plist-get item :data) :id)
                               :error (format "%s" (or (plist-get message :error) ""))))))))

(defun tty-spy-request (request connection method params &rest args)
  "Whether each completion request ended with an answer or was given up on for input."
  (if (not (eq method :textDocument/completion))
      (apply request connection method params args)
    (condition-case err
        (let ((value (apply request connection method params args)))
          (tty-log "returned" (if value "answer" "cancelled"))
          value)
      (error (tty-log "returned" (format "error %S" err))
             (signal (car err) (cdr err))))))

(defun tty-spy-notification (_server method &rest params)
  (when (memq method '(window/logMessage window/showMessage))
    (tty-log "message" (list :method (symbol-name method) :type (plist-get params :type)
                             :text (format "%s" (plist-get params :message))))))

(with-eval-after-load 'eglot
  (advice-add 'jsonrpc-connection-send :before #'tty-spy-send)
  (advice-add 'jsonrpc-connection-receive :before #'tty-spy-receive)
  (advice-add 'jsonrpc-request :around #'tty-spy-request)
  (advice-add 'eglot-handle-notification :before #'tty-spy-notification))

(defun tty-test-dump ()
  "Write line {line} of the current buffer and what the test checks to `tty-dump-file'.
Written whole, then renamed: a dump file that exists is complete."
  (interactive)
  (let ((state (list :line (save-excursion
                             (goto-char (point-min))
                             (forward-line {line_index})
                             (buffer-substring-no-properties (point) (line-end-position)))
                     :buffer (buffer-name)
                     :managed (if (bound-and-true-p eglot--managed-mode) t :json-false)
                     :emacs emacs-version
                     :eglot (or (repomem--eglot-version) "")
                     :messages (with-current-buffer (messages-buffer) (buffer-string))))
        (part (concat tty-dump-file ".part"))
        (coding-system-for-write 'utf-8))
    (write-region (json-encode state) nil part nil 'silent)
    (rename-file part tty-dump-file t)))
"""


def elisp_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class Event:
    at: float  # Emacs's float-time
    kind: str  # request, reply, returned, message
    value: Any  # the JSON Emacs wrote


T = TypeVar("T")


@dataclass
class Tty:
    tmux: list[str]  # tmux with this module's private socket and configuration
    env: dict[str, str]
    workspace: Path
    log: Path
    dump_file: Path
    started: float = field(default_factory=time.monotonic)
    pid: int = 0  # Emacs, the tmux pane's process
    emacs_start: int = 0  # its start time (tells it from a later process with its pid)
    watcher: TreeWatcher | None = None
    emacs_version: str = ""
    eglot_version: str = ""
    results: dict[str, dict] = field(default_factory=dict)
    info: dict[str, object] = field(default_factory=dict)

    # -- the terminal --

    def run(self, *args: str) -> str:
        result = subprocess.run([*self.tmux, *args], env=self.env, capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, f"tmux {args}: {result.stderr}"
        return result.stdout

    def keys(self, *keys: str) -> None:
        """tmux key names (C-x, M-g, Enter, ...)."""
        self.run("send-keys", "-t", SESSION, *keys)

    def type(self, text: str) -> None:
        """Literal text, as typed."""
        self.run("send-keys", "-t", SESSION, "-l", text)

    def screen(self) -> str:
        try:
            return self.run("capture-pane", "-p", "-t", SESSION)
        except (AssertionError, subprocess.TimeoutExpired) as error:
            return f"(no screen: {error})"

    def emacs_alive(self) -> bool:
        return alive((self.pid, self.emacs_start))

    def wait(self, predicate: Callable[[], T], timeout_s: float, what: str) -> T:
        value = self.waited(predicate, timeout_s, what)
        if not value:
            pytest.fail(f"no {what} within {timeout_s:.0f} s; screen:\n{self.screen()}\nlog:\n{self.log_text()}")
        return value

    def waited(self, predicate: Callable[[], T], timeout_s: float, what: str) -> T:
        """`predicate`'s first true value within `timeout_s`, else its last (false) one; fails only
        if Emacs exits meanwhile."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = predicate()
            if value or time.monotonic() > deadline:
                return value
            if not self.emacs_alive():
                pytest.fail(f"Emacs exited while waiting for {what}; log:\n{self.log_text()}")
            time.sleep(0.05)

    # -- what Emacs tells --

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def events(self, kind: str | None = None) -> list[Event]:
        found = []
        # Emacs may be halfway through appending a line: only lines that ended count.
        for line in self.log_text().split("\n")[:-1]:
            at, name, value = line.split(" ", 2)
            if kind is None or name == kind:
                found.append(Event(float(at), name, json.loads(value)))
        return found

    def dump(self) -> dict:
        """Emacs's view of line 9 (and its *Messages*), through M-x tty-test-dump.
        With lsp-mode, just after `repomem: ready`, the typed name has twice missed M-x's prompt:
        once in CI Emacs said "'' is not a valid command name", once here the prompt stayed open,
        empty, under lsp-mode's message, for 20 s. After either, the prompt is quit (C-g) and the
        command typed again, once; the screen of the miss is kept in the session's results
        (`dump_misses`)."""
        not_a_command = "is not a valid command name"
        for attempt in range(2):
            self.dump_file.unlink(missing_ok=True)
            self.keys("M-x")
            self.type("tty-test-dump")
            self.keys("Enter")
            if attempt or self.waited(lambda: self.dump_file.exists() or not_a_command in self.screen(), 20,
                                      "dump from M-x tty-test-dump") and self.dump_file.exists():
                break
            misses = self.info.setdefault("dump_misses", [])
            assert isinstance(misses, list)
            misses.append({"screen": self.screen()[-2000:]})
            self.keys("C-g", "C-g")  # out of a prompt the name never reached
        self.wait(self.dump_file.exists, 20, "dump from M-x tty-test-dump")
        return json.loads(self.dump_file.read_text())

    def set_line(self, text: str, verify: bool = True) -> None:
        """Line 9 becomes `text`, point at its end: M-g g 9 RET, C-k, then the text typed; then
        read back (`verify`; a check that needs its request at once checks the request's position).
        Once in CI (one run of many) none of these keys reached the buffer and the check after it
        asked about the old line: the keys are typed again then, once, and the screen of the miss
        is kept in the session's results (`set_line_misses`)."""
        for _attempt in range(2):
            self.keys("M-g", "g")
            self.type(str(LINE))
            self.keys("Enter", "C-a", "C-k")
            self.type(text)
            if not verify:
                return
            state = self.dump()
            if state["line"] == text:
                return
            misses = self.info.setdefault("set_line_misses", [])
            assert isinstance(misses, list)
            misses.append({"wanted": text, "line": state["line"], "buffer": state["buffer"],
                           "screen": self.screen()[-2000:], "messages": state["messages"][-1000:]})
        pytest.fail(f"line {LINE} is {state['line']!r}, not {text!r}, after typing it twice; "
                    f"screen:\n{self.screen()}")

    def ask(self) -> dict:
        """C-M-i (completion-at-point); the completion request it sent, once eglot sent it."""
        asked = len(self.events("request"))
        self.keys("C-M-i")
        return self.wait(lambda: (requests := self.events("request")) and len(requests) > asked
                         and requests[asked].value, 10, "completion request from C-M-i")

    def reply(self, request_id: int) -> Event | None:
        return next((e for e in self.events("reply") if e.value["id"] == request_id), None)

    def answer(self, request: dict, what: str) -> Event:
        """The server's answer to `request`, once Emacs read it."""
        return self.wait(lambda: self.reply(request["id"]), ANSWER_WITHIN_S, what)

    def feedback(self) -> list[dict]:
        return feedback_events(self.workspace)


def check(tty: Tty, name: str):
    """One row of the editor matrix (tests/e2e/editors.py)."""
    return matrix_check(tty.results, name)


def record(tty: Tty) -> None:
    if not RESULTS_DIR:
        return
    checks = {name: tty.results.get(name, {"ok": None, "details": "not run"}) for name in CHECKS}
    (Path(RESULTS_DIR) / "editor-emacs-tty.json").write_text(json.dumps({
        "editor": "emacs (terminal)",
        "emacs_version": tty.emacs_version,
        "eglot_version": tty.eglot_version,
        "client": "lsp/emacs/repomem.el in `emacs -nw` under tmux (eglot, C-M-i typed as keys)",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "recorded": time.strftime("%Y-%m-%d"),
        "settings": SETTINGS,
        "checks": checks,
        **tty.info,
        "session_wall_s": round(time.monotonic() - tty.started, 1),
    }, indent=2) + "\n")


def private_environment(home: Path) -> dict[str, str]:
    """The caller's environment with a private HOME and XDG folders under `home` (no user
    configuration leaks in), no tmux or Emacs of the caller's reachable, and the pane's TERM."""
    home.mkdir()
    env = {key: value for key, value in os.environ.items()
           if key not in {"TMUX", "TMUX_PANE", "EMACSLOADPATH", "EMACS_SERVER_FILE", "REPOMEM_CONFIG"}}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"),
               XDG_DATA_HOME=str(home / ".local/share"), XDG_STATE_HOME=str(home / ".local/state"),
               TERM="tmux-256color")
    return env


@contextlib.contextmanager
def emacs_in_tmux(base: Path, env: dict[str, str], workspace: Path, log: Path, dump_file: Path,
                  emacs: list[str], record: Callable[[Tty], None]) -> Iterator[Tty]:
    """`emacs` (the command) in a detached tmux session on a private socket in `base`, started in
    `workspace`; on the way out the session's results are recorded and nothing it ran is left."""
    tmux_conf = base / "tmux.conf"
    # tmux's own terminal type, as tmux recommends: Emacs's term/tmux.el sends no Device Attributes
    # query (term/xterm.el does; an answer later than its 0.2 s wait, on a loaded machine, was read
    # as typed keys and ate the keys typed next: "84;0;0c" on the screen, a whole `M-g g 9 RET C-k`
    # lost in CI).
    tmux_conf.write_text('set -g default-terminal "tmux-256color"\n')
    # The socket in the module's temporary folder: no other tmux is reached, none is left behind.
    session = Tty(tmux=["tmux", "-S", str(base / "tmux.sock"), "-f", str(tmux_conf)], env=env,
                  workspace=workspace, log=log, dump_file=dump_file)
    # Several arguments: tmux runs Emacs itself (no shell in between), so the pane's pid is Emacs's.
    session.run("new-session", "-d", "-s", SESSION, "-x", str(WIDTH), "-y", str(HEIGHT), "-c", str(workspace),
                *emacs)
    try:
        session.pid = int(session.run("display-message", "-p", "-t", SESSION, "#{pane_pid}").strip())
        stat = _stat(session.pid)
        assert stat is not None, "Emacs exited at once"
        session.emacs_start = stat[1]
        session.watcher = TreeWatcher(session.pid)
        session.watcher.start()
        yield session
    finally:
        record(session)
        if session.watcher is not None:
            session.watcher.stop.set()
            session.watcher.join()
        seen = dict(session.watcher.seen) if session.watcher else {}
        subprocess.run([*session.tmux, "kill-server"], env=env, capture_output=True, timeout=30)
        # Whatever ran under Emacs: tmux's end takes Emacs; its children get a little while to follow.
        deadline = time.monotonic() + 10
        while any(alive(process) for process in seen) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid, start in seen:
            if alive((pid, start)):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def tty(tmp_path_factory, request) -> Iterator[Tty]:
    binary = shutil.which("emacs")
    if binary is None:
        unavailable("emacs not installed: apt-get install emacs-nox elpa-eglot")
    if shutil.which("tmux") is None:
        unavailable("tmux not installed: apt-get install tmux")
    base = tmp_path_factory.mktemp("emacs-tty")
    env = private_environment(base / "home")
    eglot = find_eglot(binary, env)
    model_path = request.getfixturevalue("model_path")  # downloaded once, only when Emacs is there
    env["REPOMEM_CACHE"] = str(Path(model_path).parent.parent)  # <cache>/models/<file>

    workspace = copy_example(base / "shop")
    log, dump_file, init = base / "events.log", base / "dump.json", base / "init.el"
    init.write_text(INIT_EL.format(python=elisp_string(sys.executable), settings=SETTINGS,
                                   config=elisp_string(str(CONFIG)), log=elisp_string(str(log)),
                                   dump=elisp_string(str(dump_file)), line=LINE, line_index=LINE - 1))
    with emacs_in_tmux(base, env, workspace, log, dump_file,
                       [binary, "-nw", "-Q", "-L", str(eglot), "-l", str(init), "shop/report.py"], record) as session:
        yield session


# -- the checks, in order: each builds on the session's state ----------------------------------------


def test_ready(tty: Tty):
    """`emacs -nw shop/report.py` starts repomem through eglot, which reports `repomem: ready`."""
    with check(tty, "ready") as result:
        def ready() -> bool:
            messages = tty.events("message")
            failures = [m.value["text"] for m in messages if m.value["type"] == 1]
            if failures:
                pytest.fail(f"the server reported a failure: {failures}")
            return any("repomem: ready" in m.value["text"] for m in messages)

        tty.wait(ready, READY_WITHIN_S, '"repomem: ready" from the server')
        tty.info["ready_s"] = round(time.monotonic() - tty.started, 1)
        state = tty.dump()
        tty.emacs_version, tty.eglot_version = state["emacs"], state["eglot"]
        assert state["buffer"] == "report.py" and state["managed"] is True, state
        assert state["line"] == "    return ", state
        servers = [command for command in descendants(tty.pid).values() if "repomem" in command and "serve" in command]
        assert servers, f"no `repomem serve` below Emacs: {descendants(tty.pid)}"
        result["details"] = f"ready after {tty.info['ready_s']} s"


def test_typing_while_a_completion_is_pending_is_kept(tty: Tty):
    """C-M-i at a fresh spot, then keys typed at once: eglot gives the request up for the input, the
    server's late answer inserts nothing, and every typed character is in the buffer."""
    with check(tty, "typing_while_pending") as result:
        # Read back before asking (keys that missed the buffer are typed again): once, under a full
        # run's load, `M-g g 9` missed and the line typed went to line 2, and every later check
        # failed on the buffer it left. The server still has no answer for this spot when asked.
        tty.set_line(FRESH)
        request = tty.ask()
        tty.type(TYPED)
        assert (request["line"], request["character"]) == (LINE - 1, len(FRESH)), request
        # The server answers every request: dropped (the document changed), pending after its
        # answer budget, or (wrongly) a completion. Wait for that answer, whatever it is.
        reply = tty.answer(request, "the server's answer to the request")
        order = [e.kind for e in tty.events() if e.kind in ("returned", "reply")]
        time.sleep(1)  # the answer was read; give a wrongly applied one time to reach the screen
        state = tty.dump()
        details = (f"line {LINE} {state['line']!r}; eglot's request gave up: {order[:1]}; the server's late "
                   f"answer ({reply.value['items']} items, pending {reply.value['pending']}, "
                   f"text {reply.value['text']!r})")
        tty.info["pending_case_answer"] = reply.value
        assert state["line"] == FRESH + TYPED, details
        # The premise: the request was pending when the keys came (cancelled, answered after).
        assert order[:2] == ["returned", "reply"], f"{details}; events {tty.log_text()}"
        assert tty.events("returned")[0].value == "cancelled", tty.log_text()
        assert "error in process filter" not in state["messages"], state["messages"]
        result["details"] = details


def test_completion_at_point_completes_the_line(tty: Tty):
    """C-M-i at the end of `    return ` inserts the model's completion. An answer that says
    "pending" (the model still busy past the server's 8 s budget) is asked again, as a user would:
    here the model may first finish the prompt of the request given up on above (llama.cpp cannot
    stop a prompt's evaluation halfway), tens of seconds on a loaded 2-core machine."""
    with check(tty, "complete_line") as result:
        tty.set_line("    return ")
        started = time.monotonic()
        replies, asked = [], []
        while not replies or (replies[-1]["pending"] and time.monotonic() < started + COMPLETE_WITHIN_S):
            request = tty.ask()
            asked.append((request["line"], request["character"]))
            reply = tty.answer(request, "the completion's answer")
            replies.append(reply.value)
        tty.info["first_answer_s"] = round(time.monotonic() - started, 1)
        tty.info["complete_line_answers"] = replies
        # eglot's capf returns once the answer was read; completion-at-point then inserts it.
        tty.wait(lambda: sum(e.value == "answer" for e in tty.events("returned")) >= len(replies), 10,
                 "completion-at-point to take the answer")
        state = tty.dump()
        details = f"line {LINE} {state['line']!r} after {tty.info['first_answer_s']} s; answers {replies}"
        assert state["line"] == EXPECTED, f"{details}; asked at {asked}"
        tty.info["accepted_id"] = replies[-1]["itemId"]
        result["details"] = details


def test_inserting_it_logs_an_accept(tty: Tty):
    """repomem.el reports the inserted completion (repomem/didAccept) to .repomem/feedback.jsonl."""
    with check(tty, "accept_logged") as result:
        accepted = tty.info.get("accepted_id")
        assert accepted, "no completion was inserted"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not any(
                e.get("event") == "accept" and e.get("id") == accepted for e in tty.feedback()):
            time.sleep(0.1)
        events = tty.feedback()
        assert any(e.get("event") == "accept" and e.get("id") == accepted for e in events), events
        result["details"] = f"accept {accepted} logged"


def test_quitting_leaves_no_process(tty: Tty):
    """C-x C-c (no save, yes: exit with a modified buffer) quits Emacs, and the language server and
    its model process are gone soon after."""
    with check(tty, "quit") as result:
        assert tty.watcher is not None
        tty.watcher.note(descendants(tty.pid))
        seen = dict(tty.watcher.seen)
        assert any("repomem" in command for command in seen.values()), seen
        tty.keys("C-x", "C-c")
        answered: set[str] = set()
        deadline = time.monotonic() + 30
        while tty.emacs_alive():
            if time.monotonic() > deadline:
                pytest.fail(f"Emacs still running 30 s after C-x C-c; screen:\n{tty.screen()}")
            # The echo area, below the mode line (a long prompt wraps onto two lines).
            bottom = " ".join(line.strip() for line in tty.screen().splitlines()[-3:])
            # Each prompt answered once: the screen may still show it a moment after the answer.
            if "Save file" in bottom and "save" not in answered:
                answered.add("save")
                tty.keys("n")  # leave the example as it was
            for question in ("Modified buffers exist", "Active processes exist"):
                if question in bottom and "(yes or no)" in bottom and question not in answered:
                    answered.add(question)
                    tty.type("yes")
                    tty.keys("Enter")
            time.sleep(0.1)
        exited = time.monotonic()
        tty.watcher.stop.set()
        tty.watcher.join()
        seen.update(tty.watcher.seen)
        while time.monotonic() < exited + GONE_WITHIN_S and any(alive(p) for p in seen):
            time.sleep(0.1)
        left = {p: command for p, command in seen.items() if alive(p)}
        assert not left, f"still running {GONE_WITHIN_S} s after Emacs quit: {left}"
        tty.info["processes_gone_after_exit_s"] = round(time.monotonic() - exited, 1)
        tty.info["processes_seen"] = sorted(seen.values())
        result["details"] = (f"prompts answered: {sorted(answered)}; {len(seen)} processes gone "
                             f"{tty.info['processes_gone_after_exit_s']} s after exit")
