"""The index kernels compiled once per machine, as a step of its own with its own progress label.

numba compiles a kernel the first time a process calls it and caches the machine code beside its
source; later processes load it in milliseconds. The first run on a machine compiles some fifty
kernels, ~30 s of one core's work, which used to pass inside the "parsing" and "relations" bars
with nothing moving. `RepoService.ensure_index` calls `compile_kernels_once` first: when the kernels of
this source, this numba, this Python and this CPU were never compiled here, a small package in a
temporary folder is indexed, saved, loaded, edited and queried under the label below (every kernel
an index needs compiles then), and a marker beside numba's cache records it. Since the marker is
named by the kernels' source, the step also runs after an upgrade that changed a kernel, and it
starts by removing the cached kernels (numba would keep a stale copy of a callee in another module).
A failure here only leaves the kernels to compile where they are first used, as before.

The step uses both cores: numba compiles one kernel at a time on one core, and one kernel,
`relation_rows` with the searches it calls, is a third of the work. A helper process runs the steps
with the relation searches left out (their results empty, so every kernel downstream still compiles
for the same types), while this process compiles `relation_rows` alone for the types the index
gives it; both write numba's cache. The steps then run here in full, loading what the two compiled.
A helper that cannot start or fails leaves this process to compile the rest in that last run.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

from repomem.child_processes import die_with_parent
from repomem.config import Config
from repomem.failures import Failure
from repomem.index.index_folder import index_dir
from repomem.index.kernels.relation_rows import (
    FragmentCover,
    RelationRules,
    StartAnchors,
    relation_rows,
    relation_scratch,
)
from repomem.index.kernels.shortest_paths import GraphRows, SearchLimits
from repomem.index.repo_index import apply_changes, build_index
from repomem.index.scan import SourceFile, source_from_bytes
from repomem.index.snapshot_load import load_index
from repomem.index.snapshot_save import save_index
from repomem.machine_lock import machine_lock
from repomem.progress import Progress
from repomem.retrieval.scoring import best_fragments, score_fragments

STAGE = "compiling the index kernels (once on this machine)"

# A small package whose index has every part the kernels build: syntax nodes over several windows,
# calls within a file and across files, a class with methods, an import, and a folder.
_PACKAGE = {
    "shop/__init__.py": "",
    "shop/pricing.py": (
        '"""Prices."""\n\nRATES = {"standard": 20, "reduced": 5}\n\n\n'
        "def rate_of(tax_class):\n    return RATES.get(tax_class, 0)\n\n\n"
        "def compute_tax(amount_cents, tax_class):\n    rate = rate_of(tax_class)\n"
        "    return amount_cents * rate // 100\n\n\n"
        "class PriceList:\n    def __init__(self, prices):\n        self.prices = dict(prices)\n\n"
        "    def price(self, name):\n        return self.prices[name]\n\n"
        "    def with_tax(self, name, tax_class):\n        amount = self.price(name)\n"
        "        return amount + compute_tax(amount, tax_class)\n"
    ),
    "shop/cart.py": (
        "from .pricing import PriceList, compute_tax\n\n\n"
        "class Cart:\n    def __init__(self, prices):\n        self.items = []\n"
        "        self.prices = PriceList(prices)\n\n"
        "    def add(self, name):\n        self.items.append(name)\n\n"
        "    def total(self, tax_class):\n        amounts = [self.prices.price(name) for name in self.items]\n"
        "        return sum(amounts) + compute_tax(sum(amounts), tax_class)\n"
    ),
}
# More distinct words than the tokenizer's first hash table holds (index.tokens._WordTable), so the
# table grows as it does early in any real repository; in 22 lines (two windows): the package
# stays small.
_CODES = "shop/codes.py"
_PACKAGE[_CODES] = "CODES = [\n" + "".join(
    "    " + " ".join(f"'code_{n}'," for n in range(row, row + 100)) + "\n" for row in range(0, 2100, 100)) + "]\n"
_EDITED = ("shop/cart.py",
           "\n    def clear(self):\n        self.items = []\n        return compute_tax(0, 'standard')\n")

_checked: dict[str, bool] = {}  # marker path -> compiled (one look per process)


def compile_kernels_once(progress: Progress) -> None:
    """Compile every index kernel now, under STAGE, unless this machine has them compiled. One
    process at a time (a lock beside the marker): another that starts meanwhile (a second test
    worker, an editor's server beside a command) waits under the same label, then finds the marker."""
    marker = compiled_marker()
    if marker is None or _checked.get(str(marker)) or marker.exists():
        _checked[str(marker)] = True
        return
    _checked[str(marker)] = True  # before the step: the step's own index must not start another
    with machine_lock(marker.parent / LOCK_NAME, lambda: progress.start(STAGE, 1), LOCK_WAIT_S):
        if marker.exists():  # compiled by the process this one waited for
            return
        _forget_compiled(marker.parent)
        _compile_all(progress)
        try:
            marker.write_text(f"{STAGE}: done by repomem for {platform.machine()} / Python "
                              f"{sys.version.split()[0]}\n", encoding="utf-8")
        except OSError:
            pass


def _compile_all(progress: Progress) -> None:
    """The steps, on both cores where a helper process starts (see the module)."""
    helper = _start_helper()
    # The helper's steps and the relation kernel, then the same steps here (quick once the two
    # have compiled); without a helper, the steps alone.
    progress.start(STAGE, 2 * len(_STEPS) + 1 if helper is not None else len(_STEPS))
    try:
        if helper is not None:
            reader = _follow(helper, progress)
            try:
                _compile_relation_rows()  # while the helper compiles the rest
            except Exception:  # noqa: BLE001 - the steps below compile it where they call it
                pass
            progress.advance()
            reader.join(timeout=HELPER_TIMEOUT_S)
        with tempfile.TemporaryDirectory(prefix="repomem-kernels-") as folder:
            _run_steps(Path(folder), progress)
    except Exception:  # noqa: BLE001 - a failure only leaves the rest to compile where first used
        pass  # (and is not tried again: what it compiled stays cached; tests run the steps themselves)
    finally:
        if helper is not None and helper.poll() is None:
            helper.kill()
            helper.wait()


_STEPS = ("build", "save and load", "edit", "query")
LOCK_NAME = "repomem-kernels.lock"  # beside the marker; _forget_compiled leaves it
LOCK_WAIT_S = 900.0  # longer than a step has ever taken
HELPER_TIMEOUT_S = 600.0  # then it is ended, and this process compiles what it left
STEP_LINE = b"repomem-kernel-step"  # what the helper writes on stdout after each step


def _start_helper() -> subprocess.Popen | None:
    """The helper process (`helper_main`), with this process's interpreter and environment (numba's
    cache folder included), from the folder holding this repomem; None when it cannot start."""
    package_parent = Path(__file__).resolve().parent.parent  # this module is repomem/kernel_compile.py
    try:
        return subprocess.Popen(
            [sys.executable, "-c", "from repomem.kernel_compile import helper_main; helper_main()"],
            cwd=package_parent, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={**os.environ, "REPOMEM_PARENT_PID": str(os.getpid())})
    except OSError:
        return None


def _follow(helper: subprocess.Popen, progress: Progress) -> threading.Thread:
    """A thread that advances `progress` as the helper reports its steps (a line each: rich's bars
    and the language server's reports take advances from any thread) and ends with the helper."""

    def read() -> None:
        for line in helper.stdout or ():
            if line.strip() == STEP_LINE:
                progress.advance()
        helper.wait()

    reader = threading.Thread(target=read, name="kernel-compile-helper", daemon=True)
    reader.start()
    return reader


def helper_main() -> None:
    """The helper process: the steps with the relation searches left out (see the module)."""
    die_with_parent(int(os.environ.get("REPOMEM_PARENT_PID", os.getppid())))
    from repomem.index import relations

    relations.relation_rows = _no_relations  # this process only indexes the throwaway package
    relations.TWO_THREAD_MIN_ROWS = sys.maxsize  # an edit's rows past it call its parts, not it
    with tempfile.TemporaryDirectory(prefix="repomem-kernels-") as folder:
        _run_steps(Path(folder), _StepLines())


def _no_relations(rows, cover, graph, limits, rules, anchors, scratch):
    """What `relation_rows` returns for rows with no relation, typed as it types it."""
    return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64),
            np.full(rows.shape[0], rules.relation_cutoff), True)


