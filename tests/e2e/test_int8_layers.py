"""The 0.5B's copy for AMX (repomem.backends.int8_layers) made from the real shipped file: its Q5_0
matrices as Q8_0 blocks of the very same values, everything else as shipped, and llama.cpp runs it
(through its tile kernels where the CPU and the build have them, its 8-bit vector ones elsewhere)."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from repomem.backends.bf16_layers import INT8_SMALL, verify_widened, widen
from repomem.failures import Failure
from tests.gguf_tensors import read_tensors
from tests.small_model import rectangle_answers

Q5_0, Q8_0 = gguf.GGMLQuantizationType.Q5_0, gguf.GGMLQuantizationType.Q8_0


@pytest.fixture(scope="module")
def int8_copy(model_path, tmp_path_factory):
    path = widen(model_path, tmp_path_factory.mktemp("int8") / INT8_SMALL.file_name, INT8_SMALL)
    assert not isinstance(path, Failure), path
    return path


def test_the_multiplied_q5_0_matrices_are_q8_0_of_the_same_values_and_the_rest_is_copied(model_path, int8_copy):
    shipped, copy = read_tensors(model_path), read_tensors(int8_copy)
    assert list(shipped) == list(copy)
    rewritten = [name for name, tensor in shipped.items() if tensor.tensor_type == Q5_0 and name != "token_embd.weight"]
    assert len(rewritten) > 100  # the 0.5B's layers are mostly Q5_0: what the tiles could not read
    for name, tensor in copy.items():
        if name in rewritten:
            assert tensor.tensor_type == Q8_0, name
            # every block's scale as shipped (the float16 d in front of each block)
            assert np.array_equal(tensor.data.reshape(-1, 34)[:, :2], shipped[name].data.reshape(-1, 22)[:, :2]), name
        else:
            assert tensor.tensor_type == shipped[name].tensor_type, name
            assert np.array_equal(tensor.data, shipped[name].data), name
    for name in ("blk.0.attn_q.weight", "blk.11.ffn_gate.weight", "blk.23.ffn_up.weight"):  # values, in full
        assert np.array_equal(gguf.quants.dequantize(shipped[name].data, Q5_0),
                              gguf.quants.dequantize(copy[name].data, Q8_0)), name
    assert verify_widened(int8_copy, INT8_SMALL) == int8_copy


def test_the_copy_completes_as_the_shipped_file(model_path, int8_copy):
    answers = rectangle_answers(model_path, int8_copy)
    assert answers[0].strip().startswith("width * height")
    assert answers[1] == answers[0]
