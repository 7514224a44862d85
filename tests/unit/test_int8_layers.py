"""The 0.5B's copy for AMX (repomem.backends.int8_layers): Q5_0 blocks rewritten as Q8_0 of the very
same values, the rest of the file as it was; and which copy `model.embedded_layers` picks."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from repomem.backends import bf16_layers
from repomem.backends.bf16_layers import (
    INT8_SMALL,
    WIDENED_MODELS,
    WIDENED_SMALL,
    cpu_has_amx,
    embedded_model_file,
    embedded_model_file_as_is,
    widened_for,
)
from repomem.backends.int8_layers import q5_0_as_q8_0, write_int8_layers
from repomem.backends.models import QWEN_CODER_05B, QWEN_CODER_15B
from tests.gguf_tensors import read_tensors, write_gguf

Q5_0, Q8_0, F32 = gguf.GGMLQuantizationType.Q5_0, gguf.GGMLQuantizationType.Q8_0, gguf.GGMLQuantizationType.F32
AMX_FLAGS = "flags\t\t: fpu avx2 avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8\n"
NO_AMX_FLAGS = "flags\t\t: fpu avx2 avx512f avx512_vnni avx512_bf16\n"


def test_every_q5_0_block_becomes_a_q8_0_block_of_the_same_values():
    rng = np.random.default_rng(5)
    blocks = rng.integers(0, 256, size=(4096, 22), dtype=np.uint8)
    blocks[:, :2] = np.frombuffer(rng.standard_normal(4096).astype(np.float16).tobytes(), np.uint8).reshape(-1, 2)
    blocks[0, 2:] = 0  # every q = 0: the -16 end
    blocks[1, 2:] = 0xFF  # every q = 31: the +15 end
    rewritten = q5_0_as_q8_0(blocks)
    assert rewritten.shape == (4096, 34)
    before = gguf.quants.dequantize(blocks.reshape(-1), Q5_0)
    after = gguf.quants.dequantize(rewritten.reshape(-1), Q8_0)
    assert np.array_equal(before.view(np.uint32), after.view(np.uint32))  # bit for bit, signs of zero too
    q = rewritten[:, 2:].view(np.int8)
    assert q.min() == -16 and q.max() == 15 and (q[0] == -16).all() and (q[1] == 15).all()


def _small_model(path: Path) -> None:
    rng = np.random.default_rng(11)

    def metadata(writer: gguf.GGUFWriter) -> None:
        writer.add_string("general.name", "small")
        writer.add_uint32("qwen2.block_count", 1)
        writer.add_array("tokenizer.ggml.tokens", ["a", "bé", "\n"])

    shapes = {"token_embd.weight": (Q5_0, (8, 64)), "blk.0.ffn_up.weight": (Q5_0, (16, 96)),
              "blk.0.attn_v.weight": (Q8_0, (4, 64)), "blk.0.attn_norm.weight": (F32, (64,))}
    write_gguf(path, "qwen2", metadata,
               {name: (kind, rng.standard_normal(shape, dtype=np.float32)) for name, (kind, shape) in shapes.items()})


def test_the_copy_changes_the_multiplied_q5_0_matrices_only(tmp_path: Path):
    source, target = tmp_path / "small.gguf", tmp_path / "small.q8_0-layers.gguf"
    _small_model(source)
    write_int8_layers(source, target)
    shipped, copy = read_tensors(source), read_tensors(target)
    assert list(shipped) == list(copy)
    assert copy["blk.0.ffn_up.weight"].tensor_type == Q8_0
    assert np.array_equal(gguf.quants.dequantize(shipped["blk.0.ffn_up.weight"].data, Q5_0),
                          gguf.quants.dequantize(copy["blk.0.ffn_up.weight"].data, Q8_0))
    for name in ("token_embd.weight", "blk.0.attn_v.weight", "blk.0.attn_norm.weight"):  # looked up, or not Q5_0
        assert copy[name].tensor_type == shipped[name].tensor_type, name
        assert np.array_equal(copy[name].data, shipped[name].data), name
    # gguf's own reader takes the copy, metadata and all, and the metadata bytes are the source's
    reader = gguf.GGUFReader(target)
    assert bytes(reader.fields["general.name"].parts[-1]).decode() == "small"
    assert [str(bytes(reader.fields["tokenizer.ggml.tokens"].parts[i]), "utf-8")
            for i in reader.fields["tokenizer.ggml.tokens"].data] == ["a", "bé", "\n"]
    assert {tensor.name: tensor.tensor_type for tensor in reader.tensors}["blk.0.ffn_up.weight"] == Q8_0


def test_a_file_that_is_no_gguf_is_refused(tmp_path: Path):
    (tmp_path / "not.gguf").write_bytes(b"NOPE" + bytes(64))
    with pytest.raises(ValueError, match="not a GGUF file"):
        write_int8_layers(tmp_path / "not.gguf", tmp_path / "out.gguf")


def test_amx_is_read_from_the_cpus_flags():
    assert cpu_has_amx(AMX_FLAGS)
    assert not cpu_has_amx(NO_AMX_FLAGS)
    assert not cpu_has_amx(AMX_FLAGS.replace(" avx512_vnni", ""))  # llama.cpp's AMX code needs it
    assert not cpu_has_amx("model name : amx_tile amx_int8 avx512_vnni\n")  # not a flags line


def test_auto_picks_the_8_bit_copy_where_the_tiles_are_and_the_build_has_them():
    assert widened_for(QWEN_CODER_05B, "auto", AMX_FLAGS, lambda: True) is INT8_SMALL
    assert widened_for(QWEN_CODER_05B, "auto", AMX_FLAGS, lambda: False) is WIDENED_SMALL  # a build without AMX
    assert widened_for(QWEN_CODER_05B, "auto", NO_AMX_FLAGS, lambda: pytest.fail("asked")) is WIDENED_SMALL
    assert widened_for(QWEN_CODER_05B, "int8", NO_AMX_FLAGS, lambda: False) is INT8_SMALL  # asked for by name
    assert widened_for(QWEN_CODER_05B, "bf16", AMX_FLAGS, lambda: True) is WIDENED_SMALL
    # the 1.5B's blocks are all K-quants, which the tiles take as shipped: it has no 8-bit copy, and
    # "auto" neither widens it to bfloat16 where the tiles are (slower than them) nor times it
    bf16_15b = widened_for(QWEN_CODER_15B, "auto", AMX_FLAGS, lambda: True)
    assert bf16_15b is WIDENED_MODELS[QWEN_CODER_15B.name]
    assert not bf16_layers.wanted("auto", AMX_FLAGS, lambda: True, bf16_15b, amx_check=lambda: True)
    assert bf16_layers.wanted("auto", AMX_FLAGS, lambda: True, bf16_15b, amx_check=lambda: False)
    assert bf16_layers.wanted("auto", NO_AMX_FLAGS, lambda: True, bf16_15b, amx_check=lambda: pytest.fail("asked"))


def test_int8_runs_the_shipped_file_of_a_model_without_that_copy(tmp_path: Path):
    shipped = tmp_path / QWEN_CODER_15B.file_name
    shipped.write_bytes(b"GGUF")
    bf16_copy = widened_for(QWEN_CODER_15B, "int8")
    assert embedded_model_file(shipped, "int8", widened=bf16_copy) == shipped
    assert embedded_model_file_as_is(shipped, "int8", bf16_copy) == shipped
    assert embedded_model_file_as_is(shipped, "bf16", INT8_SMALL) == shipped  # and the other way round
    assert list(tmp_path.iterdir()) == [shipped]  # nothing written


def test_the_8_bit_copy_is_written_once_stamped_and_run(tmp_path: Path):
    source = tmp_path / INT8_SMALL.source.file_name
    _small_model(source)
    path = embedded_model_file(source, "int8", widened=INT8_SMALL)
    assert path == tmp_path / INT8_SMALL.file_name and path.is_file()
    assert bf16_layers.verify_widened(path, INT8_SMALL) == path
    assert embedded_model_file_as_is(source, "int8", INT8_SMALL) == path  # stamped: not written again
    assert bf16_layers.is_widened_file(path)


def test_a_recorded_timing_decides_without_asking_llama_cpp(tmp_path: Path, monkeypatch):
    """Once this machine timed the 8-bit copy, "auto" picks it from the record: the language server,
    which never loads the model itself, does not import llama.cpp to ask (0.25 s, ~30 MB)."""
    monkeypatch.setenv("REPOMEM_CACHE", str(tmp_path))
    monkeypatch.setattr(bf16_layers, "build_has_amx", lambda: pytest.fail("asked llama.cpp"))
    bf16_layers._record_choice(bf16_layers.models_dir(), INT8_SMALL, "int8", {"quantized": {}, "int8": {}})
    assert widened_for(QWEN_CODER_05B, "auto", AMX_FLAGS) is INT8_SMALL
    bf16_layers._record_choice(bf16_layers.models_dir(), INT8_SMALL, "quantized", {"quantized": {}, "int8": {}})
    assert widened_for(QWEN_CODER_05B, "auto", AMX_FLAGS) is INT8_SMALL  # timed, and the shipped file won
    bf16_layers._record_choice(bf16_layers.models_dir(), WIDENED_SMALL, "quantized", {"quantized": {}, "bf16": {}})
    assert widened_for(QWEN_CODER_05B, "auto", AMX_FLAGS) is WIDENED_SMALL  # timed against bfloat16: no tiles
    (bf16_layers.models_dir() / bf16_layers.CHOICE_FILE).unlink()
    monkeypatch.setattr(bf16_layers, "build_has_amx", lambda: True)  # no record: llama.cpp is asked
    assert widened_for(QWEN_CODER_05B, "auto", AMX_FLAGS) is INT8_SMALL
