"""Which file the embedded model runs (model.embedded_layers), without llama.cpp."""

from __future__ import annotations

import json
from pathlib import Path

from repomem.backends import bf16_layers, layer_timing
from repomem.backends.bf16_layers import (
    WIDENED_MODELS,
    WIDENED_SMALL,
    cpu_has_bf16,
    embedded_model_file,
    embedded_model_file_as_is,
    wanted,
)
from repomem.backends.factory import fused_attention
from repomem.backends.layer_timing import LayerTiming
from repomem.config import EMBEDDED_LAYER_CHOICES, Config, with_overrides
from repomem.failures import Failure, FailureKind

WITH_BF16 = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n"
WITHOUT = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_vnni avx512bw\n"


def test_the_cpu_flag_is_read_from_the_flags_line_as_a_whole_word():
    assert cpu_has_bf16(WITH_BF16)
    assert not cpu_has_bf16(WITHOUT)
    assert not cpu_has_bf16("flags\t\t: avx512_bf16x\n")
    assert not cpu_has_bf16("")
    assert not cpu_has_bf16("model name : avx512_bf16\n")  # not a flags line


def test_auto_asks_the_build_only_where_the_cpu_has_the_instruction():
    asked = []

    def build(answer: bool):
        return lambda: asked.append(answer) or answer

    assert not wanted("auto", WITHOUT, build(True)) and asked == []
    assert wanted("auto", WITH_BF16, build(True)) and asked == [True]
    assert not wanted("auto", WITH_BF16, build(False))  # an AVX2 build would emulate bfloat16
    assert wanted("bf16", WITHOUT, build(False))
    assert not wanted("quantized", WITH_BF16, build(True))
    assert Config().model.embedded_layers == "auto" and "quantized" in EMBEDDED_LAYER_CHOICES


def _stamped(path: Path, content: bytes = b"GGUF widened") -> Path:
    path.write_bytes(content)
    stamp = bf16_layers._stamp_of(path, "0" * 64, WIDENED_SMALL)
    (path.parent / (path.name + ".widened")).write_text(json.dumps(stamp))
    return path


def test_a_stamped_widened_file_is_used_and_a_changed_one_is_not(tmp_path, monkeypatch):
    shipped = tmp_path / "model.gguf"
    shipped.write_bytes(b"GGUF shipped")
    widened = tmp_path / WIDENED_SMALL.file_name
    widened.write_bytes(b"GGUF widened")
    monkeypatch.setattr(bf16_layers, "wanted", lambda mode, **_: False)  # never write one here
    assert embedded_model_file(shipped, "bf16") == shipped  # no stamp: not trusted (and no model to widen)
    _stamped(widened)
    assert embedded_model_file(shipped, "bf16") == widened
    assert embedded_model_file(shipped, "auto") == shipped  # never timed here: not wanted, not run
    bf16_layers._record_choice(tmp_path, WIDENED_SMALL, "bf16", {})
    assert embedded_model_file(shipped, "auto") == widened
    assert embedded_model_file(shipped, "quantized") == shipped
    widened.write_bytes(b"GGUF widened, then changed")
    assert embedded_model_file(shipped, "auto") == shipped  # written again from a shipped file that is none


class Timer:
    """layer_timing.time_files as the test wants it: fixed figures, each call counted."""

    def __init__(self, shipped: LayerTiming, widened: LayerTiming):
        self.figures, self.calls = [shipped, widened], 0

    def __call__(self, paths: list[Path], threads: int = 0, flash_attention: bool = True) -> list[LayerTiming]:
        assert [path.name for path in paths] == ["model.gguf", WIDENED_SMALL.file_name] and flash_attention
        self.calls += 1
        return self.figures


