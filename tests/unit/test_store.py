"""The on-disk index: round trip, damage and format changes, and a real kill mid-write."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np

from repomem.config import Config
from repomem.failures import Failure
from repomem.index.repo_index import RepoIndex
from repomem.index.store import current_snapshot, index_dir, load_index
from repomem.retrieval.scoring import score_fragments, top_fragments
from repomem.service import RepoService
from tests.repos import synthetic_files, write_repo

QUERY = "def grow(self, amount):\n    total_3 = func4_2(x) + Thing1(total_3).grow(x)"


def ranked(index: RepoIndex) -> list[tuple[str, int, float]]:
    top = top_fragments(index, score_fragments(index, QUERY, alpha=0.5), k=10)
    return [(f.path, f.start_line, round(f.s_rel, 9)) for f in top]


def built(root: Path) -> RepoService:
    service = RepoService.open(root)
    assert isinstance(service, RepoService)
    report = service.ensure_index()
    assert not isinstance(report, Failure)
    return service


def test_round_trip_and_lazy_structure(synthetic_repo):
    service = built(synthetic_repo)
    loaded = load_index(synthetic_repo, Config())
    assert isinstance(loaded, RepoIndex)
    assert ranked(loaded) == ranked(service.index)
    # W is stored as its upper triangle: the loaded matrix is the built one, array for array.
    for part in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(loaded.w_base, part), getattr(service.index.w_base, part))
    assert loaded.w_base.nnz > 0 and (loaded.w_base != loaded.w_base.T).nnz == 0
    assert loaded.structure_loader is not None  # queries do not need the syntax
    loaded.ensure_structure()
    fresh = service.index
    for ours, theirs in zip(loaded.syntax, fresh.syntax):
        np.testing.assert_array_equal(ours.parent, theirs.parent)
        assert ours.calls == theirs.calls and ours.definitions == theirs.definitions
    assert loaded.calls.keys() == fresh.calls.keys()
    for file_id, edges in fresh.calls.items():
        np.testing.assert_array_equal(loaded.calls[file_id], edges)


def test_incremental_save_reuses_base_files(synthetic_repo):
    built(synthetic_repo)
    first = current_snapshot(index_dir(synthetic_repo, Config()))
    (synthetic_repo / "lib/part0/mod3.py").write_text("def replaced():\n    return 1\n", encoding="utf-8")
    again = RepoService.open(synthetic_repo)
    report = again.ensure_index()
    assert report.action == "updated" and report.changed == 1
    second = current_snapshot(index_dir(synthetic_repo, Config()))
    assert second != first
    assert os.stat(first / "base.npz").st_ino == os.stat(second / "base.npz").st_ino  # hard link
    reloaded = load_index(synthetic_repo, Config())
    assert isinstance(reloaded, RepoIndex)
    assert ranked(reloaded) == ranked(again.index)
    assert reloaded.record("lib/part0/mod3.py").n_fragments == 1


def test_unknown_format_and_damage_mean_rebuild(synthetic_repo):
    built(synthetic_repo)
    directory = index_dir(synthetic_repo, Config())
    snapshot = current_snapshot(directory)
    manifest = json.loads((snapshot / "manifest.json").read_text())
    manifest["format"] = 999
    (snapshot / "manifest.json").write_text(json.dumps(manifest))
    assert load_index(synthetic_repo, Config()).kind == "old-index"
    report = RepoService.open(synthetic_repo).ensure_index()
    assert report.action == "built" and "format" in report.reason

    snapshot = current_snapshot(directory)
    (snapshot / "delta.npz").write_bytes(b"not a zip file at all")
    failure = load_index(synthetic_repo, Config())
    assert isinstance(failure, Failure) and failure.kind == "damaged-index"
    report = RepoService.open(synthetic_repo).ensure_index()
    assert report.action == "built" and "damaged" in report.reason

    (directory / "CURRENT").write_text("../../etc\n")
    assert load_index(synthetic_repo, Config()).kind == "damaged-index"
    (directory / "CURRENT").write_text("snap-missing\n")
    assert load_index(synthetic_repo, Config()).kind == "damaged-index"
    report = RepoService.open(synthetic_repo).ensure_index()
    assert report.action == "built"
    assert isinstance(load_index(synthetic_repo, Config()), RepoIndex)


def test_config_change_means_rebuild(synthetic_repo):
    built(synthetic_repo)
    (synthetic_repo / "repomem.toml").write_text("[fragments]\nwindow_lines = 30\n")
    failure = load_index(synthetic_repo, RepoService.open(synthetic_repo).config)
    assert isinstance(failure, Failure) and failure.kind == "config-changed"


WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from repomem.config import Config
    from repomem.index.store import index_dir, load_index, save_index
    root = Path(sys.argv[1])
    index = load_index(root, Config())
    index.ensure_structure()
    print("ready", flush=True)
    while True:
        index.generation += 1
        index.base_id = ""  # force a full rewrite of every file: the longest window to be killed in
        save_index(index, index_dir(root, Config()), None)
""")


