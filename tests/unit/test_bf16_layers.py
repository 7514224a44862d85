"""Which file the embedded model runs (model.embedded_layers), without llama.cpp."""

from __future__ import annotations

import json
from pathlib import Path

from repomem.backends import bf16_layers
from repomem.backends.bf16_layers import WIDENED_MODELS, WIDENED_SMALL, cpu_has_bf16, embedded_model_file, wanted
from repomem.backends.factory import fused_attention
from repomem.config import EMBEDDED_LAYER_CHOICES, Config, with_overrides

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


def test_a_stamped_widened_file_is_used_and_a_changed_one_is_not(tmp_path, monkeypatch):
    shipped = tmp_path / "model.gguf"
    shipped.write_bytes(b"GGUF shipped")
    widened = tmp_path / WIDENED_SMALL.file_name
    widened.write_bytes(b"GGUF widened")
    monkeypatch.setattr(bf16_layers, "wanted", lambda mode: False)  # never write one here
    assert embedded_model_file(shipped, "auto") == shipped  # no stamp: not trusted
    (tmp_path / (widened.name + ".widened")).write_text(
        json.dumps(bf16_layers._stamp_of(widened, "0" * 64, WIDENED_SMALL)))
    assert embedded_model_file(shipped, "auto") == widened
    assert embedded_model_file(shipped, "quantized") == shipped
    widened.write_bytes(b"GGUF widened, then changed")
    assert embedded_model_file(shipped, "auto") == shipped


def test_a_failed_widening_runs_the_shipped_file_and_says_so_once(tmp_path, monkeypatch):
    shipped = tmp_path / "model.gguf"
    shipped.write_bytes(b"not a model")
    said = []
    monkeypatch.setattr(bf16_layers, "wanted", lambda mode: True)
    assert embedded_model_file(shipped, "bf16", say=said.append) == shipped
    assert len(said) == 1 and "shipped model file" in said[0]
    assert not (tmp_path / WIDENED_SMALL.file_name).exists()
    assert [p.name for p in tmp_path.iterdir()] == ["model.gguf"]  # no scratch left behind


def test_fused_attention_only_for_a_widened_embedded_model():
    """Measured with the layers in bfloat16 (an AVX512_BF16 build); on the shipped file (an AVX2
    build, or layers kept quantized) llama.cpp's default attention stays."""
    asked = with_overrides(Config(), model={"flash_attention": True}).model
    for widened in WIDENED_MODELS.values():
        assert fused_attention(asked, Path("/models") / widened.file_name)
        assert not fused_attention(asked, Path("/models") / widened.source.file_name)
        assert not fused_attention(Config().model, Path("/models") / widened.file_name)  # the CLI's default
