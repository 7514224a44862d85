"""The command's exit without the interpreter's teardown (repomem/cli/process_exit.py): what a normal
exit finishes is still finished."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from repomem.cli.process_exit import exit_status

PROBE = """
import atexit, sys, threading, time
from pathlib import Path
from repomem.cli.process_exit import exit_now
log = Path(sys.argv[1])
def late():
    time.sleep(0.3)
    with log.open("a") as handle:
        handle.write("thread\\n")
threading.Thread(target=late).start()
from concurrent.futures import ThreadPoolExecutor
pool = ThreadPoolExecutor(2)
pool.submit(time.sleep, 0.01).result()  # its idle workers stop only when told to, at exit
atexit.register(lambda: log.open("a").write("atexit\\n"))
sys.stdout.write("buffered, not yet flushed")
exit_now(int(sys.argv[2]))
"""


@pytest.mark.parametrize("status", [0, 3])
def test_threads_finish_exit_handlers_run_output_is_flushed(tmp_path: Path, status: int):
    log = tmp_path / "log"
    done = subprocess.run([sys.executable, "-c", PROBE, str(log), str(status)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == status, done.stderr
    assert done.stdout == "buffered, not yet flushed"
    assert log.read_text().splitlines() == ["thread", "atexit"]


@pytest.mark.parametrize("code, status", [(None, 0), (0, 0), (2, 2), (256 + 7, 7), ("bye", 1)])
def test_system_exit_codes_map_as_the_interpreter_maps_them(code, status, capsys):
    assert exit_status(code) == status
    assert capsys.readouterr().err == ("bye\n" if code == "bye" else "")
