"""What parsing one file gives the index: its kept syntax nodes and, for languages with call
resolution, its symbols (definitions, import bindings, call sites). Plain data, no parsing here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np


# Symbols are NamedTuples, not frozen dataclasses: an index of Django holds 220k of them and
# loading builds them all (a frozen dataclass constructs about 5x slower).
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
    calls: tuple[CallSite, ...] = ()
    # The file had more kept nodes than graph.max_file_nodes and keeps only its root: it is
    # searched as text but takes no part in the code graph (no symbols, no relations).
    over_node_limit: bool = False

    # A parse worker sends its files' syntax to the indexing process by pickle. Call sites travel as
    # columns: unpickling Django's 169k CallSite tuples one by one took 0.5 s of that process's CPU
    # while the workers parsed (each calls the NamedTuple's constructor); columns take a tenth.
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        calls = self.calls
        state["calls"] = (
            np.fromiter((c.node for c in calls), dtype=np.int64, count=len(calls)),
            np.fromiter((c.hops for c in calls), dtype=np.int64, count=len(calls)),
            [c.callee for c in calls],
            [c.enclosing_class for c in calls],
        )
        return state

    def __setstate__(self, state: dict) -> None:
        nodes, hops, callees, classes = state["calls"]
        self.__dict__.update(state)
        self.__dict__["calls"] = tuple(map(CallSite._make, zip(nodes.tolist(), hops.tolist(), callees, classes)))

    @property
    def n_nodes(self) -> int:
        return int(self.parent.shape[0])

    @property
    def n_lines(self) -> int:
        return int(self.line_chars.shape[0])


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


def call_array(edges: Sequence[CallEdge]) -> np.ndarray:
    """Edges as rows (source file, source node, target file, target node, hops), int64 (n, 5)."""
    return np.asarray(
        [(e.source_file, e.source_node, e.target_file, e.target_node, e.hops) for e in edges], dtype=np.int64
    ).reshape(-1, 5)
