"""Whether two checkouts of repomem write the same index, byte for byte (issue 35: a refactor of the
kernels must not change one bit).

    python scripts/compare_index_bytes.py REPO BEFORE AFTER [--work DIR]

BEFORE and AFTER are checkouts (e.g. a `git worktree` of the commit before a change, and this
one). For each, a child process with that checkout first on PYTHONPATH copies REPO to
WORK/repo (the same path both times: the index records where files live), builds its index cold
through the service, then edits the copy and saves after each step: a line inserted in the
middle of the largest Python file (an edit whose rows span two threads), a function appended to
the second largest (its definitions change: call edges are patched), and a new file calling
both. After each step the child prints the SHA-256 of every file of the current snapshot; the
parent compares the two listings line by line and exits 1 on any difference.

What differs between two runs of one checkout is pinned in the child, not skipped: the snapshot
tag (`secrets.token_hex`) comes from a counter, the zip members' dates from a fixed clock,
string hashes get one seed (symbol tables are saved in set order), and the files the script
writes get fixed modification times (the index records them); the manifest is hashed without its
seal and the files' identities (compare_edit_bytes.snapshot_file_hash). Compaction is
off (`index.compact_ratio`), so an edit is applied as an edit, not a rebuild. What differs between
two checkouts by design is pinned too: the manifest's builder digest, a hash of repomem's own index
sources (`index/builder_version.py`), which any change to those sources changes.
"""

from __future__ import annotations

import argparse
import difflib
import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

FIRST_MTIME_NS = 4_000_000_000 * 10**9  # the files the script writes: one second apart, after any real one


def pin_volatile_inputs() -> None:
    """As compare_edit_bytes pins them (snapshot tags, zip dates, the builder digest); imported in
    the child, so its repomem is the checkout's."""
    from compare_edit_bytes import pin_volatile_inputs as pin_as_the_edit_comparison

    pin_as_the_edit_comparison()


def snapshot_listing(root: Path, service) -> list[str]:  # type: ignore[no-untyped-def]
    # The snapshot the service just saved (the one CURRENT names), found without importing the
    # index's modules: their names differ between the two checkouts a comparison runs.
    from compare_edit_bytes import snapshot_file_hash

    current = service.index_for_measurement().snapshot
    return [f"{path.name} {snapshot_file_hash(path)}" for path in sorted(current.iterdir())]


def build_and_edit(repo: Path, work: Path) -> int:
    """The child: build, edit, and print each snapshot's files with their hashes."""
    import dataclasses

    from repomem.config import load_config
    from repomem.failures import Failure
    from repomem.service import RepoService

    pin_volatile_inputs()
    root = work / "repo"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(repo, root, ignore=shutil.ignore_patterns(".repomem", "__pycache__", ".git"))
    config, _ = load_config(root)
    # The index in the copied tree, which each run copies afresh: with the user's cache folder the
    # second checkout's "cold build" found the first one's index and updated it.
    config = dataclasses.replace(config, index=dataclasses.replace(config.index, compact_ratio=1e9, cache_dir=""))
    service = RepoService.open(root, config)
    assert not isinstance(service, Failure), service
    mtimes = itertools.count(FIRST_MTIME_NS, 10**9)

    def write(path: Path, text: str) -> None:
        path.write_text(text, encoding="utf-8")
        stamp = next(mtimes)
        os.utime(path, ns=(stamp, stamp))

    def step(name: str) -> None:
        result = service.ensure_index()
        if isinstance(result, Failure):
            raise SystemExit(f"{name}: {result.message}")
        if name == "cold build" and result.action != "built":
            raise SystemExit(f"the cold build was {result.action!r}: an index of the copy was there already")
        print(f"== {name} {result.action}")
        print("\n".join(snapshot_listing(root, service)), flush=True)

    step("cold build")
    python_files = sorted((p for p in root.rglob("*.py") if ".repomem" not in p.parts),
                          key=lambda p: (-len(p.read_text(encoding="utf-8", errors="replace").splitlines()), str(p)))
    largest, second = python_files[0], python_files[1]
    lines = largest.read_text(encoding="utf-8").splitlines(keepends=True)
    middle = len(lines) // 2
    write(largest, "".join([*lines[:middle], "# an edit inside a body\n", *lines[middle:]]))
    step(f"line inserted in {largest.relative_to(root)}")
    write(second, second.read_text(encoding="utf-8") + "\n\ndef added_by_the_edit(value):\n    return value\n")
    step(f"function appended to {second.relative_to(root)}")
    write(root / "added_by_the_edit.py", "def use_it(x):\n    return added_by_the_edit(x)\n")
    step("new file")
    return 0


def listing_of(checkout: Path, repo: Path, work: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONHASHSEED": "0"}
    done = subprocess.run([sys.executable, __file__, "--child", str(repo), str(work)], env=env, cwd=checkout,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: exit {done.returncode}\n{done.stderr[-4000:]}")
    return done.stdout.splitlines()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo", type=Path, help="repository to index (copied, left untouched)")
    parser.add_argument("before", type=Path, nargs="?", help="checkout of repomem")
    parser.add_argument("after", type=Path, nargs="?", help="another checkout of repomem")
    parser.add_argument("--work", type=Path, default=Path("/tmp/compare-index-bytes"), help="scratch folder")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return build_and_edit(args.repo.resolve(), Path(args.before).resolve())
    if args.before is None or args.after is None:
        parser.error("give two checkouts")
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    before = listing_of(args.before.resolve(), args.repo.resolve(), work)
    after = listing_of(args.after.resolve(), args.repo.resolve(), work)
    files = sum(1 for line in after if not line.startswith("=="))
    steps = sum(1 for line in after if line.startswith("=="))
    if before == after:
        print(f"identical: {steps} snapshots, {files} files, every byte the same")
        return 0
    sys.stdout.writelines(difflib.unified_diff([line + "\n" for line in before], [line + "\n" for line in after],
                                               str(args.before), str(args.after)))
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
