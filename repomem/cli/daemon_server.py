"""The resident process behind `repomem daemon start`: it runs the commands that
repomem/cli/daemon_client.py forwards (`index`, `retrieve`, `complete`) with each repository's
index kept in memory between them, so that a command pays for what changed since the last one,
not for loading the index, importing the engine and setting numba up again.

One command at a time, on this process's main thread (the working folder, the environment and
standard streams are the client's for its duration); other clients wait in the listen queue. An
index that a command updated is written after the command has answered. The daemon ends after
`idle_s` seconds without a command it ran, at `repomem daemon stop`, at SIGTERM, or when its own code
changed (a command then runs in its client's process).

One daemon a user: it holds the lock file beside its socket for its life (the command that starts
it takes the lock first and hands it over, so that of two started at once only one is said started).
Every RECLAIM_S between commands it checks that its socket and lock are still the ones on disk: a
socket file deleted under it (a tmp cleaner) is made again, so commands reach it again rather than
each starting a daemon that loses the lock; a lock file replaced and taken by another daemon ends it.

Only this user reaches it: the socket is 0600 in a 0700 folder, and each peer's uid is checked
(SO_PEERCRED) before a byte is read.
"""

from __future__ import annotations

import _thread
import argparse
import fcntl
import io
import json
import os
import select
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console

from repomem.cli import backend_options, service_setup
from repomem.cli.daemon_client import HEADER, MAX_SOCKET_PATH, STATUS, daemon_folder, package_folder, socket_path
from repomem.cli.process_exit import exit_status
from repomem.cyclic_gc import settle_long_lived
from repomem.failures import Failure

PEER_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid
REQUEST_TIMEOUT_S = 10.0  # a client sends its request as soon as it connects
# A client that reads nothing of a command's output for this long (its reader stopped: `| less`
# left open, Ctrl+Z) is taken for gone: one command at a time, so it held every other one up.
SEND_TIMEOUT_S = 30.0
# Between commands, how often the daemon checks that its socket and lock file are still on disk.
RECLAIM_S = 2.0


class _Client:
    """A command's connection, written to in frames. The first write that fails (the client went
    away, or read nothing for SEND_TIMEOUT_S) raises BrokenPipeError, as a closed pipe does in a
    one-command process; later ones are dropped, so a command that stops on it ends at once."""

    def __init__(self, conn: socket.socket):
        self._conn = conn
        self.lost = False

    def send(self, kind: bytes, payload: bytes) -> None:
        if self.lost:
            return
        try:
            self._conn.sendall(HEADER.pack(kind, len(payload)) + payload)
        except OSError as error:
            self.lost = True
            raise BrokenPipeError(f"the client stopped reading: {error}") from error


class _Frames(io.RawIOBase):
    """A writable stream that sends what is written as frames of one kind to the client."""

    def __init__(self, client: _Client, kind: bytes):
        self._client = client
        self._kind = kind

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        payload = bytes(data)
        if payload:
            self._client.send(self._kind, payload)
        return len(payload)


def _text_stream(client: _Client, kind: bytes) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BufferedWriter(_Frames(client, kind)), encoding="utf-8", errors="replace",
                            line_buffering=True)


def code_identity(folder: str) -> tuple[tuple[str, int, int], ...]:
    """Each source file of the package with its size and time: a daemon whose code changed on
    disk answers no more commands (a checkout edited, a package upgraded)."""
    found = []
    for path in sorted(Path(folder).rglob("*.py")):
        stat = path.stat()
        found.append((str(path), stat.st_size, stat.st_mtime_ns))
    return tuple(found)


def _resident_kb() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _first_query(service) -> None:
    """One retrieval at the end of the repository's largest file, as a command makes it: the
    query's kernels loaded from numba's cache now rather than in the first command (~30 ms)."""
    from repomem.positions import locate

    files = sorted(service.view().indexed_files(), key=lambda file: file.fragments)
    if not files:
        return
    path = files[-1].path
    try:
        text = (service.root / path).read_text(encoding="utf-8", errors="replace")
    except OSError:  # gone or unreadable since the scan: the first command loads them instead
        return
    cursor = locate(service.root, path, text, max(1, text.count("\n")), None, service.config.scan)
    if not isinstance(cursor, Failure):
        service.view().retrieve_at(cursor)


