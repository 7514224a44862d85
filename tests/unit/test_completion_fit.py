"""The engine's fit of a prompt around real retrieval (the example shop, a scripted model): blocks
of the cursor's own file, the function memory of order "stable", and a second opinion's round."""

from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path

from repomem.backends.base import Generation
from repomem.backends.templates import QWEN
from repomem.completion.engine import CompletionEngine
from repomem.config import Config, with_overrides
from repomem.positions import locate
from repomem.service import RepoService
from tests.unit.test_scope_imports import EXAMPLE

TOKENS = re.compile(r"\w+|[^\w\s]|\s+")


class Scripted:
    """Qwen's template, a token per word, symbol and blank run, one fixed answer with a confidence;
    the prompts it was sent are kept."""

    name, context_tokens = "scripted", 32768

    def __init__(self, answer: str):
        self.template, self.answer, self.prompts = QWEN, answer, []

    def count(self, text: str) -> int:
        return len(TOKENS.findall(text))

    def generate(self, request) -> Generation:
        self.prompts.append(request.prompt)
        return Generation(self.answer, self.count(request.prompt), 3, 0, "stop", 0.01, -0.1)


def shop_with(tmp_path: Path, files: dict[str, str]) -> RepoService:
    root = tmp_path / "shop"
    shutil.copytree(EXAMPLE, root)
    for relative, text in files.items():
        (root / relative).write_text(text)
    service = RepoService.open(root, Config())
    assert isinstance(service, RepoService) and not hasattr(service.ensure_index(), "kind")
    return service


def helpers(count: int) -> list[str]:
    return [f"def helper_{i}(value):\n    return value + {i}\n" for i in range(count)]


