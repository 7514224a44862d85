"""The embedded model widened to bfloat16 (repomem.backends.bf16_layers): llama.cpp's own quantizer
on the real shipped file, read back (tests/gguf_tensors.py, checked against gguf's reader), and run."""

from __future__ import annotations

import hashlib
import json
import os

import gguf
import numpy as np
import pytest

from repomem.backends import bf16_layers, layer_timing
from repomem.backends.bf16_layers import WIDENED_SMALL, embedded_model_file, verify_widened, widen
from repomem.failures import Failure
from tests.gguf_tensors import read_tensors
from tests.small_model import rectangle_answers


@pytest.fixture(scope="module")
def widened(model_path, tmp_path_factory):
    target = tmp_path_factory.mktemp("widened") / WIDENED_SMALL.file_name
    path = widen(model_path, target)
    assert not isinstance(path, Failure), path
    return path


def _sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def test_layers_are_bfloat16_of_the_shipped_values_and_the_rest_is_copied(model_path, widened):
    shipped, wide = read_tensors(model_path), read_tensors(widened)  # as gguf.GGUFReader reads them, 50x sooner
    assert shipped.keys() == wide.keys()
    for name, tensor in wide.items():
        if name in ("output.weight", "token_embd.weight") or tensor.tensor_type == gguf.GGMLQuantizationType.F32:
            assert tensor.tensor_type == shipped[name].tensor_type, name  # kept as shipped, byte for byte
            assert np.array_equal(tensor.data, shipped[name].data), name
        else:
            assert tensor.tensor_type == gguf.GGMLQuantizationType.BF16, name
    # one matrix of each shipped block type: the widened values are the shipped ones, rounded to
    # bfloat16 (8 significant bits: relative error at most 2^-9, zero stays zero)
    checked = ("blk.0.attn_q.weight", "blk.0.ffn_down.weight", "blk.2.ffn_down.weight", "blk.0.attn_v.weight")
    assert {shipped[name].tensor_type.name for name in checked} == {"Q5_0", "Q6_K", "Q4_K", "Q8_0"}
    for name in checked:
        exact = gguf.quants.dequantize(shipped[name].data, shipped[name].tensor_type)
        got = gguf.quants.dequantize(wide[name].data, gguf.GGMLQuantizationType.BF16)
        assert got.shape == exact.shape
        assert np.all(np.abs(got - exact) <= np.abs(exact) * 2.0 ** -8), name


def test_widening_is_deterministic_and_a_rotted_byte_is_found(model_path, widened, tmp_path):
    again = widen(model_path, tmp_path / WIDENED_SMALL.file_name)
    assert not isinstance(again, Failure)
    assert _sha256(again) == _sha256(widened)
    assert verify_widened(again) == again
    stat = again.stat()
    with open(again, "r+b") as handle:  # one flipped byte, size and mtime kept
        handle.seek(stat.st_size // 2)
        byte = handle.read(1)
        handle.seek(stat.st_size // 2)
        handle.write(bytes([byte[0] ^ 0xFF]))
    os.utime(again, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert embedded_model_file(again.with_name("shipped.gguf"), "bf16") == again  # the cheap check trusts it
    failure = verify_widened(again)
    assert isinstance(failure, Failure) and "sha256" in failure.message
    assert embedded_model_file(again.with_name("shipped.gguf"), "quantized").name == "shipped.gguf"


def test_the_widened_model_completes_as_the_shipped_one(model_path, widened):
    answers = rectangle_answers(model_path, widened)
    assert answers[0].strip().startswith("width * height")
    assert answers[1] == answers[0]


def test_auto_times_the_real_files_once_and_runs_the_one_it_recorded(model_path, widened, tmp_path, monkeypatch):
    """Both files loaded by llama.cpp and timed in turns: figures a CPU gives, the choice recorded
    for this machine, the losing widened copy gone (here a link to the fixture's), and no second
    timing. Where the CPU lacks bfloat16 "auto" would not widen at all: the test asks it to."""
    shipped = tmp_path / model_path.name
    shipped.symlink_to(model_path)
    target = tmp_path / WIDENED_SMALL.file_name
    os.link(widened, target)
    (tmp_path / (target.name + ".widened")).write_text((widened.parent / (widened.name + ".widened")).read_text())
    monkeypatch.setattr(bf16_layers, "wanted", lambda mode, **_: True)
    chosen = embedded_model_file(shipped, "auto")
    recorded = json.loads((tmp_path / bf16_layers.CHOICE_FILE).read_text())[WIDENED_SMALL.source.name]
    for layers in ("quantized", "bf16"):
        figures = recorded[layers]
        assert 0 < figures["prompt_ms_per_token"] < 1000 and 0 < figures["decode_ms_per_token"] < 10_000, figures
    assert chosen == (target if recorded["layers"] == "bf16" else shipped)
    assert target.exists() == (recorded["layers"] == "bf16") and widened.exists()
    monkeypatch.setattr(layer_timing, "time_files", lambda *args, **kwargs: pytest.fail("timed twice"))
    assert embedded_model_file(shipped, "auto") == chosen
