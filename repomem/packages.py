"""Source trees of pinned packages from the Python package index, for benchmarks and evaluation.

`pip download --no-deps` fetches the sdist when pip can take it without building (else the
wheel); the archive is hash-checked when a sha256 is pinned and unpacked (never built, never
run) into the user cache, once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from repomem.failures import Failure


def cache_root() -> Path:
    """REPOMEM_CACHE, else $XDG_CACHE_HOME/repomem, else ~/.cache/repomem."""
    if os.environ.get("REPOMEM_CACHE"):
        return Path(os.environ["REPOMEM_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "repomem"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(requirement: str, destination: Path) -> Path | Failure:
    attempts = (["--no-binary", ":all:"], ["--only-binary", ":all:"])
    last_error = ""
    for flags in attempts:
        with tempfile.TemporaryDirectory(dir=destination) as scratch:
            result = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", *flags,
                 "-d", scratch, requirement],
                capture_output=True, text=True, timeout=600,
            )
            files = list(Path(scratch).iterdir())
            if result.returncode == 0 and len(files) == 1:
                final = destination / files[0].name
                shutil.move(str(files[0]), final)
                return final
            last_error = (result.stderr.strip().splitlines() or ["no file"])[-1]
    return Failure("download-failed", f"pip could not download {requirement}: {last_error}")


def _unpack(archive: Path, target: Path) -> None:
    """Unpack safely: no member may land outside `target` (tar 'data' filter, zip path check)."""
    target.mkdir(parents=True)
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as bundle:
            for member in bundle.namelist():
                if not (target / member).resolve().is_relative_to(target.resolve()):
                    raise ValueError(f"unsafe path in {archive.name}: {member}")
            bundle.extractall(target)
    else:
        with tarfile.open(archive) as bundle:
            bundle.extractall(target, filter="data")


def package_source(requirement: str, sha256: str | None = None, cache: Path | None = None) -> Path | Failure:
    """Unpacked source tree of `name==version` (the sdist's top folder, or the wheel's root)."""
    if "==" not in requirement:
        return Failure("unpinned", f"{requirement}: pin an exact version (name==version)")
    cache = cache or cache_root() / "packages"
    cache.mkdir(parents=True, exist_ok=True)
    unpacked = cache / requirement.replace("==", "-")
    if unpacked.is_dir() and (unpacked / ".complete").is_file():
        return _source_top(unpacked)
    archive = _download(requirement, cache)
    if isinstance(archive, Failure):
        return archive
    if sha256 is not None and sha256_of(archive) != sha256:
        archive.unlink()
        return Failure("hash-mismatch", f"{archive.name} does not match its pinned sha256")
    partial = cache / f".partial-{unpacked.name}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        _unpack(archive, partial)
    except (OSError, ValueError, tarfile.TarError, zipfile.BadZipFile) as error:
        shutil.rmtree(partial, ignore_errors=True)
        return Failure("unpack-failed", f"cannot unpack {archive.name}: {error}")
    (partial / ".complete").write_text(archive.name + "\n")
    shutil.rmtree(unpacked, ignore_errors=True)
    os.replace(partial, unpacked)
    archive.unlink()
    return _source_top(unpacked)


def _source_top(unpacked: Path) -> Path:
    """An sdist unpacks to one top folder; a wheel's files sit at the root."""
    entries = [p for p in unpacked.iterdir() if p.name != ".complete"]
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].name.endswith(".dist-info"):
        return entries[0]
    return unpacked
