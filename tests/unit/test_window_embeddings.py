"""Window embeddings kept beside the index by content (repomem/embeddings/window_embeddings.py) and
the dense ranking over them. The model here is a stand-in that hashes words into vectors (the
store's bookkeeping does not depend on what the vectors mean); tests/e2e/test_dense.py runs the
real all-MiniLM-L6-v2."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest

from repomem.config import Config, with_overrides
from repomem.embeddings.embedder import DIMENSIONS
from repomem.embeddings.window_embeddings import FILE_NAME, DenseWindows, WindowEmbeddings, _seal, store_key
from repomem.failures import Failure, FailureKind
from repomem.service import RepoService

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "shop"


class HashedWords:
    """Unit vectors from the words of a text: equal texts, equal vectors; shared words, a cosine above 0."""

    def __init__(self):
        self.embedded: list[str] = []

    def embed(self, texts, advance=None) -> np.ndarray:
        self.embedded.extend(texts)
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.split():
                out[row, int(hashlib.blake2b(word.encode(), digest_size=4).hexdigest(), 16) % DIMENSIONS] += 1.0
            out[row] /= max(np.linalg.norm(out[row]), 1e-9)
        if advance is not None:
            advance(len(texts))
        return out


@pytest.fixture
def shop(tmp_path) -> RepoService:
    root = tmp_path / "shop"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".repomem"))
    service = RepoService.open(root, Config())
    assert isinstance(service, RepoService) and not hasattr(service.ensure_index(), "kind")
    return service


def _update(service: RepoService, store: WindowEmbeddings, model: HashedWords) -> int:
    return store.update(service.index_for_measurement(), lambda path: service.view().file_lines(path), lambda: model)


def test_every_window_is_embedded_once_and_only_changed_files_again(shop: RepoService):
    index = shop.index_for_measurement()
    model = HashedWords()
    store = WindowEmbeddings(store_key(shop.config))
    windows = int(index.live.sum())
    assert _update(shop, store, model) == windows == len(model.embedded)
    vectors, known = store.matrix(index)
    assert known.sum() == windows and vectors.shape == (index.n_fragments, DIMENSIONS)
    # Each row is the embedding of its window's text, as the prompt would show it.
    some = int(np.flatnonzero(known)[0])
    record = index.files[int(index.fragment_file[some])]
    text = "\n".join(shop.view().file_lines(record.path)[index.fragment_start[some] : index.fragment_end[some]])
    assert np.allclose(vectors[some], HashedWords().embed([text])[0], atol=1e-3)  # float16 kept
    assert _update(shop, store, model) == 0  # nothing new

    pricing = shop.root / "shop" / "pricing.py"
    pricing.write_text(pricing.read_text() + "\n\ndef surcharge(amount_cents):\n    return amount_cents // 10\n")
    shop.ensure_index()
    index = shop.index_for_measurement()
    before = len(model.embedded)
    embedded = _update(shop, store, model)
    # Only the windows whose text changed: the file's last ones, where the function was added.
    assert 0 < embedded == len(model.embedded) - before < index.record("shop/pricing.py").n_fragments
    vectors, known = store.matrix(index)
    assert known.sum() == int(index.live.sum())  # the old windows of pricing.py are dead and known no more
    assert len(store.files) == index.n_live_files  # the old content is forgotten
    assert len(store.windows) == len({k for keys in store.files.values() for k in keys})


def test_the_store_survives_a_round_trip_and_ignores_a_damaged_or_foreign_file(shop: RepoService, tmp_path):
    store = WindowEmbeddings(store_key(shop.config))
    _update(shop, store, HashedWords())
    folder = tmp_path / "store"
    store.save(folder)
    again = WindowEmbeddings.load(folder, store.key)
    assert again.files == store.files and again.windows.keys() == store.windows.keys()
    assert all(np.array_equal(again.windows[k], store.windows[k]) for k in store.windows)
    # Other window settings: the vectors would belong to other windows.
    other = store_key(with_overrides(shop.config, fragments={"window_lines": 30}))
    assert other != store.key and WindowEmbeddings.load(folder, other).files == {}
    (folder / FILE_NAME).write_bytes((folder / FILE_NAME).read_bytes()[:200])  # torn
    assert WindowEmbeddings.load(folder, store.key).files == {}
    assert WindowEmbeddings.load(tmp_path / "nowhere", store.key).files == {}
    assert not list(folder.glob(".embeddings-*"))  # no scratch file left by the save


def test_the_dense_ranking_is_the_exact_cosine_order_without_the_hidden_windows():
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(300, DIMENSIONS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    known = rng.random(300) > 0.1
    query = rng.normal(size=DIMENSIONS).astype(np.float32)
    windows = DenseWindows(vectors, known, lambda text: query)
    hidden = np.asarray([3, 7, 299, 1000], dtype=np.int64)  # an id past the end is ignored
    for k in (1, 10, 400):
        found = windows.top("anything", k, hidden)
        allowed = [i for i in range(300) if known[i] and i not in (3, 7, 299)]
        expected = sorted(allowed, key=lambda i: (-float(vectors[i] @ query), i))[:k]
        assert [f for f, _ in found] == expected
        assert all(abs(score - float(vectors[f] @ query)) < 1e-5 for f, score in found)
    assert windows.top("anything", 0, hidden) == []


@pytest.mark.parametrize("change", ["string vectors", "complex vectors", "string keys", "float rows", "2-d rows",
                                    "string counts", "negative counts"])
def test_a_file_with_the_key_but_another_layout_is_ignored_not_a_traceback(shop: RepoService, tmp_path, change):
    """A store whose key matches but whose arrays are not the layout `save` writes (another
    version's, a damaged one): every command that read it raised a TypeError ("internal error")."""
    store = WindowEmbeddings(store_key(shop.config))
    _update(shop, store, HashedWords())
    folder = tmp_path / "store"
    store.save(folder)
    with np.load(folder / FILE_NAME) as data:
        arrays = dict(data)
    if change == "string vectors":
        arrays["vectors"] = arrays["vectors"].astype(np.float32).astype(str)
    elif change == "complex vectors":
        arrays["vectors"] = arrays["vectors"].astype(np.complex64)
    elif change == "string keys":
        arrays["window_keys"] = np.asarray([bytes(k).hex() for k in arrays["window_keys"]])
    elif change == "float rows":
        arrays["file_rows"] = arrays["file_rows"].astype(np.float64)
    elif change == "2-d rows":
        arrays["file_rows"] = arrays["file_rows"].reshape(-1, 1)
    elif change == "string counts":
        arrays["file_counts"] = arrays["file_counts"].astype(str)
    else:
        arrays["file_counts"] = -arrays["file_counts"]
    arrays["seal"] = np.asarray(_seal(arrays))  # sealed by this user: the layout alone is wrong
    np.savez(folder / FILE_NAME, **arrays)
    again = WindowEmbeddings.load(folder, store.key)
    assert again.files == {} and again.windows == {}
    # The service embeds every window again over it, and the file it writes is whole.
    shutil.copy(folder / FILE_NAME, shop.root / ".repomem" / FILE_NAME)
    model = HashedWords()
    shop._embedder = model  # noqa: SLF001 - the stand-in model
    assert shop.update_window_embeddings() == len(model.embedded) > 0
    assert WindowEmbeddings.load(shop.root / ".repomem", store.key).files == store.files


def test_a_store_this_user_did_not_write_here_is_not_trusted(shop: RepoService, tmp_path, monkeypatch):
    """A repository can ship its index folder, and the store's key is the same on every machine:
    vectors it chose (its windows' made alike to any query) were ranked as they were. The store is
    sealed as the index's manifests are; a copy this user wrote for another index is kept."""
    from repomem.index import provenance

    store = WindowEmbeddings(store_key(shop.config))
    _update(shop, store, HashedWords())
    mine = tmp_path / "mine"
    store.save(mine)
    assert WindowEmbeddings.load(mine, store.key).files == store.files  # by content: valid in any index
    # Doctored after the save: one window's vector changed, the seal kept.
    with np.load(mine / FILE_NAME) as data:
        arrays = dict(data)
    arrays["vectors"][0] = -arrays["vectors"][0]
    np.savez(tmp_path / FILE_NAME, **arrays)
    assert WindowEmbeddings.load(tmp_path, store.key).files == {}
    # Written under another user's key (a shipped `.repomem/`), or by a repomem before the seal.
    with monkeypatch.context() as patched:
        patched.setattr(provenance, "_key", bytes(range(32)))
        store.save(tmp_path / "theirs")
    assert WindowEmbeddings.load(tmp_path / "theirs", store.key).files == {}
    del arrays["seal"]
    np.savez(tmp_path / FILE_NAME, **arrays)
    assert WindowEmbeddings.load(tmp_path, store.key).files == {}
    # Without a key of one's own nothing can be vouched for: never trusted.
    monkeypatch.setattr(provenance, "_key", Failure(FailureKind.NO_SEAL_KEY, "no key"))
    assert WindowEmbeddings.load(mine, store.key).files == {}
