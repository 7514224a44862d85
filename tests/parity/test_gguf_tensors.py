"""tests/gguf_tensors.py (the tensor table the bf16 end-to-end test reads) against gguf's own
GGUFReader, on a small file gguf's writer makes: metadata of every kind, tensors of three types."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from tests.gguf_tensors import read_tensors, write_gguf  # noqa: E402 - imports gguf itself


def test_the_tensor_table_and_bytes_are_the_ones_ggufs_reader_gives(tmp_path: Path):
    path = tmp_path / "small.gguf"
    rng = np.random.default_rng(3)
    def metadata(writer) -> None:
        writer.add_string("general.name", "small")
        writer.add_uint32("llama.block_count", 2)
        writer.add_float32("llama.rope.freq_base", 10000.0)
        writer.add_bool("general.flag", True)
        writer.add_array("tokenizer.ggml.tokens", ["a", "bé", "", "\n", "tok" * 20])
        writer.add_array("tokenizer.ggml.scores", [0.5, -1.0, 2.0])
        writer.add_array("general.nested", [[1, 2], [3]])

    weights = {"f32": rng.standard_normal((3, 64), dtype=np.float32),
               "q8": rng.standard_normal((4, 64), dtype=np.float32),
               "bf16": rng.standard_normal((2, 32), dtype=np.float32)}
    kinds = {"f32": gguf.GGMLQuantizationType.F32, "q8": gguf.GGMLQuantizationType.Q8_0,
             "bf16": gguf.GGMLQuantizationType.BF16}
    write_gguf(path, "llama", metadata, {name: (kinds[name], values) for name, values in weights.items()})

    ours = read_tensors(path)
    theirs = {tensor.name: tensor for tensor in gguf.GGUFReader(path).tensors}
    assert ours.keys() == theirs.keys() == weights.keys()
    for name, tensor in theirs.items():
        assert ours[name].tensor_type == tensor.tensor_type, name
        assert ours[name].data.tobytes() == np.asarray(tensor.data).tobytes(), name
        values = gguf.quants.dequantize(ours[name].data, ours[name].tensor_type)
        assert values.shape == weights[name].shape, name
        assert np.allclose(values, weights[name], rtol=2.0 ** -7, atol=0.02), name
