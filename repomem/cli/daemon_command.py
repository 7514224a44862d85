"""`repomem daemon start|stop|status`: the resident process that keeps indexes in memory between
commands (repomem/cli/daemon_server.py; forwarding in repomem/cli/daemon_client.py)."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING

from rich.console import Console

from repomem.cli.daemon_client import (
    MAX_SOCKET_PATH,
    OPT_OUT,
    connect,
    daemon_folder,
    package_folder,
    send_json,
    socket_path,
)
from repomem.cli.errors import UserError, finite_float
from repomem.config.sections import MAX_IDLE_MINUTES
from repomem.failures import Failure, FailureKind

if TYPE_CHECKING:
    from repomem.cli.daemon_server import ParseCommand, RunCommand

START_TIMEOUT_S = 60.0  # the engine's imports and numba's set-up, on a loaded machine
STOP_TIMEOUT_S = 60.0  # a running command finishes and unsaved indexes are written first


# The answer of a daemon that listens but did not answer in time: it is running a long command
# (a first index of a large repository); it answers when that ends.
BUSY = {"busy": True}
LOG_BYTES = 1 << 20  # the log is moved aside to log.1 at a start past this size


def _ask(control: str, timeout_s: float = 10.0) -> dict | None:
    """A control request's answer, BUSY, or None when no daemon listens."""
    conn = connect(timeout_s)
    if conn is None:
        return None
    with conn:
        try:
            send_json(conn, {"control": control})
            line = conn.makefile("rb").readline()
        except TimeoutError:
            return BUSY
        except OSError:
            return None
    try:
        answer = json.loads(line)
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def _resolve_idle_minutes(args: argparse.Namespace) -> None:
    """`--idle-minutes`, else the user's `[daemon] idle_minutes`, as for a daemon a command starts
    (a repository's settings cannot set it, and this command belongs to none)."""
    if args.idle_minutes is None:
        from repomem.config import load_config

        config, warnings = load_config(None)
        for warning in warnings:
            print(f"repomem: warning: {warning}", file=sys.stderr)
        args.idle_minutes = config.daemon.idle_minutes


def cmd_daemon(args: argparse.Namespace, out: Console, err: Console, run_command: RunCommand,
               parse_command: ParseCommand) -> int:
    _resolve_idle_minutes(args)
    if not 0 < args.idle_minutes <= MAX_IDLE_MINUTES:
        # A week at most: 1e9 minutes overflowed the socket's timeout at the daemon's start.
        raise UserError(Failure(FailureKind.BAD_OPTION, f"--idle-minutes must be more than 0 and at most "
                                                        f"{MAX_IDLE_MINUTES:g} (a week)"))
    if args.repositories < 1:
        raise UserError(Failure(FailureKind.BAD_OPTION, "--repositories must be at least 1"))
    if args.action == "start" and not sys.platform.startswith("linux"):
        # Its peers are checked with SO_PEERCRED and its children found in /proc: Linux's own.
        raise UserError(Failure(FailureKind.DAEMON_FAILED, "repomem daemon runs on Linux only; "
                                                            "commands run in their own process here"))
    if args.action == "status":
        return _status(args)
    if args.action == "stop":
        return _stop()
    if args.foreground:
        from repomem.cli.daemon_server import Daemon  # the engine's imports: only in the daemon

        return Daemon(args.idle_minutes * 60, args.repositories, run_command, warm=args.warm,
                      model_for=json.loads(args.model_for) if args.model_for else (),
                      parse_command=parse_command, lock_fd=args.lock_fd).run()
    return _start(args)


def _take_lock() -> IO[str] | int | None:
    """The daemon's lock, taken by this process to be handed to the daemon it starts (`_spawn`):
    of two commands starting one at once, only one starts it and says so (the other's daemon lost
    the lock at once, and the pid it printed was a process gone). Else the pid of the process that
    holds the lock (0 before that one wrote it), or None where no lock can be had here."""
    try:
        import fcntl

        folder = daemon_folder()
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        lock = open(folder / "lock", "a+")
    except (OSError, ImportError):
        return None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        lock.seek(0)
        text = lock.read().strip()
        lock.close()
        return (int(text) if text.isdigit() else 0) if isinstance(error, BlockingIOError) else None
    lock.truncate(0)  # its pid, once started; no other daemon's meanwhile
    lock.flush()
    return lock


