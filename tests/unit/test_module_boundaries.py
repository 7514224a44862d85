"""Two boundaries between modules, read from the source files (issue 35):

- no import cycle, counting every import a module makes outside a function: those under
  `if TYPE_CHECKING:` too (a cycle hidden from the interpreter is still two modules that cannot be
  read, tested or moved one without the other: repo_index and edit_graph were one);
- no module writes another object's private attributes (`x._name = ...`, `x._name[k] = ...`,
  `x._name.append(...)` where x is not self or cls): what a class keeps private it updates itself,
  through a method the writer calls.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.test_layout import ROOT, SOURCES, import_cycles, module_files, resolve

# Methods that change the container they are called on.
MUTATORS = frozenset({"append", "extend", "insert", "pop", "popitem", "remove", "clear", "update", "add",
                      "discard", "setdefault", "sort", "reverse", "fill", "resize", "put"})


def import_time_imports(path: Path, module: str) -> list[tuple[str, int]]:
    """(imported repomem module, line) for each import run when the module is imported or type
    checked: every import that is not inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - child.level + 1] + ([base] if base else []))
                found.extend((f"{base}.{alias.name}", child.lineno) for alias in child.names)
            visit(child)

    visit(tree)
    return [(name, line) for name, line in found if name.split(".")[0] == "repomem"]


def test_no_import_cycle_even_for_type_checking():
    modules = module_files()
    graph = {module: {resolve(name, modules) for name, _ in import_time_imports(path, module)} - {module}
             for module, path in modules.items()}
    cycles = import_cycles(graph)
    assert not cycles, "\n".join(cycles)


def test_the_cycle_check_sees_type_checking_imports(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text("from typing import TYPE_CHECKING\nimport repomem.a\nif TYPE_CHECKING:\n"
                      "    from repomem.b import B\ndef f():\n    import repomem.c\n", encoding="utf-8")
    assert import_time_imports(source, "repomem.mod") == [("repomem.a", 2), ("repomem.b.B", 4)]


def private_writes(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, expression) of each write to, or mutating call on, `x._name` where x is not self/cls."""

    def foreign_private(node: ast.AST) -> ast.Attribute | None:
        """The `x._name` a target or call receiver goes through (x._name, x._name[k], x._name.y)."""
        while isinstance(node, (ast.Subscript, ast.Attribute)):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value
                if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls")):
                    return node
            node = node.value
        return None

    found = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            targets = [node.func.value]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                and str(node.args[1].value).startswith("_") \
                and not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls")):
            found.append((node.lineno, ast.unparse(node)))
        while targets:
            target = targets.pop()
            if isinstance(target, (ast.Tuple, ast.List)):
                targets.extend(target.elts)
            elif isinstance(target, ast.Starred):
                targets.append(target.value)
            elif (private := foreign_private(target)) is not None:
                found.append((node.lineno, ast.unparse(private)))
    return sorted(found)


def test_no_module_writes_another_objects_private_attributes():
    offenders = []
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, expression in private_writes(ast.parse(path.read_text(encoding="utf-8"))):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: writes {expression}")
    assert not offenders, "\n".join(offenders)


def test_the_private_write_check_sees_each_form():
    source = """
index._path_ids = {}
index._path_ids[path] = 1
index._cover_changes.append(x)
a, index._w = 1, 2
index._rows += 1
del index._cache
setattr(index, "_x", 1)
self._mine = 1
self._mine.append(1)
cls._registry[name] = 1
index.public = 1
index.public.append(1)
value = index._read_only
"""
    assert [expression for _, expression in private_writes(ast.parse(source))] == [
        "index._path_ids", "index._path_ids", "index._cover_changes", "index._w", "index._rows", "index._cache",
        "setattr(index, '_x', 1)"]
