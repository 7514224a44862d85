"""One crate's module tree as tables: which modules exist, the items and `use` bindings each
declares, and the methods of each type name (from `impl` and `trait` blocks). Built from the
files of one source directory (layout.py) and dropped whenever one of them changes."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from repomem.languages.parsed import Definition, FileSyntax
from repomem.languages.rust.layout import ModulePath
from repomem.languages.rust.syntax import split_scope
from repomem.languages.rust.uses import GLOB, PATH_SEPARATOR


@dataclass(frozen=True)
class Found:
    """A definition of the repository, with the module it is declared in."""

    file: int
    definition: Definition
    source_dir: str
    module: ModulePath


def inline_modules(prefix: str) -> ModulePath:
    """("a", "b") for the inline-module prefix "a::b::"."""
    return tuple(prefix.split(PATH_SEPARATOR)[:-1]) if prefix else ()


def binding_path(module: str, name: str) -> list[str]:
    """The path segments a binding names (a glob's: its module's)."""
    segments = module.split(PATH_SEPARATOR) if module else []
    return segments if name == GLOB else [*segments, name]


@dataclass
class CrateTables:
    modules: set[ModulePath] = field(default_factory=set)
    items: dict[ModulePath, dict[str, Found]] = field(default_factory=lambda: defaultdict(dict))
    # type name -> module of its impl / trait blocks -> their functions by name
    methods: dict[str, dict[ModulePath, dict[str, Found]]] = field(default_factory=lambda: defaultdict(dict))
    uses: dict[ModulePath, dict[str, list[str]]] = field(default_factory=lambda: defaultdict(dict))
    globs: dict[ModulePath, list[list[str]]] = field(default_factory=lambda: defaultdict(list))

    def add_module(self, module: ModulePath) -> None:
        while module not in self.modules:
            self.modules.add(module)  # a module's ancestors exist even without a file of their own
            if not module:
                break
            module = module[:-1]

    def move_definitions(self, file_id: int, moved: dict[int, Definition]) -> None:
        """The file's definitions replaced by their new versions (`moved`: id of the old Definition
        -> the new one, same names and places, other nodes): what a rebuild after an edit inside
        bodies would hold, in the same first-declared-wins order."""
        for names in (*self.items.values(), *(by_module for by_type in self.methods.values()
                                               for by_module in by_type.values())):
            for name, found in names.items():
                if found.file == file_id:
                    names[name] = Found(file_id, moved[id(found.definition)], found.source_dir, found.module)

    def add_file(self, file_id: int, syntax: FileSyntax, source_dir: str, file_module: ModulePath) -> None:
        self.add_module(file_module)
        for definition in syntax.definitions:
            if definition.in_function:
                continue
            prefix, type_name = split_scope(definition.scope)
            module = file_module + inline_modules(prefix)
            self.add_module(module)
            found = Found(file_id, definition, source_dir, module)
            if type_name:
                self.methods[type_name].setdefault(module, {}).setdefault(definition.name, found)
            else:
                self.items[module].setdefault(definition.name, found)
        for binding in syntax.imports:
            prefix, local = split_scope(binding.local)
            module = file_module + inline_modules(prefix)
            self.add_module(module)
            path = binding_path(binding.module, binding.name)
            if binding.name == GLOB:
                self.globs[module].append(path)
            else:
                self.uses[module].setdefault(local, path)
