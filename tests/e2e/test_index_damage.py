"""An index on disk is never trusted blindly: one a repository ships is rebuilt, one damaged in any
array is rebuilt (or, for damage that leaves every invariant true, answers as before), and nothing
that reaches the compiled kernels crashes the process. Issue 34, severe 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from repomem.failures import Failure
from repomem.index import provenance
from repomem.service import RepoService
from tests.cli_process import run
from tests.index_damage import EDITED, answer
from tests.repos import write_repo

ROOT = Path(__file__).resolve().parents[2]

FILES = {
    # No deadline (the same answer on a busy host); no compaction of this small index after one edit.
    "repomem.toml": "[retrieval]\ntime_budget_ms = 0\n[index]\ncompact_ratio = 100.0\n",
    "pkg/__init__.py": "from .helpers import helper\n",
    "pkg/helpers.py": "def helper(values):\n    return [v * 2 for v in values]\n\n\n"
                      "def unused(x):\n    return x\n",
    EDITED: "from .helpers import helper\n\n\ndef total(values):\n    result = helper(values)\n"
            "    return sum(result)\n",
    **{f"pkg/mod{i}.py": "from .helpers import helper\n\n\n" + "".join(
        f"def f{i}_{j}(values):\n    result = helper(values)\n    return result[{j}]\n\n\n" for j in range(4))
       for i in range(4)},
}
# Damage no invariant can tell from a real value once the seal is made to match (a parent moved
# to another earlier node, a weight changed within (0, 1]): checked to not crash, not to be caught.
UNDETECTABLE = {"zero", "reversed", "flipped"}


def _indexed(repo: Path) -> Path:
    """`repo` written and indexed, with one edit saved."""
    write_repo(repo, FILES)
    service = RepoService.open(repo)
    assert not isinstance(service, Failure)
    assert not isinstance(service.ensure_index(), Failure)
    # One edit saved: dead fragments, W's updates and a second postings segment are on disk too.
    (repo / "pkg/mod0.py").write_text(FILES["pkg/mod0.py"] + "def g(values):\n    return helper(values)\n")
    assert not isinstance(RepoService.open(repo).ensure_index(), Failure)
    return repo


SHARDS = 2  # the cases split over two processes side by side (each one core's work)


@pytest.mark.slow
def test_every_damaged_array_is_rebuilt_never_a_crash_never_a_wrong_answer(tmp_path: Path):
    shards = []
    for shard in range(SHARDS):
        folder = tmp_path / f"shard{shard}"
        repo = _indexed(folder / "repo")
        with open(folder / "out", "w") as out, open(folder / "err", "w") as err:
            shards.append((folder, subprocess.Popen(
                [sys.executable, "-m", "tests.index_damage", str(repo), str(shard), str(SHARDS)], cwd=ROOT,
                stdout=out, stderr=err)))
    references, cases = [], []
    for folder, process in shards:
        process.wait(timeout=900)
        lines = [json.loads(line) for line in (folder / "out").read_text().splitlines()]
        assert process.returncode == 0, (process.returncode, lines[-1] if lines else None,
                                         (folder / "err").read_text()[-2000:])
        references.append(lines[0])
        cases += [c for c in lines[1:] if "action" in c]
    reference = references[0]
    assert all(r["incremental"][2] == reference["incremental"][2] and r["rebuilt"][2] == reference["rebuilt"][2]
               for r in references)  # the shards' copies answer alike
    assert reference["incremental"][2] and reference["rebuilt"][2]
    assert len(cases) >= 150, len(cases)
    arrays = {(c["file"], c["array"]) for c in cases}
    assert {("files.npz", "parent"), ("files.npz", "node_offsets"), ("files.npz", "cover_node"),
            ("delta.npz", "doc_len"), ("delta.npz", "df"), ("base.npz", "wu_data"),
            ("delta.npz", "fragment_start"), ("manifest.json", "records"), ("symbols.json.gz", "symbols")} <= arrays
    tally: Counter = Counter()
    for case in cases:
        label = f"{case['file']}:{case['array']} {case['damage']} (resealed={case['resealed']})"
        assert case["action"] != "failed", (label, case["warning"])
        if case["action"] == "built":  # found damaged, or (a base that lost its rows) due for compaction
            tally["rebuilt"] += 1
            assert case["same_as"] == "rebuilt", (label, case)
        else:
            tally["kept"] += 1
            assert case["same_as"] == "incremental", (label, case)  # never a wrong answer
        if not case["resealed"]:
            assert case["action"] == "built" and "not the file this index wrote" in case["warning"] or \
                "damaged" in case["warning"], (label, "the seal let damaged bytes through", case["warning"])
        elif case["damage"] not in UNDETECTABLE:
            assert case["action"] == "built", (label, "the checks let structural damage through")
    print(f"{len(cases)} damaged indexes over {len(arrays)} arrays: {dict(tally)}")


def test_an_index_a_repository_ships_is_rebuilt_not_trusted(tmp_path: Path, monkeypatch):
    """A clone carries the index its author built (another machine's key): it is not this one's."""
    author = write_repo(tmp_path / "author", FILES)
    environment = {**os.environ, "REPOMEM_CACHE": str(tmp_path / "author-cache")}
    built = run("index", str(author), env=environment)
    assert built.returncode == 0, built.stderr
    clone = tmp_path / "clone"
    shutil.copytree(author, clone, symlinks=True)
    action, warning, top = answer(clone)
    assert action == "built" and "not written on this machine" in warning, (action, warning)
    assert top
    assert answer(clone)[:2] == ("unchanged", "")  # the rebuilt one is this machine's


def test_without_a_key_indexes_are_rebuilt_with_a_reason(tmp_path: Path, monkeypatch):
    cache = tmp_path / "cache"
    cache.write_text("a file where the cache folder should be")
    monkeypatch.setenv("REPOMEM_CACHE", str(cache))
    monkeypatch.setattr(provenance, "_key", None)
    repo = write_repo(tmp_path / "repo", FILES)
    assert answer(repo)[0] == "built"
    action, warning, _ = answer(repo)
    assert action == "built" and "cannot keep the index key" in warning, (action, warning)
