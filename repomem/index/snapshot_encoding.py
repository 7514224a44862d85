"""An index's parts as a snapshot's arrays and JSON members, and back: postings segments, the
files' structure (syntax nodes, windows, symbols), and W from its upper triangle."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import msgspec
import numpy as np
import scipy.sparse as sp

from repomem.index.bm25 import TermSegment
from repomem.index.calls import resolves_calls
from repomem.index.fragments import FileFragments
from repomem.index.integrity import check_file_arrays
from repomem.index.kernels.csr import symmetric_from_upper
from repomem.index.repo_index import RepoIndex
from repomem.languages.parsed import CallSites, Definition, FileSyntax, ImportBinding


def segments_arrays(prefix: str, segments: list[TermSegment]) -> dict[str, np.ndarray]:
    """Postings segments as arrays named `prefix`count, `prefix`<n>_meta/_indptr/_indices/_data."""
    out: dict[str, np.ndarray] = {f"{prefix}count": np.asarray([len(segments)])}
    for number, segment in enumerate(segments):
        tf = segment.tf
        out[f"{prefix}{number}_meta"] = np.asarray([segment.first_doc, tf.shape[0], tf.shape[1]], dtype=np.int64)
        out[f"{prefix}{number}_indptr"] = tf.indptr
        out[f"{prefix}{number}_indices"] = tf.indices
        out[f"{prefix}{number}_data"] = tf.data
    return out


def segments_deltas(prefix: str, segments: list[TermSegment]) -> dict[str, str]:
    """Postings' document ids, delta coded within each term (column of the CSC matrix)."""
    return {f"{prefix}{number}_indices": f"{prefix}{number}_indptr" for number in range(len(segments))}


def segments_from(prefix: str, data: Any) -> list[TermSegment]:
    """The postings segments `segments_arrays` wrote under `prefix`."""
    segments = []
    for number in range(int(data[f"{prefix}count"][0])):
        first, rows, cols = (int(v) for v in data[f"{prefix}{number}_meta"])
        tf = sp.csc_matrix(
            (data[f"{prefix}{number}_data"], data[f"{prefix}{number}_indices"], data[f"{prefix}{number}_indptr"]),
            shape=(rows, cols),
        )
        segments.append(TermSegment(first, tf))
    return segments


def files_arrays(index: RepoIndex, file_ids: list[int]) -> dict[str, np.ndarray]:
    """Syntax nodes, windows and call edges of some files, concatenated with offsets."""
    def stack(values: list[np.ndarray], dtype: Any) -> tuple[np.ndarray, np.ndarray]:
        sizes = np.fromiter((v.shape[0] for v in values), dtype=np.int64, count=len(values))
        offsets = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        joined = np.concatenate(values).astype(dtype) if values else np.zeros(0, dtype=dtype)
        return joined, offsets

    syntaxes = [index.syntax[i] for i in file_ids]
    fragments = [index.file_fragments[i] for i in file_ids]
    assert all(s is not None for s in syntaxes) and all(f is not None for f in fragments)
    out: dict[str, np.ndarray] = {"file_ids": np.asarray(file_ids, dtype=np.int64)}
    for name in ("parent", "start_line", "end_line", "length"):
        out[name], out["node_offsets"] = stack([getattr(s, name) for s in syntaxes], np.int32)
    out["line_chars"], out["line_offsets"] = stack([s.line_chars for s in syntaxes], np.int32)
    out["win_starts"], out["win_offsets"] = stack([f.starts for f in fragments], np.int32)
    out["win_ends"], _ = stack([f.ends for f in fragments], np.int32)
    out["cover_window"], out["cover_offsets"] = stack([f.cover_window for f in fragments], np.int32)
    out["cover_node"], _ = stack([f.cover_node for f in fragments], np.int32)
    out["cover_weight"], _ = stack([f.cover_weight for f in fragments], np.int64)
    return out


class StoredCalls(NamedTuple):
    """A file's call sites as stored: `CallSites`' four columns, [] for none."""

    node: tuple[int, ...] = ()
    hops: tuple[int, ...] = ()
    callee: tuple[str, ...] = ()
    enclosing_class: tuple[str, ...] = ()


