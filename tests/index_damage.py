"""Damage a real index every way this module knows and say what repomem did with each.

Run as `python -m tests.index_damage REPO [SHARD SHARDS]` (a repository already indexed once): it copies the
index aside, then for each array of each snapshot file and each kind of damage it restores the
index, damages it, edits one file of the repository (the edit kernels are what crashed) and asks
a fresh service for the index and a retrieval. One JSON line per case on stdout; a case that
crashes the process (a segfault) is the last line's successor, so the caller sees which one did.

`resealed` cases also rewrite the manifest's digests and seal with this user's key: damage the
seal cannot see (a writer's bug, memory that flipped before the write), which only the checks of
index/integrity.py stand between and the kernels.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from repomem.failures import Failure
from repomem.index.indexed_files import FileRecord
from repomem.index.provenance import file_digest
from repomem.index.snapshot_files import read_npz, write_npz
from repomem.index.snapshot_manifest import (
    MANIFEST,
    file_columns,
    file_identity,
    packed_integers,
    unpacked_integers,
)
from repomem.service import RepoService
from tests.manifests import manifest_body, record_rows, with_record_rows, write_manifest

EDITED = "pkg/edited.py"
QUERY = "def total(values):\n    result = helper(values)\n    return result"
NPZ_FILES = ("base.npz", "delta.npz", "files.npz", "changed_files.npz")


def _damages(array: np.ndarray) -> Iterator[tuple[str, np.ndarray]]:
    """(name, damaged copy) for each kind of damage that applies to `array`."""
    if array.size == 0:
        return
    flat = array.reshape(-1)
    if array.dtype.kind in "iu":
        limits = np.iinfo(array.dtype)
        for name, value in (("past the end", min(int(flat.max()) + 1_000_000, limits.max)), ("negative", -7),
                            ("zero", 0)):
            if value < limits.min:
                continue
            damaged = flat.copy()
            damaged[-1] = value
            yield name, damaged.reshape(array.shape)
    if array.dtype.kind == "f":
        for name, value in (("NaN", np.nan), ("infinite", np.inf), ("negative", -0.5), ("above one", 3.0)):
            damaged = flat.copy()
            damaged[-1] = value
            yield name, damaged.reshape(array.shape)
    if array.dtype.kind == "b":
        yield "flipped", ~array
    if array.ndim == 1 and array.shape[0] > 1:
        yield "reversed", array[::-1].copy()
        yield "one short", array[:-1].copy()


def _live_record(manifest: dict) -> dict:
    return next(r for r in manifest["files"] if r is not None and r["n_fragments"] > 1)


def _sizes_one_short(rows: list) -> dict:
    """The records' columns with one size too few (columns, not rows: written as they are)."""
    columns = file_columns([None if row is None else FileRecord(**row) for row in rows])
    columns["size"] = packed_integers(unpacked_integers(columns["size"])[:-1])
    return columns


def _first_symbols(symbols: dict) -> dict:
    return next(entry for entry in symbols.values() if entry["d"] and entry["c"])


# Damage to the JSON parts: the manifest's records and the symbol tables (name -> change in place).
MANIFEST_DAMAGES: dict[str, Callable[[dict], None]] = {
    "fragment range one long": lambda m: _live_record(m).update(n_fragments=_live_record(m)["n_fragments"] + 1),
    "fragment range shifted": lambda m: _live_record(m).update(first_fragment=_live_record(m)["first_fragment"] + 1),
    "fragment range negative": lambda m: _live_record(m).update(first_fragment=-3),
    "path leaving the repository": lambda m: _live_record(m).update(path="../outside.py"),
    "absolute path": lambda m: _live_record(m).update(path="/etc/hostname"),
    "path twice": lambda m: [r.update(path=_live_record(m)["path"]) for r in m["files"][-1:] if r is not None],
    "sizes one short": lambda m: m.update(files=_sizes_one_short(m["files"])),
    "base file out of range": lambda m: m.update(
        base_files=packed_integers([*unpacked_integers(m["base_files"]), 999])),
    "base segments out of range": lambda m: m.update(base_segments=7),
    "file list of the wrong shape": lambda m: m.update(files={"a": 1}),
}
SYMBOL_DAMAGES: dict[str, Callable[[dict], None]] = {
    "definition node past the end": lambda s: _first_symbols(s)["d"][0].__setitem__(0, 10_000),
    "definition name a number": lambda s: _first_symbols(s)["d"][0].__setitem__(1, 7),
    "definition kind unknown": lambda s: _first_symbols(s)["d"][0].__setitem__(2, "lambda"),
    "definition of the wrong length": lambda s: _first_symbols(s)["d"].__setitem__(0, [1]),
    # Call sites as columns: node, hops, callee, enclosing class.
    "call node negative": lambda s: _first_symbols(s)["c"][0].__setitem__(0, -1),
    "call hops a string": lambda s: _first_symbols(s)["c"][1].__setitem__(0, "2"),
    "callee a list": lambda s: _first_symbols(s)["c"][2].__setitem__(0, ["f"]),
    "call columns of different lengths": lambda s: _first_symbols(s)["c"][3].pop(),
    "call columns missing one": lambda s: _first_symbols(s)["c"].pop(),
    "import of the wrong shape": lambda s: _first_symbols(s).__setitem__("i", [["a"]]),
    "a file's entry a list": lambda s: s.__setitem__(next(iter(s)), []),
}


