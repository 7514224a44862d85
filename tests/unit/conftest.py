"""Fixtures the unit tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from repomem.service import RepoService
from tests.repos import copy_example


@pytest.fixture
def shop(tmp_path: Path) -> RepoService:
    """A service over a copy of the bundled example, its index built."""
    service = RepoService.open(copy_example(tmp_path / "shop"))
    assert isinstance(service, RepoService)
    service.ensure_index()
    return service
