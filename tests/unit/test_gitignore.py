"""`.gitignore` rules where there is no git (repomem/index/gitignore.py): git's semantics, checked
against git itself, and matching time that stays polynomial whatever a repository writes there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from repomem.config import ScanConfig
from repomem.index.gitignore import IgnoreRules, ignores, parse_rule, read_ignore_file
from repomem.index.scan import walk_files


def _verdict(lines: list[str], path: str, is_dir: bool = False) -> bool | None:
    return ignores([rule for rule in map(parse_rule, lines) if rule is not None], path, is_dir)


# (the .gitignore's lines, a path relative to its folder, is it a folder, git's verdict)
SEMANTICS = [
    (["*.log"], "deep/down/x.log", False, True),  # a name alone matches at any depth
    (["/top.py"], "sub/top.py", False, None),  # a leading slash anchors to the .gitignore's folder
    (["/top.py"], "top.py", False, True),
    (["doc/*.txt"], "doc/a/b.txt", False, None),  # a slash in the middle anchors too; * stops at /
    (["build/"], "build", False, None),  # a trailing slash: folders only
    (["build/"], "x/build", True, True),
    (["**/foo"], "foo", True, True),  # leading **/: any folder, none included
    (["a/**/b"], "a/b", False, True),  # /**/: zero or more folders
    (["a/**/b"], "a/x/y/b", False, True),
    (["abc/**"], "abc", True, None),  # trailing /**: everything inside, not the folder itself
    (["abc/**"], "abc/x/y", False, True),
    (["*.py", "!keep.py"], "keep.py", False, False),  # the last matching rule decides
    (["\\#hash", "# comment"], "#hash", False, True),
    (["\\!bang"], "!bang", False, True),
    (["space\\ "], "space ", False, True),  # an escaped trailing space stays, others go
    (["trail   "], "trail", False, True),
    (["[a-c]x"], "bx", False, True),
    (["[!a-c]x"], "dx", False, True),
    (["[[:digit:]]x"], "7x", False, True),
    (["a?c"], "a/c", False, None),  # ? never matches a slash
    (["[abc"], "[abc", False, None),  # malformed: matches nothing, as in git
    (["trailing\\"], "trailing\\", False, None),
    (["a**b"], "axxb", False, True),  # stars inside a name are one star
    (["a/***/b"], "a/x/y/b", False, True),  # git reads a name of stars as **
]


@pytest.mark.parametrize("lines, path, is_dir, expected", SEMANTICS, ids=[f"{s[0]}-{s[1]}" for s in SEMANTICS])
def test_gitignore_semantics(lines: list[str], path: str, is_dir: bool, expected: bool | None):
    assert _verdict(lines, path, is_dir) is expected


GIT_TREE = {
    ".gitignore": """
        *.log
        /only_top.py
        docs/**/draft_*.py
        generated/
        !generated_keep.py
        tmp*
        !tmp_keep.py
        **/cache/**
        [a-c]?_*.py
        """,
    "pkg/.gitignore": "local_*.py\n!local_keep.py\n/anchored.py\n",
    "only_top.py": "", "pkg/only_top.py": "", "x.log": "", "pkg/deep/y.log": "",
    "docs/draft_a.py": "", "docs/v1/draft_b.py": "", "docs/v1/v2/final.py": "",
    "generated/out.py": "", "src/generated/out.py": "", "generated_keep.py": "",
    "tmp_scratch.py": "", "tmp_keep.py": "", "tmpdir/a.py": "",
    "lib/cache/c.py": "", "lib/cached.py": "", "ab_x.py": "", "dz_x.py": "",
    "pkg/local_a.py": "", "pkg/local_keep.py": "", "pkg/anchored.py": "", "pkg/sub/anchored.py": "",
    "pkg/sub/local_b.py": "",
}


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git as the reference")
def test_the_walk_lists_what_git_lists(tmp_path: Path):
    """Without git, the walk honours .gitignore files as git does (git ls-files on the same tree)."""
    for relative, text in GIT_TREE.items():
        path = tmp_path / "tree" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    root = tmp_path / "tree"
    walked = set(walk_files(root, ScanConfig()))
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-o", "--exclude-standard", "-z"],
                            capture_output=True, text=True, check=True).stdout.split("\0")
    assert walked == {name for name in listed if name}
    assert "pkg/local_keep.py" in walked and "pkg/sub/anchored.py" in walked and "pkg/anchored.py" not in walked


def _walked_and_listed(root: Path) -> tuple[set[str], set[str]]:
    """The walk's files without git, then git's (`git ls-files -o`) on the same tree."""
    walked = set(walk_files(root, ScanConfig()))
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-o", "--exclude-standard", "-z"],
                            capture_output=True, text=True, check=True).stdout.split("\0")
    return walked, {name for name in listed if name}


# A .gitignore's bytes as git reads them: a BOM at the start is skipped, lines end at "\n" (one
# "\r" before it dropped), a lone "\r" or "\f" stays in the line, a NUL ends the line's pattern.
RAW_GITIGNORES = {
    "a BOM": b"\xef\xbb\xbfa.py\nb.py\n",
    "a BOM and CRLF": b"\xef\xbb\xbfa.py\r\nb.py\r\n",
    "lone CRs": b"a.py\rb.py\r",
    "a form feed": b"a.py\x0cb.py\n",
    "a NUL": b"a.py\x00c.py\nb.py\n",
}


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git as the reference")
@pytest.mark.parametrize("raw", RAW_GITIGNORES.values(), ids=list(RAW_GITIGNORES))
def test_the_walk_reads_a_gitignore_as_git_does(tmp_path: Path, raw: bytes):
    root = tmp_path / "tree"
    root.mkdir()
    (root / ".gitignore").write_bytes(raw)
    for name in ("a.py", "b.py", "c.py"):
        (root / name).write_text("x = 1\n")
    walked, listed = _walked_and_listed(root)
    assert walked == listed


def _git_version() -> tuple[int, ...]:
    if shutil.which("git") is None:
        return ()
    words = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.split()
    return tuple(int(part) for part in words[2].split(".")[:2]) if len(words) > 2 else ()


@pytest.mark.skipif(_git_version() < (2, 32), reason="needs git 2.32 or later as the reference")
def test_a_gitignore_that_is_a_symbolic_link_is_not_followed(tmp_path: Path):
    """git (2.32 on) does not follow a .gitignore link in the work tree: the files it names stay."""
    root = tmp_path / "tree"
    (root / "sub").mkdir(parents=True)
    (root / "rules.txt").write_text("a.py\n")
    (root / ".gitignore").symlink_to("rules.txt")
    (root / "sub" / ".gitignore").symlink_to("../rules.txt")
    for name in ("a.py", "b.py", "sub/a.py"):
        (root / name).write_text("x = 1\n")
    walked, listed = _walked_and_listed(root)
    assert walked == listed
    assert "a.py" in walked and "sub/a.py" in walked


def test_a_pathological_gitignore_line_scans_in_bounded_time(tmp_path: Path):
    """Issue 34 item 9: `*a*a…*a*b` (30 stars) against a long file name hung the scan (pathspec's
    regex backtracked exponentially: 12 stars over 40 characters took 240 s). The scan runs in a
    child process so that a hang fails the test instead of stalling it."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / ".gitignore").write_text("*a" * 30 + "*b\n" + "**/" * 30 + "z\n" + "a/**/" * 15 + "b\n")
    (root / ("a" * 200 + ".py")).write_text("x = 1\n")
    (root / ("a" * 60 + "b")).write_text("matched by the first line\n")
    deep = root.joinpath(*["a"] * 40)
    deep.mkdir(parents=True)
    (deep / "c.py").write_text("y = 2\n")
    script = ("import sys; from pathlib import Path; from repomem.config import ScanConfig; "
              "from repomem.index.scan import walk_files; "
              "print('\\n'.join(walk_files(Path(sys.argv[1]), ScanConfig())))")
    result = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    found = set(result.stdout.split())
    assert "a" * 200 + ".py" in found and "/".join(["a"] * 40) + "/c.py" in found
    assert "a" * 60 + "b" not in found


