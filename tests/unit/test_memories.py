"""The memories of MemWalker, ReadAgent and QRMeM (issue 14) over a real index of the bundled
example: the navigation's rules (backtracking, budget, fallback) with a scripted chooser standing
for the model's answers, pages at real syntax boundaries kept live against a rebuild, the entity
graph's edges checked against a plain scan of every call edge, and the model-written summary
store's resume and torn-tail rules. The model's own answers are exercised end to end in
tests/e2e/test_memories.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from repomem.backends.base import Generation
from repomem.backends.templates import CODELLAMA, PLAIN, QWEN
from repomem.completion.engine import CompletionEngine
from repomem.completion.model_calls import chosen_numbers, says_yes
from repomem.completion.packing import pack_blocks
from repomem.completion.prompt import ContextBlock
from repomem.memory.docstrings import docstring_line
from repomem.memory.entities import asked_name, names_at_cursor
from repomem.memory.gists import page_bounds
from repomem.memory.memwalker import Option, walk
from repomem.memory.summary_tree import parent_of
from repomem.memory.written_summaries import FILE_NAME, WrittenSummaries
from repomem.service import RepoService
from tests.repos import write_repo

# -- MemWalker's navigation ------------------------------------------------------------------------

TREE = {"": ["a", "b"], "a": ["a/x.py", "a/y.py"], "b": ["b/z.py"],
        "a/x.py": ["#1", "#2"], "a/y.py": ["#3"], "b/z.py": ["#4", "#5"]}


def _children(node: str) -> list[Option]:
    return [Option(key, key, "", 0.0, int(key[1:]) if key.startswith("#") else None) for key in TREE[node]]


def _scripted(answers: list[int | None]):
    asked: list[tuple[str, tuple[str, ...]]] = []

    def choose(node: str, options) -> int | None:
        asked.append((node, tuple(o.key for o in options)))
        return answers.pop(0)
    return choose, asked


def test_the_walk_descends_collects_a_window_and_resumes_from_its_folder():
    choose, asked = _scripted([1, 2, 1, 1, 1, 2])
    outcome = walk("", _children, choose, want_windows=2, max_steps=10, parent_of=parent_of, width=10)
    # root -> a -> a/y.py -> #3 collected, back at a -> a/x.py -> #1 collected: two windows, done.
    assert outcome.windows == (3, 1)
    assert [node for node, _ in asked] == ["", "a", "a/y.py", "a", "a/x.py"]


def test_going_back_never_offers_that_node_again_and_the_budget_stops_the_walk():
    choose, asked = _scripted([1, 0, 1, 1])
    outcome = walk("", _children, choose, want_windows=3, max_steps=4, parent_of=parent_of, width=10)
    # root -> a, back (a is spent) -> root offers b only -> b -> b/z.py: the fourth call is the last.
    assert asked[2] == ("", ("b",)) and len(asked) == 4 and outcome.windows == ()
    assert outcome.steps[1].picked == 0 and outcome.last_node == "b/z.py"


def test_an_answer_without_a_valid_number_takes_the_best_option():
    choose, _ = _scripted([None, 7, 1])
    outcome = walk("", _children, choose, want_windows=1, max_steps=3, parent_of=parent_of, width=10)
    assert [s.fallback for s in outcome.steps] == [True, True, False] and outcome.windows == (1,)


def test_answers_are_read_as_numbers_and_yes_or_no():
    assert chosen_numbers("Pages 3, 1 and 3 again; 9", range(1, 5), 3) == [3, 1]
    assert chosen_numbers("none", range(0, 3), 1) == [] and chosen_numbers(None, range(3), 1) == []
    # The first list of numbers, not every digit: an answer echoing the gist it chose read as two.
    assert chosen_numbers("3. shop/checkout.py lines 1-31: class Order:", range(1, 5), 3) == [3]
    assert chosen_numbers("I pick 2 and 4.", range(1, 5), 3) == [2, 4]
    # A name in place of a number: the option named, not the digit inside the name.
    labels = {1: "api_v3.py", 2: "api_v1.py", 3: "storage.py"}
    assert chosen_numbers("api_v3.py", range(0, 4), 1, labels) == [1]
    assert chosen_numbers("The file storage.py, then api_v1.py", range(0, 4), 2, labels) == [3, 2]
    assert says_yes("Yes.") is True and says_yes("no, look up `Cart`") is False and says_yes("maybe") is None


def test_each_family_gets_its_instruction_form():
    assert QWEN.instruction("Q?").startswith("<|im_start|>system") and QWEN.instruction("Q?").endswith(
        "<|im_start|>assistant\n")
    assert CODELLAMA.instruction("Q?") == "[INST] Q? [/INST] " and PLAIN.instruction("Q?") == "Q?\nAnswer: "


# -- ReadAgent's pages ------------------------------------------------------------------------------

def test_pages_cover_each_file_and_end_at_syntax_boundaries(shop: RepoService):
    index = shop.index
    for record in (r for r in index.files if r is not None):
        syntax = index.syntax[index.file_id(record.path)]
        lines = shop.view().span_text(record.path, 0, 1 << 30).split("\n")
        for page_lines in (5, 12):
            pages = page_bounds(syntax, len(lines), page_lines)
            assert pages[0][0] == 0 and pages[-1][1] == len(lines)
            assert all(a[1] == b[0] for a, b in zip(pages, pages[1:]))  # contiguous, no overlap
            starts = {int(line) for line in syntax.start_line[syntax.parent == 0]} | {
                int(syntax.start_line[d.node]) for d in syntax.definitions if not d.in_function}
            for before, (start, _) in zip(pages, pages[1:]):  # a boundary, or a cut after a full page
                assert start in starts or before[1] - before[0] == 2 * page_lines, (record.path, start)
            assert all(end - start <= 2 * page_lines for start, end in pages)


def test_gists_name_the_definitions_and_follow_edits_like_a_rebuild(shop: RepoService):
    memory = shop.memories.gist_memory()
    pricing = memory.pages_of("shop/pricing.py")
    assert "def compute_tax(amount_cents: int, tax_class: str) -> int:" in pricing[0].gist
    assert memory.page_at("shop/pricing.py", 5) == pricing[0]
    text = (shop.root / "shop/pricing.py").read_text(encoding="utf-8")
    shop.set_buffer("shop/pricing.py", text.replace("def compute_tax(", "def compute_levy("))
    assert shop.memories.gist_memory().paginated == 1  # the edited file alone
    live = {path: pages for path, (_, pages) in shop.memories.gist_memory().pages.items()}
    shop.memories._gists = None  # a fresh memory to compare with
    assert live == {path: pages for path, (_, pages) in shop.memories.gist_memory().pages.items()}
    assert "compute_levy" in live["shop/pricing.py"][0].gist


def test_a_gist_block_is_kept_whole_and_covers_no_lines():
    gist = ContextBlock(7, "m.py", 0, 30, "lines 1-30: def f(x):", 2.0, summary=True)
    window = ContextBlock(8, "m.py", 0, 20, "", 1.0)
    packed = pack_blocks([gist, window], 40, lambda path, a, b: f"{path}:{a}-{b}")
    assert packed[0] is gist and (packed[1].start_line, packed[1].end_line, packed[1].text) == (0, 20, "m.py:0-20")


# -- QRMeM's entity graph ---------------------------------------------------------------------------

def test_names_at_the_cursor_skip_strings_comments_and_keywords():
    code = '"""Tax owed on an order."""\nfrom .pricing import compute_tax  # the tax\nreturn compute_tax(a, "b c").x'
    assert names_at_cursor(code, 10) == ["x", "a", "compute_tax", "pricing"]


def test_names_resolve_through_the_files_imports_first(shop: RepoService):
    memory = shop.memories.entity_memory()
    (found,) = memory.look_up("compute_tax", "shop/report.py")
    assert (found.path, found.start_line, found.name) == ("shop/pricing.py", 5, "compute_tax")
    assert memory.look_up("no_such_name", "shop/report.py") == []


def test_callees_and_usages_equal_a_scan_of_every_call_edge(shop: RepoService):
    memory = shop.memories.entity_memory()
    index = shop.index
    edges = index.all_calls()
    assert edges.shape[0] > 5
    for sites in memory.by_name.values():
        for file_id, node in sites:
            entity = memory.entity(file_id, node)
            expected_usages = []
            expected_callees = []
            for source_file, source_node, target_file, target_node, _ in edges.tolist():
                line = int(index.syntax[source_file].start_line[source_node])
                if (target_file, target_node) == (file_id, node):
                    expected_usages.append((index.files[source_file].path, line))
                if source_file == file_id and entity.start_line <= line <= entity.end_line \
                        and (target_file, target_node) != (file_id, node):
                    expected_callees.append((target_file, target_node))
            assert [(u.path, u.line) for u in memory.usages(entity, 99)] == list(dict.fromkeys(expected_usages))
            assert [(c.file_id, c.node) for c in memory.callees(entity, 99)] == list(dict.fromkeys(expected_callees))


def test_the_entity_memory_follows_an_edit(shop: RepoService):
    before = shop.memories.entity_memory()
    assert shop.memories.entity_memory() is before  # unchanged index: the same memory
    text = (shop.root / "shop/pricing.py").read_text(encoding="utf-8")
    shop.set_buffer("shop/pricing.py", text.replace("def compute_tax(", "def compute_levy("))
    after = shop.memories.entity_memory()
    assert after is not before and "compute_levy" in after.by_name and "compute_tax" not in after.by_name


# -- model-written summaries --------------------------------------------------------------------------

def test_written_summaries_resume_per_model_and_survive_a_torn_line(tmp_path: Path):
    store = WrittenSummaries.load(tmp_path)
    store.append("k1", "file", "model-a", "  Carts and their totals. ")
    store.append("k2", "page", "model-a", "Tax rounding.")
    with open(tmp_path / FILE_NAME, "a", encoding="utf-8") as handle:
        handle.write('{"key": "k3", "kind": "page", "mod')  # a writer killed mid-line
    again = WrittenSummaries.load(tmp_path)
    assert again.get("k1") == "Carts and their totals." and again.has("model-a", "k2")
    assert not again.has("model-b", "k1") and again.get("k3") is None and again.skipped == 1
    again.append("k3", "page", "model-b", "Payments.")  # the torn tail is cut before appending
    final = WrittenSummaries.load(tmp_path)
    assert final.skipped == 0 and final.get("k3") == "Payments." and final.has("model-b", "k3")
    lines = (tmp_path / FILE_NAME).read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and (tmp_path / FILE_NAME).stat().st_mode & 0o077 == 0


def test_model_summaries_replace_extractive_ones_only_for_the_text_they_were_written_for(shop: RepoService):
    from repomem.config import with_overrides
    from repomem.memory.summary_tree import file_summary, summary_key

    index = shop.index
    path = "shop/cart.py"
    lines = shop.view().span_text(path, 0, 1 << 30).split("\n")
    extractive = file_summary(path, index.syntax[index.file_id(path)], lines)
    shop.memories.open_written_summaries().append(summary_key(extractive), "file", "m", "Keeps a cart of products.")
    assert "Keeps a cart" not in shop.memories.summary_tree().nodes[path].text  # extractive unless asked
    shop.config = with_overrides(shop.config, memory={"summaries": "model"})
    assert shop.memories.summary_tree().nodes[path].text.split("\n")[:2] == [path, "Keeps a cart of products."]
    assert "Keeps a cart of products." in shop.memories.summary_tree().nodes["shop"].text  # the folder aggregates it
    text = (shop.root / path).read_text(encoding="utf-8")
    shop.set_buffer(path, text.replace("def add_item(", "def put_item("))  # a signature changed: stale
    assert "Keeps a cart" not in shop.memories.summary_tree().nodes[path].text
    assert np.all(np.asarray([len(n.text) for n in shop.memories.summary_tree().nodes.values()]) > 0)


def test_switching_back_to_extractive_summaries_drops_the_model_written_ones(tmp_path):
    """Set back to "extractive" in a running service (the language server's settings change), the
    summary tree kept the model's text."""
    import shutil

    from repomem.config import with_overrides
    from repomem.memory.summary_tree import summary_key
    from repomem.service import RepoService
    from tests.repos import EXAMPLE

    root = tmp_path / "shop"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".repomem"))
    (root / "repomem.toml").write_text('[memory]\nsummaries = "model"\n')
    service = RepoService.open(root)
    service.ensure_index()
    store = service.memories.open_written_summaries()
    for path, extractive in service.memories.file_summaries():
        store.append(summary_key(extractive), "file", "scripted", f"WRITTEN summary of {path}")
    assert "WRITTEN" in service.memories.summary_tree().nodes["shop/cart.py"].text
    service.config = with_overrides(service.config, memory={"summaries": "extractive"})
    assert "WRITTEN" not in service.memories.summary_tree().nodes["shop/cart.py"].text


