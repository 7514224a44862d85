"""RepoEval-protocol benchmark builder: hole eligibility, API resolution, prompts, output files."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from repomem.config import GraphConfig
from repomem.evaluation import build
from repomem.evaluation.build import (
    BuildReport,
    DevSet,
    DevSetRepo,
    PythonFile,
    api_holes,
    build_benchmark,
    draw_holes,
    left_context,
    line_holes,
    line_tasks,
    load_devset,
    read_python_files,
)
from repomem.failures import Failure
from repomem.languages.parsed import split_lines
from repomem.languages.python.calls import PythonCallResolver
from repomem.languages.syntax import extract_syntax
from tests.repos import write_repo


class WordTokenizer:
    """Deterministic stand-in for a model tokenizer: one token per whitespace-separated word."""

    def count(self, text: str) -> int:
        return len(text.split())


WORDS = WordTokenizer()

API_FILES = {
    "pkg/__init__.py": """
        from .models import Model
        from .helpers import slugify as make_slug
    """,
    "pkg/helpers.py": """
        import re


        def slugify(text):
            text = normalize(text)
            return re.sub("[^a-z]+", "-", text)


        def normalize(text):
            return text.strip().lower()


        def outer():
            def inner():
                return 1
            return inner()
    """,
    "pkg/models.py": """
        from .helpers import slugify


        class Model:
            def __init__(self, name):
                self.slug = slugify(name)

            def rename(self, name):
                return Model(name)
    """,
    "pkg/service.py": """
        import pkg.helpers
        from pkg import helpers
        from . import models
        from .models import Model as M
        from pkg import make_slug
        from pkg.helpers import outer


        def run(name):
            model = M(name)
            helpers.normalize(name)
            value = models.Model(
                name,
            )
            local(name)
            print(name)
            pkg.helpers.normalize(name).strip()
            make_slug(name)
            models.Model.__init__(model, name)
            missing.thing(name)
            return outer()


        def local(x):
            return x
    """,
}


def python_file(path: str, text: str) -> PythonFile:
    return PythonFile(path, text, tuple(split_lines(text)))


def line_of(file: PythonFile, text: str) -> int:
    return [line.strip() for line in file.lines].index(text)


def devset(seed: int = 7, tasks: int = 20, splits: tuple[str, ...] = ("line", "api"), name: str = "syn") -> DevSet:
    return DevSet(seed, tasks, splits, (DevSetRepo(name, f"{name}==1.0"),))


@pytest.fixture
def api_repo(tmp_path: Path) -> Path:
    return write_repo(tmp_path / "api_repo", API_FILES)


# -- dev set file --------------------------------------------------------------------------------

DEVSET_TOML = """
seed = 20231
tasks_per_repo = 200
splits = ["line", "api"]

[[repo]]
name = "accelerate"
requirement = "accelerate==0.16.0"

