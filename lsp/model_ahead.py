"""The embedded model's child, started by `repomem serve` before the language server's own modules
import (lsprotocol, pygls and the engine: ~1.4 s on two cores) and before the client has said which
folder it opens: for the settings the session will most likely resolve, those of the folder the
server starts in with no client settings. Editors start the server in the workspace they open, so
the session's first model open (CompletionSession.ensure_engine) usually takes this very process;
when its settings want another (another folder's repomem.toml, a client's model setting, an
endpoint) it stops this one. Only the settings files and the model's file are read here: nothing
is pulled, widened or written, and any trouble means no head start, never a failed start."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from repomem.backends.llama_process import StartedAhead


def start_for_folder(folder: Path) -> StartedAhead | None:
    from repomem.backends.factory import start_ahead
    from repomem.config import read_settings
    from repomem.lsp.settings import session_config

    try:
        config = session_config(read_settings(folder.resolve()), {})[0]
        return start_ahead(config)
    except Exception:  # noqa: BLE001 - a guess that fails costs the head start only
        return None
