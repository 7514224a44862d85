"""Incremental parses (`reparse.TreeMemo`) give what a parse from nothing gives, edit after edit."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from repomem.languages.parsed import FileSyntax
from repomem.languages.reparse import TreeMemo, common_prefix_length, common_suffix_length, edited_tree
from repomem.languages.syntax import extract_syntax
from repomem.languages.treesitter import parse, parser_for

ROOT = Path(__file__).resolve().parents[2]

JAVASCRIPT = """\
import { total } from './cart.js';

export function render(items, taxRate) {
  const sum = total(items);
  if (sum > 100) {
    return `big: ${sum * (1 + taxRate)}`;
  }
  return items.map((item) => item.name).join(', ');
}
"""

# Fragments typed into the files: statements, half-typed calls, unbalanced brackets, non-ASCII
# text (tree-sitter's points count bytes), new definitions.
TYPED = ["x = 1\n", "return compute_tax(", ")", "    ", "\n\n", "def typed(a, b):\n    return a + b\n",
         "café = 'naïve'  # ünïcode\n", "(", "]", "class Typed:\n    pass\n", "self.items.append(item)",
         "const y = total([1, 2]);\n", "émoji = '😀'\n", ":", "\t"]


def assert_same_syntax(got: FileSyntax, want: FileSyntax) -> None:
    for name in ("parent", "start_line", "end_line", "length", "line_chars"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
    assert got.definitions == want.definitions
    assert got.imports == want.imports
    assert got.calls == want.calls
    assert got.over_node_limit == want.over_node_limit


def random_edit(text: str, rng: random.Random) -> str:
    """One insertion, deletion or replacement at a random character position."""
    start = rng.randint(0, len(text))
    kind = rng.choice(("insert", "delete", "replace"))
    if kind == "insert":
        return text[:start] + rng.choice(TYPED) + text[start:]
    end = min(len(text), start + rng.randint(1, 40))
    return text[:start] + ("" if kind == "delete" else rng.choice(TYPED)) + text[end:]


@pytest.mark.parametrize(("path", "language", "text"), [
    ("shop/cart.py", "python", (ROOT / "examples/shop/shop/cart.py").read_text(encoding="utf-8")),
    ("repomem/languages/reparse.py", "python", (ROOT / "repomem/languages/reparse.py").read_text(encoding="utf-8")),
    ("ui/render.js", "javascript", JAVASCRIPT),
])
def test_each_edit_parses_to_what_a_fresh_parse_gives(path, language, text):
    rng = random.Random(path)
    trees = TreeMemo(capacity=2)
    extract_syntax(path, language, text, "statement", trees=trees)
    for _ in range(60):
        text = random_edit(text, rng)
        assert_same_syntax(extract_syntax(path, language, text, "statement", trees=trees),
                           extract_syntax(path, language, text, "statement"))


def test_the_edit_span_is_found_between_the_common_prefix_and_suffix():
    assert common_prefix_length(b"abcdef", b"abXdef") == 2
    assert common_suffix_length(b"abcdef", b"abXdef", 4) == 3
    # A repeated run: prefix and suffix never overlap (aa -> aaa inserts one "a" at the end).
    assert common_prefix_length(b"aa", b"aaa") == 2
    assert common_suffix_length(b"aa", b"aaa", 0) == 0
    assert common_prefix_length(b"", b"x") == 0
    old, new = b"a = 1\nb = 2\n", "a = 1\nbé = 2\n".encode()
    tree = edited_tree(parse("python", old), old, new)
    assert tree.root_node.has_changes
    assert str(parser_for("python").parse(new, tree).root_node) == str(parse("python", new).root_node)


def test_the_memo_keeps_the_last_parses_of_a_few_paths():
    trees = TreeMemo(capacity=2)
    for path in ("a.py", "b.py", "c.py"):
        trees.parse(path, "python", b"x = 1\n")
    assert len(trees) == 2
    # A path parsed in another language is parsed afresh, not from the other grammar's tree.
    tree = trees.parse("c.py", "javascript", b"let x = 1;\n")
    assert tree.root_node.type == "program" and not tree.root_node.has_error


TYPED_LINES = ["self.items.append(compute_tax(item, rate=0.2))", "# a note, typed (with brackets)",
               "total = sum(price.amount for price in prices) + len(self.items)", "return x.y.z(1)"]


@pytest.mark.parametrize("path", ["examples/shop/shop/cart.py", "repomem/languages/reparse.py",
                                  "repomem/index/edit_graph.py"])
def test_keystrokes_take_the_call_sites_they_cannot_change_from_the_last_version(path, monkeypatch):
    """Lines typed key by key into function bodies and deleted key by key again: each version's
    syntax, call sites included, is a fresh parse's; most keystrokes took the calls outside the
    edited statement from the last version (languages/call_reuse.py), some of them across a
    statement that came or went (the kept nodes after it renumbered)."""
    import repomem.languages.syntax as syntax_module

    reused, moved = [], []
    call_reuse = syntax_module.call_reuse

    def counted(*arguments):
        found = call_reuse(*arguments)
        reused.append(found is not None)
        moved.append(found is not None and found.shift != 0)  # a statement came or went
        return found

    monkeypatch.setattr(syntax_module, "call_reuse", counted)
    text = (ROOT / path).read_text(encoding="utf-8")
    lines = text.split("\n")
    trees = TreeMemo(capacity=2)
    extract_syntax(path, "python", text, "statement", trees=trees)
    bodies = [i + 1 for i, line in enumerate(lines) if line.lstrip().startswith("def ") and line.rstrip().endswith(":")]
    for at, typed in zip(bodies[len(bodies) // 3 :: max(1, len(bodies) // 6)], TYPED_LINES):
        indent = " " * (len(lines[at]) - len(lines[at].lstrip()))
        steps = list(range(1, len(typed) + 1))
        for end in steps + steps[::-1][1:]:  # typed, then deleted again
            edited = "\n".join(lines[:at] + [indent + typed[:end]] + lines[at:])
            assert_same_syntax(extract_syntax(path, "python", edited, "statement", trees=trees),
                               extract_syntax(path, "python", edited, "statement"))
        lines_text = "\n".join(lines)
        assert_same_syntax(extract_syntax(path, "python", lines_text, "statement", trees=trees),
                           extract_syntax(path, "python", lines_text, "statement"))
    assert sum(reused) > len(reused) // 2 and any(moved), reused


def test_no_call_site_is_taken_when_the_kept_nodes_outside_the_edited_one_differ():
    """`call_reuse` checks what it relies on: the kept nodes before the edited kept node, and those
    after its subtree (renumbered), under the same parents as before. A last version that differs
    there (here made up) gives nothing to take: the root's parent changed, nothing; the last
    node's, nothing, or (a kept node further up holding the span) a region reaching the end."""
    from repomem.languages.call_reuse import KnownCalls, call_reuse

    path = "examples/shop/shop/cart.py"
    text = (ROOT / path).read_text(encoding="utf-8")
    trees = TreeMemo(capacity=2)
    syntax = extract_syntax(path, "python", text, "statement", trees=trees)
    at = text.index("find_product(sku)\n")  # inside a method body: kept nodes before and after it
    edited = text[:at] + "x" + text[at:]
    source = edited.encode("utf-8")
    tree = trees.parse(path, "python", source)
    reparse = trees.reparse_of(path, "python", source)
    assert reparse is not None and isinstance(reparse.before, KnownCalls)
    from repomem.languages.registry import language_named
    from repomem.languages.syntax import walk_tree

    kept = walk_tree(tree.root_node, language_named("python"), "statement", len(edited.split("\n")) - 1,
                     len(source), 0)
    parents = np.asarray(kept.parents, dtype=np.int32)
    assert call_reuse(reparse, parents, tree.root_node, kept.kept_index) is not None
    for where in (0, -1):  # a parent changed before the edited node, or after its subtree
        other = syntax.parent.copy()
        other[where] = 0 if other[where] != 0 else -2
        before = KnownCalls(other, reparse.before.starts, reparse.before.rows)
        found = call_reuse(replace(reparse, before=before), parents, tree.root_node, kept.kept_index)
        assert found is None or (where == -1 and found.moved_from == other.shape[0]), found