[[repo]]
name = "optuna"
requirement = "optuna==3.1.0"
"""


def test_load_devset_reads_seed_splits_and_repos(tmp_path):
    path = tmp_path / "devset.toml"
    path.write_text(DEVSET_TOML, encoding="utf-8")
    loaded = load_devset(path)
    assert loaded == DevSet(20231, 200, ("line", "api"), (
        DevSetRepo("accelerate", "accelerate==0.16.0"), DevSetRepo("optuna", "optuna==3.1.0"),
    ))


@pytest.mark.parametrize("text, expected", [
    (None, "no such dev set file"),
    ("seed = [1,\n", "not valid TOML"),
    (DEVSET_TOML.replace("seed = 20231\n", ""), "`seed`"),
    (DEVSET_TOML.replace("tasks_per_repo = 200\n", "tasks_per_repo = 0\n"), "`tasks_per_repo`"),
    (DEVSET_TOML.replace('"api"]', '"function"]'), "unknown split 'function'"),
    (DEVSET_TOML.replace('requirement = "optuna==3.1.0"\n', ""), "'optuna' needs a `requirement`"),
    (DEVSET_TOML.replace('name = "optuna"', 'name = "../optuna"'), "needs a `name`"),
    (DEVSET_TOML.replace('name = "optuna"', 'name = "accelerate"'), "appears twice"),
    ("seed = 1\ntasks_per_repo = 2\nsplits = ['line']\n", "no [[repo]] entries"),
])
def test_load_devset_failures_are_one_clear_message(tmp_path, text, expected):
    path = tmp_path / "devset.toml"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    loaded = load_devset(path)
    assert isinstance(loaded, Failure)
    assert expected in loaded.message and str(path) in loaded.message
    assert "\n" not in loaded.message


# -- reading files -------------------------------------------------------------------------------

def test_read_python_files_keeps_tests_and_skips_non_utf8_and_excluded(tmp_path):
    root = write_repo(tmp_path / "repo", {
        "pkg/a.py": "x = 1\n",
        "tests/test_a.py": "def test_x():\n    assert True\n",
        "pkg/data.txt": "not python\n",
        "build/generated.py": "y = 2\n",
    })
    (root / "pkg" / "latin.py").write_bytes(b"name = '\xe9t\xe9'\n")
    (root / "pkg" / "crlf.py").write_bytes(b"a = 1\r\nb = 2\r\n")
    files = read_python_files(root)
    assert [f.path for f in files] == ["pkg/a.py", "pkg/crlf.py", "tests/test_a.py"]
    assert files[1].lines == ("a = 1", "b = 2")


# -- line holes ----------------------------------------------------------------------------------

def test_line_holes_follow_repocoder_eligibility():
    text = (
        "import os\n"               # 0 first line
        "x = 1\n"                   # 1 eligible
        "# a comment\n"             # 2 comment
        "y = 2\n"                   # 3 eligible (after a comment, not a blank line)
        "\n"                        # 4 blank
        "z = 3\n"                   # 5 follows a blank line
        "w = 4\n"                   # 6 eligible
        "def f():\n"                # 7 eligible
        '    """Docstring\n'        # 8 docstring
        "    inside the docstring\n"  # 9 docstring
        '    """\n'                 # 10 docstring end
        '    return """text\n'      # 11 eligible: code before the string
        "still string\n"            # 12 string
        '"""\n'                     # 13 string end
        "s = '''one line'''\n"      # 14 eligible: the string does not span lines
        "    # indented comment\n"  # 15 comment
        "t = f(1,\n"                # 16 eligible
        "      2)\n"                # 17 eligible (inside a call, still code)
    )
    holes = line_holes(python_file("m.py", text))
    assert [h.lineno for h in holes] == [1, 3, 6, 7, 11, 14, 16, 17]
    assert all(h.ground_truth == text.split("\n")[h.lineno] for h in holes)


def test_draw_skips_duplicate_stripped_lines():
    body = "".join(f"{'    ' * (i % 3)}total += 1\n" for i in range(40))
    text = "def f():\n" + body + "    return total\n    last = 2\n"
    pool = line_holes(python_file("dup.py", text))
    drawn = draw_holes(pool, "1:r:line", 10)
    assert sorted(h.ground_truth.strip() for h in drawn) == ["last = 2", "return total", "total += 1"]


def test_line_tasks_are_deterministic_and_seed_sensitive(synthetic_repo):
    files = read_python_files(synthetic_repo)
    first = line_tasks("syn", files, 1, 30, WORDS, 200)
    again = line_tasks("syn", files, 1, 30, WORDS, 200)
    other = line_tasks("syn", files, 2, 30, WORDS, 200)
    assert first == again
    assert len(first) == 30
    assert [t["metadata"]["task_id"] for t in first] == [f"syn/line/{k}" for k in range(30)]
    located = [(tuple(t["metadata"]["fpath_tuple"]), t["metadata"]["lineno"]) for t in first]
    assert located != [(tuple(t["metadata"]["fpath_tuple"]), t["metadata"]["lineno"]) for t in other]
    stripped = [t["metadata"]["ground_truth"].strip() for t in first]
    assert len(set(stripped)) == len(stripped)


