"""The index's array files written and read: this checkout's codec against a reference commit's,
in one process (not a test: machines are noisy).

    python scripts/bench_snapshot_codec.py --before REV [--repo DIR] [--rounds 7]

The arrays of the repository's current snapshot (Django 5.1.4 from the package index by default;
its index built first if needed) are read once; then, in alternating rounds, REV's
`snapshot_files` (read from git; its imports are this checkout's) and this checkout's write the
snapshot's array files (base, delta, files) and its symbol tables (gzipped JSON) to a temporary
folder and read them back from their bytes, as a load does. Every array read back must equal the
one written, dtype and shape included, and the tables theirs, on both sides. Times are the medians over rounds,
the ratio is this checkout's over REV's pair by pair.
Results: eval/results/bench-snapshot-codec.json and a table.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
import types
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import repomem.index.snapshot_files as this_codec  # noqa: E402
from repomem.failures import Failure  # noqa: E402
from repomem.index.index_folder import current_snapshot, index_dir  # noqa: E402
from repomem.service import RepoService  # noqa: E402
from scripts.bench_sources import django_or  # noqa: E402
from scripts.reference_checkout import module_at  # noqa: E402

ARRAY_FILES = ("base.npz", "delta.npz", "files.npz")
Coding = tuple[dict[str, str], tuple[str, ...]]  # write_npz's deltas and stored members


def coding_of(path: Path) -> Coding:
    """How the save wrote the array file at `path`: the arrays delta coded by their pointers (its
    codec member says) and the members stored without deflate (its zip directory says)."""
    with zipfile.ZipFile(path) as archive:
        codec = json.loads(np.load(archive.open(f"{this_codec.CODEC_MEMBER}.npy")).tobytes())
        stored = tuple(info.filename.removesuffix(".npy") for info in archive.infolist()
                       if info.compress_type == zipfile.ZIP_STORED)
    return {name: entry["delta"] for name, entry in codec.items() if entry["delta"]}, stored


def one_side(codec: types.ModuleType, arrays: dict[str, dict[str, np.ndarray]], coding: dict[str, Coding],
             symbols: dict, folder: Path) -> dict[str, float]:
    """Milliseconds to write and to read each array file and the symbol tables, and bytes written."""
    figures: dict[str, float] = {}
    for name, members in arrays.items():
        path = folder / name
        path.unlink(missing_ok=True)
        deltas, stored = coding[name]
        started = time.perf_counter()
        codec.write_npz(path, members, deltas=deltas, stored=stored)
        figures[f"write {name}"] = (time.perf_counter() - started) * 1e3
        data = path.read_bytes()
        figures[f"bytes {name}"] = len(data)
        started = time.perf_counter()
        back = codec.arrays_from(data, name)
        figures[f"read {name}"] = (time.perf_counter() - started) * 1e3
        assert back.keys() == members.keys(), name
        for member, array in members.items():
            assert back[member].dtype == array.dtype and back[member].shape == array.shape, (name, member)
            assert np.array_equal(back[member], array), (name, member)
    path = folder / "symbols.json.gz"
    path.unlink(missing_ok=True)
    started = time.perf_counter()
    codec.write_json_gz(path, symbols.items())
    figures["write symbols.json.gz"] = (time.perf_counter() - started) * 1e3
    data = path.read_bytes()
    figures["bytes symbols.json.gz"] = len(data)
    # The cyclic collector's walks over millions of new objects are not the decoder's time (a load
    # runs it under cyclic_gc.rarer_collections): timed without them, on both sides.
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        back = codec.json_from(data)
        figures["read symbols.json.gz"] = (time.perf_counter() - started) * 1e3
    finally:
        gc.enable()
    assert back == symbols
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the reference commit")
    parser.add_argument("--repo", type=Path, help="a repository (default: Django 5.1.4)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-snapshot-codec.json")
    args = parser.parse_args()
    console = Console(stderr=True)
    repo = django_or(args.repo).resolve()
    service = RepoService.open(repo)
    assert not isinstance(service, Failure), service
    report = service.ensure_index()
    assert not isinstance(report, Failure), report
    snapshot = current_snapshot(index_dir(repo, service.config))
    assert not isinstance(snapshot, Failure), snapshot
    arrays = {name: this_codec.read_npz(snapshot / name) for name in ARRAY_FILES}
    coding = {name: coding_of(snapshot / name) for name in ARRAY_FILES}
    symbols = this_codec.read_json_gz(snapshot / "symbols.json.gz")
    reference = module_at(args.before, "repomem/index/snapshot_files.py")
    sides = {"before": reference, "after": this_codec}
    rounds: list[dict[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory() as work:
        for side in sides:
            (Path(work) / side).mkdir()
        for number in range(args.rounds + 1):  # the first round warms both sides, not kept
            order = list(sides) if number % 2 else list(sides)[::-1]
            figures = {side: one_side(sides[side], arrays, coding, symbols, Path(work) / side) for side in order}
            if number:
                rounds.append(figures)
            console.print(f"round {number}: " + ", ".join(
                f"{side} write {sum(v for k, v in f.items() if k.startswith('write')):.0f} ms "
                f"read {sum(v for k, v in f.items() if k.startswith('read')):.0f} ms" for side, f in figures.items()))
    keys = list(rounds[0]["after"])
    rows = []
    for key in keys:
        before = [r["before"][key] for r in rounds]
        after = [r["after"][key] for r in rounds]
        ratios = [a / b for a, b in zip(after, before) if b]
        rows.append({"measure": key, "before": statistics.median(before), "after": statistics.median(after),
                     "ratio": statistics.median(ratios) if ratios else None})
    for kind in ("write", "read", "bytes"):
        before = [sum(v for k, v in r["before"].items() if k.startswith(kind)) for r in rounds]
        after = [sum(v for k, v in r["after"].items() if k.startswith(kind)) for r in rounds]
        rows.append({"measure": f"{kind}, all", "before": statistics.median(before), "after": statistics.median(after),
                     "ratio": statistics.median(a / b for a, b in zip(after, before))})
    table = Table(title=f"snapshot codec, {repo.name}: {args.before} (before) and this checkout (after), "
                        f"medians of {args.rounds} rounds")
    for column in ("measure", "before", "after", "after / before"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    for row in rows:
        unit = "B" if row["measure"].startswith("bytes") else "ms"
        table.add_row(row["measure"], f"{row['before']:,.1f} {unit}", f"{row['after']:,.1f} {unit}",
                      f"{row['ratio']:.2f}" if row["ratio"] is not None else "")
    Console().print(table)
    args.out.write_text(json.dumps({"repo": str(repo), "before": args.before, "rounds": args.rounds, "rows": rows,
                                    "raw": rounds}, indent=1) + "\n")
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
