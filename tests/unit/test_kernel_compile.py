"""The first run's kernel compilation as a step of its own (repomem/kernel_compile.py): it runs its
steps on a real index under its own progress label, once, and records that beside numba's cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from repomem import kernel_compile
from repomem.index.kernels import selection


class Recorder:
    def __init__(self) -> None:
        self.stages: list[tuple[str, int]] = []
        self.advanced = 0

    def start(self, stage: str, total: int) -> None:
        self.stages.append((stage, total))

    def advance(self, units: int = 1) -> None:
        self.advanced += units


def test_the_steps_index_save_load_edit_and_query_a_real_package(tmp_path: Path):
    progress = Recorder()
    kernel_compile._run_steps(tmp_path, progress)  # raises on any failure: the product swallows it
    assert progress.advanced == len(kernel_compile._STEPS)
    assert (tmp_path / ".repomem" / "CURRENT").exists()  # the snapshot the load step read


def test_the_steps_reach_every_kernel(tmp_path: Path):
    """Each kernel the index calls compiles in the step, none later in a session (the joining of
    postings did, at an editor's second edit: ~0.5 s). A kernel that only other kernels call is
    compiled into them (and has no signature of its own when they come from numba's cache)."""
    import importlib
    import inspect
    import pkgutil
    import re

    from numba.core.registry import CPUDispatcher

    from repomem.index import kernels

    kernel_compile._run_steps(tmp_path, Recorder())
    found: dict[str, CPUDispatcher] = {}
    for module_info in pkgutil.iter_modules(kernels.__path__):
        module = importlib.import_module(f"{kernels.__name__}.{module_info.name}")
        found.update({name: value for name, value in vars(module).items()
                      if isinstance(value, CPUDispatcher) and value.__module__ == module.__name__})
    sources = {name: inspect.getsource(kernel.py_func) for name, kernel in found.items()}

    def called_by_a_kernel(name: str) -> bool:
        return any(re.search(rf"\b{name}\(", source) for other, source in sources.items() if other != name)

    missed = sorted(name for name, kernel in found.items() if not kernel.signatures and not called_by_a_kernel(name))
    assert missed == []


def test_the_helper_process_runs_the_steps_without_the_searches_and_reports_each(tmp_path: Path):
    """The helper's half of the two-core compile: a real process, the real steps, a line per step."""
    helper = kernel_compile._start_helper()
    assert helper is not None
    progress = Recorder()
    kernel_compile._follow(helper, progress).join(timeout=300)
    assert helper.returncode == 0 and progress.advanced == len(kernel_compile._STEPS)


def test_the_relation_kernel_is_compiled_for_the_types_the_index_calls_it_with(tmp_path: Path):
    """What this process compiles while the helper runs is what the build and the edit use: no
    second compilation of the largest kernel; and the helper's stand-in returns its types."""
    from numba import typeof

    from repomem.index.kernels.relation_rows import relation_rows

    kernel_compile._run_steps(tmp_path, Recorder())
    arguments = kernel_compile.relation_rows_arguments()
    assert tuple(typeof(argument) for argument in arguments) in relation_rows.signatures
    no_rows = (np.zeros(0, np.int64), *arguments[1:])
    real, stand_in = relation_rows(*no_rows), kernel_compile._no_relations(*no_rows)
    assert [typeof(value) for value in real] == [typeof(value) for value in stand_in]


def _step_without_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[Path]]:
    """compile_kernels_once with its marker in `tmp_path`, no helper process, and steps that only
    record their folder: (the marker, the folders the steps ran in)."""
    marker = tmp_path / "repomem-kernels-test.compiled"
    monkeypatch.setattr(kernel_compile, "compiled_marker", lambda: marker)
    monkeypatch.setattr(kernel_compile, "_checked", {})
    monkeypatch.setattr(kernel_compile, "_start_helper", lambda: None)
    ran: list[Path] = []
    monkeypatch.setattr(kernel_compile, "_run_steps", lambda root, progress: ran.append(root))
    return marker, ran


def test_the_step_runs_once_under_its_label_and_leaves_a_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    marker, ran = _step_without_work(tmp_path, monkeypatch)
    first, again = Recorder(), Recorder()
    kernel_compile.compile_kernels_once(first)
    kernel_compile.compile_kernels_once(again)
    assert first.stages == [(kernel_compile.STAGE, len(kernel_compile._STEPS))] and len(ran) == 1
    assert again.stages == [] and marker.is_file()
    monkeypatch.setattr(kernel_compile, "_checked", {})  # another process: the marker says done
    kernel_compile.compile_kernels_once(again)
    assert again.stages == [] and len(ran) == 1


def test_a_helper_that_fails_leaves_this_process_to_compile_the_rest(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    import subprocess
    import sys

    marker, ran = _step_without_work(tmp_path, monkeypatch)
    monkeypatch.setattr(kernel_compile, "_start_helper", lambda: subprocess.Popen(
        [sys.executable, "-c", "raise SystemExit(3)"], stdout=subprocess.PIPE))
    progress = Recorder()
    kernel_compile.compile_kernels_once(progress)
    assert len(ran) == 1 and marker.is_file()  # the steps ran here, in full
    assert progress.stages == [(kernel_compile.STAGE, 2 * len(kernel_compile._STEPS) + 1)]


def test_a_second_process_waits_for_the_first_and_compiles_nothing(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch):
    """Two test workers or a server beside a command on a fresh machine: one compiles, the other
    waits under the same label and then finds the marker (another process holds the lock here)."""
    import fcntl
    import threading

    marker, ran = _step_without_work(tmp_path, monkeypatch)
    waiting = Recorder()
    with open(tmp_path / kernel_compile.LOCK_NAME, "a+b") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # as the first process does
        second = threading.Thread(target=kernel_compile.compile_kernels_once, args=(waiting,))
        second.start()
        second.join(timeout=1.0)
        assert second.is_alive() and waiting.stages == [(kernel_compile.STAGE, 1)]
        marker.write_text("done by the first process")
        fcntl.flock(held.fileno(), fcntl.LOCK_UN)
    second.join(timeout=30)
    assert not second.is_alive() and ran == []


def test_a_failing_step_leaves_the_command_alone_and_is_not_tried_again(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch):
    marker = tmp_path / "repomem-kernels-test.compiled"
    monkeypatch.setattr(kernel_compile, "compiled_marker", lambda: marker)
    monkeypatch.setattr(kernel_compile, "_checked", {})

    def broken(root: Path, progress: Recorder) -> None:
        raise MemoryError("no room to compile")

    monkeypatch.setattr(kernel_compile, "_run_steps", broken)
    monkeypatch.setattr(kernel_compile, "_start_helper", lambda: None)
    kernel_compile.compile_kernels_once(Recorder())
    assert marker.is_file()


def test_the_marker_lies_beside_numbas_cache_and_names_the_kernels_source():
    marker = kernel_compile.compiled_marker()
    assert marker is not None  # numba caches these kernels beside their source in a writable checkout
    assert marker.parent == Path(selection.top_k_positions._cache._cache_path)
    assert marker.name.startswith("repomem-kernels-") and marker.suffix == ".compiled"


def test_a_changed_kernel_source_clears_numbas_cache_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """numba would keep a stale copy of a callee from another module: the step starts afresh."""
    cached = [tmp_path / "relation_rows.search_bands-190.py311.nbi",
              tmp_path / "relation_rows.search_bands-190.py311.1.nbc",
              tmp_path / "repomem-kernels-0123456789abcdef.compiled"]
    for path in cached:
        path.write_bytes(b"old")
    unrelated = tmp_path / "selection.cpython-311.pyc"
    unrelated.write_bytes(b"python's own")
    marker = tmp_path / "repomem-kernels-fedcba9876543210.compiled"
    monkeypatch.setattr(kernel_compile, "compiled_marker", lambda: marker)
    monkeypatch.setattr(kernel_compile, "_checked", {})
    monkeypatch.setattr(kernel_compile, "_run_steps", lambda root, progress: None)
    kernel_compile.compile_kernels_once(Recorder())
    assert not any(path.exists() for path in cached) and unrelated.exists() and marker.exists()
