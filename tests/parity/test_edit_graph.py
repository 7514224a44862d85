"""The graph kept between edits (stable node ids) against the graph built whole from the same index."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import repomem.index.edit_graph as edit_graph_module
from repomem.config import Config, with_overrides
from repomem.index.caller_map import CallerMap
from repomem.index.edit_graph import EditGraph
from repomem.index.graph import build_graph
from repomem.index.relations import node_fragment_index, relation_entries
from repomem.index.repo_index import RepoIndex, apply_changes
from repomem.index.scan import SourceFile, content_digest
from repomem.languages.registry import language_of
from tests.parity.test_parity import EXACT, node_key_for, open_index


def edit_file(index: RepoIndex, root: Path, path: str, text: str) -> list[int]:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text, encoding="utf-8")
    source = SourceFile(path, language_of(path) or "python", text, content_digest(text.encode()), len(text.encode()), 1)
    return apply_changes(index, [source], [])


def edit_graph_keys(edit: EditGraph, index: RepoIndex):
    """Live node id -> the key `node_key_for` gives the same node in a whole graph."""
    key: dict[int, tuple] = {}
    for f, record in enumerate(index.files):
        if record is not None:
            for node in range(int(edit.block_start[f]), int(edit.block_end[f])):
                key[node] = ("syntax", f, node - int(edit.block_start[f]))
        # A file removed before the graph was built keeps an isolated node, as in a whole graph.
        if edit.file_node[f] >= 0 and not edit.dead[edit.file_node[f]]:
            key[int(edit.file_node[f])] = ("file", f)
    for name, node in edit.dir_node.items():
        key[node] = ("dir", name)
    assert not any(edit.dead[node] for node in key)
    assert len(key) == edit.n_nodes - int(edit.dead[: edit.n_nodes].sum())  # every other id is dead
    return key


def exact_index_of(root: Path, files: dict[str, str]) -> RepoIndex:
    """The files written under `root` and indexed with exact relations (no caps, no cutoff)."""
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return open_index(root, with_overrides(Config(), graph=EXACT["graph"], relations=EXACT["relations"]))


def assert_same_graph(index: RepoIndex) -> None:
    edit = index._derived.edit_graph
    assert edit is not None
    whole = build_graph(index.syntax, index.all_calls(), index.config.graph, deduplicate=False)
    whole_key = node_key_for(whole)
    ours_key = edit_graph_keys(edit, index)

    # Edges: every live row's entries (inf = a freed slot) against both directions of each edge.
    expected = Counter()
    for a, b, cost in zip(whole.edge_a.tolist(), whole.edge_b.tolist(), whole.edge_cost.tolist()):
        expected[(whole_key(a), whole_key(b), cost)] += 1
        expected[(whole_key(b), whole_key(a), cost)] += 1
    ours = Counter()
    covered = freed = 0
    for node in range(edit.n_nodes):
        start, end = int(edit.row_start[node]), int(edit.row_end[node])
        covered += end - start
        if edit.dead[node]:
            assert start == end
            continue
        for slot in range(start, end):
            cost = float(edit.costs[slot])
            if cost == np.inf:
                freed += 1
                continue
            other = int(edit.indices[slot])
            assert not edit.dead[other]
            ours[(ours_key[node], ours_key[other], cost)] += 1
    assert ours == expected
    assert edit.unused_slots == edit.n_slots - covered + freed

    # Portals, syntax parents and the node -> fragment rows of every live syntax node.
    whole_portal = whole.portals()
    for f, record in enumerate(index.files):
        if record is None:
            continue
        first, end = int(edit.block_start[f]), int(edit.block_end[f])
        offset = int(whole.node_offset[f])
        assert end - first == int(whole.node_offset[f + 1]) - offset
        np.testing.assert_array_equal(edit.portal[first:end], whole_portal[offset : offset + end - first])
        parents = edit.syntax_parent[first:end]
        np.testing.assert_array_equal(np.where(parents >= 0, parents - first, -1),
                                      np.where(whole.syntax_parent[offset : offset + end - first] >= 0,
                                               whole.syntax_parent[offset : offset + end - first] - offset, -1))
    table = index.fragment_table(whole)
    ours_table = edit.fragment_table(index)
    for fragment in np.flatnonzero(index.live).tolist():
        a, b = table.indptr[fragment], table.indptr[fragment + 1]
        c, d = ours_table.indptr[fragment], ours_table.indptr[fragment + 1]
        want = [whole_key(n) for n in table.nodes[a:b].tolist()]
        assert want == [ours_key[n] for n in ours_table.nodes[c:d].tolist()]
        np.testing.assert_array_equal(table.weights[a:b], ours_table.weights[c:d])
        assert table.totals[fragment] == ours_table.totals[fragment]
    view = edit.view()
    node_indptr, node_frags, _ = node_fragment_index(table, whole.n_nodes)
    for node, node_key in ours_key.items():
        if node_key[0] == "syntax":
            whole_node = int(whole.node_offset[node_key[1]]) + node_key[2]
            got = view.node_frags[view.node_indptr[node] : view.node_indptr[node + 1]].tolist()
            assert got == node_frags[node_indptr[whole_node] : node_indptr[whole_node + 1]].tolist()


@pytest.mark.parametrize("same_file_weight", [0.0, 0.5])
def test_edits_keep_the_graph_a_whole_build_would_make(synthetic_repo, same_file_weight, monkeypatch):
    """A run of edits (a body edit that moves called definitions, a new function with new calls
    and a new import, the same file twice, calls removed) syncs the kept graph, never rebuilding
    it; after each, its live edges, portals, parents and fragment rows are the whole graph's, and
    the new fragments' relation rows searched on it equal those searched on the whole graph."""
    config = with_overrides(Config(), graph=EXACT["graph"],
                            relations={**EXACT["relations"], "same_file_weight": same_file_weight})
    index = open_index(synthetic_repo, config)
    # Nine small files: a few edits kill a quarter of the ids. Followed here; rebuilds below.
    monkeypatch.setattr(edit_graph_module, "REBUILD_DEAD_SHARE", 1.0)
    monkeypatch.setattr(edit_graph_module, "REBUILD_UNUSED_SHARE", 1.0)
    callers = CallerMap(index.calls)
    paths = [r.path for r in index.files if r is not None and r.path.endswith(".py") and "mod" in r.path]
    most_called = max(paths, key=lambda p: len(callers.callers_of([index.file_id(p)])))
    assert callers.callers_of([index.file_id(most_called)])
    caller = sorted(p for p in paths if p != most_called)[-1]
    texts = {p: (synthetic_repo / p).read_text(encoding="utf-8") for p in paths}
    module = most_called[:-3].replace("/", ".")
    thing = "Thing" + most_called.rsplit("mod", 1)[1][:-3]

    edits = [
        (most_called, texts[most_called].replace("        self.value = value",
                                                 "        self.value = value\n        self.extra = [value]\n"
                                                 "        self.more = len(self.extra)", 1)),
        (caller, texts[caller] + f"\n\nfrom {module} import {thing}\n\n"
                                 f"def brand_new(q):\n    return {thing}(q).grow(q) + brand_new(q - 1)\n"),
        (most_called, texts[most_called].replace("    def shrink(self, amount):",
                                                 "    def shrink(self, amount):\n        amount = abs(amount)", 1)),
        (caller, texts[caller].replace("func", "renamed_func")),
    ]
    edit = None
    for path, text in edits:
        assert text != (synthetic_repo / path).read_text(encoding="utf-8")
        added = edit_file(index, synthetic_repo, path, text)
        if edit is None:
            edit = index._derived.edit_graph  # the first edit built it
        assert index._derived.edit_graph is edit  # synced, not rebuilt
        assert_same_graph(index)
        assert_same_rows(index, added)
    assert edit.n_dead > 0 and edit.unused_slots > 0

    # Files removed and added: a file of an existing folder goes, one comes in two new folders
    # (calling into the most called file), the most called file is edited, the new one goes (its
    # folders with it), another comes into an existing folder. Followed, never rebuilt.
    newcomer = "lib/fresh/deep/newcomer.py"
    newcomer_text = f"from {module} import {thing}\n\n\ndef fresh(q):\n    return {thing}(q).grow(q)\n"
    steps = [
        lambda: apply_changes(index, [], [caller]),
        lambda: edit_file(index, synthetic_repo, newcomer, newcomer_text),
        lambda: edit_file(index, synthetic_repo, most_called, texts[most_called] + "\n\nX = 1\n"),
        lambda: apply_changes(index, [], [newcomer]),
        lambda: edit_file(index, synthetic_repo, "lib/part1/another.py", newcomer_text.replace("fresh", "other")),
    ]
    for step in steps:
        added = step()
        if added:  # an edit syncs the graph; a removal alone adds no rows and waits for the next
            assert index._derived.edit_graph is edit
            assert_same_graph(index)
            assert_same_rows(index, added)
    assert "lib/fresh" not in edit.dir_node and "lib/part1" in edit.dir_node

    # Past the share of dead ids the next edit builds the graph whole again, which matches too.
    monkeypatch.setattr(edit_graph_module, "REBUILD_DEAD_SHARE", 0.25)
    assert edit.n_dead > 0.25 * edit.n_nodes
    added = edit_file(index, synthetic_repo, most_called, texts[most_called] + "\n\nY = 2\n")
    assert index._derived.edit_graph is not edit and index._derived.edit_graph is not None
    assert index._derived.edit_graph.n_dead == 0
    assert_same_graph(index)
    assert_same_rows(index, added)


