"""Secret files stay out of the index and of every prompt: by name (the default patterns cover the
credential files people keep in a repository), by content whatever their name, and through symbolic
links; and a repository's own repomem.toml can only make secret protection stricter."""

from __future__ import annotations

from pathlib import Path

import pytest

from repomem.completion.engine import CompletionEngine
from repomem.config import Config, load_config
from repomem.failures import Failure
from repomem.index.scan import is_secret, list_candidates
from repomem.positions import Cursor
from repomem.service import RepoService
from tests.repos import write_repo

RANDOM = "9fK2pX7qLmN4vB8wR1tY6zH3"  # planted: shaped like a credential, valid for nothing
PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END OPENSSH PRIVATE KEY-----\n"
KUBECONFIG = ("apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n    server: https://k8s.internal\n  name: prod\n"
              f"users:\n- name: ci\n  user:\n    token: {RANDOM}\n")


@pytest.fixture
def no_user_config(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "user-config.toml"
    path.write_text("")  # there, empty: REPOMEM_CONFIG naming no file is warned about
    monkeypatch.setenv("REPOMEM_CONFIG", str(path))
    return path


def refused(repo: Path, path: str, text: str) -> bool:
    """Whether completing in `path` (holding `text`) is refused as a secret file, before any model."""
    engine = CompletionEngine(RepoService.open(repo), backend=None)
    answer = engine.request(Cursor(repo, path, 0, 1, text), "vanilla")
    return isinstance(answer, Failure) and answer.kind == "secret-file"


@pytest.mark.parametrize("name", [".envrc", ".env.production", ".npmrc", ".pypirc", "credentials", "kubeconfig",
                                  "prod.kubeconfig", ".git-credentials", "terraform.tfstate", "prod.tfvars",
                                  ".my.cnf", ".yarnrc.yml", "_netrc"])
def test_credential_files_are_secret_by_name(tmp_path: Path, name: str, no_user_config: Path):
    assert is_secret(f"deploy/{name}", Config().scan)
    repo = write_repo(tmp_path / "repo", {"app.py": "x = 1\n"})
    assert refused(repo, f"deploy/{name}", "x = 1\n")


def test_a_symlink_to_a_secret_file_is_neither_indexed_nor_completed_in(tmp_path: Path, no_user_config: Path):
    repo = write_repo(tmp_path / "repo", {"app.py": "def charge():\n    return 1\n",
                                          ".env": f"API_TOKEN={RANDOM}\n",
                                          ".git/config": f'[remote "origin"]\n  url = https://ci:{RANDOM}@git.internal/x\n'})
    (repo / "settings_env.py").symlink_to(".env")
    (repo / "remote.py").symlink_to(".git/config")
    (repo / "also_app.py").symlink_to("app.py")  # an ordinary link stays
    candidates, skipped = list_candidates(repo, Config().scan)
    assert sorted(candidate.path for candidate in candidates) == ["also_app.py", "app.py"]
    reasons = {entry.path: entry.reason for entry in skipped}
    assert reasons["settings_env.py"] == "symlink to the secret file .env"
    assert reasons["remote.py"] == "symlink into excluded folder .git"
    service = RepoService.open(repo)
    report = service.ensure_index()
    assert not isinstance(report, Failure), report
    assert RANDOM not in " ".join(map(str, service.index.vocabulary))
    updated = service.set_buffer("settings_env.py", f"API_TOKEN={RANDOM}\n")  # the editor's copy of the link
    assert isinstance(updated, Failure) and "symlink to the secret file .env" in updated.message
    assert RANDOM not in " ".join(map(str, service.index.vocabulary))
    assert refused(repo, "settings_env.py", f"API_TOKEN={RANDOM}\n") and refused(repo, "remote.py", "x\n")
    assert not refused(repo, "also_app.py", "def charge():\n    return 1\n")


def test_files_holding_credentials_are_neither_indexed_nor_completed_in_whatever_their_name(
        tmp_path: Path, no_user_config: Path):
    env_script = f"# sourced by the deploy job\nexport DATABASE_URL=postgres://db/app\nexport API_TOKEN={RANDOM}\n"
    repo = write_repo(tmp_path / "repo", {"app.py": "x = 1\n", "deploy/env.sh": env_script, "keys/deploy.js": PEM})
    service = RepoService.open(repo)
    report = service.ensure_index()
    assert not isinstance(report, Failure), report
    skipped = dict(report.skipped)
    assert skipped["deploy/env.sh"] == "secret (never indexed): holds environment variables with secrets (a .env file)"
    assert skipped["keys/deploy.js"] == "secret (never indexed): holds a private key"
    assert refused(repo, "deploy/env.sh", env_script) and refused(repo, "cluster.yaml", KUBECONFIG)
    assert not refused(repo, "app.py", "x = 1\n")


def test_a_repository_can_only_make_secret_protection_stricter(tmp_path: Path, no_user_config: Path):
    repo = write_repo(tmp_path / "repo", {"app.py": "x = 1\n"})
    defaults = Config().scan
    (repo / "repomem.toml").write_text('[scan]\nmask_secrets = false\nsecret_patterns = ["*.vault"]\n'
                                       'secret_min_entropy = 9.0\nsecret_min_length = 40\n')
    config, warnings = load_config(repo)
    assert config.scan.mask_secrets and config.scan.secret_patterns == (*defaults.secret_patterns, "*.vault")
    assert (config.scan.secret_min_entropy, config.scan.secret_min_length) == (3.5, 12)
    assert len(warnings) == 1, warnings
    assert all(f"scan.{key}" in warnings[0] for key in ("mask_secrets", "secret_min_entropy", "secret_min_length"))
    assert "scan.secret_patterns" not in warnings[0]  # adding a pattern is stricter

    (repo / "repomem.toml").write_text("[scan]\nsecret_min_entropy = 3.0\nsecret_min_length = 8\n")
    config, warnings = load_config(repo)
    assert (config.scan.secret_min_entropy, config.scan.secret_min_length) == (3.0, 8) and warnings == []

    (repo / "repomem.toml").write_text('[scan]\nsecret_min_entropy = "high"\n')
    config, warnings = load_config(repo)
    assert config.scan.secret_min_entropy == 3.5 and "scan.secret_min_entropy" in warnings[0]

    # The user's own config may weaken it, and a repository the user trusts may too.
    no_user_config.write_text("[scan]\nmask_secrets = false\nsecret_min_entropy = 4.0\n")
    (repo / "repomem.toml").write_text("[scan]\nmask_secrets = true\nsecret_min_entropy = 3.8\n")
    config, warnings = load_config(repo)
    assert config.scan.mask_secrets and config.scan.secret_min_entropy == 3.8 and warnings == []
    no_user_config.write_text(f'[trust]\nrepositories = ["{repo}"]\n')
    (repo / "repomem.toml").write_text("[scan]\nmask_secrets = false\nsecret_patterns = []\n")
    config, warnings = load_config(repo)
    assert not config.scan.mask_secrets and config.scan.secret_patterns == () and warnings == []
