"""Issue 34: what a cloned repository holds must not crash repomem nor take its resources: names
that are not UTF-8, NUL bytes anywhere, huge lines at the cursor, unbounded numbers and resource
settings in its own repomem.toml."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from repomem.config import Config, ScanConfig, config_from_mapping, default_config, load_config
from repomem.failures import Failure
from repomem.index.scan import Skipped, list_candidates, source_from_bytes
from repomem.positions import locate, read_text_file
from repomem.service import RepoService
from repomem.setting_rules import SETTING_CEILING, settings_by_name
from tests.repos import write_repo


def test_every_number_setting_has_a_ceiling():
    """`window_lines = 10**23` was an internal error (numpy overflow): every integer and number
    setting falls back to its default with one warning past its bound (the default model's, where
    it has its own: default_config)."""
    base = default_config()
    for section in dataclasses.fields(base):
        for setting in dataclasses.fields(getattr(base, section.name)):
            default = getattr(getattr(base, section.name), setting.name)
            if isinstance(default, bool) or not isinstance(default, (int, float)):
                continue
            huge = SETTING_CEILING + 1 if isinstance(default, int) else float(SETTING_CEILING) * 2
            config, problems = config_from_mapping({section.name: {setting.name: huge}})
            assert len(problems) == 1 and problems[0].kind == "refused value", (section.name, setting.name, problems)
            assert "must be at most" in problems[0].message
            assert getattr(getattr(config, section.name), setting.name) == default


@pytest.fixture
def user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "user.toml"
    path.write_text("")  # there, empty: REPOMEM_CONFIG naming no file is warned about
    monkeypatch.setenv("REPOMEM_CONFIG", str(path))
    return path


def test_a_repository_may_not_ask_for_more_than_its_caps(tmp_path: Path, user_config: Path):
    repo = write_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (repo / "repomem.toml").write_text("[index]\nworkers = 1000\n[model]\ncontext_tokens = 1000000\n"
                                       "[completion]\nmax_new_tokens = 64\n[graph]\nmax_reach = 0\n")
    config, warnings = load_config(repo)
    cpus = len(os.sched_getaffinity(0))
    assert config.index.workers == cpus and config.model.context_tokens == 32_768
    max_reach = settings_by_name(Config)[("graph", "max_reach")]
    assert config.graph.max_reach == max_reach.rules.repository_cap  # 0 = no limit: above the cap
    assert config.completion.max_new_tokens == 64  # under its cap: as asked
    assert len(warnings) == 3 and all("more than a repository's own settings may ask" in w for w in warnings)

    # The user's own config may ask for more, and raises the repository's cap to what it asks.
    user_config.write_text(f"[index]\nworkers = {cpus + 20}\n[model]\ncontext_tokens = 1000000\n")
    config, warnings = load_config(repo)
    assert config.index.workers == cpus + 20 and config.model.context_tokens == 1_000_000
    assert [w for w in warnings if "index.workers" in w]  # 1,000 is still more than the user's
    # A repository the user trusts sets what it likes.
    user_config.write_text(f"[trust]\nrepositories = [{str(repo)!r}]\n")
    config, warnings = load_config(repo)
    assert config.index.workers == 1_000 and config.graph.max_reach == 0 and not warnings


def test_a_nul_byte_anywhere_makes_a_file_binary(tmp_path: Path):
    """Binary detection read the first 8 KB only: a NUL after it reached prompts."""
    late = b"x = 1\n" * 2000 + b"y = '\x00'\n"
    assert source_from_bytes("late.py", "python", late, 0, ScanConfig()) == Skipped("late.py", "binary file")
    (tmp_path / "late.py").write_bytes(late)
    failure = read_text_file(tmp_path / "late.py")
    assert isinstance(failure, Failure) and failure.kind == "binary-file"


def test_names_that_are_not_utf8_are_skipped_with_a_printable_reason(tmp_path: Path):
    repo = write_repo(tmp_path / "repo", {"kept.py": "x = 1\n"})
    (repo / os.fsdecode(b"caf\xe9.py")).write_text("y = 2\n")
    (repo / os.fsdecode(b"d\xff")).mkdir()
    (repo / os.fsdecode(b"d\xff/inner.py")).write_text("z = 3\n")
    candidates, skipped = list_candidates(repo, ScanConfig())
    assert [c.path for c in candidates] == ["kept.py"]
    assert {(s.path, s.reason) for s in skipped} == {("caf\\xe9.py", "file name is not valid UTF-8"),
                                                     ("d\\xff/inner.py", "file name is not valid UTF-8")}
    cursor = locate(repo, os.fsdecode(b"caf\xe9.py"), "y = 2\n", 1, None)
    assert isinstance(cursor, Failure) and cursor.kind == "not-utf8-name" and "caf\\xe9.py" in cursor.message
    service = RepoService.open(repo)  # an editor saving the file: refused in words any log can carry
    assert not isinstance(service, Failure) and not isinstance(service.ensure_index(), Failure)
    changed = service.file_changed(os.fsdecode(b"caf\xe9.py"))
    assert isinstance(changed, Failure) and changed.message == "caf\\xe9.py: not indexed (file name is not valid UTF-8)"


@pytest.mark.parametrize("text, kind", [
    ("x = [" + "1, " * 400_000 + "]\n", "file-too-large"),
    ("x = 1\n" + "y = [" + "1, " * 5_000 + "]\n", "line-too-long"),
    ("x = '\x00'\n", "binary-file"),
])
def test_a_cursor_is_refused_in_what_the_scan_skips(tmp_path: Path, text: str, kind: str):
    """The cursor's own file reached the query and the prompt whatever its size: a 10 MB line cost
    1.8 GB and a model call before the prompt budget refused it."""
    cursor = locate(tmp_path, "big.py", text, 1, None)
    assert isinstance(cursor, Failure) and cursor.kind == kind
    roomy = ScanConfig(max_file_bytes=10_000_000, max_line_chars=2_000_000)
    if kind != "binary-file":
        assert not isinstance(locate(tmp_path, "big.py", text, 1, None, roomy), Failure)