def _log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}", file=sys.__stderr__, flush=True)


# One command: argv, the consoles of the client's stdout and stderr -> exit status (cli/main.py's main).
RunCommand = Callable[[list[str], Console, Console], int]
# A command's arguments as the command line reads them (its parser's parse_args).
ParseCommand = Callable[[list[str]], argparse.Namespace]


class Daemon:
    def __init__(self, idle_s: float, repositories: int, run_command: RunCommand,
                 warm: Sequence[Path] = (), model_for: Sequence[str] = (),
                 parse_command: ParseCommand | None = None, lock_fd: int | None = None):
        self.run_command = run_command
        self.warm = tuple(warm)  # repositories whose index is loaded and prepared before the first command
        self.model_for = tuple(model_for)  # a `complete` command's argv: its model is opened then too
        self.parse_command = parse_command
        self.idle_s = idle_s
        self.repositories = repositories
        self.started = time.time()
        self.commands = 0
        self.package = package_folder()
        self.code = code_identity(self.package)
        self._running_command = False
        self._hangup_lock = threading.Lock()
        self._hung_up = False
        self._interruptible = False  # a client's hang-up stops the command only while this is True
        self._prepared: set[int] = set()  # ids of the services made ready for edits and watched
        self.lock_fd = lock_fd  # the lock taken by the command that started this daemon, handed over
        self._lock = None  # the lock file, held for the daemon's life
        self._listener: socket.socket | None = None
        self._identity = (0, 0)  # the listening socket's (device, inode) on disk
        # When the last command of this installation ended: only those put off the idle exit. A
        # status request or a command of another installation (declined) does not: a daemon that
        # another installation's commands reach but never use (a second virtualenv of the user's)
        # would otherwise live as long as those are run, serving nothing; once it has exited, that
        # installation's next command at a terminal starts its own (one daemon a user).
        self.last_command = time.monotonic()

    # -- life cycle ----------------------------------------------------------------------------

    def run(self) -> int:
        """Listen until idle, stopped or outdated; 0, or 2 with one line when it cannot start."""
        folder = daemon_folder()
        path = socket_path()
        if len(os.fsencode(str(path))) > MAX_SOCKET_PATH:
            print(f"repomem: error: the daemon's socket path {path} is longer than a Unix socket allows "
                  f"({MAX_SOCKET_PATH} bytes); set REPOMEM_CACHE to a shorter folder", file=sys.stderr)
            return 2
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if folder.stat().st_uid != os.getuid():
            print(f"repomem: error: {folder} belongs to another user", file=sys.stderr)
            return 2
        folder.chmod(0o700)
        self._lock = _held_lock(folder / "lock", self.lock_fd)  # one daemon a user
        if isinstance(self._lock, str):
            print(f"repomem: error: {self._lock}", file=sys.stderr)
            return 2
        self._listen()
        signal.signal(signal.SIGINT, self._on_interrupt)  # ignored when started in the background
        signal.signal(signal.SIGTERM, _stop_on_sigterm)
        service_setup.KEPT = service_setup.KeptServices(self.repositories)
        backend_options.KEPT_BACKEND = backend_options.KeptBackend()
        _log(f"listening on {path} (pid {os.getpid()}, idle exit after {self.idle_s:.0f} s)")
        self._warm_up()
        try:
            self._serve_until_done()
        except (KeyboardInterrupt, SystemExit):
            _log("stopped by a signal")
        finally:
            self._listener.close()
            try:
                if _identity(path) == self._identity:  # not a socket another daemon made since
                    path.unlink()
            except OSError:
                pass
            self._save_all()
            backend_options.KEPT_BACKEND.close()
            self._lock.close()
        return 0

    def _listen(self) -> None:
        """Listen on the socket path, replacing what is there: this process holds the lock, so a
        socket there is one left by a daemon that was killed."""
        path = socket_path()
        path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_mask = os.umask(0o177)
        try:
            listener.bind(str(path))
        finally:
            os.umask(old_mask)
        listener.listen(16)
        if self._listener is not None:
            self._listener.close()
        self._listener, self._identity = listener, _identity(path)

    def _reclaim(self) -> bool:
        """Between commands: the lock file and socket on disk still this daemon's, taken or made
        again where they were deleted (a tmp cleaner); False when another daemon took the lock
        meanwhile (its folder was deleted and a command started one): this one then exits."""
        folder = daemon_folder()
        try:
            if _identity(folder / "lock") != _identity(self._lock.fileno()):
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                lock = _held_lock(folder / "lock", None)
                if isinstance(lock, str):
                    _log("another daemon took the lock after its file was deleted: exiting")
                    return False
                self._lock.close()
                self._lock = lock
                _log("the lock file was deleted: taken again")
            if _identity(socket_path()) != self._identity:
                self._listen()
                _log(f"the socket was deleted: listening again on {socket_path()}")
        except OSError as error:  # the folder unwritable now: commands run in their own process
            _log(f"cannot make the lock or socket again: {error}")
        return True

    def _warm_up(self) -> None:
        """What every forwarded command would import and set up: done once, before the first."""
        ahead = self._model_ahead()  # its process loads the model while this one imports and loads
        import numpy as np

        import repomem.service  # noqa: F401
        from repomem.index.kernels.csr import row_slots

        row_slots(np.zeros(1, np.int64), np.ones(1, np.int64))  # numba's CPU target, set up once
        overrides = self._command_overrides()
        for root in self.warm:
            # What the command that started this daemon found (repomem.cli.daemon_command's
            # start_for_next_commands): its index loaded, checked and brought up to date, then
            # prepared for edits and watched, while its client's user reads the answer. A command
            # that arrives meanwhile waits in the listen queue (listening began above).
            started = time.perf_counter()
            try:
                service = service_setup.open_service(root, overrides)
                service_setup.ensure_index(service, Console(file=io.StringIO()), save_later=True)
                _first_query(service)
            except Exception as error:  # UserError included: the next command meets it and says so
                _log(f"warming {root} failed: {getattr(getattr(error, 'failure', None), 'message', error)}")
                continue
            _log(f"loaded {service.root} in {time.perf_counter() - started:.2f} s")
            if self.model_for:
                self._open_model(list(self.model_for), service, ahead)
                ahead = None
        if ahead is not None:
            ahead.discard()
        self._prepare_for_edits()
        self._save_all()

    def _command_overrides(self) -> dict[str, str] | None:
        """The settings the `complete` of `model_for` opens its repository with (`--model NAME`
        sets model.embedded_model): a repository warmed without them was not the one that command
        reused, so its index was loaded again and the model opened here closed and opened again."""
        if not self.model_for or self.parse_command is None:
            return None
        from repomem.cli.backend_options import model_override  # as `complete` reads its --model

        try:
            return model_override(getattr(self.parse_command(list(self.model_for)), "model", None))
        except (Exception, SystemExit):  # the command says what is wrong with its arguments
            return None

    def _model_ahead(self):
        """The embedded model of `model_for`, started in its own process before the engine's
        imports (backend_options.start_model_ahead, as `complete` starts it before its index
        step), with the first warmed repository's settings; None for a server or no model."""
        if not self.model_for or not self.warm or self.parse_command is None:
            return None
        try:
            from repomem.config import load_config

            args = self.parse_command(list(self.model_for))
            config, _ = load_config(Path(self.warm[0]))
            return backend_options.start_model_ahead(args, config)
        except (Exception, SystemExit) as error:  # opened later without a head start, or said then
            _log(f"starting the model early failed: {error}")
            return None

    def _open_model(self, argv: list[str], service, ahead=None) -> None:
        """The model the `complete` command `argv` (run in the first warmed repository) opens,
        opened now and kept (backend_options.KEPT_BACKEND), as that command leaves it: the next
        `complete` asking for it starts generating at once."""
        if self.parse_command is None:
            return
        started = time.perf_counter()
        try:
            args = self.parse_command(argv)
            key = backend_options.KeptBackend.key(args, service.config)
            backend = backend_options.open_chosen_backends(args, service.config, Console(file=io.StringIO()), ahead)[0]
        except (Exception, SystemExit) as error:  # the next `complete` opens it and says what is wrong
            _log(f"opening the model of `repomem {' '.join(argv)}` failed: "
                 f"{getattr(getattr(error, 'failure', None), 'message', error)}")
            return
        finally:
            if ahead is not None:
                ahead.discard()  # taken by the backend opened, or another model was: as `complete` does
        backend_options.release_backend(backend, key, None)
        _log(f"opened the model {backend.name} in {time.perf_counter() - started:.2f} s")

    def _serve_until_done(self) -> None:
        self.last_command = time.monotonic()  # the warm-up done
        while True:
            left = self.last_command + self.idle_s - time.monotonic()
            if left <= 0:
                _log(f"idle for {self.idle_s:.0f} s: exiting")
                return
            self._listener.settimeout(min(left, RECLAIM_S))
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                if not self._reclaim():
                    return
                continue
            except KeyboardInterrupt:
                if self._hung_up:  # a client's hang-up that arrived after its command ended
                    self._hung_up = False
                    continue
                raise
            with conn:
                try:
                    stop = self._serve(conn)
                except KeyboardInterrupt:
                    if not self._hung_up:
                        raise
                    self._hung_up, stop = False, False
                except OSError as error:  # the client went away mid-answer
                    _log(f"connection lost: {error}")
                    stop = False
            self._let_go_of_cut_off_updates()
            self._stop_stray_children()
            self._save_all()
            if stop:
                return
            self._prepare_for_edits()

    def _let_go_of_cut_off_updates(self) -> None:
        """A command stopped midway through an index update (its client hung up: the interrupt
        comes between any two steps; a bug; a write to a client that read nothing): that index
        may be half updated, and what the watch saw was read. Its service is let go of, unsaved;
        the next command opens the repository afresh from the index on disk. A command stopped
        while it printed its answer leaves its index whole and kept."""
        if service_setup.KEPT is None:
            return
        for service in service_setup.KEPT.discard_cut_off():
            self._prepared.discard(id(service))
            _log(f"let go of {service.root}: its index update was stopped midway")

    def _prepare_for_edits(self) -> None:
        """Between commands, what the first edit of a newly loaded index would make (its structure,
        call tables, edit graph: docs/measurements.md#index-load), and the watch of its tree, so
        that the command after a saved file pays for the file only. A command arriving meanwhile
        waits in the listen queue."""
        for service in list(service_setup.KEPT.services.values()) if service_setup.KEPT is not None else ():
            if service.index_loaded and id(service) not in self._prepared:
                self._prepared.add(id(service))
                started = time.perf_counter()
                try:
                    service.prepare_for_edits()
                    if service.watch_tree():  # changes made before the watch began, read now
                        service_setup.KEPT.unsaved.add(service.root)
                except Exception as error:  # the next command opens the repository afresh and meets it
                    _log(f"preparing {service.root} for edits failed: {error}")
                    service_setup.KEPT.drop(service.root)
                    return
                watching = "watching its folders" if service.watching else "no watch: every command scans"
                _log(f"prepared {service.root} for edits in {time.perf_counter() - started:.2f} s; {watching}")
                settle_long_lived()  # its index out of later collections (repomem/cyclic_gc.py)

    def _stop_stray_children(self) -> None:
        """End what a command left running besides the kept model: a one-command process's exit
        ends its children, a daemon outlives its commands (a model started by a command that was
        interrupted while it loaded would hold its gigabytes until the daemon ends)."""
        kept = backend_options.KEPT_BACKEND.process_id if backend_options.KEPT_BACKEND is not None else None
        strays = [pid for pid in _children(os.getpid()) if pid != kept]
        for pid in strays:
            _log(f"ending process {pid}, left running by a command")
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                continue

    def _save_all(self) -> None:
        if service_setup.KEPT is None:
            return
        for failure in service_setup.KEPT.save_all():
            _log(f"saving an index failed: {failure.message}")

    # -- one connection ------------------------------------------------------------------------

    def _serve(self, conn: socket.socket) -> bool:
        """Answer one client; True when the daemon should stop."""
        pid, uid, _ = PEER_CREDENTIALS.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                              PEER_CREDENTIALS.size))
        if uid != os.getuid():
            _log(f"refused a connection of uid {uid} (pid {pid})")
            return False
        conn.settimeout(REQUEST_TIMEOUT_S)
        line = conn.makefile("rb").readline(1 << 24)
        conn.settimeout(None)
        try:
            request = json.loads(line)
        except ValueError:
            return False
        if not isinstance(request, dict):
            return False
        control = request.get("control")
        if control == "status":
            conn.sendall(json.dumps(self.status()).encode() + b"\n")
            return False
        if control == "stop":
            conn.sendall(b'{"stopping": true}\n')
            _log("stopped by `repomem daemon stop`")
            return True
        if request.get("package") != self.package:
            _Client(conn).send(b"d", f"another repomem ({request.get('package')})".encode())
            return False
        if code_identity(self.package) != self.code:
            _Client(conn).send(b"d", b"repomem's code changed since the daemon started")
            _log("repomem's code changed on disk: exiting")
            return True
        try:
            os.chdir(request.get("cwd", "/"))
        except (OSError, TypeError, ValueError) as error:
            # A folder this process cannot enter by its name, which its client entered step by step
            # (a path past PATH_MAX) or which was removed meanwhile: the command runs in the client's
            # process, as without a daemon, where it answered "cannot enter the working folder".
            _Client(conn).send(b"d", f"cannot enter the working folder: {error}".encode(errors="replace"))
            return False
        return self._run_command(conn, request)

    def status(self) -> dict:
        kept = service_setup.KEPT
        repositories = []
        for root, service in (kept.services.items() if kept is not None else ()):
            repositories.append({"root": str(root), "loaded": service.index_loaded, "files": service.loaded_files,
                                 "unsaved": kept is not None and root in kept.unsaved, "watching": service.watching})
        return {"pid": os.getpid(), "socket": str(socket_path()), "uptime_s": round(time.time() - self.started, 1),
                "commands": self.commands, "idle_exit_s": self.idle_s, "resident_mb": round(_resident_kb() / 1024),
                "repositories": repositories, "package": self.package}

    def _on_interrupt(self, signum, frame) -> None:
        """SIGINT: a terminal's Ctrl+C stops the daemon; a client's hang-up (`_watch_hang_up`)
        stops its command, and is dropped when it arrives once the command has ended (it would
        have broken off the cleanup after the command, or a save between two)."""
        if self._hung_up and not self._interruptible:
            self._hung_up = False
            return
        raise KeyboardInterrupt

    def _run_command(self, conn: socket.socket, request: dict) -> bool:
        """The forwarded command `request`, in its client's folder (`_serve` entered it); True when
        SIGTERM stopped it: the daemon then ends."""
        argv = [str(a) for a in request.get("argv", [])]
        terminals = request.get("terminals") or [False, False]
        columns = request.get("columns")
        saved_env, saved_streams = dict(os.environ), (sys.stdout, sys.stderr)
        client = _Client(conn)
        conn.settimeout(SEND_TIMEOUT_S)
        out_stream, err_stream = _text_stream(client, b"o"), _text_stream(client, b"e")
        wake_read, wake_write = socket.socketpair()
        watcher = threading.Thread(target=self._watch_hang_up, args=(conn, wake_read), daemon=True,
                                   name="hang-up")
        started = time.perf_counter()
        status = 1
        terminated = False
        try:
            os.environ.clear()
            os.environ.update({str(k): str(v) for k, v in dict(request.get("env", {})).items()})
            tempfile.tempdir = None  # gettempdir() read TMPDIR once: the client's now
            sys.stdout, sys.stderr = out_stream, err_stream
            out = Console(file=out_stream, force_terminal=True if terminals[0] else None,
                          width=columns if terminals[0] and columns else None)
            err = Console(file=err_stream, force_terminal=True if terminals[1] else None,
                          width=columns if terminals[1] and columns else None)
            self._running_command, self._hung_up = True, False
            watcher.start()
            try:
                self._interruptible = True
                status = self.run_command(argv, out, err)
            except _Terminated:
                # Not the command's own end: it was read as argparse's exit 0, an `index` stopped
                # midway said it succeeded, and the daemon went on serving. Unanswered, its client
                # says the daemon stopped during the command.
                terminated = True
            except SystemExit as stop:  # argparse's usage errors and --help
                status = exit_status(stop.code)
            except KeyboardInterrupt:
                status = 130
            except Exception:  # REPOMEM_DEBUG=1 re-raises a bug for its traceback: the client's to read
                try:
                    traceback.print_exc()
                except BrokenPipeError:
                    pass
                status = 1
            finally:
                self._interruptible = False
                with self._hangup_lock:
                    self._running_command = False
            for stream in (out_stream, err_stream):
                try:
                    stream.flush()
                except BrokenPipeError:
                    pass
        finally:
            wake_write.send(b"x")
            if watcher.is_alive():
                watcher.join()
            wake_read.close()
            wake_write.close()
            sys.stdout, sys.stderr = saved_streams
            os.environ.clear()
            os.environ.update(saved_env)
            tempfile.tempdir = None
            os.chdir("/")
            self.commands += 1
            self.last_command = time.monotonic()
            if terminated:
                _log(f"{' '.join(argv[:2])} stopped by SIGTERM after {time.perf_counter() - started:.3f} s")
            else:
                _log(f"{' '.join(argv[:2])} -> {status} in {time.perf_counter() - started:.3f} s")
                client.send(b"x", STATUS.pack(status))
        return terminated

    def _watch_hang_up(self, conn: socket.socket, wake: socket.socket) -> None:
        """A client that closes its connection (Ctrl+C) stops its command: KeyboardInterrupt in the
        main thread, as a terminal's Ctrl+C does in a one-command process."""
        readable, _, _ = select.select([conn, wake], [], [])
        if wake in readable:
            return
        try:
            data = conn.recv(1, socket.MSG_PEEK)
        except OSError:
            data = b""
        if data:
            return  # a client sends nothing after its request: not a hang-up
        with self._hangup_lock:
            if self._running_command:
                self._hung_up = True
                _thread.interrupt_main()


