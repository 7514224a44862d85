"""The `repomem` command's first step: a running daemon of this user answers `index`, `retrieve`
and `complete` (repomem/cli/daemon_client.py); every other command, or any command when no daemon
answers, runs in this process (repomem/cli/main.py). Imports only the standard library before it
knows which."""

from __future__ import annotations

import sys
from typing import NoReturn

from repomem.cli.daemon_client import forward


def entry() -> NoReturn:
    status = forward(sys.argv[1:])
    if status is not None:
        sys.exit(status)
    from repomem.cli.main import entry as run_here

    run_here()
