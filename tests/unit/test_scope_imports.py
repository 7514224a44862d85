"""Names in scope (prompt.scope_imports): the current file's imports of repository code, shown
above the retrieved blocks once the left context no longer shows them."""

from __future__ import annotations

import shutil
from pathlib import Path

from repomem.completion.engine import CompletionEngine
from repomem.completion.levers.names_in_scope import import_statements, repository_imports
from repomem.completion.levers.signature_lines import definition_signature, parameter_list
from repomem.config import Config, with_overrides
from repomem.positions import locate
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
    spans = repository_imports(service.view().symbols, "shop/report.py", text.split("\n"), ("import ", "from "),
                               n_lines - 1, 12)
    assert spans == [(1, 2), (2, 3)]  # `import json` binds no code of the repository
    assert repository_imports(service.view().symbols, "shop/report.py", text.split("\n"), ("import ", "from "),
                              n_lines - 1, 1) == [(2, 3)]  # the cap keeps the last statements


def test_the_prompt_shows_hidden_imports_above_the_blocks_and_not_visible_ones(tmp_path):
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    for scope, expect in ((0, False), (12, True)):
        config = with_overrides(service.config, prompt={"scope_imports": scope},
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
    config = with_overrides(service.config, prompt={"scope_imports": 12},
                            completion={"max_prompt_tokens": 4000, "fill_in_middle": False})
    engine = CompletionEngine(service, Words(), config)
    prompt = engine.prepare(engine.request(cursor, "fragrel", order="score")).prompt
    assert prompt.left_first_line == 0 and prompt.text.count("from .pricing import compute_tax") == 1


def test_repocoder_and_paper_prompts_never_show_the_imports(tmp_path):
    """vanilla, repocoder and fragrel-paper are the published prompts exactly, whatever the setting."""
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    config = with_overrides(service.config, prompt={"scope_imports": 12},
                            completion={"max_prompt_tokens": 300, "fill_in_middle": False})
    engine = CompletionEngine(service, Words(), config)
    for strategy in ("vanilla", "fragrel-paper", "repocoder"):
        prompt = engine.prepare(engine.request(cursor, strategy, order="score")).prompt
        assert prompt.left_first_line > 3
        assert "from .pricing import compute_tax" not in prompt.text
        assert all(block.fragment != -1 for block in prompt.blocks)


# -- signatures of what the imports bind (prompt.scope_signatures) ----------------------------

def test_parameter_list_drops_annotations_and_self_and_keeps_defaults():
    header = ('def reduce(\n    self,\n    stat: Literal["precision", "recall"],  # which one\n'
              '    weights: Optional[Dict[str, Tuple[int, int]]] = None,\n    *args,\n'
              '    sep: str = ", ",\n    **kwargs: Any,\n) -> Tensor:')
    assert parameter_list(header) == 'stat, weights=None, *args, sep=", ", **kwargs'
    assert parameter_list("def f():") == ""
    assert parameter_list("def f(a, b") is None  # an unfinished header


def test_definition_signature_of_a_function_a_class_and_a_class_without_init():
    lines = ["class Cart(Base):", '    """Doc."""', "    x = 1", "    def __init__(self, catalog: Catalog,",
             "                 discount_percent: float = 0.0):", "        self.catalog = catalog",
             "class Empty:", "    pass", "def f(a: int = 1) -> int:", "    return a"]
    assert definition_signature(lines, "class", "Cart", 0, 5) == "class Cart(catalog, discount_percent=0.0): ..."
    assert definition_signature(lines, "class", "Empty", 6, 7) == "class Empty: ..."
    assert definition_signature(lines, "function", "f", 8, 9) == "def f(a=1): ..."


def test_the_prompt_shows_signatures_of_hidden_imports_the_visible_code_does_not_use(tmp_path):
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)

    def prompt_with(signatures: int, chars: int = 120):
        config = with_overrides(service.config, prompt={"scope_imports": 12, "scope_signatures": signatures,
                                                           "scope_signature_chars": chars},
                                completion={"max_prompt_tokens": 300, "fill_in_middle": False})
        engine = CompletionEngine(service, Words(), config)
        return engine.prepare(engine.request(cursor, "fragrel", order="score")).prompt

    assert "def compute_tax(" not in prompt_with(0).text
    prompt = prompt_with(4)
    header = prompt.blocks[0]
    assert header.fragment == -1
    # Both imports are hidden and unused by the visible code: both signatures, annotations dropped.
    assert "def compute_tax(amount_cents, tax_class): ..." in header.text
    assert "class Cart(catalog, discount_percent=0.0): ..." in header.text
    assert prompt.n_tokens <= 300
    assert "def compute_tax(amount_cents, ...): ..." in prompt_with(4, chars=40).blocks[0].text
    assert len([line for line in prompt_with(1).blocks[0].text.split("\n") if line.endswith(": ...")]) == 1


