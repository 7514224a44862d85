"""The pinned source trees the benchmarks run on, fetched from the package index on first use
(sdist unpacked, never built; hash-checked) into the user's cache."""

from __future__ import annotations

from pathlib import Path

from repomem.failures import Failure
from repomem.packages import package_source

DJANGO = "django==5.1.4"
DJANGO_SHA256 = "de450c09e91879fa5a307f696e57c851955c910a438a35e6b4c895e86bedc82a"


def django_or(repo: Path | None) -> Path:
    """`repo` if given, else Django 5.1.4's sources; a fetch that fails ends the script with its message."""
    if repo is not None:
        return repo.resolve()  # the paired benchmarks run each checkout in its own folder
    fetched = package_source(DJANGO, DJANGO_SHA256)
    if isinstance(fetched, Failure):
        raise SystemExit(fetched.message)
    return fetched
