"""Definition blocks: compact signature blocks of what the cursor's file imports or calls.

Relations that add context instead of re-ranking it: `prompt.definition_blocks` definitions
in other files, reached through the code graph's import and call edges, join each retrieval's
fragments in front, each a header and docstring line. Off (0) by
default: on the dev set it did not raise exact match (docs/eval-history.md).

FragRel's relations only re-rank windows that BM25 already scored; an API call's definition often
scores low against the lines before the call (how often it reached the prompt:
docs/repoeval-devset.md#definition-blocks). This module uses the same code graph to add context instead: the
functions and classes the file imports or calls in other files, ranked by the share of the words
of their names (as defined and as imported) that the query shows (subword tokens, as BM25 sees
them), then by whether the file already calls them, then by import order.
"""

from __future__ import annotations

from dataclasses import dataclass

from repomem.completion.levers.base import PromptLever
from repomem.completion.levers.signature_lines import signature_span
from repomem.config import BM25Config, Config
from repomem.index.tokens import tokenize
from repomem.languages.parsed import Definition
from repomem.positions import Cursor
from repomem.repo_view import RepoView
from repomem.retrieval.scoring import ScoredFragment
from repomem.retrieval.symbol_view import SymbolView


class DefinitionBlocks(PromptLever):
    name = "definition-blocks"

    @classmethod
    def applies(cls, config: Config) -> bool:
        return config.prompt.definition_blocks > 0

    def found(self, query_text: str, fragments: list[ScoredFragment]) -> list[ScoredFragment]:
        settings = self.round.config.prompt
        definitions = definitions_at(self.round.view, self.round.request.cursor, query_text,
                                     settings.definition_blocks, settings.definition_lines)
        return [*definitions, *fragments]


def definitions_at(view: RepoView, cursor: Cursor, query: str, count: int, max_lines: int) -> list[ScoredFragment]:
    """Signature blocks (`max_lines` lines each at most) of up to `count` definitions the
    cursor's file imports or calls in other files, best first. Each carries the id of the window
    holding its def line and s_rel = its rank score."""
    symbols = view.symbols
    if symbols is None or count <= 0:
        return []
    out = []
    lines_of: dict[str, list[str]] = {}  # each file read once, however many of its definitions
    for site in reachable_definitions(symbols, cursor.path, query, view.config.bm25, count):
        if site.path not in lines_of:
            lines_of[site.path] = view.file_lines(site.path)
        lines = lines_of[site.path]
        start, stop = signature_span(lines, site.start_line, site.end_line, max_lines)
        out.append(ScoredFragment(site.fragment, site.path, start, stop, 0.0, 0.0, site.score))
    return out


@dataclass(frozen=True)
class DefinitionSite:
    file_id: int
    path: str
    name: str
    kind: str  # "function" | "class"
    start_line: int  # 0-based, the def / class line
    end_line: int  # 0-based, inclusive: the definition's last line
    fragment: int  # a live window holding the def line
    score: float


def _definition_at(symbols: SymbolView, file_id: int, node: int) -> Definition | None:
    syntax = symbols.syntax(file_id)
    if syntax is None:
        return None
    return next((d for d in syntax.definitions if d.node == node), None)


def reachable_definitions(symbols: SymbolView, path: str, query: str, bm25: BM25Config, limit: int
                          ) -> list[DefinitionSite]:
    """Up to `limit` definitions in other files that `path` imports or calls, best first."""
    resolved = symbols.resolved_file(path) if limit > 0 else None
    if resolved is None:
        return []
    file_id, syntax, resolution = resolved
    # (file, node) -> (definition, order, called, names the file knows it by)
    found: dict[tuple[int, int], tuple[Definition, int, bool, frozenset[str]]] = {}
    for order, binding in enumerate(syntax.imports):
        if not binding.name:
            continue  # `import module`: its functions show up through the calls below
        target = resolution.resolve_name(file_id, binding.local)
        if target is not None and target[0] != file_id:
            found.setdefault((target[0], target[1].node), (target[1], order, False, frozenset({binding.local})))
    calls = symbols.calls_of(file_id)
    if calls is not None:
        for target_file, target_node in {(int(r[2]), int(r[3])) for r in calls}:
            if target_file == file_id:
                continue
            definition = _definition_at(symbols, target_file, target_node)
            if definition is None:
                continue
            previous = found.get((target_file, target_node))
            order = previous[1] if previous else len(syntax.imports) + target_node
            found[(target_file, target_node)] = (definition, order, True, previous[3] if previous else frozenset())
    words = set(tokenize(query, bm25))
    sites = []
    for (target_file, node), (definition, order, called, aliases) in found.items():
        target_syntax = symbols.syntax(target_file)
        record = symbols.record(target_file)
        if target_syntax is None or record is None:
            continue
        start, end = int(target_syntax.start_line[node]), int(target_syntax.end_line[node])
        fragment = symbols.window_holding(target_file, start)
        if fragment is None:
            continue
        parts = set(tokenize(" ".join({definition.name, *aliases}), bm25))
        overlap = len(parts & words) / max(len(parts), 1)
        score = overlap + (0.5 if called else 0.0) - order * 1e-6
        sites.append(DefinitionSite(target_file, record.path, definition.name, definition.kind, start, end,
                                    fragment, score))
    sites.sort(key=lambda s: -s.score)
    return sites[:limit]