def test_no_signature_for_a_name_the_visible_code_already_uses(tmp_path):
    service, text, n_lines = long_report(tmp_path)
    text = text.replace("    return ", "    total = compute_tax(amount_cents, tax_class)\n    return ")
    (service.root / "shop" / "report.py").write_text(text)
    service.ensure_index()
    cursor = locate(service.root, "shop/report.py", text, text.count("\n") + 1, None)
    config = with_overrides(service.config, prompt={"scope_imports": 12, "scope_signatures": 4},
                            completion={"max_prompt_tokens": 300, "fill_in_middle": False})
    engine = CompletionEngine(service, Words(), config)
    header = engine.prepare(engine.request(cursor, "fragrel", order="score")).prompt.blocks[0]
    assert "from .pricing import compute_tax" in header.text
    assert "def compute_tax(" not in header.text and "class Cart(" in header.text


def test_a_secret_in_a_signature_default_is_masked(tmp_path):
    service, text, n_lines = long_report(tmp_path)
    pricing = service.root / "shop" / "pricing.py"
    key = "AKIA" + "ABCDEFGHIJKLMNOP"  # an AWS access key id shape, split so no scanner flags this file
    pricing.write_text(pricing.read_text().replace("def compute_tax(amount_cents: int, tax_class: str)",
                                                   f'def compute_tax(amount_cents: int, tax_class: str, key="{key}")'))
    service.ensure_index()
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    config = with_overrides(service.config, prompt={"scope_imports": 12, "scope_signatures": 4},
                            completion={"max_prompt_tokens": 300, "fill_in_middle": False})
    engine = CompletionEngine(service, Words(), config)
    header = engine.prepare(engine.request(cursor, "fragrel", order="score")).prompt.blocks[0]
    assert "def compute_tax(amount_cents, tax_class, key=" in header.text
    assert key not in header.text


# -- a second generation guided by the draft's call (prompt.draft_signature) ------------------

class Scripted(Words):
    """Answers with the next scripted text and keeps every prompt (the engine's logic is what is
    tested; the embedded model runs this path in tests/e2e)."""

    def __init__(self, answers: list[str]):
        super().__init__()
        self.answers, self.prompts = list(answers), []

    def generate(self, request):
        from repomem.backends.base import Generation

        self.prompts.append(request.prompt)
        return Generation(self.answers.pop(0), self.count(request.prompt), 3, 0, "stop", 0.01)


def draft_engine(service, answers, on=True, tokens=300):
    config = with_overrides(service.config, prompt={"scope_imports": 12, "draft_signature": on},
                            completion={"max_prompt_tokens": tokens, "fill_in_middle": False})
    backend = Scripted(answers)
    return CompletionEngine(service, backend, config), backend


def test_a_draft_calling_an_imported_function_is_regenerated_with_its_signature(tmp_path):
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    engine, backend = draft_engine(service, ["compute_tax(amount)\n", "compute_tax(amount_cents, tax_class)\n"])
    result = engine.complete(cursor, "fragrel", order="score")
    assert len(backend.prompts) == 2
    assert "compute_tax(amount_cents, tax_class): ..." not in backend.prompts[0]
    assert "def compute_tax(amount_cents, tax_class): ..." in backend.prompts[1]
    assert result.drafts == ("compute_tax(amount)\n",) and result.text.startswith("compute_tax(amount_cents")
    assert result.rounds == 2
    # A class's signature is its __init__'s parameters; the second round shows the first round's
    # blocks (here remembered for the function by --order stable, not retrieved again).
    engine, backend = draft_engine(service, ["Cart(catalog)\n", "Cart(catalog, 10)\n"])
    result = engine.complete(cursor, "fragrel", order="stable")
    assert "class Cart(catalog, discount_percent=0.0): ..." in backend.prompts[1]
    first_blocks = [block for block in engine.prepare(engine.request(cursor, "fragrel", order="stable")).prompt.blocks
                    if block.fragment >= 0]
    assert first_blocks and [b.fragment for b in result.prompt.blocks if b.fragment >= 0] == \
        [b.fragment for b in first_blocks]