def test_packed_blocks_of_the_cursors_file_settle_instead_of_spinning(tmp_path):
    """Blocks that repeat what the prompt shows of the cursor's file are dropped and the fit done
    again; packing makes new blocks, which matched no candidate, so the fit never ended."""
    text = "\n".join(helpers(15)) + "\ndef helper_15(value):\n    return "
    service = shop_with(tmp_path, {"shop/helpers.py": text})
    config = with_overrides(service.config, prompt={"pack_blocks": True})
    engine = CompletionEngine(service, Scripted("value + 15\n"), config)
    cursor = locate(service.root, "shop/helpers.py", text, text.count("\n") + 1, None)
    answers: list = []
    worker = threading.Thread(target=lambda: answers.append(engine.complete(cursor, "fragrel")), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "the fit did not settle"
    (answer,) = answers
    assert answer.text == "value + 15"
    shown = (answer.prompt.left_first_line, cursor.line)
    assert not any(b.path == "shop/helpers.py" and b.start_line <= shown[1] and b.end_line > shown[0]
                   for b in answer.prompt.blocks)


def test_a_block_of_the_cursors_file_below_what_the_suffix_shows_stays(tmp_path):
    """With fill-in-the-middle, every line after the cursor counted as shown, though the prompt
    keeps only max_suffix_tokens of them: the best block, a near clone far below, was dropped."""
    head = ["from .pricing import compute_tax", "", "def apply_discount_thrice(order_total_cents, discount_code):",
            "    rate = DISCOUNT_TABLE.lookup_discount_rate(discount_code)", "    ", ""]
    tail = ["def apply_discount_twice(order_total_cents, discount_code):",
            "    rate = DISCOUNT_TABLE.lookup_discount_rate(discount_code)",
            "    once = round_cents(order_total_cents * (1 - rate))",
            "    return round_cents(once * (1 - rate))", ""]
    text = "\n".join(head + helpers(30) + tail)
    service = shop_with(tmp_path, {"shop/discounts.py": text})
    engine = CompletionEngine(service, Scripted("x\n"), service.config)
    answer = engine.complete(locate(service.root, "shop/discounts.py", text, 5, None), "fragrel")
    assert answer.prompt.fim and answer.prompt.suffix_lines < text.count("\n") - 5
    assert "apply_discount_twice" in answer.prompt.text


def test_a_second_opinion_leaves_the_functions_prompt_where_it_was(tmp_path):
    """The file-only round's prompt starts far higher; remembered as the function's start, it moved
    the next main prompt, so the same completion asked again sent another prompt."""
    head = ["import json", "from .cart import Cart", "from .pricing import compute_tax", ""]
    text = "\n".join(head + helpers(40) + ["def tax_for_order(amount_cents, tax_class):",
                                           "    total = compute_tax(amount_cents, tax_class)", "    return "])
    service = shop_with(tmp_path, {"shop/report.py": text})
    config = with_overrides(service.config, completion={"max_prompt_tokens": 900}, prompt={"file_only_round": True})
    backend = Scripted("total\n")
    engine = CompletionEngine(service, backend, config)
    cursor = locate(service.root, "shop/report.py", text, text.count("\n") + 1, None)
    sent = []
    for _ in range(3):
        before = len(backend.prompts)
        engine.complete(cursor, "fragrel")
        sent.append(backend.prompts[before:])
    assert all(len(prompts) == 2 for prompts in sent)  # the main prompt and the file-only one
    assert sent[0] == sent[1] == sent[2]


def test_cursors_at_the_module_level_keep_no_shared_memory(tmp_path):
    """Order "stable" remembered blocks per function, and the module level was one function per
    file: a cursor at a file's bottom was given the blocks retrieved for one at its top."""
    top = ["from .pricing import compute_tax, TAX_RATES", "", "STANDARD_TAX = compute_tax(100, "]
    bottom = ["", "CATALOG = Catalog()", "PRODUCT = CATALOG.find_product("]
    text = "\n".join(top + helpers(10) + bottom)
    service = shop_with(tmp_path, {"shop/settings.py": text})

    def blocks(engine, line):
        answer = engine.complete(locate(service.root, "shop/settings.py", text, line, None), "fragrel")
        return [(b.path, b.start_line, b.end_line) for b in answer.prompt.blocks]

    shared = CompletionEngine(service, Scripted("x\n"), service.config)
    blocks(shared, 3)
    fresh = CompletionEngine(service, Scripted("x\n"), service.config)
    assert blocks(shared, text.count("\n") + 1) == blocks(fresh, text.count("\n") + 1)


def test_an_empty_prompt_is_no_model_call(tmp_path):
    """An empty file, or line 1 column 1 left to right with nothing retrieved, makes an empty prompt:
    it was sent, and llama.cpp's server answered it with a broken stream ("ended the answer without
    a finish reason", exit 2). Nothing to continue is an empty completion, without the model."""
    service = shop_with(tmp_path, {"shop/empty.py": "", "shop/first.py": "import json\n\nvalue = json.dumps(1)\n"})
    for strategy in ("vanilla", "fragrel", "infile"):
        for path, text in (("shop/empty.py", ""), ("shop/first.py", None)):
            backend = Scripted("x\n")
            text = text if text is not None else (service.root / path).read_text()
            answer = CompletionEngine(service, backend, service.config).complete(
                locate(service.root, path, text, 1, 1), strategy, use_suffix=False)
            assert answer.prompt.text == "" and answer.text == "" and answer.generation.prompt_tokens == 0
            assert "" not in backend.prompts


def test_a_block_starting_on_the_line_after_the_suffix_is_not_taken_for_shown(tmp_path):
    """The suffix's first line is the rest of the cursor's line, so a suffix of n lines shows the
    file down to cursor line + n - 1; the fit counted one line more as shown and dropped a block of
    the cursor's file starting there (here the best one, a near clone of the code at the cursor)."""
    head = ["def settle_invoice_totals(ledger_rows, currency_table):",
            "    converted_amounts = convert_currency_rows(ledger_rows, currency_table)",
            "    rounded_amounts = round_half_even_cents(converted_amounts)",
            "    audited_amounts = audit_invoice_ledger(rounded_amounts)", "    "]
    clone = ["def settle_invoice_totals_again(ledger_rows, currency_table):", *head[1:4],
             "    return publish_invoice_totals(audited_amounts)"]
    lines = head + [f"x_{i} = {i}" for i in range(15)] + clone + [f"y_{i} = {i}" for i in range(15)]
    text = "\n".join(lines) + "\n"
    service = shop_with(tmp_path, {"shop/invoices.py": text})
    cursor = locate(service.root, "shop/invoices.py", text, 5, None)
    suffix = "\n".join(lines[4:20])  # the cursor line's rest and the lines down to 0-based line 19
    config = with_overrides(service.config, completion={"max_suffix_tokens": len(TOKENS.findall(suffix)) + 2})
    answer = CompletionEngine(service, Scripted("x\n"), config).complete(cursor, "fragrel")
    assert answer.prompt.fim and answer.prompt.suffix_lines == 16  # file lines 4 to 19
    assert ("shop/invoices.py", 20) in [(f.path, f.start_line) for f in answer.fragments]
    assert ("shop/invoices.py", 20) in [(b.path, b.start_line) for b in answer.prompt.blocks]
    assert not any(b.path == "shop/invoices.py" and b.start_line < 20 for b in answer.prompt.blocks)
