"""Failure kinds are a declared set (repomem/failures.py FailureKind): every kind the code builds
is declared, an undeclared one fails at construction, and code branches on members, not strings."""

from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

import pytest

from repomem.failures import Failure, FailureKind

ROOT = Path(__file__).resolve().parents[2]
SOURCE_FOLDERS = ("repomem", "lsp", "eval", "scripts")


def source_trees() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8")))
            for folder in SOURCE_FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))]


def test_every_kind_the_code_builds_is_declared():
    declared = {kind.value for kind in FailureKind}
    built, undeclared = set(), []
    for path, tree in source_trees():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Failure"):
                continue
            kind = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "kind"), None)
            if isinstance(kind, ast.Constant):
                built.add(kind.value)
                if kind.value not in declared:
                    undeclared.append(f"{path.relative_to(ROOT)}:{node.lineno}: {kind.value!r}")
    assert not undeclared, "\n".join(undeclared)
    assert len(built) > 60  # the scan found the call sites (Failure("kind", message) with a literal)


def test_an_undeclared_kind_raises_at_construction():
    with pytest.raises(ValueError, match="undeclared failure kind 'no-such-kind'"):
        Failure("no-such-kind", "a message")


def test_a_kind_given_as_its_string_becomes_its_member_and_still_reads_as_the_string():
    failure = Failure("no-index", "no index yet")
    assert failure.kind is FailureKind.NO_INDEX and failure.kind == "no-index"
    assert failure == Failure(FailureKind.NO_INDEX, "no index yet")
    assert json.dumps({"kind": failure.kind}) == '{"kind": "no-index"}' and f"{failure.kind}" == "no-index"
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
