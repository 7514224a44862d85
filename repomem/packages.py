"""Source trees of pinned packages, for benchmarks and evaluation: one fetcher per kind.

- `package_source`: the Python package index. `pip download --no-deps` fetches the sdist when pip
  can take it without building (else the wheel); hash-checked when a sha256 is pinned.
- `npm_package_source`: an npm package's tarball (`npm pack`), sha256-pinned.
- `deb_package_source`: a Debian package (`apt-get download`), sha256-pinned, never installed.
- `debian_source_package_source`: the upstream tarball of a Debian source package
  (`apt-get source --download-only` through a temporary sources list), sha256-pinned.

Each archive is unpacked (never built, never run) into the user cache, once.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from repomem.cache import cache_root
from repomem.failures import Failure, FailureKind


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# pip, when it cannot reach the index, retries with warnings and then says the package has no
# matching distribution, as if the pin were wrong: the warnings hold the cause.
_UNREACHABLE = re.compile(r"Failed to establish a new connection|Connection ?(?:refused|reset|aborted)|"
                          r"Name or service not known|Temporary failure in name resolution|timed out|"
                          r"Could not fetch URL|SSLError|ProxyError", re.IGNORECASE)


def pip_download_failure(stderr: str) -> str:
    """Why `pip download` failed, in one line (the models' parts and the benchmarks' sources)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    unreachable = next((line for line in lines if _UNREACHABLE.search(line)), None)
    if unreachable is not None:
        cause = re.search(r"\[Errno -?\d+\] ([^'\")]+)", unreachable)
        return ("the package index could not be reached"
                f" ({cause.group(1).strip() if cause else _UNREACHABLE.search(unreachable).group(0)}); "
                "check the network or pip's index-url")
    return (lines or ["no wheel"])[-1]


def _download(requirement: str, destination: Path) -> Path | Failure:
    attempts = (["--no-binary", ":all:"], ["--only-binary", ":all:"])
    last_error = ""
    for flags in attempts:
        with tempfile.TemporaryDirectory(dir=destination) as scratch:
            result = subprocess.run(
                # -P and the scratch folder: nothing of the caller's folder is imported in place of pip
                [sys.executable, "-P", "-m", "pip", "download", "--no-deps", *flags,
                 "-d", scratch, requirement],
                capture_output=True, text=True, timeout=600, cwd=scratch,
            )
            files = list(Path(scratch).iterdir())
            if result.returncode == 0 and len(files) == 1:
                final = destination / files[0].name
                shutil.move(str(files[0]), final)
                return final
            last_error = pip_download_failure(result.stderr)
    return Failure(FailureKind.DOWNLOAD_FAILED, f"pip could not download {requirement}: {last_error}")


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
        return Failure(FailureKind.UNPINNED, f"{requirement}: pin an exact version (name==version)")
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
        return Failure(FailureKind.HASH_MISMATCH, f"{archive.name} does not match its pinned sha256")
    partial = cache / f".partial-{unpacked.name}"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        _unpack(archive, partial)
    except (OSError, ValueError, tarfile.TarError, zipfile.BadZipFile) as error:
        shutil.rmtree(partial, ignore_errors=True)
        return Failure(FailureKind.UNPACK_FAILED, f"cannot unpack {archive.name}: {error}")
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


# -- npm packages and Debian packages (benchmarks in other languages) -----------------------------

# Exact versions only: a range would let the registry pick a different archive later.
NPM_SPEC = re.compile(r"(?:@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*@\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.+-]+)?")
DEB_SPEC = re.compile(r"[a-z0-9][a-z0-9.+-]+=(?:\d+:)?[0-9][A-Za-z0-9.+~-]*")
_TOOL_TIMEOUT_S = 600


def npm_package_source(spec: str, sha256: str, cache: Path | None = None) -> Path | Failure:
    """Unpacked `npm pack` tarball of `name@version` (its top folder, `package/` as npm packs it)."""
    if not NPM_SPEC.fullmatch(spec):
        return Failure(FailureKind.UNPINNED, f"{spec}: pin an exact npm version (name@1.2.3)")
    key = "npm-" + spec.lstrip("@").replace("/", "+").replace("@", "-")
    unpacked = _pinned_archive(key, sha256, cache, lambda scratch: _npm_pack(spec, scratch), _unpack_tar)
    return unpacked if isinstance(unpacked, Failure) else _source_top(unpacked)