# -- API holes -----------------------------------------------------------------------------------

def test_resolver_resolve_callee_names_the_definition(package_repo):
    files = read_python_files(package_repo)
    syntaxes = {n: extract_syntax(f.path, "python", f.text, "statement") for n, f in enumerate(files)}
    number = {f.path: n for n, f in enumerate(files)}
    resolver = PythonCallResolver(syntaxes, 4, 8)
    service, models = number["pkg/sub/service.py"], number["pkg/models.py"]

    target_file, definition = resolver.resolve_callee(service, "M", "")
    assert (target_file, definition.name, definition.kind) == (models, "Model", "class")
    target_file, definition = resolver.resolve_callee(service, "models.Model.create", "")
    assert (target_file, definition.name, definition.scope) == (models, "create", "Model")
    target_file, definition = resolver.resolve_callee(models, "self.save", "Model")  # inherited
    assert (target_file, definition.name, definition.scope) == (models, "save", "Base")
    assert resolver.resolve_callee(models, "self.save", "") is None
    assert resolver.resolve_callee(service, "print", "") is None


def test_api_holes_resolve_through_imports_to_other_files(api_repo):
    files = read_python_files(api_repo)
    by_path = {f.path: f for f in files}
    holes = {(h.file.path, h.lineno): h for h in api_holes(files, GraphConfig())}
    service, models, helpers = by_path["pkg/service.py"], by_path["pkg/models.py"], by_path["pkg/helpers.py"]

    def hole(file: PythonFile, text: str):
        return holes.get((file.path, line_of(file, text)))

    class_line = line_of(models, "class Model:")
    slugify_line = line_of(helpers, "def slugify(text):")
    normalize_line = line_of(helpers, "def normalize(text):")
    expected = {
        # relative import of a class, instantiation maps to the class
        (service, "model = M(name)"): ("pkg/models.py", class_line, "Model", "class"),
        # `from pkg import helpers` binds a submodule
        (service, "helpers.normalize(name)"): ("pkg/helpers.py", normalize_line, "normalize", "function"),
        # `from . import models`: module attribute, multi-line call
        (service, "value = models.Model("): ("pkg/models.py", class_line, "Model", "class"),
        # `import pkg.helpers`: the inner call resolves, the outer `.strip()` on its result does not
        (service, "pkg.helpers.normalize(name).strip()"): ("pkg/helpers.py", normalize_line, "normalize", "function"),
        # re-exported by pkg/__init__.py under another name
        (service, "make_slug(name)"): ("pkg/helpers.py", slugify_line, "slugify", "function"),
        # an explicit __init__ call maps to its class
        (service, "models.Model.__init__(model, name)"): ("pkg/models.py", class_line, "Model", "class"),
        (models, "self.slug = slugify(name)"): ("pkg/helpers.py", slugify_line, "slugify", "function"),
        (service, "return outer()"): ("pkg/helpers.py", line_of(helpers, "def outer():"), "outer", "function"),
    }
    for (file, text), (path, line, name, kind) in expected.items():
        found = hole(file, text)
        assert found is not None, text
        assert found.definition is not None
        assert (found.definition.path, found.definition.line, found.definition.name, found.definition.kind) == (
            path, line, name, kind
        ), text
    assert len(holes) == len(expected)  # nothing else qualifies, in particular:
    for text in ("local(name)", "print(name)", "missing.thing(name)"):  # same file, builtin, unresolved
        assert hole(service, text) is None
    for text in ("text = normalize(text)", 'return re.sub("[^a-z]+", "-", text)', "return inner()"):
        assert hole(helpers, text) is None  # same-file call, module outside the repo, nested function
    assert hole(models, "return Model(name)") is None  # same-file class


