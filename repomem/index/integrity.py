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

from repomem.index.kernels.postings import PostingsSegment, add_posting_sums

if TYPE_CHECKING:
    from repomem.index.bm25 import TermSegment
    from repomem.index.repo_index import FileRecord, RepoIndex
    from repomem.languages.parsed import FileSyntax


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


def check_stored_w(upper: sp.csr_matrix) -> None:
    """W's stored strict upper triangle: in bounds, weights finite in [0, 1]. The whole W is this
    triangle and its mirror (snapshot_encoding.symmetric_matrix_from_upper, which also refuses
    columns that are not increasing above the diagonal), so this checks W's base entirely, on half
    of its entries."""
    check_compressed(upper, "W")
    _finite(upper.data, "W's weights", 0.0, 1.0)


def check_relative_path(path: Any) -> None:
    """A repository-relative POSIX path in normal form: never absolute, never `..`, so that reading
    it (fragment text, prompts) cannot leave the repository. A backslash is an ordinary character
    of a POSIX file name (`back\\slash.py`), as the scan takes it: refused here, such a file made
    every later command find the index damaged and rebuild it in full."""
    require(isinstance(path, str) and path, "a file path is empty")
    require("\0" not in path and not path.startswith("/"), f"file path {path!r} is not relative")
    require(posixpath.normpath(path) == path and path.split("/")[0] != "..",
            f"file path {path!r} leaves the repository")


# What takes a path out of normal form, looked for in all paths at once, each between NULs: a
# leading or trailing slash, an empty name, a `.` or `..` name. Eleven substring searches over the
# joined paths instead of a normpath per path: 50,000 records took 0.3 s to check one by one
# (docs/measurements.md#index-load).
_NOT_NORMAL = ("\0/", "/\0", "//", "/./", "/.\0", "\0./", "\0.\0", "/../", "/..\0", "\0../", "\0..\0")


def check_file_columns(paths: Sequence[str], numbers: dict[str, np.ndarray], over_node_limit: np.ndarray,
                       n_fragments: int) -> None:
    """The manifest's file records by column ("" the path of a removed file's slot): relative paths
    in normal form, each once; counts not negative; fragment ranges inside the index; flags 0 or 1."""
    live_paths = [path for path in paths if path]
    between = "\0" + "\0".join(live_paths) + "\0"
    for mark in _NOT_NORMAL:
        found = between.find(mark)
        if found >= 0:  # the path the mark lies in (a mark may start on the NUL before it)
            start = between.rfind("\0", 0, found + 1) + 1 if mark[0] != "\0" else found + 1
            path = between[start:between.find("\0", start)]
            check_relative_path(path)
            raise IndexDamage(f"file path {path!r} names the repository, not a file")  # ".", which normpath keeps
    require(len(set(live_paths)) == len(live_paths), "a file is listed twice")
    live = np.fromiter((bool(path) for path in paths), dtype=np.bool_, count=len(paths))
    for name, values in numbers.items():
        require(values.shape == live.shape and bool((values[live] >= 0).all()), f"a file's {name} is not a count")
    ends = numbers["first_fragment"][live] + numbers["n_fragments"][live]
    require(not ends.size or int(ends.max()) <= n_fragments, "a file's fragments lie past the end of the index")
    require(bool(((over_node_limit == 0) | (over_node_limit == 1)).all()), "a file's over_node_limit is not a flag")


def check_postings(segments: Sequence[TermSegment], live: np.ndarray, doc_len: np.ndarray, df: np.ndarray,
                   vocabulary_size: int) -> None:
    """The postings a query reads: bounds, positive counts, and the two statistics BM25 reads from
    them (each live document's length, each term's df), exactly. `live`: bool, shape (n_fragments,),
    checked by the caller; `doc_len` is checked here."""
    require(live.dtype == np.bool_ and live.ndim == 1, "live is not a mask")
    n = live.shape[0]
    _integers(doc_len, "doc_len", (n,))
    _integers(df, "df", (vocabulary_size,))
    tokens = np.zeros(n, dtype=np.int64)
    frequencies = np.zeros(vocabulary_size, dtype=np.int64)
    covered = np.zeros(n + 1, dtype=np.int64)
    for number, segment in enumerate(segments):
        tf = segment.tf
        name = f"postings segment {number}"
        require(tf.format == "csc", f"{name} is not by term")
        check_compressed(tf, name)
        require(0 <= segment.first_doc and segment.first_doc + tf.shape[0] <= n, f"{name} covers missing fragments")
        require(tf.shape[1] <= vocabulary_size, f"{name} has unknown terms")
        _integers(tf.data, f"{name}'s counts")
        require(not tf.data.size or int(tf.data.min()) > 0, f"{name} holds a count below 1")
        add_posting_sums(PostingsSegment(tf.indptr, tf.indices, tf.data, segment.first_doc), live, tokens, frequencies)
        covered[segment.first_doc] += 1
        covered[segment.first_doc + tf.shape[0]] -= 1
    require(bool((np.cumsum(covered[:n]) <= 1).all()), "postings segments overlap")
    require(bool((doc_len[live] == tokens[live]).all()), "document lengths disagree with the postings")
    require(bool((df == frequencies).all()), "document frequencies disagree with the postings")


