"""The folder of prompt states (repomem.backends.prompt_states) without a model: which state a
prompt gets, what a damaged file does, what is evicted. The model's side (a loaded state answers
as a cold evaluation) is tests/e2e/test_prompt_states.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from repomem.backends.prompt_states import MAGIC, StateFolder, state_folder


def _state(size: int, seed: int) -> bytes:
    return bytes((seed + i) % 251 for i in range(size))


def test_the_longest_shared_beginning_is_found_and_read_back(tmp_path):
    folder = StateFolder(tmp_path / "model", 1 << 20)
    folder.write([1, 2, 3, 4, 5, 6], _state(100, 1))
    folder.write([1, 2, 9, 9], _state(50, 2))
    found = folder.longest([1, 2, 3, 4, 7, 7, 7], at_least=2)
    assert found is not None and found.shared == 4
    assert folder.read(found.path) == ([1, 2, 3, 4, 5, 6], _state(100, 1))
    assert folder.longest([1, 2, 3, 4, 7], at_least=5) is None  # not enough shared
    assert folder.longest([8, 8], at_least=1) is None


def test_a_state_holding_another_whole_replaces_it(tmp_path):
    folder = StateFolder(tmp_path / "model", 1 << 20)
    folder.write([1, 2, 3], _state(10, 1))
    folder.write([1, 2, 4], _state(10, 2))
    folder.write([1, 2, 3, 4, 5], _state(20, 3))  # holds [1, 2, 3] whole, not [1, 2, 4]
    kept = sorted(folder.read(path)[0] for path in (tmp_path / "model").iterdir())
    assert kept == [[1, 2, 3, 4, 5], [1, 2, 4]]


@pytest.mark.parametrize("damage", ["a flipped byte in the state", "a flipped byte in the tokens",
                                    "cut short", "grown", "not a state"])
def test_a_damaged_state_is_refused_and_deleted(tmp_path, damage):
    folder = StateFolder(tmp_path / "model", 1 << 20)
    folder.write([5, 6, 7, 8], _state(64, 3))
    path = next((tmp_path / "model").iterdir())
    data = bytearray(path.read_bytes())
    if damage == "a flipped byte in the state":
        data[-10] ^= 0x40
    elif damage == "a flipped byte in the tokens":
        data[-64 - 3] ^= 0x01
    elif damage == "cut short":
        del data[-1:]
    elif damage == "grown":
        data += b"\0"
    else:
        data[: len(MAGIC)] = b"x" * len(MAGIC)
    path.write_bytes(bytes(data))
    found = folder.longest([5, 6, 7, 8, 9], at_least=1)
    if found is not None:  # the tokens may still read as tokens; the check comes before any use
        assert folder.read(found.path) is None
    assert not path.exists() or damage == "not a state" and found is None


def test_the_least_recently_used_states_of_every_model_go_first(tmp_path):
    # Each file: 300 bytes of state, 4 of tokens, 67 of header: three fit in 1,150 bytes, four do not.
    one, other = StateFolder(tmp_path / "one", 1150), StateFolder(tmp_path / "other", 1150)
    one.write([1], _state(300, 1))
    other.write([2], _state(300, 2))
    one.write([3], _state(300, 3))
    paths = {tuple(folder.read(path)[0]): path for folder in (one, other) for path in folder.folder.iterdir()}
    long_ago = time.time() - 100
    for age, tokens in enumerate([(2,), (1,), (3,)]):  # oldest first: [2] in the other model's folder
        os.utime(paths[tokens], (long_ago + age, long_ago + age))
    one.write([4], _state(300, 4))
    left = sorted(tuple(folder.read(path)[0]) for folder in (one, other) for path in folder.folder.iterdir())
    assert left == [(1,), (3,), (4,)]


def test_a_temporary_file_a_killed_writer_left_is_removed_once_stale(tmp_path):
    folder = StateFolder(tmp_path / "model", 1 << 20)
    folder.folder.mkdir()
    fresh, stale = folder.folder / ".a.state.1.tmp", folder.folder / ".b.state.2.tmp"
    fresh.write_bytes(b"partial")
    stale.write_bytes(b"partial")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    folder.write([1, 2], _state(10, 1))
    assert fresh.exists() and not stale.exists()


def test_states_are_private_to_the_user(tmp_path):
    folder = StateFolder(tmp_path / "model", 1 << 20)
    folder.write([1, 2], _state(10, 1))
    assert folder.folder.stat().st_mode & 0o077 == 0
    assert all(path.stat().st_mode & 0o077 == 0 for path in folder.folder.iterdir())


def test_an_unwritable_folder_keeps_nothing_and_raises_nothing(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    folder = StateFolder(blocker / "model", 1 << 20)
    folder.write([1, 2], _state(10, 1))
    assert folder.longest([1, 2, 3], at_least=1) is None


def test_the_folder_changes_with_the_model_file_and_how_it_runs(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"weights")
    first = state_folder(tmp_path, model, ("0.3.36", 4096, -1))
    assert state_folder(tmp_path, model, ("0.3.36", 4096, -1)) == first
    assert state_folder(tmp_path, model, ("0.3.36", 2048, -1)) != first
    assert state_folder(tmp_path, model, ("0.3.37", 4096, -1)) != first
    os.utime(model, ns=(1, 1))
    assert state_folder(tmp_path, model, ("0.3.36", 4096, -1)) != first
    assert isinstance(first, Path) and first.parent == tmp_path
