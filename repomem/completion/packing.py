"""Packing retrieved windows into prompt blocks without repeating lines.

RepoCoder's windows overlap by half (20 lines moving by 10), so the best windows of a file often
share ten lines, and many block tokens repeat a line the prompt already shows
(docs/repoeval-devset.md#block-packing). Packing keeps the ranking but shows each line once:
a window's lines already covered by a better block of the same file are dropped, and what is
left joins an adjacent block (up to `max_lines`) or becomes a block of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from repomem.completion.prompt import ContextBlock

# (path, first line, line after the last) -> the text of those lines
SpanText = Callable[[str, int, int], str]


def _uncovered(start: int, end: int, covered: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Parts of [start, end) outside every covered span."""
    spans = [(start, end)]
    for low, high in covered:
        spans = [part for s, e in spans
                 for part in ((s, min(e, low)), (max(s, high), e)) if part[1] > part[0]]
    return spans


def _block(candidate: ContextBlock, start: int, end: int, members: tuple[int, ...], score: float,
           span_text: SpanText, fragment: int | None = None, similarity: float | None = None) -> ContextBlock:
    return ContextBlock(candidate.fragment if fragment is None else fragment, candidate.path, start, end,
                        span_text(candidate.path, start, end), score, members,
                        similarity=candidate.similarity if similarity is None else similarity)


def pack_blocks(candidates: Sequence[ContextBlock], max_lines: int, span_text: SpanText,
                budget: int | None = None, cost: Callable[[ContextBlock], int] | None = None) -> list[ContextBlock]:
    """Blocks in the candidates' order (best first), each line of a file shown at most once.

    With `budget` and `cost` (tokens of a rendered block) this is also the prompt's block selection:
    a growth or a new block is taken only while the chosen blocks' cost stays within `budget`, so a
    merged block never crowds out the window it grew from.
    """
    packed: list[ContextBlock] = []
    costs: list[int] = []
    for candidate in candidates:
        if candidate.summary:  # a gist is not the lines it covers: never cut nor merged
            summary_cost = cost(candidate) if cost is not None else 0
            if budget is None or sum(costs) + summary_cost <= budget:
                packed.append(candidate)
                costs.append(summary_cost)
            continue
        for start, end in _uncovered(candidate.start_line, candidate.end_line,
                                     [(b.start_line, b.end_line) for b in packed
                                      if b.path == candidate.path and not b.summary]):
            neighbour = next((i for i, b in enumerate(packed)
                              if b.path == candidate.path and not b.summary
                              and b.end_line >= start and b.start_line <= end
                              and max(b.end_line, end) - min(b.start_line, start) <= max_lines), None)
            if neighbour is not None:
                old = packed[neighbour]
                members = old.fragments if candidate.fragment in old.fragments else (*old.fragments,
                                                                                     candidate.fragment)
                grown = _block(old, min(old.start_line, start), max(old.end_line, end), members,
                               max(old.score, candidate.score), span_text, old.fragment,
                               max(old.similarity_key, candidate.similarity_key))
                grown_cost = cost(grown) if cost is not None else 0
                if budget is None or sum(costs) - costs[neighbour] + grown_cost <= budget:
                    packed[neighbour], costs[neighbour] = grown, grown_cost
                    continue
            block = _block(candidate, start, end, (candidate.fragment,), candidate.score, span_text)
            block_cost = cost(block) if cost is not None else 0
            if budget is None or sum(costs) + block_cost <= budget:
                packed.append(block)
                costs.append(block_cost)
    return packed
