"""Unit tests: config, scan, tokenizer, syntax extraction, call resolution, windows, positions."""

from __future__ import annotations

import dataclasses
import os
import pickle
import pickletools
import time
from pathlib import Path

import numpy as np
import pytest

import repomem.index.tokens as tokens_module
from repomem.config import Config, FragmentConfig, config_from_mapping, default_config, load_config
from repomem.failures import Failure
from repomem.index.batch import pack_analyses, unpack_analyses
from repomem.index.fragments import window_bounds
from repomem.index.indexed_files import analyze_file
from repomem.index.scan import Skipped, SourceFile, list_candidates, read_source
from repomem.index.tokens import line_tokens, tokenize
from repomem.languages.parsed import CallSite, CallSites
from repomem.languages.python.calls import module_name, resolve_calls
from repomem.languages.syntax import extract_syntax
from repomem.positions import locate, parse_position, query_first_line, text_before_cursor
from repomem.repository_root import find_repo_root
from repomem.service import RepoService
from tests.repos import PACKAGE_FILES, write_repo

# -- config --------------------------------------------------------------------------------------

def test_config_bad_values_fall_back_with_warnings():
    config, warnings = config_from_mapping({
        "retrieval": {"alpha": "high", "top_k": 7, "nonsense": 1},
        "graph": {"granularity": "tokens"},
        "nope": {},
        "relations": {"relation_cutoff": -1.0},
    })
    assert config.retrieval.top_k == 7
    assert config.retrieval.alpha == Config().retrieval.alpha
    assert config.graph.granularity == "statement"
    assert config.relations.relation_cutoff == Config().relations.relation_cutoff
    assert len(warnings) == 5
    assert any(w.key == "retrieval.alpha" and w.kind == "wrong type" for w in warnings)


def test_config_file_with_syntax_error_uses_defaults(tmp_path):
    (tmp_path / "repomem.toml").write_text("[retrieval\nalpha = ", encoding="utf-8")
    config, warnings = load_config(tmp_path)
    assert config == default_config()
    assert len(warnings) == 1 and "repomem.toml" in warnings[0]


# -- scan ----------------------------------------------------------------------------------------

def scan(root: Path):
    config = Config().scan
    candidates, skipped = list_candidates(root, config)
    read = [read_source(root, c, config) for c in candidates]
    return (
        {s.path for s in read if isinstance(s, SourceFile)},
        {s.path: s.reason for s in [*skipped, *(r for r in read if isinstance(r, Skipped))]},
    )


def test_scan_filters(tmp_path):
    root = tmp_path / "repo"
    write_repo(root, {
        "keep.py": "x = 1\n",
        "lib/keep.js": "let y = 2;\n",
        ".env": "SECRET=1\n",
        ".env.local": "SECRET=2\n",
        "certs/server.pem": "-----BEGIN-----\n",
        "keys/id_rsa": "key\n",
        "node_modules/dep/index.js": "module.exports = 1;\n",
        ".venv/lib/site.py": "x = 1\n",
        "build/out.py": "x = 1\n",
        "pkg.egg-info/info.py": "x = 1\n",
        "ignored_dir/a.py": "x = 1\n",
        "notes.txt": "hello\n",
        "gen/minified.js": "var a=1;" * 2000 + "\n",
    })
    (root / "binary.py").write_bytes(b"x = 1\x00\x01\x02")
    (root / "huge.py").write_bytes(b"# " + b"x" * 100 + b"\n" * 1_100_000)
    (root / "latin1.py").write_bytes("name = 'caf\xe9'\n".encode("latin-1"))
    (root / ".gitignore").write_text("ignored_dir/\n*.log\n", encoding="utf-8")
    (root / "sub").mkdir()
    (root / "sub/.gitignore").write_text("local_only.py\n", encoding="utf-8")
    (root / "sub/local_only.py").write_text("x = 1\n", encoding="utf-8")
    (root / "sub/kept.py").write_text("x = 1\n", encoding="utf-8")
    outside = tmp_path / "outside.py"
    outside.write_text("secret = 1\n", encoding="utf-8")
    os.symlink(outside, root / "escape.py")
    os.symlink(root / "keep.py", root / "alias.py")
    os.symlink(root / "loop_a", root / "loop_b")
    os.symlink(root / "loop_b", root / "loop_a")
    os.symlink(root / "lib", root / "lib_link")

    indexed, skipped = scan(root)
    assert indexed == {"keep.py", "lib/keep.js", "latin1.py", "sub/kept.py", "alias.py"}
    assert skipped[".env"].startswith("secret")
    assert skipped[".env.local"].startswith("secret")
    assert skipped["certs/server.pem"].startswith("secret")
    assert skipped["keys/id_rsa"].startswith("secret")
    assert skipped["binary.py"] == "binary file"
    assert "larger than" in skipped["huge.py"]
    assert "minified" in skipped["gen/minified.js"]
    assert skipped["escape.py"] == "symlink points outside the repository"
    assert "node_modules/dep/index.js" not in indexed


