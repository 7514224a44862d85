"""Usage found through call edges, on a hand-checked repository: shared callees (functions that call
the repository functions the cursor's function already called) and imported usage (windows that call
what the file imports and has not called yet); resolved call edges, not names."""

from __future__ import annotations

import numpy as np
import pytest

from repomem.completion.engine import CompletionEngine
from repomem.completion.levers.imported_usage import imported_not_called, imported_usage_blocks, usage_windows
from repomem.completion.levers.shared_callees import shared_callee_blocks, shared_callee_sites
from repomem.config import Config, with_overrides
from repomem.positions import locate
from repomem.retrieval.symbol_view import SymbolView
from repomem.service import RepoService
from tests.unit.test_scope_imports import Words

FILES = {
    "pkg/__init__.py": "",
    "pkg/store.py": "def load(path):\n    return open(path).read()\n\n\ndef index(data):\n    return sorted(data)\n\n\n"
                    "def save(data, path):\n    open(path, 'w').write(data)\n",
    # Same names, other definitions: BM25 cannot tell them apart, the call edges can.
    "pkg/other.py": "def load(path):\n    return path\n\n\ndef index(data):\n    return data\n",
    "pkg/jobs.py": "from .store import load, index, save\n\n\ndef archive(path):\n    data = load(path)\n"
                   "    ordered = index(data)\n    save(ordered, path + '.bak')\n    return ordered\n\n\n"
                   "def peek(path):\n    return load(path)\n",
    "pkg/decoy.py": "from .other import load, index\n\n\ndef imitate(path):\n    data = load(path)\n"
                    "    ordered = index(data)\n    print(ordered)\n    return ordered\n",
}
CURSOR_FILE = "pkg/main.py"
CURSOR_TEXT = ("from .store import load, index\n\n\ndef refresh(path):\n    data = load(path)\n"
               "    ordered = index(data)\n    ")


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> RepoService:
    root = tmp_path_factory.mktemp("callees")
    for name, text in {**FILES, CURSOR_FILE: CURSOR_TEXT}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    service = RepoService.open(root, Config())
    assert isinstance(service, RepoService) and not hasattr(service.ensure_index(), "kind")
    return service


def test_the_function_sharing_the_resolved_callees_comes_first_and_a_same_named_decoy_not_at_all(repo):
    index = SymbolView(repo.index_for_measurement())
    sites = shared_callee_sites(index, CURSOR_FILE, 3, 6, limit=5)
    assert [(s.path, s.function_line, s.shared) for s in sites] == [("pkg/jobs.py", 3, 2), ("pkg/jobs.py", 10, 1)]
    archive = sites[0]
    assert (archive.last_shared_line, archive.function_end) == (5, 7)  # `ordered = index(data)`
    assert archive.score > sites[1].score
    # Calls above the cursor only: at the first body line nothing is called yet; module level has no function.
    assert shared_callee_sites(index, CURSOR_FILE, 3, 4, limit=5) == []
    assert shared_callee_sites(index, CURSOR_FILE, -1, 6, limit=5) == []


def test_the_lever_puts_the_usage_after_the_shared_calls_in_the_candidates(repo):
    text = CURSOR_TEXT
    cursor = locate(repo.root, CURSOR_FILE, text, 7, None)
    config = with_overrides(repo.config, completion={"max_prompt_tokens": 400, "fill_in_middle": False},
                            prompt={"shared_callees": 1, "shared_callee_position": 0})
    prepared = CompletionEngine(repo, Words(), config).prepare(CompletionEngine(repo, Words(), config).request(
        cursor, "fragrel"))
    first = prepared.fragments[0]
    assert (first.path, first.start_line) == ("pkg/jobs.py", 3)  # two lines above the last shared call
    assert "save(ordered" in repo.view().span_text(first.path, first.start_line, first.end_line)
    assert any(block.path == "pkg/jobs.py" and "save(ordered" in block.text for block in prepared.prompt.blocks)


def test_a_block_over_a_hidden_window_is_left_out(repo):
    cursor = locate(repo.root, CURSOR_FILE, CURSOR_TEXT, 7, None)
    shown = shared_callee_blocks(repo.view(), cursor, 3, None, None, count=2, lines=12, lines_before=2)
    assert [b.path for b in shown] == ["pkg/jobs.py", "pkg/jobs.py"]
    hidden = repo.view().fragments_of_files({"pkg/jobs.py"})
    assert shared_callee_blocks(repo.view(), cursor, 3, hidden, None, count=2, lines=12, lines_before=2) == []
    assert shared_callee_blocks(repo.view(), cursor, 3, None, np.asarray(hidden), count=2, lines=12,
                                lines_before=2) == []


def test_imported_usage_offers_windows_calling_what_the_file_imports_and_has_not_called(repo):
    """main.py imports load and index and calls both: nothing left to show. A file importing save
    too, before calling it, is shown the window of jobs.py that calls store.save, never decoy.py."""
    index = repo.index_for_measurement()
    assert imported_not_called(SymbolView(index), CURSOR_FILE, 3, 6).size == 0
    text = "from .store import load, save\n\n\ndef backup(path):\n    data = load(path)\n    "
    repo.set_buffer("pkg/backup.py", text)
    index = repo.index_for_measurement()
    n_files = len(index.syntax)
    wanted = imported_not_called(SymbolView(index), "pkg/backup.py", 3, 5)
    store = index.file_id("pkg/store.py")
    assert [(key % n_files, int(index.syntax[store].start_line[key // n_files])) for key in wanted.tolist()] \
        == [(store, 8)]  # `def save`, not load (called above the cursor)
    windows = usage_windows(SymbolView(index), "pkg/backup.py", 3, 5)
    assert {index.files[int(index.fragment_file[w])].path for w in windows} == {"pkg/jobs.py"}
    cursor = locate(repo.root, "pkg/backup.py", text, 6, None)
    found = imported_usage_blocks(repo.view(), cursor, 3, "data = load(path)", None, None, 2)
    assert found and all(f.path == "pkg/jobs.py" for f in found)
    assert "save(ordered" in repo.view().span_text(found[0].path, found[0].start_line, found[0].end_line)
    repo.drop_buffer("pkg/backup.py")