def _auto_here(tmp_path: Path, monkeypatch, timer: Timer) -> tuple[Path, Path]:
    """A models folder with a shipped file, where "auto" may widen (a fake widening) and times with `timer`."""
    monkeypatch.setattr(bf16_layers, "models_dir", lambda: tmp_path)
    monkeypatch.setattr(bf16_layers, "wanted", lambda mode, **_: mode in ("auto", "bf16"))
    monkeypatch.setattr(bf16_layers, "widen", lambda source, target, widened, progress=None: _stamped(target))
    monkeypatch.setattr(layer_timing, "time_files", timer)
    shipped = tmp_path / "model.gguf"
    shipped.write_bytes(b"GGUF shipped")
    return shipped, tmp_path / WIDENED_SMALL.file_name


def test_auto_times_both_files_once_and_a_widened_copy_that_is_not_faster_is_deleted(tmp_path, monkeypatch):
    """The Intel Xeon of 2026-12-05: AVX512_BF16, yet the widened 0.5B read prompts no faster
    (4.38 against 4.24 ms a token) and decoded slower (54 against 39 ms)."""
    timer = Timer(LayerTiming(4.24, 38.6), LayerTiming(4.38, 54.1))
    shipped, widened = _auto_here(tmp_path, monkeypatch, timer)
    assert embedded_model_file(shipped, "auto", widened=WIDENED_SMALL) == shipped
    assert timer.calls == 1 and not widened.exists() and not (tmp_path / (widened.name + ".widened")).exists()
    recorded = json.loads((tmp_path / bf16_layers.CHOICE_FILE).read_text())[WIDENED_SMALL.source.name]
    assert recorded["layers"] == "quantized" and recorded["bf16"] == {"prompt_ms_per_token": 4.38,
                                                                      "decode_ms_per_token": 54.1}
    # Later runs neither widen nor time again, and know the answer without writing anything.
    assert embedded_model_file(shipped, "auto") == shipped and timer.calls == 1 and not widened.exists()
    assert embedded_model_file_as_is(shipped, "auto") == shipped
    # "bf16" still runs the widened file when asked for.
    assert embedded_model_file(shipped, "bf16") == widened and timer.calls == 1


def test_auto_keeps_the_widened_file_where_it_is_faster_by_the_margin(tmp_path, monkeypatch):
    """The AMD EPYC of 2026-11-28: prompts 1.53x faster widened, tokens 1.3x slower."""
    timer = Timer(LayerTiming(5.12, 24.9), LayerTiming(3.40, 32.6))
    shipped, widened = _auto_here(tmp_path, monkeypatch, timer)
    assert embedded_model_file(shipped, "auto") == widened and timer.calls == 1
    assert embedded_model_file(shipped, "auto") == widened and timer.calls == 1
    assert embedded_model_file_as_is(shipped, "auto") == widened
    # A first answer 4% sooner is within the margin: the shipped file stays.
    tmp_other = tmp_path / "other"
    tmp_other.mkdir()
    close = Timer(LayerTiming(4.0, 40.0), LayerTiming(4.0 * 0.96, 40.0 * 0.96))
    shipped_other, widened_other = _auto_here(tmp_other, monkeypatch, close)
    assert embedded_model_file(shipped_other, "auto") == shipped_other and close.calls == 1


def test_a_timing_on_another_machine_or_build_is_not_trusted(tmp_path, monkeypatch):
    key = bf16_layers.machine_key
    assert key(WITH_BF16) != key(WITHOUT) and key(WITH_BF16) == key(WITH_BF16)
    timer = Timer(LayerTiming(4.24, 38.6), LayerTiming(4.38, 54.1))
    shipped, _ = _auto_here(tmp_path, monkeypatch, timer)
    assert embedded_model_file(shipped, "auto") == shipped and timer.calls == 1
    monkeypatch.setattr(bf16_layers, "machine_key", lambda cpuinfo=None: "another machine")
    assert embedded_model_file_as_is(shipped, "auto") is None  # it would widen and time first
    assert embedded_model_file(shipped, "auto") == shipped and timer.calls == 2


