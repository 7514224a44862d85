"""The warm prefix (order "stable", repomem/completion/warm_prefix.py): where a function's prompts
start the current file, what the first prompt leaves free, and the first kept line's search."""

from __future__ import annotations

import random

from repomem.completion.warm_prefix import (
    COLD_START,
    FIRST_LINE_SLOT,
    HEADROOM_SHARE,
    FunctionKey,
    FunctionMemory,
    PromptStart,
    WarmPrefix,
    first_kept_line,
)
from repomem.retrieval.scoring import ScoredFragment


def _reference_first_line(sizes: list[int], budget: int, start: PromptStart) -> int | None:
    """By enumeration: the fewest lines dropped that fit the budget less the headroom; the hint
    kept while it fits the whole budget; a quarter of the room cleared when it no longer does."""
    n = len(sizes)

    def fits(first: int, spared: int) -> bool:
        return sum(sizes[first:]) + 3 <= budget - spared  # 3: what the prompt holds besides the lines

    hint = start.hint
    if hint is not None and 0 < hint < n:
        if fits(0, start.headroom):
            return 0
        if fits(hint, 0):
            return hint
    if not fits(n - 1, 0):
        return None
    low = next(first for first in range(n) if fits(first, start.headroom) or first == n - 1)
    if hint is not None and low > 0:
        return hint if low <= hint < n else min(n - 1, low + (n - low) // 4)
    return low


def test_the_first_kept_line_is_what_enumeration_gives_and_counts_few_prompts():
    rng = random.Random(11)
    for _ in range(2000):
        sizes = [rng.randint(0, 9) for _ in range(rng.randint(1, 50))]
        budget = rng.randint(5, 200)
        start = PromptStart(None, rng.choice([None, 0, rng.randint(0, len(sizes) + 2)]), rng.choice([0, 0, 4, 12]))
        counts: list[int] = []

        def fits(first: int, spared: int, sizes=sizes, budget=budget, counts=counts) -> bool:
            counts.append(first)
            return sum(sizes[first:]) + 3 <= budget - spared

        assert first_kept_line(len(sizes), fits, start) == _reference_first_line(sizes, budget, start), \
            (sizes, budget, start)
        assert len(counts) <= 2 + max(len(sizes), 1).bit_length() + 1


LINES = [f"line {n}" for n in range(4)] + ["def f(x):"] + [f"    x += {n}" for n in range(40)]


def test_a_function_keeps_its_start_and_leaves_headroom_only_in_order_stable():
    warm = WarmPrefix.new()
    assert WarmPrefix.key("similarity", "a.py", 4, LINES) is None
    assert warm.start(None, 0, 1024) == COLD_START  # outside order "stable": nothing remembered, nothing spared
    key = WarmPrefix.key("stable", "a.py", 4, LINES)
    assert (key.path, key.definition, key.same_before, key.line) == ("a.py", "def f(x):", 0, 4)
    first = warm.start(key, 0, 1024)
    assert first == PromptStart(None, None, 1024 // HEADROOM_SHARE)  # the first prompt in the function
    warm.remember_start(key, 30)
    assert warm.start(key, 10, 1024) == PromptStart(30, 20, 64)  # the hint counts the fit's left lines
    assert warm.start(key, 31, 1024) == PromptStart(None, None, 64)  # the start lies above what may be shown
    assert warm.start(key, 10, 1024).afresh() == PromptStart(None, 20, 64)
    warm.remember_start(None, 5)  # order other than "stable": nothing to remember
    assert warm.start(FunctionKey.of("b.py", 1, LINES), 0, 1024).aim is None
    # Three lines typed above: the same function, its start moved with it.
    moved = WarmPrefix.key("stable", "a.py", 7, ["x = 1"] * 3 + LINES)
    assert moved == key and warm.start(moved, 10, 1024) == PromptStart(33, 23, 64)


def test_functions_are_remembered_by_their_definition_not_its_line_number():
    """Lines inserted above moved one function onto another's old line, which then gave it the
    other's retrieved blocks; a second definition of the same text is another function."""
    lines = ["class A:", "    def __init__(self):", "        pass",
             "class B:", "    def __init__(self):", "        pass"]
    first, second = FunctionKey.of("a.py", 1, lines), FunctionKey.of("a.py", 4, lines)
    assert first != second and (first.same_before, second.same_before) == (0, 1)
    shifted = ["import os", ""] + lines
    assert FunctionKey.of("a.py", 3, shifted) == first and FunctionKey.of("a.py", 6, shifted) == second
    assert FunctionKey.of("a.py", 1, shifted) != first  # what now stands on the first's old line
    assert FunctionKey.of("a.py", -1, lines) == FunctionKey.of("a.py", -1, shifted)  # the module level
    assert WarmPrefix.key("stable", "a.py", -1, lines) is None  # which keeps no memory: one per file was shared
    warm = WarmPrefix.new()
    warm.remember_fragments(first, ["blocks of A"])
    assert warm.fragments(FunctionKey.of("a.py", 1, shifted), lambda kept: kept) is None
    assert warm.fragments(FunctionKey.of("a.py", 3, shifted), lambda kept: kept) == ["blocks of A"]


def test_slots_stay_bounded_when_no_fragments_are_kept():
    """A slot set for functions whose fragments were never kept (nothing retrieved, no index yet)
    grew without bound: each slot keeps at most the memory's size, the least recently set dropped."""
    memory = FunctionMemory(size=4)
    for n in range(100):
        memory.set(FIRST_LINE_SLOT, FunctionKey("a.py", f"def f{n}():", 0, n), n)
    assert memory.get(FIRST_LINE_SLOT, FunctionKey("a.py", "def f99():", 0, 0)) == 99
    assert memory.get(FIRST_LINE_SLOT, FunctionKey("a.py", "def f95():", 0, 0)) is None
    assert len(memory._slots[FIRST_LINE_SLOT]) == 4


def test_fragments_are_remembered_per_function_and_never_empty():
    warm = WarmPrefix.new(size=2)
    key = ("a.py", 1)
    warm.remember_fragments(key, [])
    assert warm.fragments(key, lambda remembered: remembered) is None  # nothing found: nothing kept
    fragment = ScoredFragment(3, "b.py", 0, 20, 0.0, 0.0, 1.0)
    warm.remember_fragments(key, [fragment])
    assert warm.fragments(key, lambda remembered: remembered) == [fragment]
    assert warm.fragments(key, lambda remembered: None) is None  # a window gone since: retrieve again
