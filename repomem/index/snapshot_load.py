"""Loading an index: the current snapshot, checked before anything of it is used.

The manifest must be sealed by this user's key and every file must have the digest it names
(snapshot_manifest.py); what passes is still checked before a kernel touches it (integrity.py).
A reader that meets an unknown format, a config change or a damaged file gets a Failure and
rebuilds; nothing here raises for bad data on disk. The files' structure (syntax, windows, call
edges), needed only to update the index, is read on demand.
"""

from __future__ import annotations

import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from repomem.config import Config
from repomem.cyclic_gc import rarer_collections
from repomem.failures import Failure, FailureKind
from repomem.index.bm25 import compute_stats
from repomem.index.calls import resolves_calls
from repomem.index.fragments import FileFragments
from repomem.index.index_folder import current_snapshot, index_dir
from repomem.index.integrity import (
    check_offsets,
    check_postings,
    check_query_arrays,
    check_stored_w,
    check_structure,
)
from repomem.index.repo_index import RepoIndex, StructureUnavailable
from repomem.index.snapshot_check import current_manifest
from repomem.index.snapshot_encoding import SYMBOLS_SCHEMA, decode_files, segments_from, symmetric_matrix_from_upper
from repomem.index.snapshot_files import arrays_from, json_from
from repomem.index.snapshot_manifest import SNAPSHOT_FILES, file_records, unpacked_integers, verified_bytes
from repomem.languages.parsed import FileSyntax

# Loads tried when another process made a newer snapshot current (and pruned the one being read).
LOAD_ATTEMPTS = 3


def load_index(root: Path, config: Config) -> RepoIndex | Failure:
    """The current snapshot for `root`, or why it cannot be used (then rebuild): not sealed by this
    user's key, a file whose bytes are not the ones written, or an array that breaks an invariant.

    A snapshot that vanishes while it is read is no damage when another process has saved a newer
    one meanwhile (its save prunes the older snapshots): the new current one is loaded instead. A
    command run while the language server or another command saved found "index is damaged (No such
    file or directory ...)" and rebuilt the whole index."""
    directory = index_dir(root, config)
    for _ in range(LOAD_ATTEMPTS):
        before = current_snapshot(directory)
        loaded = _load_current(root, config)
        if not isinstance(loaded, Failure) or loaded.kind != FailureKind.DAMAGED_INDEX \
                or current_snapshot(directory) == before:
            return loaded
    return loaded