def test_scan_uses_git_when_present(tmp_path):
    import subprocess

    root = write_repo(tmp_path / "repo", {"tracked.py": "a = 1\n", "untracked.py": "b = 2\n", "ignored.py": "c\n"})
    (root / ".gitignore").write_text("ignored.py\n", encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "tracked.py", ".gitignore"], check=True)
    indexed, _ = scan(root)
    assert indexed == {"tracked.py", "untracked.py"}


def test_non_utf8_is_decoded_with_replacement(tmp_path):
    root = write_repo(tmp_path / "repo", {})
    (root / "latin1.py").write_bytes("name = 'caf\xe9'\n".encode("latin-1"))
    config = Config().scan
    candidates, _ = list_candidates(root, config)
    source = read_source(root, candidates[0], config)
    assert isinstance(source, SourceFile) and "\ufffd" in source.text


# -- tokenizer -----------------------------------------------------------------------------------

def test_tokenizer_splits_identifiers():
    config = Config().bm25
    assert tokenize("user = get_user_name(HTTPResponse, 42)", config) == [
        "user", "get_user_name", "get", "user", "name", "httpresponse", "http", "response", "42",
    ]
    assert tokenize("a.b -> c", config) == ["a", "b", "c"]


def test_window_term_ids_are_the_windows_tokens_and_skip_uncovered_lines():
    config = Config().bm25
    lines = ["alpha beta", "", "gamma alpha", "uncovered", "beta delta"]
    tokens = line_tokens("\n".join(lines), config)
    assert tokens.words == ("alpha", "beta", "gamma", "uncovered", "delta")
    vocabulary = {"delta": 0}
    starts, ends = np.array([0, 4, 1]), np.array([3, 5, 3])
    windows = tokens.window_term_ids(vocabulary, starts, ends)
    words = {term: word for word, term in vocabulary.items()}
    for window, (a, b) in zip(windows, zip(starts, ends)):
        assert [words[t] for t in window.tolist()] == [t for line in lines[a:b] for t in tokenize(line, config)]
    # Only tokens some window shows join the vocabulary, after those it had, in order of appearance.
    assert list(vocabulary) == ["delta", "alpha", "beta", "gamma"]
    assert tokens.window_term_ids({}, np.array([1]), np.array([2]))[0].shape == (0,)  # a blank line
    # Windows covering every token (as a file's windows do) take the path without a sort: the same
    # terms, the vocabulary grown in order of first appearance after what it had.
    vocabulary = {"gamma": 0, "zeta": 1}
    starts, ends = np.array([0, 2]), np.array([3, 5])
    windows = tokens.window_term_ids(vocabulary, starts, ends)
    words = {term: word for word, term in vocabulary.items()}
    for window, (a, b) in zip(windows, zip(starts, ends)):
        assert [words[t] for t in window.tolist()] == [t for line in lines[a:b] for t in tokenize(line, config)]
    assert list(vocabulary) == ["gamma", "zeta", "alpha", "beta", "uncovered", "delta"]
    assert windows[0].dtype == np.int32


def test_a_forked_worker_tokenizes_while_the_parent_holds_the_word_table():
    """A parse worker forked while another thread of the parent is inside the word table (its lock
    held) starts with fresh tables instead of waiting for a lock nobody will release."""
    config = Config().bm25
    tokens_module.line_tokens("warm_table = 1", config)
    with tokens_module._tables_lock:
        pid = os.fork()
        if pid == 0:  # the child: its own tables, a free lock
            got = tokens_module.line_tokens("hello_world = fooBar", config)
            os._exit(0 if got.words[:3] == ("hello_world", "hello", "world") else 3)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child blocked on the parent's word-table lock")


