"""VS Code end to end: the shipped extension (`lsp/vscode/`, packaged by its `build.sh`) installed
into code-server (VS Code's workbench served to a browser), driven in Debian's Chromium, headless,
through chromedriver (Selenium), as a user types.

One code-server and one browser run for the whole module, with their own HOME, user-data and
extensions folders; the tests run in file order and build on each other's state. The document is
read back from disk after Ctrl+S (the rendered lines would include the ghost text); the server's
messages are read from the extension's output channel, which VS Code writes to its log folder.

Install (`.ci/run` does all of it): `apt-get install chromium chromium-driver ripgrep libkrb5-dev`,
`sh scripts/install_code_server.sh` (code-server from npm), the test extra (Selenium). Without
them the module skips, saying which is missing; with CI set it fails.

At the end the module prints a one-line summary and, when REPOMEM_EDITOR_RESULTS is set, writes
the editor matrix's row (editor-vscode.json) and a screenshot of the ghost text there.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from repomem.cache import cache_root
from tests.e2e.editors import (
    feedback_events,
    matrix_check,
    matrix_rows,
    poll,
    print_summary,
    wait_for,
    write_matrix_row,
)
from tests.e2e.test_emacs import GONE_WITHIN_S, RESULTS_DIR, TreeWatcher, alive, unavailable
from tests.repos import copy_example

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "lsp" / "vscode" / "build.sh"
EXPECTED = "compute_tax(amount_cents, tax_class)"
LINE_9 = "    return "
# Short generations and prompts keep each model call to seconds on 2 cores; topK is not the
# server's default (10), so the explain output's fragment count shows the settings arrived.
SETTINGS = {"repomem.maxNewTokens": 24, "repomem.maxPromptTokens": 1024, "repomem.debounceMs": 10,
            "repomem.topK": 4}
CHECKS = ("ready", "explain", "ghost_text", "word_by_word", "partial_word", "after_emoji", "type_ahead", "quit")
# A name typed after a character beyond the BMP: two UTF-16 units, as VS Code counts positions.
EMOJI_LINE = '    label = "\U0001F642"; return '

ANSWER_S = 180  # a first answer: the index, the model's start and a 1,024-token prompt on a busy machine
T = TypeVar("T")


def find_tools() -> dict[str, str]:
    """code-server, Chromium, chromidriver and npm, or a skip naming what is missing."""
    tools = {"code-server": os.environ.get("REPOMEM_CODE_SERVER") or shutil.which("code-server"),
             "chromium": shutil.which("chromium"), "chromedriver": shutil.which("chromedriver"),
             "npm": shutil.which("npm")}
    missing = [name for name, path in tools.items() if not path]
    if importlib.util.find_spec("selenium") is None:
        missing.append("selenium (the test extra)")
    if missing:
        unavailable(f"VS Code test needs {', '.join(missing)}: apt-get install chromium chromium-driver "
                    "ripgrep libkrb5-dev, sh scripts/install_code_server.sh, pip install -e '.[test]'")
    return {name: str(path) for name, path in tools.items()}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class VSCode:
    driver: Any  # selenium.webdriver.Chrome
    server: subprocess.Popen
    url: str
    workspace: Path
    data: Path  # code-server's user-data folder: settings, logs
    watcher: TreeWatcher
    version: str
    results: dict[str, dict] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    ready_s: float | None = None
    first_ghost_s: float | None = None
    gone_after_s: float | None = None
    accepted: int = 0

    # -- keys ----------------------------------------------------------------------------------------

    def keys(self, *keys: str) -> None:
        from selenium.webdriver.common.action_chains import ActionChains

        ActionChains(self.driver).send_keys(*keys).perform()

    def chord(self, *modifiers: str, key: str) -> None:
        from selenium.webdriver.common.action_chains import ActionChains

        chain = ActionChains(self.driver)
        for modifier in modifiers:
            chain.key_down(modifier)
        chain.send_keys(key)
        for modifier in reversed(modifiers):
            chain.key_up(modifier)
        chain.perform()

    def command(self, title: str) -> None:
        """A command by its title, through the command palette (Ctrl+Shift+P)."""
        from selenium.webdriver.common.keys import Keys

        self.chord(Keys.CONTROL, Keys.SHIFT, key="p")
        self.wait(lambda: self.driver.find_elements("css selector", ".quick-input-widget input"), 10, "command palette")
        time.sleep(0.3)
        self.keys(title)
        time.sleep(0.5)
        self.keys(Keys.ENTER)

    def open_file(self, name: str, attempts: int = 4, query: str | None = None) -> None:
        """Quick Open (Ctrl+P), the file's name (or `query`: an absolute path picks one of several
        files of that name), Enter, until the file's tab is the active one. On a slow host the
        workbench once let the first keys go by (CI: no file opened, so the extension never
        activated and every later check failed); a user would press Ctrl+P again."""
        from selenium.webdriver.common.keys import Keys

        def shown(selector: str) -> bool:
            return any(name in (element.get_attribute("aria-label") or element.text)
                       for element in self.driver.find_elements("css selector", selector))

        for _ in range(attempts):
            self.chord(Keys.CONTROL, key="p")
            if poll(lambda: self.driver.find_elements("css selector", ".quick-input-widget input"), 10):
                time.sleep(0.3)
                self.keys(query or name)
                poll(lambda: shown(".quick-input-list .monaco-list-row"), 10)
                self.keys(Keys.ENTER)
                if poll(lambda: shown(".tabs-container .tab.active"), 15):
                    return
            self.keys(Keys.ESCAPE)
        pytest.fail(f"Quick Open did not open {name} in {attempts} tries")

    def go_to_line(self, line: int) -> None:
        """The cursor at the start of `line` (1-based), Ctrl+G as a user does."""
        from selenium.webdriver.common.keys import Keys

        self.chord(Keys.CONTROL, key="g")
        time.sleep(0.3)
        self.keys(str(line), Keys.ENTER)
        time.sleep(0.3)

    def replace_line(self, line: int, text: str) -> None:
        """Line `line` replaced by `text`, typed, the cursor after it (typing asks for a completion)."""
        from selenium.webdriver.common.keys import Keys

        self.go_to_line(line)
        self.chord(Keys.SHIFT, key=Keys.END)
        self.keys(text)

    # -- what the user sees --------------------------------------------------------------------------

    def ghost_text(self) -> str:
        """The inline suggestion drawn after the cursor (not in the document); the editor draws
        spaces as no-break spaces."""
        drawn = self.driver.execute_script(
            "return Array.from(document.querySelectorAll('.monaco-editor .ghost-text-decoration,"
            " .monaco-editor .ghost-text-decoration-preview')).map(e => e.textContent).join('');")
        return drawn.replace("\u00a0", " ")

    def saved_lines(self, path: str | Path = "shop/report.py") -> list[str]:
        """Ctrl+S, then the file as written (`path` in the workspace, or absolute)."""
        from selenium.webdriver.common.keys import Keys

        file = self.workspace / path
        before = file.stat().st_mtime_ns
        self.chord(Keys.CONTROL, key="s")
        self.wait(lambda: file.stat().st_mtime_ns != before, 10, "the save")
        time.sleep(0.2)
        return file.read_text(encoding="utf-8").split("\n")

    def log(self, channel: str = "repomem") -> str:
        """An output channel's text, from the files VS Code writes it to."""
        return "".join(path.read_text(errors="replace")
                       for path in sorted(self.data.glob(f"logs/*/exthost*/output_logging_*/*-{channel}.log")))

    def feedback(self) -> list[dict]:
        return feedback_events(self.workspace)

    def accepts(self) -> list[dict]:
        return [event for event in self.feedback() if event.get("event") == "accept"]

    def notifications(self, method: str) -> list[dict]:
        """The params of each `method` notification sent to the server, from the verbose trace."""
        return self._sent(f"Sending notification '{method}'")

    def requests_sent(self, method: str) -> list[dict]:
        """The params of each `method` request sent to the server, from the verbose trace."""
        return self._sent(f"Sending request '{method} - (")

    def _sent(self, heading: str) -> list[dict]:
        found = []
        for entry in self.log().split("[Trace - ")[1:]:
            if heading in entry and "Params: " in entry:
                with contextlib.suppress(ValueError):
                    found.append(json.JSONDecoder().raw_decode(entry.split("Params: ", 1)[1].lstrip())[0])
        return found

    def messages(self) -> str:
        """The notifications' text (toasts and the notification centre)."""
        return self.driver.execute_script(
            "return Array.from(document.querySelectorAll('.notification-list-item-message'))"
            ".map(e => e.textContent).join('\\n');")

    def change_settings(self, **changes: object) -> None:
        """`changes` saved in the remote machine's settings (code-server's data/Machine/settings.json,
        "Remote [Machine]" in its settings editor), where a code-server user puts machine-scoped
        ones such as `repomem.command`. code-server watches that file; a write to data/User's from
        outside the workbench goes unnoticed."""
        file = self.data / "Machine" / "settings.json"
        file.parent.mkdir(exist_ok=True)
        before = json.loads(file.read_text()) if file.exists() else {}
        file.write_text(json.dumps({**before, **changes}, indent=2))

    def wait(self, predicate: Callable[[], T], timeout_s: float, what: str) -> T:
        return wait_for(predicate, timeout_s,
                        lambda: f"no {what} within {timeout_s:.0f} s; the server's log ends:\n{self.log()[-3000:]}")