def assert_same_rows(index: RepoIndex, added: list[int]) -> None:
    """The new fragments' relation rows searched on the kept graph are those of the whole graph."""
    edit, config = index._derived.edit_graph, index.config
    assert edit is not None
    rows = np.asarray(added, dtype=np.int64)
    whole = build_graph(index.syntax, index.all_calls(), config.graph, deduplicate=False)
    expected = relation_entries(rows, index.fragment_table(whole), whole, index.live, config.graph,
                                config.relations, keep=0)
    got = relation_entries(rows, edit.fragment_table(index), edit.view(), index.live, config.graph,
                           config.relations, keep=0)
    assert expected[0].shape[0] > 0
    want = {(r, c): v for r, c, v in zip(*(a.tolist() for a in expected[:3]))}
    have = {(r, c): v for r, c, v in zip(*(a.tolist() for a in got[:3]))}
    assert have.keys() == want.keys()
    for pair, value in want.items():
        assert have[pair] == pytest.approx(value, rel=1e-12, abs=0)


def test_the_caller_map_follows_replaced_calls(synthetic_repo):
    """The index's map of who calls into each file, kept through edits, is the one made afresh."""
    index = open_index(synthetic_repo, Config())
    paths = sorted(r.path for r in index.files if r is not None and "mod" in r.path)
    index.callers_of([0])  # made now, then kept current
    for number, path in enumerate(paths[:4]):
        text = (synthetic_repo / path).read_text(encoding="utf-8")
        text = text.replace("func", f"f{number}_") if number % 2 else text + "\n\nY = 2\n"
        edit_file(index, synthetic_repo, path, text)
    fresh = CallerMap(index.calls)
    for file_id in range(len(index.files)):
        assert index.callers_of([file_id]) == fresh.callers_of([file_id])


