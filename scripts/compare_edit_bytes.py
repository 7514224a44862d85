"""The bytes of an index after a scripted sequence of edits, to compare two checkouts (issue 35).

    PYTHONPATH=/path/to/checkout python scripts/compare_edit_bytes.py REPO WORK > hashes.txt

Copies REPO to WORK/repo, builds its index through the service (`RepoService.ensure_index`), then
edits the copy as a user does and saves after each step: a comment inserted in the middle of the
largest file (its definitions keep their shape), a function added to the second largest (they do
not), a new file that imports both, the most imported module deleted, an unsaved editor buffer
(`set_buffer` + `save`), a file saved while no buffer overlays it (`file_changed` + `save`), and
two changes, a new file and a removal at once. After each step it prints the SHA-256 of every file
of the current snapshot. Run it with two checkouts on PYTHONPATH and `diff` the outputs: the same
lines mean the same index bit for bit.

What would differ between two runs of one checkout is pinned, not skipped: the snapshot's random
tag (`secrets.token_hex`) comes from a counter, the zip members' dates from a fixed clock, and
every file the script writes gets a fixed modification time (the index records it), and string
hashes get one seed; the builder digest (a hash of repomem's index sources, in the manifest) is
pinned, so that two checkouts compare on what they write. (tree-sitter's query captures come in
a varying order; `capture_nodes` sorts them itself, so the call sites are compared in the order
the index saves them.) The manifest is hashed without its seal and the snapshot files'
identities (inodes and write times: `snapshot_file_hash`). Compaction is
turned off (`index.compact_ratio`): on a small repository one edit would rebuild the index whole
instead of editing it.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import os
import re
import secrets
import shutil
import sys
import time
from pathlib import Path

from repomem.config import load_config
from repomem.failures import Failure
from repomem.service import RepoService

# Modification times the script gives what it writes (ns): one second apart, after any real file's.
FIRST_MTIME_NS = 4_000_000_000 * 10**9
FIXED_CLOCK_S = 1_700_000_000.0  # what the zip writer reads as "now" (a member's date)


def pin_volatile_inputs() -> None:
    """A counter for the snapshot tags, a fixed clock for the zip dates (see the module doc), and
    the builder digest, which any change to repomem's index sources changes (the manifest names
    it): two checkouts are compared on what they write, not on which code wrote it."""
    from repomem.index import builder_version

    builder_version.sources_digest = lambda package_root: "0" * 64  # type: ignore[assignment]
    builder_version.builder_digest.cache_clear()
    counter = itertools.count()
    secrets.token_hex = lambda nbytes=None: f"{next(counter):0{2 * (nbytes or 32)}x}"  # type: ignore[assignment]
    real_localtime = time.localtime
    time.localtime = lambda seconds=None: real_localtime(FIXED_CLOCK_S)  # type: ignore[assignment]


class Editor:
    """Writes files of the copy, each with the next fixed modification time."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.mtimes = itertools.count(FIRST_MTIME_NS, 10**9)

    def write(self, path: str, text: str) -> None:
        full = self.root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(text, encoding="utf-8")
        stamp = next(self.mtimes)
        os.utime(full, ns=(stamp, stamp))

    def read(self, path: str) -> str:
        return (self.root / path).read_text(encoding="utf-8")


def python_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                  if ".repomem" not in p.parts and p.is_file())


def module_name(path: str) -> str:
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def most_imported(root: Path, paths: list[str], exclude: set[str]) -> str:
    """The module (not a package's __init__) other files name most often in their imports."""
    counts = {path: 0 for path in paths if not path.endswith("__init__.py") and path not in exclude}
    by_module = {module_name(path): path for path in counts}
    pattern = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\s+([\w, ]+)|import\s+([\w.]+))", re.MULTILINE)
    for path in paths:
        package = module_name(path).rsplit(".", 1)[0] if "." in module_name(path) else ""
        for match in pattern.finditer((root / path).read_text(encoding="utf-8", errors="replace")):
            named = [match.group(1) or match.group(3)]
            if match.group(2):
                named += [f"{match.group(1)}.{name.strip()}" for name in match.group(2).split(",")]
                named += [f"{package}.{name.strip()}" for name in match.group(2).split(",")]
            for name in named:
                if name in by_module and by_module[name] != path:
                    counts[by_module[name]] += 1
    return max(sorted(counts), key=lambda path: counts[path])


def first_function(text: str) -> str | None:
    found = re.search(r"^def ([A-Za-z_]\w*)\(", text, re.MULTILINE)
    return found.group(1) if found else None


