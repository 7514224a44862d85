"""Call edges of a repository: one resolver per language that has call resolution (docs/design.md
section 2), behind one interface the index updates incrementally."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from repomem.config import GraphConfig
from repomem.languages.language import CallResolver
from repomem.languages.parsed import CallEdge, Definition, FileSyntax, ImportBinding
from repomem.languages.registry import language_named


def resolves_calls(syntax: FileSyntax | None) -> bool:
    """Whether a file's language gives it call edges (its symbols are kept and resolved)."""
    return syntax is not None and language_named(syntax.language).resolves_calls


ResolverFactory = Callable[[dict[int, FileSyntax], int, int], CallResolver]


def _factory(language: str) -> ResolverFactory:
    factory = language_named(language).call_resolver
    assert factory is not None
    return factory


class CallResolution:
    """Routes each file to its language's resolver; files of other languages have no calls."""

    def __init__(self, files: Sequence[FileSyntax | None], graph: GraphConfig):
        self._graph = graph
        # Keyed by the languages' resolver factory: grammars that share one (TypeScript, TSX and
        # JavaScript files import each other) share one resolver.
        self._resolvers: dict[ResolverFactory, CallResolver] = {}
        self._language_of: dict[int, ResolverFactory] = {}
        by_factory: dict[ResolverFactory, dict[int, FileSyntax]] = {}
        for file_id, syntax in enumerate(files):
            if resolves_calls(syntax):
                factory = _factory(syntax.language)
                by_factory.setdefault(factory, {})[file_id] = syntax
                self._language_of[file_id] = factory
        for factory, group in by_factory.items():
            self._resolvers[factory] = self._new_resolver(factory, group)

    def _new_resolver(self, factory: ResolverFactory, files: dict[int, FileSyntax]) -> CallResolver:
        return factory(files, self._graph.max_reexport_hops, self._graph.max_base_class_depth)

    def covers(self, file_id: int) -> bool:
        return file_id in self._language_of

    def learn(self, file_id: int, syntax: FileSyntax) -> None:
        """Add or replace one file (a file whose language has no resolver is forgotten)."""
        factory = _factory(syntax.language) if resolves_calls(syntax) else None
        if factory is not None and self._language_of.get(file_id) == factory:
            self._resolvers[factory].learn(file_id, syntax)  # its resolver replaces the old version itself
            return
        self.forget(file_id)
        if factory is None:
            return
        resolver = self._resolvers.get(factory)
        if resolver is None:
            self._resolvers[factory] = self._new_resolver(factory, {file_id: syntax})
        else:
            resolver.learn(file_id, syntax)
        self._language_of[file_id] = factory

    def forget(self, file_id: int) -> None:
        factory = self._language_of.pop(file_id, None)
        if factory is not None:
            self._resolvers[factory].forget(file_id)

    def module_of(self, file_id: int) -> str | None:
        factory = self._language_of.get(file_id)
        return None if factory is None else self._resolvers[factory].module_of(file_id)

    def dependents(self, file_ids: set[int], modules: set[str] = frozenset()) -> set[int]:
        """Files whose calls may resolve differently once `file_ids` changed (or `modules` went)."""
        found: set[int] = set()
        for resolver in self._resolvers.values():
            found |= resolver.dependents(file_ids, modules)
        return found

    def changed_names(self, old: FileSyntax | None, new: FileSyntax | None) -> frozenset[str] | None:
        """The names whose lookup in a file may answer differently once `old` became `new` (old
        None: the file is new; new None: it went). None: any may, or its language does not say
        (see PythonCallResolver.changed_names); empty for a language without calls."""
        present = new if new is not None else old
        if present is None or not resolves_calls(present):
            return frozenset()  # no call resolves into or out of it, before or after
        if old is not None and new is not None and (
                not resolves_calls(old) or _factory(old.language) != _factory(new.language)):
            return None
        hook = getattr(self._resolvers.get(_factory(present.language)), "changed_names", None)
        return None if hook is None else hook(old, new)

    def affected_by(self, file_ids: set[int], names: frozenset[str] | None,
                    modules: set[str] = frozenset()) -> set[int]:
        """Files whose calls may resolve differently once `file_ids` changed the definitions
        named `names` (None: any) or `modules` went: a language that can say (Python: every file
        that may ask for one of the names, through re-exports and class bases) says; for the
        others, the files importing them."""
        found: set[int] = set()
        for resolver in self._resolvers.values():
            hook = getattr(resolver, "affected_by", None)
            found |= resolver.dependents(file_ids, modules) if hook is None else hook(file_ids, names, modules)
        return found

    def resolve_file(self, file_id: int) -> list[CallEdge]:
        factory = self._language_of.get(file_id)
        return [] if factory is None else self._resolvers[factory].resolve_file(file_id)

    def binds_repository(self, file_id: int, binding: ImportBinding) -> bool:
        """Whether one of `file_id`'s imports binds repository code (its language's rules)."""
        factory = self._language_of.get(file_id)
        return factory is not None and self._resolvers[factory].binds_repository(file_id, binding)

    def resolve_name(self, file_id: int, dotted: str) -> tuple[int, Definition] | None:
        """The definition a dotted name of `file_id` names at module level (file id, definition)."""
        factory = self._language_of.get(file_id)
        return None if factory is None else self._resolvers[factory].resolve_callee(file_id, dotted, "")