def _children(parent: int) -> list[int]:
    """The running (not ended) child processes of `parent`, from each of its threads' /proc
    children list: a walk of every process on the machine took ~5 ms with 70 of them, after every
    command."""
    found: list[int] = []
    for task in Path(f"/proc/{parent}/task").iterdir():
        try:
            found.extend(int(pid) for pid in (task / "children").read_text().split())
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
    return [pid for pid in found if _running(pid)]


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _identity(file: Path | int) -> tuple[int, int]:
    """A file's (device, inode), by path or open descriptor; (0, 0) when it does not exist."""
    try:
        found = os.stat(file)
    except FileNotFoundError:
        return (0, 0)
    return (found.st_dev, found.st_ino)


def _held_lock(path: Path, fd: int | None):
    """The daemon's lock file, locked and holding this process's pid: the descriptor `fd` handed
    over by the command that started this daemon (it took the lock first), or `path` opened here;
    a message when another process holds it."""
    if fd is None:
        lock = open(path, "a+")
    else:
        try:
            lock = os.fdopen(fd, "a+")
        except OSError as error:
            return f"the daemon's lock descriptor {fd}: {error.strerror or error}"
        if _identity(fd) != _identity(path):
            lock.close()
            return f"descriptor {fd} is not the daemon's lock {path}"
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # already held when handed over
    except BlockingIOError:
        lock.close()
        return "a daemon is already running (`repomem daemon status`)"
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


class _Terminated(SystemExit):
    """SIGTERM: the daemon ends (after the command it stopped, which is not answered)."""


def _stop_on_sigterm(signum, frame) -> None:
    raise _Terminated(0)