def snapshot_hashes(root: Path, service: RepoService) -> list[str]:
    current = service.index_for_measurement().snapshot  # the one CURRENT names, in either checkout
    return [f"{current.name}/{path.name} {snapshot_file_hash(path)}" for path in sorted(current.iterdir())]


def snapshot_file_hash(path: Path) -> str:
    """SHA-256 of a snapshot file; of the manifest, without what differs between any two writes of
    the same index: its seal (a keyed hash of the rest) and the identities of the files as
    written (inode, size, time: snapshot_check.SnapshotSummary). The manifest's digests of the
    other files stay in, and each of those files is hashed itself."""
    data = path.read_bytes()
    if path.name == "manifest.json":
        manifest = json.loads(data)
        manifest.pop("seal", None)
        manifest.get("body", {}).pop("identities", None)
        data = json.dumps(manifest, sort_keys=True).encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("repo", type=Path, help="repository to copy (left untouched)")
    parser.add_argument("work", type=Path, help="empty or missing folder for the copy")
    args = parser.parse_args()
    if os.environ.get("PYTHONHASHSEED") != "0":
        # Some symbol tables are saved in set order, which follows the strings' hashes: one seed
        # for every run (a second run of one checkout differs otherwise).
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    pin_volatile_inputs()
    root = args.work / "repo"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(args.repo, root, ignore=shutil.ignore_patterns(".repomem", "__pycache__"))
    config, _ = load_config(root)
    # The index in the copied tree, made afresh each run (a user's cache folder would hold the last
    # run's index of the same path, and the build would update it).
    config = dataclasses.replace(config, index=dataclasses.replace(config.index, compact_ratio=1e9, cache_dir=""))
    service = RepoService.open(root, config)
    assert not isinstance(service, Failure), service
    editor = Editor(root)

    def step(name: str, result: object) -> None:
        if isinstance(result, Failure):
            raise SystemExit(f"{name}: {result.message}")
        report = getattr(result, "action", "")
        print(f"== {name} {report}".rstrip())
        for line in snapshot_hashes(root, service):
            print(line)
        sys.stdout.flush()

    step("built", service.ensure_index())
    paths = python_files(root)
    by_size = sorted(paths, key=lambda path: (-len(editor.read(path).splitlines()), path))
    largest, second = by_size[0], by_size[1]
    removed = most_imported(root, paths, {largest, second})
    print(f"# largest {largest}, second {second}, removed {removed}")

    lines = editor.read(largest).splitlines(keepends=True)
    middle = len(lines) // 2
    indent = re.match(r"\s*", lines[middle]).group(0)  # type: ignore[union-attr]
    editor.write(largest, "".join([*lines[:middle], f"{indent}# an edit inside a body\n", *lines[middle:]]))
    step("body edit (definitions keep their shape)", service.ensure_index())

    editor.write(second, editor.read(second) + "\n\ndef added_by_the_edit(value):\n    return value\n")
    step("function added (definitions change)", service.ensure_index())

    folder = str(Path(removed).parent)
    newcomer = f"{folder}/added_module.py" if folder != "." else "added_module.py"
    calls = []
    for path in (largest, second):
        function = first_function(editor.read(path))
        if function is not None:
            calls.append((module_name(path), function))
    text = "".join(f"from {module} import {function}\n" for module, function in calls)
    text += "\n\ndef use_them(x):\n" + "".join(f"    {function}(x)\n" for _, function in calls) + "    return x\n"
    editor.write(newcomer, text)
    step("new file", service.ensure_index())

    (root / removed).unlink()
    step("most imported module removed", service.ensure_index())

    buffered = next(path for path in by_size[2:] if path != removed)
    assert service.set_buffer(buffered, editor.read(buffered) + "\ndef typed_in_a_buffer():\n    pass\n") is None
    step("unsaved buffer", service.save())

    editor.write(second, editor.read(second).replace("added_by_the_edit", "renamed_by_the_edit"))
    assert service.file_changed(second) is None
    step("file saved", service.save())

    editor.write(largest, editor.read(largest) + "\n# appended\n")
    rest = [path for path in by_size[2:] if path not in (removed, buffered)]
    editor.write(rest[0], "# replaced whole\n\ndef replaced():\n    return 1\n")
    editor.write("another_module.py", f"from {module_name(newcomer)} import use_them\n\nuse_them(1)\n")
    (root / rest[1]).unlink()
    step("two changes, a new file and a removal", service.ensure_index())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
