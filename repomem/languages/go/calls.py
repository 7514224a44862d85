"""Go call resolution across a repository (docs/design.md section 2).

Resolved: `F()` to a function or type of the caller's package (every file of its directory);
`pkg.F()` through an import of a repository package (exported names only), aliased and dot
imports included; `recv.M()` in a method (the collector writes it `Type.M`) and method expressions
`T.M` to the methods of the type, of the types it embeds (a few levels) and through type aliases
(`type A = other.B`, followed like re-exports). Left unresolved: the standard library and other
modules, calls of local values (parameters, variables: no type inference), methods of a variable
whose type the code does not name.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

from repomem.languages.go.packages import PackageDirectories, directory_of, directory_tails, path_suffixes
from repomem.languages.go.syntax import ALIAS_MARK, DOT_IMPORT
from repomem.languages.parsed import CallEdge, Definition, FileSyntax, ImportBinding, resolved_calls
from repomem.languages.resolver_scaffold import TableResolver, drop_holder, member_through_bases, remembered


@dataclass(frozen=True)
class _Package:
    directory: str


@dataclass(frozen=True)
class _Found:
    file: int
    definition: Definition


@dataclass
class _PackageNames:
    """A package's top-level names and its types' methods, over all of its files."""

    top: dict[str, _Found] = field(default_factory=dict)
    methods: dict[str, dict[str, _Found]] = field(default_factory=lambda: defaultdict(dict))


def _exported(name: str) -> bool:
    return name[:1].isupper()


class GoCallResolver(TableResolver):
    """Resolves the calls of Go files against each other's definitions and imports."""

    def __init__(self, files: dict[int, FileSyntax], max_reexport_hops: int, max_base_depth: int):
        self._files: dict[int, FileSyntax] = {}
        self._hops = max_reexport_hops
        self._base_depth = max_base_depth
        self._directories = PackageDirectories()
        self._directory_of: dict[int, str] = {}
        self._imports: dict[int, dict[str, str]] = {}  # local name -> import path
        self._dot_imports: dict[int, tuple[str, ...]] = {}
        # import path suffix -> importing files (dependents() finds a package's importers by it)
        self._importers: dict[str, set[int]] = defaultdict(set)
        # Answers that depend only on the tables: the same few names and packages are looked up
        # from every call site. Package tables are dropped per directory, the rest on any change.
        self._packages: dict[str, _PackageNames] = {}
        self._names_memo: dict[tuple[int, str, int], _Package | _Found | None] = {}
        self._members_memo: dict[tuple[int, int, str], _Found | None] = {}
        self._paths_memo: dict[tuple[str, str], str | None] = {}
        for file_id in sorted(files):
            self._register(file_id, files[file_id])

    # -- tables --------------------------------------------------------------------------------

    def _register(self, file_id: int, syntax: FileSyntax) -> None:
        directory = directory_of(syntax.path)
        self._files[file_id] = syntax
        self._directory_of[file_id] = directory
        self._directories.add(directory, file_id)
        self._packages.pop(directory, None)
        named: dict[str, str] = {}
        dotted: list[str] = []
        for binding in syntax.imports:
            if binding.local == DOT_IMPORT:
                dotted.append(binding.module)
            else:
                named[binding.local] = binding.module
            for suffix in path_suffixes(binding.module):
                self._importers[suffix].add(file_id)
        self._imports[file_id] = named
        self._dot_imports[file_id] = tuple(dotted)

    def _answers(self) -> tuple[dict, ...]:
        return self._names_memo, self._members_memo, self._paths_memo

    def forget(self, file_id: int) -> None:
        """Drop a file's tables (before re-registering its new version or after its removal)."""
        syntax = self._files.pop(file_id, None)
        if syntax is None:
            return
        self._forget_answers()
        directory = self._directory_of.pop(file_id)
        self._directories.remove(directory, file_id)
        self._packages.pop(directory, None)
        for binding in syntax.imports:
            for suffix in path_suffixes(binding.module):
                drop_holder(self._importers, suffix, file_id)
        del self._imports[file_id], self._dot_imports[file_id]

    def module_of(self, file_id: int) -> str | None:
        """The package directory of a file ("" at the repository root)."""
        return self._directory_of.get(file_id)

    def dependents(self, file_ids: set[int], modules: set[str] = frozenset()) -> set[int]:
        """Files of the same packages as `file_ids` (they share top-level names) and files importing
        those packages (or the package directories `modules`, of files since removed)."""
        directories = {*modules, *(self._directory_of[f] for f in file_ids if f in self._directory_of)}
        found: set[int] = set()
        for directory in directories:
            found.update(self._directories.files(directory))
            for tail in directory_tails(directory):
                found |= self._importers.get(tail, set())
        return found

    def _package_names(self, directory: str) -> _PackageNames:
        names = self._packages.get(directory)
        if names is None:
            names = _PackageNames()
            # In path order, as a whole build numbers the files: a name defined twice (which does not
            # compile, but happens mid-edit) goes to the same file after edits as after a build.
            for file_id in sorted(self._directories.files(directory), key=lambda f: self._files[f].path):
                for definition in self._files[file_id].definitions:
                    if definition.in_function:
                        continue
                    found = _Found(file_id, definition)
                    if definition.scope:
                        names.methods[definition.scope].setdefault(definition.name, found)
                    else:
                        names.top.setdefault(definition.name, found)
            self._packages[directory] = names
        return names

    def _find_directory(self, file_id: int, import_path: str) -> str | None:
        importer = self._directory_of[file_id]
        key = (importer, import_path)
        if key not in self._paths_memo:
            self._paths_memo[key] = self._directories.find(import_path, importer)
        return self._paths_memo[key]

    # -- names ---------------------------------------------------------------------------------

    def _resolve_name(self, file_id: int, name: str, hops: int) -> _Package | _Found | None:
        """What a name means at the top of a file: its package's name, an import, or a name of a
        dot-imported package."""
        key = (file_id, name, hops)
        if key not in self._names_memo:
            self._names_memo[key] = self._resolve_name_now(file_id, name, hops)
        return self._names_memo[key]

    def _resolve_name_now(self, file_id: int, name: str, hops: int) -> _Package | _Found | None:
        own = self._package_names(self._directory_of[file_id]).top.get(name)
        if own is not None:
            return self._through_alias(own, hops)
        import_path = self._imports[file_id].get(name)
        if import_path is not None:
            directory = self._find_directory(file_id, import_path)
            return None if directory is None else _Package(directory)
        if _exported(name):
            for import_path in self._dot_imports[file_id]:
                directory = self._find_directory(file_id, import_path)
                found = None if directory is None else self._in_package(directory, name, hops)
                if found is not None:
                    return found
        return None

    def _in_package(self, directory: str, name: str, hops: int) -> _Found | None:
        found = self._package_names(directory).top.get(name) if _exported(name) else None
        return None if found is None else self._through_alias(found, hops)

    def _through_alias(self, found: _Found, hops: int) -> _Found | None:
        """A type alias stands for its target when the target is repository code (`hops` more
        aliases at most); otherwise for itself."""
        target = _alias_target(found.definition)
        if target is None or hops <= 0:
            return found
        resolved = self._resolve_dotted(found.file, target, hops - 1)
        return resolved if isinstance(resolved, _Found) else found

    def _member(self, owner: _Found, name: str) -> _Found | None:
        return remembered(self._members_memo, (owner.file, owner.definition.node, name),
                          lambda: self._member_now(owner, name))

    def _member_now(self, owner: _Found, name: str) -> _Found | None:
        """A method of a type or of the types it embeds (breadth first, `max_base_depth` levels)."""

        def own_method(current: _Found) -> _Found | None:
            methods = self._package_names(self._directory_of[current.file]).methods.get(current.definition.name)
            return methods.get(name) if methods else None

        def embedded(current: _Found) -> Iterator[_Found]:
            for base in current.definition.bases:
                resolved = self._resolve_dotted(current.file, base.removeprefix(ALIAS_MARK), self._hops)
                if isinstance(resolved, _Found) and resolved.definition.kind == "class":
                    yield resolved

        return member_through_bases(owner, own_method, embedded, _identity, self._base_depth)

    def _resolve_dotted(self, file_id: int, dotted: str, hops: int) -> _Package | _Found | None:
        parts = dotted.split(".")
        current = self._resolve_name(file_id, parts[0], hops)
        for part in parts[1:]:
            if isinstance(current, _Package):
                current = self._in_package(current.directory, part, hops)
            elif isinstance(current, _Found) and current.definition.kind == "class":
                current = self._member(current, part)
            else:
                return None
        return current

    # -- the resolver's interface --------------------------------------------------------------

    def resolve_callee(self, file_id: int, callee: str, enclosing_class: str) -> tuple[int, Definition] | None:
        """The function, method or type a dotted callee of `file_id` names, as (file id, its
        definition); None outside the repository. Receiver calls arrive written with the receiver's
        type (GoSymbols), so `enclosing_class` is not needed."""
        if file_id not in self._files or not callee:
            return None
        target = self._resolve_dotted(file_id, callee, self._hops)
        return (target.file, target.definition) if isinstance(target, _Found) else None

    def binds_repository(self, file_id: int, binding: ImportBinding) -> bool:
        """Whether an import names a package of the repository."""
        return file_id in self._files and self._find_directory(file_id, binding.module) is not None

    def resolve_file(self, file_id: int) -> list[CallEdge]:
        """Call edges whose call site lies in `file_id`."""
        # Go's calls do not depend on the enclosing type: resolved with none.
        return resolved_calls(file_id, self._files[file_id],
                              lambda file, callee, _: self.resolve_callee(file, callee, ""))


def _identity(found: _Found) -> tuple[int, int, str]:
    return found.file, found.definition.node, found.definition.name


def _alias_target(definition: Definition) -> str | None:
    if definition.kind == "class" and len(definition.bases) == 1 and definition.bases[0].startswith(ALIAS_MARK):
        return definition.bases[0][len(ALIAS_MARK):]
    return None
