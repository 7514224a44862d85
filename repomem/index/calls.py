"""Call edges of a repository: one resolver per language that has call resolution (docs/design.md
section 2), behind one interface the index updates incrementally."""

from __future__ import annotations

from collections.abc import Sequence

from repomem.config import GraphConfig
from repomem.languages.language import CallResolver
from repomem.languages.parsed import CallEdge, Definition, FileSyntax, ImportBinding
from repomem.languages.registry import language_named


def resolves_calls(syntax: FileSyntax | None) -> bool:
    """Whether a file's language gives it call edges (its symbols are kept and resolved)."""
    return syntax is not None and language_named(syntax.language).resolves_calls


class CallResolution:
    """Routes each file to its language's resolver; files of other languages have no calls."""

    def __init__(self, files: Sequence[FileSyntax | None], graph: GraphConfig):
        self._graph = graph
        self._resolvers: dict[str, CallResolver] = {}
        self._language_of: dict[int, str] = {}
        by_language: dict[str, dict[int, FileSyntax]] = {}
        for file_id, syntax in enumerate(files):
            if resolves_calls(syntax):
                by_language.setdefault(syntax.language, {})[file_id] = syntax
                self._language_of[file_id] = syntax.language
        for name, group in by_language.items():
            self._resolvers[name] = self._new_resolver(name, group)

    def _new_resolver(self, name: str, files: dict[int, FileSyntax]) -> CallResolver:
        factory = language_named(name).call_resolver
        assert factory is not None
        return factory(files, self._graph.max_reexport_hops, self._graph.max_base_class_depth)

    def covers(self, file_id: int) -> bool:
        return file_id in self._language_of

    def learn(self, file_id: int, syntax: FileSyntax) -> None:
        """Add or replace one file (a file whose language has no resolver is forgotten)."""
        self.forget(file_id)
        if not resolves_calls(syntax):
            return
        resolver = self._resolvers.get(syntax.language)
        if resolver is None:
            self._resolvers[syntax.language] = self._new_resolver(syntax.language, {file_id: syntax})
        else:
            resolver.learn(file_id, syntax)
        self._language_of[file_id] = syntax.language

    def forget(self, file_id: int) -> None:
        name = self._language_of.pop(file_id, None)
        if name is not None:
            self._resolvers[name].forget(file_id)

    def module_of(self, file_id: int) -> str | None:
        name = self._language_of.get(file_id)
        return None if name is None else self._resolvers[name].module_of(file_id)

    def dependents(self, file_ids: set[int], modules: set[str] = frozenset()) -> set[int]:
        """Files whose calls may resolve differently once `file_ids` changed (or `modules` went)."""
        found: set[int] = set()
        for resolver in self._resolvers.values():
            found |= resolver.dependents(file_ids, modules)
        return found

    def resolve_file(self, file_id: int) -> list[CallEdge]:
        name = self._language_of.get(file_id)
        return [] if name is None else self._resolvers[name].resolve_file(file_id)

    def binds_repository(self, file_id: int, binding: ImportBinding) -> bool:
        """Whether one of `file_id`'s imports binds repository code (its language's rules)."""
        name = self._language_of.get(file_id)
        return name is not None and self._resolvers[name].binds_repository(file_id, binding)

    def resolve_name(self, file_id: int, dotted: str) -> tuple[int, Definition] | None:
        """The definition a dotted name of `file_id` names at module level (file id, definition)."""
        name = self._language_of.get(file_id)
        return None if name is None else self._resolvers[name].resolve_callee(file_id, dotted, "")
