"""The user cache, where repomem keeps what is not the repository's: the embedded models, indexes
of read-only repositories, the index seal's key, unpacked package sources."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """REPOMEM_CACHE, else $XDG_CACHE_HOME/repomem, else ~/.cache/repomem. A relative
    XDG_CACHE_HOME is ignored, as the XDG spec says; a relative REPOMEM_CACHE is refused by the
    CLI (cache_problem)."""
    if os.environ.get("REPOMEM_CACHE"):
        return Path(os.environ["REPOMEM_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg if xdg and os.path.isabs(xdg) else Path.home() / ".cache") / "repomem"


def cache_problem() -> str | None:
    """Why REPOMEM_CACHE cannot be used, or None. A relative folder was read from each command's
    own folder: a cache (models, the index seal's key) per folder, written into the repository,
    and every index rebuilt when a command ran from another folder."""
    value = os.environ.get("REPOMEM_CACHE")
    if value and not Path(value).expanduser().is_absolute():
        return f"REPOMEM_CACHE={value!r} must be an absolute path (or start with ~)"
    return None
