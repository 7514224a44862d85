"""Line and API holes of a repository in a language other than Python, on a tiny Go module (and C,
a language without call resolution): which lines are holes, which calls are API holes, and what
`build_benchmark` writes."""

from __future__ import annotations

import json

import pytest

from repomem.evaluation.build import BuildReport, DevSet, DevSetRepo, build_benchmark, read_language_files
from repomem.evaluation.language_holes import language_api_holes, language_line_holes
from repomem.languages.registry import language_named
from tests.repos import write_repo

GO = language_named("go")
STORE = "pkg/store/store.go"
MAIN = "cmd/app/main.go"

FILES = {
    "go.mod": "module example.com/shop\n\ngo 1.22\n",
    STORE: (
        "package store\n"                                   # 0: first line
        "\n"
        "// New makes an empty store.\n"                    # 2: after a blank line
        "func New() map[string]int {\n"                     # 3: after a comment line: a hole
        "\t// one line comment\n"                           # 4: line comment
        "\treturn map[string]int{}\n"                       # 5: a hole
        "}\n"                                               # 6: a hole
        "\n"
        "func Clean(key string) string {\n"                 # 8
        "\t/* a block comment\n"                            # 9: the comment starts the line
        "\t   spanning lines */\n"                          # 10: inside it
        "\treturn key\n"                                    # 11: code after the comment: a hole
        "}\n"
    ),
    MAIN: (
        "package main\n"                                    # 0
        "\n"
        "import (\n"                                        # 2
        "\t\"fmt\"\n"
        "\n"
        "\t\"example.com/shop/pkg/store\"\n"                # 5
        ")\n"
        "\n"
        "func main() {\n"                                   # 8
        "\titems := store.New()\n"                          # 9: API hole, New in store.go
        "\tfmt.Println(items, store.Clean(\n"               # 10: the call spans lines: no hole
        "\t\t\"key\"))\n"
        "\tusage := `first\n"                               # 12: code before the raw string: a hole
        "second line of text\n"                             # 13: inside the raw string
        "`\n"                                               # 14: inside it (its end)
        "\thelp(usage)\n"                                   # 15: same-file call: no API hole
        "}\n"
        "\n"
        "func help(text string) {\n"                        # 18
        "\tfmt.Println(text)\n"                             # 19: standard library: no API hole
        "}\n"
    ),
}


@pytest.fixture
def go_repo(tmp_path):
    return write_repo(tmp_path / "shop", FILES)


def test_line_holes_skip_comments_strings_first_lines_and_lines_after_blanks(go_repo):
    files = {file.path: file for file in read_language_files(go_repo, GO)}
    assert sorted(files) == [MAIN, STORE]  # go.mod and repomem.toml are no Go files
    assert [hole.lineno for hole in language_line_holes(files[STORE], GO)] == [3, 5, 6, 11, 12]
    main_lines = [hole.lineno for hole in language_line_holes(files[MAIN], GO)]
    assert 12 in main_lines and 13 not in main_lines and 14 not in main_lines
    assert all(hole.ground_truth == files[MAIN].lines[hole.lineno] for hole in language_line_holes(files[MAIN], GO))


def test_api_holes_are_one_line_calls_resolved_into_another_file(go_repo):
    if not GO.resolves_calls:
        pytest.skip("no call resolver for Go is registered")
    holes = language_api_holes(read_language_files(go_repo, GO), GO)
    assert [(hole.file.path, hole.lineno, hole.end_lineno) for hole in holes] == [(MAIN, 9, 9)]
    definition = holes[0].definition
    assert definition is not None
    assert (definition.path, definition.line, definition.name, definition.kind) == (STORE, 3, "New", "function")
    assert holes[0].ground_truth == "\titems := store.New()"


class WordTokenizer:
    def count(self, text: str) -> int:
        return len(text.split())


def test_a_language_without_call_resolution_gets_line_tasks_and_a_note(tmp_path, go_repo):
    c_repo = write_repo(tmp_path / "clib", {
        "lib.c": "#include \"lib.h\"\nint twice(int x) {\n    return 2 * x;\n}\n",
        "main.c": "#include \"lib.h\"\nint main(void) {\n    int y = twice(2);\n    return y;\n}\n",
    })
    assert not language_named("c").resolves_calls
    devset = DevSet(seed=7, tasks_per_repo=50, splits=("line", "api"), repos=(
        DevSetRepo("shop", "shop=1", "0" * 64, "deb", "", "go"),
        DevSetRepo("clib", "clib=1", "0" * 64, "deb", "", "c"),
    ))
    out = tmp_path / "out"
    report = build_benchmark(devset, out, WordTokenizer(), sources={"shop": go_repo, "clib": c_repo})
    assert isinstance(report, BuildReport), report
    assert report.notes == ("clib: c has no call resolution yet, so no API tasks (line tasks only)",)
    # Seven code lines after the first, the two "}" lines the same once stripped: six tasks.
    assert report.repo_tasks[("clib", "api")] == 0 and report.repo_tasks[("clib", "line")] == 6
    line = [json.loads(row) for row in (out / "line.jsonl").read_text().splitlines()]
    shop = [task for task in line if task["metadata"]["task_id"].startswith("shop/")]
    assert len(shop) == report.repo_tasks[("shop", "line")] > 0
    for task in shop:  # the left context ends right above the hole, the ground truth is that line
        metadata = task["metadata"]
        lines = (out / "repositories" / "shop" / "/".join(metadata["fpath_tuple"][1:])).read_text().split("\n")
        assert metadata["ground_truth"] == lines[metadata["lineno"]]
        context = lines[metadata["context_start_lineno"]:metadata["lineno"]]
        assert task["prompt"] == "".join(f"{text}\n" for text in context)
    # The same dev set and seed give the same files.
    again = build_benchmark(devset, tmp_path / "again", WordTokenizer(), sources={"shop": go_repo, "clib": c_repo})
    assert isinstance(again, BuildReport), again
    for split in ("line", "api"):
        assert (out / f"{split}.jsonl").read_bytes() == (tmp_path / "again" / f"{split}.jsonl").read_bytes()