def _socketless_daemon() -> int | None:
    """The pid of a daemon that holds the daemon's lock but answers on no socket: it is starting,
    or its socket file was deleted (it listens again within RECLAIM_S), or it is stuck. None when
    no process holds the lock."""
    lock = _take_lock()
    if lock is None or isinstance(lock, int):
        return lock
    lock.close()  # nobody held it
    return None


def _status(args: argparse.Namespace) -> int:
    answer = _ask("status")
    orphan = _socketless_daemon() if answer is None else None
    if args.json:
        print(json.dumps({"running": answer is not None, **(answer or {}),
                          **({"socketless_pid": orphan} if orphan is not None else {})}, indent=2))
        return 0
    if orphan is not None:
        print(f"a daemon (pid {orphan}) holds the lock but does not listen on {socket_path()}: it is starting, "
              "or its socket was deleted and it listens again within seconds; `repomem daemon stop` ends it")
        return 0
    if answer is None:
        print(f"no daemon running (socket {socket_path()})")
        return 0
    if answer is BUSY:
        print(f"a daemon is running a long command; it answers when that ends (socket {socket_path()})")
        return 0
    print(f"daemon pid {answer['pid']}, up {answer['uptime_s']:.0f} s, {answer['commands']} commands, "
          f"{answer['resident_mb']} MB resident, exits after {answer['idle_exit_s'] / 60:g} idle minutes")
    other = _another_installation(answer)
    if other:
        print(f"  {other}")
    for repository in answer["repositories"]:
        state = f"{repository['files']:,} files in memory" if repository["loaded"] else "index not loaded"
        print(f"  {repository['root']}: {state}" + (", unsaved changes" if repository["unsaved"] else ""))
    return 0


def _another_installation(answer: dict) -> str | None:
    """What to say of a daemon of another repomem installation (another virtualenv or checkout):
    it runs none of this one's commands, which run in their own process; None for this one's."""
    package = answer.get("package")
    if package is None or package == package_folder():
        return None
    return (f"it belongs to another repomem installation ({package}): this one's commands run without it "
            f"(this one is {package_folder()}); `repomem daemon stop` ends it, then a command of this one "
            "at a terminal starts its own")


def _stop() -> int:
    answer = _ask("stop", timeout_s=STOP_TIMEOUT_S)
    if answer is None:
        orphan = _socketless_daemon()
        if orphan:
            return _stop_socketless(orphan)
        print("no daemon running")
        return 0
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while answer is not BUSY and socket_path().exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if answer is BUSY or socket_path().exists():
        raise UserError(Failure(FailureKind.DAEMON_FAILED,
                                f"the daemon did not stop within {STOP_TIMEOUT_S:.0f} s (a long command); ask again "
                                f"when it ends, or end its process (pid in {daemon_folder() / 'lock'})"))
    print("daemon stopped")
    return 0


