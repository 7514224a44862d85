"""One file's syntax: the graph nodes its tree contributes, and its symbols where its language has them.

Granularity (docs/design.md section 2 leaves it open):
- "statement": the root, every statement / definition / clause and the blocks holding them.
  In Python every ancestor of a statement is such a node, so tree strengths between kept nodes
  equal those of the full named tree; expressions are contracted into their statement, and a
  call edge leaving an expression `h` edges deep weighs call_weight * syntax_weight**h.
- "named": every named node, the FragRel paper's reading (about 6x more nodes).
Either way the kept nodes form a tree (each kept node's parent is its nearest kept ancestor).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

import numpy as np

from repomem.languages.call_reuse import KnownCalls, call_reuse, subtree_end
from repomem.languages.language import Language, SymbolCollector
from repomem.languages.parsed import CallSites, FileSyntax, split_lines
from repomem.languages.registry import language_named
from repomem.languages.reparse import TreeMemo
from repomem.languages.treesitter import ERROR_KIND_ID, Node, node_kind_names, parse
from repomem.languages.walk_reuse import KnownWalk, WalkReuse

# Node types whose named children are statements, per grammar family.
_CONTAINERS = frozenset({
    "module", "block", "program", "source_file", "translation_unit", "statement_block",
    "compound_statement", "class_body", "declaration_list", "field_declaration_list",
    "interface_body", "enum_body", "switch_body", "switch_block", "body_statement", "chunk",
    "template_body", "function_body", "namespace_body", "declaration_block",
})
_NEVER_KEPT = frozenset({"comment", "line_comment", "block_comment", "ERROR"})


def _line_chars(text: str) -> np.ndarray:
    """Characters of each line without its indentation and trailing blanks, shape (n_lines,)."""
    lines = split_lines(text)
    return np.fromiter((len(line.strip()) for line in lines), dtype=np.int32, count=len(lines))


@dataclass
class KeptTree:
    """The kept nodes of one parsed file, in walk order (index 0 is the root)."""

    parents: list[int]
    starts: list[int]  # first line of each kept node
    ends: list[int]  # last line
    lengths: list[int]  # bytes
    kept_index: dict[int, int]  # tree-sitter node id -> kept index
    class_scope: list[str]  # each kept node's class scope, to resolve self.m() later
    symbols: SymbolCollector | None
    over_limit: bool = False  # the walk stopped at its node limit: the lists are incomplete
    # With `record` (an edited file's walk): what the next version's walk may copy (walk_reuse).
    known: KnownWalk | None = None
    # The subtrees copied from the last walk (walk_reuse.py): (their top node, its kept index);
    # their inner nodes are not in kept_index until `index_copied` puts them there.
    copied: list[tuple[Node, int]] = field(default_factory=list)

    def index_copied(self, language: Language, granularity: str, first: int, end: int) -> None:
        """kept_index for every node of the copied subtrees that meet the bytes [first, end) (the
        call sites captured again): a walk of those subtrees alone numbers their kept nodes in
        the order the whole walk would have, from their top node's index on."""
        for node, top in self.copied:
            if node.start_byte < end and node.end_byte > first:
                inner = walk_tree(node, language, granularity, 0, 0)
                for node_id, local in inner.kept_index.items():
                    self.kept_index[node_id] = top + local


