"""reuse_plan: which cached runs a prompt repeats, and where they move (repomem.backends.kv_reuse)."""

from __future__ import annotations

import random

from repomem.backends.base import common_prefix
from repomem.backends.kv_reuse import Run, reuse_plan, reused_tokens


def tokens(start: int, count: int) -> list[int]:
    return list(range(start, start + count))


def test_a_common_beginning_alone_is_what_a_prefix_cache_keeps():
    cached = tokens(0, 100)
    prompt = tokens(0, 60) + tokens(500, 10)
    assert reuse_plan(cached, prompt, 8) == (60, [])
    assert reused_tokens(cached, prompt, 8) == 60


def test_a_replaced_block_keeps_the_file_window_after_it_moved():
    header, old_block, new_block, window = tokens(0, 10), tokens(100, 40), tokens(200, 25), tokens(300, 80)
    cached = header + old_block + window
    prompt = header + new_block + window + tokens(900, 3)  # the cursor's line changed at the end
    start, runs = reuse_plan(cached, prompt, 16)
    assert start == 10
    assert runs == [Run(prompt_start=35, cached_start=50, length=80)]  # moved 15 to the left
    assert reused_tokens(cached, prompt, 16) == 90


def test_blocks_that_swap_places_keep_the_longer_in_order():
    a, b, tail = tokens(100, 50), tokens(200, 20), tokens(300, 30)
    cached = a + b + tail
    prompt = b + a + tail  # crossing moves are not made: the heaviest increasing chain is a + tail
    start, runs = reuse_plan(cached, prompt, 8)
    assert start == 0
    assert runs == [Run(20, 0, 50), Run(70, 70, 30)]


def test_runs_shorter_than_the_minimum_and_a_zero_minimum_reuse_nothing_more():
    cached = tokens(0, 10) + tokens(100, 12) + tokens(50, 5)
    prompt = tokens(0, 10) + tokens(700, 4) + tokens(100, 12)
    assert reuse_plan(cached, prompt, 16) == (10, [])
    assert reuse_plan(cached, prompt, 0) == (10, [])
    assert reuse_plan(cached, prompt, 12) == (10, [Run(14, 10, 12)])


def test_a_prompt_repeated_whole_reevaluates_its_last_token():
    cached = tokens(0, 50)
    assert reused_tokens(cached, cached, 8) == 49  # llama.cpp needs the last token's logits
    assert reused_tokens([], tokens(0, 5), 8) == 0


def test_plans_on_random_edits_are_real_matches_in_order_and_disjoint():
    rng = random.Random(7)
    for _ in range(200):
        pieces = [[rng.randrange(40) for _ in range(rng.randrange(1, 30))] for _ in range(8)]
        cached = [t for piece in pieces for t in piece]
        kept = [piece for piece in pieces if rng.random() < 0.7]
        rng.shuffle(kept)
        prompt = [t for piece in kept for t in piece + [rng.randrange(40) for _ in range(rng.randrange(3))]]
        min_run = rng.choice((4, 8, 16))
        start, runs = reuse_plan(cached, prompt, min_run)
        assert start == common_prefix(cached, prompt)
        previous_prompt_end, previous_cached_end = start, start
        for run in runs:
            assert run.length >= min_run
            assert run.prompt_start >= previous_prompt_end and run.cached_start >= previous_cached_end
            assert prompt[run.prompt_start:run.prompt_start + run.length] == \
                cached[run.cached_start:run.cached_start + run.length]
            previous_prompt_end = run.prompt_start + run.length
            previous_cached_end = run.cached_start + run.length
        assert reused_tokens(cached, prompt, min_run) <= max(len(prompt) - 1, 0)


def test_cells_moved_too_often_stay_only_in_the_common_beginning():
    header, old_block, new_block, window = tokens(0, 10), tokens(100, 40), tokens(200, 25), tokens(300, 80)
    cached = header + old_block + window
    prompt = header + new_block + window
    fresh = [True] * len(cached)
    worn = [True] * 50 + [False] * 80  # the window's cells were moved to their limit
    assert reuse_plan(cached, prompt, 16, fresh)[1] == [Run(35, 50, 80)]
    assert reuse_plan(cached, prompt, 16, worn) == (10, [])
    half = [True] * 90 + [False] * 40  # its first half may move again, alone
    assert reuse_plan(cached, prompt, 16, half)[1] == [Run(35, 50, 40)]
    assert reuse_plan(cached, cached, 16, [False] * len(cached)) == (len(cached), [])