@pytest.mark.parametrize("text", ["", "\n", "x = getUserName(a_b)\r\n\n  HTTPServer 42\n", "tail without break"])
def test_line_tokens_are_each_lines_tokens(text):
    config = Config().bm25
    tokens = line_tokens(text, config)
    lines = text.split("\n")
    assert tokens.line_offsets.shape == (len(lines) + 1,)
    for number, line in enumerate(lines):
        a, b = tokens.line_offsets[number], tokens.line_offsets[number + 1]
        assert [tokens.words[i] for i in tokens.ids[a:b].tolist()] == tokenize(line, config)


@pytest.mark.parametrize("source, expected", [
    ("self.save()", "self.save"), ("save()", "save"), ("a . b ()", "a.b"), ("a.\\\n    b()", "a.b"),
    ("a.b(c).d()", None), ("a[0].b()", None), ("ünïcode.call()", "ünïcode.call"),
    ("x" + ".y" * 32 + "()", "x" + ".y" * 32), ("x" + ".y" * 33 + "()", None),
])
def test_callee_names_read_from_text_or_walked_agree(source, expected):
    """Plainly written callees are read off their text, others walked down the attribute chain;
    both give the dotted name, and chains past MAX_DOTTED_PARTS attributes are not names."""
    from repomem.languages.python.syntax import CALL_QUERY, dotted_name
    from repomem.languages.treesitter import capture_nodes, parse
    root = parse("python", source.encode("utf-8")).root_node
    outermost = max(capture_nodes("python", CALL_QUERY, root, "callee"), key=lambda callee: len(callee.text))
    assert dotted_name(outermost) == expected


# -- syntax --------------------------------------------------------------------------------------

SAMPLE = '''import os


class Greeter(Base):
    """Doc."""

    def greet(self, name):
        if name:
            return self.format(name)
        else:
            print(name)

    def format(self, name):
        return name.title()


def main():
    g = Greeter()
    g.greet(os.getcwd())
'''


def test_statement_nodes_and_symbols():
    syntax = extract_syntax("m.py", "python", SAMPLE, "statement")
    starts = syntax.start_line.tolist()
    # the root, the import, class, its block, methods, their blocks, statements, clauses
    assert starts[0] == 0 and syntax.parent[0] == -1
    assert syntax.n_lines == SAMPLE.count("\n")  # a final newline starts no line
    assert 7 in starts and 9 in starts  # `if name:` and `else:` lines (0-based)
    for node in range(1, syntax.n_nodes):  # every parent encloses its child
        parent = syntax.parent[node]
        assert syntax.start_line[parent] <= syntax.start_line[node]
        assert syntax.end_line[parent] >= syntax.end_line[node]
    names = {(d.name, d.kind, d.scope) for d in syntax.definitions}
    assert names == {("Greeter", "class", ""), ("greet", "function", "Greeter"),
                     ("format", "function", "Greeter"), ("main", "function", "")}
    greeter = next(d for d in syntax.definitions if d.name == "Greeter")
    assert greeter.bases == ("Base",)
    callees = {(c.callee, c.enclosing_class) for c in syntax.calls}
    assert ("self.format", "Greeter") in callees
    assert ("os.getcwd", "") in callees and ("g.greet", "") in callees
    assert ("name.title", "Greeter") in callees


def test_file_syntax_keeps_its_call_sites_as_columns():
    """What a parse worker sends back: every field equal after a pickle round trip, the call sites
    columns (no CallSite tuple in the pickle), iterating as CallSite tuples with plain ints."""
    syntax = extract_syntax("m.py", "python", SAMPLE, "statement")
    assert syntax.calls and syntax.definitions and isinstance(syntax.calls, CallSites)
    blob = pickle.dumps(syntax, protocol=pickle.HIGHEST_PROTOCOL)
    back = pickle.loads(blob)
    for name in ("path", "language", "definitions", "imports", "calls", "over_node_limit"):
        assert getattr(back, name) == getattr(syntax, name)
    for name in ("parent", "start_line", "end_line", "length", "line_chars"):
        np.testing.assert_array_equal(getattr(back, name), getattr(syntax, name))
    assert all(isinstance(c, CallSite) and type(c.node) is int and type(c.hops) is int for c in back.calls)
    assert len(back.calls) == len(list(back.calls)) == len(list(back.calls.rows()))
    assert [tuple(c) for c in back.calls] == list(back.calls.rows())
    assert CallSites.of_rows(list(back.calls)) == back.calls and CallSites.of_rows([]) == CallSites()
    names = {argument for _, argument, _ in pickletools.genops(blob) if isinstance(argument, str)}
    assert "CallSites" in names and "CallSite" not in names  # only the columns' class is named
    assert pickle.loads(pickle.dumps(dataclasses.replace(syntax, calls=CallSites()))).calls == CallSites()


