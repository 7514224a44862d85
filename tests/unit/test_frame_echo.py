"""A model that writes on the frame around the prompt's blocks (`# --------`, `# the below code
fragment can be found in:`) instead of code: the user is shown nothing rather than that frame,
unless the file itself has such lines; what the model wrote stays in `raw` (and the evaluator
scores it, as the protocol says)."""

from __future__ import annotations

from repomem.backends.base import Generation
from repomem.completion.engine import CompletionEngine
from repomem.completion.prompt import BLOCK_WORDS, frames_blocks, render_context
from repomem.config import with_overrides
from repomem.positions import locate
from tests.unit.test_scope_imports import Words, long_report


def test_the_frames_lines_are_told_from_code_and_ordinary_comments():
    framed = render_context([], "#")  # no blocks, no frame
    assert framed == ""
    for line in ("#--", "# " + "-" * 50, "    #   ---", f"# {BLOCK_WORDS}", "# the below code fragment",
                 "# Here are some relevant code fragments from other files of the repo:",
                 "        # The above code fragment can be found in:", "# The below code fragment can be"):
        assert frames_blocks(line, "#"), line
    for line in ("# -", "# TODO: tax", "x = 1  # ---", "return total", "", "// ----", "#- -",
                 "# The above code is slow"):
        assert not frames_blocks(line, "#"), line
    assert frames_blocks("    // ------", "//") and not frames_blocks("# ------", "//")


class Scripted(Words):
    """Answers every prompt with one scripted text (a stand-in for the model: the engine's handling
    of what comes back is under test)."""

    def __init__(self, answer: str):
        super().__init__()
        self.answer, self.prompts = answer, []

    def generate(self, request):
        self.prompts.append(request.prompt)
        return Generation(self.answer, self.count(request.prompt), 3, 0, "stop", 0.01, -0.1)


def _completed(tmp_path, answer: str, file_rule: bool = False):
    service, text, n_lines = long_report(tmp_path)
    if file_rule:  # the user's own file has a rule of dashes
        text = text.replace("import json", "import json\n# " + "-" * 20)
        (service.root / "shop" / "report.py").write_text(text)
        n_lines += 1
    config = with_overrides(service.config, completion={"max_prompt_tokens": 300, "fill_in_middle": False},
                            prompt={"file_only_round": False})
    backend = Scripted(answer)
    cursor = locate(service.root, "shop/report.py", text, n_lines, None)
    result = CompletionEngine(service, backend, config).complete(cursor, "fragrel")
    assert BLOCK_WORDS in backend.prompts[-1] and result.prompt.blocks  # the prompt had framed blocks
    return result


def test_an_answer_that_writes_the_frame_on_is_shown_as_nothing(tmp_path):
    result = _completed(tmp_path, "#--\n")
    assert result.text == "" and result.raw == "#--\n"
    assert _completed(tmp_path / "b", f"# {BLOCK_WORDS}\n").text == ""


def test_code_and_a_rule_the_file_itself_has_are_shown(tmp_path):
    assert _completed(tmp_path, "compute_tax(amount_cents, tax_class)\n").text == "compute_tax(amount_cents, tax_class)"
    assert _completed(tmp_path / "b", "# ---\n", file_rule=True).text == "# ---"
