"""What parsing one file gives the index: its kept syntax nodes and, for languages with call
resolution, its symbols (definitions, import bindings, call sites). Plain data, no parsing here."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


# Symbols are NamedTuples, not frozen dataclasses: a large index holds hundreds of thousands and
# loading builds them all (a frozen dataclass constructs slower:
# docs/measurements.md#parsing-and-analysis).
class Definition(NamedTuple):
    node: int  # file-local node index of the def / class statement
    name: str
    kind: str  # "function" | "class"
    scope: str  # "" at module level, "Outer" / "Outer.Inner" for methods and nested classes
    in_function: bool  # defined inside a function body (not reachable by name from outside)
    bases: tuple[str, ...]  # dotted base-class expressions (classes only)


class ImportBinding(NamedTuple):
    local: str  # the dotted name this binding makes available, e.g. "np" or "os.path"
    module: str  # imported module, relative ones keep their leading dots, e.g. "..pkg.mod"
    name: str  # "" for `import module`; else the imported attribute of `module`


class CallSite(NamedTuple):
    node: int  # file-local index of the innermost kept node holding the call
    hops: int  # syntax-tree edges from that kept node down to the call node
    callee: str  # dotted callee expression, e.g. "f", "self.save", "models.Model"
    enclosing_class: str  # qualified name of the nearest enclosing class, "" if none


@dataclass(frozen=True)
class CallSites:
    """One file's call sites as columns, row r being call site r (CallSite's fields).

    Columns, not a CallSite each: building their tuples again after every pickle (a parse worker's
    results) and every load cost the indexing process (docs/measurements.md#parsing-and-analysis).
    Iterating gives CallSite tuples; the call resolver reads the columns.
    """

    node: tuple[int, ...] = ()
    hops: tuple[int, ...] = ()
    callee: tuple[str, ...] = ()
    enclosing_class: tuple[str, ...] = ()

    @classmethod
    def of_rows(cls, rows: Iterable[Sequence[int | str]]) -> CallSites:
        """From rows (node, hops, callee, enclosing class), e.g. CallSite tuples or stored lists."""
        columns = tuple(zip(*rows))
        if not columns:
            return cls()
        node, hops, callee, enclosing_class = columns
        return cls(node, hops, callee, enclosing_class)  # type: ignore[arg-type]

    def sharing_names(self, names: dict[str, str]) -> CallSites:
        """The same call sites, each name the one object `names` holds for it (added when new).

        A repository calls the same names from thousands of places, and a copy per call site (a
        parse worker's pickle, a load's JSON) was resident for the index's life
        (docs/measurements.md#memory-of-a-cold-build). The table is the caller's, for one build, one
        batch or one load, and goes with it: `sys.intern` would keep every name an editor's buffers
        ever held (immortal on Python 3.12).
        """
        if not len(self.node):
            return self
        return CallSites(self.node, self.hops, tuple(map(names.setdefault, self.callee, self.callee)),
                         tuple(map(names.setdefault, self.enclosing_class, self.enclosing_class)))

    def columns(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[str, ...], tuple[str, ...]] | tuple[()]:
        """The four columns, or () for no call site (as symbols.json stores them: snapshot_encoding.StoredCalls)."""
        return (self.node, self.hops, self.callee, self.enclosing_class) if len(self.node) else ()

    def __len__(self) -> int:
        return len(self.node)

    def __iter__(self) -> Iterator[CallSite]:
        return map(CallSite._make, self.rows())

    def rows(self) -> Iterator[tuple[int, int, str, str]]:
        """(node, hops, callee, enclosing class) per call site, as plain tuples."""
        return zip(self.node, self.hops, self.callee, self.enclosing_class)


@dataclass(frozen=True)
class FileSyntax:
    """Kept syntax nodes of one file, in pre-order (index 0 is the root).

    Arrays have shape (n_nodes,) unless noted; lines are 0-based and inclusive.
    """

    path: str
    language: str
    parent: np.ndarray  # int32, index of the nearest kept ancestor, -1 for the root
    start_line: np.ndarray  # int32
    end_line: np.ndarray  # int32, inclusive
    length: np.ndarray  # int32, node text length in bytes
    line_chars: np.ndarray  # int32, shape (n_lines,): non-whitespace characters per line
    definitions: tuple[Definition, ...] = ()
    imports: tuple[ImportBinding, ...] = ()
    calls: CallSites = CallSites()
    # The file had more kept nodes than graph.max_file_nodes and keeps only its root: it is
    # searched as text but takes no part in the code graph (no symbols, no relations).
    over_node_limit: bool = False

    @property
    def n_nodes(self) -> int:
        return int(self.parent.shape[0])

    @property
    def n_lines(self) -> int:
        return int(self.line_chars.shape[0])


def symbol_shape(syntax: FileSyntax) -> tuple:
    """What other files' call resolution reads of a file, its definitions' nodes aside: the
    definitions (scope, name, kind, nesting, bases) in order, and the imports. An edit that keeps it
    (a change inside bodies) leaves every other file's resolved calls where they were."""
    return tuple((d.scope, d.name, d.kind, d.in_function, d.bases) for d in syntax.definitions), syntax.imports


def split_lines(text: str) -> list[str]:
    """Lines as editors and RepoCoder count them: a final newline does not start another line."""
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


@dataclass(frozen=True)
class CallEdge:
    source_file: int  # file index of the call site
    source_node: int  # file-local node index of the call site
    target_file: int
    target_node: int  # file-local node index of the called definition
    hops: int  # syntax edges between the call site's kept node and the call expression


def resolved_calls(file_id: int, syntax: FileSyntax,
                   resolve_callee: Callable[[int, str, str], tuple[int, Definition] | None]) -> list[CallEdge]:
    """Call edges whose call site lies in `file_id`, every language's resolver alike: each call row
    resolved once per (callee, enclosing class), calls of a definition to itself dropped, in order
    of (call site, target file, target node, hops)."""
    rows: set[tuple[int, int, int, int]] = set()  # plain tuples: hashing CallEdges costs more
    cache: dict[tuple[str, str], tuple[int, int] | None] = {}
    for node, hops, callee, enclosing_class in syntax.calls.rows():
        key = (callee, enclosing_class)
        target = cache.get(key, False)
        if target is False:
            found = resolve_callee(file_id, callee, enclosing_class)
            target = cache[key] = None if found is None else (found[0], found[1].node)
        if target is None or (target[0] == file_id and target[1] == node):
            continue
        rows.add((node, target[0], target[1], hops))
    return [CallEdge(file_id, node, target_file, target_node, hops)
            for node, target_file, target_node, hops in sorted(rows)]


def call_array(edges: Sequence[CallEdge]) -> np.ndarray:
    """Edges as rows (source file, source node, target file, target node, hops), int64 (n, 5)."""
    return np.asarray(
        [(e.source_file, e.source_node, e.target_file, e.target_node, e.hops) for e in edges], dtype=np.int64
    ).reshape(-1, 5)