def test_calls_between_unchanged_files_that_resolve_elsewhere_are_dropped(tmp_path):
    """A re-export that changes where a name comes from changes the calls of a file that was not
    edited, between two files that were not edited either: that edge goes and the new one comes."""
    files = {
        "a.py": "def helper(x):\n    return x\n",
        "b.py": "def helper(x):\n    return x * 2\n",
        "reexport.py": "from a import helper\n",
        "user.py": "from reexport import helper\n\n\ndef use(q):\n    return helper(q) + helper(q + 1)\n",
    }
    index = exact_index_of(tmp_path, files)
    targets = {index.files[row[2]].path for row in index.calls[index.file_id("user.py")].tolist()}
    assert targets == {"a.py"}
    edit_file(index, tmp_path, "a.py", files["a.py"] + "\n\ndef other():\n    return helper(1)\n")
    edit = index._derived.edit_graph
    assert edit is not None
    edit_file(index, tmp_path, "reexport.py", "from b import helper\n")
    targets = {index.files[row[2]].path for row in index.calls[index.file_id("user.py")].tolist()}
    assert targets == {"b.py"} and index._derived.edit_graph is edit
    assert_same_graph(index)


@pytest.mark.parametrize("same_file_weight", [0.0, 0.5])
def test_an_edits_searches_on_two_threads_give_what_one_thread_gives(synthetic_repo, same_file_weight):
    """An edit's rows with their searches split between two threads (`relations.workers` 2) are
    the one-thread rows bit for bit, and the split was taken (each thread's scratch was stamped)."""
    import repomem.index.relations as relations

    config = with_overrides(Config(), relations={"same_file_weight": same_file_weight, "workers": 2})
    index = open_index(synthetic_repo, config)
    path = sorted(r.path for r in index.files if r is not None and "mod" in r.path)[3]
    text = (synthetic_repo / path).read_text(encoding="utf-8")
    rows = np.asarray(edit_file(index, synthetic_repo, path, text + "\n\nZ = 3\n"), dtype=np.int64)
    assert rows.shape[0] >= relations.TWO_THREAD_MIN_ROWS
    edit = index._derived.edit_graph
    table, view = edit.fragment_table(index), edit.view()
    stamps_before = int(relations._SECOND_EDIT_SCRATCH._buffers[-1][0])
    two = relation_entries(rows, table, view, index.live, config.graph, config.relations)
    assert int(relations._SECOND_EDIT_SCRATCH._buffers[-1][0]) > stamps_before
    one_config = with_overrides(config, relations={"workers": 1})
    one = relation_entries(rows, table, view, index.live, config.graph, one_config.relations)
    assert one[0].shape[0] > 0
    for ours, theirs in zip(two, one):
        np.testing.assert_array_equal(ours, theirs)