def _cases(snapshot: Path) -> Iterator[tuple[str, str, str]]:
    for file_name in NPZ_FILES:
        for array_name, array in read_npz(snapshot / file_name).items():
            for damage, _ in _damages(array):
                yield file_name, array_name, damage
    for damage in MANIFEST_DAMAGES:
        yield MANIFEST, "records", damage
    for damage in SYMBOL_DAMAGES:
        yield "symbols.json.gz", "symbols", damage


def _damage(snapshot: Path, file_name: str, array_name: str, damage: str, reseal: bool) -> None:
    if file_name == MANIFEST:
        body = manifest_body(snapshot)
        records = {"files": record_rows(body), **{k: v for k, v in body.items() if k != "files"}}
        MANIFEST_DAMAGES[damage](records)
        with_record_rows(records, records["files"])
        write_manifest(snapshot, records)
        reseal_snapshot(snapshot)
        return
    if file_name == "symbols.json.gz":
        symbols = json.loads(gzip.decompress((snapshot / file_name).read_bytes()))
        SYMBOL_DAMAGES[damage](symbols)
        (snapshot / file_name).unlink()
        (snapshot / file_name).write_bytes(gzip.compress(json.dumps(symbols).encode()))
        reseal_snapshot(snapshot)
        return
    arrays = read_npz(snapshot / file_name)
    arrays[array_name] = dict(_damages(arrays[array_name]))[damage]
    # Hard-linked into later snapshots of the same build: replace, never write through.
    (snapshot / file_name).unlink()
    write_npz(snapshot / file_name, arrays)
    if reseal:
        reseal_snapshot(snapshot)


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x20
    path.unlink()  # hard-linked into other snapshots: replace, never write through
    path.write_bytes(bytes(data))


def reseal_snapshot(snapshot: Path) -> None:
    """The manifest's digests and seal made true again for the files as they now are."""
    body = manifest_body(snapshot)
    body["digests"] = {name: file_digest(snapshot / name) for name in body["digests"]}
    body["identities"] = {name: file_identity(snapshot / name) for name in body["digests"]}
    write_manifest(snapshot, body)


def answer(repo: Path) -> tuple[str, str, list]:
    """(index action, warning, top fragments) from a fresh service, as a command would."""
    service = RepoService.open(repo)
    assert not isinstance(service, Failure), service
    report = service.ensure_index(structure=True)
    if isinstance(report, Failure):
        return "failed", report.message, []
    top = service.view().retrieve(QUERY, k=10)
    return report.action, report.warning, [[f.path, f.start_line, f.end_line, round(f.s_rel, 6)] for f in top]


def run(repo: Path, cases: Callable[[Path], Iterator[tuple[str, str, str]]] = _cases, shard: int = 0,
        shards: int = 1) -> None:
    """Every case whose number is `shard` modulo `shards` (the test runs the shards side by side, each
    on its own copy of the repository: the cases are independent, each starts from the pristine index)."""
    folder = repo / ".repomem"
    pristine = repo.parent / "pristine-index"
    shutil.copytree(folder, pristine, symlinks=True)
    original = (repo / EDITED).read_text()
    snapshot_name = (folder / "CURRENT").read_text().strip()

    def restore() -> None:
        shutil.rmtree(folder)
        shutil.copytree(pristine, folder, symlinks=True)
        (repo / EDITED).write_text(original)

    def edit() -> None:
        (repo / EDITED).write_text(original + "\n\ndef added_later(values):\n    return helper(values) + 1\n")

    edit()
    incremental = answer(repo)
    restore()
    edit()
    shutil.rmtree(folder)
    rebuilt = answer(repo)
    print(json.dumps({"reference": True, "incremental": incremental, "rebuilt": rebuilt}), flush=True)
    # Bytes changed on disk: one flipped byte in each file of the snapshot, left as it is (the seal
    # and digests must catch every one, whatever the byte held).
    snapshot_files = sorted(p.name for p in (pristine / snapshot_name).iterdir())
    flips = [(name, "bytes", "one byte flipped", False) for name in snapshot_files]
    damages = [(name, array, damage, True) for name, array, damage in cases(pristine / snapshot_name)]
    for file_name, array_name, damage, reseal in (flips + damages)[shard::shards]:
        restore()
        if reseal:
            _damage(folder / snapshot_name, file_name, array_name, damage, reseal)
        else:
            _flip_a_byte(folder / snapshot_name / file_name)
        edit()
        case = {"file": file_name, "array": array_name, "damage": damage, "resealed": reseal}
        print(json.dumps({**case, "started": True}), flush=True)
        action, warning, top = answer(repo)
        print(json.dumps({**case, "action": action, "warning": warning,
                          "same_as": "rebuilt" if top == rebuilt[2] else
                          "incremental" if top == incremental[2] else "neither"}), flush=True)
    restore()


if __name__ == "__main__":  # python -m tests.index_damage REPO [SHARD SHARDS]
    run(Path(sys.argv[1]), shard=int(sys.argv[2]) if len(sys.argv) > 2 else 0,
        shards=int(sys.argv[3]) if len(sys.argv) > 3 else 1)
