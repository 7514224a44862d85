"""Window embeddings kept beside the index, by content.

Embedding every window of a repository takes minutes on a CPU (repomem/embeddings/embedder.py), so
they are computed once and kept in the index folder (`window-embeddings.npz`), keyed by each
window's text (a digest of it): an edit re-embeds only the windows whose text it changed (a
function added at the end of a file: the last window or two), and an evaluation that cuts a file
at the hole finds every window above the cut already there. Each file's content digest also names
its windows' keys, so an unchanged file is looked up without reading its text. The file names the
embedder and the settings that shape a window's text (window size and step, secret masking); when
they change, it starts empty.

Vectors are kept as float16 (half the disk and memory; a cosine changes in the fourth decimal)
and handed out as float32 rows aligned with the index's fragment ids. The file is written
atomically; a damaged or foreign one is ignored and rebuilt, never trusted. It is sealed as the
index's manifests are (repomem/index/provenance.py: an HMAC under the key in the user's cache): a
repository can ship an index folder, and vectors it chose would rank its windows first.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from repomem.config import Config, settings_digest
from repomem.embeddings.embedder import DIMENSIONS, EMBEDDER_NAME, TextEmbedder
from repomem.failures import Failure
from repomem.index.index_state import RepoIndex
from repomem.index.provenance import seal_key

FILE_NAME = "window-embeddings.npz"
KEY_BYTES = 16  # blake2b digest of a window's text


def store_key(config: Config) -> str:
    """What the stored vectors depend on besides the windows' texts."""
    return f"{EMBEDDER_NAME}:{settings_digest(config, ('fragments', 'scan'))}"


# The arrays of the file, in the order the seal covers them.
SEALED_ARRAYS = ("key", "window_keys", "vectors", "file_digests", "file_counts", "file_rows")


def _seal(arrays: dict[str, np.ndarray]) -> str | None:
    """HMAC-SHA256 of the arrays (dtype, shape and bytes) under this user's key; None without a key."""
    key = seal_key()
    if isinstance(key, Failure):
        return None
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for name in SEALED_ARRAYS:
        array = np.asarray(arrays[name])
        mac.update(f"{name} {array.dtype.str} {array.shape}\n".encode("ascii"))
        mac.update(array.tobytes())
    return mac.hexdigest()


def window_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=KEY_BYTES).digest()