def test_a_prepared_index_edits_on_what_it_prepared_and_gives_the_same_index(synthetic_repo):
    """`prepare_edits` (the language server runs it after loading) loads the structure and makes
    the call tables and the kept graph; the first edit then uses them, and the index it leaves is
    the one an unprepared index leaves after the same edit."""
    open_index(synthetic_repo, Config())  # built and saved; the next two are loaded from disk
    prepared, plain = open_index(synthetic_repo, Config()), open_index(synthetic_repo, Config())
    assert prepared.structure_loader is not None and prepared._derived.edit_graph is None
    prepared.prepare_edits()
    assert prepared.structure_loader is None and prepared._derived.resolver is not None
    edit = prepared._derived.edit_graph
    assert edit is not None
    path = sorted(r.path for r in prepared.files if r is not None and "mod" in r.path)[2]
    text = (synthetic_repo / path).read_text(encoding="utf-8") + "\n\ndef later(q):\n    return later(q)\n"
    for index in (prepared, plain):
        edit_file(index, synthetic_repo, path, text)
    assert prepared._derived.edit_graph is edit
    for name in ("live", "thresholds", "rowsum", "df"):
        np.testing.assert_array_equal(getattr(prepared, name), getattr(plain, name))
    assert (prepared.relation_matrix() != plain.relation_matrix()).nnz == 0


def test_a_row_that_lost_an_edge_and_then_dies_counts_its_slots_once(tmp_path, monkeypatch):
    """A call site loses its edge when the function it called is deleted (a freed slot stays in
    its row); when its own file is edited next, its row dies: the unused-slot count takes the
    row's other slots, not the freed one again."""
    files = {
        "b.py": "def helper(x):\n    return x\n\n\ndef other(y):\n    return y\n",
        "c.py": "from b import helper, other\n\n\ndef use(q):\n    return helper(q) + other(q)\n",
    }
    index = exact_index_of(tmp_path, files)
    monkeypatch.setattr(edit_graph_module, "REBUILD_DEAD_SHARE", 1.0)  # two files: followed anyway
    edit_file(index, tmp_path, "b.py", files["b.py"] + "\n\nX = 1\n")
    edit = index._derived.edit_graph
    edit_file(index, tmp_path, "b.py", "def helper(x):\n    return x\n")  # `other` goes
    assert_same_graph(index)
    edit_file(index, tmp_path, "c.py", files["c.py"] + "\n\nY = 2\n")
    assert index._derived.edit_graph is edit
    assert_same_graph(index)


@pytest.mark.parametrize("language", ["rust", "go", "java", "javascript"])
def test_a_resolver_taught_edits_answers_as_one_built_on_the_edited_files(language: str):
    """Each language's resolver, after learning edited files (inside bodies, which keep the symbols'
    shape: the Rust resolver then moves definitions in its crate tables instead of rebuilding them;
    and edits that change it), resolves every file's calls as a resolver built on the edited files."""
    from repomem.index.calls import CallResolution
    from repomem.languages.parsed import symbol_shape
    from repomem.languages.registry import language_named, language_of
    from repomem.languages.syntax import extract_syntax
    from tests.unit import test_lang_go, test_lang_java, test_lang_javascript, test_lang_rust

    module = {"rust": test_lang_rust, "go": test_lang_go, "java": test_lang_java,
              "javascript": test_lang_javascript}[language]
    files = sorted((path, text) for path, text in module.FILES.items()
                   if language_of(path) is not None and language_named(language_of(path)).resolves_calls)
    syntax = [extract_syntax(path, language_of(path), text, "statement") for path, text in files]
    graph = Config().graph
    taught = CallResolution(syntax, graph)
    for file_id in range(len(files)):  # every table built before the edits, as in a running index
        taught.resolve_file(file_id)
    statement = {"rust": "let edited = 0;", "go": "_ = 0", "java": "int edited = 0;", "javascript": "edited();"}
    kept_shape = 0
    for file_id, (path, text) in enumerate(files):
        lines = text.split("\n")
        # A statement at the top of the first function body: the definitions after it get other nodes.
        opener = next((i for i, line in enumerate(lines) if line.rstrip().endswith("{") and "(" in line
                       and not line.strip().startswith(("if", "for", "while", "switch", "match", "}"))), None)
        if opener is None:
            continue
        comment = language_named(language_of(path)).line_comment
        for edited_text in ("\n".join(lines[:opener + 1] + [statement[language]] + lines[opener + 1:]),
                            text + f"\n{comment} tail\n"):
            edited = extract_syntax(path, language_of(path), edited_text, "statement")
            kept_shape += symbol_shape(edited) == symbol_shape(syntax[file_id])
            syntax[file_id] = edited
            taught.learn(file_id, edited)
            fresh = CallResolution(syntax, graph)
            for other in range(len(files)):
                assert taught.resolve_file(other) == fresh.resolve_file(other), (path, files[other][0])
    assert kept_shape >= len(files)  # most edits kept the shape: the in-place path was taken


