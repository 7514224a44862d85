"""The manifest's file records by column (repomem/index/snapshot_manifest.py) and their check in one
pass (integrity.check_file_columns), against the one-path-at-a-time check it replaced."""

from __future__ import annotations

import pytest

from repomem.index.indexed_files import FileRecord
from repomem.index.integrity import IndexDamage, check_relative_path
from repomem.index.snapshot_manifest import file_columns, file_records, packed_integers

PATHS = ["a.py", "pkg/mod.py", ".hidden/x.py", "a..b/c.py", "...", "x/.../y.py", "back\\slash.py", " sp ace.py",
         "/etc/passwd", "../up.py", "pkg/../x.py", "./a.py", "pkg/./a.py", "pkg//a.py", "pkg/", "pkg/..", ".", "..",
         "é/ü.py", "tab\tname.py"]


def _record(path: str, first: int = 0, count: int = 1) -> FileRecord:
    return FileRecord(path, "python", "0" * 32, 10, 123, first, count)


@pytest.mark.parametrize("path", PATHS)
def test_a_path_is_refused_exactly_when_the_path_check_refuses_it(path: str):
    try:
        check_relative_path(path)
        expected_ok = path != "."  # the one path the column check refuses more: the repository itself
    except IndexDamage:
        expected_ok = False
    records = [_record("first.py", 0), None, _record(path, 1), _record("last.py", 2)]
    columns = file_columns(records)
    if expected_ok:
        assert file_records(columns, 3) == records
    else:
        with pytest.raises(IndexDamage):
            file_records(columns, 3)


def test_counts_ranges_duplicates_and_flags_are_checked():
    good = [_record("a.py", 0, 2), None, _record("b.py", 2, 1)]
    assert file_records(file_columns(good), 3) == good
    with pytest.raises(IndexDamage, match="past the end"):
        file_records(file_columns(good), 2)
    with pytest.raises(IndexDamage, match="twice"):
        file_records(file_columns([_record("a.py"), _record("a.py")]), 3)
    with pytest.raises(IndexDamage, match="not a count"):
        file_records(file_columns([FileRecord("a.py", "python", "0", -1, 1, 0, 1)]), 3)
    flags = file_columns(good)
    flags["over_node_limit"] = packed_integers([0, 0, 2])
    with pytest.raises(IndexDamage, match="flag"):
        file_records(flags, 3)


def test_columns_of_another_shape_are_refused():
    columns = file_columns([_record("a.py")])
    with pytest.raises(ValueError):
        file_records({**columns, "size": columns["size"][:4]}, 1)
    with pytest.raises(ValueError):
        file_records({**columns, "count": 2}, 1)
    with pytest.raises(ValueError):
        file_records({k: v for k, v in columns.items() if k != "digest"}, 1)


def test_an_empty_index_has_empty_columns():
    assert file_records(file_columns([]), 0) == []