def _load_current(root: Path, config: Config) -> RepoIndex | Failure:
    """`load_index`, once."""
    try:
        current = current_manifest(root, config)
        if isinstance(current, Failure):
            return current
        snapshot, manifest = current
        digests = manifest["digests"]
        # All of the snapshot's bytes are checked now, the lazily read structure's too
        # (docs/measurements.md#index-on-disk), so damage anywhere means a rebuild at load, not an
        # error at the first edit. Two helper threads: hashing, inflating and W's kernel release the GIL.
        # W is the longest stretch (its members, then its mirror made by a kernel), so a helper
        # starts on it as soon as the base file's bytes are checked, and another hashes the
        # structure, while this thread reads the postings and the rest, and checks the postings
        # (docs/measurements.md#index-load).
        with ThreadPoolExecutor(2, thread_name_prefix="repomem-load") as pool:
            base_bytes = verified_bytes(snapshot, "base.npz", digests)
            symmetric = pool.submit(_symmetric_w, base_bytes)
            structure_checked = pool.submit(_check_digests, snapshot, SNAPSHOT_FILES[2:], digests)
            base = arrays_from(base_bytes, "base.npz", part=lambda member: member not in W_MEMBERS)
            del base_bytes
            arrays = arrays_from(verified_bytes(snapshot, "delta.npz", digests), "delta.npz")
            words = arrays["vocabulary"].tobytes().decode("utf-8").split("\n") if arrays["vocabulary"].size else []
            vocabulary = dict(zip(words, range(len(words))))
            if len(vocabulary) != len(words):
                return Failure(FailureKind.DAMAGED_INDEX, "index is damaged (a word is listed twice in the vocabulary)")
            records = file_records(manifest["files"], int(arrays["live"].shape[0]))  # checked against the arrays
            segments = segments_from("seg", base) + segments_from("dseg", arrays)
            live = arrays["live"]
            if live.dtype != np.bool_:
                return Failure(FailureKind.DAMAGED_INDEX, "index is damaged (live is not a mask)")
            check_postings(segments, live, arrays["doc_len"], arrays["df"], len(vocabulary))
            w_base = symmetric.result()
            structure_checked.result()
        n = int(live.shape[0])
        rows, cols, values = arrays["delta_rows"], arrays["delta_cols"], arrays["delta_values"].astype(np.float64)
        check_offsets(np.asarray([0, rows.shape[0]]), 1, cols.shape[0], "W's updates")
        if rows.size and (int(min(rows.min(), cols.min())) < 0 or int(max(rows.max(), cols.max())) >= n):
            return Failure(FailureKind.DAMAGED_INDEX, "index is damaged (W's updates point past the end)")
        index = RepoIndex(
            root=root,
            config=config,
            files=records,
            syntax=[None] * len(records),
            file_fragments=[None] * len(records),
            live=live,
            fragment_file=arrays["fragment_file"],
            fragment_start=arrays["fragment_start"],
            fragment_end=arrays["fragment_end"],
            vocabulary=vocabulary,
            segments=segments,
            doc_len=arrays["doc_len"],
            df=arrays["df"],
            stats=compute_stats(np.zeros(0), np.zeros(0), np.zeros(0, dtype=bool), config.bm25),  # set below
            w_base=w_base,
            w_delta=sp.csr_matrix((values, (rows, cols)), shape=(n, n)),
            delta_entries=(rows, cols, values),
            thresholds=arrays["thresholds"],
            rowsum=arrays["rowsum"],
            calls={},
            skipped=[(str(path), str(reason)) for path, reason in manifest.get("skipped", [])],
            generation=int(manifest["generation"]),
            graph_nodes=int(manifest["graph"][0]),
            graph_edges=int(manifest["graph"][1]),
        )
        index.base_id = str(manifest["base_id"])
        index.base_segments = int(manifest["base_segments"])
        index.base_files = set(unpacked_integers(manifest["base_files"]))
        check_query_arrays(index)
        index.stats = compute_stats(index.df, index.doc_len, index.live, config.bm25)
        index.snapshot = snapshot
        index.structure_loader = lambda: _load_structure(snapshot, index, digests)
    except OSError as error:  # a file of the snapshot missing or unreadable: name it plainly
        return Failure(FailureKind.DAMAGED_INDEX, f"index is damaged ({error.strerror or error}: {error.filename})")
    except (ValueError, KeyError, TypeError, AttributeError, EOFError, IndexError) as error:
        return Failure(FailureKind.DAMAGED_INDEX, f"index is damaged ({error.__class__.__name__}: {error})")
    except Exception as error:  # zipfile.BadZipFile and other decoder errors of a torn file
        return Failure(FailureKind.DAMAGED_INDEX, f"index is damaged ({error.__class__.__name__}: {error})")
    return index


# The base file's members that hold W (its upper triangle), read apart from the postings.
W_MEMBERS = frozenset({"wu_indptr", "wu_indices", "wu_data", "w_shape"})


def _symmetric_w(base_bytes: bytes) -> sp.csr_matrix:
    """W whole (symmetric) from the triangle the base file (its checked bytes) stores."""
    base = arrays_from(base_bytes, "base.npz", part=W_MEMBERS.__contains__)
    shape = tuple(int(v) for v in base["w_shape"].tolist())
    upper = sp.csr_matrix((base["wu_data"], base["wu_indices"], base["wu_indptr"]), shape=shape)
    check_stored_w(upper)  # here, beside the kernel, rather than on the whole W in check_query_arrays
    return symmetric_matrix_from_upper(upper)


