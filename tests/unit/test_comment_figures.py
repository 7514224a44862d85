"""Code comments cite the docs for Django and dev-set figures instead of quoting them (issue 58).

A figure in a comment ("Django: 0.8 s", "+2.8 EM on the dev set") dates the day the code around
it changes, and nothing checks it; the docs keep it under a heading beside the run it came from
(docs/measurements.md#figures-the-code-cites, docs/repoeval-devset.md#figures-the-code-cites) and
the comment says why, with a link. Units and array shapes stay in docstrings (design section 9).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("repomem", "lsp", "eval")  # the engine, the language server, the harness

# What the sentence is about: Django (its files too, `django/db/models`) or the RepoEval dev set.
SUBJECT = re.compile(r"\bdjango\b|\bdev[ -]set\b", re.IGNORECASE)
# A measured figure: a number with a unit or a comparison (0.8 s, 40 MB, 5%, 3x, 7.6M, 3.6 -> 2.4),
# a decimal (+1.8), or a number of two digits or more (169k, 2,788, 22 of 32).
FIGURE = re.compile(r"(?<![\w.])[-+−~]?\d[\d,.]*\s*(?:%|x\b|ms\b|s\b|MB\b|GB\b|k\b|M\b|points?\b|of\b|->|→)"
                    r"|(?<![\w.])\d[\d,]*\.\d+"
                    r"|(?<![\w.])\d{2,}")
# Numbers that are names, not figures: versions (Django 5.1.4), issues, sections, equations, rounds.
NOT_FIGURES = re.compile(r"\d+\.\d+\.\d+|\bissue \d+|\bsection \d+|\beq\. ?\d+|\bround \d+")
SENTENCE_END = re.compile(r"(?<=[.;:!?])\s+(?=[A-Z(`])")


def comment_texts(source: str) -> list[tuple[int, str]]:
    """(first line, text) of each run of consecutive comment lines and of each docstring."""
    texts: list[tuple[int, str]] = []
    run: list[str] = []
    first = last = 0
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        line = token.start[0]
        if run and line != last + 1:
            texts.append((first, " ".join(run)))
            run = []
        if not run:
            first = line
        run.append(token.string.lstrip("#").strip())
        last = line
    if run:
        texts.append((first, " ".join(run)))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                texts.append((node.body[0].lineno, " ".join(docstring.split())))
    return texts


def quoted_figures(text: str) -> list[str]:
    """The sentences of `text` that quote a figure about Django or the dev set."""
    return [sentence for sentence in SENTENCE_END.split(text)
            if SUBJECT.search(sentence) and FIGURE.search(NOT_FIGURES.sub("", sentence))]


@pytest.mark.parametrize("text", [
    "Django: 0.8 s to load.",
    "+2.8 EM on the dev set (fourth round).",
    "scanning every call row cost Django ~1.5 ms an edit.",
    "an index of Django holds 220k of them.",
    "on the dev-set tasks it won 22 and lost 10.",
    "(vectorised: Django has 2,788 files).",
    "which changed between parses (14 of 16 files of django/db/models).",
])
def test_a_quoted_figure_is_found(text):
    assert quoted_figures(text)


@pytest.mark.parametrize("text", [
    "Measured on Django 5.1.4 (docs/measurements.md#index-load).",
    "On the dev set it did not raise exact match (docs/repoeval-devset.md#definition-blocks).",
    "float64, shape (n_fragments,): a large repository's W has millions of entries.",
    "A window of 20 lines moving by 10 (RepoCoder's setting).",
    "The dev set's tasks come from pinned packages (issue 36, section 6).",
    "int32 row ids, as on Django.",
])
def test_a_comment_without_such_a_figure_passes(text):
    assert not quoted_figures(text)


def test_no_code_comment_quotes_a_django_or_dev_set_figure():
    offenders = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, text in comment_texts(path.read_text(encoding="utf-8")):
                offenders += [f"{path.relative_to(ROOT)}:{line}: {sentence}" for sentence in quoted_figures(text)]
    assert not offenders, ("cite the figure's heading in docs/ instead (e.g. docs/measurements.md#a-query):\n"
                           + "\n".join(offenders))


def test_the_cited_headings_exist():
    """Every `docs/NAME.md#anchor` a comment cites names a heading of that file."""
    cited = re.compile(r"docs/([\w-]+\.md)#([\w-]+)")
    missing = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for doc, anchor in cited.findall(path.read_text(encoding="utf-8")):
                headings = [line.lstrip("#").strip() for line in (ROOT / "docs" / doc).read_text(
                    encoding="utf-8").splitlines() if line.startswith("#")]
                anchors = {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}
                if anchor not in anchors:
                    missing.append(f"{path.relative_to(ROOT)}: docs/{doc}#{anchor}")
    assert not missing, "\n".join(missing)
