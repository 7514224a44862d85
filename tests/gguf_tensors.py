"""The tensor table of a GGUF file and each tensor's bytes, read without its metadata's values.

gguf's own GGUFReader builds a numpy view of every metadata value on the way (the tokenizer's
~150,000 strings and merges: ~10 s a file here); the tests that compare tensors need only where
each tensor is. Follows the GGUF layout (version 2 and 3, little-endian): header, key-value pairs
(skipped by their encoded sizes, `general.alignment` read), tensor infos, aligned data.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from repomem.backends.models import _GGUF_ARRAY, _GGUF_SCALARS, _GGUF_STRING

# Sizes of GGUF's fixed-size value types, from the value-type table the model checks use.
_SCALAR_BYTES = {kind: struct.calcsize("<" + fmt) for kind, fmt in _GGUF_SCALARS.items()}


@dataclass(frozen=True)
class Tensor:
    name: str
    tensor_type: gguf.GGMLQuantizationType
    data: np.ndarray  # uint8, shape (..., bytes per row): gguf.quants.dequantize's input


class _Cursor:
    def __init__(self, buffer: mmap.mmap) -> None:
        self.buffer, self.at = buffer, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from("<" + fmt, self.buffer, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        length = self.take("Q")
        self.at += length
        return bytes(self.buffer[self.at - length:self.at]).decode("utf-8")

    def skip_value(self, value_type: int) -> None:
        if value_type == _GGUF_STRING:
            length = self.take("Q")  # read first: `self.at += self.take(...)` would add to the old offset
            self.at += length
        elif value_type == _GGUF_ARRAY:
            item_type, count = self.take("I"), self.take("Q")
            if item_type in _SCALAR_BYTES:
                self.at += _SCALAR_BYTES[item_type] * count
            else:
                for _ in range(count):
                    self.skip_value(item_type)
        else:
            self.at += _SCALAR_BYTES[value_type]


def read_tensors(path: Path) -> dict[str, Tensor]:
    with open(path, "rb") as handle:
        buffer = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    cursor = _Cursor(buffer)
    if bytes(buffer[:4]) != b"GGUF":
        raise ValueError(f"{path} is not a GGUF file")
    cursor.at = 4
    if cursor.take("I") not in (2, 3):
        raise ValueError(f"{path}: an unknown GGUF version")
    n_tensors, n_values = cursor.take("Q"), cursor.take("Q")
    alignment = 32
    for _ in range(n_values):
        key, value_type = cursor.string(), cursor.take("I")
        if key == "general.alignment" and value_type == 4:
            alignment = cursor.take("I")
        else:
            cursor.skip_value(value_type)
    infos = []
    for _ in range(n_tensors):
        name, n_dims = cursor.string(), cursor.take("I")
        dims = [cursor.take("Q") for _ in range(n_dims)]
        infos.append((name, dims, gguf.GGMLQuantizationType(cursor.take("I")), cursor.take("Q")))
    start = -(-cursor.at // alignment) * alignment
    tensors = {}
    for name, dims, tensor_type, offset in infos:
        block_size, type_size = gguf.GGML_QUANT_SIZES[tensor_type]
        shape = [int(d) for d in reversed(dims)]  # numpy order: the row (GGUF's first dimension) last
        shape[-1] = shape[-1] // block_size * type_size
        size = int(np.prod(shape))
        data = np.frombuffer(buffer, dtype=np.uint8, count=size, offset=start + offset).reshape(shape)
        tensors[name] = Tensor(name, tensor_type, data)
    return tensors
