"""Checks of an index read from disk, before any compiled kernel touches it.

The numba kernels index arrays unchecked: one parent, node offset or covering node past the end
was a segfault (exit 139, every command, `serve` included), a NaN weight or a negative document
frequency a silently wrong ranking. A sealed manifest (index/provenance.py) already proves the
bytes are the ones this machine wrote; these checks are the second line, against a writer's bug
or a disk that returns other bytes than it was given: every array's shape, bounds, monotonic
offsets and finite values, and the invariants that tie them together (a file's fragments, the
postings' row sums and document frequencies). Any failure raises IndexDamage; the store turns it
into a rebuild. Costs are linear in the arrays (Django: see scripts/bench_index_load.py).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from repomem.index.repo_index import FileRecord, RepoIndex


class IndexDamage(ValueError):
    """An index read from disk breaks an invariant the code relies on (the message says which)."""


def require(condition: Any, message: str) -> None:
    """`assert` that survives `python -O`: damage found on disk is data, not a programming error."""
    if not bool(condition):
        raise IndexDamage(message)


def _integers(array: np.ndarray, name: str, shape: tuple[int, ...] | None = None) -> None:
    require(isinstance(array, np.ndarray) and array.dtype.kind in "iu", f"{name} is not an integer array")
    if shape is not None:
        require(array.shape == shape, f"{name} has shape {array.shape}, not {shape}")


def _within(array: np.ndarray, low: int, high: int, name: str) -> None:
    """Every value in [low, high)."""
    if array.size:
        require(int(array.min()) >= low and int(array.max()) < high, f"{name} points outside [{low}, {high})")


def _finite(array: np.ndarray, name: str, low: float = 0.0, high: float = np.inf) -> None:
    """Every value finite and in [low, high]."""
    require(isinstance(array, np.ndarray) and array.dtype.kind in "fiu", f"{name} is not numeric")
    if array.size:
        require(bool(np.isfinite(array).all()), f"{name} holds a NaN or infinity")
        require(float(array.min()) >= low and float(array.max()) <= high, f"{name} leaves [{low}, {high}]")


def check_offsets(offsets: np.ndarray, parts: int, total: int, name: str) -> None:
    """An offsets vector that splits `total` entries into `parts` consecutive runs."""
    _integers(offsets, name, (parts + 1,))
    require(int(offsets[0]) == 0 and int(offsets[-1]) == total, f"{name} does not span its {total} entries")
    require(bool((np.diff(offsets) >= 0).all()), f"{name} goes backwards")


def check_compressed(matrix: sp.spmatrix, name: str) -> None:
    """Index bounds of a CSR/CSC matrix read from disk (scipy does not check them)."""
    compressed_axis = 0 if matrix.format == "csr" else 1
    check_offsets(matrix.indptr, matrix.shape[compressed_axis], matrix.indices.shape[0], f"{name}'s index pointer")
    require(matrix.data.shape == matrix.indices.shape, f"{name}: values and indices disagree")
    _integers(matrix.indices, f"{name}'s indices")
    _within(matrix.indices, 0, matrix.shape[1 - compressed_axis], f"{name}'s indices")


def check_relative_path(path: Any) -> None:
    """A repository-relative POSIX path in normal form: never absolute, never `..`, so that reading
    it (fragment text, prompts) cannot leave the repository."""
    require(isinstance(path, str) and path, "a file path is empty")
    require("\0" not in path and "\\" not in path and not path.startswith("/"), f"file path {path!r} is not relative")
    require(posixpath.normpath(path) == path and path.split("/")[0] != "..",
            f"file path {path!r} leaves the repository")


def check_records(records: Sequence[FileRecord | None], n_fragments: int) -> None:
    """The manifest's file records: types, relative paths, fragment ranges inside the index."""
    seen: set[str] = set()
    for record in records:
        if record is None:
            continue
        check_relative_path(record.path)
        require(record.path not in seen, f"file {record.path!r} is listed twice")
        seen.add(record.path)
        for field in ("size", "mtime_ns", "first_fragment", "n_fragments", "masked"):
            value = getattr(record, field)
            require(type(value) is int and value >= 0, f"{record.path}: {field} is not a count")
        require(isinstance(record.language, str) and isinstance(record.digest, str), f"{record.path}: bad record")
        require(type(record.over_node_limit) is bool, f"{record.path}: bad record")
        require(record.first_fragment + record.n_fragments <= n_fragments,
                f"{record.path}: its fragments lie past the end of the index")