def relation_rows_arguments() -> tuple:
    """Arguments of `relation_rows` typed as relations.graph_relation_entries types them (tiny; a
    unit test checks the index calls it with these types and no others)."""
    ints, reals = np.zeros(1, np.int64), np.zeros(1, np.float64)
    cover = FragmentCover(ints, ints, reals, reals, ints, np.zeros(1, np.bool_), ints, ints, reals)
    graph = GraphRows(ints, ints, ints, reals, 0.0, True)
    anchors = StartAnchors(0, ints, reals, reals, ints, ints)
    return ints, cover, graph, SearchLimits(1.0, 1), RelationRules(1e-3, 1, 0.0), anchors, relation_scratch(1, 1, 1)


def _compile_relation_rows() -> None:
    from numba import typeof

    relation_rows.compile(tuple(typeof(argument) for argument in relation_rows_arguments()))


class _StepLines:
    """The helper's progress: a line on stdout per step, which its parent's bar counts."""

    def start(self, stage: str, total: int) -> None:
        pass

    def advance(self, units: int = 1) -> None:
        sys.stdout.buffer.write(STEP_LINE + b"\n")
        sys.stdout.flush()


def _forget_compiled(cache_folder: Path) -> None:
    """Remove numba's cached kernels and older markers: numba checks only a kernel's own file for
    changes, so a kernel calling into another module (relation_rows -> selection) kept its cached
    copy of a callee whose file changed. A changed kernel source changes the marker's name, so the
    step after an upgrade compiles everything afresh. Files another process holds are left."""
    for pattern in ("*.nbi", "*.nbc", "repomem-kernels-*.compiled"):
        for stale in cache_folder.glob(pattern):
            try:
                stale.unlink()
            except OSError:
                pass