def test_identical_pages_are_one_summary_to_write(tmp_path):
    """Page keys are the page's text: three copies of one file were three units, three model calls
    for one summary."""
    from repomem.backends.base import Generation
    from repomem.backends.templates import QWEN
    from repomem.completion.summarise import plan
    from repomem.service import RepoService
    from tests.repos import write_repo

    text = "def helper(value):\n    return value * 2\n\n\ndef other(value):\n    return value - 1\n"
    root = write_repo(tmp_path / "copies", {"a/util.py": text, "b/util.py": text, "c/util.py": text,
                                            "main.py": "from a.util import helper\n\nprint(helper(2))\n"})
    service = RepoService.open(root)
    service.ensure_index()

    class Answers:
        name, template, context_tokens, calls = "scripted", QWEN, 4096, 0

        def count(self, text):
            return len(text.split())

        def generate(self, request):
            Answers.calls += 1
            return Generation("a summary", 10, 2, 0, "stop", 0.01, -0.1)

    work, _ = plan(service.view(), Answers(), service.memories.open_written_summaries(), ("pages",), None)
    assert len({unit.key for unit in work.units}) == len(work.units) == 2


def test_summaries_of_text_the_repository_no_longer_has_are_dropped(tmp_path):
    """written-summaries.jsonl only grew: a summary per edited version of every file, all read at
    each change. `repomem summarise` drops those of text that is gone (keys no unit has now)."""
    from repomem.completion.summarise import live_keys, units_of
    from tests.repos import write_repo

    root = write_repo(tmp_path / "repo", {"a.py": "def f(x):\n    return x + 1\n", "b.py": "def g():\n    pass\n"})
    service = RepoService.open(root)
    service.ensure_index()
    store = service.memories.open_written_summaries()
    units = units_of(service.view(), ("files", "pages"))
    assert {unit.key for unit in units} == live_keys(service.view())
    for unit in units:
        store.append(unit.key, unit.kind, "model-a", f"summary of {unit.label}")
    store.append("gone", "file", "model-a", "the summary of a version edited away")
    with open(store.path, "a", encoding="utf-8") as handle:
        handle.write("not a record\n")
    assert store.compact(live_keys(service.view())) == 0  # another process appended: left alone
    store = WrittenSummaries.load(store.path.parent)
    assert store.compact(live_keys(service.view())) == 2
    again = WrittenSummaries.load(store.path.parent)
    assert again.get("gone") is None and again.skipped == 0
    assert all(again.has("model-a", unit.key) for unit in units) and store.texts == again.texts
    assert store.compact(live_keys(service.view())) == 0  # nothing more to drop: not rewritten


