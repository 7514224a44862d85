"""Dev-set repositories from npm and Debian archives: the TOML fields, and archives unpacked safely
(hash-checked, files and folders only, nothing outside the cache). Nothing is downloaded: `npm` and
`apt-get` are stand-ins on PATH that hand over archives built here."""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from repomem.evaluation.build import DevSet, DevSetRepo, load_devset
from repomem.failures import Failure
from repomem.packages import deb_package_source, npm_package_source, sha256_of

HEADER = 'seed = 1\ntasks_per_repo = 2\nsplits = ["line", "api"]\n'
ZOD_SHA = "a" * 64
NPM_REPO = f'[[repo]]\nname = "zod"\nsource = "npm"\npackage = "zod@3.22.4"\nsha256 = "{ZOD_SHA}"\n'


def load(tmp_path: Path, repos: str) -> DevSet | Failure:
    path = tmp_path / "devset.toml"
    path.write_text(HEADER + repos, encoding="utf-8")
    return load_devset(path)


# -- the TOML fields -------------------------------------------------------------------------------

def test_an_npm_and_a_deb_repository_with_root_and_language(tmp_path):
    deb = ('[[repo]]\nname = "cobra"\nsource = "deb"\npackage = "golang-github-spf13-cobra-dev=1.6.1-1"\n'
           f'sha256 = "{"b" * 64}"\nroot = "usr/share/gocode/src/github.com/spf13/cobra/"\nlanguage = "go"\n')
    devset = load(tmp_path, NPM_REPO.replace("\n[", '\nlanguage = "typescript"\n[', 1) + deb)
    assert isinstance(devset, DevSet), devset
    npm, cobra = devset.repos
    assert (npm.source, npm.requirement, npm.sha256, npm.root, npm.language) == (
        "npm", "zod@3.22.4", ZOD_SHA, "", "python")
    assert (cobra.source, cobra.requirement, cobra.root, cobra.language) == (
        "deb", "golang-github-spf13-cobra-dev=1.6.1-1", "usr/share/gocode/src/github.com/spf13/cobra", "go")


def test_a_pypi_repository_reads_as_before_the_source_kinds(tmp_path):
    devset = load(tmp_path, '[[repo]]\nname = "click"\nrequirement = "click==8.1.3"\n')
    assert isinstance(devset, DevSet)
    assert devset.repos == (DevSetRepo("click", "click==8.1.3", None),)


@pytest.mark.parametrize(("repo", "expected"), [
    (NPM_REPO.replace('"npm"', '"cargo"'), "unknown `source` 'cargo'"),
    (NPM_REPO.replace('package = "zod@3.22.4"\n', ""), "'zod' needs a `package`"),
    (NPM_REPO.replace('"zod@3.22.4"', '"zod@^3.22"'), "not an exact pin"),
    (NPM_REPO.replace(f'sha256 = "{ZOD_SHA}"\n', ""), "needs its archive's `sha256`"),
    (NPM_REPO + 'root = "../outside"\n', "`root`"),
    (NPM_REPO + 'root = "/etc"\n', "`root`"),
    (NPM_REPO + 'root = "src/../../outside"\n', "`root`"),
    (NPM_REPO + 'language = "cobol"\n', "unknown `language` 'cobol'"),
])
def test_bad_source_fields_are_one_clear_message(tmp_path, repo, expected):
    failure = load(tmp_path, repo)
    assert isinstance(failure, Failure), failure
    assert expected in failure.message and "\n" not in failure.message


# -- archives --------------------------------------------------------------------------------------

def tar_bytes(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as bundle:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            bundle.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def regular(name: str, text: str = "export const x = 1;\n") -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), text.encode()


def link(name: str, target: str, hard: bool = False) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = tarfile.LNKTYPE if hard else tarfile.SYMTYPE
    info.linkname = target
    return info, None


