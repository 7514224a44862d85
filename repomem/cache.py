"""The user cache, where repomem keeps what is not the repository's: the embedded models, indexes
of read-only repositories, the index seal's key, unpacked package sources."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """REPOMEM_CACHE, else $XDG_CACHE_HOME/repomem, else ~/.cache/repomem."""
    if os.environ.get("REPOMEM_CACHE"):
        return Path(os.environ["REPOMEM_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "repomem"