def _recording_call_reuse(monkeypatch) -> list:
    """Every `CallReuse` (or None) the syntax extraction is given, in order."""
    import repomem.languages.syntax as syntax_module

    found: list = []
    call_reuse = syntax_module.call_reuse

    def recorded(*arguments):
        found.append(call_reuse(*arguments))
        return found[-1]

    monkeypatch.setattr(syntax_module, "call_reuse", recorded)
    return found


def test_whole_statements_added_and_removed_capture_only_their_own_call_sites(monkeypatch):
    """A function appended to a module and removed again, a statement put between two top-level
    definitions, a top-level definition deleted, a statement added to a long method body: each
    version is a fresh parse's, and the call sites captured again are those of the statements the
    edit touched (languages/call_reuse.py's narrowing to K's children), not all of the module's."""
    path = "repomem/index/edit_graph.py"
    text = (ROOT / path).read_text(encoding="utf-8")
    found = _recording_call_reuse(monkeypatch)
    trees = TreeMemo(capacity=2)
    extract_syntax(path, "python", text, "statement", trees=trees)
    appended = text + "\n\ndef added(graph):\n    return graph.sync(compact(graph))\n"
    second_def = text.index("\ndef ", text.index("\ndef ") + 1) + 1
    between = text[:second_def] + "LIMIT = compute_limit(8)\n\n\n" + text[second_def:]
    third_def = text.index("\ndef ", second_def) + 1
    deleted = text[:second_def] + text[third_def:]
    body = text.index("\n", text.index("    def sync(")) + 1
    in_body = text[:body] + "        started = clock.now(record())\n" + text[body:]
    versions = [appended, text, between, text, deleted, text, in_body, text]
    for version in versions:
        assert_same_syntax(extract_syntax(path, "python", version, "statement", trees=trees),
                           extract_syntax(path, "python", version, "statement"))
    reuses = found[1:]
    assert len(reuses) == len(versions) and all(reuse is not None for reuse in reuses), reuses
    for reuse in reuses:
        assert reuse.end - reuse.first < len(text) // 4, (reuse.first, reuse.end)  # not the whole module
    assert all(reuse.shift != 0 for reuse in reuses)  # kept nodes came or went: the rest renumbered