def _check_digests(snapshot: Path, names: tuple[str, ...], digests: dict[str, str]) -> None:
    """ValueError unless each of `names` holds the bytes the sealed manifest names."""
    for name in names:
        verified_bytes(snapshot, name, digests)


def _load_structure(snapshot: Path, index: RepoIndex, digests: dict[str, str]) -> None:
    """Syntax, windows and call edges: only needed to update the index, so loaded on demand.

    Raises StructureUnavailable when another process pruned the snapshot meanwhile or a file is
    damaged; the caller rebuilds. The structure is checked whole before the index holds any of it:
    an index whose structure failed keeps none (its next use fails the same way, not halfway).
    """
    try:
        # The structure is many objects that live on: collected as often as Python's default
        # thresholds ask, the collector walked them again and again while they were made
        # (docs/measurements.md#index-load).
        with rarer_collections(index.config.index.gc_young_threshold):
            syntax, fragments, calls = _read_structure(snapshot, index, digests)
            index.syntax, index.file_fragments, index.calls = syntax, fragments, calls
            check_structure(index)
    except (OSError, EOFError, ValueError, KeyError, TypeError, AttributeError, IndexError,
            zipfile.BadZipFile) as error:
        index.syntax = [None] * len(index.files)
        index.file_fragments = [None] * len(index.files)
        index.calls = {}
        index.structure_loader = lambda: _load_structure(snapshot, index, digests)
        raise StructureUnavailable(f"{error.__class__.__name__}: {error}") from error


def _read_structure(snapshot: Path, index: RepoIndex, digests: dict[str, str]
                    ) -> tuple[list[FileSyntax | None], list[FileFragments | None], dict[int, np.ndarray]]:
    syntax: list[FileSyntax | None] = [None] * len(index.files)
    fragments: list[FileFragments | None] = [None] * len(index.files)
    changed = arrays_from(verified_bytes(snapshot, "changed_files.npz", digests), "changed_files.npz")
    for files_name, symbols_name, overridden in (
            ("files.npz", "symbols.json.gz", set(changed["file_ids"].tolist())),
            ("changed_files.npz", "changed_symbols.json.gz", set())):
        symbols = json_from(verified_bytes(snapshot, symbols_name, digests), SYMBOLS_SCHEMA)
        arrays = changed if files_name == "changed_files.npz" else \
            arrays_from(verified_bytes(snapshot, files_name, digests), files_name)
        decoded = decode_files(arrays, symbols, index, overridden)
        for file_id, (file_syntax, file_fragments) in decoded.items():
            syntax[file_id] = file_syntax
            fragments[file_id] = file_fragments
    calls = arrays_from(verified_bytes(snapshot, "delta.npz", digests), "delta.npz", part="calls".__eq__)["calls"]
    if calls.ndim != 2 or calls.shape[1] != 5 or calls.dtype.kind not in "iu":
        raise ValueError("call edges have the wrong shape")
    calls = calls[np.argsort(calls[:, 0], kind="stable")]
    files, starts = np.unique(calls[:, 0], return_index=True)
    by_file = dict(zip(files.tolist(), np.split(calls, starts[1:]))) if calls.shape[0] else {}
    if any(not 0 <= f < len(index.files) or syntax[f] is None for f in by_file):
        raise ValueError("a call edge leaves from a file without structure")
    edges = {}
    for file_id, file_syntax in enumerate(syntax):
        if resolves_calls(file_syntax):
            edges[file_id] = by_file.pop(file_id, np.zeros((0, 5), dtype=np.int64))
    if by_file:
        raise ValueError("call edges leave from a file that resolves no calls")
    return syntax, fragments, edges