def test_call_site_names_are_kept_once_in_a_build_and_in_a_load(synthetic_repo):
    """A callee called from many places is one string object: across the files of a parse worker's
    batch (pickled once), across batches once unpacked, and in an index loaded from disk; a copy per
    call site was resident for the index's life. The table is the build's or the load's own, not
    the process's (sys.intern kept every name an editor ever typed, immortal on Python 3.12)."""
    twice = SAMPLE + "\n\ndef again():\n    os.getcwd()\n    os.getcwd()\n"
    analyses = [analyze_file(SourceFile(path, "python", twice, f"d{n}", len(twice), 0), Config())
                for n, path in enumerate(("a.py", "b.py"))]
    getcwd = [c for a in analyses for c in a.syntax.calls.callee if c == "os.getcwd"]
    assert len(getcwd) >= 4 and len({id(c) for c in getcwd}) > 1  # as parsed: a copy each
    blob = pickle.dumps(pack_analyses(analyses), protocol=pickle.HIGHEST_PROTOCOL)
    assert sum(1 for _, argument, _ in pickletools.genops(blob) if argument == "os.getcwd") == 1
    names: dict[str, str] = {}
    batches = [unpack_analyses(pickle.loads(blob), names) for _ in range(2)]
    getcwd = [c for batch in batches for a in batch for c in a.syntax.calls.callee if c == "os.getcwd"]
    assert len(getcwd) >= 8 and len({id(c) for c in getcwd}) == 1 and names["os.getcwd"] is getcwd[0]
    for a, b in zip(analyses, batches[0]):
        assert a.syntax.calls == b.syntax.calls
    for _ in range(2):  # built and saved, then loaded from the disk by another service
        service = RepoService.open(synthetic_repo, Config())
        assert isinstance(service, RepoService) and not isinstance(service.ensure_index(), Failure)
    loaded = service.index
    assert loaded is not None and loaded.structure_loader is not None  # read from symbols.json
    loaded.ensure_structure()
    callees = [c for syntax in loaded.syntax if syntax is not None for c in syntax.calls.callee]
    assert len({id(c) for c in callees}) == len(set(callees)) < len(callees)


def test_named_granularity_is_larger_and_syntax_errors_still_parse():
    statement = extract_syntax("m.py", "python", SAMPLE, "statement")
    named = extract_syntax("m.py", "python", SAMPLE, "named")
    assert named.n_nodes > 2 * statement.n_nodes
    broken = extract_syntax("b.py", "python", "def f(:\n    return g(\nclass\n", "statement")
    assert broken.n_nodes >= 1


def test_other_languages_get_statement_nodes():
    syntax = extract_syntax("a.js", "javascript", "function f(x) {\n  if (x) {\n    return 1;\n  }\n}\n", "statement")
    assert syntax.n_nodes >= 4 and syntax.calls == CallSites() and len(syntax.calls) == 0


# -- call resolution -----------------------------------------------------------------------------

def test_module_names():
    assert module_name("pkg/sub/mod.py") == "pkg.sub.mod"
    assert module_name("pkg/__init__.py") == "pkg"
    # Split as strings; the reference is pathlib's reading of the same file paths.
    from pathlib import PurePosixPath

    from repomem.languages.python.calls import module_stem

    def by_pathlib(path: str) -> str:
        parts = list(PurePosixPath(path).with_suffix("").parts)
        return ".".join(parts[:-1] if parts and parts[-1] == "__init__" else parts)

    for path in ("__init__.py", "mod.py", "a/b.c.py", "a/.hidden", "x.", "a/x.", "./a/b.py", "a//b.py", "a/./b.pyi",
                 "a/__init__.pyi", "a.b/c.py", "a/b..py", "...py", "a/.py", "a/__init__", "ü/ñ.py"):
        assert module_name(path) == by_pathlib(path), path
        assert module_stem(path) == PurePosixPath(path).stem, path