def _run_steps(root: Path, progress: Progress) -> None:
    """Index _PACKAGE (the parse, the graph, W), save and load it (the snapshot's codecs and checks),
    edit it thrice (the edit path's kernels, the joining of postings) and score a query
    both ways (the top K alone, and every fragment)."""
    config = Config()
    built = build_index(root, config, [_source(path, text, config) for path, text in _PACKAGE.items()])
    progress.advance()
    save_index(built, index_dir(root, config))
    index = load_index(root, config)
    if isinstance(index, Failure):
        raise RuntimeError(index.message)
    progress.advance()
    index.prepare_edits()
    path, added = _EDITED
    apply_changes(index, [_source(path, _PACKAGE[path] + added, config)], [])
    # Another file next: its postings join the first edit's, both live (bm25.postings_joined), a
    # kernel of its own that an editing session otherwise compiled at its second edit.
    apply_changes(index, [_source(_CODES, _PACKAGE[_CODES] + "MORE = CODES\n", config)], [])
    apply_changes(index, [_source(path, _PACKAGE[path], config)], [])
    progress.advance()
    query = "\n".join((_PACKAGE[path] + added).splitlines()[-6:])
    best_fragments(index, query, config.retrieval.alpha, config.retrieval.top_k)
    score_fragments(index, query, config.retrieval.alpha)
    progress.advance()


def _source(path: str, text: str, config: Config) -> SourceFile:
    """The file as the scan reads one (repomem.index.scan.source_from_bytes)."""
    source = source_from_bytes(path, "python", text.encode("utf-8"), 0, config.scan)
    if not isinstance(source, SourceFile):
        raise RuntimeError(source.reason)
    return source


@functools.cache
def compiled_marker() -> Path | None:
    """The file that says the kernels were compiled here: beside numba's cache of them (the two go
    together), named by what makes numba compile again (the kernels' source, numba's version,
    Python's, the CPU). None where numba keeps no cache it names, or one this process cannot write."""
    try:
        import numba
        from llvmlite import binding

        from repomem.index.kernels import selection

        cache_folder = Path(selection.top_k_positions._cache._cache_path)  # numba's FunctionCache
        host = f"{numba.__version__} {sys.version} {platform.machine()} {binding.get_host_cpu_name()}"
        cache_folder.mkdir(parents=True, exist_ok=True)  # numba makes it at its first save
    except Exception:  # noqa: BLE001 - another numba, or no room: the kernels compile where first used
        return None
    if not os.access(cache_folder, os.W_OK):
        return None
    digest = hashlib.sha256(host.encode())
    for source in sorted((Path(__file__).parent / "index" / "kernels").glob("*.py")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return cache_folder / f"repomem-kernels-{digest.hexdigest()[:16]}.compiled"
