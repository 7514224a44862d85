"""Compiled inner loops (numba), one module per stage of the index:

- `windows`: the syntax nodes covering each window of a file (fragments.py).
- `shortest_paths`: bounded Dijkstra over the code graph, its search anchors and exit costs.
- `relation_rows`: rows of W (eq. 8) from those searches, whole or in three steps.
- `environment`: eq. 9 for the few fragments a query's top K can hold, and a bound for the rest.
- `csr`: compressed sparse rows: built from edge lists, sorted, mirrored, trimmed, transposed.
- `row_patching`: an edit's changes to the adjacency rows kept between edits.
- `postings`: BM25 postings: built, summed, scored.
- `words`: words of UTF-8 text as ids of one process-wide table.
- `selection`: the k largest entries of a list or of each row.
- `buffers`: output buffers that double as they fill.

Every kernel is pure: arrays in, arrays out (or scratch the caller hands in and gets back ready for
the next call). They release the GIL so callers can run chunks on several threads. Exact Python
references live in the tests. Import a kernel from its module; this package holds only `warm_up`.

numba caches each module's compiled code beside it and checks only that module's own file for
changes: a kernel that calls into another module (relation_rows -> shortest_paths) keeps its cached
copy of the callee when only the callee's file changed. `repomem.kernel_compile` clears the cache
whenever any kernel's source changed (its marker is named by all of them) and compiles them again.
"""

from __future__ import annotations

import numpy as np


def warm_up() -> None:
    """Load the compiled-kernel machinery (numba's first call in a process costs ~0.3 s, later
    ones load their cached code in milliseconds). A cold build does it on a thread while the
    files are listed, so the parse workers it forks next inherit it instead of each paying it."""
    from repomem.index.kernels.selection import top_k_positions

    top_k_positions(np.zeros(2), 1)