def test_api_hole_spans_the_whole_call_with_its_prefix(api_repo):
    files = read_python_files(api_repo)
    service = next(f for f in files if f.path == "pkg/service.py")
    start = line_of(service, "value = models.Model(")
    hole = next(h for h in api_holes(files) if h.file.path == service.path and h.lineno == start)
    assert hole.end_lineno == start + 2
    assert hole.ground_truth == "    value = models.Model(\n        name,\n    )"


def test_two_calls_starting_on_one_line_give_one_hole_for_the_outer_call(tmp_path):
    root = write_repo(tmp_path / "repo", {
        "lib/api.py": "def outer_api(x):\n    return x\n\n\ndef inner_api(x):\n    return x\n",
        "lib/use.py": "from lib.api import outer_api, inner_api\n\nvalue = outer_api(inner_api(1))\n",
    })
    holes = [h for h in api_holes(read_python_files(root)) if h.file.path == "lib/use.py"]
    assert [(h.lineno, h.definition.name) for h in holes] == [(2, "outer_api")]


def test_api_tasks_json_and_dedup(api_repo):
    files = read_python_files(api_repo)
    tasks = build.api_tasks("api_repo", files, 3, 100, WORDS, 2000)
    truths = [t["metadata"]["ground_truth"].strip() for t in tasks]
    assert len(tasks) == 8 and len(set(truths)) == 8
    task = next(t for t in tasks if t["metadata"]["ground_truth"].startswith("    value = models.Model("))
    metadata = task["metadata"]
    assert metadata["split"] == "api"
    assert metadata["end_lineno"] == metadata["lineno"] + 2
    assert metadata["definition"]["kind"] == "class"
    assert metadata["fpath_tuple"] == ["api_repo", "pkg", "service.py"]


# -- prompts -------------------------------------------------------------------------------------

def test_left_context_keeps_the_most_whole_lines_within_budget():
    rng = random.Random(5)
    lines = [" ".join("w" for _ in range(rng.randrange(0, 7))) for _ in range(300)]
    for lineno in (0, 1, 7, 150, 299):
        for budget in (0, 1, 5, 40, 333, 5000):
            prompt, start = left_context(lines, lineno, WORDS, budget)
            # brute force: the smallest start whose text fits
            expected = next(
                s for s in range(lineno + 1)
                if WORDS.count("".join(line + "\n" for line in lines[s:lineno])) <= budget
            )
            assert start == expected, (lineno, budget)
            assert prompt == "".join(line + "\n" for line in lines[start:lineno])


def test_left_context_when_nothing_fits():
    lines = ["a b c d e f g h", "x = 1"]
    assert left_context(lines, 1, WORDS, 3) == ("", 1)


# -- the whole benchmark -------------------------------------------------------------------------

def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_build_writes_repoeval_files(tmp_path, synthetic_repo):
    out = tmp_path / "bench"
    report = build_benchmark(devset(tasks=15), out, WORDS, max_prompt_tokens=60, sources={"syn": synthetic_repo})
    assert isinstance(report, BuildReport)
    assert report.tasks == {"line": 15, "api": 15}
    assert report.repo_tasks == {("syn", "line"): 15, ("syn", "api"): 15}
    copied = out / "repositories" / "syn"
    assert sorted(p.relative_to(copied).as_posix() for p in copied.rglob("*") if p.is_file()) == sorted(
        p.relative_to(synthetic_repo).as_posix() for p in synthetic_repo.rglob("*") if p.is_file()
    )
    for split in ("line", "api"):
        tasks = read_jsonl(out / f"{split}.jsonl")
        assert [t["metadata"]["task_id"] for t in tasks] == [f"syn/{split}/{k}" for k in range(15)]
        for task in tasks:
            metadata = task["metadata"]
            assert set(task) == {"prompt", "metadata"}
            assert metadata["split"] == split
            assert metadata["fpath_tuple"][0] == "syn"
            lines = split_lines((out / "repositories" / Path(*metadata["fpath_tuple"])).read_text())
            start, lineno = metadata["context_start_lineno"], metadata["lineno"]
            assert task["prompt"] == "".join(line + "\n" for line in lines[start:lineno])
            assert WORDS.count(task["prompt"]) <= 60
            if start > 0:  # one more line would break the budget
                assert WORDS.count(lines[start - 1] + "\n" + task["prompt"]) > 60
            end = metadata.get("end_lineno", lineno)
            assert metadata["ground_truth"] == "\n".join(lines[lineno : end + 1])
            if split == "api":
                definition = metadata["definition"]
                defining = split_lines((copied / definition["path"]).read_text())
                keyword = "def" if definition["kind"] == "function" else "class"
                assert defining[definition["line"]].strip().startswith(f"{keyword} {definition['name']}")
                assert definition["path"] != "/".join(metadata["fpath_tuple"][1:])
            else:
                assert set(metadata) == {
                    "task_id", "ground_truth", "fpath_tuple", "context_start_lineno", "lineno", "split",
                }