def test_call_resolution_across_files(tmp_path):
    files = {}
    for path, text in PACKAGE_FILES.items():
        if path.endswith(".py"):
            import textwrap
            source = textwrap.dedent(text).lstrip("\n")
            files[len(files)] = extract_syntax(path, "python", source, "statement")
    paths = {i: s.path for i, s in files.items()}
    edges = resolve_calls(files, 4, 8)

    def describe(edge):
        source, target = files[edge.source_file], files[edge.target_file]
        src_line = int(source.start_line[edge.source_node])
        definition = next(d for d in target.definitions if d.node == edge.target_node)
        qualified = f"{definition.scope + '.' if definition.scope else ''}{definition.name}"
        return paths[edge.source_file], src_line, qualified

    found = {describe(e) for e in edges}
    expected = {
        ("pkg/models.py", 5, "Base.validate"),  # self.validate() in Base.save
        ("pkg/models.py", 16, "slugify"),  # from .helpers import slugify
        ("pkg/models.py", 20, "Base.save"),  # self.save() found in the in-repo base class
        ("pkg/models.py", 26, "Model.register"),  # cls.register
        ("pkg/helpers.py", 4, "normalize"),  # same-module function
        ("pkg/sub/service.py", 7, "Model"),  # from ..models import Model as M; M(name)
        ("pkg/sub/service.py", 8, "Model.create"),  # from .. import models; models.Model.create
        ("pkg/sub/service.py", 9, "normalize"),  # import pkg.helpers; pkg.helpers.normalize
        ("pkg/sub/service.py", 10, "slugify"),  # re-export: from pkg import make_slug
    }
    assert expected == found
    # model.rename (a local variable), re.sub and undefined_function stay unresolved
    assert not any(f[2] == "Model.rename" for f in found)
    assert not any(f[0] == "pkg/helpers.py" and f[1] == 13 for f in found)


def test_a_module_name_claimed_by_several_files_goes_to_the_first_path_left():
    """`a.py` and `a/__init__.py` are both module `a`: the first path holds the name, as in a whole
    build, in whatever order the files were learned; when it is forgotten the next path takes it."""
    from repomem.languages.python.calls import PythonCallResolver

    def syntax(path: str, text: str):
        return extract_syntax(path, "python", text, "statement")

    files = {0: syntax("a.py", "def f():\n    pass\n"), 1: syntax("b.py", "from a import f\n\nf()\n"),
             2: syntax("a/__init__.py", "def f():\n    pass\n"), 3: syntax("src/a.py", "def g():\n    pass\n")}
    resolver = PythonCallResolver(files, 4, 8)

    def target() -> int | None:
        found = resolver.resolve_callee(1, "f", "")
        return None if found is None else found[0]

    assert target() == 0
    resolver.forget(0)
    assert target() == 2
    resolver.learn(0, files[0])  # back, learned after file 2: "a.py" sorts before "a/__init__.py"
    assert target() == 0
    resolver.forget(2)
    assert target() == 0
    resolver.forget(0)
    assert target() is None  # src/a.py is module "src.a", not "a"


# -- windows -------------------------------------------------------------------------------------

def test_windows_are_repocoder_centred():
    line_chars = np.ones(35, dtype=np.int32)
    starts, ends = window_bounds(line_chars, FragmentConfig())
    assert list(zip(starts.tolist(), ends.tolist())) == [(0, 10), (0, 20), (10, 30), (20, 35)]
    short = window_bounds(np.ones(5, dtype=np.int32), FragmentConfig())
    assert list(zip(*[a.tolist() for a in short])) == [(0, 5)]
    blank = np.zeros(30, dtype=np.int32)
    blank[25] = 3
    assert list(zip(*[a.tolist() for a in window_bounds(blank, FragmentConfig())])) == [(10, 30)]


def test_cover_nodes_are_non_overlapping_and_cover_text():
    from repomem.index.fragments import file_fragments

    text = SAMPLE * 3
    syntax = extract_syntax("m.py", "python", text, "statement")
    fragments = file_fragments(syntax, FragmentConfig())
    for w, (a, b) in enumerate(zip(fragments.starts.tolist(), fragments.ends.tolist())):
        nodes = fragments.cover_node[fragments.cover_window == w].tolist()
        assert nodes and len(nodes) == len(set(nodes))
        contained = [n for n in nodes if syntax.start_line[n] >= a and syntax.end_line[n] < b]
        assert contained, "every window of this sample holds whole statements"
        for node in contained:  # whole nodes never nest; partial owners only add their own lines
            ancestor = int(syntax.parent[node])
            while ancestor >= 0:
                assert ancestor not in contained
                ancestor = int(syntax.parent[ancestor])
        window_text = "\n".join(text.split("\n")[a:b])
        assert 0 < fragments.cover_weight[fragments.cover_window == w].sum() <= len(window_text.encode())


