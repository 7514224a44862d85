"""Blocks that show what followed the match.

A retrieved window is most useful when it holds a near-copy of the code just above the cursor
(a clone: the same test written for another metric, the same argument handling in a sibling
command) and the lines that came next there, which is what a small model copies. RepoCoder's
windows are fixed 20-line slices moving by 10, so the matching lines often sit at a window's
bottom and the line the user is about to write is the first line the window does not show; the
answer is then often the line right after such a match, outside the prompt's block
(docs/repoeval-devset.md#the-continuation-and-clone-search).

`continued_span` finds where the visible code's last lines match inside (or just below) a window
and slides the window down, keeping its length, until it shows `after` non-blank lines past the
match. A weak match (mean token similarity below `min_similarity`) leaves the window as it is.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

from repomem.completion.prompt import ContextBlock

_TOKEN = re.compile(r"\w+|[^\w\s]")


def line_tokens(line: str) -> frozenset[str]:
    """Identifiers, numbers and punctuation marks of one line, as a set."""
    return frozenset(_TOKEN.findall(line))


def _similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two token sets (0 when both are empty)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def match_line(file_lines: Sequence[str], start: int, stop: int, tail: Sequence[str]) -> tuple[int, float] | None:
    """Where `tail` (the visible code's last non-blank lines, the one nearest the cursor last) best
    matches consecutive non-blank lines of `file_lines[start:stop]`: the index of the file line
    matched to tail's last line, and the mean similarity of the matched pairs. None when the range
    holds fewer non-blank lines than `tail`. Ties go to the earliest match (the least slide)."""
    if not tail:
        return None
    wanted = [line_tokens(line) for line in tail]
    rows = [i for i in range(max(start, 0), min(stop, len(file_lines))) if file_lines[i].strip()]
    if len(rows) < len(wanted):
        return None
    tokens = [line_tokens(file_lines[i]) for i in rows]
    best: tuple[int, float] | None = None
    for last in range(len(wanted) - 1, len(rows)):
        first = last - len(wanted) + 1
        score = sum(_similarity(tokens[first + k], wanted[k]) for k in range(len(wanted))) / len(wanted)
        if best is None or score > best[1]:
            best = (rows[last], score)
    return best


def continued_span(file_lines: Sequence[str], start: int, end: int, tail: Sequence[str], after: int,
                   min_similarity: float) -> tuple[int, int]:
    """The window [start, end) slid down (same length, by half its length at most) so that it shows
    `after` non-blank lines past the best match of `tail`; the window itself when the match is weak
    or already followed by that many lines."""
    length = end - start
    reach = length // 2  # the match may lie this far below the window; the slide is capped alike
    matched = match_line(file_lines, start, end + reach, tail)
    if matched is None or matched[1] < min_similarity:
        return start, end
    row = matched[0]
    shown_after = 0
    new_end = row + 1
    while new_end < len(file_lines) and shown_after < after:
        if file_lines[new_end].strip():
            shown_after += 1
        new_end += 1
    slide = min(max(new_end - end, 0), reach)
    return start + slide, end + slide


def continued_blocks(candidates: Sequence[ContextBlock], file_lines: Callable[[str], Sequence[str]],
                     cursor_path: str, tail: Sequence[str], after: int,
                     min_similarity: float) -> list[ContextBlock]:
    """The candidates in order, each window of another file slid by `continued_span` (its text
    re-read through `file_lines(path)`); a window that slides onto the span of an earlier window is
    dropped. Gists and the cursor's own file are left as they are (the prompt
    shows the latter's lines near the cursor)."""
    shown: set[tuple[str, int, int]] = set()
    continued: list[ContextBlock] = []
    for block in candidates:
        if not block.summary and block.path != cursor_path and tail:
            lines = file_lines(block.path)
            start, end = continued_span(lines, block.start_line, block.end_line, tail, after, min_similarity)
            if (start, end) != (block.start_line, block.end_line):
                block = dataclasses.replace(block, start_line=start, end_line=end, text="\n".join(lines[start:end]))
        span = (block.path, block.start_line, block.end_line)
        if not block.summary:
            if span in shown:
                continue
            shown.add(span)
        continued.append(block)
    return continued


def strongest_clone(blocks: Sequence[ContextBlock], file_lines: Callable[[str], Sequence[str]], cursor_path: str,
                    tail: Sequence[str], min_similarity: float) -> int | None:
    """Index of the block of another file whose lines best match `tail` with a non-blank line
    shown after the match (the line a clone suggests next), at least `min_similarity`; the first
    such block on ties; None when there is none."""
    best: tuple[float, int] | None = None
    for position, block in enumerate(blocks):
        if block.summary or block.path == cursor_path or not tail:
            continue
        lines = file_lines(block.path)
        matched = match_line(lines, block.start_line, block.end_line, tail)
        if matched is None or matched[1] < min_similarity:
            continue
        if not any(line.strip() for line in lines[matched[0] + 1 : block.end_line]):
            continue
        if best is None or matched[1] > best[0]:
            best = (matched[1], position)
    return None if best is None else best[1]


def with_clone_at(blocks: Sequence[ContextBlock], clone: int | None, position: int) -> list[ContextBlock]:
    """`blocks` with the one at index `clone` moved to `position` (never later than it was)."""
    ordered = list(blocks)
    if clone is not None and clone > position:
        ordered.insert(position, ordered.pop(clone))
    return ordered


# fragment id -> the span its block showed, None where the block was dropped (a repeated span)
ContinuedSpans = dict[int, tuple[int, int] | None]


def spans_of(candidates: Sequence[ContextBlock], continued: Sequence[ContextBlock]) -> ContinuedSpans:
    """What `continued_blocks` made of each candidate window, to show the same lines again, in
    the order they were shown (a promoted clone keeps its place)."""
    spans: ContinuedSpans = {block.fragment: (block.start_line, block.end_line)
                             for block in continued if not block.summary}
    for block in candidates:
        if not block.summary:
            spans.setdefault(block.fragment, None)
    return spans


def blocks_at(candidates: Sequence[ContextBlock], spans: ContinuedSpans,
              file_lines: Callable[[str], Sequence[str]]) -> list[ContextBlock] | None:
    """The candidates shown at remembered spans (a function's later completions keep the lines its
    first one showed, so their prompts share the block section); None when a candidate window is
    not among the remembered ones (the blocks were retrieved again)."""
    if any(block.fragment not in spans for block in candidates if not block.summary):
        return None
    shown: list[ContextBlock] = []
    for block in candidates:
        span = None if block.summary else spans[block.fragment]
        if block.summary or span == (block.start_line, block.end_line):
            shown.append(block)
        elif span is not None:
            lines = file_lines(block.path)
            shown.append(dataclasses.replace(block, start_line=span[0], end_line=span[1],
                                             text="\n".join(lines[span[0] : span[1]])))
    place = {fragment: rank for rank, fragment in enumerate(spans)}
    windows = iter(sorted((block for block in shown if not block.summary), key=lambda block: place[block.fragment]))
    return [block if block.summary else next(windows) for block in shown]