def extract_syntax(path: str, language_name: str, text: str, granularity: str, max_nodes: int = 0,
                   trees: TreeMemo | None = None, fresh_if_error: bool = False) -> FileSyntax:
    """Parse one file with its own grammar and collect its kept nodes (and symbols, where the
    language has them). A file with more than `max_nodes` kept nodes (0: no limit) keeps only its
    root: its text is still windowed and searched, but it takes no part in the code graph.
    `trees`: the last parses of edited files, which this parse starts from (the same tree);
    `fresh_if_error`: see `TreeMemo.parse`."""
    language = language_named(language_name)
    source = text.encode("utf-8")
    tree = (parse(language.name, source) if trees is None
            else trees.parse(path, language.name, source, fresh_if_error))
    root = tree.root_node
    last_line = max(len(split_lines(text)) - 1, 0)
    reparse = trees.reparse_of(path, language.name, source) if trees is not None else None
    before = reparse.before if reparse is not None else None
    known = before.walk if isinstance(before, KnownCalls) else None
    copy = (WalkReuse(known, reparse.start, reparse.end, reparse.delta, last_line)
            if known is not None and reparse is not None else None)
    kept = walk_tree(root, language, granularity, last_line, len(source), max_nodes, reuse=copy,
                     record=trees is not None)
    if kept.over_limit:
        return FileSyntax(path=path, language=language.name, parent=np.full(1, -1, dtype=np.int32),
                          start_line=np.zeros(1, dtype=np.int32), end_line=np.asarray(kept.ends[:1], dtype=np.int32),
                          length=np.asarray(kept.lengths[:1], dtype=np.int32), line_chars=_line_chars(text),
                          over_node_limit=True)
    symbols = kept.symbols
    parent = np.asarray(kept.parents, dtype=np.int32)
    if symbols is None:
        definitions, imports, calls = (), (), CallSites()
    elif trees is not None and getattr(symbols, "reuses_calls", False):
        # An edited file: the call sites its edit cannot have changed are the last version's
        # (languages/call_reuse.py).
        reuse = call_reuse(reparse, parent, root, kept.kept_index, symbols.callee_types, _CONTAINERS)
        if kept.copied and reuse is None:
            # Every call site captured again: a whole walk, whose kept_index holds every node.
            kept = walk_tree(root, language, granularity, last_line, len(source), max_nodes, record=True)
            symbols = kept.symbols
        elif kept.copied:
            # Call sites captured again inside copied subtrees (those around the edit's statement):
            # their kept nodes by tree-sitter id.
            kept.index_copied(language, granularity, reuse.first, reuse.end)
        definitions, imports, calls = symbols.finish(root, kept.kept_index, kept.class_scope, reuse)
        trees.attach(path, language.name, source,
                     KnownCalls(parent, symbols.call_starts, symbols.call_rows, kept.known))
    else:
        definitions, imports, calls = symbols.finish(root, kept.kept_index, kept.class_scope)
    return FileSyntax(
        path=path,
        language=language.name,
        parent=parent,
        start_line=np.asarray(kept.starts, dtype=np.int32),
        end_line=np.asarray(kept.ends, dtype=np.int32),
        length=np.asarray(kept.lengths, dtype=np.int32),
        line_chars=_line_chars(text),
        definitions=definitions,
        imports=imports,
        calls=calls,
    )


# A node kind's walk rules as bits of one byte, indexed by tree-sitter's kind id (`Node.kind_id`):
# reading them costs one index where the type's name would cost a new str and five set lookups.
_KEEP = 1  # kept whatever its parent: a container, a clause or a statement-suffixed type
_CONTAINER = 2  # its named children are statements
_WATCHED = 4  # handed to the symbol collector
_NEVER = 8  # never kept (comments, ERROR)
_ERROR = 16  # descended into where a statement's expressions are skipped (Python), like a statement


@cache
def _kind_rules(language: Language, watched: frozenset[str]) -> bytes:
    """`language`'s walk rules per kind id (65,536 entries: ERROR's id is the last)."""
    rules = bytearray(ERROR_KIND_ID + 1)
    for kind_id, kind in enumerate(node_kind_names(language.name)):
        rules[kind_id] = (
            (_KEEP if kind in _CONTAINERS or kind in language.clause_types or kind.endswith(language.statement_suffixes)
             else 0)
            | (_CONTAINER if kind in _CONTAINERS else 0) | (_WATCHED if kind in watched else 0)
            | (_NEVER if kind in _NEVER_KEPT else 0))
    rules[ERROR_KIND_ID] = _NEVER | _ERROR | (_WATCHED if "ERROR" in watched else 0)
    return bytes(rules)


