"""Python call resolution across a repository (docs/design.md section 2).

Resolved: plain calls to functions and classes of the same module; `from x import f` and
`import x` / `x.f` across files, relative imports included, following re-exports a few hops;
`self.m()` / `cls.m()` to methods of the enclosing class and its in-repo bases; `C.m()`;
instantiation `C()` to the class. Anything else is left unresolved and gets no edge.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from repomem.languages.parsed import CallEdge, Definition, FileSyntax, ImportBinding, resolved_calls
from repomem.languages.python.syntax import LANGUAGE_NAME
from repomem.languages.resolver_scaffold import shared_prefix_length


@dataclass(frozen=True)
class _Module:
    file: int


@dataclass(frozen=True)
class _Class:
    file: int
    definition: Definition


def module_stem(path: str) -> str:
    """A repository-relative path's last part without its suffix ('a/b.pyi' -> 'b'; '.x' stays),
    as PurePosixPath's stem, split as a string: a resolver registers every file (50,000 on the
    large tree) and pathlib cost ~15 us a call (docs/measurements.md, "An edit")."""
    name = path.rpartition("/")[2]
    dot = name.rfind(".")
    return name[:dot] if 0 < dot < len(name) - 1 else name


def module_name(path: str) -> str:
    """'pkg/sub/mod.py' -> 'pkg.sub.mod'; 'pkg/__init__.py' -> 'pkg'."""
    parts = [part for part in path.rpartition("/")[0].split("/") if part and part != "."]
    stem = module_stem(path)
    if stem != "__init__":
        parts.append(stem)
    return ".".join(parts)


class PythonCallResolver:
    """Resolves the calls of Python files against each other's definitions and imports."""

    def __init__(self, files: dict[int, FileSyntax], max_reexport_hops: int, max_base_depth: int):
        self._files = dict(files)
        self._hops = max_reexport_hops
        self._base_depth = max_base_depth
        # Answers that depend only on the tables, kept until a file is learned or forgotten: the
        # same imported names and classes are looked up from thousands of call sites
        # (docs/measurements.md#parsing-and-analysis).
        self._names_memo: dict[tuple[int, str, int], _Module | _Class | _DefinitionRef | None] = {}
        self._members_memo: dict[tuple[int, int, str], _Class | _DefinitionRef | None] = {}
        self._modules_memo: dict[tuple[int, str], int | None] = {}
        self._top_packages: set[str] | None = None  # first dotted part of every module name
        self._module_of: dict[int, str] = {}
        # Files registered under each module name, in registration order (the first one holds the
        # name in _by_full): a forgotten file's successor, without a pass over every file per edit.
        self._claimants: dict[str, list[int]] = defaultdict(list)
        self._is_package: dict[int, bool] = {}
        self._by_full: dict[str, int] = {}
        self._by_tail: dict[str, list[int]] = defaultdict(list)
        self._top: dict[int, dict[str, Definition]] = {}
        self._members: dict[int, dict[str, dict[str, Definition]]] = {}
        self._imports: dict[int, dict[str, tuple[str, str]]] = {}
        # absolute module a file imports (or module.name) -> importing files (for dependents())
        self._importers: dict[str, set[int]] = defaultdict(set)
        self._import_keys: dict[int, set[str]] = {}
        self._lookups: _LookupKeys | None = None  # built by the first affected_by, then kept current
        for file_id in sorted(files):
            self._register(file_id, files[file_id])

    def forget(self, file_id: int) -> None:
        """Drop a file's tables (before re-registering its new version or after its removal)."""
        if file_id not in self._files:
            return
        self._forget_answers()
        name = self._module_of.pop(file_id)
        claimants = self._claimants[name]
        claimants.remove(file_id)
        if self._by_full.get(name) == file_id:
            del self._by_full[name]
            if claimants:  # another file may claim the name: the earliest registered
                self._by_full[name] = claimants[0]
        if not claimants:
            del self._claimants[name]
        parts = name.split(".")
        for start in range(1, len(parts)):
            tail = self._by_tail.get(".".join(parts[start:]))
            if tail is not None and file_id in tail:
                tail.remove(file_id)
        for key in self._import_keys.pop(file_id, set()):
            self._importers[key].discard(file_id)
        for table in (self._is_package, self._top, self._members, self._imports):
            table.pop(file_id, None)
        if self._lookups is not None:
            self._lookups.forget(file_id)
        del self._files[file_id]

    def _forget_answers(self) -> None:
        self._top_packages = None
        self._names_memo.clear()
        self._members_memo.clear()
        self._modules_memo.clear()

    def module_of(self, file_id: int) -> str | None:
        """The dotted module name a file was registered under (None if unknown)."""
        return self._module_of.get(file_id)

    def learn(self, file_id: int, syntax: FileSyntax) -> None:
        """Add (or replace) one file's tables. A new version with the same definitions (nodes
        included) and imports as the old one (a keystroke inside a body) makes the same tables, and
        every answer stays: they read tables and paths, never call sites. Its call sites are read
        from it from now on (`resolve_file`), and the lookup keys, which hold its callees, follow."""
        old = self._files.get(file_id)
        if old is not None and old.path == syntax.path and old.definitions == syntax.definitions \
                and old.imports == syntax.imports:
            self._files[file_id] = syntax
            if self._lookups is not None:
                self._learn_lookups(file_id, syntax)  # replaces the old version's keys
            return
        self.forget(file_id)
        self._forget_answers()
        self._files[file_id] = syntax
        self._register(file_id, syntax)

    def dependents(self, file_ids: set[int], modules: set[str] = frozenset()) -> set[int]:
        """Files importing one of `file_ids` (or one of `modules`, for files since removed).

        Matched on absolute module names and their tails, the way `_find_module` resolves them.
        """
        names = set()
        for module in {*modules, *(self._module_of[f] for f in file_ids if f in self._module_of)}:
            parts = module.split(".")
            names.update(".".join(parts[start:]) for start in range(len(parts)))
        found: set[int] = set()
        for name in names:
            found |= self._importers.get(name, set())
        return found

    def affected_by(self, file_ids: set[int], names: frozenset[str] | None,
                    modules: set[str] = frozenset()) -> set[int]:
        """Files whose calls may resolve differently once `file_ids` changed the definitions named
        `names` (None: any name, or `modules` went): with names, every file that may ask for one
        of them, wherever it is; without, the files importing them.

        Each lookup in a file's tables is keyed by a dotted part of some file's callees, class
        bases or imports: the caller's own or, down a chain, a re-export's (`from m import f as
        g` answers for g what m answers for f) or a class's bases (a class whose base changed
        answers its members differently, and so do its subclasses). So the names are closed under
        those two steps, over every file, and a file none of whose parts is among them resolves
        as before."""
        if names is None:
            return self.dependents(file_ids, modules)
        if self._lookups is None:
            self._lookups = _LookupKeys()
            for file_id, syntax in self._files.items():
                self._learn_lookups(file_id, syntax)
        return self._lookups.files_asking(names) - file_ids

    @staticmethod
    def changed_names(old: FileSyntax | None, new: FileSyntax | None) -> frozenset[str]:
        """The names whose lookup in this file may answer differently after `old` became `new`:
        those of the definitions other files can reach (module level and class members) that
        appeared, went or changed (kind, scope, bases, order among namesakes), and the names an
        import binds to something else now (a lookup tries the definitions, then the imports).
        A file that is new (old None) or went (new None) changes all of its names, and its
        module's last part, which every module path that may find it ends with."""
        if old is None or new is None:
            present = new if old is None else old
            assert present is not None
            names = {d.name for d in present.definitions if not d.in_function} | set(_import_table(present))
            return frozenset({*names, module_name(present.path).split(".")[-1]})

        def reachable(syntax: FileSyntax) -> dict[str, list[tuple[str, str, tuple[str, ...]]]]:
            by_name: dict[str, list[tuple[str, str, tuple[str, ...]]]] = defaultdict(list)
            for definition in syntax.definitions:
                if not definition.in_function:
                    by_name[definition.name].append((definition.scope, definition.kind, definition.bases))
            return by_name

        changed = set()
        for before, after in ((reachable(old), reachable(new)), (_import_table(old), _import_table(new))):
            changed.update(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
        return frozenset(changed)

    def _register(self, file_id: int, syntax: FileSyntax) -> None:
        name = module_name(syntax.path)
        self._module_of[file_id] = name
        # A module name two files claim (a.py and a/__init__.py, a stub beside its module) goes to
        # the first path, as in a whole build, whatever order the files were learned in.
        claimants = self._claimants[name]
        bisect.insort(claimants, file_id, key=lambda claimant: self._files[claimant].path)
        self._is_package[file_id] = module_stem(syntax.path) == "__init__"
        self._by_full[name] = claimants[0]
        parts = name.split(".")
        for start in range(1, len(parts)):
            self._by_tail[".".join(parts[start:])].append(file_id)
        top: dict[str, Definition] = {}
        members: dict[str, dict[str, Definition]] = defaultdict(dict)
        for definition in syntax.definitions:
            if definition.in_function:
                continue
            if definition.scope == "":
                top[definition.name] = definition  # the last definition wins, as at run time
            else:
                members[definition.scope][definition.name] = definition
        self._top[file_id] = top
        self._members[file_id] = members
        bindings = _import_table(syntax)
        self._imports[file_id] = bindings
        keys = set()
        # Every imported module by its full name (`import a.b.c` binds only `a`, but depends on a.b.c).
        for module, attribute in [*bindings.values(), *((b.module, b.name) for b in syntax.imports)]:
            absolute = self._absolute(file_id, module)
            keys.add(absolute)
            if attribute:
                keys.add(f"{absolute}.{attribute}" if absolute else attribute)
        self._import_keys[file_id] = keys
        for key in keys:
            self._importers[key].add(file_id)
        if self._lookups is not None:
            self._learn_lookups(file_id, syntax)

    def _learn_lookups(self, file_id: int, syntax: FileSyntax) -> None:
        assert self._lookups is not None
        self._lookups.learn(file_id, syntax, [self._absolute(file_id, b.module) for b in syntax.imports])

    # -- modules -------------------------------------------------------------------------------

    def _absolute(self, file_id: int, module: str) -> str:
        if not module.startswith("."):
            return module
        level = len(module) - len(module.lstrip("."))
        rest = module[level:]
        package = self._module_of[file_id].split(".")
        if not self._is_package[file_id]:
            package = package[:-1]
        if level > 1:
            package = package[: len(package) - (level - 1)] if level - 1 <= len(package) else []
        return ".".join([*package, rest] if rest else package)

    def _find_module(self, file_id: int, module: str) -> int | None:
        key = (file_id, module)
        if key not in self._modules_memo:
            self._modules_memo[key] = self._find_module_now(file_id, module)
        return self._modules_memo[key]

    def _find_module_now(self, file_id: int, module: str) -> int | None:
        absolute = self._absolute(file_id, module)
        if not absolute:
            return None
        exact = self._by_full.get(absolute)
        if exact is not None:
            return exact
        candidates = self._by_tail.get(absolute)
        if not candidates:
            return None
        # Prefer the candidate sharing the longest folder prefix with the importing file. The
        # scan's paths are normalised ("a/b.py": no "//", "./" or leading "/"), so splitting at "/"
        # gives PurePosixPath's parts, at a tenth of its cost: each importer of a name many
        # modules share (`from util import f` beside 2,000 `util.py`) weighs every one of them.
        here = self._files[file_id].path.split("/")

        def shared(candidate: int) -> int:
            return shared_prefix_length(here, self._files[candidate].path.split("/"))

        # Ties go to the first path (a whole build's order), not to the file learned first.
        return min(candidates, key=lambda c: (-shared(c), self._files[c].path))

    # -- names ---------------------------------------------------------------------------------

    def _resolve_name(self, file_id: int, name: str, hops: int) -> _Module | _Class | _DefinitionRef | None:
        key = (file_id, name, hops)
        if key not in self._names_memo:
            self._names_memo[key] = self._resolve_name_now(file_id, name, hops)
        return self._names_memo[key]

    def _resolve_name_now(self, file_id: int, name: str, hops: int) -> _Module | _Class | _DefinitionRef | None:
        definition = self._top[file_id].get(name)
        if definition is not None:
            return _Class(file_id, definition) if definition.kind == "class" else definition_ref(file_id, definition)
        binding = self._imports[file_id].get(name)
        if binding is None or hops < 0:
            return None
        module, attribute = binding
        if attribute == "":
            target = self._find_module(file_id, module)
            return None if target is None else _Module(target)
        target = self._find_module(file_id, module)
        if target is not None and target != file_id:
            found = self._resolve_name(target, attribute, hops - 1)
            if found is not None:
                return found
        base = self._absolute(file_id, module)
        sub = self._find_module(file_id, f"{base}.{attribute}" if base else attribute)
        return None if sub is None else _Module(sub)

    def _member(self, file_id: int, class_def: Definition, name: str) -> _Class | _DefinitionRef | None:
        """Look `name` up in a class and its in-repo bases (breadth first, bounded)."""
        key = (file_id, class_def.node, name)
        if key not in self._members_memo:
            self._members_memo[key] = self._member_now(file_id, class_def, name)
        return self._members_memo[key]

    def _member_now(self, file_id: int, class_def: Definition, name: str) -> _Class | _DefinitionRef | None:
        queue: list[tuple[int, Definition, int]] = [(file_id, class_def, 0)]
        seen: set[tuple[int, int]] = set()
        while queue:
            owner_file, owner, depth = queue.pop(0)
            if (owner_file, owner.node) in seen:
                continue
            seen.add((owner_file, owner.node))
            qualified = f"{owner.scope}.{owner.name}" if owner.scope else owner.name
            found = self._members[owner_file].get(qualified, {}).get(name)
            if found is not None:
                return _Class(owner_file, found) if found.kind == "class" else definition_ref(owner_file, found)
            if depth >= self._base_depth:
                continue
            for base in owner.bases:
                resolved = self._resolve_dotted(owner_file, base, owner.scope)
                if isinstance(resolved, _Class):
                    queue.append((resolved.file, resolved.definition, depth + 1))
        return None

    def _class_by_qualname(self, file_id: int, qualified: str) -> Definition | None:
        scope, _, name = qualified.rpartition(".")
        if scope:
            found = self._members[file_id].get(scope, {}).get(name)
        else:
            found = self._top[file_id].get(name)
        return found if found is not None and found.kind == "class" else None

    def _resolve_dotted(self, file_id: int, dotted: str, enclosing_class: str):
        parts = dotted.split(".")
        if parts[0] in ("self", "cls") and len(parts) >= 2:
            if not enclosing_class:
                return None
            owner = self._class_by_qualname(file_id, enclosing_class)
            if owner is None:
                return None
            current = self._member(file_id, owner, parts[1])
            rest = parts[2:]
        else:
            current = self._resolve_name(file_id, parts[0], self._hops)
            rest = parts[1:]
        for part in rest:
            if isinstance(current, _Module):
                found = self._resolve_name(current.file, part, self._hops)
                if found is None:
                    sub = self._find_module(current.file, f"{self._module_of[current.file]}.{part}")
                    found = None if sub is None else _Module(sub)
                current = found
            elif isinstance(current, _Class):
                current = self._member(current.file, current.definition, part)
            else:
                return None
        return current

    def resolve_callee(self, file_id: int, callee: str, enclosing_class: str) -> tuple[int, Definition] | None:
        """The function, method or class a dotted callee of `file_id` names, as (file id, its
        definition); None when it does not resolve to a definition in the repository.

        `enclosing_class` is the qualified class around the call ("" if none), for self./cls. calls.
        """
        target = self._resolve_dotted(file_id, callee, enclosing_class)
        if isinstance(target, (_Class, _DefinitionRef)):
            return target.file, target.definition
        return None

    def binds_repository(self, file_id: int, binding: ImportBinding) -> bool:
        """Whether one of `file_id`'s imports binds repository code: a relative import, a module of
        one of the repository's top-level packages, or a name that resolves to a definition."""
        if binding.module.startswith("."):
            return True
        if self._top_packages is None:
            self._top_packages = {module.split(".", 1)[0] for module in self._module_of.values()}
        if binding.module.split(".", 1)[0] in self._top_packages:
            return True
        return self.resolve_callee(file_id, binding.local, "") is not None

    def resolve_file(self, file_id: int) -> list[CallEdge]:
        """Call edges whose call site lies in `file_id`."""
        return resolved_calls(file_id, self._files[file_id], self.resolve_callee)


def _import_table(syntax: FileSyntax) -> dict[str, tuple[str, str]]:
    """A file's imports as its lookups read them: local name -> (module, attribute; "" for a module)."""
    bindings: dict[str, tuple[str, str]] = {}
    for binding in syntax.imports:
        if binding.name == "" and "." in binding.local and binding.local == binding.module:
            # `import a.b.c` binds `a`; deeper parts are reached as submodules.
            first = binding.local.split(".")[0]
            bindings[first] = (first, "")
        else:
            bindings[binding.local] = (binding.module, binding.name)
    return bindings


class _LookupKeys:
    """Which names each file's resolution may ask other files for, and how a chain passes a name
    on: every file's dotted parts (callees, class bases, imports, the absolute modules it imports:
    `from . import x` asks for its own package), each import's attribute and module parts -> its
    local name (a module that now resolves elsewhere moves what the import binds), each class's
    base parts -> the class's name. Counted per file, so a file's new version replaces its old one."""

    def __init__(self) -> None:
        self.files_with_part: dict[str, set[int]] = defaultdict(set)
        self._passed_on: dict[str, Counter[str]] = defaultdict(Counter)  # name -> names it reaches
        self._of_file: dict[int, tuple[frozenset[str], list[tuple[str, str]]]] = {}

    def learn(self, file_id: int, syntax: FileSyntax, modules: Sequence[str]) -> None:
        """`modules`: each import's module as an absolute dotted name (relative ones resolved)."""
        self.forget(file_id)
        texts = [*syntax.calls.callee, *(base for d in syntax.definitions for base in d.bases),
                 *(text for binding in syntax.imports for text in binding), *modules]
        parts = frozenset(part for text in texts for part in text.split("."))
        steps = [(part, binding.local.split(".")[0]) for binding, module in zip(syntax.imports, modules)
                 for part in {*module.split("."), binding.name} if part]
        steps += [(part, d.name) for d in syntax.definitions if d.kind == "class"
                  for base in d.bases for part in base.split(".")]
        self._of_file[file_id] = (parts, steps)
        for part in parts:
            self.files_with_part[part].add(file_id)
        for name, reached in steps:
            self._passed_on[name][reached] += 1

    def forget(self, file_id: int) -> None:
        parts, steps = self._of_file.pop(file_id, (frozenset(), []))
        for part in parts:
            self.files_with_part[part].discard(file_id)
        for name, reached in steps:
            self._passed_on[name][reached] -= 1
            if self._passed_on[name][reached] <= 0:
                del self._passed_on[name][reached]

    def files_asking(self, names: frozenset[str]) -> set[int]:
        """Every file with a part among `names` closed under the re-export and base steps."""
        asked = set(names)
        pending = list(names)
        while pending:
            for reached in self._passed_on.get(pending.pop(), ()):
                if reached not in asked:
                    asked.add(reached)
                    pending.append(reached)
        return {file_id for name in asked for file_id in self.files_with_part.get(name, ())}


@dataclass(frozen=True)
class _DefinitionRef:
    file: int
    definition: Definition


def definition_ref(file_id: int, definition: Definition) -> _DefinitionRef:
    return _DefinitionRef(file_id, definition)


def resolve_calls(files: dict[int, FileSyntax], max_reexport_hops: int, max_base_depth: int) -> list[CallEdge]:
    """All call edges of the Python files in `files` (keyed by file index)."""
    python = {fid: s for fid, s in files.items() if s.language == LANGUAGE_NAME}
    resolver = PythonCallResolver(python, max_reexport_hops, max_base_depth)
    edges: list[CallEdge] = []
    for file_id in sorted(python):
        edges.extend(resolver.resolve_file(file_id))
    return edges