def test_the_python_resolver_keeps_its_answers_through_edits_inside_bodies():
    """A new version of a file with the same definitions and imports (keystrokes inside bodies,
    calls typed, changed and removed) keeps the Python resolver's tables and memo of answers, and
    it resolves every file's calls as a resolver built on the edited files; an edit that changes a
    definition starts the answers again."""
    from repomem.index.calls import CallResolution
    from repomem.languages.syntax import extract_syntax

    paths = sorted(NAMESAKE_FILES)
    texts = [NAMESAKE_FILES[path] for path in paths]
    graph = Config().graph
    syntax = [extract_syntax(path, "python", text, "statement") for path, text in zip(paths, texts)]
    taught = CallResolution(syntax, graph)
    taught.affected_by({0}, frozenset({"helper"}))  # the lookup keys built, as in a running index
    for file_id in range(len(paths)):
        taught.resolve_file(file_id)
    (resolver,) = taught._resolvers.values()
    core = paths.index("core.py")
    edits = [
        ("return 1\n", "return 11\n", True),
        ("return self.save()", "return self.save() + helper(2)", True),  # a call typed
        ("return self.save() + helper(2)", "return self.name()", True),
        ("def unrelated(y):\n    return y", "def unrelated(y):\n    return helper(y)", True),
        ("def unrelated(y):", "def unrelated(y, z=0):", True),  # a signature: the same definition
        ("class User(Base):", "class User(object):", False),  # its bases: another definition
    ]
    for old, new, kept in edits:
        assert old in texts[core]
        texts[core] = texts[core].replace(old, new, 1)
        syntax[core] = extract_syntax("core.py", "python", texts[core], "statement")
        answers = dict(resolver._names_memo)
        assert answers
        taught.learn(core, syntax[core])
        assert (resolver._names_memo == answers) is kept, (old, new)
        fresh = CallResolution(syntax, graph)
        for file_id in range(len(paths)):
            assert taught.resolve_file(file_id) == fresh.resolve_file(file_id), (old, new, paths[file_id])
        assert taught.affected_by({core}, frozenset({"helper"})) == fresh.affected_by({core}, frozenset({"helper"}))


def _edges_by_path(index: RepoIndex) -> set[tuple]:
    """Every call edge as (caller path, call node, callee path, definition node, hops)."""
    path = {f: r.path for f, r in enumerate(index.files) if r is not None}
    rows = index.all_calls()
    return {(path[s], sn, path[t], tn, h) for s, sn, t, tn, h in rows.tolist()}


NAMESAKE_FILES = {
    "core.py": ("class Base:\n    def save(self):\n        return 1\n\n\nclass User(Base):\n"
                "    def name(self):\n        return self.save()\n\n\ndef helper(x):\n    return x\n\n\n"
                "def unrelated(y):\n    return y\n"),
    "hub.py": "from core import helper as aliased\nfrom core import User\n",  # re-exports
    "views.py": ("from core import helper, User\n\n\nclass Admin(User):\n    def run(self):\n"
                 "        return self.save() + self.name()\n\n\ndef view(q):\n    return helper(q) + User().name()\n"),
    "chain.py": "from hub import aliased\n\n\ndef far(q):\n    return aliased(q)\n",
    "plain.py": "import core\n\n\ndef direct(q):\n    return core.unrelated(q)\n",
    "quiet.py": "from core import User\n\n\ndef make():\n    return User()\n",
}
# Edits of core.py that change its symbols' shape, each followed by a comparison with a whole build.
NAMESAKE_EDITS = [
    ("a new function", lambda t: t + "\n\ndef typed_later(z):\n    return z\n"),
    ("a method the subclass calls, on the subclass's base", lambda t: t.replace(
        "class User(Base):\n", "class User(Base):\n    def save(self):\n        return 2\n\n")),
    ("a re-exported function renamed", lambda t: t.replace("def helper(x)", "def helper_two(x)")),
    ("it comes back", lambda t: t.replace("def helper_two(x)", "def helper(x)")),
    ("a namesake defined again below (the last one wins)", lambda t: t + "\n\ndef helper(x):\n    return -x\n"),
    ("a function turned class", lambda t: t.replace("def unrelated(y):\n    return y\n",
                                                    "class unrelated:\n    pass\n")),
    ("a new name the class bases resolve through", lambda t: "Base = object\n" + t.replace(
        "class Base:", "class Base2:").replace("class User(Base):", "class User(Base2):") +
     "\n\nclass Base:\n    def save(self):\n        return 3\n"),
    ("an import added", lambda t: "from views import view\n" + t),
    ("a function renamed that a file calls through the module", lambda t: t.replace(
        "def unrelated(y):", "def unrelated_gone(y):").replace("class unrelated:", "class unrelated_gone:")),
]


