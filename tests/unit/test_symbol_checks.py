"""The structure check of a loaded index (repomem.index.integrity.check_structure): well-formed
symbols and call edges pass; each way a file's symbols can be damaged is refused, and so is each
kind of damaged call edge (every file's edges are checked as one array). A value of the wrong type
is refused as symbols.json is read (its decoder checks every field's type: SYMBOLS_SCHEMA)."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import json
from types import SimpleNamespace

import numpy as np
import pytest

from repomem.index.integrity import IndexDamage, check_structure
from repomem.index.snapshot_encoding import SYMBOLS_SCHEMA
from repomem.index.snapshot_files import json_from
from repomem.languages.parsed import CallSites, Definition, FileSyntax, ImportBinding

NO_CALLS = CallSites()


def _syntax(path: str, n_nodes: int, definitions=(), imports=(), calls=NO_CALLS) -> FileSyntax:
    zeros = np.zeros(n_nodes, dtype=np.int32)
    return FileSyntax(path=path, language="python", parent=zeros, start_line=zeros, end_line=zeros, length=zeros,
                      line_chars=np.zeros(1, dtype=np.int32), definitions=tuple(definitions),
                      imports=tuple(imports), calls=calls)


GOOD = [
    _syntax("a.py", 6, [Definition(1, "f", "function", "", False, ()), Definition(5, "C", "class", "", False, ("B",))],
            [ImportBinding("os", "os", "")], CallSites((2, 3), (0, 1), ("g", "self.h"), ("", "C"))),
    _syntax("b.py", 3, [Definition(2, "g", "function", "C", True, ())]),
    _syntax("empty.py", 1),
]


def _index(calls: dict, syntaxes=None) -> SimpleNamespace:
    """What check_structure reads of a RepoIndex: files (a.py and b.py unless given), their
    structure and call edges."""
    syntaxes = GOOD[:2] if syntaxes is None else syntaxes
    records = [SimpleNamespace(path=syntax.path) for syntax in syntaxes]
    return SimpleNamespace(files=records, syntax=list(syntaxes), file_fragments=[object() for _ in syntaxes],
                           calls=calls)


def _with(index: int, **changes) -> list[FileSyntax]:
    files = list(GOOD)
    files[index] = dataclasses.replace(files[index], **changes)
    return files


DAMAGED = {
    "a definition past its file's nodes": _with(1, definitions=(Definition(3, "g", "function", "", False, ()),)),
    "a negative definition node": _with(1, definitions=(Definition(-1, "g", "function", "", False, ()),)),
    "a node past int64": _with(1, definitions=(Definition(2**70, "g", "function", "", False, ()),)),
    "a kind of definition unknown": _with(1, definitions=(Definition(2, "g", "method", "", False, ()),)),
    "a call past its file's nodes": _with(0, calls=CallSites((2, 6), (0, 1), ("g", "h"), ("", ""))),
    "a call with negative hops": _with(0, calls=CallSites((2, 3), (0, -1), ("g", "h"), ("", ""))),
    "call columns of unequal lengths": _with(0, calls=CallSites((2, 3), (0,), ("g", "h"), ("", ""))),
}


def test_well_formed_symbols_pass():
    check_structure(_index({}, GOOD))
    check_structure(_index({}, []))


@pytest.mark.parametrize("damage", DAMAGED)
def test_each_damaged_symbol_is_refused(damage):
    with pytest.raises(IndexDamage):
        check_structure(_index({}, DAMAGED[damage]))


# a.py's member of symbols.json as GOOD holds it, and damages of its values' types.
STORED = {"d": [[1, "f", "function", "", False, []], [5, "C", "class", "", False, ["B"]]], "i": [["os", "os", ""]],
          "c": [[2, 3], [0, 1], ["g", "self.h"], ["", "C"]]}
STORED_DAMAGED = {
    "a node that is a string": lambda e: e["d"][0].__setitem__(0, "1"),
    "a node that is a bool": lambda e: e["d"][0].__setitem__(0, True),
    "in_function an int": lambda e: e["d"][0].__setitem__(4, 0),
    "a base that is not a string": lambda e: e["d"][1].__setitem__(5, [7]),
    "a definition of the wrong length": lambda e: e["d"].__setitem__(0, [1]),
    "an import of two fields": lambda e: e.__setitem__("i", [["os", "os"]]),
    "an import field not a string": lambda e: e["i"][0].__setitem__(1, 1),
    "a callee not a string": lambda e: e["c"][2].__setitem__(1, None),
    "a call node that is a float": lambda e: e["c"][0].__setitem__(0, 2.0),
    "call columns past four": lambda e: e["c"].append([]),
    "definitions an object": lambda e: e.__setitem__("d", {"not": "a list"}),
}


def _stored(entry: dict) -> bytes:
    return gzip.compress(json.dumps({"0": entry}).encode())


def test_stored_symbols_decode_to_the_structure_and_every_type_damage_is_refused():
    decoded = json_from(_stored(STORED), SYMBOLS_SCHEMA)["0"]
    assert decoded.d == GOOD[0].definitions and decoded.i == GOOD[0].imports
    assert CallSites(*decoded.c) == GOOD[0].calls
    assert CallSites(*json_from(_stored({"c": []}), SYMBOLS_SCHEMA)["0"].c) == CallSites()  # no call site
    for damage, change in STORED_DAMAGED.items():
        entry = copy.deepcopy(STORED)
        change(entry)
        with pytest.raises(ValueError):
            json_from(_stored(entry), SYMBOLS_SCHEMA)
            pytest.fail(damage)
    # not an object of members; a file's member a list; a field the schema ignores nested past any depth
    for whole in (b"[1, 2]", b'{"0": []}', b'{"0": {"c": [], "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}"):
        with pytest.raises(ValueError):
            json_from(gzip.compress(whole), SYMBOLS_SCHEMA)


# Rows (file, node, target file, target node, hops): a.py has 6 nodes, b.py 3.
EDGES = {0: np.array([[0, 2, 1, 2, 0], [0, 3, 0, 1, 1]], dtype=np.int32), 1: np.zeros((0, 5), dtype=np.int32)}


@pytest.mark.parametrize("damage, calls", [
    ("filed under another file", {0: EDGES[0], 1: np.array([[0, 1, 0, 1, 0]], dtype=np.int32)}),
    ("a target file past the files", {0: np.array([[0, 2, 2, 0, 0]], dtype=np.int32)}),
    ("negative hops", {0: np.array([[0, 2, 1, 2, -1]], dtype=np.int32)}),
    ("a node past its file's", {0: np.array([[0, 6, 1, 2, 0]], dtype=np.int32)}),
    ("a target node past its file's", {0: np.array([[0, 2, 1, 3, 0]], dtype=np.int32)}),
    ("a negative node", {0: np.array([[0, -1, 1, 2, 0]], dtype=np.int32)}),
    ("floats", {0: EDGES[0].astype(np.float64)}),
    ("four columns", {0: EDGES[0][:, :4]}),
    ("past int64 as unsigned", {0: np.array([[0, 2**64 - 1, 1, 2, 0]], dtype=np.uint64)}),
])
def test_call_edges_are_checked_together(damage, calls):
    check_structure(_index(EDGES))
    with pytest.raises(IndexDamage):
        check_structure(_index(calls))
