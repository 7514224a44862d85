"""A GGUF file's tensors, each as its bytes, from its tensor table (repomem.backends.gguf_table:
read without the metadata's values, which gguf's own GGUFReader builds a view of, ~10 s a file)."""

from __future__ import annotations

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
