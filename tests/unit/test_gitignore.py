"""`.gitignore` rules where there is no git (repomem/index/gitignore.py): git's semantics, checked
against git itself, and matching time that stays polynomial whatever a repository writes there."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from repomem.config import ScanConfig
from repomem.index.gitignore import ignores, parse_rule
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
