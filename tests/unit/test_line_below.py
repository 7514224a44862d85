"""The line below an answer the user took (repomem.completion.line_below): its prompt is the
answer's prompt, then the answer and a newline, where the document is exactly "the answer, Enter,
indentation"; anywhere else, or past the chain's cap or the model's window, a prompt built afresh.
The real model reads such a prompt from its cache: tests/e2e/test_lsp.py."""

from __future__ import annotations

import shutil

import pytest

from repomem.backends.base import Generation
from repomem.backends.templates import QWEN
from repomem.completion.engine import CompletionEngine
from repomem.completion.line_below import ADDED_TOKENS, MAX_CONTINUED_LINES, answered_line
from repomem.completion.prompt import Prompt
from repomem.config import Config, with_overrides
from repomem.positions import locate
from repomem.service import RepoService
from tests.repos import EXAMPLE
from tests.unit.test_scope_imports import Words

REPORT = "shop/report.py"
ANSWER = "compute_tax(amount_cents, tax_class)"


class Scripted(Words):
    """Keeps every prompt (Qwen's fill-in-the-middle form: a prompt built afresh for the line below
    an answer does not begin with the answer's); writes the next of its answers. Each begins with a
    space: the cursor's line ends with one, which the engine takes off the prompt for the model to
    write back."""

    def __init__(self, answers: list[str], context_tokens: int = 4096):
        super().__init__()
        self.template = QWEN
        self.answers, self.context_tokens = list(answers), context_tokens
        self.prompts: list[str] = []

    def generate(self, request):
        self.prompts.append(request.prompt)
        text = self.answers.pop(0) if self.answers else "pass"
        return Generation(text, self.count(request.prompt), len(text.split()), 0, "stop", 0.01)


@pytest.fixture(scope="module")
def shop(tmp_path_factory) -> RepoService:
    root = tmp_path_factory.mktemp("line-below") / "shop"
    shutil.copytree(EXAMPLE, root)
    service = RepoService.open(root, Config())
    assert isinstance(service, RepoService) and not hasattr(service.ensure_index(), "kind")
    return service


def _report(service: RepoService) -> str:
    """The example's report.py with a function after its unfinished line (the code after the
    cursor, which a fill-in-the-middle prompt shows after its suffix sentinel)."""
    return (service.root / REPORT).read_text().rstrip("\n") + "\n\n\ndef refund(amount_cents):\n    return 0\n"


def _engine(service: RepoService, backend: Scripted, on: bool = True) -> CompletionEngine:
    return CompletionEngine(service, backend, with_overrides(service.config, completion={"continue_lines": on}))


def _ask(engine: CompletionEngine, text: str, line: int, column: int):
    cursor = locate(engine.service.root, REPORT, text, line + 1, column + 1)
    result = engine.complete(cursor)
    assert not hasattr(result, "kind"), result
    return result


def _below(text: str, line: int, answer: str, indent: str = "    ") -> str:
    """`text` with `answer` written at the end of `line` (0-based) and Enter pressed after it."""
    lines = text.split("\n")
    lines[line : line + 1] = [lines[line] + answer, indent]
    return "\n".join(lines)


def test_the_line_below_a_taken_answer_continues_its_prompt_line_after_line(shop):
    text = _report(shop)
    backend = Scripted([" " + ANSWER, " tax = 0", " return tax"])
    engine = _engine(shop, backend)
    first = _ask(engine, text, 8, 11)
    assert first.text == ANSWER and "<|fim_suffix|>" in backend.prompts[0]
    second_text = _below(text, 8, ANSWER)
    second = _ask(engine, second_text, 9, 4)
    # The new line's indentation but its last space, which the model writes back (as afresh).
    assert backend.prompts[1] == backend.prompts[0] + " " + ANSWER + "\n   "
    assert second.text == "tax = 0"
    assert second.timings_ms["retrieve"] == 0.0 and second.fragments == first.fragments
    third = _ask(engine, _below(second_text, 9, "tax = 0"), 10, 4)
    assert backend.prompts[2] == backend.prompts[1] + " tax = 0\n   " and third.text == "return tax"


@pytest.mark.parametrize("change", ["another answer typed", "an edit below", "a character on the new line",
                                    "the setting off", "a window too small", "an answer post-processing changed"])
