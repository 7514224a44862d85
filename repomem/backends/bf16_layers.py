"""The embedded model with its layers' weights widened to bfloat16, where the CPU multiplies bfloat16.

The shipped GGUF keeps the layers' weights in 4- to 8-bit blocks (Q5_0, Q4_K, Q6_K, Q8_0). On a CPU
with AVX512_BF16, and a llama.cpp built for it, a prompt's evaluation (what a first completion
waits for) multiplies bfloat16 matrices faster than it unpacks those blocks: a cold 1,000-token
prompt in 3.40 s instead of 5.12 s on two cores (1.53x, pair by pair). Decoding reads about twice the
bytes per token: 32.6 instead of 24.9 ms a token (`scripts/bench_bf16_layers.py`). Every block
value is widened, not re-estimated, so the weights are the shipped ones up to bfloat16's rounding
(8 significant bits), as when transformers loads the same file on a GPU. The output matrix (Q8_0)
and the token embeddings (Q5_0, only looked up) are copied unchanged. The file is written once,
next to the shipped one (960 MB beside 491 MB), by llama.cpp's own quantizer, and checked by size
and modification time against the stamp written with it (`repomem model verify` hashes it again).

`model.embedded_layers`: "auto" runs whichever file is faster on this machine, "bf16" the widened
one always, "quantized" the shipped one (as the CPU exact-match records before 2026-11-28 were
made). "auto" widens only where it may pay (the CPU reports avx512_bf16 and the installed llama.cpp
was built with it), then times both files once (repomem.backends.layer_timing) and keeps the
widened one only if a first completion's model time is at least 5% shorter with it. The choice is
recorded per model in `embedded-layers.json` beside the files, for this machine (its CPU, core
count and llama.cpp build), and a widened file that lost is deleted (960 MB for the 0.5B, 2.95 GB
for the 1.5B).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from repomem.backends.models import (
    QWEN_CODER_05B,
    QWEN_CODER_15B,
    SMALL_MODEL,
    PackagedModel,
    models_dir,
    sha256_with_progress,
)
from repomem.failures import Failure, FailureKind
from repomem.machine_lock import machine_lock
from repomem.progress import NoProgress, Progress
from repomem.regular_files import replace_private

# ggml's type numbers (ggml.h, enum ggml_type); llama-cpp-python exports only some of them.
GGML_TYPE_Q5_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K = 6, 8, 12, 14
# The 1.5B's output matrix and token embeddings, read from its GGUF header (339 tensors).
GGML_TYPE_OUTPUT_15B, GGML_TYPE_EMBEDDING_15B = GGML_TYPE_Q6_K, GGML_TYPE_Q4_K


@dataclass(frozen=True)
class WidenedModel:
    source: PackagedModel
    file_name: str
    output_type: int  # the source's output matrix type, kept
    token_embedding_type: int  # the source's token embedding type, kept
    # The `model.embedded_layers` choice this copy is: "bf16" (layers widened to bfloat16) or "int8"
    # (Q5_0 blocks rewritten as Q8_0 of the same values, for AMX: repomem.backends.int8_layers).
    layers: str = "bf16"


# The types kept are the pinned files' own (each file is pinned by its sha256, so they cannot change).
WIDENED_MODELS: dict[str, WidenedModel] = {
    QWEN_CODER_05B.name: WidenedModel(source=QWEN_CODER_05B,
                                      file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.bf16-layers.gguf",
                                      output_type=GGML_TYPE_Q8_0, token_embedding_type=GGML_TYPE_Q5_0),
    QWEN_CODER_15B.name: WidenedModel(source=QWEN_CODER_15B,
                                      file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.bf16-layers.gguf",
                                      output_type=GGML_TYPE_OUTPUT_15B, token_embedding_type=GGML_TYPE_EMBEDDING_15B),
}
WIDENED_SMALL = WIDENED_MODELS[SMALL_MODEL.name]
# The 0.5B's copy for Intel's matrix tiles. The 1.5B has none: its blocks are all K-quants, which
# llama.cpp's AMX kernels take as shipped.
INT8_MODELS: dict[str, WidenedModel] = {
    QWEN_CODER_05B.name: WidenedModel(source=QWEN_CODER_05B,
                                      file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.q8_0-layers.gguf",
                                      output_type=GGML_TYPE_Q8_0, token_embedding_type=GGML_TYPE_Q5_0,
                                      layers="int8"),
}
INT8_SMALL = INT8_MODELS[SMALL_MODEL.name]


def widened_for(model: PackagedModel, mode: str = "auto", cpuinfo: str | None = None,
                amx_check: Callable[[], bool] | None = None) -> WidenedModel:
    """The copy of `model` that `model.embedded_layers = mode` may run here: the one for the
    matrix tiles where asked ("int8") or, with "auto", where the CPU and the llama.cpp build have
    AMX and the model has such a copy; else the one widened to bfloat16."""
    int8 = INT8_MODELS.get(model.name)
    if int8 is not None and (mode == "int8" or mode == "auto" and _amx_copy_applies(int8, cpuinfo, amx_check)):
        return int8
    return WIDENED_MODELS[model.name]


def _amx_copy_applies(int8: WidenedModel, cpuinfo: str | None, amx_check: Callable[[], bool] | None) -> bool:
    """Whether "auto" runs `int8` here: where the tiles are, as this machine's timing recorded it (a
    timing of the 8-bit copy was made only where the build had them), else as llama.cpp says. The
    record spares a process that never loads the model (the language server, which starts it in a
    child) importing llama.cpp: 0.25 s and ~30 MB."""
    if not cpu_has_amx(_read_cpuinfo() if cpuinfo is None else cpuinfo):
        return False
    if amx_check is None:
        entry = _recorded_entry(int8)
        if entry is not None:
            return int8.layers in entry
    return (amx_check or build_has_amx)()


def copies_of(model: PackagedModel) -> list[WidenedModel]:
    """Every copy of `model` a first completion may write (`repomem model verify` checks each)."""
    return [copy for copy in (WIDENED_MODELS.get(model.name), INT8_MODELS.get(model.name)) if copy is not None]


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The flags of /proc/cpuinfo's first flags line (none where there is none)."""
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[-1].split())
    return frozenset()