class FileSymbols(msgspec.Struct):
    """One file's member of symbols.json: definitions, import bindings, call sites."""

    d: tuple[Definition, ...] = ()
    i: tuple[ImportBinding, ...] = ()
    c: StoredCalls = StoredCalls()


# What symbols.json holds, by file id: the decoder builds the named tuples and checks every field's
# type as it reads (a bool is not an int, 2.0 is not 2), so the structure check is left the values
# (integrity.check_symbols: nodes inside the file's tree, hops not negative).
SYMBOLS_SCHEMA = dict[str, FileSymbols]


def symbols_json(index: RepoIndex, file_ids: list[int]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The symbols.json object's members, one per file whose language resolves calls (`FileSymbols`).
    Call sites as four columns (node, hops, callee, enclosing class), as `CallSites` holds them: a
    list per call site cost a load one list and a row tuple each, and the save a list each
    (docs/measurements.md#index-load). Tuples and named tuples are JSON arrays as they stand, so
    nothing is copied into lists first; `in_function` is written as a JSON bool whatever a parser
    made it."""
    for file_id in file_ids:
        syntax = index.syntax[file_id]
        assert syntax is not None
        if not resolves_calls(syntax):
            continue
        yield str(file_id), {
            "d": [(d.node, d.name, d.kind, d.scope, bool(d.in_function), d.bases) for d in syntax.definitions],
            "i": syntax.imports,
            "c": syntax.calls.columns(),
        }


def decode_files(
    data: Any, symbols: dict[str, FileSymbols], index: RepoIndex, overridden: set[int]
) -> dict[int, tuple[FileSyntax, FileFragments]]:
    """The structure of the files in one files.npz / symbols pair, checked before it is sliced;
    files in `overridden` are described again by a later pair and skipped."""
    records = index.files
    file_ids = data["file_ids"].tolist()
    current = np.asarray([0 <= f < len(records) and records[f] is not None and f not in overridden for f in file_ids],
                         dtype=bool)
    check_file_arrays(data, records, index.fragment_start, index.fragment_end, current)
    out = {}
    no_symbols = FileSymbols()
    names: dict[str, str] = {}  # each call site name once in this load (CallSites.sharing_names)
    node_offsets = data["node_offsets"]
    line_offsets = data["line_offsets"]
    win_offsets = data["win_offsets"]
    cover_offsets = data["cover_offsets"]
    for position, file_id in enumerate(file_ids):
        record = records[file_id]
        if not current[position]:
            continue
        assert record is not None
        n0, n1 = node_offsets[position], node_offsets[position + 1]
        l0, l1 = line_offsets[position], line_offsets[position + 1]
        w0, w1 = win_offsets[position], win_offsets[position + 1]
        c0, c1 = cover_offsets[position], cover_offsets[position + 1]
        entry = symbols.get(str(file_id), no_symbols)
        syntax = FileSyntax(
            path=record.path,
            language=record.language,
            parent=data["parent"][n0:n1],
            start_line=data["start_line"][n0:n1],
            end_line=data["end_line"][n0:n1],
            length=data["length"][n0:n1],
            line_chars=data["line_chars"][l0:l1],
            definitions=entry.d,
            imports=entry.i,
            calls=CallSites(*entry.c).sharing_names(names),
        )
        fragments = FileFragments(
            data["win_starts"][w0:w1], data["win_ends"][w0:w1],
            data["cover_window"][c0:c1], data["cover_node"][c0:c1], data["cover_weight"][c0:c1],
        )
        out[file_id] = (syntax, fragments)
    return out


def symmetric_matrix_from_upper(upper: sp.csr_matrix) -> sp.csr_matrix:
    """W from its strict upper triangle: canonical CSR (sorted columns, float64), the matrix that
    was saved."""
    if upper.shape[0] != upper.shape[1]:
        raise ValueError("W is not square")
    indptr, indices, data = symmetric_from_upper(upper.indptr, upper.indices, upper.data)
    if indptr[-1] <= np.iinfo(np.int32).max:  # scipy's choice: int32 indices while they fit
        indptr, indices = indptr.astype(np.int32), indices.astype(np.int32, copy=False)
    full = sp.csr_matrix(upper.shape, dtype=np.float64)
    full.indptr, full.indices, full.data = indptr, indices, data
    full.has_sorted_indices = True
    return full