def test_a_folder_replaced_by_a_file_of_its_name_keeps_the_tree_whole():
    """The folder `lib.py/` deleted and a file `lib.py` written: the empty folder's removal took
    the new file's node, and every later request of a long-lived process raised KeyError."""
    from repomem.memory.summary_tree import SummaryTree

    def source(path):
        return None, ["def f():", "    pass"]

    tree = SummaryTree.build({"main.py": "d1", "lib.py/core.py": "d2"}, source)
    tree.update({"main.py": "d1", "lib.py": "d3"}, source)
    assert tree.nodes["lib.py"].kind == "file" and tree.files_under("") == ["lib.py", "main.py"]
    tree.update({"main.py": "d1", "lib.py/core.py": "d4"}, source)  # and back to a folder
    assert tree.nodes["lib.py"].kind == "folder" and tree.files_under("") == ["lib.py/core.py", "main.py"]


def test_a_folder_tree_a_thousand_levels_deep_is_walked_without_recursion():
    from repomem.config import Config
    from repomem.memory.summary_tree import SummaryTree

    deep = "/".join(["d"] * 1100) + "/util.py"
    tree = SummaryTree.build({"main.py": "a", deep: "b"}, lambda path: (None, ["def f():", "    pass"]))
    assert tree.files_under("") == [deep, "main.py"]
    assert tree.walk("util", Config().bm25, 2, 64) is not None


