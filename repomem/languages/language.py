"""What repomem knows about one programming language, as plain data plus two optional hooks.

Every language tree-sitter-language-pack parses gets fragments, syntax and directory edges from
its grammar alone. A language that also provides `symbols` and `call_resolver` gets call edges
(docs/design.md section 2): Python, Go, Java, Rust and JavaScript / TypeScript (one package each
under `repomem.languages`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from repomem.languages.parsed import CallSites, Definition, FileSyntax, ImportBinding
from repomem.languages.treesitter import Node


class SymbolCollector(Protocol):
    """Collects one file's symbols during the syntax walk (one collector per file)."""

    watched_types: frozenset[str]  # node types `enter` is called for

    def enter(self, node: Node, kept_index: int, scope: str, in_function: bool) -> tuple[str, bool]:
        """Visit a node of a watched type (its nearest kept node is `kept_index`); returns the class
        scope and the inside-a-function flag its children see."""

    def finish(self, root: Node, kept_index: dict[int, int], class_scope: Sequence[str]
               ) -> tuple[tuple[Definition, ...], tuple[ImportBinding, ...], CallSites]:
        """Definitions, import bindings and call sites, once the walk is over. `kept_index` maps
        tree-sitter node ids to kept-node indexes; `class_scope` is each kept node's class scope."""


class CallResolver(Protocol):
    """Resolves call sites of one language's files to definitions in the repository.

    Optional, for edits that change a file's symbols: `changed_names(old, new)` and
    `affected_by(file_ids, names, modules)` scope which files are resolved again (see the Python
    resolver); a resolver without them has its files' importers and callers resolved again."""

    def learn(self, file_id: int, syntax: FileSyntax) -> None: ...

    def forget(self, file_id: int) -> None: ...

    def module_of(self, file_id: int) -> str | None: ...

    def dependents(self, file_ids: set[int], modules: set[str] = frozenset()) -> set[int]: ...

    def resolve_file(self, file_id: int) -> list: ...

    def resolve_callee(self, file_id: int, callee: str, enclosing_class: str) -> tuple[int, Definition] | None: ...

    def binds_repository(self, file_id: int, binding: ImportBinding) -> bool:
        """Whether one of the file's imports binds the repository's own code (names in scope)."""


@dataclass(frozen=True)
class Language:
    name: str  # tree-sitter-language-pack's grammar name
    extensions: tuple[str, ...]  # lower-case, with the dot
    # Statement granularity (docs/design.md section 2): node types ending in one of these, clause types
    # and everything inside a statement container (see syntax.py) are graph nodes.
    statement_suffixes: tuple[str, ...] = ("_statement", "_definition", "_declaration", "_item")
    clause_types: frozenset[str] = frozenset()
    # False where statements never hide inside expressions (Python), so the walk can skip them.
    statements_in_expressions: bool = True
    symbols: Callable[[], SymbolCollector] | None = None
    # (files by id, max re-export hops, max base-class depth) -> resolver
    call_resolver: Callable[[dict[int, FileSyntax], int, int], CallResolver] | None = None
    # Completion: blocks open with a trailing ':' and end by dedent, so after an opener the model
    # writes the block's body (several lines); elsewhere it completes the current line.
    indented_blocks: bool = False
    # Blocks open with a trailing '{' and close with the '}' that balances it (C, Go, Rust, Java,
    # JavaScript, ...): after an opener the model writes the body, up to that brace.
    brace_blocks: bool = False
    string_or_comment_types: frozenset[str] = field(default_factory=frozenset)
    # What starts a line comment: the prompt's block headers and retrieved lines are comments in
    # the cursor file's own language, so the model reads them as context, not as code to imitate.
    line_comment: str = "//"
    # Line starts (at column 0) that open an import statement: the names in scope that a prompt
    # whose left context was cut no longer shows (prompt.scope_imports).
    import_prefixes: tuple[str, ...] = ()
    # Where those starts also open other statements (`const x = require(...)` against `const x = 1`):
    # a regex the whole statement's text must hold to be an import ("": every such statement is one).
    import_pattern: str = ""

    @property
    def resolves_calls(self) -> bool:
        return self.symbols is not None and self.call_resolver is not None


# The string and comment node types of the brace languages' grammars: a cursor inside one
# completes one line.
BRACE_STRING_OR_COMMENT_TYPES = frozenset({
    "comment", "line_comment", "block_comment", "string", "string_literal", "template_string",
    "interpreted_string_literal", "raw_string_literal", "char_literal", "character_literal", "string_fragment",
    "encapsed_string", "line_string_literal", "multi_line_string_literal", "verbatim_string_literal",
    "multiline_comment", "heredoc", "heredoc_body", "nowdoc", "regex",  # Kotlin, Swift, PHP, JavaScript
})


# The brace languages' definition nodes (functions, methods, classes, impls, ...) across their
# grammars: the innermost one around a cursor is "the cursor's function".
BRACE_DEFINITION_TYPES = frozenset({
    "function_declaration", "method_declaration", "method_definition", "function_definition", "function_item",
    "constructor_declaration", "class_declaration", "abstract_class_declaration", "interface_declaration",
    "enum_declaration", "record_declaration", "impl_item", "trait_item", "struct_item", "enum_item",
    "generator_function_declaration",
})
# Function values that are definitions only when bound to a name (`const f = () => {...}`).
BRACE_NAMED_FUNCTION_VALUE_TYPES = frozenset({"arrow_function", "function_expression", "function"})


def brace_language(name: str, extensions: tuple[str, ...], **rules) -> Language:
    """A language whose blocks are braces and whose line comments start with `//` (C, Go, Java,
    JavaScript, Rust, ...); `rules`: any other field (a module with relations gives `symbols`,
    `call_resolver`, `import_prefixes`)."""
    return Language(name, extensions, brace_blocks=True, line_comment="//",
                    string_or_comment_types=BRACE_STRING_OR_COMMENT_TYPES, **rules)