def cpu_has_bf16(cpuinfo: str) -> bool:
    """Whether /proc/cpuinfo's first flags line names a bfloat16 dot product (AVX512_BF16)."""
    return "avx512_bf16" in cpu_flags(cpuinfo)


def cpu_has_amx(cpuinfo: str) -> bool:
    """Whether /proc/cpuinfo's first flags line names AMX's tiles and 8-bit products (and
    AVX512_VNNI, which llama.cpp's AMX code is built with)."""
    return {"amx_tile", "amx_int8", "avx512_vnni"} <= cpu_flags(cpuinfo)


def build_has_amx() -> bool:
    """Whether the installed llama.cpp was built with AMX's 8-bit kernels (scripts/llama_cpu_flags.sh
    asks for them where the CPU has them). Imports llama_cpp: ~0.3 s."""
    return _build_has(b"AMX_INT8 = 1")


def maps_the_file() -> bool:
    """Whether llama.cpp maps the model file (its default) rather than reading it: not with a build
    that has AMX's kernels, which repack the matrices they take into buffers of their own, where
    the mapped pages they were read from stayed resident too (the 0.5B's 8-bit copy, a 950-token
    prompt: 1,163 MiB at its peak mapped, 761 MiB read; the same speed)."""
    return not build_has_amx()


def _build_has(feature: bytes) -> bool:
    """Whether llama.cpp's system line names `feature` (False where llama-cpp-python is missing)."""
    try:
        import llama_cpp
    except ImportError:
        return False
    return feature in llama_cpp.llama_print_system_info()


def amx_ready(cpuinfo: str | None = None, build_check: Callable[[], bool] | None = None) -> bool:
    """Whether this CPU and the llama.cpp build multiply in AMX's tiles (the CPU is asked first: a
    CPU without them imports nothing)."""
    return cpu_has_amx(_read_cpuinfo() if cpuinfo is None else cpuinfo) and (build_check or build_has_amx)()


def is_widened_file(path: Path) -> bool:
    """Whether `path` is one of the embedded models' copies (layers widened to bfloat16, or 8-bit blocks)."""
    return path.name in {widened.file_name for widened in (*WIDENED_MODELS.values(), *INT8_MODELS.values())}


def build_multiplies_bf16() -> bool:
    """Whether the installed llama.cpp was built with AVX512_BF16 (a build without it would emulate
    bfloat16 and evaluate slower than the shipped file). Imports llama_cpp: ~0.3 s."""
    return _build_has(b"AVX512_BF16 = 1")


def _read_cpuinfo() -> str:
    try:
        return Path(os.environ.get("REPOMEM_CPUINFO", "/proc/cpuinfo")).read_text(errors="replace")
    except OSError:
        return ""


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".widened")


def _stamp_of(path: Path, sha256: str, widened: WidenedModel) -> dict:
    stat = path.stat()
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256,
            "source_sha256": widened.source.sha256}


