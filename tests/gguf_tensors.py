"""A GGUF file's tensors, each as its bytes, from its tensor table (repomem.backends.gguf_table:
read without the metadata's values, which gguf's own GGUFReader builds a view of, ~10 s a file)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from repomem.backends.gguf_table import mapped, read_table


@dataclass(frozen=True)
class Tensor:
    name: str
    tensor_type: gguf.GGMLQuantizationType
    data: np.ndarray  # uint8, shape (..., bytes per row): gguf.quants.dequantize's input


def read_tensors(path: Path) -> dict[str, Tensor]:
    buffer = mapped(path)
    table = read_table(buffer, str(path))
    tensors = {}
    for info in table.tensors:
        tensor_type = gguf.GGMLQuantizationType(info.tensor_type)
        block_size, type_size = gguf.GGML_QUANT_SIZES[tensor_type]
        shape = [int(d) for d in reversed(info.dims)]  # numpy order: the row (GGUF's first dimension) last
        shape[-1] = shape[-1] // block_size * type_size
        data = np.frombuffer(buffer, dtype=np.uint8, count=info.byte_size(),
                             offset=table.data_start + info.offset).reshape(shape)
        tensors[info.name] = Tensor(info.name, tensor_type, data)
    return tensors


def write_gguf(path: Path, architecture: str, metadata: Callable[[gguf.GGUFWriter], None],
               tensors: dict[str, tuple[gguf.GGMLQuantizationType, np.ndarray]]) -> None:
    """A small GGUF file by gguf's own writer: `metadata(writer)` adds the key-value pairs; each
    tensor's float32 values are stored as its type (F32 as they are, others quantized by gguf)."""
    writer = gguf.GGUFWriter(str(path), architecture)
    metadata(writer)
    for name, (kind, values) in tensors.items():
        if kind == gguf.GGMLQuantizationType.F32:
            writer.add_tensor(name, values)
        else:
            packed = gguf.quants.quantize(values, kind)
            writer.add_tensor(name, packed, raw_shape=packed.shape, raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
