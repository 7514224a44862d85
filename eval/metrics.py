"""RepoEval scores (docs/design.md section 6) and retrieval-only metrics.

EM / ES follow RepoCoder's scorer: prediction and ground truth are split into lines, each stripped,
empty ones dropped, and the prediction keeps as many lines as the ground truth has. EM compares the
line lists; ES = 1 - Levenshtein / length of the longer string, on the lines joined by newlines
(rapidfuzz's C implementation; tests check it against a plain dynamic programme).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rapidfuzz.distance import Levenshtein

from repomem.evaluation.tasks import TaskDefinition


def scored_lines(text: str) -> list[str]:
    return [line.strip() for line in text.split("\n") if line.strip()]


def truncated_prediction(prediction: str, ground_truth: str) -> list[str]:
    """The prediction's non-empty stripped lines, as many as the ground truth has."""
    return scored_lines(prediction)[: len(scored_lines(ground_truth))]


def exact_match(prediction: str, ground_truth: str) -> bool:
    return truncated_prediction(prediction, ground_truth) == scored_lines(ground_truth)


_CALL = re.compile(r"([A-Za-z_][A-Za-z_0-9.]*)\s*\(")


def called_name(text: str) -> str | None:
    """The function the first scored line calls first (last part of a dotted name), or None."""
    lines = scored_lines(text)
    found = _CALL.search(lines[0]) if lines else None
    return found.group(1).rsplit(".", 1)[-1] if found else None


def same_call(prediction: str, ground_truth: str) -> bool:
    """API tasks: the prediction calls the function the ground truth calls, whatever the arguments
    (exact match also needs every argument; this shows whether the right API was chosen)."""
    wanted = called_name(ground_truth)
    return wanted is not None and called_name(prediction) == wanted


def edit_similarity(prediction: str, ground_truth: str) -> float:
    """In [0, 1]; 1 for identical texts (two empty texts included)."""
    return float(Levenshtein.normalized_similarity("\n".join(truncated_prediction(prediction, ground_truth)),
                                                   "\n".join(scored_lines(ground_truth))))


class EnoughLines:
    """A predicate for GenerationRequest.enough: the text already holds `lines` scored lines.

    A line counts once a newline ends it, so a line still being written is never cut short. A
    class, not a closure: a deferred request (`eval run --defer`) carries `lines` to the machine
    that generates it.
    """

    def __init__(self, lines: int):
        self.lines = lines

    def __call__(self, text: str) -> bool:
        complete = text[: text.rfind("\n") + 1] if "\n" in text else ""
        return len(scored_lines(complete)) >= self.lines


def has_enough_lines(ground_truth: str) -> EnoughLines:
    """Enough once the text holds every line the scorer reads of `ground_truth`."""
    return EnoughLines(len(scored_lines(ground_truth)))


def line_hit_rank(fragment_texts: Sequence[str], ground_truth: str) -> int | None:
    """1-based rank of the first fragment holding every line of the ground truth (stripped), or None."""
    wanted = scored_lines(ground_truth)
    if not wanted:
        return None
    for rank, text in enumerate(fragment_texts, start=1):
        present = set(scored_lines(text))
        if all(line in present for line in wanted):
            return rank
    return None


def definition_hit_rank(spans: Sequence[tuple[str, int, int]], definition: TaskDefinition) -> int | None:
    """1-based rank of the first fragment (path, start, end: 0-based, end exclusive) that contains the
    definition's def / class line, or None."""
    for rank, (path, start, end) in enumerate(spans, start=1):
        if path == definition.path and start <= definition.line < end:
            return rank
    return None


# -- prompt-level metrics: what the model is shown, not what retrieval ranked ---------------------

# A block line this similar to the hole's line (normalized Levenshtein) nearly gives the answer away.
NEAR_LINE_SIMILARITY = 0.9


def near_line_hit(block_texts: Sequence[str], ground_truth: str, threshold: float = NEAR_LINE_SIMILARITY) -> bool:
    """Whether some block line is within `threshold` similarity of the ground truth's first line."""
    wanted = scored_lines(ground_truth)
    if not wanted:
        return False
    target = wanted[0]
    return any(Levenshtein.normalized_similarity(line, target) >= threshold
               for text in block_texts for line in scored_lines(text))


def names_the_call(prompt_text: str, name: str) -> bool:
    """Whether the called definition's name appears in the prompt as a whole word."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", prompt_text) is not None


def duplicate_block_tokens(block_texts: Sequence[str], visible_text: str, count) -> tuple[int, int]:
    """(duplicated, total) tokens of the blocks' lines, in prompt order: a non-empty line is a
    duplicate when the visible file or an earlier block already shows it (stripped). `count` is
    the backend's token counter for one line."""
    seen = set(scored_lines(visible_text))
    duplicated = total = 0
    for text in block_texts:
        for line in scored_lines(text):
            tokens = count(line)
            total += tokens
            if line in seen:
                duplicated += tokens
            seen.add(line)
    return duplicated, total