def test_a_memory_question_cuts_long_lines():
    """Twelve lines of 9,703 characters made every MemWalker, ReadAgent and QRMeM question about
    35,000 tokens, past the embedded model's window."""
    from repomem.completion.memory_retrievers import QUESTION_LINE_CHARS, question_code

    code = "\n".join(["x = [" + "1, " * 3000 + "]"] * 12 + ["total = " + "a + " * 100 + "compute_"])
    shown = question_code(code).split("\n")
    assert len(shown) == 12 and all(len(line) <= QUESTION_LINE_CHARS for line in shown)
    assert shown[0].endswith("...") and shown[-1].startswith("...") and shown[-1].endswith("a + compute_")
    assert question_code("a = 1\nb = 2") == "a = 1\nb = 2"


def test_names_in_brace_languages_skip_their_comments_and_keywords():
    """Two of QRMeM's three evidence slots went to names read in a `//` comment of a JS file."""
    js = "// not computeTax: legacyTotal is gone\n/* see legacyPricing */\nconst total = price(x, `${y}`);\n"
    assert names_at_cursor(js, 10, "//") == ["x", "price", "total"]
    assert names_at_cursor("q = a // b  # c\n", 10) == ["b", "a", "q"]  # Python's // divides


# -- Reading the answers and the repository right (the review of 2026-12-05) -----------------------