def check(vscode: VSCode, name: str):
    return matrix_check(vscode.results, name)


def record(vscode: VSCode, pytestconfig) -> None:
    checks = matrix_rows(vscode.results, CHECKS)
    print_summary(pytestconfig, "vscode", vscode.version, checks, first_ghost_s=vscode.first_ghost_s,
                  session_s=time.monotonic() - vscode.started)
    write_matrix_row(RESULTS_DIR, "editor-vscode.json",
                     {"editor": "vscode", "version": vscode.version,
                      "client": "lsp/vscode (vscode-languageclient 9, inline completion), in code-server, "
                                "Chromium headless"},
                     SETTINGS, checks, ready_s=vscode.ready_s, first_ghost_s=vscode.first_ghost_s,
                     session_wall_s=time.monotonic() - vscode.started,
                     processes_gone_after_exit_s=vscode.gone_after_s)


@pytest.fixture(scope="module")
def vscode(tmp_path_factory, request, pytestconfig):
    base = tmp_path_factory.mktemp("vscode")
    with code_server_session(request, base, copy_example(base / "shop")) as session:
        try:
            yield session
        finally:
            record(session, pytestconfig)


@contextlib.contextmanager
def code_server_session(request, base: Path, workspace: Path, opened: Path | None = None) -> Iterator[VSCode]:
    """code-server with the extension built and installed under `base`, opened on `opened` (a
    folder or a .code-workspace file; default `workspace`), and headless Chromium on it."""
    tools = find_tools()
    request.getfixturevalue("model_path")  # downloaded once, only when the editor is there to use it
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    home, data, extensions = base / "home", base / "data", base / "extensions"
    (data / "User").mkdir(parents=True)
    home.mkdir()
    (data / "User" / "settings.json").write_text(json.dumps({
        **SETTINGS,
        "repomem.command": str(Path(sys.executable).with_name("repomem")),
        # Requests and answers in the log, with their params: what a failure shows, and the file
        # events the watched-files check counts.
        "repomem.trace.server": "verbose",
        "workbench.startupEditor": "none", "security.workspace.trust.enabled": False,
        "telemetry.telemetryLevel": "off", "extensions.autoCheckUpdates": False,
        "extensions.autoUpdate": False, "update.mode": "none", "workbench.tips.enabled": False,
        "editor.inlineSuggest.enabled": True, "editor.quickSuggestions": {"other": False},
        "files.autoSave": "off", "git.enabled": False,
    }, indent=2))
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("VSCODE_", "REPOMEM_CONFIG")) and key not in {"TMUX", "TMUX_PANE"}}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local/share"),
               XDG_CACHE_HOME=str(home / ".cache"), REPOMEM_CACHE=str(cache_root()))
    vsix = base / "repomem-vscode.vsix"
    # Built as the user builds it, with their npm cache (the sandboxed HOME below would fetch
    # vscode-languageclient and vsce from the registry again on every run: ~20 s of the module).
    built = subprocess.run(["sh", str(BUILD), str(vsix)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, f"lsp/vscode/build.sh failed:\n{built.stderr[-3000:]}"
    code_server = [tools["code-server"], "--user-data-dir", str(data), "--extensions-dir", str(extensions)]
    installed = subprocess.run([*code_server, "--install-extension", str(vsix)], capture_output=True, text=True,
                               timeout=300, env=env)
    assert installed.returncode == 0 and "successfully installed" in installed.stdout, (installed.stdout
                                                                                       + installed.stderr)
    version = subprocess.run([tools["code-server"], "--version"], capture_output=True, text=True, timeout=60,
                             env=env).stdout.strip().splitlines()[-1]
    port = free_port()
    server_log = open(base / "code-server.log", "w")  # noqa: SIM115 - closed when the module ends
    server = subprocess.Popen([*code_server, "--auth", "none", "--bind-addr", f"127.0.0.1:{port}",
                               "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust",
                               "--disable-getting-started-override", str(opened or workspace)],
                              env=env, stdout=server_log, stderr=subprocess.STDOUT, start_new_session=True)
    watcher = TreeWatcher(server.pid)
    watcher.start()
    options = webdriver.ChromeOptions()
    options.binary_location = tools["chromium"]
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1100,600", f"--user-data-dir={base / 'chromium'}", "--no-first-run"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(tools["chromedriver"]))
    session = VSCode(driver=driver, server=server, url=f"http://127.0.0.1:{port}", workspace=workspace,
                     data=data, watcher=watcher, version=f"code-server {version}")
    try:
        yield session
    finally:
        watcher.stop.set()
        with contextlib.suppress(Exception):  # the quit check may have closed it already
            driver.quit()
        if session.server.poll() is None:
            os.killpg(session.server.pid, signal.SIGKILL)
        for process in session.watcher.seen:
            if alive(process):
                os.kill(process[0], signal.SIGKILL)
        server_log.close()


# -- the checks, in order -------------------------------------------------------------------------------


def test_extension_starts_the_server_and_it_is_ready(vscode):

    with check(vscode, "ready") as result:
        vscode.wait(lambda: _loads(vscode, vscode.url), 60, "code-server answering")
        vscode.wait(lambda: vscode.driver.find_elements("css selector", ".monaco-workbench .part.editor"), 60,
                    "the workbench")
        time.sleep(2)  # the workbench takes keys once its first layout is done
        vscode.open_file("report.py")
        # The extension activates on a Python file, starts `repomem serve`, which indexes and loads the model.
        vscode.wait(lambda: "repomem: ready" in vscode.log(), ANSWER_S, '"repomem: ready" in the output channel')
        vscode.ready_s = time.monotonic() - vscode.started
        servers = [command for command in vscode.watcher.seen.values() if "repomem" in command and "serve" in command]
        assert servers, f"no `repomem serve` below code-server: {vscode.watcher.seen}"
        result["details"] = f"'repomem: ready' after {vscode.ready_s:.1f} s"


def _loads(vscode: VSCode, url: str) -> bool:
    try:
        vscode.driver.get(url)
    except Exception:  # noqa: BLE001 - not listening yet
        return False
    return True


def test_explain_shows_the_fragments_with_the_users_settings(vscode):
    from selenium.webdriver.common.keys import Keys

    with check(vscode, "explain") as result:
        vscode.go_to_line(9)
        vscode.keys(Keys.END)
        vscode.command("repomem: Explain the completion at the cursor")
        text = vscode.wait(lambda: vscode.log("repomem explain"), 60, "the explain output")
        explained = vscode.wait(lambda: _json(vscode.log("repomem explain")), 30, "the whole explain output")
        fragments = explained.get("fragments", [])
        assert len(fragments) == SETTINGS["repomem.topK"], (
            f"{len(fragments)} fragments, not the topK set: the settings did not reach the server\n{text[:2000]}")
        result["details"] = f"output channel lists {len(fragments)} fragments (topK as set)"


def _json(text: str) -> dict | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def test_a_file_created_on_disk_reaches_the_server_once(vscode):
    # The server registers its own watcher ("**/*"); the extension's `synchronize.fileEvents`
    # watcher made a second, so every create, change and delete was sent twice.
    created = vscode.workspace / "shop" / "written_outside.py"
    created.write_text("def written_outside():\n    return 1\n")
    uri = created.as_uri()

    def events() -> list[dict]:
        return [change for params in vscode.notifications("workspace/didChangeWatchedFiles")
                for change in params.get("changes", []) if change.get("uri") == uri]

    vscode.wait(events, 30, f"a watched-file event for {created.name}")
    time.sleep(1)  # the client sends file events in batches, 250 ms apart
    creates = [event for event in events() if event.get("type") == 1]
    assert len(creates) == 1, f"{created.name} reported created {len(creates)} times: {events()}"


def test_ghost_text_shows_the_completion_and_tab_accepts_it(vscode):
    from selenium.webdriver.common.keys import Keys

    with check(vscode, "ghost_text") as result:
        started = time.monotonic()
        vscode.replace_line(9, LINE_9)
        ghost = vscode.wait(vscode.ghost_text, ANSWER_S, "ghost text")
        vscode.first_ghost_s = time.monotonic() - started
        assert ghost.startswith(EXPECTED), ghost
        if RESULTS_DIR:
            vscode.driver.save_screenshot(str(Path(RESULTS_DIR) / "editor-vscode-ghost.png"))
        vscode.keys(Keys.TAB)
        vscode.accepted += 1
        assert vscode.saved_lines()[8] == LINE_9 + EXPECTED
        accepts = vscode.wait(vscode.accepts, 30, "accept logged")
        assert len(accepts) == 1 and EXPECTED in accepts[0].get("completion", ""), accepts
        result["details"] = f"ghost text {ghost!r} after {vscode.first_ghost_s:.1f} s; Tab inserted it, accept logged"


def test_ctrl_right_accepts_the_next_word_and_escape_dismisses_the_rest(vscode):
    from selenium.webdriver.common.keys import Keys

    with check(vscode, "word_by_word") as result:
        vscode.replace_line(9, LINE_9)  # the state answered before: from the server's cache
        vscode.wait(lambda: vscode.ghost_text().startswith(EXPECTED), 60, "ghost text again")
        vscode.chord(Keys.CONTROL, key=Keys.ARROW_RIGHT)
        vscode.wait(lambda: not vscode.ghost_text().startswith("compute_tax"), 10, "one word accepted")
        rest = vscode.ghost_text()
        vscode.keys(Keys.ESCAPE)
        line = vscode.saved_lines()[8]
        assert line.startswith(LINE_9 + "compute_tax") and line != LINE_9 + EXPECTED, line
        assert LINE_9 + rest.strip() != line
        time.sleep(1)
        assert len(vscode.accepts()) == vscode.accepted  # a partial accept and a dismiss log no accept
        result["details"] = f"Ctrl+Right -> {line!r} (ghost left {rest!r}), Escape dismissed it"


def test_a_partly_typed_name_is_completed_once(vscode):
    from selenium.webdriver.common.keys import Keys

    with check(vscode, "partial_word") as result:
        vscode.replace_line(9, LINE_9 + "com")
        ghost = vscode.wait(vscode.ghost_text, ANSWER_S, "ghost text after `return com`")
        vscode.keys(Keys.TAB)
        vscode.accepted += 1
        line = vscode.saved_lines()[8]
        assert line == LINE_9 + EXPECTED, line  # not "comcompute_tax(...)"
        result["details"] = f"'    return com' showed {ghost!r}; Tab -> {line!r}"


def test_a_name_typed_after_an_emoji_is_completed_once(vscode):
    from selenium.webdriver.common.keys import Keys

    with check(vscode, "after_emoji") as result:
        # ChromeDriver types no character beyond the BMP: the line is written to the saved file,
        # which the editor reloads, and `com` typed after it.
        report = vscode.workspace / "shop" / "report.py"
        lines = report.read_text(encoding="utf-8").split("\n")
        lines[8] = EMOJI_LINE
        report.write_text("\n".join(lines), encoding="utf-8")
        vscode.wait(lambda: "\U0001F642" in vscode.driver.execute_script(
            "return document.querySelector('.monaco-editor .view-lines').textContent;"), 30, "the line reloaded")
        vscode.go_to_line(9)
        vscode.keys(Keys.END, "com")
        ghost = vscode.wait(vscode.ghost_text, ANSWER_S, "ghost text after the emoji and `com`")
        vscode.keys(Keys.TAB)
        vscode.accepted += 1
        line = vscode.saved_lines()[8]
        # The model may go on past the call (` * label`): the name replaced `com`, the rest is intact.
        assert line.startswith(EMOJI_LINE + "compute_tax("), line
        result["details"] = f"{EMOJI_LINE + 'com'!r} showed {ghost!r}; Tab -> {line!r}"


def test_typing_on_while_waiting_is_never_overwritten(vscode):
    with check(vscode, "type_ahead") as result:
        # A place no cache knows: the answer needs the model (seconds), the typing is instant.
        vscode.replace_line(9, "    total = ")
        vscode.keys("# typed")
        time.sleep(3)
        line = vscode.saved_lines()[8]
        assert line == "    total = # typed", line
        result["details"] = f"asked, typed on at once: line {line!r}"


def test_a_killed_server_is_started_again(vscode):
    readies = vscode.log().count("repomem: ready")
    servers = [process for process, command in vscode.watcher.seen.items()
               if "serve" in command.split() and alive(process)]
    assert len(servers) == 1, vscode.watcher.seen
    os.kill(servers[0][0], signal.SIGKILL)
    vscode.wait(lambda: vscode.log().count("repomem: ready") > readies, ANSWER_S, "ready again after a kill")
    assert "Server will restart" in vscode.log()


def test_a_missing_server_is_said_and_a_fixed_setting_starts_it_again(vscode):
    from selenium.webdriver.common.keys import Keys

    good = str(Path(sys.executable).with_name("repomem"))
    readies = vscode.log().count("repomem: ready")
    # The executable gone (a wrong path set, repomem uninstalled): the extension restarts with it,
    # the start fails, and its commands say why rather than VS Code's "command not found".
    vscode.change_settings(**{"repomem.command": str(vscode.workspace.parent / "no-such-repomem")})
    vscode.wait(lambda: "couldn't create connection" in vscode.log(), 60, "the failed start in the log")
    vscode.keys(Keys.ESCAPE)
    vscode.command("repomem: Explain the completion at the cursor")
    vscode.wait(lambda: "could not start" in vscode.messages(), 30, "the explain command saying why")
    assert "not found" not in vscode.messages()
    # The setting fixed: a new server starts, no reload needed.
    vscode.change_settings(**{"repomem.command": good})
    vscode.wait(lambda: vscode.log().count("repomem: ready") > readies, ANSWER_S, "ready with the fixed setting")
    # Another setting changed: sent to the running server, under "repomem".
    vscode.change_settings(**{"repomem.topK": 5})
    vscode.wait(lambda: any(params.get("settings", {}).get("repomem", {}).get("topK") == 5
                            for params in vscode.notifications("workspace/didChangeConfiguration")),
                30, "topK = 5 sent to the server")


def test_stopping_code_server_stops_the_server_and_its_model(vscode):
    with check(vscode, "quit") as result:
        seen = dict(vscode.watcher.seen)
        assert any("llama_child" in command for command in seen.values()), seen  # the model's own process
        vscode.driver.quit()
        vscode.server.send_signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        vscode.server.wait(timeout=30)
        while any(alive(process) for process in seen) and time.monotonic() < stopped_at + GONE_WITHIN_S:
            time.sleep(0.1)
        left = {process: command for process, command in seen.items() if alive(process)}
        assert not left, f"still running {GONE_WITHIN_S} s after code-server stopped: {left}"
        vscode.gone_after_s = time.monotonic() - stopped_at
        result["details"] = f"{len(seen)} processes under code-server: gone {vscode.gone_after_s:.1f} s after"


# -- the extension's own logic: node against a stub of the `vscode` module ---------------------------

# A stub of `vscode` and of vscode-languageclient (whose start fails, as it does, when the command
# does not exist), then the user's steps: a missing server, the explain command, the setting fixed,
# the server gone again, the restart command. Prints what each step gave, as JSON.
STUB_HARNESS = r"""
// argv[2]: extension.js; argv[3]: a command that exists
const Module = require("module");
const fs = require("fs");
const [extensionPath, good] = process.argv.slice(2);
const settings = { command: "/nonexistent/repomem" };
const seen = { errors: [], clients: [], commands: new Map(), listeners: [], requests: [] };
const disposable = { dispose() {} };
const uri = (path) => ({ scheme: "file", fsPath: path, path, toString: () => `file://${path}` });
const folder = { uri: uri("/w"), name: "w", index: 0 };
const document = { uri: uri("/w/a.py"), languageId: "python" };  // open in folder /w
const vscode = {
  workspace: {
    workspaceFolders: [folder],
    textDocuments: [document],
    getWorkspaceFolder: (candidate) => (candidate.toString().startsWith("file:///w/") ? folder : undefined),
    getConfiguration: () => ({ inspect: (key) => ({ globalValue: settings[key] }) }),
    onDidChangeConfiguration: (listener) => { seen.listeners.push(listener); return disposable; },
    onDidOpenTextDocument: () => disposable,
    onDidChangeWorkspaceFolders: () => disposable,
    createFileSystemWatcher: () => disposable,
  },
  window: {
    activeTextEditor: { document, selection: { active: { line: 0, character: 0 } } },
    showErrorMessage: async (message) => { seen.errors.push(message); },
    showInformationMessage: async () => undefined,
    createOutputChannel: (name) => ({ name, appendLine() {}, append() {}, clear() {}, show() {}, dispose() {} }),
  },
  commands: { registerCommand: (id, run) => { seen.commands.set(id, run); return disposable; } },
  RelativePattern: class { constructor(base, pattern) { Object.assign(this, { base, pattern }); } },
};
const State = { Stopped: 1, Running: 2, Starting: 3 };
class LanguageClient {
  constructor(id, name, server, options) {
    Object.assign(this, { command: server.command, options, state: State.Stopped });  // Stopped until started
    seen.clients.push(this);
  }
  registerProposedFeatures() {}
  async start() {
    if (!fs.existsSync(this.command)) { this.failed = true; throw new Error(`spawn ${this.command} ENOENT`); }
    this.state = State.Running;
  }
  needsStop() { return this.state !== State.Stopped; }
  isRunning() { return this.state === State.Running; }
  async stop() {
    if (!this.needsStop()) throw new Error("Client is not running and can't be stopped");
    this.state = State.Stopped;
  }
  async dispose() { return this.stop(); }
  async sendRequest(method) {
    if (!this.isRunning()) throw new Error("Client is not running");
    seen.requests.push(method);
    return { fragments: [] };
  }
  async sendNotification() { if (!this.isRunning()) throw new Error("Client is not running"); }
}
const load = Module._load;
Module._load = function (request, ...rest) {
  if (request === "vscode") return vscode;
  if (request === "vscode-languageclient/node") return { LanguageClient, State };
  return load.call(this, request, ...rest);
};
const commandChanged = () => seen.listeners.forEach(
  (listener) => listener({ affectsConfiguration: (section) => "repomem.command".startsWith(section) }));
const settle = () => new Promise((resolve) => setTimeout(resolve, 50));
async function run(id) {
  const command = seen.commands.get(id);
  if (!command) return `command '${id}' not found`;
  try { await command(); return "ran"; } catch (error) { return `failed: ${error.message}`; }
}
(async () => {
  const extension = require(extensionPath);
  const out = {};
  try {
    await extension.activate({ subscriptions: [] });
    out.activate = "ok";
  } catch (error) {
    out.activate = `rejected: ${error.message}`;
  }
  out.explainAfterBadStart = await run("repomem.explainAtCursor");
  out.errorsAfterBadStart = [...seen.errors];
  settings.command = good;
  commandChanged();
  await settle();
  out.runningAfterFix = seen.clients.filter((client) => client.isRunning()).map((client) => client.command);
  out.explainAfterFix = await run("repomem.explainAtCursor");
  out.requests = seen.requests;
  seen.errors.length = 0;
  // the server missing again (uninstalled), then put back: the restart command brings it back
  settings.command = "/nonexistent/repomem";
  commandChanged();
  await settle();
  out.explainAfterSecondBadStart = await run("repomem.explainAtCursor");
  out.errorsAfterSecondBadStart = [...seen.errors];
  settings.command = good;
  out.restart = await run("repomem.restart");
  await settle();
  out.runningAfterRestart = seen.clients.filter((client) => client.isRunning()).map((client) => client.command);
  out.clients = seen.clients.length;
  await extension.deactivate();
  out.runningAfterDeactivate = seen.clients.filter((client) => client.isRunning()).length;
  console.log(JSON.stringify(out, null, 1));
})();
"""


def test_a_failed_start_leaves_the_commands_saying_why_and_a_fixed_setting_restarts(tmp_path):
    """Before, activate() rejected when the server's start failed: VS Code then had no
    `repomem.explainAtCursor` ("command not found") and no settings listener, so only a reload
    brought repomem back once the setting was fixed."""
    node = shutil.which("node")
    if node is None:
        unavailable("node is needed to run the extension against a stub of vscode")
    harness = tmp_path / "harness.js"
    harness.write_text(STUB_HARNESS)
    ran = subprocess.run([node, str(harness), str(ROOT / "lsp" / "vscode" / "extension.js"), node],
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    steps = json.loads(ran.stdout)
    assert steps["activate"] == "ok", steps
    assert steps["explainAfterBadStart"] == "ran", steps
    assert any("could not start" in error and "repomem.command" in error for error in steps["errorsAfterBadStart"])
    assert steps["runningAfterFix"] == [node], steps  # the fixed setting started a server, no reload
    assert steps["explainAfterFix"] == "ran" and steps["requests"] == ["workspace/executeCommand"], steps
    assert any("could not start" in error for error in steps["errorsAfterSecondBadStart"]), steps
    assert steps["restart"] == "ran" and steps["runningAfterRestart"] == [node], steps
    assert steps["runningAfterDeactivate"] == 0, steps


def test_a_file_of_the_second_folder_of_a_multi_root_workspace_gets_ghost_text(tmp_path_factory, request):
    """A workspace of two folders, two copies of the example, opened in a code-server of its own
    (navigating the module's window to it opened a window of no folder after the checks above). One
    server indexed the first folder alone and said each file of the second "outside the workspace
    folder"; each folder has a server of its own now, started when its first file opens. Only the
    second folder's file is opened here, so the accept lands in the second folder's feedback log.
    The second folder's name has glob characters (`[draft]`): its selector once spelled a glob
    from the folder's path, which matched other paths than the folder's own files."""
    from selenium.webdriver.common.keys import Keys

    base = tmp_path_factory.mktemp("vscode-multi-root")
    copy_example(base / "first")
    second = copy_example(base / "second [draft]")
    workspace_file = base / "two.code-workspace"
    # Absolute paths: code-server 4.99 opened relative ones as a workspace of no folder.
    workspace_file.write_text(json.dumps({"folders": [{"path": str(base / "first")}, {"path": str(second)}]}))
    with code_server_session(request, base, second, opened=workspace_file) as vscode:
        vscode.wait(lambda: _loads(vscode, vscode.url), 60, "code-server answering")
        vscode.wait(lambda: vscode.driver.find_elements("css selector", ".monaco-workbench .part.editor"), 60,
                    "the two-folder workbench")
        time.sleep(2)  # the workbench takes keys once its first layout is done
        report = second / "shop" / "report.py"
        vscode.open_file("report.py", query=str(report))
        vscode.wait(lambda: "repomem: ready" in vscode.log(), ANSWER_S, "the second folder's server ready")
        initialized = [params for params in vscode.requests_sent("initialize")]
        assert [[folder["uri"] for folder in params.get("workspaceFolders") or []] for params in initialized] == \
            [[second.as_uri()]], initialized
        vscode.replace_line(9, LINE_9)

        def ghost_or_outside() -> str:
            # The one server of before answered nothing for the second folder, and said so: fail at once.
            if "outside the workspace folder" in vscode.log():
                pytest.fail(f"the second folder's file went to another folder's server:\n{vscode.log()[-2000:]}")
            return vscode.ghost_text()

        ghost = vscode.wait(ghost_or_outside, ANSWER_S, "ghost text in the second folder")
        assert ghost.startswith(EXPECTED), ghost
        vscode.keys(Keys.TAB)
        assert vscode.saved_lines(report)[8] == LINE_9 + EXPECTED
        accepts = vscode.wait(lambda: [e for e in feedback_events(second) if e.get("event") == "accept"], 30,
                              "the accept in the second folder's feedback log")
        assert EXPECTED in accepts[0].get("completion", ""), accepts
