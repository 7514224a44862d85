"""docs/design.md's layer table describes the code as it is: every package under repomem/ is named
in it, in the layer tests/unit/test_layout.py's LAYERS gives its group."""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit.test_layout import LAYERS, group_of

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"`(repomem(?:\.[\w]+)*)`")


def layer_table() -> dict[str, int]:
    """Each dotted name in a row of section 1's table -> the row's layer."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    section = text.split("## 1.", 1)[1].split("\n## ", 1)[0]
    names: dict[str, int] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            for name in NAME.findall(cells[1]):
                names[name] = int(cells[0])
    return names


def engine_packages() -> set[str]:
    return {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "repomem").rglob("__init__.py")} - {
        "repomem"}


def test_every_package_under_repomem_is_in_the_layer_table():
    table = layer_table()
    missing = sorted(engine_packages() - set(table))
    assert not missing, f"add these packages to docs/design.md's layer table: {missing}"


def test_every_group_of_the_layout_test_is_in_the_layer_table():
    table = layer_table()
    missing = sorted({prefix for prefixes in LAYERS for prefix in prefixes} - set(table))
    assert not missing, f"add these to docs/design.md's layer table: {missing}"


def test_the_tables_layers_are_the_layout_tests():
    wrong = [f"{name}: table {layer}, tests/unit/test_layout.py {group_of(name)[0]}"
             for name, layer in layer_table().items() if group_of(name)[0] != layer]
    assert not wrong, "\n".join(wrong)
