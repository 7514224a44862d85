"""The prompt-lever seam (repomem/completion/levers/): the strategy table names each strategy's
levers, the engine runs them through PromptLever's hooks and names none, and a new lever is one
module plus one line."""

from __future__ import annotations

import ast
import dataclasses
import re
import shutil
from pathlib import Path

import pytest

from repomem.completion import engine as engine_module
from repomem.completion.engine import CompletionEngine
from repomem.completion.levers import LEVERS, order_problems
from repomem.completion.levers.base import Pins, PromptLever
from repomem.completion.warm_prefix import FunctionMemory
from repomem.config import Config, with_overrides
from repomem.positions import locate
from repomem.retrieval.scoring import ScoredFragment
from repomem.service import RepoService
from repomem.strategies import STRATEGY_TABLE, strategy_named
from tests.unit.test_scope_imports import EXAMPLE, Words, long_report

ROOT = Path(__file__).resolve().parents[2]
LEVER_SETTINGS = ("anchor_matches", "definition_blocks", "clone_search", "clone_position", "continuation_",
                  "pack_blocks", "pack_max_lines", "scope_imports", "scope_signature", "draft_signature",
                  "round_choice", "shared_callee", "imported_usage", "file_only_round")


def test_every_listed_lever_exists_and_runs_after_what_it_declares():
    assert all(lever.name == name and issubclass(lever, PromptLever) for name, lever in LEVERS.items())
    for strategy in STRATEGY_TABLE:
        assert len(set(strategy.levers)) == len(strategy.levers), strategy.name
    assert order_problems(LEVERS, STRATEGY_TABLE) == []
    # The signatures sign what names in scope pin: declared by the lever, not known to the table.
    assert LEVERS["scope-signatures"].after == ("names-in-scope",)
    swapped = dataclasses.replace(strategy_named("fragrel"), levers=("scope-signatures", "names-in-scope"))
    assert order_problems(LEVERS, (swapped,)) == [
        "strategy 'fragrel' runs 'scope-signatures' before 'names-in-scope', which it must run after"]
    unknown = dataclasses.replace(swapped, levers=("no-such-lever",))
    assert order_problems(LEVERS, (unknown,)) == ["strategy 'fragrel' lists an unknown prompt lever 'no-such-lever'"]
    # RepoCoder's and the paper's prompts stay exact: none of repomem's own ranking or pinning levers.
    for name in ("vanilla", "repocoder", "fragrel-paper"):
        assert set(strategy_named(name).levers) <= {"definition-blocks", "packing"}, name


def test_the_engine_names_no_lever_nor_a_lever_setting():
    source = (ROOT / "repomem" / "completion" / "engine.py").read_text(encoding="utf-8")
    code = ast.unparse(ast.parse(source))  # comments and docstrings' wording do not count...
    code = re.sub(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'', "", code)  # ...nor docstrings
    for name in LEVERS:
        assert name not in code, name
    for cls in LEVERS.values():
        assert cls.__name__ not in code, cls.__name__
    for setting in LEVER_SETTINGS:
        assert setting not in code, setting
    for module in ("continuation", "packing", "signatures", "scope"):
        assert not re.search(rf"\bfrom repomem\.\w+(\.\w+)*\.{module} import", code), module


def test_function_memory_keeps_the_least_recently_used_order_and_drops_slots_with_the_function():
    memory = FunctionMemory(2)
    fragment = ScoredFragment(3, "a.py", 0, 20, 0.0, 0.0, 1.0)
    memory.remember_fragments(("a.py", 1), [fragment])
    memory.remember_fragments(("b.py", 1), [fragment])
    memory.set("first-line", ("a.py", 1), 7)
    memory.set("first-line", ("c.py", 1), 9)  # a function with no fragments remembered (none found)
    assert memory.fragments(("a.py", 1), lambda remembered: None) is None  # stale: not returned, not touched
    memory.remember_fragments(("d.py", 1), [fragment])  # drops a.py (stale, so still the oldest)
    assert memory.fragments(("a.py", 1), lambda remembered: remembered) is None
    assert memory.get("first-line", ("a.py", 1)) is None
    assert memory.get("first-line", ("c.py", 1)) == 9
    moved = ScoredFragment(8, "a.py", 0, 20, 0.0, 0.0, 1.0)  # the same window under a new id (its file edited)
    assert memory.fragments(("b.py", 1), lambda remembered: [moved]) == [moved]  # touched: d.py is oldest now
    assert memory.fragments(("b.py", 1), lambda remembered: remembered) == [moved]  # kept as renewed
    memory.remember_fragments(("e.py", 1), [fragment])
    assert memory.fragments(("b.py", 1), lambda remembered: remembered) is not None
    assert memory.fragments(("d.py", 1), lambda remembered: remembered) is None


