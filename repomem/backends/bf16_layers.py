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

`model.embedded_layers`: "auto" widens where it pays (the CPU reports avx512_bf16 and the
installed llama.cpp was built with it), "bf16" always, "quantized" never (the shipped file, as the
CPU exact-match records before 2026-11-28 were made).
"""

from __future__ import annotations

import ctypes
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
from repomem.progress import NoProgress, Progress

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


def widened_for(model: PackagedModel) -> WidenedModel:
    return WIDENED_MODELS[model.name]


def cpu_has_bf16(cpuinfo: str) -> bool:
    """Whether /proc/cpuinfo's first flags line names a bfloat16 dot product (AVX512_BF16)."""
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return "avx512_bf16" in line.split(":", 1)[-1].split()
    return False


def is_widened_file(path: Path) -> bool:
    """Whether `path` is one of the embedded models with its layers widened to bfloat16."""
    return path.name in {widened.file_name for widened in WIDENED_MODELS.values()}


def build_multiplies_bf16() -> bool:
    """Whether the installed llama.cpp was built with AVX512_BF16 (a build without it would emulate
    bfloat16 and evaluate slower than the shipped file). Imports llama_cpp: ~0.3 s."""
    try:
        import llama_cpp
    except ImportError:
        return False
    return b"AVX512_BF16 = 1" in llama_cpp.llama_print_system_info()


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
    except (OSError, ValueError):
        return None
    same = (isinstance(stamp, dict) and stamp.get("size") == stat.st_size and stamp.get("mtime_ns") == stat.st_mtime_ns
            and stamp.get("source_sha256") == widened.source.sha256 and isinstance(stamp.get("sha256"), str))
    return stamp if same else None


def widen(source: Path, target: Path, widened: WidenedModel = WIDENED_SMALL,
          progress: Progress | None = None) -> Path | Failure:
    """Write `target`, `source` with its layers in bfloat16, atomically, and stamp it."""
    try:
        import llama_cpp
    except ImportError:
        return Failure(FailureKind.MODEL_LOAD, "llama-cpp-python is not installed")
    progress = progress or NoProgress()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".widen-") as scratch:
        partial = Path(scratch) / target.name
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
        sha256 = sha256_with_progress(partial, progress, "hashing the widened model")
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


def wanted(mode: str, cpuinfo: str | None = None, build_check: Callable[[], bool] = build_multiplies_bf16) -> bool:
    """Whether `model.embedded_layers = mode` runs the widened file here."""
    if mode == "bf16":
        return True
    if mode != "auto":
        return False
    return cpu_has_bf16(_read_cpuinfo() if cpuinfo is None else cpuinfo) and build_check()


def embedded_model_file_as_is(shipped: Path, mode: str, widened: WidenedModel = WIDENED_SMALL) -> Path | None:
    """What embedded_model_file returns when it would write nothing; None when it would widen."""
    if mode == "quantized":
        return shipped
    target = shipped.with_name(widened.file_name)
    if _stamp_matches(target, widened) is not None:
        return target
    return None if wanted(mode) else shipped


def embedded_model_file(shipped: Path, mode: str, progress: Progress | None = None,
                        say: Callable[[str], None] | None = None,
                        widened: WidenedModel = WIDENED_SMALL) -> Path:
    """The file the embedded model runs: the widened one when `mode` wants it (written on first
    use), else `shipped`. A widening that fails leaves the shipped file in use, said in one line."""
    if mode == "quantized":
        return shipped
    target = shipped.with_name(widened.file_name)
    if _stamp_matches(target, widened) is not None:
        # Written earlier, so wanted then; "auto" asks the build again only when there is no file.
        return target
    if not wanted(mode):
        return shipped
    result = widen(shipped, target, widened, progress)
    if isinstance(result, Failure):
        if say is not None:
            say(f"{result.message}; running the shipped model file")
        return shipped
    return result