# -- positions -----------------------------------------------------------------------------------

def test_parse_position():
    spec = parse_position("a/b.py:12:3")
    assert not isinstance(spec, Failure) and (spec.path, spec.line, spec.column) == (Path("a/b.py"), 12, 3)
    spec = parse_position("c:/x.py:4")
    assert not isinstance(spec, Failure) and spec.line == 4 and spec.column is None
    for bad in ("a.py", "a.py:0", "a.py:x", "a.py:3:0"):
        assert isinstance(parse_position(bad), Failure)


def test_locate_and_query(tmp_path):
    text = "one\ntwo\nthree\n"
    # The empty line after the last newline is where editors put a cursor starting a new line: its
    # start only; no line after it.
    start = locate(tmp_path, "f.py", text, 4, None)
    assert not isinstance(start, Failure) and (start.line, start.column) == (3, 0)
    assert isinstance(locate(tmp_path, "f.py", text, 4, 2), Failure)
    assert isinstance(locate(tmp_path, "f.py", text, 5, None), Failure)
    assert isinstance(locate(tmp_path, "f.py", text, 2, 5), Failure)
    cursor = locate(tmp_path, "f.py", text, 3, 3)
    assert not isinstance(cursor, Failure) and (cursor.line, cursor.column) == (2, 2)
    query, first = text_before_cursor(cursor, 2)
    assert (query, first) == ("two\nth", 1)
    end = locate(tmp_path, "f.py", text, 1, None)
    assert not isinstance(end, Failure) and end.column == 3


def test_query_window_at_every_cursor_equals_the_whole_files_lines(tmp_path):
    """text_before_cursor splits the text only up to the cursor's line; the window must be the one
    the whole file's lines give, at every line and column, last lines and empty lines included."""
    text = "import os\n\ndef f(a):\n    return a\n\nx = f(1)\n"
    lines = text.split("\n")
    for line_number, line in enumerate(lines[:-1], start=1):  # the file has 6 lines
        for column in [None, *range(1, len(line) + 2)]:
            cursor = locate(tmp_path, "f.py", text, line_number, column)
            assert not isinstance(cursor, Failure)
            for n_lines in (1, 2, 3, 10):
                first = max(0, cursor.line - n_lines + 1)
                expected = "\n".join([*lines[first:cursor.line], lines[cursor.line][:cursor.column]])
                assert text_before_cursor(cursor, n_lines) == (expected, first)
                assert query_first_line(cursor.line, n_lines) == first


def test_find_repo_root(tmp_path):
    root = write_repo(tmp_path / "r", {"a/b/c.py": "x = 1\n"})
    assert find_repo_root(root / "a/b/c.py") == root
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    assert find_repo_root(lonely) is None or find_repo_root(lonely) != lonely


def test_the_repository_around_a_folder_deeper_than_path_max_is_found(tmp_path):
    """A folder whose path is longer than PATH_MAX (22 names of 200 characters): looking for the
    repository's markers there raised ENAMETOOLONG, an internal error of every command run there."""
    root = write_repo(tmp_path / "r", {"a.py": "x = 1\n"})
    name, deep = "d" * 200, root
    folder = os.open(root, os.O_RDONLY)
    try:
        for _ in range(22):  # made step by step, relative to the last: the whole path is too long for mkdir
            os.mkdir(name, dir_fd=folder)
            inner = os.open(name, os.O_RDONLY, dir_fd=folder)
            os.close(folder)
            folder = inner
            deep = deep / name
    finally:
        os.close(folder)
    assert len(os.fsencode(deep)) > 4096
    assert find_repo_root(deep) == root


def test_an_index_in_the_home_folder_makes_no_repository_of_it(tmp_path, monkeypatch):
    """An index written in the home folder (an editor's server given it as its workspace) made
    every stray file under it part of one repository; an index in any other folder still marks one."""
    home = tmp_path / "home"
    (home / ".repomem").mkdir(parents=True)
    (home / "notes").mkdir()
    (home / "project" / ".repomem").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    assert find_repo_root(home / "notes") is None
    assert find_repo_root(home / "project") == home / "project"
    (home / ".git").mkdir()  # a home folder that is a repository (dotfiles) is one
    assert find_repo_root(home / "notes") == home