def test_pins_make_one_block_with_each_line_once_and_signatures_only_beside_imports():
    lines = ["import os", "from .cart import Cart", "x = 1"]
    assert Pins().block("a.py", lines) is None
    block = Pins([(1, 2)], ["class Cart(): ...", "def f(a): ..."], ["def f(a): ..."]).block("a.py", lines)
    assert block.text == "from .cart import Cart\nclass Cart(): ...\ndef f(a): ..."
    assert (block.fragment, block.start_line, block.end_line, block.summary) == (-1, 1, 2, True)
    alone = Pins([], ["class Cart(): ..."], ["def f(a): ..."]).block("a.py", lines)
    assert alone.text == "def f(a): ..."  # a signature of no shown import is not pinned


class Reminder(PromptLever):
    """A lever written the way the README's how-to says: pin one line, add one candidate."""

    name = "reminder"

    def pin(self, pins: Pins) -> None:
        pins.lines.append("# remember: amounts are in cents")

    def candidates(self, fragments: list[ScoredFragment]) -> list[ScoredFragment]:
        found = self.round.retrieve("def compute_tax(amount_cents, tax_class)")
        have = {f.fragment for f in fragments}
        return [*fragments, *(f for f in found[:1] if f.fragment not in have)]


def test_a_new_lever_is_one_class_and_one_line_in_the_table(tmp_path, monkeypatch):
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    config = with_overrides(service.config, completion={"max_prompt_tokens": 400, "fill_in_middle": False})
    engine = CompletionEngine(service, Words(), config)
    plain = engine.prepare(engine.request(cursor, "vanilla", order="score"))
    assert "remember: amounts" not in plain.prompt.text

    monkeypatch.setitem(LEVERS, Reminder.name, Reminder)
    vanilla = strategy_named("vanilla")
    with_reminder = dataclasses.replace(vanilla, levers=(*vanilla.levers, Reminder.name))
    monkeypatch.setattr(engine_module, "strategy_named", lambda name: with_reminder if name == "vanilla" else None)
    engine = CompletionEngine(service, Words(), config)
    prepared = engine.prepare(engine.request(cursor, "vanilla", order="score"))
    assert prepared.prompt.blocks[0].fragment == -1  # pinned above the blocks
    assert "# remember: amounts are in cents" in prepared.prompt.blocks[0].text
    added = [f for f in prepared.fragments if f.fragment not in {g.fragment for g in plain.fragments}]
    assert len(prepared.fragments) == len(plain.fragments) + len(added) and len(added) <= 1


class ImportedDefinition(PromptLever):
    """A graph lever as a new one is written: one module, reading the code graph through the
    round's view (imports resolved to definitions, the window holding a line), never the service."""

    name = "imported-definition"

    def candidates(self, fragments: list[ScoredFragment]) -> list[ScoredFragment]:
        view = self.round.view
        resolved = view.symbols.resolved_file(self.round.request.cursor.path)
        file_id, syntax, resolution = resolved
        for binding in syntax.imports:
            target = resolution.resolve_name(file_id, binding.local)
            if target is None or target[0] == file_id:
                continue
            target_syntax = view.symbols.syntax(target[0])
            window = view.symbols.window_holding(target[0], int(target_syntax.start_line[target[1].node]))
            path = view.symbols.record(target[0]).path
            found = ScoredFragment(window, path, 0, 0, 0.0, 0.0, 1.0)
            return [found, *(f for f in fragments if f.fragment != window)]
        return fragments