def test_an_edit_that_changes_symbols_re_resolves_only_the_files_that_look_the_changed_names_up(
        tmp_path, monkeypatch):
    """After each shape-changing edit of core.py, every call edge is what a whole build of the same
    files gives, though files whose callees, bases and imports name none of the changed names were
    not resolved again (their rows into core.py only followed the definitions' new nodes)."""
    from repomem.index.calls import CallResolution

    root = tmp_path / "live"
    root.mkdir()
    index = exact_index_of(root, NAMESAKE_FILES)
    resolved: list[str] = []
    resolve_file = CallResolution.resolve_file

    def counted(self, file_id):
        resolved.append(index.files[file_id].path)
        return resolve_file(self, file_id)

    monkeypatch.setattr(CallResolution, "resolve_file", counted)
    text = NAMESAKE_FILES["core.py"]
    skipped: dict[str, set[str]] = {}
    for step, (what, edit) in enumerate(NAMESAKE_EDITS):
        text = edit(text)
        resolved.clear()
        edit_file(index, root, "core.py", text)
        skipped[what] = set(NAMESAKE_FILES) - set(resolved)
        whole_root = tmp_path / f"whole{step}"
        whole_root.mkdir()
        whole = exact_index_of(whole_root, {**NAMESAKE_FILES, "core.py": text})
        assert _edges_by_path(index) == _edges_by_path(whole), what
        assert_same_graph(index)
    # Not vacuous: the edges above were reached by following, not by resolving everything again.
    assert skipped["a new function"] == {"hub.py", "views.py", "chain.py", "plain.py", "quiet.py"}
    assert skipped["a re-exported function renamed"] == {"plain.py", "quiet.py"}  # chain.py: through hub.py
    assert skipped["a new name the class bases resolve through"] == {"plain.py"}  # it calls none of them
    assert "plain.py" in skipped["a method the subclass calls, on the subclass's base"]
    assert "plain.py" not in skipped["a function renamed that a file calls through the module"]


def _subclass_chain() -> dict[str, str]:
    """core.Base <- a.A <- b.B ... <- f.F, each in its own file importing the one before."""
    files = {"core.py": "class Root:\n    def save(self):\n        return 1\n\n\nclass Base(Root):\n    pass\n",
             "a.py": "from core import Base\n\n\nclass A(Base):\n    pass\n"}
    for before, name in zip("abcde", "bcdef"):
        parent = before.upper()
        files[f"{name}.py"] = f"from {before} import {parent}\n\n\nclass {name.upper()}({parent}):\n    pass\n"
    files["far.py"] = "from f import F\n\n\ndef go(x):\n    return F.save(x) + F.run(x)\n"
    return files


_BASES = ("class Base:\n    def save(self):\n        return 1\n\n\n"
          "class Base2:\n    def save(self):\n        return 2\n\n\nclass User(Base):\n    pass\n")
_HUBS = {"core.py": "def unrelated(y):\n    return y\n", "hubx.py": "from core import helper as hx\n",
         "hub1.py": "from hubx import hx as h1\n", "a_hub2.py": "import core\nfrom hub1 import h1 as h2\n",
         "far.py": "from a_hub2 import h2\n\n\ndef go(x):\n    return h2(x)\n"}
_PACKAGE = {"pkg/__init__.py": "X = 1\n", "pkg/mod.py": _BASES,
            "user.py": "import pkg\n\n\ndef go(u):\n    return pkg.mod.User.save(u) + pkg.mod.f()\n"}
# Chains a lookup follows through files that never import the edited one (found in review): (files,
# the edited file, its new text). After the edit every edge must be what a whole build gives.
CHAINS = {
    "a class in another file whose base changed": (
        {"core.py": _BASES, "views.py": "from core import User\n\n\nclass Admin(User):\n    pass\n",
         "far.py": "from views import Admin\n\n\ndef go(x):\n    return Admin.save(x)\n"},
        "core.py", _BASES.replace("class User(Base):", "class User(Base2):")),
    "six subclasses away, a method that shadows the root's": (
        _subclass_chain(), "core.py", _subclass_chain()["core.py"].replace(
            "class Base(Root):\n    pass\n", "class Base(Root):\n    def save(self):\n        return 2\n")),
    "six subclasses away, a new method": (
        _subclass_chain(), "core.py", _subclass_chain()["core.py"] + "\n    def run(self):\n        return 3\n"),
    "a name re-exported three times over, defined at last": (
        _HUBS, "core.py", _HUBS["core.py"] + "\n\ndef helper(x):\n    return x\n"),
    "a submodule reached through its package, a method added": (
        _PACKAGE, "pkg/mod.py", _BASES.replace("    pass\n", "    def save(self):\n        return 2\n")),
    "an import that now binds a subclass's base elsewhere": (
        {"base1.py": "class Base:\n    def save(self):\n        return 1\n",
         "base2.py": "class Base:\n    def save(self):\n        return 2\n",
         "core.py": "from base1 import Base\n\n\nclass User(Base):\n    pass\n",
         "views.py": "from core import User\n\n\nclass Admin(User):\n    pass\n",
         "far.py": "from views import Admin\n\n\ndef go(x):\n    return Admin.save(x)\n"},
        "core.py", "from base2 import Base\n\n\nclass User(Base):\n    pass\n"),
    "a submodule reached through its package, a function added": (
        _PACKAGE, "pkg/mod.py", _BASES + "\n\ndef f():\n    return 2\n"),
}