def check_query_arrays(index: RepoIndex) -> None:
    """Everything a query reads: fragments, postings, BM25 statistics and W."""
    n = index.n_fragments
    n_files = len(index.files)
    require(index.live.dtype == np.bool_ and index.live.shape == (n,), "live has the wrong shape")
    for name in ("fragment_file", "fragment_start", "fragment_end", "doc_len"):
        _integers(getattr(index, name), name, (n,))
    for name in ("thresholds", "rowsum"):
        require(getattr(index, name).shape == (n,), f"{name} has the wrong shape")
        _finite(getattr(index, name), name)
    check_records(index.files, n)

    live = index.live
    files = index.fragment_file
    require(bool((files[~live] == -1).all()), "a dead fragment still names a file")
    _within(files[live], 0, n_files, "a live fragment's file")
    starts, ends = index.fragment_start[live], index.fragment_end[live]
    require(not starts.size or (int(starts.min()) >= 0 and bool((ends > starts).all())),
            "a fragment's lines are negative or end before they start")
    # Each live file owns exactly its record's run of fragments, all of them live, and no live
    # fragment lies outside every run (vectorised: Django has 2,788 files).
    present = [(file_id, r.first_fragment, r.n_fragments) for file_id, r in enumerate(index.files) if r is not None]
    ids, firsts, counts = (np.asarray([p[k] for p in present], dtype=np.int64).reshape(-1) for k in range(3))
    run_starts = np.cumsum(counts) - counts
    positions = np.repeat(firsts - run_starts, counts) + np.arange(int(counts.sum()), dtype=np.int64)
    require(bool(live[positions].all()) and bool((files[positions] == np.repeat(ids, counts)).all()),
            "a file's fragment range disagrees with the fragments")
    require(positions.shape[0] == int(live.sum()), "a live fragment belongs to no file's range")

    # Postings: bounds, positive counts, and the two statistics BM25 reads from them, exactly.
    vocabulary_size = len(index.vocabulary)
    _integers(index.df, "df", (vocabulary_size,))
    tokens = np.zeros(n, dtype=np.int64)
    frequencies = np.zeros(vocabulary_size, dtype=np.int64)
    covered = np.zeros(n + 1, dtype=np.int64)
    for number, segment in enumerate(index.segments):
        tf = segment.tf
        name = f"postings segment {number}"
        require(tf.format == "csc", f"{name} is not by term")
        check_compressed(tf, name)
        require(0 <= segment.first_doc and segment.first_doc + tf.shape[0] <= n, f"{name} covers missing fragments")
        require(tf.shape[1] <= vocabulary_size, f"{name} has unknown terms")
        _integers(tf.data, f"{name}'s counts")
        require(not tf.data.size or int(tf.data.min()) > 0, f"{name} holds a count below 1")
        documents = tf.indices.astype(np.int64) + segment.first_doc
        tokens += np.bincount(documents, weights=tf.data, minlength=n).astype(np.int64)
        terms = np.repeat(np.arange(tf.shape[1], dtype=np.int64), np.diff(tf.indptr))
        frequencies += np.bincount(terms[live[documents]], minlength=vocabulary_size)
        covered[segment.first_doc] += 1
        covered[segment.first_doc + tf.shape[0]] -= 1
    require(bool((np.cumsum(covered[:n]) <= 1).all()), "postings segments overlap")
    require(bool((index.doc_len[live] == tokens[live]).all()), "document lengths disagree with the postings")
    require(bool((index.df == frequencies).all()), "document frequencies disagree with the postings")

    # W: in bounds, weights in (0, 1] (max-product path strengths), updates inside the index.
    w_base = index.w_base
    require(w_base.shape[0] == w_base.shape[1] <= n, "W's base is not square inside the index")
    check_compressed(w_base, "W")
    _finite(w_base.data, "W's weights", 0.0, 1.0)
    rows, cols, values = index.delta_entries
    _integers(rows, "W's updated rows")
    _integers(cols, "W's updated columns")
    require(rows.shape == cols.shape == values.shape and rows.ndim == 1, "W's updates disagree in length")
    _within(rows, 0, n, "W's updated rows")
    _within(cols, 0, n, "W's updated columns")
    _finite(values, "W's updated weights", 0.0, 1.0)
    require(index.w_delta.shape == (n, n), "W's updates have the wrong shape")
    require(0 <= index.base_segments <= len(index.segments), "the base segment count is out of range")
    require(all(0 <= f < n_files and index.files[f] is not None for f in index.base_files),
            "a base file is not in the index")


