"""The package layout keeps data flowing one way (docs/design.md section 1): every import, at
module level or inside a function, points to a lower layer or to the same package, and no import
cycle exists. Read from the source files, so a new module is checked the day it lands."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from repomem.strategies import STRATEGY_NAMES, STRATEGY_TABLE

ROOT = Path(__file__).resolve().parents[2]
# Source folder -> the package it is installed as (pyproject.toml's package-dir).
SOURCES = {"repomem": "repomem", "lsp": "repomem.lsp", "eval": "repomem.evaluation"}

# Lower layers never import higher ones. Modules of one package may import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("repomem.failures", "repomem.progress", "repomem.strategies", "repomem.regular_files",
     "repomem.child_processes", "repomem.allocator", "repomem.cyclic_gc", "repomem.setting_rules",
     "repomem.cache", "repomem.thread_priority", "repomem.machine_lock", "repomem.repository_root",
     "repomem.prompt_names"),
    ("repomem.config", "repomem.setting_reference", "repomem.packages"),
    ("repomem.languages",),
    ("repomem.index",),
    ("repomem.retrieval", "repomem.memory", "repomem.embeddings"),
    ("repomem.positions", "repomem.records", "repomem.kernel_compile"),
    ("repomem.repo_view",),
    ("repomem.service", "repomem.backends"),
    ("repomem.completion",),
    ("repomem.lsp", "repomem.evaluation"),
    ("repomem.cli",),
    ("repomem.__main__",),
)


def module_files() -> dict[str, Path]:
    modules = {}
    for folder, package in SOURCES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    return modules


def group_of(module: str) -> tuple[int, str]:
    """(layer, group prefix) of a module: the longest prefix named in LAYERS."""
    if module == "repomem":
        return 0, module  # the package's own (empty) __init__
    best: tuple[int, str] | None = None
    for layer, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[1])):
                best = (layer, prefix)
    assert best is not None, f"{module} belongs to no layer: add it to LAYERS"
    return best


def imports_of(path: Path, module: str) -> list[tuple[str, int, bool]]:
    """(imported repomem module, line, at module level) for every import in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = {id(node) for node in tree.body}
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names = [base]
        else:
            continue
        for name in names:
            if name == "repomem" or name.startswith("repomem."):
                found.append((name, node.lineno, id(node) in top_level))
    return found


def resolve(name: str, modules: dict[str, Path]) -> str:
    """`from repomem.x import y` names module repomem.x (or repomem.x.y when y is a module)."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def test_every_import_points_down_or_within_its_package():
    modules = module_files()
    problems = []
    for module, path in modules.items():
        layer, group = group_of(module)
        for name, line, _ in imports_of(path, module):
            target = resolve(name, modules)
            target_layer, target_group = group_of(target)
            if target_group != group and target_layer >= layer:
                problems.append(f"{path.relative_to(ROOT)}:{line}: {module} (layer {layer}) imports {target} "
                                f"(layer {target_layer})")
    assert not problems, "\n".join(problems)


def test_only_the_engine_imports_the_service_within_completion():
    """Prompt levers and retrievers read the repository through a RepoView made per request; the
    service's life cycle (edits, saves, rollbacks) stays out of their reach."""
    modules = module_files()
    offenders = [f"{path.relative_to(ROOT)}:{line}"
                 for module, path in modules.items()
                 if module.startswith("repomem.completion") and module != "repomem.completion.engine"
                 for name, line, _ in imports_of(path, module) if resolve(name, modules) == "repomem.service"]
    assert not offenders, offenders


def import_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Each cycle of a module -> imported modules graph, as "a -> b -> a" (depth-first search)."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    cycles = []

    def visit(module: str, stack: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if target.startswith(module + "."):
                continue  # a package's __init__ importing its own submodule is not a cycle
            if state.get(target) == 1:
                cycles.append(" -> ".join([*stack[stack.index(target):], target]))
            elif target not in state:
                visit(target, [*stack, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return cycles


def test_no_import_cycles():
    """Imports inside functions count too: a lazy import hid eval/build.py <-> language_holes.py."""
    modules = module_files()
    graph = {module: {resolve(name, modules) for name, _, _ in imports_of(path, module)} - {module}
             for module, path in modules.items()}
    cycles = import_cycles(graph)
    assert not cycles, "\n".join(cycles)


def test_no_module_imports_another_modules_private_names():
    """A helper two modules share lives in a module both import, under a public name: importing
    `_name` from a sibling is how the cli.main <-> cli.summarise_command cycle began (issue 35)."""
    modules = module_files()
    offenders = []
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("repomem", "lsp", "eval"):
                private = [alias.name for alias in node.names if alias.name.startswith("_")]
                if private and resolve(node.module or "", modules) != module:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports {', '.join(private)} "
                                     f"from {node.module}")
    assert not offenders, "\n".join(offenders)


def test_no_top_level_lsp_or_eval_package_is_installed():
    import importlib.util

    assert importlib.util.find_spec("repomem.lsp.server") is not None
    assert importlib.util.find_spec("repomem.evaluation.run") is not None
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    packages = pyproject.split("packages = [", 1)[1].split("]", 1)[0]
    assert '"lsp"' not in packages and '"eval"' not in packages
    # scripts/ and experiments/ are run from a checkout, never installed.
    assert not any(folder in packages for folder in ('"scripts', '"experiments', '"tests'))
    # Every engine package is listed: an editable install finds an unlisted one, a wheel would not.
    engine = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "repomem").rglob("__init__.py")}
    assert engine <= {name.strip().strip('"') for name in packages.split(",")}


