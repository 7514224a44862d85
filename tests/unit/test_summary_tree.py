"""The summary tree of strategy "hat" (issue 14): extractive summaries over a real index, kept live
by re-aggregating only the path from a changed file to the root, checked against a full rebuild."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from repomem.completion.retrievers import RETRIEVERS, RoundQuery
from repomem.config import with_overrides
from repomem.memory.summary_tree import SummaryTree
from repomem.service import RepoService
from tests.repos import write_repo

FILES = {
    "app/billing/invoices.py": '"""Invoices and their totals."""\n\n\nclass Invoice:\n'
                               "    def total_with_tax(self, rate):\n        return self.amount * (1 + rate)\n\n\n"
                               "def render_invoice(invoice):\n    return f'{invoice.total_with_tax(0.2)}'\n",
    "app/billing/refunds.py": "def refund_payment(payment_id, amount):\n"
                              "    return {'id': payment_id, 'amount': amount}\n",
    "app/users/accounts.py": '"""User accounts."""\n\n\ndef create_account(email, password_hash):\n'
                             "    return {'email': email}\n\n\ndef delete_account(account):\n    return None\n",
    "app/users/sessions.py": "def open_session(account):\n    def inner():\n        return 1\n    return inner\n",
    "tools/report.py": "import sys\n\n\ndef main():\n    print(sys.argv)\n",
}


@pytest.fixture
def service(tmp_path: Path) -> RepoService:
    service = RepoService.open(write_repo(tmp_path / "repo", FILES))
    assert isinstance(service, RepoService)
    service.ensure_index()
    return service


def _shape(tree: SummaryTree) -> dict[str, tuple[str, tuple[str, ...], str]]:
    return {path: (node.kind, node.children, node.text) for path, node in tree.nodes.items()}


def _fresh(service: RepoService) -> SummaryTree:
    service.memories._summary_tree = None
    return service.memories.summary_tree()


def test_the_tree_holds_every_file_folder_and_the_signatures(service: RepoService):
    tree = service.memories.summary_tree()
    assert set(tree.nodes) == {"", "app", "app/billing", "app/users", "tools", *FILES}
    assert tree.nodes[""].children == ("app", "tools") and tree.nodes[""].kind == "root"
    invoices = tree.nodes["app/billing/invoices.py"].text.split("\n")
    assert invoices == ["app/billing/invoices.py", "Invoices and their totals.", "class Invoice:",
                        "def total_with_tax(self, rate):", "def render_invoice(invoice):"]
    assert "def inner" not in tree.nodes["app/users/sessions.py"].text  # inside a function: not a signature
    assert "invoices.py: Invoices and their totals." in tree.nodes["app/billing"].text
    assert tree.summarised == len(tree.nodes)


def test_an_edit_re_summarises_its_path_to_the_root_and_equals_a_rebuild(service: RepoService):
    tree = service.memories.summary_tree()
    root = service.root
    (root / "app/billing/refunds.py").write_text(FILES["app/billing/refunds.py"] + "\n\ndef void_refund(refund):\n"
                                                 "    return None\n")
    service.ensure_index()
    assert service.memories.summary_tree() is tree and tree.summarised == 4  # the file, app/billing, app, root
    assert "def void_refund(refund):" in tree.nodes["app/billing"].text
    updated = _shape(tree)
    assert updated == _shape(_fresh(service))

    tree = service.memories.summary_tree()
    (root / "app/users/accounts.py").write_text(FILES["app/users/accounts.py"].replace("return None", "return 0"))
    service.ensure_index()
    assert service.memories.summary_tree().summarised == 1  # same signatures: every aggregate above stands


def test_removing_the_last_file_of_a_folder_drops_the_folder(service: RepoService):
    tree = service.memories.summary_tree()
    (service.root / "tools/report.py").unlink()
    service.ensure_index()
    service.memories.summary_tree()
    assert "tools" not in tree.nodes and tree.nodes[""].children == ("app",)
    assert tree.summarised == 1  # only the root re-aggregated
    assert _shape(tree) == _shape(_fresh(service))


def test_the_walk_goes_to_the_files_whose_summaries_match(service: RepoService):
    tree = service.memories.summary_tree()
    walk = tree.walk("invoice.total_with_tax(rate)", service.config.bm25, want_files=1, max_steps=10)
    assert [path for path, _ in walk.files] == ["app/billing/invoices.py"]
    assert walk.steps == 3  # root, app, app/billing
    assert tree.walk("anything", service.config.bm25, want_files=5, max_steps=1).files == ()  # budget: root only


def test_the_hat_retriever_ranks_only_windows_of_reached_files(service: RepoService):
    service.config = with_overrides(service.config, retrieval={"summary_walk_files": 1})
    text = (service.root / "tools/report.py").read_text()
    cursor = service.cursor_at(service.root / "tools/report.py", 5, None)
    assert not hasattr(cursor, "kind"), cursor
    found = RETRIEVERS["summary-tree"](service.view(), RoundQuery(cursor, "refund_payment(payment_id, amount)", 0.0,
                                                           None, None))
    assert found and {f.path for f in found} <= {"app/billing/refunds.py", "tools/report.py"}
    assert found[0].path == "app/billing/refunds.py"
    assert np.isfinite([f.s_ind for f in found]).all() and text
