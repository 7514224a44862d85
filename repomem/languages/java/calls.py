"""Java call resolution across a repository (docs/design.md section 2).

Resolved: `m()` to a method of the enclosing class, its in-repo superclasses and interfaces (a few
levels) and the classes around it, then to a static import (single or on demand); `this.m()`,
`super.m()`; `C.m()` and `new C()` where C is a nested class in scope, a class of the file, a
single-type import, a class of the same package or of an on-demand import, in Java's order;
fully qualified `a.b.C.m()`; calls through locals, parameters and fields whose declared type names
such a class (JavaSymbols writes them with the type). `new C()` reaches the class. Never resolved:
java.* and javax.*, packages the repository does not declare, java.lang's implicit classes,
values of types the code does not name, overloads told apart (the first declaration of a name
stands for all of them).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from repomem.languages.java.packages import Found, Packages, is_platform, prefixes
from repomem.languages.java.syntax import NEW, PACKAGE_MARK, WILDCARD
from repomem.languages.parsed import Definition, FileSyntax, ImportBinding
from repomem.languages.resolver_scaffold import (
    TableResolver,
    drop_holder,
    member_through_bases,
    node_identity,
    remembered,
)


def _enclosing_chain(enclosing_class: str) -> list[str]:
    """'Outer.Inner' -> ['Outer.Inner', 'Outer'] (innermost first)."""
    if "." not in enclosing_class:
        return [enclosing_class] if enclosing_class else []
    return prefixes(enclosing_class)


class JavaCallResolver(TableResolver):
    """Resolves the calls of Java files against each other's definitions and imports."""

    def __init__(self, files: dict[int, FileSyntax], max_reexport_hops: int, max_base_depth: int):
        self._files: dict[int, FileSyntax] = {}
        self._base_depth = max_base_depth
        self._packages = Packages(self._files)
        self._package_of: dict[int, str] = {}
        self._classes: dict[int, dict[str, Definition]] = {}  # qualified class in the file -> definition
        self._members: dict[int, dict[str, dict[str, Definition]]] = {}  # class -> name -> method / class
        self._single: dict[int, dict[str, list[str]]] = {}  # local name -> fully qualified imports
        self._on_demand: dict[int, tuple[str, ...]] = {}  # packages or classes imported with .*
        # How many nested classes of each name the repository holds: a simple type name no nested
        # class has (most) skips the search of the enclosing classes and their supertypes.
        self._nested_names: dict[str, int] = defaultdict(int)
        # Package, class or prefix a file names -> the file (dependents() finds importers by it).
        self._importers: dict[str, set[int]] = defaultdict(set)
        self._import_keys: dict[int, set[str]] = {}
        # Answers that depend only on the tables, dropped on any change: thousands of call sites ask
        # for the same few names and classes.
        self._types_memo: dict[tuple[int, str, str], Found | None] = {}
        self._methods_memo: dict[tuple[int, str, str], Found | None] = {}
        self._members_memo: dict[tuple[int, int, str], Found | None] = {}
        self._qualified_memo: dict[str, Found | None] = {}
        for file_id in sorted(files):
            self._register(file_id, files[file_id])

    # -- tables --------------------------------------------------------------------------------

    def _register(self, file_id: int, syntax: FileSyntax) -> None:
        self._files[file_id] = syntax
        package = next((b.module for b in syntax.imports if b.local == PACKAGE_MARK), "")
        self._package_of[file_id] = package
        self._packages.add(package, file_id)
        classes: dict[str, Definition] = {}
        members: dict[str, dict[str, Definition]] = defaultdict(dict)
        for definition in syntax.definitions:
            if definition.in_function:
                continue
            if definition.scope:
                members[definition.scope].setdefault(definition.name, definition)  # overloads: the first
            if definition.kind == "class":
                classes.setdefault(f"{definition.scope}.{definition.name}" if definition.scope else definition.name,
                                   definition)
        self._classes[file_id], self._members[file_id] = classes, members
        for definition in classes.values():
            if definition.scope:
                self._nested_names[definition.name] += 1
        single: dict[str, list[str]] = defaultdict(list)
        on_demand: list[str] = []
        keys: set[str] = set()
        for binding in syntax.imports:
            if binding.local == PACKAGE_MARK:
                continue
            if binding.name == WILDCARD:
                on_demand.append(binding.module)
            else:
                single[binding.local].append(f"{binding.module}.{binding.name}")
            keys.update(prefixes(binding.module))
        for callee in set(syntax.calls.callee):  # fully qualified names need no import
            if callee[:1].islower() and callee.count(".") >= 2 and not callee.startswith(("this.", "super.")):
                keys.update(prefixes(callee.removeprefix(NEW).rpartition(".")[0]))
        self._single[file_id], self._on_demand[file_id] = dict(single), tuple(on_demand)
        self._import_keys[file_id] = keys
        for key in keys:
            self._importers[key].add(file_id)

    def _answers(self) -> tuple[dict, ...]:
        return self._types_memo, self._methods_memo, self._members_memo, self._qualified_memo

    def forget(self, file_id: int) -> None:
        """Drop a file's tables (before re-registering its new version or after its removal)."""
        if self._files.pop(file_id, None) is None:
            return
        self._forget_answers()
        self._packages.remove(self._package_of.pop(file_id), file_id)
        for key in self._import_keys.pop(file_id):
            drop_holder(self._importers, key, file_id)
        for definition in self._classes[file_id].values():
            if definition.scope:
                self._nested_names[definition.name] -= 1
                if not self._nested_names[definition.name]:
                    del self._nested_names[definition.name]
        for table in (self._classes, self._members, self._single, self._on_demand):
            del table[file_id]

    def module_of(self, file_id: int) -> str | None:
        """The package a file declares ("" for the default package)."""
        return self._package_of.get(file_id)

    def dependents(self, file_ids: set[int], modules: set[str] = frozenset()) -> set[int]:
        """Files of the same packages as `file_ids` (they see each other's classes without import)
        and files importing from those packages, their classes or members, or naming them fully
        qualified (every import registered its module's prefixes), or from the packages `modules`,
        of files since removed."""
        packages = {*modules, *(self._package_of[f] for f in file_ids if f in self._package_of)}
        found: set[int] = set()
        for package in packages:
            found |= self._packages.files(package)
            found |= self._importers.get(package, set())
        return found

    # -- classes and members -------------------------------------------------------------------

    def _member(self, owner: Found, name: str) -> Found | None:
        return remembered(self._members_memo, (owner.file, owner.definition.node, name),
                          lambda: self._member_now(owner, name))

    def _member_now(self, owner: Found, name: str) -> Found | None:
        """A method or nested class of a class or of its in-repo supertypes (breadth first, the
        superclass before the interfaces, `max_base_depth` levels)."""

        def own_member(current: Found) -> Found | None:
            definition = current.definition
            qualified = f"{definition.scope}.{definition.name}" if definition.scope else definition.name
            found = self._members[current.file].get(qualified, {}).get(name)
            return None if found is None else Found(current.file, found)

        def supertypes(current: Found) -> Iterator[Found]:
            for base in current.definition.bases:
                resolved = self._type_path(current.file, base, current.definition.scope)
                if resolved is not None:
                    yield resolved

        return member_through_bases(owner, own_member, supertypes, node_identity, self._base_depth)

    def _qualified(self, qualified: str) -> Found | None:
        """The class, method or nested class a fully qualified name names: the longest prefix that
        is a package of the repository, then a top-level class, then members."""
        if qualified not in self._qualified_memo:
            self._qualified_memo[qualified] = self._qualified_now(qualified)
        return self._qualified_memo[qualified]

    def _qualified_now(self, qualified: str) -> Found | None:
        if is_platform(qualified):
            return None
        parts = qualified.split(".")
        for end in range(len(parts) - 1, 0, -1):
            package = ".".join(parts[:end])
            if not self._packages.holds(package):
                continue
            found = self._packages.top_class(package, parts[end])
            if found is not None:
                return self._members_along(found, parts[end + 1:])
        return None

    def _members_along(self, current: Found | None, names: list[str]) -> Found | None:
        for name in names:
            if current is None or current.definition.kind != "class":
                return None
            current = self._member(current, name)
        return current

    def _type(self, file_id: int, name: str, enclosing_class: str) -> Found | None:
        key = (file_id, name, enclosing_class)
        if key not in self._types_memo:
            self._types_memo[key] = self._type_now(file_id, name, enclosing_class)
        return self._types_memo[key]

    def _type_now(self, file_id: int, name: str, enclosing_class: str) -> Found | None:
        """A simple class name in Java's order: nested classes of the enclosing classes (and their
        supertypes), the file's own classes and single-type imports, the package's classes, then
        on-demand imports."""
        classes = self._classes[file_id]
        for scope in _enclosing_chain(enclosing_class) if name in self._nested_names else ():
            owner = classes.get(scope)
            found = None if owner is None else self._member(Found(file_id, owner), name)
            if found is not None and found.definition.kind == "class":
                return found
        own = classes.get(name)
        if own is not None:
            return Found(file_id, own)
        for qualified in self._single[file_id].get(name, ()):
            found = self._qualified(qualified)
            if found is not None and found.definition.kind == "class":
                return found
        found = self._packages.top_class(self._package_of[file_id], name)
        if found is not None:
            return found
        return self._on_demand_member(file_id, name, "class")

    def _on_demand_member(self, file_id: int, name: str, kind: str) -> Found | None:
        for module in self._on_demand[file_id]:
            if is_platform(module):
                continue
            if kind == "class" and self._packages.holds(module):
                found = self._packages.top_class(module, name)
            else:
                found = self._members_along(self._qualified(module), [name])
            if found is not None and found.definition.kind == kind:
                return found
        return None

    def _type_path(self, file_id: int, dotted: str, enclosing_class: str) -> Found | None:
        """A class named by a simple or dotted type (`Outer.Inner`, `a.b.C`) in a file's context."""
        first, _, rest = dotted.partition(".")
        found = self._type(file_id, first, enclosing_class)
        if found is not None:
            found = self._members_along(found, rest.split(".")) if rest else found
        else:
            found = self._qualified(dotted) if rest else None
        return found if found is not None and found.definition.kind == "class" else None

    # -- calls ---------------------------------------------------------------------------------

    def _plain(self, file_id: int, name: str, enclosing_class: str) -> Found | None:
        key = (file_id, name, enclosing_class)
        if key not in self._methods_memo:
            self._methods_memo[key] = self._plain_now(file_id, name, enclosing_class)
        return self._methods_memo[key]

    def _plain_now(self, file_id: int, name: str, enclosing_class: str) -> Found | None:
        """`m()`: a method of the enclosing classes (innermost first, each with its supertypes),
        then a static import. A plain name that is no method may still name a class (names in
        scope ask for an import's local name this way)."""
        classes = self._classes[file_id]
        for scope in _enclosing_chain(enclosing_class):
            owner = classes.get(scope)
            found = None if owner is None else self._member(Found(file_id, owner), name)
            if found is not None and found.definition.kind == "function":
                return found
        for qualified in self._single[file_id].get(name, ()):
            found = self._qualified(qualified)
            if found is not None and found.definition.kind == "function":
                return found
        found = self._on_demand_member(file_id, name, "function")
        return found if found is not None else self._type(file_id, name, enclosing_class)

    def _resolve(self, file_id: int, callee: str, enclosing_class: str) -> Found | None:
        if callee.startswith(NEW):
            return self._type_path(file_id, callee[len(NEW):], enclosing_class)
        first, _, rest = callee.partition(".")
        if not rest:
            return self._plain(file_id, first, enclosing_class)
        if first in ("this", "super"):
            owner = self._classes[file_id].get(enclosing_class)
            if owner is None or "." in rest:
                return None
            if first == "this":
                return self._member(Found(file_id, owner), rest)
            for base in owner.bases:
                supertype = self._type_path(file_id, base, owner.scope)
                found = None if supertype is None else self._member(supertype, rest)
                if found is not None:
                    return found
            return None
        found = self._type(file_id, first, enclosing_class)
        if found is not None:
            return self._members_along(found, rest.split("."))
        return self._qualified(callee)

    def resolve_callee(self, file_id: int, callee: str, enclosing_class: str) -> tuple[int, Definition] | None:
        """The method or class a callee of `file_id` names (JavaSymbols' notation), as (file id, its
        definition); None outside the repository. `enclosing_class`: the qualified class around the
        call ("" if none)."""
        if file_id not in self._files or not callee:
            return None
        found = self._resolve(file_id, callee, enclosing_class)
        return None if found is None else (found.file, found.definition)

    def binds_repository(self, file_id: int, binding: ImportBinding) -> bool:
        """Whether an import names a package, class or static member of the repository."""
        if file_id not in self._files or binding.local == PACKAGE_MARK or is_platform(binding.module):
            return False
        if binding.name == WILDCARD:
            return self._packages.holds(binding.module) or self._qualified(binding.module) is not None
        return self._qualified(f"{binding.module}.{binding.name}") is not None
