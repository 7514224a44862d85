"""Saving an index: a new snapshot, written whole, then made current in one step.

A writer builds the snapshot in a temporary folder, fsyncs it, renames it into place and only then
swaps CURRENT, so a process killed at any instant leaves the previous index loadable. `base.npz`
(W and postings as built by the last full build) never changes between full builds and is
hard-linked into later snapshots; an incremental save writes only the small files.
"""

from __future__ import annotations

import os
import secrets
import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from repomem.index.index_folder import (
    CURRENT,
    GITIGNORE,
    IGNORE_EVERYTHING,
    claim_index_folder,
    clear_file_path,
    fsync_dir,
    newest_generation,
    prune_snapshots,
    writer_lock,
)
from repomem.index.kernels.csr import upper_triangle
from repomem.index.repo_index import RepoIndex
from repomem.index.snapshot_encoding import files_arrays, segments_arrays, segments_deltas, symbols_json
from repomem.index.snapshot_files import write_json_gz, write_npz
from repomem.index.snapshot_manifest import BASE_FILES, sealed_base_digests, write_manifest, written_digest
from repomem.regular_files import replace_private


def _write_base(index: RepoIndex, path: Path) -> str:
    """base.npz, W and the base postings; returns its digest."""
    # W is exactly symmetric (symmetric_union keeps one value per pair) with an empty diagonal: its
    # upper triangle is all of it, at half the bytes. A kernel, not scipy's triu (its COO copies of all
    # of W were a cold build's peak of memory); float32 is lossless: weights are float32 values
    # (stored_weights).
    w = index.w_base
    upper_indptr, upper_indices, upper_data = upper_triangle(w.indptr, w.indices, w.data)
    base_segments = index.segments[: index.base_segments]
    arrays = {"wu_indptr": upper_indptr, "wu_indices": upper_indices, "wu_data": upper_data,
              "w_shape": np.asarray(w.shape), **segments_arrays("seg", base_segments)}
    del upper_indptr, upper_indices, upper_data
    deltas = {"wu_indices": "wu_indptr", **segments_deltas("seg", base_segments)}
    return written_digest(write_npz, path, arrays, deltas=deltas,
                          # W's float32 weights barely deflate, and deflating them was a save's longest
                          # member (docs/measurements.md#index-on-disk).
                          stored=("wu_data",), consume=True)  # the triangle goes once written


def save_index(index: RepoIndex, directory: Path, base_snapshot: Path | None = None) -> Path:
    """Write a new snapshot and make it current; returns its folder.

    `base_snapshot`: a previous snapshot of the same full build whose base files can be
    hard-linked instead of rewritten (set by `load_index`).
    """
    claim_index_folder(directory, index.root)
    # The call edges and the changed files' structure are written from memory: an index loaded
    # lazily (only its files restamped since) must read them first, or the snapshot saved would
    # lose them (and with them every later update's call edges).
    index.ensure_structure()
    with writer_lock(directory):
        clear_file_path(directory, GITIGNORE)
        replace_private(directory / GITIGNORE, IGNORE_EVERYTHING)
        tag = secrets.token_hex(4)
        temporary = directory / f"tmp-{tag}"
        temporary.mkdir(mode=0o700)
        # Snapshot names must keep growing across full builds, which restart at generation 0.
        index.generation = max(index.generation, newest_generation(directory) + 1)
        try:
            # Leaving the block waits for the helper, so a failed save never removes the folder under it.
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="save-base") as helper:
                base_written: Future | None = None
                files_written: Future | None = None
                digests: dict[str, str] = {}
                reused = sealed_base_digests(base_snapshot, index.base_id) if base_snapshot is not None else None
                reuse = reused is not None and index.base_id != ""
                if reuse:
                    assert base_snapshot is not None and reused is not None
                    try:
                        for name in BASE_FILES:
                            os.link(base_snapshot / name, temporary / name)
                        digests.update(reused)
                    except OSError:  # no hard links here, or the base was pruned meanwhile: write it
                        for name in BASE_FILES:
                            (temporary / name).unlink(missing_ok=True)
                        reuse = False
                if not reuse:
                    index.base_id = tag
                    base_files = [i for i, r in enumerate(index.files) if r is not None]
                    index.base_files = set(base_files)
                    # On a helper thread: deflate and numpy release the GIL, so W and the postings are
                    # coded while this thread writes the symbols (Python) and the rest.
                    base_written = helper.submit(_write_base, index, temporary / "base.npz")
                    # The files' arrays on the helper too: the symbols' JSON (Python) is this thread's
                    # longest part, so the two threads finish about together. Gathered there, once W's
                    # file is written: gathered here, at submission, they were resident beside W's coded
                    # copies, a cold build's peak of memory (docs/measurements.md#memory-of-a-cold-build).
                    files_written = helper.submit(
                        lambda: written_digest(write_npz, temporary / "files.npz", files_arrays(index, base_files)))
                    digests["symbols.json.gz"] = written_digest(write_json_gz, temporary / "symbols.json.gz",
                                                                symbols_json(index, base_files))
                changed_files = [i for i, r in enumerate(index.files) if r is not None and i not in index.base_files]
                rows, cols, values = index.delta_entries
                vocabulary_blob = "\n".join(index.vocabulary).encode("utf-8")
                digests["delta.npz"] = written_digest(write_npz, temporary / "delta.npz", {
                    "live": index.live, "fragment_file": index.fragment_file,
                    "fragment_start": index.fragment_start, "fragment_end": index.fragment_end,
                    "doc_len": index.doc_len, "df": index.df, "thresholds": index.thresholds,
                    "rowsum": index.rowsum, "calls": index.all_calls(), "delta_rows": rows, "delta_cols": cols,
                    "delta_values": values.astype(np.float32),
                    "vocabulary": np.frombuffer(vocabulary_blob, dtype=np.uint8),
                    **segments_arrays("dseg", index.segments[index.base_segments :]),
                }, deltas=segments_deltas("dseg", index.segments[index.base_segments :]),
                    # Every save writes these whole: deflate took 8 ms each to save 40% of 0.4 MB.
                    stored=("thresholds", "rowsum"))
                digests["changed_files.npz"] = written_digest(write_npz, temporary / "changed_files.npz",
                                                              files_arrays(index, changed_files))
                digests["changed_symbols.json.gz"] = written_digest(
                    write_json_gz, temporary / "changed_symbols.json.gz", symbols_json(index, changed_files))
                for name, written in (("base.npz", base_written), ("files.npz", files_written)):
                    if written is not None:
                        digests[name] = written.result()  # its error, if any, is this save's
                write_manifest(temporary, index, digests)
                fsync_dir(temporary)
                final = directory / f"snap-{index.generation:06d}-{tag}"
                os.rename(temporary, final)
                fsync_dir(directory)
                clear_file_path(directory)
                replace_private(directory / CURRENT, (final.name + "\n").encode())
                fsync_dir(directory)
        except BaseException:
            shutil.rmtree(temporary, ignore_errors=True)
            raise
        prune_snapshots(directory, keep={final.name}, extra=index.config.index.keep_snapshots)
        index.snapshot = final
        return final
