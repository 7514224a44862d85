"""Threads llama.cpp reads prompts and writes tokens with (repomem/backends/cpu_threads.py): two
threads writing tokens on two cores are twice as fast as one on a quiet machine and four times
slower whenever a third process runs, so each token goes to the faster count of late."""

from __future__ import annotations

from pathlib import Path

import pytest

import repomem.backends.cpu_threads as cpu_threads
from repomem.backends.cpu_threads import TRY_OTHER_EVERY, DecodeThreads, decode_counts, prompt_threads
from repomem.backends.llama_process import _command
from repomem.config import default_config


@pytest.mark.parametrize(("cores", "threads", "decode", "expected"), [
    (2, 0, 0, (2, (1, 2))),  # every core reads the prompt; tokens by the faster of 1 and 2
    (8, 0, 0, (8, (7, 8))),
    (1, 0, 0, (1, (1, 1))),  # one core: nothing to choose
    (2, 0, 2, (2, (2, 2))),  # the setting, as given
])
def test_the_counts_a_machine_reads_and_writes_with(monkeypatch, cores, threads, decode, expected):
    monkeypatch.setattr(cpu_threads.os, "cpu_count", lambda: cores)
    assert (prompt_threads(threads), decode_counts(threads, decode)) == expected


def _written(choice: DecodeThreads, seconds_by_count: dict[int, float], tokens: int) -> list[int]:
    counts = []
    for _ in range(tokens):
        count = choice.next()
        choice.record(count, seconds_by_count[count])
        counts.append(count)
    return counts


def test_each_token_goes_to_the_faster_count_and_the_other_is_tried_again_now_and_then():
    choice = DecodeThreads(1, 2)
    quiet = _written(choice, {2: 0.052, 1: 0.107}, 64)
    assert quiet[:2] == [2, 1]  # each tried once, the most threads first
    assert quiet.count(1) - 1 == 64 // TRY_OTHER_EVERY  # then one in TRY_OTHER_EVERY
    # A process starts beside: two threads wait on each other; within a few tokens one writes them.
    busy = _written(choice, {2: 0.391, 1: 0.106}, 48)
    assert busy[-40:].count(1) >= 40 - 40 // TRY_OTHER_EVERY - 1
    # It ends: two threads are faster again once tried.
    calm = _written(choice, {2: 0.052, 1: 0.107}, 48)
    assert calm[-24:].count(2) >= 24 - 24 // TRY_OTHER_EVERY - 1


def test_the_model_process_is_told_both_counts(monkeypatch):
    monkeypatch.setattr(cpu_threads.os, "cpu_count", lambda: 2)
    settings = default_config().model
    command = _command(Path("m.gguf"), 4096, settings.threads, -1, 0, None, False, settings.decode_threads)
    assert command[command.index("--threads") + 1] == "2"
    assert command[command.index("--decode-threads") + 1] == "0"  # the faster of two counts
    fixed = _command(Path("m.gguf"), 4096, 0, -1, 0, None, False, 1)
    assert fixed[fixed.index("--decode-threads") + 1] == "1"