class WindowEmbeddings:
    """Window text digest -> float16 vector; file content digest -> its windows' text digests."""

    def __init__(self, key: str, windows: dict[bytes, np.ndarray] | None = None,
                 files: dict[str, tuple[bytes, ...]] | None = None):
        self.key = key
        self.windows: dict[bytes, np.ndarray] = dict(windows or {})  # each float16, shape (DIMENSIONS,)
        self.files: dict[str, tuple[bytes, ...]] = dict(files or {})

    @classmethod
    def load(cls, folder: Path, key: str) -> WindowEmbeddings:
        """The store in `folder`; empty when there is none, it is damaged, or it was made for
        another embedder or other window settings."""
        try:
            with np.load(folder / FILE_NAME, allow_pickle=False) as data:
                if str(data["key"]) != key:
                    return cls(key)
                keys, vectors = data["window_keys"], data["vectors"]
                digests, counts, rows = data["file_digests"], data["file_counts"], data["file_rows"]
                # Arrays of the layout `save` writes, or none: a file with the key but other arrays
                # (strings, complex numbers, another shape) raised a TypeError at every command.
                if vectors.dtype != np.float16 or keys.dtype != np.dtype(f"S{KEY_BYTES}") \
                        or digests.dtype.kind != "U" or counts.dtype != np.int64 or rows.dtype != np.int64 \
                        or keys.ndim != 1 or digests.ndim != 1 or rows.ndim != 1 or (counts < 0).any() \
                        or vectors.ndim != 2 or vectors.shape[1] != DIMENSIONS or keys.shape[0] != vectors.shape[0] \
                        or digests.shape != counts.shape or int(counts.sum()) != rows.shape[0] \
                        or (rows.size and (rows.min() < 0 or rows.max() >= keys.shape[0])):
                    return cls(key)
                seal = _seal({name: data[name] for name in SEALED_ARRAYS})
                if seal is None or not hmac.compare_digest(str(data["seal"]), seal):
                    return cls(key)  # not written by this user here (a shipped index folder), or damaged
                window_keys = [bytes(k) for k in keys]
                # A vector that is not finite (weights damaged when it was made) is no vector: its
                # window is embedded again, not kept for good.
                finite = np.isfinite(vectors).all(axis=1)
                windows = {k: v for k, v, ok in zip(window_keys, vectors, finite.tolist()) if ok}
                ends = np.cumsum(counts)
                files = {str(d): tuple(window_keys[r] for r in rows[end - n : end])
                         for d, n, end in zip(digests, counts, ends)}
                return cls(key, windows, _vectors_known(files, windows))
        except (OSError, KeyError, ValueError, TypeError, zipfile.BadZipFile, EOFError):
            return cls(key)

    def save(self, folder: Path) -> None:
        """Write the store atomically (a reader sees the old file or the new one, whole); windows
        no file names any more are left out."""
        digests = sorted(self.files)
        named = sorted({k for d in digests for k in self.files[d]})
        row_of = {k: row for row, k in enumerate(named)}
        folder.mkdir(parents=True, exist_ok=True)
        handle, scratch = tempfile.mkstemp(dir=folder, prefix=".embeddings-", suffix=".npz")
        try:
            arrays = {
                "key": np.asarray(self.key),
                "window_keys": np.asarray(named, dtype=f"S{KEY_BYTES}"),
                "vectors": np.stack([self.windows[k] for k in named]).astype(np.float16) if named else
                np.zeros((0, DIMENSIONS), np.float16),
                "file_digests": np.asarray(digests, dtype=str),
                "file_counts": np.asarray([len(self.files[d]) for d in digests], dtype=np.int64),
                "file_rows": np.asarray([row_of[k] for d in digests for k in self.files[d]], dtype=np.int64),
            }
            with os.fdopen(handle, "wb") as out:
                np.savez(out, seal=np.asarray(_seal(arrays) or ""), **arrays)
                out.flush()
                os.fsync(out.fileno())
            os.replace(scratch, folder / FILE_NAME)
        except BaseException:
            Path(scratch).unlink(missing_ok=True)
            raise

    def missing_files(self, index: RepoIndex) -> list[int]:
        """Ids of the index's files whose windows are not all known here by the file's content."""
        return [file_id for file_id, record in enumerate(index.files)
                if record is not None and record.n_fragments
                and len(self.files.get(record.digest, ())) != record.n_fragments]

    def update(self, index: RepoIndex, lines_of: Callable[[str], list[str]], embedder: Callable[[], TextEmbedder],
               advance: Callable[[int], None] | None = None) -> int:
        """Name the windows of the files not known yet (`lines_of(path)`: the file's lines as
        indexed, secrets masked), embed the windows whose text has no vector (`embedder()` is asked
        only when there is one), and forget files no longer indexed. Returns the windows embedded."""
        live = {record.digest for record in index.files if record is not None}
        for digest in [d for d in self.files if d not in live]:
            del self.files[digest]
        todo: dict[bytes, str] = {}  # key -> text of the windows to embed, each text once
        for file_id in self.missing_files(index):
            record = index.files[file_id]
            assert record is not None
            lines = lines_of(record.path)
            ids = np.arange(record.first_fragment, record.first_fragment + record.n_fragments)
            keys = []
            for start, end in zip(index.fragment_start[ids].tolist(), index.fragment_end[ids].tolist()):
                text = "\n".join(lines[start:end])
                key = window_key(text)
                keys.append(key)
                if key not in self.windows:
                    todo[key] = text
            self.files[record.digest] = tuple(keys)
        if todo:
            vectors = embedder().embed(list(todo.values()), advance).astype(np.float16)
            finite = np.isfinite(vectors).all(axis=1)
            self.windows.update((key, vector) for key, vector, ok in zip(todo, vectors, finite.tolist()) if ok)
            if not finite.all():  # their files stay unknown: embedded again by a sound model
                self.files = _vectors_known(self.files, self.windows)
        named = {k for keys in self.files.values() for k in keys}
        for key in [k for k in self.windows if k not in named]:
            del self.windows[key]
        return len(todo)

    def matrix(self, index: RepoIndex) -> tuple[np.ndarray, np.ndarray]:
        """(vectors, known): float32 rows by fragment id, shape (n_fragments, DIMENSIONS), zero
        where unknown; `known` (bool, shape (n_fragments,)) marks live fragments with a vector."""
        vectors = np.zeros((index.n_fragments, DIMENSIONS), dtype=np.float32)
        known = np.zeros(index.n_fragments, dtype=bool)
        for record in index.files:
            if record is None or not record.n_fragments:
                continue
            keys = self.files.get(record.digest)
            if keys is None or len(keys) != record.n_fragments:
                continue
            rows = np.arange(record.first_fragment, record.first_fragment + record.n_fragments)
            vectors[rows] = np.stack([self.windows[k] for k in keys])
            known[rows] = True
        return vectors, known & index.live


def _vectors_known(files: dict[str, tuple[bytes, ...]], windows: dict[bytes, np.ndarray]
                   ) -> dict[str, tuple[bytes, ...]]:
    """The files (content digest -> window keys) whose every window has a vector in `windows`."""
    return {digest: keys for digest, keys in files.items() if all(key in windows for key in keys)}


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