def test_killed_writer_leaves_a_loadable_index(tmp_path):
    root = write_repo(tmp_path / "big", synthetic_files(30, n_functions=30))
    service = built(root)
    expected = ranked(service.index)
    rng = random.Random(7)
    directory = index_dir(root, Config())
    interrupted_writes = 0
    for attempt in range(8):
        process = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], stdout=subprocess.PIPE, text=True)
        assert process.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 0.6))
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        interrupted_writes += bool(list(directory.glob("tmp-*")))
        loaded = load_index(root, Config())
        assert isinstance(loaded, RepoIndex), f"attempt {attempt}: {loaded}"
        assert ranked(loaded) == expected
    # Evidence that kills landed mid-write: half-written snapshot folders were left behind.
    assert interrupted_writes >= 2
    (root / "lib/part0/mod0.py").write_text("def changed():\n    return 0\n", encoding="utf-8")
    report = RepoService.open(root).ensure_index()  # the next writer cleans up after the killed ones
    assert report.action == "updated"
    assert not list(directory.glob("tmp-*"))
    assert len(list(directory.glob("snap-*"))) <= 1 + Config().index.keep_snapshots
    assert isinstance(load_index(root, Config()), RepoIndex)


def test_pruned_snapshot_structure_means_rebuild(synthetic_repo):
    built(synthetic_repo)
    service = RepoService.open(synthetic_repo)
    loaded = load_index(synthetic_repo, Config())
    assert isinstance(loaded, RepoIndex) and loaded.structure_loader is not None
    service.index = loaded
    # Another process replaced and pruned the snapshot this one loaded lazily.
    for name in ("files.npz", "symbols.json.gz"):
        (loaded.snapshot / name).unlink()
    (synthetic_repo / "lib/part0/mod0.py").write_text("def edited():\n    return 1\n", encoding="utf-8")
    report = service.ensure_index()
    assert report.action == "built" and "structure unreadable" in report.reason
    assert report.index_bytes > 0
    assert service.retrieve("edited", k=1)[0].path == "lib/part0/mod0.py"


def test_cache_dir_keeps_the_repository_clean(synthetic_repo, tmp_path, monkeypatch):
    user_config = tmp_path / "user.toml"  # a path setting: the user's own config, not the repository's
    user_config.write_text(f'[index]\ncache_dir = "{tmp_path / "cache"}"\n')
    monkeypatch.setenv("REPOMEM_CONFIG", str(user_config))
    service = built(synthetic_repo)
    assert not (synthetic_repo / ".repomem").exists()
    assert list((tmp_path / "cache").glob("synthetic-*/CURRENT"))
    assert isinstance(load_index(synthetic_repo, service.config), RepoIndex)


def test_touched_files_are_not_reread_forever(synthetic_repo):
    built(synthetic_repo)
    path = synthetic_repo / "lib/part1/mod1.py"
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    report = RepoService.open(synthetic_repo).ensure_index()
    assert report.action == "unchanged"
    loaded = load_index(synthetic_repo, Config())
    assert loaded.record("lib/part1/mod1.py").mtime_ns == 1_000_000_000  # the new stat was saved


def test_snapshot_names_keep_growing_across_full_builds(synthetic_repo):
    service = built(synthetic_repo)
    (synthetic_repo / "lib/part0/mod0.py").write_text("a = 1\n")
    service.ensure_index()
    before = current_snapshot(index_dir(synthetic_repo, Config()))
    RepoService.open(synthetic_repo).ensure_index(full=True)
    after = current_snapshot(index_dir(synthetic_repo, Config()))
    assert int(after.name.split("-")[1]) > int(before.name.split("-")[1])