def check_query_arrays(index: RepoIndex) -> None:
    """Everything else a query reads: fragments, BM25 statistics and W (the postings are
    `check_postings`', which a load runs while W is made)."""
    n = index.n_fragments
    n_files = len(index.files)
    require(index.live.dtype == np.bool_ and index.live.shape == (n,), "live has the wrong shape")
    for name in ("fragment_file", "fragment_start", "fragment_end", "doc_len"):
        _integers(getattr(index, name), name, (n,))
    for name in ("thresholds", "rowsum"):
        require(getattr(index, name).shape == (n,), f"{name} has the wrong shape")
        _finite(getattr(index, name), name)

    live = index.live
    files = index.fragment_file
    require(bool((files[~live] == -1).all()), "a dead fragment still names a file")
    _within(files[live], 0, n_files, "a live fragment's file")
    starts, ends = index.fragment_start[live], index.fragment_end[live]
    require(not starts.size or (int(starts.min()) >= 0 and bool((ends > starts).all())),
            "a fragment's lines are negative or end before they start")
    # Each live file owns exactly its record's run of fragments, all of them live, and no live
    # fragment lies outside every run (vectorised: docs/measurements.md#index-load).
    present = [(file_id, r.first_fragment, r.n_fragments) for file_id, r in enumerate(index.files) if r is not None]
    ids, firsts, counts = (np.asarray([p[k] for p in present], dtype=np.int64).reshape(-1) for k in range(3))
    run_starts = np.cumsum(counts) - counts
    positions = np.repeat(firsts - run_starts, counts) + np.arange(int(counts.sum()), dtype=np.int64)
    require(bool(live[positions].all()) and bool((files[positions] == np.repeat(ids, counts)).all()),
            "a file's fragment range disagrees with the fragments")
    require(positions.shape[0] == int(live.sum()), "a live fragment belongs to no file's range")

    # W: its base was checked as it was read (check_stored_w: the triangle whose mirror it is),
    # weights in (0, 1] (max-product path strengths); updates inside the index.
    w_base = index.w_base
    require(w_base.shape[0] == w_base.shape[1] <= n, "W's base is not square inside the index")
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


FILE_ARRAYS = {  # offsets vector -> the arrays it splits into one run per file (files.npz)
    "node_offsets": ("parent", "start_line", "end_line", "length"),
    "line_offsets": ("line_chars",),
    "win_offsets": ("win_starts", "win_ends"),
    "cover_offsets": ("cover_window", "cover_node", "cover_weight"),
}


def check_file_arrays(data: dict[str, np.ndarray], records: Sequence[FileRecord | None],
                      fragment_start: np.ndarray, fragment_end: np.ndarray, current: np.ndarray) -> None:
    """The per-file structure of a files.npz, all files at once (vectorised, see
    docs/measurements.md#index-load): syntax trees in pre-order with lines inside their file,
    windows and covering entries inside their file, and, for the files whose structure this set
    holds now (`current`, bool per file position), windows equal to the index's fragments."""
    file_ids = data["file_ids"]
    _integers(file_ids, "file ids of the structure")
    n_files = file_ids.shape[0]
    require(current.shape == (n_files,), "file positions disagree")
    _within(file_ids, 0, len(records), "file ids of the structure")
    require(np.unique(file_ids).shape[0] == n_files, "a file's structure is stored twice")
    for offsets_name, names in FILE_ARRAYS.items():
        for name in names:
            _integers(data[name], name)
            require(data[name].ndim == 1, f"{name} is not a vector")
            check_offsets(data[offsets_name], n_files, data[name].shape[0], f"{offsets_name} of {name}")
    sizes = {name: np.diff(data[name]).astype(np.int64) for name in FILE_ARRAYS}
    positions = np.arange(n_files)

    def owner_and_local(offsets_name: str) -> tuple[np.ndarray, np.ndarray]:
        """Per entry: its file position, and its index inside its file."""
        owner = np.repeat(positions, sizes[offsets_name])
        return owner, np.arange(owner.shape[0]) - data[offsets_name][owner]

    node_counts, line_counts, window_counts = sizes["node_offsets"], sizes["line_offsets"], sizes["win_offsets"]
    require(bool((node_counts >= 1).all()), "a syntax tree has no root")
    node_file, node_local = owner_and_local("node_offsets")
    parent, roots = data["parent"], node_local == 0
    # Pre-order: a root has no parent, every other node's parent comes before it in its file.
    inner = ~roots
    require(bool((parent[roots] == -1).all())
            and bool(((parent[inner] >= 0) & (parent[inner] < node_local[inner])).all()), "a parent is out of order")
    start_line, end_line = data["start_line"], data["end_line"]
    require(bool((start_line >= 0).all() & (end_line >= start_line).all() & (end_line <= line_counts[node_file]).all()),
            "a node's lines are out of range")
    require(not data["length"].size or int(data["length"].min()) >= 0, "a negative node length")
    require(not data["line_chars"].size or int(data["line_chars"].min()) >= 0, "a negative line length")

    window_file, window_local = owner_and_local("win_offsets")
    starts, ends = data["win_starts"], data["win_ends"]
    require(bool((starts >= 0).all() & (ends > starts).all() & (ends <= np.maximum(line_counts, 1)[window_file]).all()),
            "a window runs outside its file")
    cover_file, _ = owner_and_local("cover_offsets")
    require(bool(((data["cover_window"] >= 0) & (data["cover_window"] < window_counts[cover_file])).all()),
            "cover_window points outside its file's windows")
    require(bool(((data["cover_node"] >= 0) & (data["cover_node"] < node_counts[cover_file])).all()),
            "cover_node points outside its file's nodes")
    require(not data["cover_weight"].size or int(data["cover_weight"].min()) >= 0, "a negative cover weight")

    # The files this set describes now: as many windows as their records have fragments, and the same lines.
    live_positions = np.flatnonzero(current)
    present = [records[f] for f in file_ids[live_positions].tolist()]
    require(all(r is not None for r in present), "current structure for a removed file")
    firsts = np.asarray([r.first_fragment for r in present], dtype=np.int64)  # type: ignore[union-attr]
    counts = np.asarray([r.n_fragments for r in present], dtype=np.int64)  # type: ignore[union-attr]
    require(bool((window_counts[live_positions] == counts).all()), "a file's windows and fragments differ in number")
    first_of_position = np.zeros(n_files, dtype=np.int64)
    first_of_position[live_positions] = firsts
    of_current = current[window_file]
    fragment_ids = first_of_position[window_file[of_current]] + window_local[of_current]
    require(bool((fragment_start[fragment_ids] == starts[of_current]).all())
            and bool((fragment_end[fragment_ids] == ends[of_current]).all()), "windows disagree with fragments")


