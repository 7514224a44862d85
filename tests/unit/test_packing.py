"""Packing retrieved windows into prompt blocks: every line once, the ranking kept."""

from __future__ import annotations

import random

from repomem.completion.packing import pack_blocks
from repomem.completion.prompt import ContextBlock

FILES = {"a.py": [f"a{i}" for i in range(200)], "b.py": [f"b{i}" for i in range(200)]}


def span_text(path: str, start: int, end: int) -> str:
    return "\n".join(FILES[path][start:end])


def window(fragment: int, path: str, start: int, score: float, lines: int = 20) -> ContextBlock:
    return ContextBlock(fragment, path, start, start + lines, span_text(path, start, start + lines), score)


def test_overlapping_windows_merge_up_to_the_cap_then_split():
    blocks = pack_blocks([window(1, "a.py", 0, 9.0), window(2, "b.py", 50, 8.0), window(3, "a.py", 10, 7.0),
                          window(4, "a.py", 20, 6.0), window(5, "a.py", 30, 5.0)], 40, span_text)
    assert [(b.path, b.start_line, b.end_line) for b in blocks] == [("a.py", 0, 40), ("b.py", 50, 70),
                                                                     ("a.py", 40, 50)]
    assert blocks[0].fragments == (1, 3, 4) and blocks[0].fragment == 1 and blocks[0].score == 9.0
    assert blocks[2].fragments == (5,)  # only its uncovered lines
    assert blocks[0].text == span_text("a.py", 0, 40)


def test_every_candidate_line_is_shown_exactly_once():
    rng = random.Random(3)
    for _ in range(50):
        candidates = [window(i, rng.choice(["a.py", "b.py"]), rng.randrange(0, 180, 10), 100.0 - i)
                      for i in range(rng.randrange(1, 12))]
        blocks = pack_blocks(candidates, 40, span_text)
        for path in FILES:
            shown = [line for b in blocks if b.path == path for line in range(b.start_line, b.end_line)]
            wanted = {line for c in candidates if c.path == path for line in range(c.start_line, c.end_line)}
            assert len(shown) == len(set(shown)) and set(shown) == wanted
        assert all(b.end_line - b.start_line <= 40 for b in blocks)
        firsts = [b.fragment for b in blocks]
        assert firsts == sorted(firsts)  # the best-ranked member leads, in ranking order


def test_within_a_budget_a_growth_never_crowds_out_its_window():
    def cost(block: ContextBlock) -> int:
        return block.end_line - block.start_line  # one token a line

    candidates = [window(1, "a.py", 0, 9.0), window(2, "a.py", 10, 8.0), window(3, "b.py", 0, 7.0, lines=5)]
    blocks = pack_blocks(candidates, 40, span_text, budget=25, cost=cost)
    assert [(b.path, b.start_line, b.end_line) for b in blocks] == [("a.py", 0, 20), ("b.py", 0, 5)]
    roomy = pack_blocks(candidates, 40, span_text, budget=35, cost=cost)
    assert [(b.path, b.start_line, b.end_line) for b in roomy] == [("a.py", 0, 30), ("b.py", 0, 5)]


def test_a_merged_block_keeps_its_members_best_similarity():
    first = ContextBlock(1, "a.py", 0, 20, span_text("a.py", 0, 20), 9.0, similarity=2.0)
    neighbour = ContextBlock(2, "a.py", 10, 30, span_text("a.py", 10, 30), 8.0, similarity=6.0)
    alone = ContextBlock(3, "b.py", 0, 20, span_text("b.py", 0, 20), 7.0, similarity=4.0)
    blocks = pack_blocks([first, neighbour, alone], 40, span_text)
    assert [(b.fragments, b.similarity) for b in blocks] == [((1, 2), 6.0), ((3,), 4.0)]