def test_a_label_named_before_any_number_picks_that_option_and_list_words_join_numbers():
    windows = {1: "lines 1-10", 2: "lines 1-20"}
    assert chosen_numbers("lines 1-20", range(0, 3), 1, windows) == [2]
    assert chosen_numbers("2: lines 1-10", range(0, 3), 1, windows) == [2]  # a number first chose
    assert chosen_numbers("Page 2 and page 5", range(1, 9), 3) == [2, 5]
    assert chosen_numbers("#1, #3", range(1, 9), 3) == [1, 3]
    assert says_yes('"yes"') is True and says_yes("`yes`") is True and says_yes("**Yes**") is True
    assert says_yes('"no"') is False


def test_the_name_asked_for_is_the_code_shaped_one_not_an_ordinary_word_before_it():
    known = {"name", "check", "get", "load_config", "Settings"}
    assert asked_name("No. The next name to look up is load_config.", known) == "load_config"
    assert asked_name("no, need to check load_config", known) == "load_config"
    assert asked_name("no - get the definition of `name`", known) == "name"  # quoted wins
    assert asked_name("no, Settings", known) == "Settings"
    assert asked_name("no idea", known) is None


def test_a_docstring_is_found_past_a_shebang_and_below_a_bare_opening():
    lines = ["#!/usr/bin/env python", "# Licensed under MIT", '"""Parse invoices."""', "import os"]
    assert docstring_line(lines, 0, len(lines)) == "Parse invoices."
    lines = ['"""', "Tax computation for orders.", '"""', "def tax(): pass"]
    assert docstring_line(lines, 0, len(lines)) == "Tax computation for orders."
    assert docstring_line(["r'''Raw text", "'''"], 0, 2) == "Raw text"
    assert docstring_line(['"""', '"""'], 0, 2) == "" and docstring_line(["x = 1"], 0, 1) == ""


class _Scripted:
    """A model that answers the memory's questions from a script ("1" once it runs out)."""

    name, template, context_tokens = "scripted", QWEN, 32768

    def __init__(self, answers: list[str]):
        self.answers = list(answers)

    def count(self, text: str) -> int:
        return len(text.split())

    def generate(self, request):
        answer = self.answers.pop(0) if self.answers else "1"
        return Generation(answer, self.count(request.prompt), 3, 0, "stop", 0.01, -0.1)

    def close(self) -> None:
        pass


def _prepared(root: Path, path: str, line: int, column: int, strategy: str, answers: list[str]):
    service = RepoService.open(root)
    service.ensure_index()
    engine = CompletionEngine(service, _Scripted(answers), service.config)
    cursor = service.cursor_at(root / path, line, column)
    return engine.prepare(engine.request(cursor, strategy))


def test_readagent_finds_other_files_pages_when_the_cursors_file_matches_best(tmp_path: Path):
    """120 look-alike functions in the cursor's file took every place of the page search, and the
    strategy answered with no context at all."""
    handlers = "".join(f"def handle_order_{i}(order, cart):\n    total = order.total + cart.total\n"
                       f"    return total\n\n\n" for i in range(120))
    root = write_repo(tmp_path / "repo", {
        "lib/pricing.py": "def price_of(order):\n    return order.total * 2\n",
        "app/handlers.py": "def handle_new(order, cart):\n    total = order.total + cart.total\n    return \n\n\n"
                           + handlers})
    prepared = _prepared(root, "app/handlers.py", 3, 11, "readagent", ["1"])
    assert [f.path for f in prepared.fragments][:1] == ["lib/pricing.py"]