def _stop_socketless(pid: int) -> int:
    """SIGTERM to a daemon that holds the lock but listens on no socket (it saves its indexes and
    exits, as at `stop`)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError as error:
        raise UserError(Failure(FailureKind.DAEMON_FAILED, f"cannot stop the daemon (pid {pid}): "
                                                           f"{error.strerror or error}")) from None
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while _socketless_daemon() is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    if _socketless_daemon() is not None:
        raise UserError(Failure(FailureKind.DAEMON_FAILED, f"the daemon (pid {pid}) did not stop within "
                                                           f"{STOP_TIMEOUT_S:.0f} s"))
    print(f"daemon stopped (pid {pid}; it did not listen on its socket)")
    return 0


def _start(args: argparse.Namespace) -> int:
    _resolve_idle_minutes(args)
    for root in args.warm:
        if not root.is_dir():
            raise UserError(Failure(FailureKind.MISSING_REPO, f"--warm {root}: no such folder"))
    running = _ask("status")
    lock = _take_lock() if running is None else None
    if isinstance(lock, int):  # one holds the lock: it is starting, or makes its deleted socket again
        running = _answer_within(START_TIMEOUT_S)
        lock = _take_lock() if running is None else None  # free again: its holder exited
        if isinstance(lock, int):
            raise UserError(Failure(FailureKind.DAEMON_FAILED,
                                    f"a daemon (pid {lock or '?'}) holds the lock but did not listen on "
                                    f"{socket_path()} within {START_TIMEOUT_S:.0f} s; `repomem daemon stop` ends it, "
                                    "then start again"))
    if running is not None:
        other = _another_installation(running)
        if other:
            raise UserError(Failure(FailureKind.DAEMON_FAILED, f"a daemon (pid {running['pid']}) is running; {other}"))
        print(f"a daemon is already running (socket {socket_path()}"
              + (f", pid {running['pid']})" if "pid" in running else ", busy with a command)"))
        return 0
    process = _spawn(args.idle_minutes, args.repositories, [str(root.resolve()) for root in args.warm], [], lock)
    if isinstance(process, Failure):
        raise UserError(process)
    folder = daemon_folder()
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        answer = _ask("status")
        if answer is not None:
            # BUSY: it listens, and loads the --warm repositories before it answers (a large one
            # took past the status request's timeout: "internal error: KeyError: 'pid'").
            loading = "; it loads the repositories to warm first" if answer is BUSY else ""
            print(f"daemon started: pid {answer.get('pid', process.pid)}, socket {socket_path()}, "
                  f"log {folder / 'log'}; it exits after {args.idle_minutes:g} idle minutes "
                  f"(`repomem daemon stop` ends it){loading}")
            return 0
        if process.poll() is not None:
            raise UserError(Failure(FailureKind.DAEMON_FAILED, f"the daemon exited at its start; see {folder / 'log'}"))
        time.sleep(0.05)
    process.kill()
    raise UserError(Failure(FailureKind.DAEMON_FAILED,
                            f"the daemon did not answer within {START_TIMEOUT_S:.0f} s; see {folder / 'log'}"))


def _answer_within(timeout_s: float) -> dict | None:
    """A daemon's status answer (or BUSY) once one listens, within `timeout_s`; None when the lock
    is free again (its holder exited) or nothing answered in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        answer = _ask("status")
        if answer is not None or _socketless_daemon() is None:
            return answer
        time.sleep(0.05)
    return None


def _spawn(idle_minutes: float, repositories: int, warm: list[str], model_for: list[str],
           lock: IO[str] | None) -> subprocess.Popen | Failure:
    """A daemon started in the background, in a session of its own, logging to the daemon folder;
    `warm`: repository roots whose index it loads and prepares for edits before its first command;
    `model_for`: a `complete` command's arguments, whose model it opens then too; `lock`: the
    daemon's lock, taken here (`_take_lock`), handed to it and closed here."""
    with lock or contextlib.nullcontext():
        return _spawn_holding(idle_minutes, repositories, warm, model_for, lock)


def _spawn_holding(idle_minutes: float, repositories: int, warm: list[str], model_for: list[str],
                   lock: IO[str] | None) -> subprocess.Popen | Failure:
    path = socket_path()
    if len(os.fsencode(str(path))) > MAX_SOCKET_PATH:
        return Failure(FailureKind.DAEMON_FAILED,
                       f"the daemon's socket path {path} is longer than a Unix socket allows "
                       f"({MAX_SOCKET_PATH} bytes); set REPOMEM_CACHE to a shorter folder")
    folder = daemon_folder()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if (folder / "log").is_file() and (folder / "log").stat().st_size > LOG_BYTES:
            (folder / "log").replace(folder / "log.1")
        log = open(folder / "log", "ab")
    except OSError as error:
        return Failure(FailureKind.DAEMON_FAILED, f"cannot write {folder}: {error.strerror}")
    environment = {k: v for k, v in os.environ.items() if k != OPT_OUT}
    command = [sys.executable, "-P", "-m", "repomem", "daemon", "start", "--foreground",
               "--idle-minutes", str(idle_minutes), "--repositories", str(repositories)]
    for root in warm:
        command += ["--warm", root]
    if model_for:
        command += ["--model-for", json.dumps(model_for)]
    if lock is not None:
        command += ["--lock-fd", str(lock.fileno())]
    with log:
        try:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/",
                                       env=environment, start_new_session=True,
                                       pass_fds=() if lock is None else (lock.fileno(),))
        except OSError as error:  # no process to be had (limits, memory): the command itself answered
            return Failure(FailureKind.DAEMON_FAILED, f"cannot start a process: {error.strerror or error}")
    if lock is not None:
        lock.write(f"{process.pid}\n")  # for `daemon status` before the daemon writes it itself
        lock.flush()
    return process


