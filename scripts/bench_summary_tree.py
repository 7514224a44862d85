"""What strategy "hat"'s summary tree costs (issue 14): not a test.

    python scripts/bench_summary_tree.py --repo DIR     # an indexed or indexable tree (default: Django)

Builds the tree over the index, times the best-first walk over random cursors, then edits one file
(a new docstring: its summary and every folder above it change) and its tail (no summary
changes), and counts the summaries each update recomputes. Writes
eval/results/bench-summary-tree.json.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repomem.failures import Failure  # noqa: E402
from repomem.packages import package_source  # noqa: E402
from repomem.positions import locate, text_before_cursor  # noqa: E402
from repomem.service import RepoService  # noqa: E402
from scripts.bench_sources import DJANGO, DJANGO_SHA256  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=None)
    parser.add_argument("--cursors", type=int, default=100)
    parser.add_argument("--out", type=Path, default=ROOT / "eval" / "results" / "bench-summary-tree.json")
    args = parser.parse_args()
    source = args.repo or package_source(DJANGO, DJANGO_SHA256)
    if isinstance(source, Failure):
        raise SystemExit(source.message)
    with tempfile.TemporaryDirectory(prefix="repomem-tree-") as scratch:
        work = Path(scratch) / source.name
        shutil.copytree(source, work, ignore=shutil.ignore_patterns(".repomem"))
        service = RepoService.open(work)
        service.ensure_index()
        started = time.perf_counter()
        tree = service.memories.summary_tree()
        build_s = time.perf_counter() - started
        out = {"repo": source.name, "nodes": len(tree.nodes), "build_s": build_s, "build_summaries": tree.summarised}
        rng = random.Random(0)
        files = [f.path for f in service.view().indexed_files() if f.language == "python" and f.fragments > 2]
        walks, steps = [], []
        settings = service.config.retrieval
        for _ in range(args.cursors):
            path = rng.choice(files)
            text = (work / path).read_text(encoding="utf-8", errors="replace")
            cursor = locate(work, path, text, rng.randint(1, max(1, text.count("\n"))), None)
            assert not isinstance(cursor, Failure)
            query, _ = text_before_cursor(cursor, settings.query_lines)
            started = time.perf_counter()
            walk = tree.walk(query, service.config.bm25, settings.summary_walk_files, settings.summary_walk_steps)
            walks.append((time.perf_counter() - started) * 1000)
            steps.append(walk.steps)
        out.update(walk_p50_ms=statistics.median(walks), walk_p95_ms=sorted(walks)[int(0.95 * len(walks))],
                   walk_steps_mean=statistics.mean(steps))
        deep = max(files, key=lambda p: p.count("/"))
        original = (work / deep).read_text(encoding="utf-8")
        # A new docstring changes the file summary's first lines, which every folder above repeats;
        # a comment at the end changes no summary at all.
        for label, text in (("new docstring", '"""Edited for the benchmark."""\n' + original),
                            ("body only", original + "\n# a comment\n")):
            (work / deep).write_text(text, encoding="utf-8")
            service.ensure_index()
            started = time.perf_counter()
            tree = service.memories.summary_tree()
            out[f"update_{label.replace(' ', '_')}"] = {
                "file": deep, "depth": deep.count("/") + 1, "summaries": tree.summarised,
                "ms": (time.perf_counter() - started) * 1000}
            (work / deep).write_text(original, encoding="utf-8")
            service.ensure_index()
            service.memories.summary_tree()
    print(json.dumps(out, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
