"""A parse worker's analyses travel as one array per field and come back equal."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import numpy as np

from repomem.config import Config, with_overrides
from repomem.index.batch import pack_analyses, unpack_analyses
from repomem.index.repo_index import FileAnalysis, analyze_file
from repomem.index.scan import SourceFile, content_digest

ROOT = Path(__file__).resolve().parents[2]


def _source(path: str, language: str, text: str) -> SourceFile:
    data = text.encode("utf-8")
    return SourceFile(path, language, text, content_digest(data), len(data), 0)


def _assert_same(ours: FileAnalysis, theirs: FileAnalysis) -> None:
    for part in ("syntax", "fragments", "tokens"):
        a, b = getattr(ours, part), getattr(theirs, part)
        assert type(a) is type(b)
        for field in dataclasses.fields(a):
            x, y = getattr(a, field.name), getattr(b, field.name)
            if isinstance(x, np.ndarray):
                assert isinstance(y, np.ndarray) and x.dtype == y.dtype and x.shape == y.shape, (part, field.name)
                np.testing.assert_array_equal(x, y)
            else:
                assert x == y and type(x) is type(y), (part, field.name)


def test_a_run_of_files_comes_back_equal_with_one_array_per_field():
    config = Config()
    sources = [_source(str(path.relative_to(ROOT)), "python", path.read_text(encoding="utf-8"))
               for path in sorted((ROOT / "repomem" / "index").glob("*.py"))]
    sources += [
        _source("empty.py", "python", ""),
        _source("a.js", "javascript", "function f(x) {\n  if (x) {\n    return g(x);\n  }\n}\n"),
        _source("broken.py", "python", "def f(:\n    return g(\nclass\n"),
    ]
    analyses = [analyze_file(source, config) for source in sources]
    # A file over graph.max_file_nodes keeps only its root: its arrays are shorter than the others'.
    largest = max(sources, key=lambda source: source.size)
    analyses.append(analyze_file(largest, with_overrides(config, graph={"max_file_nodes": 3})))
    assert analyses[-1].syntax.over_node_limit

    batch = pickle.loads(pickle.dumps(pack_analyses(analyses), protocol=pickle.HIGHEST_PROTOCOL))
    back = unpack_analyses(batch)
    assert len(back) == len(analyses)
    for ours, theirs in zip(back, analyses):
        _assert_same(ours, theirs)
    # Every array field joined, whatever the number of files; each part's arrays are views of its
    # own columns, so letting go of one part (the BM25 tokens) frees its memory.
    assert len(batch.columns) == 12 and all(state[0].keys().isdisjoint({"parent", "length"}) for state in batch.rest)
    for part, field in (("tokens", "ids"), ("syntax", "parent"), ("fragments", "cover_weight")):
        view = getattr(getattr(back[1], part), field)
        owners = [key for key, column in batch.columns.items() if np.shares_memory(view, column)]
        assert owners == [f"{part}.{field}"]
    assert pack_analyses([]).columns == {} and unpack_analyses(pack_analyses([])) == []


def test_the_build_through_workers_equals_the_build_in_one_process(tmp_path: Path):
    """The cold build's parse workers pack their results; the index they give equals one built
    without workers (same files, fragments, postings and relations)."""
    from repomem.index.parse_pool import PARALLEL_MIN_FILES
    from repomem.service import RepoService

    for n in range(PARALLEL_MIN_FILES + 6):  # enough files for the parse workers
        (tmp_path / f"m{n}.py").write_text(f"import os\n\n\ndef f{n}(x):\n    return os.path.join(x, '{n}')\n"
                                           f"\n\nclass C{n}:\n    def g(self):\n        return f{n}(self)\n")
    indexes = []
    for workers in (1, 2):
        config = with_overrides(Config(), index={"workers": workers})
        service = RepoService.open(tmp_path, config)
        assert isinstance(service, RepoService)
        service.ensure_index(full=True, save=False)
        indexes.append(service.index)
    one, two = indexes
    assert [r.path for r in one.files] == [r.path for r in two.files]
    for a, b in zip(one.syntax, two.syntax):
        assert a.calls == b.calls and a.definitions == b.definitions
        np.testing.assert_array_equal(a.parent, b.parent)
    assert (one.w_base != two.w_base).nnz == 0 and one.w_base.nnz > 0
    np.testing.assert_array_equal(one.doc_len, two.doc_len)


def test_the_workers_parts_tile_the_files_and_shrink_towards_the_end():
    """Parts of the cold build's files for the parse workers: every file once, in order; the first
    parts large (few round trips), the last ones small, so no worker is left with a long last part
    while the other has nothing to do."""
    from repomem.index.parse_pool import part_bounds

    for n_items, workers in ((64, 2), (65, 2), (2895, 2), (23160, 2), (50000, 4), (100, 1)):
        bounds = part_bounds(n_items, workers)
        assert bounds[0][0] == 0 and bounds[-1][1] == n_items
        assert all(end == next_start for (_, end), (next_start, _) in zip(bounds, bounds[1:]))
        sizes = [end - start for start, end in bounds]
        assert all(size > 0 for size in sizes) and sizes == sorted(sizes, reverse=True)
        assert sizes[0] == max(8, n_items // (workers * 16)) and sizes[-1] <= 8
        # What is left after each part's start is at least six parts of that size per worker,
        # until the parts are down to their minimum.
        for (start, _), size in zip(bounds, sizes):
            assert size <= 8 or (n_items - start) >= 6 * workers * size