# Files added and removed (the edited file's new text None: it goes), reached through other files.
CHAINS.update({
    "a new module whose function a re-export passes on": (
        {"hub.py": "from helpers import f as g\n", "far.py": "from hub import g\n\n\ndef go(x):\n    return g(x)\n"},
        "helpers.py", "def f(x):\n    return x\n"),
    "a module removed that a subclass's base came from": (
        {"base1.py": "class Base:\n    def save(self):\n        return 1\n",
         "core.py": "from base1 import Base\n\n\nclass User(Base):\n    def run(self):\n        return self.save()\n",
         "far.py": "from core import User\n\n\ndef go(x):\n    return User.save(x) + User.run(x)\n"},
        "base1.py", None),
    "a new package module reached through its package": (
        {"pkg/__init__.py": "X = 1\n", "user.py": "import pkg\n\n\ndef go():\n    return pkg.extra.f()\n"},
        "pkg/extra.py", "def f():\n    return 2\n"),
})


# Module names found again after files come and go (found in review): a relative import asking
# for its own package, an import whose module now resolves elsewhere, two files claiming one
# name (a stub beside its module: the first path holds it, as in a whole build), tail ties.
_STUB = {"a.py": "def f():\n    return 1\n", "a.pyi": "def f(): ...\n",
         "user.py": "from a import f\n\n\ndef go():\n    return f()\n"}
_TIES = {"x/util.py": "def f():\n    return 1\n", "y/util.py": "def f():\n    return 2\n",
         "user.py": "import util\n\n\ndef go():\n    return util.f()\n"}
_SHADOWED = {"other/pkg.py": "class Base:\n    def save(self):\n        return 1\n",
             "pkg/mod.py": "from . import Base\n\n\nclass User(Base):\n    pass\n",
             "hub.py": "from pkg.mod import User\n",
             "far.py": "from hub import User\n\n\ndef go(u):\n    return User.save(u)\n"}
REGISTRY = {
    "a package that now holds what `from . import Base` found elsewhere": (
        _SHADOWED, [("pkg/__init__.py", "X = 1\n"), ("pkg/__init__.py", None)]),
    "a module added where a re-export's module was found by its tail": (
        {"other/pkg.py": "def helper():\n    return 1\n", "hub.py": "from pkg import helper as g\n",
         "far.py": "from hub import g\n\n\ndef go():\n    return g()\n"},
        [("pkg.py", "X = 1\n"), ("pkg.py", None)]),
    "a package under `import pkg.util as u`, re-exported": (
        {"pkg/__init__.py": "X = 1\n", "pkg/util/sub.py": "def f():\n    return 1\n",
         "hub.py": "import pkg.util as u\n", "far.py": "from hub import u\n\n\ndef go():\n    return u.sub.f()\n"},
        [("pkg/util/__init__.py", "X = 1\n"), ("pkg/util/__init__.py", None)]),
    "a stub beside its module, the module edited": (
        _STUB, [("a.py", "def f():\n    return 2\n\n\nclass f2:\n    pass\n"),
                ("user.py", "from a import f\n\n\ndef go():\n    return f() + 1\n")]),
    "a module next to a package of the same name, added": (
        {"a/__init__.py": "def f():\n    return 2\n", "user.py": "from a import f\n\n\ndef go():\n    return f()\n"},
        [("a.py", "def f():\n    return 1\n")]),
    "tail candidates tied, one removed and added back": (
        _TIES, [("x/util.py", None), ("x/util.py", "def f():\n    return 1\n")]),
    "tail candidates tied, a third added first in path order": (_TIES, [("a/util.py", "def f():\n    return 3\n")]),
    # A name defined twice in one Go package or Java package (no compiler takes it, an editor holds
    # it mid-edit): the first file in path order holds it, after edits as after a whole build.
    "go: a function in two files of a package, the first removed and added back": (
        {"go.mod": "module example.com/m\n\ngo 1.22\n",
         "util/a.go": "package util\n\nfunc Helper() int {\n\treturn 1\n}\n",
         "main.go": "package main\n\nimport \"example.com/m/util\"\n\nfunc main() {\n\t_ = util.Helper()\n}\n"},
        [("util/z.go", "package util\n\nfunc Helper() int {\n\treturn 2\n}\n"), ("util/a.go", None),
         ("util/a.go", "package util\n\nfunc Helper() int {\n\treturn 1\n}\n")]),
    "java: a class in two files of a package, the first removed and added back": (
        {"com/shop/Helper.java": "package com.shop;\n\npublic class Helper {\n    public static int run() {\n"
                                 "        return 1;\n    }\n}\n",
         "com/app/Main.java": "package com.app;\n\nimport com.shop.Helper;\n\npublic class Main {\n"
                              "    int go() {\n        return Helper.run();\n    }\n}\n"},
        [("com/shop/AHelper.java", "package com.shop;\n\nclass Helper {\n    static int run() {\n        return 2;\n"
                                   "    }\n}\n"), ("com/shop/AHelper.java", None),
         ("com/shop/AHelper.java", "package com.shop;\n\nclass Helper {\n    static int run() {\n        return 2;\n"
                                   "    }\n}\n")]),
}


