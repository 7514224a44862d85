"""Definitions a file reaches through its imports and calls, added to the prompt as signatures."""

from __future__ import annotations

from repomem.completion.levers.definition_blocks import definitions_at, reachable_definitions
from repomem.completion.levers.signature_lines import signature_span
from repomem.config import Config
from repomem.service import RepoService


def open_service(root):
    service = RepoService.open(root, Config())
    assert not isinstance(service, RepoService.__class__)
    report = service.ensure_index()
    assert report.files > 0
    return service


def test_imports_and_calls_reach_definitions_in_other_files(package_repo):
    service = open_service(package_repo)
    sites = reachable_definitions(service.view().symbols, "pkg/sub/service.py", "slug = make_slug(name)",
                                  Config().bm25, 10)
    names = {(s.path, s.name) for s in sites}
    # `from ..models import Model as M`, `models.Model.create`, `pkg.helpers.normalize`, and
    # `make_slug`, re-exported by pkg/__init__.py from pkg.helpers.slugify.
    assert {("pkg/models.py", "Model"), ("pkg/models.py", "create"), ("pkg/helpers.py", "normalize"),
            ("pkg/helpers.py", "slugify")} <= names
    assert all(s.path != "pkg/sub/service.py" for s in sites)  # the file's own code is in the prompt already
    assert sites[0].name == "slugify"  # shares "slug" with the query, and is called
    for site in sites:
        fragment_start = service.index.fragment_start[site.fragment]
        fragment_end = service.index.fragment_end[site.fragment]
        assert fragment_start <= site.start_line < fragment_end  # the window that holds the def line


def test_definition_blocks_join_the_retrieved_fragments(package_repo):
    service = open_service(package_repo)
    cursor = service.cursor_at(package_repo / "pkg/sub/service.py", 10, None)
    added = definitions_at(service.view(), cursor, "make_slug(name)", 2, 8)
    assert len(added) == 2
    text = service.view().fragment_text(added[0])
    assert text.startswith("def slugify(text):") and len(text.split("\n")) <= 8
    assert definitions_at(service.view(), cursor, "make_slug(name)", 0, 8) == []


def test_signature_span_takes_the_header_docstring_and_init():
    lines = [
        "class Cart:",                            # 0
        '    """Items and their counts."""',      # 1
        "",                                       # 2
        "    def __init__(self, owner,",          # 3
        "                 currency='EUR'):",      # 4
        "        self.owner = owner",             # 5
        "",                                       # 6
        "def total(items,",                       # 7
        "          tax):",                        # 8
        '    """Sum with tax."""',                # 9
        "    return sum(items) * tax",            # 10
    ]
    assert signature_span(lines, 7, 10, 8) == (7, 10)  # header over two lines and the docstring
    assert signature_span(lines, 0, 5, 8) == (0, 5)  # class line, docstring, __init__ header
    assert signature_span(lines, 7, 10, 2) == (7, 9)  # capped
