"""Failure kinds are a declared set (repomem/failures.py FailureKind): every failure the code base
builds names a member, anything else fails at construction, and code branches on members, not
strings; a member still reads as its string wherever a kind is printed or serialised."""

from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

import pytest

from repomem.failures import Failure, FailureKind

ROOT = Path(__file__).resolve().parents[2]
SOURCE_FOLDERS = ("repomem", "lsp", "eval", "scripts")


def source_trees(folders: tuple[str, ...] = SOURCE_FOLDERS) -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8")))
            for folder in folders for path in sorted((ROOT / folder).rglob("*.py"))]


def expected_to_raise(tree: ast.Module) -> set[int]:
    """ids of the nodes inside `with pytest.raises(...)` blocks: calls a test makes to see them fail."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(
                isinstance(item.context_expr, ast.Call) and ast.unparse(item.context_expr.func) == "pytest.raises"
                for item in node.items):
            inside.update(id(child) for statement in node.body for child in ast.walk(statement))
    return inside


def test_every_failure_the_code_base_builds_names_a_declared_member():
    """`Failure(FailureKind.NO_INDEX, ...)`, never a string or a name that hides which kind it is:
    the kind is read where it is written, and a misspelt member fails on import of the module."""
    offenders, built = [], set()
    for path, tree in source_trees(SOURCE_FOLDERS + ("tests",)):
        skipped = expected_to_raise(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] == "Failure") \
                    or id(node) in skipped:
                continue
            kind = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "kind"), None)
            if isinstance(kind, ast.Attribute) and isinstance(kind.value, ast.Name) and kind.value.id == "FailureKind" \
                    and kind.attr in FailureKind.__members__:
                built.add(kind.attr)
            else:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)[:100]}")
    assert not offenders, "\n".join(offenders)
    assert len(built) > 60  # the scan found the call sites


@pytest.mark.parametrize("kind", ["x", "no-index", None, 3])
def test_a_kind_that_is_not_a_member_raises_a_type_error(kind):
    with pytest.raises(TypeError, match="a failure's kind is a FailureKind member"):
        Failure(kind, "a message")


def test_the_type_error_names_the_member_a_declared_string_stands_for():
    with pytest.raises(TypeError, match=r"not 'no-index': write FailureKind\.NO_INDEX"):
        Failure("no-index", "no index yet")
    with pytest.raises(TypeError, match="not 'no-such-kind': declare the kind in FailureKind"):
        Failure("no-such-kind", "a message")


def test_a_member_reads_and_serialises_as_its_string():
    failure = Failure(FailureKind.NO_INDEX, "no index yet")
    assert failure.kind is FailureKind.NO_INDEX and failure.kind == "no-index"
    assert json.dumps({"kind": failure.kind}) == '{"kind": "no-index"}' and f"{failure.kind}" == "no-index"
    assert str(failure.kind) == "no-index"
    assert pickle.loads(pickle.dumps(failure)) == failure and str(failure) == "no index yet"


def test_no_module_compares_a_kind_with_a_failure_kinds_string():
    """`failure.kind == FailureKind.NO_INDEX`, not `== "no-index"`: a misspelt member is an
    AttributeError, a misspelt string a branch that never runs."""
    declared = {kind.value for kind in FailureKind}
    offenders = []
    for path, tree in source_trees():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            if not any(isinstance(side, ast.Attribute) and side.attr == "kind" for side in sides):
                continue
            for side in sides:
                for element in side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]:
                    if isinstance(element, ast.Constant) and element.value in declared:
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: compares {element.value!r}")
    assert not offenders, "\n".join(offenders)
