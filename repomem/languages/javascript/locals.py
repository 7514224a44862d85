"""Names declared inside functions and blocks (parameters, let / const / var, catch and loop
variables, nested functions and classes), kept as byte ranges: a call whose first name is one of
them calls a value, never the imported or module-level function of that name.

The walk meets nodes in document order, so the scopes open around a node are a stack whose
finished entries are dropped as the walk passes their end. Hoisting is not modelled: a name counts
in its whole scope, which is where JavaScript makes it shadow the outer one anyway (a `let` before
its declaration is an error, not the outer name).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from repomem.languages.treesitter import Node, text_of

FUNCTION_TYPES = frozenset({"function_declaration", "generator_function_declaration", "function_expression",
                            "function", "generator_function", "arrow_function", "method_definition"})
BLOCK_TYPES = frozenset({"statement_block", "for_statement", "for_in_statement", "catch_clause"})


def pattern_names(node: Node | None) -> Iterator[str]:
    """The names a binding pattern declares: `a`, `{a, b: c, ...d}`, `[a, = 1]`, TS parameters."""
    pending = [node]
    while pending:
        current = pending.pop()
        if current is None:
            continue
        kind = current.type
        if kind in ("identifier", "shorthand_property_identifier_pattern"):
            yield text_of(current)
        elif kind in ("required_parameter", "optional_parameter"):
            pending.append(current.child_by_field_name("pattern"))
        elif kind in ("assignment_pattern", "object_assignment_pattern"):
            pending.append(current.child_by_field_name("left"))
        elif kind == "pair_pattern":
            pending.append(current.child_by_field_name("value"))
        elif kind in ("object_pattern", "array_pattern", "rest_pattern", "formal_parameters"):
            pending.extend(current.named_children)


def parameter_names(function: Node) -> Iterator[str]:
    single = function.child_by_field_name("parameter")  # `x => ...`
    yield from pattern_names(single if single is not None else function.child_by_field_name("parameters"))


class LocalScopes:
    """The scopes open at the walk's position and the local names declared so far."""

    def __init__(self) -> None:
        self._open: list[tuple[int, int, bool]] = []  # (start byte, end byte, is a function)
        self._declared: dict[str, list[tuple[int, int]]] = defaultdict(list)

    def advance(self, node: Node) -> None:
        """Close the scopes that end before `node` (call for every node the walk hands over)."""
        start = node.start_byte
        while self._open and self._open[-1][1] <= start:
            self._open.pop()

    @property
    def at_module_level(self) -> bool:
        return not self._open

    def open(self, node: Node, is_function: bool) -> None:
        self._open.append((node.start_byte, node.end_byte, is_function))

    def declare(self, names: Iterator[str] | list[str], function_wide: bool = False) -> None:
        """Declare names in the innermost scope (`var`: the innermost function); nothing at module
        level, where names are the module's own."""
        scope = next((s for s in reversed(self._open) if s[2] or not function_wide), None)
        if scope is None:
            return
        for name in names:
            if name:
                self._declared[name].append((scope[0], scope[1]))

    def shadows(self, name: str, at_byte: int) -> bool:
        """Whether a local declaration of `name` is in scope at `at_byte`."""
        return any(start <= at_byte < end for start, end in self._declared.get(name, ()))