def deb_package_source(spec: str, sha256: str, cache: Path | None = None) -> Path | Failure:
    """The file tree of the Debian package `name=version` (its root: `usr/...`), extracted from the
    .deb that `apt-get download` fetches; never installed, its maintainer scripts never run."""
    if not DEB_SPEC.fullmatch(spec):
        return Failure(FailureKind.UNPINNED, f"{spec}: pin an exact Debian version (name=version)")
    key = "deb-" + spec.replace("=", "-").replace(":", "%3a")
    return _pinned_archive(key, sha256, cache, lambda scratch: _apt_download(spec, scratch), _unpack_deb)


def debian_source_package_source(spec: str, sha256: str, cache: Path | None = None) -> Path | Failure:
    """The upstream sources (the `.orig.tar.*` tarball) of the Debian source package `name=version`,
    unpacked (its top folder). The `deb-src` line lives in a temporary sources list with its own
    package lists: the machine's apt configuration and state are never changed."""
    if not DEB_SPEC.fullmatch(spec):
        return Failure(FailureKind.UNPINNED, f"{spec}: pin an exact Debian version (name=version)")
    key = "debsrc-" + spec.replace("=", "-").replace(":", "%3a")
    unpacked = _pinned_archive(key, sha256, cache, lambda scratch: _apt_source(spec, scratch), _unpack_tar)
    return unpacked if isinstance(unpacked, Failure) else _source_top(unpacked)


def _pinned_archive(
    key: str, sha256: str, cache: Path | None, download: Callable[[Path], Path | Failure],
    unpack: Callable[[Path, Path], None],
) -> Path | Failure:
    """`cache/key`, the unpacked archive whose SHA-256 is `sha256`: downloaded into a scratch
    folder, checked, unpacked beside it and renamed into place, so a failure leaves no partial tree.
    The marker keeps the archive's hash: a dev set pinning another hash fetches again."""
    cache = cache or cache_root() / "packages"
    unpacked = cache / key
    marker = unpacked / ".complete"
    if marker.is_file() and marker.read_text(encoding="utf-8").split()[-1:] == [sha256]:
        return unpacked
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as scratch:
        archive = download(Path(scratch))
        if isinstance(archive, Failure):
            return archive
        actual = sha256_of(archive)
        if actual != sha256:
            return Failure(FailureKind.HASH_MISMATCH, f"{archive.name} has sha256 {actual}, the pin says {sha256}")
        partial = cache / f".partial-{key}"
        shutil.rmtree(partial, ignore_errors=True)
        try:
            unpack(archive, partial)
        except (OSError, ValueError, tarfile.TarError, subprocess.SubprocessError) as error:
            shutil.rmtree(partial, ignore_errors=True)
            return Failure(FailureKind.UNPACK_FAILED, f"cannot unpack {archive.name}: {error}")
        (partial / ".complete").write_text(f"{archive.name} {actual}\n", encoding="utf-8")
        shutil.rmtree(unpacked, ignore_errors=True)
        os.replace(partial, unpacked)
    return unpacked


def _run_tool(command: list[str], cwd: Path, what: str) -> Failure | None:
    """Run a download tool; a missing tool, a timeout or a failure is one Failure line."""
    if shutil.which(command[0]) is None:
        return Failure(FailureKind.DOWNLOAD_FAILED, f"{command[0]} is not installed; it is needed to fetch {what}")
    try:
        result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=_TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Failure(FailureKind.DOWNLOAD_FAILED, f"{command[0]} took over {_TOOL_TIMEOUT_S} s to fetch {what}")
    except OSError as error:
        return Failure(FailureKind.DOWNLOAD_FAILED, f"cannot run {command[0]} to fetch {what}: {error}")
    if result.returncode != 0:
        return Failure(FailureKind.DOWNLOAD_FAILED,
                       f"{command[0]} could not fetch {what}: {_first_error(result.stderr)}")
    return None