def test_no_second_generation_without_a_resolvable_call_or_when_off_or_for_published_prompts(tmp_path):
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    for answers, strategy, on in ((["helper_3(amount)\n"], "fragrel", True),  # defined in this file
                                  (["json.dumps(amount)\n"], "fragrel", True),  # not repository code
                                  (["self.compute_tax(amount)\n"], "fragrel", True),  # a method
                                  (["compute_tax(amount)\n"], "fragrel", False),  # off
                                  (["compute_tax(amount)\n"], "vanilla", True)):  # RepoCoder's prompt
        engine, backend = draft_engine(service, answers, on)
        result = engine.complete(cursor, strategy, order="score")
        assert len(backend.prompts) == 1 and result.drafts == (), (answers, strategy, on)


def test_no_second_generation_for_a_callee_without_parameters(tmp_path):
    service, text, n_lines = long_report(tmp_path)
    (service.root / "shop" / "pricing.py").write_text(
        (service.root / "shop" / "pricing.py").read_text() + "\n\ndef rates_loaded():\n    return True\n")
    report = service.root / "shop" / "report.py"
    report.write_text(text.replace("import compute_tax", "import compute_tax, rates_loaded"))
    service.ensure_index()
    text = report.read_text()
    cursor = locate(service.root, "shop/report.py", text, text.count("\n") + 1, None)
    engine, backend = draft_engine(service, ["rates_loaded()\n"])
    assert engine.complete(cursor, "fragrel", order="score").drafts == () and len(backend.prompts) == 1


def test_no_second_generation_when_the_prompt_shows_the_definition(tmp_path):
    service, text, n_lines = long_report(tmp_path)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    # A roomy prompt: the retrieved blocks include pricing.py's `def compute_tax`.
    engine, backend = draft_engine(service, ["compute_tax(amount)\n"], tokens=4000)
    engine.complete(cursor, "fragrel", order="score")
    assert "def compute_tax(" in backend.prompts[0] and len(backend.prompts) == 1


def test_javascript_requires_and_re_exports_and_rust_pub_use_are_imports_too(tmp_path):
    """CommonJS (`const { a } = require("./b")`) and Rust's `pub use` bind names as imports do; a
    `const` that requires nothing, or requires no module of the repository, is no import, and a
    re-export (`export { a } from "./b"`) brings no name into the file's scope."""
    from tests.repos import write_repo

    helpers = "".join(f"function helper{i}(value) {{\n  return value + {i};\n}}\n" for i in range(3))
    report = ("const { computeTax } = require('../lib/pricing');\nconst LIMIT = computeTax(5, 'std');\n"
              "export { formatCents } from '../lib/format';\nconst fs = require('fs');\n" + helpers
              + "function taxFor(amount) {\n  return \n}\n")
    root = write_repo(tmp_path / "js", {
        "lib/pricing.js": "function computeTax(amount, taxClass) {\n  return amount;\n}\n"
                          "module.exports = { computeTax };\n",
        "lib/format.js": "export function formatCents(cents) {\n  return String(cents);\n}\n",
        "app/report.js": report})
    service = RepoService.open(root, Config())
    assert isinstance(service, RepoService) and not hasattr(service.ensure_index(), "kind")
    lines = report.split("\n")
    from repomem.languages.javascript import IMPORT_PREFIXES

    spans = repository_imports(service.view().symbols, "app/report.js", lines, IMPORT_PREFIXES, len(lines) - 2, 12)
    assert [lines[start] for start, _ in spans] == [lines[0]]  # not LIMIT's const, not node's fs

    rust_lines = ["pub use crate::pricing::compute_tax;", "use std::fmt;", "pub(crate) use crate::cart::Cart;",
                  "fn f() {}"]
    assert import_statements(rust_lines, ("use ", "pub use ", "pub(crate) use "), 3, "//") == [(0, 1), (1, 2), (2, 3)]