def walk_tree(root: Node, language: Language, granularity: str, last_line: int, source_bytes: int,
              max_nodes: int = 0, reuse: WalkReuse | None = None, record: bool = False) -> KeptTree:
    """The kept nodes under `root` (the root spans the whole file: lines 0..`last_line`,
    `source_bytes` bytes); the language's symbol collector has seen the nodes it watches. The walk
    stops once more than `max_nodes` are kept (0: no limit) and says so (`over_limit`).
    `reuse`: the last version's walk, whose subtrees outside the edit are copied (walk_reuse.py);
    `record`: keep what the next version's walk needs for that (`KeptTree.known`)."""
    limit = max_nodes if max_nodes > 0 else -1
    symbols = language.symbols() if language.symbols is not None else None
    parents: list[int] = [-1]
    starts: list[int] = [0]
    ends: list[int] = [last_line]
    lengths: list[int] = [source_bytes]
    kept_index: dict[int, int] = {root.id: 0}
    class_scope: list[str] = [""]
    record = record or reuse is not None
    walked = _Recorded(source_bytes, symbols) if record else None
    copied: list[tuple[Node, int]] = []
    named = granularity == "named"
    watched = symbols.watched_types if symbols is not None else frozenset()
    rules = _kind_rules(language, watched)
    # Explicit stack: (node, kept parent index, parent is a container, class scope, inside a function)
    stack: list[tuple[Node, int, bool, str, bool]] = [
        (child, 0, root.type in _CONTAINERS, "", False) for child in reversed(root.named_children)
    ]
    # The loop runs once per visited node (about a million on a large repository): rules are read
    # by kind id and the symbol collector is called only for the node kinds it watches.
    descend_everywhere = named or language.statements_in_expressions
    pushed_under_statements = _KEEP | _CONTAINER | _WATCHED | _ERROR
    while stack:
        node, kept_parent, in_container, scope, inside_function = stack.pop()
        rule = rules[node.kind_id]
        # Kept: every named node ("named"), else statements, clauses and whatever sits in or is a
        # statement container; comments and error nodes never.
        kept = not rule & _NEVER and (named or in_container or rule & _KEEP)
        own_index = kept_parent
        if kept:
            own_index = len(parents)
            if reuse is not None and in_container and reuse.holds_span(walked.start_bytes[kept_parent],
                                                                       walked.end_bytes[kept_parent]):
                old = reuse.old_node(node.start_byte, node.end_byte, scope, inside_function)
                if old is not None:
                    kept_index[node.id] = own_index
                    _copy_subtree(reuse, old, kept_parent, parents, starts, ends, lengths, class_scope, walked, symbols)
                    copied.append((node, own_index))
                    if limit >= 0 and len(parents) > limit:  # the node limit falls inside the copy
                        return walk_tree(root, language, granularity, last_line, source_bytes, max_nodes)
                    continue
            parents.append(kept_parent)
            start_row = node.start_point[0]
            end_row, end_column = node.end_point
            starts.append(start_row)
            # A node ending at column 0 ends with the line break before it: its last line is the one above.
            ends.append(end_row - 1 if end_column == 0 and end_row > start_row else end_row)
            start_byte, end_byte = node.start_byte, node.end_byte
            lengths.append(end_byte - start_byte)
            kept_index[node.id] = own_index
            class_scope.append(scope)
            if walked is not None:
                walked.start_bytes.append(start_byte)
                walked.end_bytes.append(end_byte)
                walked.in_function.append(inside_function)
                walked.definitions_before.append(len(walked.definitions))
                walked.imports_before.append(len(walked.imports))
            if own_index == limit:
                return KeptTree(parents, starts, ends, lengths, kept_index, class_scope, symbols, over_limit=True)
        child_scope, child_in_function = scope, inside_function
        if rule & _WATCHED:
            child_scope, child_in_function = symbols.enter(node, own_index, scope, inside_function)
            if walked is not None:
                walked.owned_imports(own_index)
        is_container = bool(rule & _CONTAINER)
        # Kept nodes can lie below `node` unless the language keeps statements out of expressions.
        if descend_everywhere or is_container:
            for child in reversed(node.named_children):
                stack.append((child, own_index, is_container, child_scope, child_in_function))
        elif kept or rule & _ERROR:
            # Under a node that is no container, a child is kept, descended into or watched only
            # for these kinds; the others (a statement's expressions: most of the visits) would be
            # popped to no effect, so they are not pushed.
            for child in reversed(node.named_children):
                if rules[child.kind_id] & pushed_under_statements:
                    stack.append((child, own_index, False, child_scope, child_in_function))

    known = walked.known(parents, starts, ends, lengths, class_scope, last_line) if walked is not None else None
    return KeptTree(parents, starts, ends, lengths, kept_index, class_scope, symbols, known=known, copied=copied)