def _first_error(stderr: str) -> str:
    """The line that says what went wrong: npm ends with where its log is, apt with warnings."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("E:") or ("error" in line.lower() and "log" not in line)]
    return (errors or lines or ["no message"])[0 if errors else -1]


def _only_file(scratch: Path, suffix: str, what: str) -> Path | Failure:
    found = sorted(p for p in scratch.iterdir() if p.name.endswith(suffix) and p.is_file())
    if len(found) != 1:
        return Failure(FailureKind.DOWNLOAD_FAILED, f"expected one {suffix} file for {what}, found {len(found)}")
    return found[0]


def _npm_pack(spec: str, scratch: Path) -> Path | Failure:
    # --ignore-scripts: packing a registry package runs nothing anyway; this keeps it so.
    failure = _run_tool(["npm", "pack", spec, "--ignore-scripts", "--pack-destination", str(scratch)], scratch, spec)
    return failure or _only_file(scratch, ".tgz", spec)


def _apt_download(spec: str, scratch: Path) -> Path | Failure:
    failure = _run_tool(["apt-get", "download", spec], scratch, spec)
    return failure or _only_file(scratch, ".deb", spec)


# The release this machine runs (Debian 12); the archive key that signs it ships with apt.
DEBIAN_SOURCES = ("deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
                  "http://deb.debian.org/debian bookworm main\n")


def _apt_source(spec: str, scratch: Path) -> Path | Failure:
    state = scratch / "apt"
    for folder in ("lists/partial", "cache/archives/partial", "sources.list.d"):
        (state / folder).mkdir(parents=True)
    (state / "sources.list").write_text(DEBIAN_SOURCES, encoding="utf-8")
    private = ["-o", f"Dir::Etc::sourcelist={state / 'sources.list'}",
               "-o", f"Dir::Etc::sourceparts={state / 'sources.list.d'}",
               "-o", f"Dir::State::Lists={state / 'lists'}", "-o", f"Dir::Cache={state / 'cache'}"]
    failure = _run_tool(["apt-get", *private, "update"], scratch, f"the Debian source index for {spec}")
    downloads = scratch / "downloads"
    downloads.mkdir()
    failure = failure or _run_tool(["apt-get", *private, "source", "--download-only", spec], downloads, spec)
    if failure is not None:
        return failure
    # A native package has one tarball (name_version.tar.*), any other an .orig one and Debian's changes.
    tarballs = sorted(p for p in downloads.iterdir() if ".tar." in p.name and ".debian.tar." not in p.name
                      and "asc" not in p.suffix)
    if len(tarballs) != 1:
        return Failure(FailureKind.DOWNLOAD_FAILED, f"expected one upstream tarball for {spec}, found {len(tarballs)}")
    return tarballs[0]


def _files_and_folders_only(member: tarfile.TarInfo, destination: str) -> tarfile.TarInfo | None:
    """Regular files and folders, named inside the destination; links and devices are dropped
    (never followed, never created), a name escaping the destination stops the unpack."""
    if not (member.isfile() or member.isdir()):
        return None
    return tarfile.data_filter(member, destination)


def _unpack_tar(archive: Path, target: Path) -> None:
    target.mkdir(parents=True)
    with tarfile.open(archive) as bundle:
        bundle.extractall(target, filter=_files_and_folders_only)


def _unpack_deb(archive: Path, target: Path) -> None:
    """dpkg-deb hands over the package's file tree as a tar stream, unpacked by the same filter as
    npm's tarballs (`dpkg-deb -x` would leave links and names to tar's own rules)."""
    if shutil.which("dpkg-deb") is None:
        raise OSError("dpkg-deb is not installed; it is needed to unpack .deb files")
    data_tar = archive.with_name(archive.name + ".data.tar")
    with open(data_tar, "wb") as handle:
        result = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(archive)], stdout=handle,
                                stderr=subprocess.PIPE, text=False, timeout=_TOOL_TIMEOUT_S)
    if result.returncode != 0:
        message = result.stderr.decode("utf-8", errors="replace").strip().splitlines() or ["no message"]
        raise ValueError(f"dpkg-deb: {message[-1]}")
    _unpack_tar(data_tar, target)
