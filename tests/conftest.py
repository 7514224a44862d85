"""Fixtures shared by every tier: small real repositories written to a temporary folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.repos import PACKAGE_FILES, synthetic_files, write_repo


@pytest.fixture
def package_repo(tmp_path: Path) -> Path:
    return write_repo(tmp_path / "repo", PACKAGE_FILES)


@pytest.fixture
def synthetic_repo(tmp_path: Path) -> Path:
    return write_repo(tmp_path / "synthetic", synthetic_files(9))
