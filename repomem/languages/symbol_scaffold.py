"""What the symbol collectors of Go, Java, JavaScript and Rust share: the lists the syntax walk
fills, dotted names read from a chain of member accesses, and call sites placed on their kept
nodes. Each language's collector keeps its own rules (which nodes define, import or call what)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from repomem.languages.parsed import CallSites, Definition, ImportBinding
from repomem.languages.treesitter import Node, nearest_kept, text_of

MAX_DOTTED_PARTS = 32  # longer chains are no call a resolver could follow
CallRow = tuple[int, int, str, str]  # (kept index, parent steps to it, callee, enclosing class)


class CollectedSymbols:
    """A file's definitions and import bindings in the order the walk met them."""

    def __init__(self) -> None:
        self.definitions: list[Definition] = []
        self.imports: list[ImportBinding] = []

    def symbols(self, calls: Iterable[CallRow]) -> tuple[tuple[Definition, ...], tuple[ImportBinding, ...], CallSites]:
        """What `finish` returns: the collected definitions and imports, and `calls` as call sites."""
        return tuple(self.definitions), tuple(self.imports), CallSites.of_rows(calls)


class MemberChain:
    """How one grammar writes `a.b.c`: the node type of one access, the fields holding its owner and
    its member, the node types a member may have (None: any) and those the chain may start at."""

    def __init__(self, plain: re.Pattern[str], access_type: str, owner_field: str, member_field: str,
                 member_types: frozenset[str] | None, root_types: frozenset[str]):
        self.plain = plain  # text that is a dotted name as it stands (no spaces, comments or calls)
        self.access_type = access_type
        self.owner_field = owner_field
        self.member_field = member_field
        self.member_types = member_types
        self.root_types = root_types

    def dotted_name(self, node: Node) -> str | None:
        """'a.b.c' for a name or a chain of member accesses of names starting at a root type; None
        otherwise (a call's result, an index, a literal, a chain of more than MAX_DOTTED_PARTS)."""
        text = text_of(node)
        if self.plain.fullmatch(text):
            return text if text.count(".") <= MAX_DOTTED_PARTS else None
        parts: list[str] = []
        while node.type == self.access_type and len(parts) <= MAX_DOTTED_PARTS:
            owner, member = node.child_by_field_name(self.owner_field), node.child_by_field_name(self.member_field)
            if owner is None or member is None or (self.member_types is not None
                                                   and member.type not in self.member_types):
                return None
            parts.append(text_of(member))
            node = owner
        if node.type not in self.root_types or len(parts) > MAX_DOTTED_PARTS:
            return None
        parts.append(text_of(node))
        return ".".join(reversed(parts))


def call_rows(nodes: Iterable[Node], kept_index: dict[int, int], class_scope: Sequence[str],
              callee_of: Callable[[Node, str], str | None], placed: dict[int, tuple[int, int]],
              anchor: Callable[[Node], Node | None] = lambda node: node.parent) -> list[CallRow]:
    """One row per captured node whose callee (`callee_of(node, enclosing class)`) is a name: the
    row sits on the nearest kept node of `anchor(node)` (by default the capture's parent, the call).
    `placed` remembers the steps from each node passed to its kept node, across calls."""
    rows = []
    for node in nodes:
        owner_index, hops = nearest_kept(anchor(node), kept_index, placed)
        enclosing = class_scope[owner_index]
        callee = callee_of(node, enclosing)
        if callee:
            rows.append((owner_index, hops, callee, enclosing))
    return rows