def test_a_failed_timing_runs_the_shipped_file_and_says_so(tmp_path, monkeypatch):
    shipped, _ = _auto_here(tmp_path, monkeypatch, Timer(LayerTiming(1, 1), LayerTiming(1, 1)))
    monkeypatch.setattr(layer_timing, "time_files", lambda paths, threads=0, flash_attention=True:
                        Failure(FailureKind.MODEL_LOAD, "llama.cpp could not load it"))
    said = []
    assert embedded_model_file(shipped, "auto", say=said.append) == shipped
    assert said == ["llama.cpp could not load it; running the shipped model file"]
    assert not (tmp_path / bf16_layers.CHOICE_FILE).exists()  # nothing recorded: timed again next time


def test_a_failed_widening_runs_the_shipped_file_and_says_so_once(tmp_path, monkeypatch):
    shipped = tmp_path / "model.gguf"
    shipped.write_bytes(b"not a model")
    said = []
    monkeypatch.setattr(bf16_layers, "wanted", lambda mode, **_: True)
    assert embedded_model_file(shipped, "bf16", say=said.append) == shipped
    assert len(said) == 1 and "shipped model file" in said[0]
    assert not (tmp_path / WIDENED_SMALL.file_name).exists()
    assert [p.name for p in tmp_path.iterdir()] == ["model.gguf"]  # no scratch left behind


def test_a_cache_folder_that_cannot_be_written_runs_a_file_and_says_so(tmp_path, monkeypatch):
    """A read-only or full cache: the widening fails in one line, a timing that cannot be recorded
    still chooses (and is timed again next run), and a copy that lost and cannot be deleted stays."""
    timer = Timer(LayerTiming(4.24, 38.6), LayerTiming(4.38, 54.1))
    shipped, widened = _auto_here(tmp_path, monkeypatch, timer)

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(bf16_layers, "_write_choice", refused)
    monkeypatch.setattr(Path, "unlink", refused)
    assert embedded_model_file(shipped, "auto") == shipped and timer.calls == 1
    assert embedded_model_file(shipped, "auto") == shipped and timer.calls == 2  # nothing recorded
    monkeypatch.undo()
    assert widened.exists()  # the copy that lost, kept since it could not be deleted
    widened.unlink()
    monkeypatch.setattr(bf16_layers, "_widen_into", refused)
    said = []
    failed = bf16_layers.widen(shipped, widened)
    assert isinstance(failed, Failure) and "Permission denied" in failed.message
    assert embedded_model_file(shipped, "bf16", say=said.append) == shipped and len(said) == 1


def test_fused_attention_only_for_a_widened_embedded_model_or_a_shipped_one_timed_faster(tmp_path, monkeypatch):
    """Measured with the layers in bfloat16 (an AVX512_BF16 build), and in the timing that chose the
    shipped file on such a build; on a shipped file never timed (an AVX2 build, or layers kept
    quantized) llama.cpp's default attention stays."""
    asked = with_overrides(Config(), model={"flash_attention": True}).model
    for widened in WIDENED_MODELS.values():
        assert fused_attention(asked, tmp_path / widened.file_name)
        assert not fused_attention(asked, tmp_path / widened.source.file_name)
        assert not fused_attention(Config().model, tmp_path / widened.file_name)  # the CLI's default
    bf16_layers._record_choice(tmp_path, WIDENED_SMALL, "quantized", {})
    assert fused_attention(asked, tmp_path / WIDENED_SMALL.source.file_name)
    assert not fused_attention(Config().model, tmp_path / WIDENED_SMALL.source.file_name)
    other = next(widened for widened in WIDENED_MODELS.values() if widened is not WIDENED_SMALL)
    assert not fused_attention(asked, tmp_path / other.source.file_name)  # that model was never timed
    monkeypatch.setattr(bf16_layers, "machine_key", lambda cpuinfo=None: "another machine")
    assert not fused_attention(asked, tmp_path / WIDENED_SMALL.source.file_name)