def test_build_is_byte_identical_for_a_seed_and_differs_across_seeds(tmp_path, synthetic_repo):
    outputs = {}
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        report = build_benchmark(devset(seed=seed), tmp_path / name, WORDS, sources={"syn": synthetic_repo})
        assert isinstance(report, BuildReport)
        outputs[name] = [(tmp_path / name / f"{split}.jsonl").read_bytes() for split in ("line", "api")]
    assert outputs["a"] == outputs["b"]
    assert outputs["a"][0] != outputs["c"][0] and outputs["a"][1] != outputs["c"][1]


def test_rebuild_replaces_files_and_a_failed_write_keeps_the_old_ones(tmp_path, synthetic_repo, monkeypatch):
    out = tmp_path / "bench"
    assert isinstance(build_benchmark(devset(seed=1), out, WORDS, sources={"syn": synthetic_repo}), BuildReport)
    (out / "repositories" / "syn" / "stale.py").write_text("gone = True\n")
    assert isinstance(build_benchmark(devset(seed=2), out, WORDS, sources={"syn": synthetic_repo}), BuildReport)
    fresh = tmp_path / "fresh"
    assert isinstance(build_benchmark(devset(seed=2), fresh, WORDS, sources={"syn": synthetic_repo}), BuildReport)
    assert (out / "line.jsonl").read_bytes() == (fresh / "line.jsonl").read_bytes()
    assert not (out / "repositories" / "syn" / "stale.py").exists()

    before = (out / "line.jsonl").read_bytes()

    def failing_fsync(descriptor):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(build.os, "fsync", failing_fsync)
    failed = build_benchmark(devset(seed=3), out, WORDS, sources={"syn": synthetic_repo})
    assert isinstance(failed, Failure) and failed.kind == "write-failed"
    assert (out / "line.jsonl").read_bytes() == before  # never truncated or half written
    leftovers = [p.name for p in out.rglob("*") if "partial" in p.name or "stale" in p.name]
    assert leftovers == []


def test_build_failures_are_values(tmp_path, synthetic_repo):
    missing = build_benchmark(devset(name="other"), tmp_path / "out", WORDS, sources={"syn": synthetic_repo})
    assert isinstance(missing, Failure) and missing.kind == "missing-source"
    empty = tmp_path / "empty"
    empty.mkdir()
    no_code = build_benchmark(devset(name="syn"), tmp_path / "out", WORDS, sources={"syn": empty})
    assert isinstance(no_code, Failure) and no_code.kind == "no-python-files"
    assert not (tmp_path / "out").exists()  # nothing written before every repository succeeded


def test_api_holes_on_the_shared_package_fixture(package_repo):
    # `from .. import models`, `from ..models import Model as M`, `from pkg import make_slug`
    holes = api_holes(read_python_files(package_repo))
    assert {(h.file.path, h.definition.name) for h in holes} >= {
        ("pkg/sub/service.py", "Model"), ("pkg/sub/service.py", "create"),
        ("pkg/sub/service.py", "normalize"), ("pkg/sub/service.py", "slugify"),
        ("pkg/models.py", "slugify"),
    }