def fake_tool(bin_dir: Path, name: str, archive: Path) -> None:
    """A stand-in for `npm pack` / `apt-get download`: copies `archive` where the real tool would
    put its download (npm: after --pack-destination; apt-get: the working folder)."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / name
    script.write_text(
        "#!/bin/sh\n"
        'destination="."\n'
        'while [ $# -gt 0 ]; do [ "$1" = "--pack-destination" ] && destination="$2"; shift; done\n'
        f'cp "{archive}" "$destination/"\n',
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def tools(tmp_path, monkeypatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return bin_dir


def npm_tarball(tmp_path: Path, members) -> Path:
    archive = tmp_path / "zod-3.22.4.tgz"
    archive.write_bytes(tar_bytes(members))
    return archive


def test_an_npm_tarball_unpacks_files_and_folders_only(tmp_path, tools):
    archive = npm_tarball(tmp_path, [
        regular("package/src/index.ts"),
        link("package/src/passwd", "/etc/passwd"),
        link("package/src/up", "../../../outside"),
        link("package/src/same", "package/src/index.ts", hard=True),
    ])
    fake_tool(tools, "npm", archive)
    cache, pinned = tmp_path / "cache", sha256_of(archive)
    source = npm_package_source("zod@3.22.4", pinned, cache)
    assert source == cache / "npm-zod-3.22.4" / "package"
    found = sorted(str(p.relative_to(source)) for p in source.rglob("*"))
    assert found == ["src", "src/index.ts"]  # links are dropped, never created nor followed
    archive.unlink()  # the same pin is served by the cache, without the tool
    assert npm_package_source("zod@3.22.4", pinned, cache) == source


@pytest.mark.parametrize("escaping", ["../evil.ts", "package/../../evil.ts"])
def test_a_tarball_naming_a_path_outside_is_refused(tmp_path, tools, escaping):
    archive = npm_tarball(tmp_path, [regular("package/index.ts"), regular(escaping)])
    fake_tool(tools, "npm", archive)
    cache = tmp_path / "cache"
    failure = npm_package_source("zod@3.22.4", sha256_of(archive), cache)
    assert isinstance(failure, Failure) and failure.kind == "unpack-failed", failure
    assert not (tmp_path / "evil.ts").exists()
    assert [p.name for p in cache.iterdir()] == []  # no partial tree, no scratch folder left


def test_an_absolute_name_lands_inside_the_package(tmp_path, tools):
    archive = npm_tarball(tmp_path, [regular("package/index.ts"), regular(f"{tmp_path}/evil.ts")])
    fake_tool(tools, "npm", archive)
    unpacked = npm_package_source("zod@3.22.4", sha256_of(archive), tmp_path / "cache")
    assert isinstance(unpacked, Path) and not (tmp_path / "evil.ts").exists()
    assert (tmp_path / "cache" / "npm-zod-3.22.4" / str(tmp_path).lstrip("/") / "evil.ts").is_file()


def test_a_tarball_whose_hash_differs_is_refused_before_unpacking(tmp_path, tools):
    fake_tool(tools, "npm", npm_tarball(tmp_path, [regular("package/index.ts")]))
    cache = tmp_path / "cache"
    failure = npm_package_source("zod@3.22.4", "0" * 64, cache)
    assert isinstance(failure, Failure) and failure.kind == "hash-mismatch"
    assert "zod-3.22.4.tgz" in failure.message and [p.name for p in cache.iterdir()] == []


def test_a_missing_tool_or_a_failed_download_is_one_line(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    failure = npm_package_source("zod@3.22.4", "0" * 64, tmp_path / "cache")
    assert isinstance(failure, Failure) and "npm is not installed" in failure.message
    failing = empty / "apt-get"
    failing.write_text("#!/bin/sh\necho \"E: Version '9' for 'xy' was not found\" >&2\nexit 100\n")
    failing.chmod(0o755)
    failure = deb_package_source("xy=9", "0" * 64, tmp_path / "cache")
    assert isinstance(failure, Failure) and failure.kind == "download-failed"
    assert failure.message == "apt-get could not fetch xy=9: E: Version '9' for 'xy' was not found"


def ar_archive(members: list[tuple[str, bytes]]) -> bytes:
    """A Debian package is an `ar` archive: debian-binary, control.tar.*, data.tar.*."""
    out = [b"!<arch>\n"]
    for name, data in members:
        out.append(f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}`\n".encode())
        out.append(data + (b"\n" if len(data) % 2 else b""))
    return b"".join(out)


def crafted_deb(tmp_path: Path, data_members) -> Path:
    control = tar_bytes([regular("./control", "Package: x\nVersion: 1\nArchitecture: all\n"
                                             "Maintainer: t <t@t>\nDescription: t\n")])
    deb = tmp_path / "x_1_all.deb"
    deb.write_bytes(ar_archive([("debian-binary", b"2.0\n"), ("control.tar.gz", control),
                                ("data.tar.gz", tar_bytes(data_members))]))
    return deb


needs_dpkg_deb = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb is not installed")


@needs_dpkg_deb
def test_a_deb_built_by_dpkg_deb_unpacks_its_files_without_its_links(tmp_path, tools):
    tree = tmp_path / "tree"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text("Package: x\nVersion: 1\nArchitecture: all\n"
                                             "Maintainer: t <t@t>\nDescription: t\n")
    code = tree / "usr" / "share" / "gocode" / "src" / "x"
    code.mkdir(parents=True)
    (code / "x.go").write_text("package x\n")
    (code / "etc").symlink_to("/etc")
    deb = tmp_path / "x_1_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(tree), str(deb)], check=True, capture_output=True)
    fake_tool(tools, "apt-get", deb)
    source = deb_package_source("xy=1", sha256_of(deb), tmp_path / "cache")
    assert isinstance(source, Path), source
    unpacked = source / "usr" / "share" / "gocode" / "src" / "x"
    assert sorted(p.name for p in unpacked.iterdir()) == ["x.go"]


@needs_dpkg_deb
def test_a_crafted_deb_naming_a_path_outside_is_refused(tmp_path, tools):
    deb = crafted_deb(tmp_path, [regular("./usr/x.go", "package x\n"), regular("./../../evil.go", "package evil\n")])
    fake_tool(tools, "apt-get", deb)
    cache = tmp_path / "cache"
    failure = deb_package_source("xy=1", sha256_of(deb), cache)
    assert isinstance(failure, Failure) and failure.kind == "unpack-failed", failure
    assert not list(tmp_path.rglob("evil.go")) and [p.name for p in cache.iterdir()] == []


def test_an_unreachable_package_index_is_said_so_for_a_source_too(tmp_path, monkeypatch):
    """`pip download` of a benchmark's or dev set's source, the index unreachable: pip retries with
    warnings and ends with "No matching distribution found", as if the pin were wrong. The failure
    says the index could not be reached (the same reading as the models' parts)."""
    import repomem.packages as packages

    said = ("WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection "
            "broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f>: Failed "
            "to establish a new connection: [Errno 111] Connection refused')': /simple/django/\n"
            "ERROR: Could not find a version that satisfies the requirement django==5.1.4 (from versions: none)\n"
            "ERROR: No matching distribution found for django==5.1.4\n")
    monkeypatch.setattr(packages.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, "", said))
    failure = packages._download("django==5.1.4", tmp_path)
    assert isinstance(failure, Failure)
    assert failure.message == ("pip could not download django==5.1.4: the package index could not be reached "
                               "(Connection refused); check the network or pip's index-url")