def _stamp_matches(path: Path, widened: WidenedModel) -> dict | None:
    try:
        stamp = json.loads(_stamp_path(path).read_text())
        stat = path.stat()
    except (OSError, ValueError, RecursionError):  # RecursionError: a stamp nested past json's depth
        return None
    same = (isinstance(stamp, dict) and stamp.get("size") == stat.st_size and stamp.get("mtime_ns") == stat.st_mtime_ns
            and stamp.get("source_sha256") == widened.source.sha256 and isinstance(stamp.get("sha256"), str))
    return stamp if same else None


def widen(source: Path, target: Path, widened: WidenedModel = WIDENED_SMALL,
          progress: Progress | None = None) -> Path | Failure:
    """Write `target`, `source`'s copy `widened` (its layers in bfloat16, or its Q5_0 blocks as
    Q8_0), atomically, and stamp it."""
    llama_cpp = None  # the 8-bit copy is rewritten here; llama.cpp's quantizer widens to bfloat16
    if widened.layers == "bf16":
        try:
            import llama_cpp
        except ImportError:
            return Failure(FailureKind.MODEL_LOAD, "llama-cpp-python is not installed")
    try:
        return _widen_into(llama_cpp, source, target, widened, progress or NoProgress())
    except OSError as error:  # a cache folder that is read-only or full
        return Failure(FailureKind.MODEL_LOAD, f"could not write {target.name} beside {source.name} "
                                               f"({error.strerror or error})")
    except ValueError as error:  # not a GGUF file (the shipped file is hash-checked: never in practice)
        return Failure(FailureKind.MODEL_LOAD, f"could not rewrite {source.name}: {error}")


def _widen_into(llama_cpp, source: Path, target: Path, widened: WidenedModel, progress: Progress) -> Path | Failure:
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".widen-") as scratch:
        partial = Path(scratch) / target.name
        if widened.layers == "int8":
            from repomem.backends.int8_layers import write_int8_layers  # numpy and gguf: not for `model path`

            progress.start("rewriting the model's 5-bit blocks as 8-bit ones for the CPU's matrix tiles (once)", 1)
            write_int8_layers(source, partial)
            progress.advance()
            return _hashed_into_place(partial, target, widened, progress)
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_BF16
        params.allow_requantize = True  # widening a quantized file is what is wanted here
        params.output_tensor_type = widened.output_type
        params.token_embedding_type = widened.token_embedding_type
        params.nthread = max(1, min(4, os.cpu_count() or 1))
        progress.start("widening the model's layers to bfloat16 (once)", 1)
        # llama.cpp logs a line per tensor through llama-cpp-python's logger: errors only.
        llama_logger = logging.getLogger("llama-cpp-python")
        level = llama_logger.level
        llama_logger.setLevel(logging.ERROR)
        try:
            status = llama_cpp.llama_model_quantize(str(source).encode(), str(partial).encode(),
                                                    ctypes.byref(params))
        finally:
            llama_logger.setLevel(level)
        progress.advance()
        if status != 0 or not partial.is_file():
            return Failure(FailureKind.MODEL_LOAD,
                           f"llama.cpp could not widen {source.name} to bfloat16 (status {status})")
        return _hashed_into_place(partial, target, widened, progress)


