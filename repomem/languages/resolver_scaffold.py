"""What the call resolvers of Go, Java, JavaScript and Rust share: the learn / forget cycle over
per-file tables with answers remembered between changes, the index of files by the names they
import, the breadth-first member search through a class's bases, and the longest common folder
prefix that breaks ties. Each resolver keeps its own lookup rules."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Protocol, TypeVar

from repomem.languages.parsed import CallEdge, Definition, FileSyntax, resolved_calls

Owner = TypeVar("Owner")
Member = TypeVar("Member")
Key = TypeVar("Key", bound=Hashable)
Answer = TypeVar("Answer")


class Located(Protocol):
    """A definition and the file it is in (each resolver's own `Found`)."""

    @property
    def file(self) -> int: ...

    @property
    def definition(self) -> Definition: ...


class TableResolver:
    """A resolver over per-file tables: `_register` adds a file's tables, `forget` drops them, and
    the answers in `_answers()` (memos that depend only on the tables) are dropped on any change."""

    _files: dict[int, FileSyntax]

    def _register(self, file_id: int, syntax: FileSyntax) -> None:
        raise NotImplementedError

    def forget(self, file_id: int) -> None:
        raise NotImplementedError

    def resolve_callee(self, file_id: int, callee: str, enclosing_class: str) -> tuple[int, Definition] | None:
        raise NotImplementedError

    def _answers(self) -> Iterable[dict]:
        """The memos dropped on any change of the tables."""
        return ()

    def _forget_answers(self) -> None:
        for memo in self._answers():
            memo.clear()

    def learn(self, file_id: int, syntax: FileSyntax) -> None:
        """Add (or replace) one file's tables."""
        self.forget(file_id)
        self._forget_answers()
        self._register(file_id, syntax)

    def resolve_file(self, file_id: int) -> list[CallEdge]:
        """Call edges whose call site lies in `file_id`."""
        return resolved_calls(file_id, self._files[file_id], self.resolve_callee)


def remembered(memo: dict[Key, Answer], key: Key, compute: Callable[[], Answer]) -> Answer:
    """`memo[key]`, computed by `compute()` the first time it is asked for."""
    if key not in memo:
        memo[key] = compute()
    return memo[key]


def drop_holder(holders_by_key: dict[str, set[int]], key: str, file_id: int) -> None:
    """`file_id` out of the files held under `key`; the key goes when no file is left."""
    holders = holders_by_key.get(key)
    if holders is not None:
        holders.discard(file_id)
        if not holders:
            del holders_by_key[key]


def member_through_bases(owner: Owner, own_member: Callable[[Owner], Member | None],
                         bases: Callable[[Owner], Iterable[Owner]], identity: Callable[[Owner], Hashable],
                         max_depth: int) -> Member | None:
    """The first member `own_member` finds on `owner` or, breadth first, on its bases and theirs
    (`max_depth` levels), each class visited once (by `identity`)."""
    queue: list[tuple[Owner, int]] = [(owner, 0)]
    seen: set[Hashable] = set()
    while queue:
        current, depth = queue.pop(0)
        key = identity(current)
        if key in seen:
            continue
        seen.add(key)
        found = own_member(current)
        if found is not None:
            return found
        if depth < max_depth:
            queue.extend((base, depth + 1) for base in bases(current))
    return None


def node_identity(found: Located) -> tuple[int, int]:
    """A definition found in a file, by (file, node): the usual `identity` of member_through_bases."""
    return found.file, found.definition.node


def shared_prefix_length(a: Sequence[str], b: Sequence[str]) -> int:
    """How many leading elements (folders, path parts) `a` and `b` have in common."""
    count = 0
    for x, y in zip(a, b):
        if x != y:
            break
        count += 1
    return count
