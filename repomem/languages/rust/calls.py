"""Rust call resolution across a repository (docs/design.md section 2).

Resolved: `f()` to an item of the caller's module, of a `use` binding (re-exports by `pub use`
followed up to `max_reexport_hops`) or of a glob import (`use super::*;`); paths `a::f()`,
`crate::a::f()`, `self::`, `super::` through the module tree of the caller's crate (layout.py),
inline `mod m { ... }` blocks included; paths into another crate of the workspace by its name;
`Type::new()` / `Trait::m()` to the functions of the type's `impl` blocks (trait impls too) or the
trait's own, supertraits a few levels up; `self.m()` and `Self::m()` inside an impl or trait to
its type's; type aliases stand for their target. A tuple struct's constructor call `S(..)`
resolves to the struct.

A test, example or binary crate may name its package's library by any name (a crate at the
repository root shows none) when the rest of the path is found in that library.

Left unresolved: other crates (`std::`, `serde::`, any name no repository crate answers to), macros,
method calls on receivers other than `self` (no type inference), a trait's default methods called
through an implementing type, items declared inside function bodies or macro invocations, modules
placed by `#[path]`, calls of locals.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from repomem.languages.parsed import CallEdge, Definition, FileSyntax, ImportBinding, resolved_calls, symbol_shape
from repomem.languages.resolver_scaffold import (
    drop_holder,
    member_through_bases,
    node_identity,
    remembered,
    shared_prefix_length,
)
from repomem.languages.rust.layout import (
    STANDARD_CRATES,
    ModulePath,
    base_name,
    crate_name,
    is_crate_root_file,
    matches_crate,
    module_path,
    parent_directory,
    source_directory,
)
from repomem.languages.rust.modules import CrateTables, Found, binding_path, inline_modules
from repomem.languages.rust.syntax import ALIAS_MARK, SELF_TYPE, split_scope
from repomem.languages.rust.uses import PATH_SEPARATOR

_MODULE_MARK = "#"  # module_of: "<source dir>#<module path>"
_REPOSITORY_ROOTS = ("crate", "self", "super")


@dataclass(frozen=True)
class _Module:
    source_dir: str
    path: ModulePath


_Target = _Module | Found | None


class RustCallResolver:
    """Resolves the calls of Rust files against each other's definitions and `use` declarations."""

    def __init__(self, files: dict[int, FileSyntax], max_reexport_hops: int, max_base_depth: int):
        self._files: dict[int, FileSyntax] = {}
        self._hops = max_reexport_hops
        self._base_depth = max_base_depth
        self._root_dirs: dict[str, int] = defaultdict(int)  # directory -> lib.rs / main.rs files in it
        self._library_dirs: dict[str, int] = defaultdict(int)  # directory -> lib.rs files in it
        self._place: dict[int, tuple[str, ModulePath]] = {}  # file -> (source dir, module path)
        self._crate_files: dict[str, set[int]] = defaultdict(set)
        # first path segment written in a file (imports and callees) -> files: who may name a crate
        self._first_segments: dict[str, set[int]] = defaultdict(set)
        self._tables: dict[str, CrateTables] = {}  # per source dir, dropped when one of its files changes
        # Answers that depend only on the tables: the same few names are looked up from every call
        # site. Dropped on any change.
        self._names_memo: dict[tuple[str, ModulePath, str, int], _Target] = {}
        self._members_memo: dict[tuple[int, int, str], Found | None] = {}
        self._crates_memo: dict[tuple[str, str], str | None] = {}
        self._own_library_memo: dict[str, str | None] = {}
        # A lib.rs or main.rs came or went since dependents() last answered: crate boundaries moved.
        self._boundaries_moved = False
        for file_id, syntax in files.items():
            self._note_roots(syntax.path, 1)
            self._files[file_id] = syntax
        for file_id in sorted(files):
            self._place_file(file_id)

    # -- tables --------------------------------------------------------------------------------

    def _note_roots(self, path: str, step: int) -> None:
        if is_crate_root_file(path):
            directory = parent_directory(path)
            self._root_dirs[directory] += step
            if path.endswith("lib.rs"):
                self._library_dirs[directory] += step
            for counts in (self._root_dirs, self._library_dirs):
                if counts.get(directory, 1) <= 0:
                    del counts[directory]

    def _place_file(self, file_id: int) -> None:
        syntax = self._files[file_id]
        source_dir = source_directory(syntax.path, self._root_dirs)
        self._place[file_id] = (source_dir, module_path(syntax.path, source_dir))
        self._crate_files[source_dir].add(file_id)
        self._tables.pop(source_dir, None)
        self._hold_segments(file_id, syntax)

    def _unplace_file(self, file_id: int) -> None:
        source_dir, _ = self._place.pop(file_id)
        drop_holder(self._crate_files, source_dir, file_id)
        self._tables.pop(source_dir, None)
        self._release_segments(file_id, self._files[file_id])

    def _hold_segments(self, file_id: int, syntax: FileSyntax) -> None:
        """The file among the holders of its paths' first segments."""
        for segment in _first_segments(syntax):
            self._first_segments[segment].add(file_id)

    def _release_segments(self, file_id: int, syntax: FileSyntax) -> None:
        """The file out of the holders of its (old version's) paths' first segments."""
        for segment in _first_segments(syntax):
            drop_holder(self._first_segments, segment, file_id)

    def _replace(self, file_id: int, syntax: FileSyntax | None) -> None:
        """Forget a file's old version and learn `syntax` (None: it is gone). A lib.rs or main.rs
        coming or going moves crate boundaries, so then every file is placed again (an edit of one
        that stays does not)."""
        old = self._files.get(file_id)
        self._names_memo.clear()
        self._members_memo.clear()
        if old is not None and syntax is not None and old.path == syntax.path \
                and symbol_shape(old) == symbol_shape(syntax):
            # An edit inside bodies: the crate's tables keep every entry, only this file's
            # definitions moved to other nodes (rebuilding them cost 19 ms an edit in tokio).
            self._release_segments(file_id, old)
            self._files[file_id] = syntax
            self._hold_segments(file_id, syntax)
            tables = self._tables.get(self._place[file_id][0])
            if tables is not None:
                tables.move_definitions(file_id, dict(zip(map(id, old.definitions), syntax.definitions)))
            return
        self._crates_memo.clear()
        self._own_library_memo.clear()
        relayout = (old is None) != (syntax is None) and is_crate_root_file((old or syntax).path)
        self._boundaries_moved |= relayout
        for placed_id in (list(self._place) if relayout else [file_id] if old is not None else []):
            self._unplace_file(placed_id)
        if old is not None:
            self._note_roots(old.path, -1)
            del self._files[file_id]
        if syntax is not None:
            self._note_roots(syntax.path, 1)
            self._files[file_id] = syntax
        for placed_id in (sorted(self._files) if relayout else [file_id] if syntax is not None else []):
            self._place_file(placed_id)

    def forget(self, file_id: int) -> None:
        """Drop a file's tables (before re-registering its new version or after its removal)."""
        if file_id in self._files:
            self._replace(file_id, None)

    def learn(self, file_id: int, syntax: FileSyntax) -> None:
        """Add (or replace) one file's tables."""
        self._replace(file_id, syntax)

    def module_of(self, file_id: int) -> str | None:
        """The file's module as "<source dir>#<module path>" (crates/core/src#config::load)."""
        place = self._place.get(file_id)
        return None if place is None else place[0] + _MODULE_MARK + PATH_SEPARATOR.join(place[1])

    def dependents(self, file_ids: set[int], modules: set[str] = frozenset()) -> set[int]:
        """The files of the crates of `file_ids` (a crate's modules see each other's names through
        paths, globs and re-exports) and the files that may name those crates from outside (other
        crates by name, the package's tests and binaries); every file when crate boundaries moved."""
        if self._boundaries_moved:
            self._boundaries_moved = False
            return set(self._files)
        source_dirs = {self._place[f][0] for f in file_ids if f in self._place}
        source_dirs.update(module.partition(_MODULE_MARK)[0] for module in modules if _MODULE_MARK in module)
        found: set[int] = set()
        for source_dir in source_dirs:
            found |= self._crate_files.get(source_dir, set())
            for other_dir, files in self._crate_files.items():
                if self._own_library(other_dir) == source_dir:
                    found |= files
            name = crate_name(source_dir)
            for segment, holders in self._first_segments.items():
                if matches_crate(segment, name):
                    found |= holders
        return found

    def _crate(self, source_dir: str) -> CrateTables:
        tables = self._tables.get(source_dir)
        if tables is None:
            tables = CrateTables()
            for file_id in sorted(self._crate_files.get(source_dir, ())):
                tables.add_file(file_id, self._files[file_id], source_dir, self._place[file_id][1])
            self._tables[source_dir] = tables
        return tables

    def _find_crate(self, name: str, importer_dir: str) -> str | None:
        """The source directory of the workspace library named `name`, None for other crates."""
        key = (name, importer_dir)
        if key not in self._crates_memo:
            found = None
            if name and name not in STANDARD_CRATES:
                candidates = [d for d in self._library_dirs if matches_crate(name, crate_name(d))]
                exact = [d for d in candidates if crate_name(d) == name]
                here = importer_dir.split("/")
                found = min(exact or candidates, key=lambda d: (-shared_prefix_length(here, d.split("/")), d),
                            default=None)
            self._crates_memo[key] = found
        return self._crates_memo[key]

    def _own_library(self, source_dir: str) -> str | None:
        """The library of the package a binary, test, example or bench crate belongs to (its
        `src` or the package directory holding lib.rs; the main.rs beside a lib.rs has that very
        directory); None for a library itself."""
        if source_dir not in self._own_library_memo:
            found = None
            if source_dir in self._library_dirs:
                found = source_dir if self._root_dirs[source_dir] > self._library_dirs[source_dir] else None
            elif source_dir:
                package = parent_directory(source_dir)
                if base_name(source_dir) == "bin" and base_name(package) == "src":
                    package = parent_directory(package)
                found = next((candidate for candidate in (f"{package}/src" if package else "src", package)
                              if candidate in self._library_dirs), None)
            self._own_library_memo[source_dir] = found
        return self._own_library_memo[source_dir]

    # -- names ---------------------------------------------------------------------------------

    def _lookup(self, module: _Module, name: str, hops: int) -> _Target:
        """What `name` means in a module: its item, its submodule, a `use` binding, a glob's name."""
        key = (module.source_dir, module.path, name, hops)
        if key not in self._names_memo:
            self._names_memo[key] = None  # a glob cycle meets this and stops
            self._names_memo[key] = self._lookup_now(module, name, hops)
        return self._names_memo[key]

    def _lookup_now(self, module: _Module, name: str, hops: int) -> _Target:
        tables = self._crate(module.source_dir)
        item = tables.items.get(module.path, {}).get(name)
        if item is not None:
            return self._through_alias(item, hops)
        if module.path + (name,) in tables.modules:
            return _Module(module.source_dir, module.path + (name,))
        if hops <= 0:
            return None
        path = tables.uses.get(module.path, {}).get(name)
        if path is not None:
            return self._resolve_path(module, path, hops - 1)
        for glob in tables.globs.get(module.path, ()):
            source = self._resolve_path(module, glob, hops - 1)
            found = self._lookup(source, name, hops - 1) if isinstance(source, _Module) else None
            if found is not None:
                return found
        return None

    def _through_alias(self, found: Found, hops: int) -> Found:
        """A type alias stands for its target when that is repository code; else for itself."""
        bases = found.definition.bases
        if found.definition.kind != "class" or len(bases) != 1 or not bases[0].startswith(ALIAS_MARK) or hops <= 0:
            return found
        target = self._resolve_path(_Module(found.source_dir, found.module),
                                    bases[0][len(ALIAS_MARK):].split(PATH_SEPARATOR), hops - 1)
        return target if isinstance(target, Found) else found

    def _resolve_path(self, module: _Module, segments: list[str], hops: int, self_type: str = "") -> _Target:
        """What a path means in `module` (`self_type`: what `Self` names there)."""
        first, rest = segments[0], segments[1:]
        current: _Target
        if first == "":  # `::name`: another crate
            if not rest:
                return None
            crate = self._find_crate(rest[0], module.source_dir)
            current, rest = (None if crate is None else _Module(crate, ())), rest[1:]
        elif first == "crate":
            current = _Module(module.source_dir, ())
        elif first == "self":
            current = module
        elif first == "super":
            current = _Module(module.source_dir, module.path[:-1]) if module.path else None
        elif first == SELF_TYPE:
            current = self._lookup(module, self_type, hops) if self_type else None
            if not isinstance(current, Found) and self_type and len(rest) == 1:
                return self._crate(module.source_dir).methods.get(self_type, {}).get(module.path, {}).get(rest[0])
        else:
            current = self._lookup(module, first, hops)
            if current is None:
                crate = self._find_crate(first, module.source_dir)
                if crate is None and rest and first not in STANDARD_CRATES:
                    # Tests, examples and binaries name their package's library by the package's
                    # name, which a crate at the repository root does not show: an unknown name
                    # stands for it when the rest of the path is found there.
                    crate = self._own_library(module.source_dir)
                current = None if crate is None else _Module(crate, ())
        for part in rest:
            if isinstance(current, _Module):
                current = (_Module(current.source_dir, current.path[:-1]) if part == "super" and current.path
                           else self._lookup(current, part, hops))
            elif isinstance(current, Found) and current.definition.kind == "class":
                current = self._member(current, part)
            else:
                return None
        return current

    def _member(self, owner: Found, name: str) -> Found | None:
        return remembered(self._members_memo, (owner.file, owner.definition.node, name),
                          lambda: self._member_now(owner, name))

    def _member_now(self, owner: Found, name: str) -> Found | None:
        """A function of the type's impl blocks (or the trait's own), else of its supertraits
        (breadth first, `max_base_depth` levels). An impl counts for the type when its type name
        means that type in the impl's module, or means nothing there (`impl super::S`)."""

        def own_function(current: Found) -> Found | None:
            type_name = current.definition.name
            by_module = self._crate(current.source_dir).methods.get(type_name, {})
            fallback = None
            for module, methods in by_module.items():
                method = methods.get(name)
                if method is None:
                    continue
                means = self._lookup(_Module(current.source_dir, module), type_name, self._hops)
                if isinstance(means, Found) and node_identity(means) == node_identity(current):
                    return method
                if means is None and fallback is None:
                    fallback = method
            return fallback

        def supertraits(current: Found) -> Iterator[Found]:
            for base in current.definition.bases:
                resolved = self._resolve_path(_Module(current.source_dir, current.module),
                                              base.removeprefix(ALIAS_MARK).split(PATH_SEPARATOR), self._hops)
                if isinstance(resolved, Found) and resolved.definition.kind == "class":
                    yield resolved

        return member_through_bases(owner, own_function, supertraits, node_identity, self._base_depth)

    def _context(self, file_id: int, scope: str) -> tuple[_Module, str]:
        """The module a scope string of `file_id` lies in, and its `Self` type name."""
        prefix, self_type = split_scope(scope)
        source_dir, file_module = self._place[file_id]
        return _Module(source_dir, file_module + inline_modules(prefix)), self_type

    # -- the resolver's interface --------------------------------------------------------------

    def resolve_callee(self, file_id: int, callee: str, enclosing_class: str) -> tuple[int, Definition] | None:
        """The function or type a callee path of `file_id` names (`enclosing_class`: the call's
        module prefix and impl type, RustSymbols' scope string), as (file id, its definition);
        None outside the repository."""
        if file_id not in self._files or not callee:
            return None
        module, self_type = self._context(file_id, enclosing_class)
        target = self._resolve_path(module, callee.split(PATH_SEPARATOR), self._hops, self_type)
        return (target.file, target.definition) if isinstance(target, Found) else None

    def binds_repository(self, file_id: int, binding: ImportBinding) -> bool:
        """Whether a `use` names the repository's code: a path from `crate`, `self` or `super`, or
        one that resolves to a module or definition of a repository crate."""
        if file_id not in self._files:
            return False
        path = binding_path(binding.module, binding.name)
        if not path:
            return False
        if path[0] in _REPOSITORY_ROOTS:
            return True
        module, _ = self._context(file_id, split_scope(binding.local)[0])
        return self._resolve_path(module, path, self._hops) is not None

    def resolve_file(self, file_id: int) -> list[CallEdge]:
        """Call edges whose call site lies in `file_id`."""
        return resolved_calls(file_id, self._files[file_id], self.resolve_callee)


def _first_segments(syntax: FileSyntax) -> set[str]:
    """The first segments of the paths a file writes (imports, callees): where a crate's name stands."""
    paths = [binding_path(binding.module, binding.name) for binding in syntax.imports]
    paths.extend(callee.split(PATH_SEPARATOR) for callee in set(syntax.calls.callee) if PATH_SEPARATOR in callee)
    found = {path[1] if path[0] == "" and len(path) > 1 else path[0] for path in paths if path}
    found.discard("")
    return found