def test_anything_but_the_answer_and_enter_builds_the_prompt_afresh(shop, change):
    text = _report(shop)
    first_answer = {"an answer post-processing changed": " " + ANSWER + "   "}.get(change, " " + ANSWER)
    backend = Scripted([first_answer, " tax = 0"])
    engine = _engine(shop, backend, on=change != "the setting off")
    first = _ask(engine, text, 8, 11)
    if change == "a window too small":  # one token short of the continued prompt and its answer
        generation = first.generation
        backend.context_tokens = generation.prompt_tokens + generation.completion_tokens + ADDED_TOKENS \
            + engine.config.completion.max_new_tokens - 1
    below = _below(text, 8, first.text.split("\n")[0])
    if change == "another answer typed":
        below = _below(text, 8, ANSWER.replace("tax_class", "klass"))
    elif change == "an edit below":
        below += "\n\nVAT = 20\n"
    elif change == "a character on the new line":
        below = _below(text, 8, ANSWER, "    t")
    _ask(engine, below, 9, 5 if change == "a character on the new line" else 4)
    assert not backend.prompts[1].startswith(backend.prompts[0]), change


def test_an_answer_is_continued_only_as_the_model_wrote_it_up_to_its_lines_end(shop):
    cursor = locate(shop.root, REPORT, _report(shop), 9, 12)
    prompt = Prompt("p", 1, (), 0, 0, 1, 0, "qwen", True)
    kept = answered_line(cursor, prompt, (), " x = 1\n    y", " ", "x = 1", 1, 4, 0)
    assert kept is not None and kept.written == " x = 1"  # what it wrote past the line's end is not kept
    assert answered_line(cursor, prompt, (), " x = 1\n    y", " ", "x = 1\n    y", 1, 4, 0) is None  # two lines
    assert answered_line(cursor, prompt, (), " x = 1  ", " ", "x = 1", 1, 4, 0) is None  # spaces cut after it
    assert answered_line(cursor, prompt, (), "x = 1", " ", "x = 1", 1, 4, 0) is None  # the held start not written
    assert answered_line(cursor, prompt, (), " ", " ", "", 1, 1, 0) is None  # nothing answered


def test_a_chain_of_continued_lines_is_built_afresh_at_its_cap(shop):
    text = _report(shop)
    # The line below a blank line: the model writes on past its end, which is no part of the answer.
    lines = [f" step_{i} = {i}\n" for i in range(MAX_CONTINUED_LINES + 2)]
    backend = Scripted([" " + ANSWER, *lines])
    engine = _engine(shop, backend)
    _ask(engine, text, 8, 11)
    text, line, written = _below(text, 8, ANSWER), 9, " " + ANSWER
    for count in range(1, MAX_CONTINUED_LINES + 2):
        answer = _ask(engine, text, line, 4).text
        continued = backend.prompts[count] == backend.prompts[count - 1] + written + "\n   "
        assert continued == (count <= MAX_CONTINUED_LINES), count
        text, line, written = _below(text, line, answer), line + 1, lines[count - 1].rstrip("\n")


def test_a_speculation_at_another_indentation_leaves_the_line_below_continued(shop):
    """The line below asked twice: by a speculation at the indentation it guessed, then, after its
    answer, by the request at the editor's own. Both continue the first answer's prompt."""
    text = _report(shop)
    backend = Scripted([" " + ANSWER, " guessed = 1", " tax = 0"])
    engine = _engine(shop, backend)
    _ask(engine, text, 8, 11)
    _ask(engine, _below(text, 8, ANSWER, "        "), 9, 8)
    _ask(engine, _below(text, 8, ANSWER), 9, 4)
    assert backend.prompts[1] == backend.prompts[0] + " " + ANSWER + "\n       "
    assert backend.prompts[2] == backend.prompts[0] + " " + ANSWER + "\n   "



def test_an_engine_made_anew_for_the_same_model_still_continues_the_line_below(shop):
    """The language server makes its engine anew when an index is installed or a setting changes."""
    text = _report(shop)
    backend = Scripted([" " + ANSWER, " tax = 0"])
    first = _engine(shop, backend)
    _ask(first, text, 8, 11)
    anew = _engine(shop, backend)
    anew.answered_after(first)
    _ask(anew, _below(text, 8, ANSWER), 9, 4)
    assert backend.prompts[1] == backend.prompts[0] + " " + ANSWER + "\n   "