def check_symbols(syntax: FileSyntax) -> None:
    """One file's definitions and call sites point inside its tree, a definition is a function or a
    class, and the call columns are one length. Their fields' types were checked as they were read
    (snapshot_encoding.SYMBOLS_SCHEMA: the decoder refuses a value of another type)."""
    n_nodes, name = syntax.n_nodes, syntax.path
    if syntax.definitions:
        nodes, _, kind, *_ = zip(*syntax.definitions)
        require(0 <= min(nodes) and max(nodes) < n_nodes, f"{name}: a definition's node")
        require(set(kind) <= {"function", "class"}, f"{name}: a definition of an unknown kind")
    calls = syntax.calls
    if len(calls) or calls.hops or calls.callee or calls.enclosing_class:  # stored as columns: any may be short
        require(len(calls.hops) == len(calls.callee) == len(calls.enclosing_class) == len(calls), f"{name}: calls")
        require(0 <= min(calls.node) and max(calls.node) < n_nodes and min(calls.hops) >= 0,
                f"{name}: a call site's node or hops")


def check_structure(index: RepoIndex) -> None:
    """Every live file has its structure with well-formed symbols; call edges stay inside it.
    (The arrays themselves were checked as they were read: check_file_arrays.)"""
    for file_id, record in enumerate(index.files):
        if record is None:
            continue
        syntax, fragments = index.syntax[file_id], index.file_fragments[file_id]
        require(syntax is not None and fragments is not None, f"{record.path} has no structure")
        assert syntax is not None
        check_symbols(syntax)
    n_files = len(index.files)
    # Nodes per file, 0 for a file without structure: a call edge into one points past the end.
    node_counts = np.asarray([0 if s is None else s.n_nodes for s in index.syntax], dtype=np.int64)
    # Every file's call edges checked as one array (a dozen numpy calls a file were ~1 s of the
    # 50,000-file tree's structure load; docs/measurements.md, "An edit").
    for edges in index.calls.values():
        _integers(edges, "call edges")
        require(edges.ndim == 2 and edges.shape[1] == 5, "call edges have the wrong shape")
    filed = [(file_id, edges) for file_id, edges in index.calls.items() if edges.shape[0]]
    if not filed:
        return
    edges = np.concatenate([edges for _, edges in filed]).astype(np.int64, copy=False)
    owners = np.repeat(np.asarray([file_id for file_id, _ in filed], dtype=np.int64),
                       [len(edges) for _, edges in filed])
    require(bool((edges[:, 0] == owners).all()), "a call edge is filed under another file")
    _within(edges[:, 0], 0, n_files, "a call edge's file")
    _within(edges[:, 2], 0, n_files, "a call edge's target file")
    require(int(edges[:, 4].min()) >= 0, "a call edge with negative hops")
    for column, file_column in ((1, 0), (3, 2)):
        sizes = node_counts[edges[:, file_column]]
        require(bool(((edges[:, column] >= 0) & (edges[:, column] < sizes)).all()), "a call edge's node")
