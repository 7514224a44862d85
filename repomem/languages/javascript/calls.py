"""JavaScript / TypeScript call resolution across a repository (docs/design.md section 2); one
resolver holds the files of the three grammars, which import each other.

Resolved: `f()` to a module-level function or class of the file; imported names (`import {f}`,
default imports, `import * as ns` / `require` namespaces: `ns.f()`) in files that relative
specifiers name (modules.py), following re-exports (`export {a as b} from`, `export * from`,
`export {a}` of an imported name, `module.exports = {a}`) `max_reexport_hops` files deep;
`this.m()` / `super.m()` to methods of the enclosing class and its in-repo `extends` chain;
`C.m()` to a static method; `new C()` and `<C />` to the class or component.
Left unresolved: packages (bare specifiers), globals, calls of local values (the collector drops
them), methods of objects whose class the code does not name (no type inference).
Every module-level definition counts as exported, as CommonJS files export by assignment.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from repomem.languages.javascript.imports import ALL_NAMES, DEFAULT, EXPORT_MARK, is_export
from repomem.languages.javascript.modules import ModuleFiles, module_keys, stem_of, target_key
from repomem.languages.parsed import Definition, FileSyntax, ImportBinding
from repomem.languages.resolver_scaffold import TableResolver, drop_holder, member_through_bases, remembered


class _Module(NamedTuple):
    file: int


class _Found(NamedTuple):
    file: int
    definition: Definition


_Target = _Module | _Found | None


class _FileTables(NamedTuple):
    top: dict[str, Definition]  # module-level definitions by name (the first one wins)
    members: dict[str, dict[str, Definition]]  # qualified class -> its methods and nested classes
    imports: dict[str, tuple[str, str]]  # local name -> (specifier, imported name or "" / DEFAULT)
    exports: dict[str, tuple[str, str]]  # exported name -> (specifier or "" for the file, name)
    star_sources: tuple[str, ...]  # specifiers of `export * from`
    import_keys: frozenset[str]  # module keys the file's specifiers look for


def _tables(path: str, syntax: FileSyntax) -> _FileTables:
    top: dict[str, Definition] = {}
    members: dict[str, dict[str, Definition]] = defaultdict(dict)
    for definition in syntax.definitions:
        if definition.in_function:
            continue
        if definition.scope:
            members[definition.scope].setdefault(definition.name, definition)
        else:
            top.setdefault(definition.name, definition)
    imports: dict[str, tuple[str, str]] = {}
    exports: dict[str, tuple[str, str]] = {}
    stars: list[str] = []
    for binding in syntax.imports:
        if not is_export(binding):
            imports[binding.local] = (binding.module, binding.name)
        elif binding.local == EXPORT_MARK + ALL_NAMES:
            stars.append(binding.module)
        else:
            exports.setdefault(binding.local[len(EXPORT_MARK):], (binding.module, binding.name))
    keys = {target_key(path, binding.module) for binding in syntax.imports if binding.module}
    return _FileTables(top, dict(members), imports, exports, tuple(stars), frozenset(k for k in keys if k is not None))


class JavaScriptCallResolver(TableResolver):
    """Resolves the calls of JavaScript, TypeScript and TSX files against each other."""

    def __init__(self, files: dict[int, FileSyntax], max_reexport_hops: int, max_base_depth: int):
        self._files: dict[int, FileSyntax] = {}
        self._tables: dict[int, _FileTables] = {}
        self._hops = max_reexport_hops
        self._base_depth = max_base_depth
        self._modules = ModuleFiles()
        # module key -> files whose specifiers look for it (dependents())
        self._importers: dict[str, set[int]] = defaultdict(set)
        # Answers that depend only on the tables, dropped on any change: the same imported names
        # and classes are looked up from many call sites.
        self._locals_memo: dict[tuple[int, str, int], _Target] = {}
        self._exports_memo: dict[tuple[int, str, int], _Target] = {}
        # (file, class node, class name, member): one declaration may hold two class expressions
        self._members_memo: dict[tuple[int, int, str, str], _Found | None] = {}
        self._specifiers_memo: dict[tuple[int, str], int | None] = {}
        for file_id in sorted(files):
            self._register(file_id, files[file_id])

    # -- tables --------------------------------------------------------------------------------

    def _register(self, file_id: int, syntax: FileSyntax) -> None:
        tables = _tables(syntax.path, syntax)
        self._files[file_id] = syntax
        self._tables[file_id] = tables
        self._modules.add(syntax.path, file_id)
        for key in tables.import_keys:
            self._importers[key].add(file_id)

    def _answers(self) -> tuple[dict, ...]:
        return self._locals_memo, self._exports_memo, self._members_memo, self._specifiers_memo

    def forget(self, file_id: int) -> None:
        """Drop a file's tables (before re-registering its new version or after its removal)."""
        syntax = self._files.pop(file_id, None)
        if syntax is None:
            return
        self._forget_answers()
        self._modules.remove(syntax.path, file_id)
        for key in self._tables.pop(file_id).import_keys:
            drop_holder(self._importers, key, file_id)

    def module_of(self, file_id: int) -> str | None:
        """The file's path without its extension (`src/a`, `src/lib/index`)."""
        syntax = self._files.get(file_id)
        return None if syntax is None else stem_of(syntax.path)

    def dependents(self, file_ids: set[int], modules: set[str] = frozenset()) -> set[int]:
        """Files importing one of `file_ids` (or the modules `modules`, of files since removed), and
        the importers of files that re-export them, `max_reexport_hops` deep."""
        stems = {*modules, *(stem for stem in map(self.module_of, file_ids) if stem is not None)}
        keys = {key for stem in stems for key in module_keys(stem)}
        found: set[int] = set()
        for _ in range(self._hops + 1):
            reached = {f for key in keys for f in self._importers.get(key, ())} - found
            found |= reached
            keys = {key for f in reached if self._tables[f].exports or self._tables[f].star_sources
                    for key in module_keys(stem_of(self._files[f].path))}
            if not keys:
                break
        return found

    def _find_module(self, file_id: int, specifier: str) -> int | None:
        key = (file_id, specifier)
        if key not in self._specifiers_memo:
            self._specifiers_memo[key] = self._modules.find(self._files[file_id].path, specifier)
        return self._specifiers_memo[key]

    # -- names ---------------------------------------------------------------------------------

    def _local(self, file_id: int, name: str, hops: int) -> _Target:
        """What a name means at the top of a file: its own definition or what it imports."""
        key = (file_id, name, hops)
        if key not in self._locals_memo:
            self._locals_memo[key] = self._local_now(file_id, name, hops)
        return self._locals_memo[key]

    def _local_now(self, file_id: int, name: str, hops: int) -> _Target:
        tables = self._tables[file_id]
        own = tables.top.get(name)
        if own is not None:
            return _Found(file_id, own)
        imported = tables.imports.get(name)
        if imported is None:
            return None
        return self._from_module(file_id, *imported, hops)

    def _from_module(self, file_id: int, specifier: str, name: str, hops: int) -> _Target:
        """`name` of the module `specifier` names ("": the module itself), one file hop away."""
        target = self._find_module(file_id, specifier)
        if target is None or hops < 0:
            return None
        return _Module(target) if name == "" else self._exported(target, name, hops - 1)

    def _exported(self, file_id: int, name: str, hops: int) -> _Target:
        """What a module exports under `name`, as its importers see it."""
        key = (file_id, name, hops)
        if key not in self._exports_memo:
            self._exports_memo[key] = self._exported_now(file_id, name, hops)
        return self._exports_memo[key]

    def _exported_now(self, file_id: int, name: str, hops: int) -> _Target:
        if hops < 0:
            return None
        tables = self._tables[file_id]
        listed = tables.exports.get(name)
        if listed is not None:
            specifier, inner = listed
            # A re-export of one of the file's own names costs a hop as well: `import {a}` plus
            # `export {a}` in two files naming each other would otherwise never end.
            found = self._local(file_id, inner, hops - 1) if specifier == "" else self._from_module(
                file_id, specifier, inner, hops)
            if found is not None:
                return found
        own = tables.top.get(name)
        if own is not None:
            return _Found(file_id, own)
        if name == DEFAULT:
            return None  # `export *` does not pass a default export on
        for specifier in tables.star_sources:
            found = self._from_module(file_id, specifier, name, hops)
            if found is not None:
                return found
        return None

    def _member(self, owner: _Found, name: str) -> _Found | None:
        return remembered(self._members_memo, (owner.file, owner.definition.node, owner.definition.name, name),
                          lambda: self._member_now(owner, name))

    def _member_now(self, owner: _Found, name: str) -> _Found | None:
        """A method (or nested class) of a class or of the classes it extends, breadth first."""

        def own_member(current: _Found) -> _Found | None:
            found = self._tables[current.file].members.get(_qualified(current.definition), {}).get(name)
            return None if found is None else _Found(current.file, found)

        return member_through_bases(owner, own_member, self._bases, _identity, self._base_depth)

    def _bases(self, owner: _Found) -> list[_Found]:
        bases = []
        for base in owner.definition.bases:
            resolved = self._dotted(owner.file, base.split("."))
            if isinstance(resolved, _Found) and resolved.definition.kind == "class":
                bases.append(resolved)
        return bases

    def _dotted(self, file_id: int, parts: list[str], start: _Target = None) -> _Target:
        """What `a.b.c` names in a file, or `b.c` read from `start` when given."""
        current = self._local(file_id, parts[0], self._hops) if start is None else start
        for part in parts[1:] if start is None else parts:
            if isinstance(current, _Module):
                current = self._exported(current.file, part, self._hops)
            elif isinstance(current, _Found) and current.definition.kind == "class":
                current = self._member(current, part)
            else:
                return None
        return current

    def _enclosing(self, file_id: int, qualified: str) -> _Found | None:
        scope, _, name = qualified.rpartition(".")
        tables = self._tables[file_id]
        found = tables.members.get(scope, {}).get(name) if scope else tables.top.get(name)
        return _Found(file_id, found) if found is not None and found.kind == "class" else None

    # -- the resolver's interface --------------------------------------------------------------

    def resolve_callee(self, file_id: int, callee: str, enclosing_class: str) -> tuple[int, Definition] | None:
        """The function, method or class a dotted callee of `file_id` names, as (file id, its
        definition); None outside the repository. `enclosing_class`: for `this.` / `super.`."""
        if file_id not in self._files or not callee:
            return None
        parts = callee.split(".")
        if parts[0] in ("this", "super"):
            owner = self._enclosing(file_id, enclosing_class) if enclosing_class and len(parts) > 1 else None
            if owner is None:
                return None
            holders = [owner] if parts[0] == "this" else self._bases(owner)
            member = next((found for holder in holders if (found := self._member(holder, parts[1])) is not None), None)
            target = None if member is None else self._dotted(file_id, parts[2:], member)
        else:
            target = self._dotted(file_id, parts)
        if isinstance(target, _Module):  # calling a module: its default export (CommonJS)
            target = self._exported(target.file, DEFAULT, self._hops)
        return (target.file, target.definition) if isinstance(target, _Found) else None

    def binds_repository(self, file_id: int, binding: ImportBinding) -> bool:
        """Whether an import names a module of the repository (a relative specifier that finds one)."""
        return (file_id in self._files and not is_export(binding) and bool(binding.module)
                and self._find_module(file_id, binding.module) is not None)



def _identity(found: _Found) -> tuple[int, int, str]:
    return found.file, found.definition.node, found.definition.name


def _qualified(definition: Definition) -> str:
    return f"{definition.scope}.{definition.name}" if definition.scope else definition.name
