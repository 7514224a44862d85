"""A script of `scripts/` or `experiments/` run as `python SCRIPT ARGS` runs it, in the test's own
process: the tests of a script's command line spent most of their time starting an interpreter
and importing numpy and the evaluation modules again for every call (~1.2 s each)."""

from __future__ import annotations

import contextlib
import io
import runpy
import subprocess
import sys
import traceback
from pathlib import Path


def run_script(script: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Its exit status (SystemExit's code; 1 and a traceback on stderr for an exception that
    escapes, as the interpreter does), stdout and stderr. The script's folder is first on sys.path
    and the working folder is `cwd` while it runs, as for the command; both are restored."""
    out, err = io.StringIO(), io.StringIO()
    argv, path = sys.argv, list(sys.path)
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.parent))
    status = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.chdir(cwd or Path.cwd()):
            try:
                runpy.run_path(str(script), run_name="__main__")
            except SystemExit as exit_:
                if isinstance(exit_.code, str):
                    print(exit_.code, file=sys.stderr)
                status = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
            except Exception:  # noqa: BLE001 - reported as the interpreter reports it
                traceback.print_exc()
                status = 1
    finally:
        sys.argv = argv
        sys.path[:] = path
    return subprocess.CompletedProcess([sys.executable, str(script), *args], status, out.getvalue(), err.getvalue())