def _hashed_into_place(partial: Path, target: Path, widened: WidenedModel, progress: Progress) -> Path:
    """The copy written at `partial` hashed, on the disk, moved to `target` and stamped."""
    sha256 = sha256_with_progress(partial, progress, "hashing the widened model")
    # On the disk before it is timed against the shipped file: its pages written back during
    # the timing (gigabytes) stalled the widened file's tokens tenfold.
    descriptor = os.open(partial, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(partial, target)
    _stamp_path(target).write_text(json.dumps(_stamp_of(target, sha256, widened)))
    return target


def verify_widened(path: Path, widened: WidenedModel = WIDENED_SMALL,
                   progress: Progress | None = None) -> Path | Failure:
    """Hash the widened file again against its stamp (`repomem model verify`)."""
    stamp = _stamp_matches(path, widened)
    if stamp is None:
        return Failure(FailureKind.MODEL_HASH,
                       f"{path} does not match the stamp written with it; delete it, and the next "
                       "completion writes it again")
    if sha256_with_progress(path, progress or NoProgress(), "verifying") != stamp["sha256"]:
        _stamp_path(path).unlink(missing_ok=True)
        return Failure(FailureKind.MODEL_HASH, f"{path} fails its sha256 check; the next completion writes it again")
    return path


def widened_path(widened: WidenedModel = WIDENED_SMALL) -> Path:
    """Where the widened copy of `widened.source` is written (beside the shipped file)."""
    return models_dir() / widened.file_name


def wanted(mode: str, cpuinfo: str | None = None, build_check: Callable[[], bool] = build_multiplies_bf16,
           widened: WidenedModel = WIDENED_SMALL, amx_check: Callable[[], bool] | None = None) -> bool:
    """Whether `model.embedded_layers = mode` may run the copy `widened` here ("auto": the copy for
    the matrix tiles, which `widened_for` gives only where they are, or the bfloat16 one where the
    CPU and the build multiply bfloat16 but have no tiles, which take the shipped K-quant blocks
    faster than bfloat16 ones: the 1.5B read prompts in 6.2 ms a token as shipped there, 14.5
    widened; which file runs is then timed, `embedded_model_file`)."""
    if mode in ("bf16", "int8"):
        return widened.layers == mode
    if mode != "auto":
        return False
    if widened.layers == "int8":
        return True
    cpuinfo = _read_cpuinfo() if cpuinfo is None else cpuinfo
    return cpu_has_bf16(cpuinfo) and build_check() and not amx_ready(cpuinfo, amx_check)


CHOICE_FILE = "embedded-layers.json"  # beside the model files: {model name: the choice "auto" timed}
CHOICE_LOCK = "embedded-layers.lock"
CHOICE_WAIT_S = 600.0  # another process widening and timing (the 1.5B: ~10 s and ~20 s here)
WIDENED_MUST_SAVE = 0.05  # the widened file runs only if a first completion takes 5% less time with it
LAYER_CHOICES = ("bf16", "int8", "quantized")


def machine_key(cpuinfo: str | None = None) -> str:
    """What a timing holds for: the CPU (model name and flags), its core count, and the installed
    llama.cpp build (its libraries' names, sizes and times: a rebuild with other flags is another
    build). Reads no model and imports nothing."""
    lines = (_read_cpuinfo() if cpuinfo is None else cpuinfo).splitlines()
    cpu = [next((line for line in lines if line.startswith(prefix)), "") for prefix in ("model name", "flags")]
    build: list[str] = []
    try:
        version = importlib.metadata.version("llama-cpp-python")
        spec = importlib.util.find_spec("llama_cpp")
    except (importlib.metadata.PackageNotFoundError, ImportError, ValueError):
        version, spec = "", None
    if spec is not None and spec.origin:
        for library in sorted((Path(spec.origin).parent / "lib").glob("*.so*")):
            try:
                stat = library.stat()
            except OSError:
                continue
            build.append(f"{library.name}:{stat.st_size}:{stat.st_mtime_ns}")
    text = "\n".join([*cpu, str(os.cpu_count()), version, *build])
    return hashlib.sha256(text.encode("utf-8", errors="replace")).hexdigest()[:16]


def recorded_choice(widened: WidenedModel, folder: Path | None = None) -> str | None:
    """The layers "auto" timed faster for `widened`'s model on this machine, or None (never timed
    here, or timed on another machine or build)."""
    entry = _recorded_entry(widened, folder)
    if entry is None:
        return None
    return entry.get("layers") if entry.get("layers") in LAYER_CHOICES else None


def _recorded_entry(widened: WidenedModel, folder: Path | None = None) -> dict | None:
    """This machine's record of the timing of `widened`'s model (its choice and each file's
    figures), or None."""
    try:
        choices = json.loads(((folder or models_dir()) / CHOICE_FILE).read_text())
    except (OSError, ValueError, RecursionError):  # a hand-edited file nested past json's depth too
        return None
    entry = choices.get(widened.source.name) if isinstance(choices, dict) else None
    if not isinstance(entry, dict) or entry.get("machine") != machine_key():
        return None
    return entry


def _record_choice(folder: Path, widened: WidenedModel, layers: str, timings: dict[str, dict]) -> None:
    """Record the layers timed faster for `widened`'s model on this machine; a folder that cannot be
    written (read-only, full) records nothing, and the next run times again."""
    try:
        _write_choice(folder, widened, layers, timings)
    except OSError:
        pass


def _write_choice(folder: Path, widened: WidenedModel, layers: str, timings: dict[str, dict]) -> None:
    path = folder / CHOICE_FILE
    try:
        choices = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        choices = {}
    if not isinstance(choices, dict):
        choices = {}
    choices[widened.source.name] = {"machine": machine_key(), "layers": layers, **timings}
    folder.mkdir(parents=True, exist_ok=True)
    replace_private(path, (json.dumps(choices, indent=2) + "\n").encode())


def runs_shipped_as_timed(path: Path) -> bool:
    """Whether `path` is a shipped embedded model file that "auto" timed faster here than its
    widened copy (timed with fused attention, so it runs with it: backends.factory.fused_attention)."""
    return any(widened.source.file_name == path.name and recorded_choice(widened, path.parent) == "quantized"
               for widened in WIDENED_MODELS.values())


def _timed_choice(shipped: Path, target: Path, widened: WidenedModel, progress: Progress) -> str | Failure:
    """Time both files (layer_timing) and record which one runs here."""
    from repomem.backends.layer_timing import time_files

    progress.start(f"timing the model's shipped and {widened.layers} layers on this CPU (once)", 1)
    timings = time_files([shipped, target])
    progress.advance()
    if isinstance(timings, Failure):
        return timings
    as_shipped, as_widened = timings
    faster = as_widened.first_answer_s() <= (1.0 - WIDENED_MUST_SAVE) * as_shipped.first_answer_s()
    layers = widened.layers if faster else "quantized"
    _record_choice(shipped.parent, widened, layers,
                   {"quantized": as_shipped.as_record(), widened.layers: as_widened.as_record()})
    return layers


def embedded_model_file_as_is(shipped: Path, mode: str, widened: WidenedModel = WIDENED_SMALL) -> Path | None:
    """What embedded_model_file returns when it would write and time nothing; None when it would."""
    if mode == "quantized" or mode in LAYER_CHOICES and mode != widened.layers:
        return shipped  # a model without such a copy (the 1.5B's blocks are the tiles' as shipped)
    target = shipped.with_name(widened.file_name)
    stamped = _stamp_matches(target, widened) is not None
    if mode == widened.layers:
        return target if stamped else None
    choice = recorded_choice(widened, shipped.parent)
    if choice == "quantized":
        return shipped
    if choice == widened.layers:
        return target if stamped else None
    return None if wanted(mode, widened=widened) else shipped


def embedded_model_file(shipped: Path, mode: str, progress: Progress | None = None,
                        say: Callable[[str], None] | None = None,
                        widened: WidenedModel = WIDENED_SMALL) -> Path:
    """The file the embedded model runs: the widened one when `mode` wants it (written on first
    use; "auto" also times both files then, once), else `shipped`. A widening or timing that fails
    leaves the shipped file in use, said in one line."""
    if mode == "quantized" or mode in LAYER_CHOICES and mode != widened.layers:
        return shipped  # a model without such a copy (the 1.5B's blocks are the tiles' as shipped)
    target = shipped.with_name(widened.file_name)
    if mode == widened.layers:
        return target if _stamp_matches(target, widened) is not None else _widened_or_shipped(shipped, target, widened,
                                                                                             progress, say)
    choice = recorded_choice(widened, shipped.parent)
    if choice == "quantized":
        return shipped
    if choice == widened.layers and _stamp_matches(target, widened) is not None:
        return target
    if choice not in ("quantized", widened.layers) and not wanted(mode, widened=widened):
        return shipped
    progress = progress or NoProgress()
    with machine_lock(shipped.parent / CHOICE_LOCK, lambda: progress.start("waiting for another repomem to time "
                                                                           "the model's layers", 1), CHOICE_WAIT_S):
        choice = recorded_choice(widened, shipped.parent)  # another process may have timed them meanwhile
        if choice == "quantized":
            return shipped
        if _stamp_matches(target, widened) is None and _widened_or_shipped(shipped, target, widened, progress,
                                                                           say) == shipped:
            return shipped  # the widening failed, said in one line
        if choice == widened.layers:
            return target
        timed = _timed_choice(shipped, target, widened, progress)
        if isinstance(timed, Failure):
            if say is not None:
                say(f"{timed.message}; running the shipped model file")
            return shipped
        if timed == widened.layers:
            return target
        # The shipped layers are as fast here: the widened copy would only take disk space.
        with contextlib.suppress(OSError):
            target.unlink(missing_ok=True)
            _stamp_path(target).unlink(missing_ok=True)
        return shipped


def _widened_or_shipped(shipped: Path, target: Path, widened: WidenedModel, progress: Progress | None,
                        say: Callable[[str], None] | None) -> Path:
    result = widen(shipped, target, widened, progress)
    if isinstance(result, Failure):
        if say is not None:
            say(f"{result.message}; running the shipped model file")
        return shipped
    return result