# -- the strategy table is the one source of strategy names ---------------------------------------


def test_every_strategy_has_a_retriever_and_a_sane_shape():
    from repomem.completion.retrievers import RETRIEVERS

    assert len(set(STRATEGY_NAMES)) == len(STRATEGY_NAMES)
    for strategy in STRATEGY_TABLE:
        assert strategy.retriever in RETRIEVERS, strategy
        assert strategy.rounds >= 1
        assert strategy.alpha(0.7) == (0.7 if strategy.environment else 0.0)


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
def test_every_adapter_accepts_every_strategy(strategy):
    from repomem.cli.main import build_parser
    from repomem.config import config_from_mapping
    from repomem.lsp.settings import apply_settings

    parsed = build_parser().parse_args(["complete", "f.py:1", "--strategy", strategy])
    assert parsed.strategy == strategy
    config, warnings = config_from_mapping({"completion": {"strategy": strategy}})
    assert not warnings and config.completion.strategy == strategy
    config, problems = apply_settings(config, {"strategy": strategy})
    assert not problems and config.completion.strategy == strategy


def test_no_module_compares_strategy_names_outside_the_table():
    """Names as string literals appear only in the table (and as configured defaults)."""
    allowed = {ROOT / "repomem" / "strategies.py"}
    offenders = []
    for path in module_files().values():
        if path in allowed:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                for side in [node.left, *node.comparators]:
                    elements = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                    for element in elements:
                        if isinstance(element, ast.Constant) and element.value in STRATEGY_NAMES:
                            offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: compares {element.value!r}")
    assert not offenders, "\n".join(offenders)


def test_the_vscode_extension_offers_every_strategy_of_the_table():
    import json

    settings = json.loads((ROOT / "lsp" / "vscode" / "package.json").read_text(encoding="utf-8"))
    offered = settings["contributes"]["configuration"]["properties"]["repomem.strategy"]["enum"]
    assert tuple(offered) == STRATEGY_NAMES


# -- the service is a narrow façade ----------------------------------------------------------------

SERVICE_USERS = ("repomem", "lsp", "eval", "scripts", "experiments")  # every folder whose code may hold a RepoService


def service_names(tree: ast.AST) -> set[str]:
    """Names a module gives a RepoService: `service` and `_service` in any spelling, parameters and
    variables annotated as one, and variables assigned from `RepoService(...)` / `RepoService.open(...)`."""
    names = {"service", "_service"}

    def is_service(node: ast.AST | None) -> bool:
        text = ast.unparse(node) if node is not None else ""
        return "RepoService" in text

    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and is_service(node.annotation):
            names.add(node.arg)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and is_service(node.annotation):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and is_service(node.value.func):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
    return names


def service_index_reads(source: str) -> list[tuple[int, str]]:
    """(line, expression) of each `<a service>.index` in a module, read or written: `service.index`,
    `self.service.index`, `self._service.index`, `builder.index` where `builder` is a RepoService."""
    tree = ast.parse(source)
    names = service_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "index":
            owner = node.value
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            if name in names:
                found.append((node.lineno, node.col_offset, ast.unparse(node)))
    return [(line, expression) for line, _, expression in sorted(found)]


def test_no_module_outside_the_service_reads_its_index():
    """The service answers questions (issue 35): a caller asks for what it needs (`index_loaded`,
    `indexed_files`, `memories`, `fragments_ending_after`, ...) instead of reading the index."""
    offenders = []
    for folder in SERVICE_USERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "repomem" / "service.py":
                continue
            for line, expression in service_index_reads(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: {expression}")
    assert not offenders, "\n".join(offenders)


def test_only_scripts_measure_the_index_itself():
    """`RepoService.index_for_measurement` is for the benchmarks of the index's internals."""
    offenders = []
    for folder in ("repomem", "lsp", "eval"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Attribute) and node.attr == "index_for_measurement" \
                        and path != ROOT / "repomem" / "service.py":
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, "\n".join(offenders)


def test_the_index_check_sees_each_spelling_of_a_service():
    source = '''
def f(service, other: RepoService, plain):
    builder = RepoService(root, config)
    opened: RepoService | Failure = RepoService.open(root)
    service.index, self.service.index, self._service.index, other.index, builder.index, opened.index
    plain.index, config.index, service.index_loaded, items.index(3)
    self.service.index = None
'''
    assert [expression for _, expression in service_index_reads(source)] == [
        "service.index", "self.service.index", "self._service.index", "other.index", "builder.index",
        "opened.index", "self.service.index"]