def test_qrmem_looks_up_a_name_the_first_cut_of_the_evidence_left_out(tmp_path: Path):
    tools = "".join(f"def fn_{c}(x):\n    return x\n\n\n" for c in "abcdef")
    main = ("from lib.tools import fn_a, fn_b, fn_c, fn_d, fn_e, fn_f\n\n\ndef run(x):\n    y = fn_a(x)\n"
            "    y = fn_b(y)\n    y = fn_c(y)\n    y = fn_d(y)\n    y = fn_e(y)\n    return fn_f(y) + \n")
    root = write_repo(tmp_path / "repo", {"lib/tools.py": tools, "app/main.py": main})
    prepared = _prepared(root, "app/main.py", 10, 21, "qrmem", ["no fn_a", "yes"])
    assert prepared.model_calls[0].decision == "look up fn_a"
    assert ("lib/tools.py", 0) in {(f.path, f.start_line) for f in prepared.fragments}


def test_the_cursors_own_file_and_a_folder_of_it_alone_are_no_walk_choice(tmp_path: Path):
    files = {f"lib/m{i}.py": f"def helper_{i}(order):\n    return order.total + {i}\n" for i in range(6)}
    files["app/orders.py"] = "def order_total(order):\n    return order.total + \n"
    root = write_repo(tmp_path / "repo", files)
    service = RepoService.open(root)
    service.ensure_index()
    tree = service.memories.summary_tree()
    query = "def order_total(order):\n    return order.total + "
    walked = tree.walk(query, service.config.bm25, 3, 64, frozenset({"app/orders.py"}))
    assert len(walked.files) == 3 and "app/orders.py" not in {path for path, _ in walked.files}
    # MemWalker at the root: `app/` holds only the cursor's file and is not offered.
    prepared = _prepared(root, "app/orders.py", 2, 25, "memwalker", ["1", "1", "1", "1", "1", "1"])
    assert prepared.model_calls and all("app/" not in call.prompt.split("Its parts:")[-1]
                                        for call in prepared.model_calls)


def test_a_pages_range_ends_at_the_files_last_line(tmp_path: Path):
    root = write_repo(tmp_path / "repo", {"a.py": "".join(f"x{i} = {i}\n" for i in range(13))})
    service = RepoService.open(root)
    service.ensure_index()
    pages = service.memories.gist_memory().pages["a.py"][1]
    assert pages[-1].end_line == 13 and pages[-1].gist.startswith(f"lines {pages[0].start_line + 1}-13:")


def test_a_file_name_holding_a_line_break_stays_one_line_in_every_memory_question():
    # Git allows a line break in a file name; the rest of such a name stood as a line of its own
    # in the question (a line of code, or the next numbered option) before the names were escaped.
    from repomem.languages.parsed import FileSyntax
    from repomem.memory.entities import reflection_question
    from repomem.memory.gists import Page, lookup_question
    from repomem.memory.memwalker import navigation_question
    from repomem.memory.summary_tree import SummaryNode, file_summary, folder_summary

    name = "pkg/odd\n2. import os\r.py"
    code = "x = 1\n"
    questions = [
        lookup_question(name, code, [Page(name, 0, 3, "def f", "k")], 1),
        navigation_question(name, code, f"the folder {name}/", [Option(name, name, "a summary", 1.0)], True),
        reflection_question(name, code, ["evidence"]),
    ]
    for question in questions:
        lines = question.split("\n")
        assert not any(line.startswith("2. import os") for line in lines), question
        assert sum("odd\\n2. import os\\r.py" in line for line in lines) >= 1, question
    syntax = FileSyntax(path=name, language="python", parent=np.full(1, -1, dtype=np.int32),
                        start_line=np.zeros(1, dtype=np.int32), end_line=np.zeros(1, dtype=np.int32),
                        length=np.zeros(1, dtype=np.int32), line_chars=np.zeros(1, dtype=np.int32))
    summary = file_summary(name, syntax, ['"""Docs."""'])
    assert summary.split("\n")[0] == "pkg/odd\\n2. import os\\r.py"
    child = SummaryNode(path=name, kind="file", children=(), text=summary, digest="")
    assert folder_summary("pkg", [child]).split("\n")[1].startswith("odd\\n2. import os\\r.py: ")
