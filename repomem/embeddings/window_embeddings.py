"""Window embeddings kept beside the index, by content.

Embedding every window of a repository takes minutes on a CPU (repomem/embeddings/embedder.py), so
they are computed once and kept in the index folder (`window-embeddings.npz`), keyed by each
file's content digest: a file's windows follow from its text, so an unchanged file keeps its
vectors through every edit, rebuild and snapshot of the index, and only new or changed files are
embedded again. The file also names the embedder and the settings that shape a window's text
(window size and step, secret masking); when they change, it starts empty.

Vectors are kept as float16 (half the disk and memory; a cosine changes in the fourth decimal)
and handed out as float32 rows aligned with the index's fragment ids. The file is written
atomically; a damaged or foreign one is ignored and rebuilt, never trusted.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from repomem.config import Config, settings_digest
from repomem.embeddings.embedder import DIMENSIONS, EMBEDDER_NAME, TextEmbedder
from repomem.index.index_state import RepoIndex

FILE_NAME = "window-embeddings.npz"


def store_key(config: Config) -> str:
    """What the stored vectors depend on besides the files' contents."""
    return f"{EMBEDDER_NAME}:{settings_digest(config, ('fragments', 'scan'))}"


class WindowEmbeddings:
    """File digest -> float16 vectors of the file's windows, shape (n_windows, DIMENSIONS)."""

    def __init__(self, key: str, by_digest: dict[str, np.ndarray] | None = None):
        self.key = key
        self.by_digest: dict[str, np.ndarray] = dict(by_digest or {})

    @classmethod
    def load(cls, folder: Path, key: str) -> WindowEmbeddings:
        """The store in `folder`; empty when there is none, it is damaged, or it was made for
        another embedder or other window settings."""
        try:
            with np.load(folder / FILE_NAME, allow_pickle=False) as data:
                if str(data["key"]) != key:
                    return cls(key)
                digests, counts, vectors = data["digests"], data["counts"], data["vectors"]
                if vectors.ndim != 2 or vectors.shape[1] != DIMENSIONS or int(counts.sum()) != vectors.shape[0] \
                        or digests.shape != counts.shape:
                    return cls(key)
                ends = np.cumsum(counts)
                return cls(key, {str(d): vectors[end - n : end] for d, n, end in zip(digests, counts, ends)})
        except (OSError, KeyError, ValueError, zipfile.BadZipFile, EOFError):
            return cls(key)

    def save(self, folder: Path) -> None:
        """Write the store atomically (a reader sees the old file or the new one, whole)."""
        digests = sorted(self.by_digest)
        vectors = [self.by_digest[d] for d in digests]
        folder.mkdir(parents=True, exist_ok=True)
        handle, scratch = tempfile.mkstemp(dir=folder, prefix=".embeddings-", suffix=".npz")
        try:
            with os.fdopen(handle, "wb") as out:
                np.savez(out, key=np.asarray(self.key), digests=np.asarray(digests, dtype=str),
                         counts=np.asarray([v.shape[0] for v in vectors], dtype=np.int64),
                         vectors=np.concatenate(vectors) if vectors else np.zeros((0, DIMENSIONS), np.float16))
                out.flush()
                os.fsync(out.fileno())
            os.replace(scratch, folder / FILE_NAME)
        except BaseException:
            Path(scratch).unlink(missing_ok=True)
            raise

    def missing_files(self, index: RepoIndex) -> list[int]:
        """Ids of the index's files whose windows have no vectors here."""
        return [file_id for file_id, record in enumerate(index.files)
                if record is not None and record.n_fragments
                and getattr(self.by_digest.get(record.digest), "shape", (-1,))[0] != record.n_fragments]

    def update(self, index: RepoIndex, lines_of: Callable[[str], list[str]], embedder: Callable[[], TextEmbedder],
               advance: Callable[[int], None] | None = None) -> int:
        """Embed the windows of the files that have no vectors yet (`lines_of(path)`: the file's
        lines as indexed, secrets masked; `embedder()` is asked only when there is work) and drop
        the vectors of contents no longer indexed. Returns the windows embedded."""
        live = {record.digest for record in index.files if record is not None}
        for digest in [d for d in self.by_digest if d not in live]:
            del self.by_digest[digest]
        todo = self.missing_files(index)
        if not todo:
            return 0
        texts: list[str] = []
        owners: list[tuple[str, int]] = []  # (digest, windows) in the order of `texts`
        for file_id in todo:
            record = index.files[file_id]
            assert record is not None
            lines = lines_of(record.path)
            ids = np.arange(record.first_fragment, record.first_fragment + record.n_fragments)
            texts.extend("\n".join(lines[int(s) : int(e)])
                         for s, e in zip(index.fragment_start[ids], index.fragment_end[ids]))
            owners.append((record.digest, record.n_fragments))
        vectors = embedder().embed(texts, advance).astype(np.float16)
        first = 0
        for digest, count in owners:
            self.by_digest[digest] = vectors[first : first + count]
            first += count
        return len(texts)

    def matrix(self, index: RepoIndex) -> tuple[np.ndarray, np.ndarray]:
        """(vectors, known): float32 rows by fragment id, shape (n_fragments, DIMENSIONS), zero
        where unknown; `known` (bool, shape (n_fragments,)) marks live fragments with a vector."""
        vectors = np.zeros((index.n_fragments, DIMENSIONS), dtype=np.float32)
        known = np.zeros(index.n_fragments, dtype=bool)
        for record in index.files:
            if record is None or not record.n_fragments:
                continue
            stored = self.by_digest.get(record.digest)
            if stored is None or stored.shape[0] != record.n_fragments:
                continue
            rows = slice(record.first_fragment, record.first_fragment + record.n_fragments)
            vectors[rows] = stored
            known[rows] = True
        return vectors, known & index.live


class DenseWindows:
    """One index's live windows as unit vectors, ranked by cosine against a query (RepoCoder's
    dense retriever, with a general sentence encoder in place of UniXcoder)."""

    def __init__(self, vectors: np.ndarray, known: np.ndarray, embed_query: Callable[[str], np.ndarray]):
        """`vectors`: float32, shape (n_fragments, DIMENSIONS); `known`: bool, shape (n_fragments,),
        the live windows with a vector (a file edited since the last embedding has none yet)."""
        self.vectors = vectors
        self.known = known
        self._embed_query = embed_query

    def top(self, query_text: str, k: int, hidden: np.ndarray) -> list[tuple[int, float]]:
        """(fragment id, cosine) of the `k` best windows, best first (ties: lower id first),
        leaving out the fragment ids in `hidden`."""
        allowed = self.known.copy()
        allowed[hidden[hidden < allowed.shape[0]]] = False
        candidates = np.flatnonzero(allowed)
        if not candidates.size or k <= 0:
            return []
        scores = self.vectors[candidates] @ self._embed_query(query_text)  # (n_candidates,)
        if candidates.size > k:
            best = np.argpartition(-scores, k - 1)[:k]
            candidates, scores = candidates[best], scores[best]
        order = np.lexsort((candidates, -scores))
        return [(int(candidates[i]), float(scores[i])) for i in order]
