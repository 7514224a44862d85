"""The questions the service answers instead of handing its index out (issue 35): each answer
checked against the index it reads, which only a test may look at directly."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from repomem.failures import Failure
from repomem.memory.entities import Entity
from repomem.repo_view import IndexedFile
from repomem.service import RepoService
from tests.repos import copy_example


def test_a_service_without_an_index_answers_plainly(tmp_path: Path):
    service = RepoService.open(copy_example(tmp_path / "shop"))
    assert isinstance(service, RepoService)
    assert not service.index_loaded and service.view().indexed_files() == []
    assert not service.needs_compaction() and service.view().live_window_holding(0, 0) is None


def test_indexed_files_list_the_index_in_its_order(shop: RepoService):
    index = shop.index
    expected = [IndexedFile(r.path, r.language, r.n_fragments) for r in index.files if r is not None]
    assert shop.index_loaded and shop.view().indexed_files() == expected and len(expected) > 3


def test_fragments_ending_after_a_line_are_the_visible_ones_to_the_end_of_the_file(shop: RepoService):
    for path in ("shop/cart.py", "shop/pricing.py"):
        for line in (0, 5, 12, 10_000):
            ending = shop.view().fragments_ending_after(path, line)
            assert ending.dtype == np.int64
            assert np.array_equal(ending, shop.view().visible_fragments(path, line, 1 << 40)), (path, line)
    assert shop.view().fragments_ending_after("no/such.py", 0).size == 0


def test_a_live_window_holds_each_entitys_line(shop: RepoService):
    memory = shop.memories.entity_memory()
    entities = [memory.entity(file_id, node) for sites in memory.by_name.values() for file_id, node in sites]
    assert entities
    for entity in entities:
        assert isinstance(entity, Entity)
        expected = shop.view().symbols.window_holding(entity.file_id, entity.start_line)
        assert expected is not None
        assert shop.view().live_window_holding(entity.file_id, entity.start_line) == expected


def test_an_index_built_elsewhere_is_handed_over_whole(shop: RepoService, tmp_path: Path):
    builder = RepoService.open(shop.root)
    assert isinstance(builder, RepoService)
    builder.ensure_index()
    builder.prepare_for_edits()
    index = builder.hand_over_index()
    assert not builder.index_loaded
    shop.install_index(index)
    assert shop.index is index and shop.memories.entity_memory().by_name  # the memories follow the new index


def test_the_cursors_file_under_a_links_name_is_not_offered_back(tmp_path: Path):
    """A symbolic link to a file of the repository is indexed under its own name beside its
    target: the windows over the query lines came back through the link's name (the visible code,
    often BM25's best match), while the cursor's own ones were left out. A copy is another file."""
    from tests.repos import write_repo

    tax = "def compute_tax(amount_cents, tax_class):\n    rate = RATES[tax_class]\n    return amount_cents * rate\n"
    repo = write_repo(tmp_path / "r", {"tax.py": tax, "copy.py": tax,
                                       "cart.py": "from tax import compute_tax\n\ntotal = compute_tax(1, 2)\n"})
    (repo / "alias.py").symlink_to("tax.py")
    service = RepoService.open(repo)
    assert isinstance(service, RepoService)
    service.ensure_index()
    for name in ("tax.py", "alias.py"):
        cursor = service.cursor_at(repo / name, 3, None)
        assert not isinstance(cursor, Failure)
        for alpha in (0.0, 0.5):
            paths = [f.path for f in service.view().retrieve_at(cursor, alpha=alpha).fragments]
            assert "tax.py" not in paths and "alias.py" not in paths, (name, alpha, paths)
            assert "copy.py" in paths and "cart.py" in paths
        everything = [f.path for f in service.view().retrieve_at(cursor, exclude_visible=False).fragments]
        assert {"tax.py", "alias.py"} <= set(everything)


def test_a_query_of_no_names_retrieves_nothing_rather_than_the_first_files(tmp_path: Path):
    """An empty new file, or a cursor after lines of punctuation only: no fragment shares a term
    with the query, and none was offered in place of a match (the first files' windows in id
    order filled every place, and a prompt with them)."""
    from tests.repos import write_repo

    repo = write_repo(tmp_path / "r", {"a.py": "def alpha():\n    return 1\n", "b.py": "def beta():\n    return 2\n",
                                       "new.py": "", "marks.py": "(\n)\n[\n]\n"})
    service = RepoService.open(repo)
    assert isinstance(service, RepoService)
    service.ensure_index()
    for name, line in (("new.py", 1), ("marks.py", 4)):
        cursor = service.cursor_at(repo / name, line, None)
        assert not isinstance(cursor, Failure)
        for alpha in (0.0, 0.5):
            assert service.view().retrieve_at(cursor, alpha=alpha, k=5).fragments == (), (name, alpha)
    cursor = service.cursor_at(repo / "new.py", 1, None)
    assert [f.path for f in service.view().retrieve_at(cursor, query="return alpha", k=5).fragments][0] == "a.py"


def test_names_in_other_scripts_are_retrieved_by_their_own_words(tmp_path: Path):
    """`größe` (size) and `grüße` (greetings) were both the terms `gr` and `e` when words were
    ASCII only, so a query for one ranked both alike; whole words in any script tell them apart,
    and a Japanese name is found by itself."""
    from tests.repos import write_repo

    repo = write_repo(tmp_path / "r", {
        "size.py": "def größe(breite, höhe):\n    return breite * höhe\n",
        "greeting.py": "def grüße(name):\n    return 'Hallo ' + name\n",
        "users.py": "def ユーザー名(user):\n    return user.name\n",
        "use.py": "",
    })
    service = RepoService.open(repo)
    assert isinstance(service, RepoService)
    service.ensure_index()
    cursor = service.cursor_at(repo / "use.py", 1, None)
    assert not isinstance(cursor, Failure)
    view = service.view()
    for query, path in (("fläche = größe(", "size.py"), ("text = grüße(", "greeting.py"),
                        ("n = ユーザー名(", "users.py")):
        found = [f.path for f in view.retrieve_at(cursor, query=query, k=3, alpha=0.0).fragments]
        assert found == [path], (query, found)