def test_a_keystroke_inside_a_callee_takes_no_stale_name_with_every_named_node_kept():
    """With `named` granularity the identifier typed into is kept itself; the call site, which
    starts before it, is captured again (it once kept the old name: `F.registlookup` indexed as
    `F.register_lookup`)."""
    text = "class F:\n    def m(self):\n        return self.n()\n\n\nF.register_lookup(Lookup)\nrun(F)\n"
    trees = TreeMemo(capacity=2)
    extract_syntax("f.py", "python", text, "named", trees=trees)
    for edited in (text.replace("register_lookup", "registlookup"), text.replace("register_lookup", "register")):
        got = extract_syntax("f.py", "python", edited, "named", trees=trees)
        assert_same_syntax(got, extract_syntax("f.py", "python", edited, "named"))
        assert "F.register_lookup" not in got.calls.callee
    # A class renamed: its calls' enclosing class is the new name (its name is one of its kept
    # children there, but the class is no statement container whose children alone are captured).
    renamed = edited.replace("class F:", "class G:")  # from the last version: one byte changed
    got = extract_syntax("f.py", "python", renamed, "named", trees=trees)
    assert_same_syntax(got, extract_syntax("f.py", "python", renamed, "named"))
    assert got.calls.enclosing_class[got.calls.callee.index("self.n")] == "G"


def test_a_tree_left_with_an_error_is_parsed_from_nothing_when_asked():
    """`fresh_if_error` (a file read from disk): a version with a syntax error is not parsed from the
    last tree, so no call site is taken from the last version either; one without an error is."""
    text = (ROOT / "examples/shop/shop/cart.py").read_text(encoding="utf-8")
    trees = TreeMemo(capacity=2)
    trees.parse("cart.py", "python", text.encode(), fresh_if_error=True)
    broken = (text + "\ndef half(a:\n").encode()
    assert parse("python", broken).root_node.has_error
    trees.parse("cart.py", "python", broken, fresh_if_error=True)
    assert trees.reparse_of("cart.py", "python", broken) is None
    fixed = (text + "\ndef half(a):\n    return a\n").encode()
    trees.parse("cart.py", "python", fixed, fresh_if_error=True)
    assert trees.reparse_of("cart.py", "python", fixed) is not None
    trees.parse("cart.py", "python", broken)  # without the flag: from the last tree, error or not
    assert trees.reparse_of("cart.py", "python", broken) is not None


@pytest.mark.parametrize(("granularity", "limited"), [("statement", False), ("named", False), ("statement", True)])
def test_the_walk_copies_the_subtrees_an_edit_left_and_gives_a_fresh_walk(granularity, limited, monkeypatch):
    """Random edits of a large file, in either granularity, and with a node limit the file crosses
    back and forth: each version's kept nodes, symbols and call sites are a fresh parse's, and most
    walks copied the subtrees outside the edit from the last version (languages/walk_reuse.py)."""
    import repomem.languages.syntax as syntax_module

    copies = []
    walk_tree = syntax_module.walk_tree

    def counted(*arguments, **options):
        kept = walk_tree(*arguments, **options)
        if options.get("reuse") is not None:
            copies.append(len(kept.copied))
        return kept

    monkeypatch.setattr(syntax_module, "walk_tree", counted)
    path = "repomem/index/edit_graph.py"
    text = (ROOT / path).read_text(encoding="utf-8")
    # The limit: the file's own kept nodes, which a statement more crosses.
    max_nodes = extract_syntax(path, "python", text, granularity).parent.shape[0] if limited else 0
    rng = random.Random(granularity + str(limited))
    trees = TreeMemo(capacity=2)
    extract_syntax(path, "python", text, granularity, max_nodes, trees=trees)
    over = []
    for _ in range(40):
        # Edits and the way back, so that the file crosses the node limit both ways.
        text = random_edit(text, rng) if rng.random() < 0.7 else (ROOT / path).read_text(encoding="utf-8")
        got = extract_syntax(path, "python", text, granularity, max_nodes, trees=trees)
        assert_same_syntax(got, extract_syntax(path, "python", text, granularity, max_nodes))
        over.append(got.over_node_limit)
    assert sum(1 for n in copies if n > 0) > len(copies) // 2, copies
    if limited:
        assert any(over) and not all(over), over