class _Recorded:
    """What a recording walk keeps beside its lists for the next version (walk_reuse.KnownWalk):
    each kept node's bytes and "inside a function", how many definitions and imports came before
    it (appended by the walk's loop itself: a call per kept node cost what copying saved on small
    files), and the kept node each import came from."""

    def __init__(self, source_bytes: int, symbols: SymbolCollector | None):
        self.definitions: list = symbols.definitions if symbols is not None else []
        self.imports: list = symbols.imports if symbols is not None else []
        self.start_bytes, self.end_bytes = [0], [source_bytes]
        self.in_function = [False]
        self.definitions_before, self.imports_before = [0], [0]
        self.import_owners: list[int] = []

    def owned_imports(self, owner: int) -> None:
        """The imports the collector just added came from kept node `owner`."""
        self.import_owners.extend([owner] * (len(self.imports) - len(self.import_owners)))

    def known(self, parents: list[int], starts: list[int], ends: list[int], lengths: list[int],
              class_scope: list[str], last_line: int) -> KnownWalk:
        return KnownWalk(np.asarray(parents, dtype=np.int32), starts, ends, lengths, self.start_bytes,
                         self.end_bytes, class_scope, self.in_function, list(self.definitions), list(self.imports),
                         self.import_owners, self.definitions_before, self.imports_before, last_line)


def _copy_subtree(reuse: WalkReuse, old: int, kept_parent: int, parents: list[int], starts: list[int],
                  ends: list[int], lengths: list[int], class_scope: list[str], walked: _Recorded | None,
                  symbols: SymbolCollector | None) -> None:
    """Old kept node `old`'s subtree appended as the walk would have met it, under `kept_parent`:
    its kept nodes, their definitions and imports (handed to the collector as `enter` would have),
    and what the recording keeps."""
    known = reuse.known
    end = subtree_end(known.parents, old)
    first = len(parents)
    offset = first - old
    parents.append(kept_parent)
    parents.extend((known.parents[old + 1 : end] + offset).tolist())
    after = known.start_bytes[old] > reuse.start  # the node lies after the span: lines and bytes move
    shift, delta = (reuse.line_shift, reuse.delta) if after else (0, 0)
    starts.extend(_shifted(known.starts[old:end], shift))
    ends.extend(_shifted(known.ends[old:end], shift))
    lengths.extend(known.lengths[old:end])
    class_scope.extend(known.class_scope[old:end])
    # The definitions and imports collected while the old walk was inside the subtree: a run
    # starting where the walk met `old`, each from a kept node of the subtree.
    definitions = known.definitions
    d0 = d = known.definitions_before[old]
    while d < len(definitions) and old <= definitions[d].node < end:
        d += 1
    i0 = i = known.imports_before[old]
    while i < len(known.imports) and old <= known.import_owners[i] < end:
        i += 1
    if walked is not None:
        walked.start_bytes.extend(_shifted(known.start_bytes[old:end], delta))
        walked.end_bytes.extend(_shifted(known.end_bytes[old:end], delta))
        walked.in_function.extend(known.in_function[old:end])
        walked.definitions_before.extend(len(walked.definitions) + before - d0
                                         for before in known.definitions_before[old:end])
        walked.imports_before.extend(len(walked.imports) + before - i0 for before in known.imports_before[old:end])
        walked.import_owners.extend(owner + offset for owner in known.import_owners[i0:i])
    if symbols is not None:
        symbols.definitions.extend(definition._replace(node=definition.node + offset)
                                   for definition in definitions[d0:d])
        symbols.imports.extend(known.imports[i0:i])


def _shifted(values: list[int], by: int) -> list[int]:
    """`values` moved by `by` (lines or bytes after the edited span); the slice itself when 0."""
    return [value + by for value in values] if by else values
