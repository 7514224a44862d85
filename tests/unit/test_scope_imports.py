"""Names in scope (retrieval.scope_imports): the current file's imports of repository code, shown
above the retrieved blocks once the left context no longer shows them."""

from __future__ import annotations

import shutil
from pathlib import Path

from repomem.completion.engine import CompletionEngine
from repomem.config import Config, with_overrides
from repomem.positions import locate
from repomem.retrieval.scope import import_statements, repository_imports
from repomem.service import RepoService

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "shop"


def test_import_statements_follow_brackets_and_backslashes():
    lines = ["import os", "from .cart import (", "    Cart,", "    Item,", ")", "x = 1",
             "from .pricing import compute_tax, \\", "    TAX_RATES", "    import indented", "def f():",
             "import late"]
    assert import_statements(lines, ("import ", "from "), 10) == [(0, 1), (1, 5), (6, 8)]
    assert import_statements(lines, ("import ", "from "), 11) == [(0, 1), (1, 5), (6, 8), (10, 11)]
    assert import_statements(lines, ("import ",), 3) == [(0, 1)]


class Words:
    """A whitespace tokenizer standing in for the model: these tests build prompts, never generate."""

    name, context_tokens = "words", 4096

    def __init__(self):
        from repomem.backends.templates import PLAIN

        self.template = PLAIN

    def count(self, text: str) -> int:
        return len(text.split()) + text.count("\n")


def long_report(tmp_path: Path) -> tuple[RepoService, str, int]:
    """The example shop, with report.py grown so that its imports fall out of a small prompt."""
    root = tmp_path / "shop"
    shutil.copytree(EXAMPLE, root)
    report = root / "shop" / "report.py"
    head = ["import json", "from .cart import Cart", "from .pricing import compute_tax", ""]
    body = [f"def helper_{i}(value):\n    return value + {i}\n" for i in range(40)]
    text = "\n".join(head + body + ["def tax_for_order(amount_cents, tax_class):", "    return "])
    report.write_text(text)
    service = RepoService.open(root, Config())
    assert isinstance(service, RepoService) and not hasattr(service.ensure_index(), "kind")
    return service, text, text.count("\n") + 1


def test_only_imports_of_repository_code_are_kept(tmp_path):
    service, text, n_lines = long_report(tmp_path)
    spans = repository_imports(service.index, "shop/report.py", text.split("\n"), ("import ", "from "),
                               n_lines - 1, 12)
    assert spans == [(1, 2), (2, 3)]  # `import json` binds no code of the repository
    assert repository_imports(service.index, "shop/report.py", text.split("\n"), ("import ", "from "),
                              n_lines - 1, 1) == [(2, 3)]  # the cap keeps the last statements


def test_the_prompt_shows_hidden_imports_above_the_blocks_and_not_visible_ones(tmp_path):
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    for scope, expect in ((0, False), (12, True)):
        config = with_overrides(service.config, retrieval={"scope_imports": scope},
                                completion={"max_prompt_tokens": 300, "fill_in_middle": False})
        engine = CompletionEngine(service, Words(), config)
        prepared = engine.prepare(engine.request(cursor, "fragrel", order="score"))
        prompt = prepared.prompt
        assert prompt.left_first_line > 3 and prompt.n_tokens <= 300  # the imports are cut from the left
        shows = "from .pricing import compute_tax" in prompt.text
        assert shows == expect
        if expect:
            first = prompt.blocks[0]
            assert first.path == "shop/report.py" and first.fragment == -1
            assert prompt.text.index("from .pricing import compute_tax") < prompt.text.index("def helper_")
            assert "import json" not in prompt.text
    # A roomy prompt shows the imports in the left context itself: no block repeats them.
    config = with_overrides(service.config, retrieval={"scope_imports": 12},
                            completion={"max_prompt_tokens": 4000, "fill_in_middle": False})
    engine = CompletionEngine(service, Words(), config)
    prompt = engine.prepare(engine.request(cursor, "fragrel", order="score")).prompt
    assert prompt.left_first_line == 0 and prompt.text.count("from .pricing import compute_tax") == 1


def test_repocoder_and_paper_prompts_never_show_the_imports(tmp_path):
    """vanilla, repocoder and fragrel-paper are the published prompts exactly, whatever the setting."""
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    config = with_overrides(service.config, retrieval={"scope_imports": 12},
                            completion={"max_prompt_tokens": 300, "fill_in_middle": False})
    engine = CompletionEngine(service, Words(), config)
    for strategy in ("vanilla", "fragrel-paper", "repocoder"):
        prompt = engine.prepare(engine.request(cursor, strategy, order="score")).prompt
        assert prompt.left_first_line > 3
        assert "from .pricing import compute_tax" not in prompt.text
        assert all(block.fragment != -1 for block in prompt.blocks)