def test_a_new_graph_lever_is_one_module_reading_the_view_and_one_line_in_the_table(tmp_path, monkeypatch):
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    config = with_overrides(service.config, completion={"max_prompt_tokens": 400, "fill_in_middle": False})
    monkeypatch.setitem(LEVERS, ImportedDefinition.name, ImportedDefinition)
    vanilla = strategy_named("vanilla")
    with_lever = dataclasses.replace(vanilla, levers=(ImportedDefinition.name, *vanilla.levers))
    monkeypatch.setattr(engine_module, "strategy_named", lambda name: with_lever if name == "vanilla" else None)
    engine = CompletionEngine(service, Words(), config)
    prepared = engine.prepare(engine.request(cursor, "vanilla", order="score"))
    first = prepared.fragments[0]
    # report.py's first import of repository code is `from .cart import Cart`: the window holding `class Cart`.
    assert first.path == "shop/cart.py"
    window_text = service.view().span_text("shop/cart.py", 0, 1 << 30).split("\n")
    start = next(number for number, line in enumerate(window_text) if line.startswith("class Cart"))
    symbols = service.view().symbols
    assert symbols.window_holding(symbols.file_id("shop/cart.py"), start) == first.fragment
    # The view reads and never writes: its arrays refuse a write.
    rows = symbols.all_calls()
    with pytest.raises(ValueError):
        rows[:1] = 0


@pytest.mark.parametrize("lever", sorted(LEVERS))
def test_each_lever_can_be_switched_off_by_leaving_it_out_of_the_table(tmp_path, monkeypatch, lever):
    """Every lever's hooks are optional for the engine: fragrel without any one of them still
    builds a prompt within the budget."""
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    config = with_overrides(service.config, completion={"max_prompt_tokens": 300, "fill_in_middle": False},
                            prompt={"scope_signatures": 2, "definition_blocks": 2})
    fragrel = strategy_named("fragrel")
    without = dataclasses.replace(fragrel, levers=tuple(n for n in fragrel.levers if n != lever))
    monkeypatch.setattr(engine_module, "strategy_named", lambda name: without)
    engine = CompletionEngine(service, Words(), config)
    prepared = engine.prepare(engine.request(cursor, "fragrel", order="stable"))
    assert prepared.prompt.n_tokens <= 300
    pinned = any(block.fragment == -1 for block in prepared.prompt.blocks)
    assert pinned == (lever != "names-in-scope")  # only names in scope pins the hidden imports here


class QwenWords(Words):
    """Words with Qwen2.5-Coder's template, whose family has the repository form."""

    def __init__(self):
        from repomem.backends.templates import QWEN

        self.template = QWEN


def test_repomems_strategies_write_the_repository_form_and_the_published_baselines_repocoders(tmp_path):
    root = tmp_path / "shop"
    shutil.copytree(EXAMPLE, root)
    service = RepoService.open(root, Config())
    assert isinstance(service, RepoService) and not hasattr(service.ensure_index(), "kind")
    text = (root / "shop" / "report.py").read_text(encoding="utf-8")
    cursor = locate(service.root, "shop/report.py", text, 9, None)  # `return `, as the README's example
    published = {s.name for s in STRATEGY_TABLE if s.published_prompt}
    assert published == {"vanilla", "dense", "fragrel-paper", "repocoder"}
    for style in ("repo", "comments"):
        config = with_overrides(service.config, completion={"style": style, "max_prompt_tokens": 1500})
        engine = CompletionEngine(service, QwenWords(), config)
        for name in ("fragrel", "infile", "vanilla", "fragrel-paper", "repocoder"):
            prepared = engine.prepare(engine.request(cursor, name, order="score")).prompt
            prompt, shown = prepared.text, [b for b in prepared.blocks if b.fragment >= 0]
            repo_form = style == "repo" and name not in published
            assert prompt.startswith("<|repo_name|>shop\n") == repo_form, (style, name, prompt[:80])
            assert ("<|file_sep|>shop/report.py\n" in prompt) == repo_form, (style, name)
            assert name == "infile" or shown, (style, name)
            assert ("# the below code fragment can be found in:" in prompt) == (bool(shown) and not repo_form)
            assert all((f"<|file_sep|>{b.path}\n" in prompt) == repo_form for b in shown), (style, name)