@pytest.mark.parametrize("case", [*CHAINS, *REGISTRY])
def test_an_edit_reaches_files_that_look_it_up_through_other_files(tmp_path, case):
    """After each step (a file edited, added, or removed: None) every call edge is a whole build's."""
    if case in CHAINS:
        files, edited, text = CHAINS[case]
        steps = [(edited, text)]
    else:
        files, steps = REGISTRY[case]
    live = tmp_path / "live"
    for name in files:
        (live / name).parent.mkdir(parents=True, exist_ok=True)
    index = exact_index_of(live, files)
    seen = [_edges_by_path(index)]
    state = dict(files)
    for number, (path, text) in enumerate(steps):
        if text is None:
            (live / path).unlink()
            apply_changes(index, [], [path])
            state.pop(path)
        else:
            edit_file(index, live, path, text)
            state[path] = text
        whole_root = tmp_path / f"whole{number}"
        for name in state:
            (whole_root / name).parent.mkdir(parents=True, exist_ok=True)
        whole = exact_index_of(whole_root, state)
        assert _edges_by_path(index) == _edges_by_path(whole), (path, text)
        seen.append(_edges_by_path(whole))
    assert any(a != b for a, b in zip(seen, seen[1:])), "no step moved an edge: the case can not fail"


def test_edits_that_keep_a_files_graph_recall_its_searches_and_give_the_same_index(synthetic_repo, monkeypatch):
    """Keystrokes that leave the edited file's syntax tree and call rows as they were (a number, a
    name inside a statement) take its searches from the last edit's memo (`search_memo`) instead
    of searching again; the index they leave is, bit for bit, the one the same edits leave with
    every search made. An edit of another file, or one that changes the file's tree, searches."""
    import repomem.index.relations as relations

    recalled: list[tuple[int, int]] = []
    recalled_rows = relations.recalled_rows

    def counted(*arguments):
        rows = recalled_rows(*arguments)
        recalled.append((int((rows >= 0).sum()), int(rows.shape[0])))
        return rows

    monkeypatch.setattr(relations, "recalled_rows", counted)
    config = Config()
    assert config.relations.same_file_weight == 0.0
    remembering, searching = open_index(synthetic_repo, config), open_index(synthetic_repo, config)
    paths = sorted(r.path for r in remembering.files if r is not None and "mod" in r.path)
    typed, other = paths[3], paths[5]
    text = (synthetic_repo / typed).read_text(encoding="utf-8")
    assert "x * 5 + y" in text and "total_1 -= item\n" in text
    steps = [
        ("search", typed, text + "\n\nZ = 3\n"),  # a new statement: the first edit searches
        ("recall", typed, text.replace("x * 5 + y", "x * 55 + y", 1) + "\n\nZ = 3\n"),
        ("recall", typed, text.replace("x * 5 + y", "x * 556 + y", 1) + "\n\nZ = 3\n"),
        ("recall", typed, text.replace("x * 5 + y", "x * 556 + y", 1).replace("total_1 -= item\n", "total_1 -= items\n")
         + "\n\nZ = 34\n"),
        ("search", other, (synthetic_repo / other).read_text(encoding="utf-8") + "\n\nW = 1\n"),
        ("search", typed, text.replace("x * 5 + y", "x * 5 + yy", 1) + "\n\nZ = 3\n"),  # after another file
        ("recall", typed, text.replace("x * 5 + y", "x * 5 + yyy", 1) + "\n\nZ = 3\n"),
        ("search", typed, text.replace("x * 5 + y", "x * 5 + yyy", 1) + "\n\nZ = 3\nV = 4\n"),  # a new node
    ]
    for expected, path, new_text in steps:
        recalled.clear()
        rows = edit_file(remembering, synthetic_repo, path, new_text)
        assert len(rows) >= relations.TWO_THREAD_MIN_ROWS and len(recalled) == 1
        hits, starts = recalled[0]
        assert (hits == starts > 0) if expected == "recall" else hits == 0, (expected, path, recalled)
        if searching._derived.edit_graph is not None:
            searching._derived.edit_graph.searches.memo = None  # every search made
        edit_file(searching, synthetic_repo, path, new_text)
        assert recalled[-1][0] == 0
        for ours, theirs in zip(remembering.delta_entries, searching.delta_entries):
            np.testing.assert_array_equal(ours, theirs)
        np.testing.assert_array_equal(remembering.thresholds, searching.thresholds)
    assert (remembering.relation_matrix() != searching.relation_matrix()).nnz == 0