# -- regressions found in review ------------------------------------------------------------------

def test_config_rejects_values_that_would_break_indexing():
    config, warnings = config_from_mapping({
        "index": {"dir_name": ""},
        "fragments": {"stride_lines": 0},
        "graph": {"strength_cutoff": 0.0, "call_weight": 1.5},
    })
    assert config == default_config()
    assert len(warnings) == 4


def test_line_endings_and_final_newline(tmp_path):
    from repomem.config import FragmentConfig as FC
    from repomem.index.fragments import file_fragments

    body = "".join(f"x{i} = {i}\n" for i in range(60))
    lf = extract_syntax("a.py", "python", body, "statement")
    assert lf.n_lines == 60
    windows = file_fragments(lf, FC())
    assert (int(windows.starts[-1]), int(windows.ends[-1])) == (40, 60)  # centre 50: [40, 60)
    root = write_repo(tmp_path / "r", {})
    (root / "crlf.py").write_bytes(body.replace("\n", "\r\n").encode())
    (root / "cr.py").write_bytes(body.replace("\n", "\r").encode())
    config = Config().scan
    candidates, _ = list_candidates(root, config)
    for candidate in candidates:
        source = read_source(root, candidate, config)
        assert isinstance(source, SourceFile) and source.text == body


def test_very_long_attribute_chain_does_not_break_indexing(tmp_path):
    from repomem.service import RepoService

    root = write_repo(tmp_path / "r", {"gen.py": "x" + ".a" * 3000 + "()\n", "ok.py": "def f():\n    return 1\n"})
    service = RepoService.open(root)
    report = service.ensure_index()
    assert not isinstance(report, Failure) and report.files == 2


def test_an_edits_relation_scratch_is_kept_grown_and_handed_to_one_caller_at_a_time():
    from repomem.index.relations import KeptScratch

    kept = KeptScratch()
    first = kept.take(100, 10, 1024)
    assert first is not None and first.search.dist.shape[0] >= 100 and first.acc.shape[0] >= 10
    assert kept.take(100, 10, 1024) is None  # held: another caller makes its own set
    kept.give_back()
    assert kept.take(90, 10, 1024) is first  # fits: the same arrays, pages already resident
    first.stamp_box[0] = KeptScratch.STAMP_LIMIT + 1  # stamps near the int32 limit: start over
    first.search.settled[:5] = 7
    kept.give_back()
    again = kept.take(100, 10, 1024)
    assert again is first and again.stamp_box[0] == 0 and not again.search.settled.any()
    kept.give_back()
    grown = kept.take(1000, 10, 1024)  # the graph grew past the headroom
    assert grown is not first and grown.search.dist.shape[0] >= 1000 and grown.source_slot.min() == -1
    kept.give_back()


def test_a_kept_scratch_that_could_not_be_made_is_not_left_held(monkeypatch):
    import repomem.index.relations as relations

    kept = relations.KeptScratch()

    def out_of_memory(*sizes):
        raise MemoryError

    with monkeypatch.context() as patch:
        patch.setattr(relations, "relation_scratch", out_of_memory)
        with pytest.raises(MemoryError):
            kept.take(100, 10, 1024)
    made = kept.take(100, 10, 1024)  # not held by the failed call: this one makes the set
    assert made is not None and made.search.dist.shape[0] >= 100
    kept.give_back()