def check_file_structure(index: RepoIndex, file_id: int) -> None:
    """One file's syntax nodes, windows and symbols against its record (called after loading)."""
    record, syntax, fragments = index.files[file_id], index.syntax[file_id], index.file_fragments[file_id]
    require(record is not None and syntax is not None and fragments is not None, f"file {file_id} has no structure")
    assert record is not None and syntax is not None and fragments is not None
    n_nodes, n_lines = syntax.n_nodes, syntax.n_lines
    name = record.path
    for array_name in ("parent", "start_line", "end_line", "length"):
        _integers(getattr(syntax, array_name), f"{name}: {array_name}", (n_nodes,))
    _integers(syntax.line_chars, f"{name}: line_chars")
    require(n_nodes >= 1 and int(syntax.parent[0]) == -1, f"{name}: the syntax tree has no root")
    # Pre-order: every node's parent comes before it (the tree kernels walk up by this).
    local = np.arange(n_nodes)
    require(bool(((syntax.parent[1:] >= 0) & (syntax.parent[1:] < local[1:])).all()),
            f"{name}: a parent is out of order")
    require(not syntax.start_line.size or (int(syntax.start_line.min()) >= 0
                                           and bool((syntax.end_line >= syntax.start_line).all())
                                           and int(syntax.end_line.max()) <= n_lines),
            f"{name}: a node's lines are out of range")
    require(not syntax.length.size or int(syntax.length.min()) >= 0, f"{name}: a negative node length")
    require(not syntax.line_chars.size or int(syntax.line_chars.min()) >= 0, f"{name}: a negative line length")

    n_windows = fragments.starts.shape[0]
    _integers(fragments.starts, f"{name}: window starts")
    _integers(fragments.ends, f"{name}: window ends", (n_windows,))
    require(n_windows == record.n_fragments, f"{name}: {n_windows} windows for {record.n_fragments} fragments")
    run = slice(record.first_fragment, record.first_fragment + record.n_fragments)
    require(bool((index.fragment_start[run] == fragments.starts).all())
            and bool((index.fragment_end[run] == fragments.ends).all()), f"{name}: windows disagree with fragments")
    require(not n_windows or int(fragments.ends.max()) <= max(n_lines, 1), f"{name}: a window runs past the file")
    cover = fragments.cover_window.shape[0]
    for array_name in ("cover_window", "cover_node", "cover_weight"):
        _integers(getattr(fragments, array_name), f"{name}: {array_name}", (cover,))
    _within(fragments.cover_window, 0, n_windows, f"{name}: cover_window")
    _within(fragments.cover_node, 0, n_nodes, f"{name}: cover_node")
    require(not cover or int(fragments.cover_weight.min()) >= 0, f"{name}: a negative cover weight")

    for definition in syntax.definitions:
        require(type(definition.node) is int and 0 <= definition.node < n_nodes, f"{name}: a definition's node")
        require(isinstance(definition.name, str) and definition.kind in ("function", "class")
                and isinstance(definition.scope, str) and all(isinstance(b, str) for b in definition.bases),
                f"{name}: a definition of the wrong shape")
    for binding in syntax.imports:
        require(all(isinstance(part, str) for part in binding), f"{name}: an import of the wrong shape")
    calls = syntax.calls
    require(len(calls.hops) == len(calls.callee) == len(calls.enclosing_class) == len(calls), f"{name}: call columns")
    require(all(type(node) is int and 0 <= node < n_nodes for node in calls.node)
            and all(type(hops) is int and hops >= 0 for hops in calls.hops)
            and all(isinstance(text, str) for text in (*calls.callee, *calls.enclosing_class)),
            f"{name}: a call site of the wrong shape")


def check_structure(index: RepoIndex) -> None:
    """Every live file's structure, and the call edges between them."""
    for file_id, record in enumerate(index.files):
        if record is not None:
            check_file_structure(index, file_id)
    n_files = len(index.files)
    # Nodes per file, 0 for a file without structure: a call edge into one points past the end.
    node_counts = np.asarray([0 if s is None else s.n_nodes for s in index.syntax], dtype=np.int64)
    for file_id, edges in index.calls.items():
        _integers(edges, "call edges")
        require(edges.ndim == 2 and edges.shape[1] == 5, "call edges have the wrong shape")
        if not edges.shape[0]:
            continue
        require(bool((edges[:, 0] == file_id).all()), "a call edge is filed under another file")
        _within(edges[:, 2], 0, n_files, "a call edge's target file")
        require(int(edges[:, 4].min()) >= 0, "a call edge with negative hops")
        for column, file_column in ((1, 0), (3, 2)):
            sizes = node_counts[edges[:, file_column]]
            require(bool(((edges[:, column] >= 0) & (edges[:, column] < sizes)).all()), "a call edge's node")