def test_a_git_repository_under_a_folder_named_in_another_encoding_is_indexed(tmp_path):
    """A folder name that is not UTF-8 (`caf\\xe9`, Latin-1): git's answers naming the work tree
    were read as UTF-8 text, and every command there ended in an internal error
    (UnicodeDecodeError)."""
    from repomem.index.scan import git_files
    from repomem.service import RepoService
    from tests.repos import copy_example

    root = copy_example(Path(os.fsdecode(bytes(tmp_path) + b"/caf\xe9")) / "shop")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    assert "shop/report.py" in (git_files(root) or [])
    service = RepoService.open(root)
    assert isinstance(service, RepoService)
    service.ensure_index()
    assert "shop/report.py" in {record.path for record in service.index.files if record is not None}


@pytest.mark.parametrize(("lines", "sure"), [
    (["target/", "!keep.py", "**/out/", "a/**/b", "c/***/d"], True),
    (["target/", "src/a**/x"], False),  # git lets a `**` glued to a literal start cross folders
    (["target/", "!**x"], False),
    (["target/", "a\\/b"], False),  # git does not let `**\/` stand for zero folders
])
def test_a_verdict_is_sure_only_where_git_reads_every_line_the_same(tmp_path: Path, lines: list[str], sure: bool):
    """A watch leaves a new folder unwatched only where git ignores it for sure
    (index/tree_watch.py): a .gitignore holding a line git's matcher reads otherwise makes the
    verdicts of its folder uncertain; one in another folder does not."""
    (tmp_path / ".gitignore").write_text("\n".join(lines) + "\n")
    (tmp_path / "other").mkdir()
    (tmp_path / "other/.gitignore").write_text("x**/y\n")
    rules = IgnoreRules()
    rules.add_file(tmp_path / ".gitignore", "")
    rules.add(read_ignore_file(tmp_path / "other/.gitignore", "other/"))
    assert rules.ignored("target", is_dir=True)
    assert rules.surely_ignored("target", is_dir=True) == sure
    assert not rules.surely_ignored("lib", is_dir=True)