def test_edits_with_the_kept_scratch_give_what_a_fresh_scratch_gives(tmp_path: Path, monkeypatch):
    """An edit's relation rows reuse the kept scratch; rows computed again with it, after other
    searches have stamped it, equal rows computed with fresh arrays."""
    import repomem.index.relations as relations
    from repomem.service import RepoService

    for n in range(6):
        (tmp_path / f"m{n}.py").write_text(
            f"from m{(n + 1) % 6} import f{(n + 1) % 6}\n\n\ndef f{n}(x):\n    return f{(n + 1) % 6}(x) + {n}\n")
    service = RepoService.open(tmp_path, Config())
    assert isinstance(service, RepoService)
    service.ensure_index(save=False)
    index = service.index
    graph = index.graph()
    table = index.fragment_table(graph)
    config = index.config

    def entries(rows: np.ndarray):
        return relations.relation_entries(rows, table, graph, index.live, config.graph, config.relations)

    rows = np.arange(table.size, dtype=np.int64)
    with monkeypatch.context() as patch:
        patch.setattr(relations._EDIT_SCRATCH, "take", lambda *sizes: None)  # a fresh set each call
        fresh = entries(rows)
    assert fresh[0].shape[0] > 0
    expected = np.lexsort((fresh[1], fresh[0]))
    for part in (rows, rows[::-1].copy(), rows[:1], rows):
        again = entries(part)
        if part.shape[0] < rows.shape[0]:
            continue  # stamps the kept set with other searches before the next full comparison
        order = np.lexsort((again[1], again[0]))
        for ours, theirs in zip(again[:3], fresh[:3]):
            np.testing.assert_array_equal(ours[order], theirs[expected])


def test_a_full_build_collects_less_often_and_puts_the_thresholds_back(tmp_path: Path, monkeypatch):
    import gc

    import repomem.service as service_module
    from repomem.config import with_overrides
    from repomem.cyclic_gc import rarer_collections
    from repomem.service import RepoService

    before = gc.get_threshold()
    with rarer_collections(12_345):
        assert gc.get_threshold()[0] == 12_345
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), rarer_collections(999):
        raise RuntimeError("a build that fails")
    assert gc.get_threshold() == before
    with rarer_collections(0):
        assert gc.get_threshold() == before

    seen = []
    real_build = service_module.build_index

    def spy(*args, **kwargs):
        seen.append(gc.get_threshold()[0])
        return real_build(*args, **kwargs)

    monkeypatch.setattr(service_module, "build_index", spy)
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    service = RepoService.open(tmp_path, with_overrides(Config(), index={"gc_young_threshold": 4321}))
    assert isinstance(service, RepoService)
    service.ensure_index(full=True, save=False)
    assert seen == [4321] and gc.get_threshold() == before


@pytest.mark.parametrize("kind", ["a file in its place", "someone else's folder"])
def test_an_index_folder_repomem_cannot_have_fails_before_the_build(tmp_path: Path, monkeypatch, kind):
    """The save would fail once every file was parsed (19 s on Django): the folder is claimed first."""
    import repomem.service as service_module
    from repomem.failures import FailureKind
    from repomem.service import RepoService

    repo = write_repo(tmp_path / "repo", PACKAGE_FILES)
    if kind == "a file in its place":
        (repo / ".repomem").write_text("someone's notes")
    else:
        (repo / ".repomem").mkdir()
        (repo / ".repomem" / "notes.txt").write_text("someone's notes")

    def no_build(*args, **kwargs):
        raise AssertionError("the index was built before its folder was claimed")

    monkeypatch.setattr(service_module, "build_index", no_build)
    report = RepoService(repo, Config()).ensure_index()
    assert isinstance(report, Failure) and report.kind == FailureKind.INDEX_WRITE, report
    assert "cannot write the index" in report.message
    # Nothing of the user's was touched; without saving, nothing is claimed either.
    assert "someone's notes" in ((repo / ".repomem").read_text() if kind == "a file in its place"
                                 else (repo / ".repomem" / "notes.txt").read_text())
    monkeypatch.undo()
    assert not isinstance(RepoService(repo, Config()).ensure_index(save=False), Failure)


def test_settling_collects_the_garbage_then_keeps_the_living_out_of_collections():
    import gc
    import weakref

    from repomem.cyclic_gc import settle_long_lived

    class Node:
        pass

    garbage = Node()
    garbage.me = garbage  # a cycle no one holds: collected by the settling, never frozen
    gone = weakref.ref(garbage)
    del garbage
    kept = [Node() for _ in range(1000)]
    try:
        settle_long_lived()
        assert gone() is None
        assert gc.get_freeze_count() >= len(kept)
        assert not any(gc.is_tracked(node) and node in gc.get_objects(0) for node in kept[:3])
        # Settling again unfreezes first: a frozen object's cycle, once let go, is collected then.
        kept[0].me = kept[0]
        later = weakref.ref(kept[0])
        del kept[0]
        gc.collect()
        assert later() is not None  # frozen: the collector does not look at it
        settle_long_lived()
        assert later() is None
    finally:
        gc.unfreeze()