def start_for_next_commands(argv: list[str], root: Path, auto_start: bool, idle_minutes: float) -> None:
    """After the command `argv` ran in this process because no daemon listened: at a terminal (a
    person, not a script, a test or CI, whose commands each stand alone), with `daemon.auto_start`
    on and REPOMEM_NO_DAEMON unset, a daemon started in the background that loads `root`'s index
    and prepares it for edits (and, after `complete`, opens its model), so that the next commands
    pay for what changed only; one line on stderr says so. Nothing where any of that does not
    hold, or when a daemon listens by now."""
    if (not auto_start or os.environ.get(OPT_OUT, "") not in ("", "0") or not sys.platform.startswith("linux")
            or not _at_terminal()):
        return
    conn = connect(timeout_s=1.0)
    if conn is not None:  # started meanwhile, or one of another installation (one daemon a user)
        conn.close()
        return
    lock = _take_lock()
    if isinstance(lock, int):
        # Held: a daemon another command just started, or one whose socket was deleted (it listens
        # again within seconds): none is started, and nothing said; this command ran without it.
        return
    # The command's own arguments, read in the daemon as this process read them: relative paths
    # (a --model file) resolved against this folder, where the daemon cannot know them.
    model_for = [argv[0], *_absolute_paths(argv[1:])] if argv[:1] == ["complete"] else []
    process = _spawn(idle_minutes, 3, [str(root)], model_for, lock)
    if isinstance(process, Failure):
        print(f"repomem: warning: no daemon started for the next commands: {process.message} "
              "(`[daemon] auto_start = false` in the user config stops trying)", file=sys.stderr)
        return
    kept = "index and the model" if model_for else "index"
    print(f"repomem: started a daemon (pid {process.pid}) that keeps this repository's {kept} in memory for the next "
          f"commands; it exits after {idle_minutes:g} idle minutes (`repomem daemon stop` ends it, "
          "`[daemon] auto_start = false` in the user config turns this off)", file=sys.stderr)


def _absolute_paths(arguments: list[str]) -> list[str]:
    """`arguments` with each one naming an existing file or folder here made absolute (the
    daemon runs in /); the others as they are."""
    return [str(Path(a).resolve()) if not a.startswith("-") and os.path.exists(a) else a for a in arguments]


def _at_terminal() -> bool:
    """Standard error is a terminal: a person reads this command's messages."""
    try:
        return os.isatty(2)
    except OSError:
        return False


def add_daemon_parser(commands, run_command: RunCommand, parse_command: ParseCommand) -> None:
    """`run_command`: how the daemon runs a forwarded command (repomem/cli/main.py's main);
    `parse_command`: how the command line reads a command's arguments (its parser's parse_args)."""
    daemon = commands.add_parser(
        "daemon", help="keep indexes in memory between commands (index, retrieve and complete use it)",
        description="A resident process of this user that runs `repomem index`, `retrieve` and `complete` with "
                    "each repository's index kept in memory: a command then pays for what changed since the "
                    f"last one. Commands use a running daemon by themselves ({OPT_OUT}=1 runs one without it).")
    daemon.add_argument("action", choices=("start", "stop", "status"))
    daemon.add_argument("--idle-minutes", type=finite_float, default=None,
                        help="exit after this many minutes without a command (default: daemon.idle_minutes "
                             "of your config, 30)")
    daemon.add_argument("--repositories", type=int, default=3,
                        help="indexes kept in memory at most, the least recently used dropped (default 3)")
    daemon.add_argument("--foreground", action="store_true", help="start: run in this process (logs on stderr)")
    daemon.add_argument("--warm", action="append", default=[], type=Path, metavar="REPO",
                        help="start: load this repository's index and prepare it for edits before the first "
                             "command (repeatable)")
    daemon.add_argument("--json", action="store_true", help="status: as JSON")
    daemon.add_argument("--model-for", help=argparse.SUPPRESS)  # start_for_next_commands's `complete`
    daemon.add_argument("--lock-fd", type=int, help=argparse.SUPPRESS)  # the lock, taken by its starter
    daemon.set_defaults(handler=functools.partial(cmd_daemon, run_command=run_command, parse_command=parse_command))
