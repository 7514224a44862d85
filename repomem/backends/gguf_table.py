"""A GGUF file's tensor table, read without its metadata's values.

gguf's own GGUFReader builds a numpy view of every metadata value on the way (the tokenizer's
~150,000 strings and merges: ~10 s a file here); what rewrites or compares tensors needs only where
the metadata ends and where each tensor is. Follows the GGUF layout (version 2 and 3,
little-endian): header, key-value pairs (skipped by their encoded sizes, `general.alignment`
read), tensor infos, aligned data.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import gguf

from repomem.backends.models import GGUF_ARRAY, GGUF_SCALARS, GGUF_STRING

# Sizes of GGUF's fixed-size value types, from the value-type table the model checks use.
_SCALAR_BYTES = {kind: struct.calcsize("<" + fmt) for kind, fmt in GGUF_SCALARS.items()}
DEFAULT_ALIGNMENT = 32  # the spec's, where `general.alignment` is not set


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dims: tuple[int, ...]  # GGUF's order: the row length first
    tensor_type: int  # ggml's type number (gguf.GGMLQuantizationType)
    offset: int  # bytes from the start of the data section

    def byte_size(self) -> int:
        """Bytes of the tensor's data: its rows in blocks of its type."""
        block_size, type_size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(self.tensor_type)]
        elements = 1
        for dim in self.dims:
            elements *= dim
        return elements // block_size * type_size


@dataclass(frozen=True)
class TensorTable:
    metadata_end: int  # bytes [0, metadata_end): header and key-value pairs (n_tensors among them)
    alignment: int
    data_start: int  # where the data section starts, aligned
    tensors: tuple[TensorInfo, ...]  # in the file's order


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
        if value_type == GGUF_STRING:
            length = self.take("Q")  # read first: `self.at += self.take(...)` would add to the old offset
            self.at += length
        elif value_type == GGUF_ARRAY:
            item_type, count = self.take("I"), self.take("Q")
            if item_type in _SCALAR_BYTES:
                self.at += _SCALAR_BYTES[item_type] * count
            else:
                for _ in range(count):
                    self.skip_value(item_type)
        else:
            self.at += _SCALAR_BYTES[value_type]


def mapped(path: Path) -> mmap.mmap:
    """`path` mapped read-only."""
    with open(path, "rb") as handle:
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


def read_table(buffer: mmap.mmap, name: str = "the file") -> TensorTable:
    """The tensor table of the GGUF file in `buffer`; ValueError when it is none (`name` says which)."""
    cursor = _Cursor(buffer)
    if bytes(buffer[:4]) != b"GGUF":
        raise ValueError(f"{name} is not a GGUF file")
    cursor.at = 4
    if cursor.take("I") not in (2, 3):
        raise ValueError(f"{name}: an unknown GGUF version")
    n_tensors, n_values = cursor.take("Q"), cursor.take("Q")
    alignment = DEFAULT_ALIGNMENT
    for _ in range(n_values):
        key, value_type = cursor.string(), cursor.take("I")
        if key == "general.alignment" and value_type == 4:
            alignment = cursor.take("I")
        else:
            cursor.skip_value(value_type)
    metadata_end = cursor.at
    tensors = []
    for _ in range(n_tensors):
        tensor_name, n_dims = cursor.string(), cursor.take("I")
        dims = tuple(cursor.take("Q") for _ in range(n_dims))
        tensors.append(TensorInfo(tensor_name, dims, cursor.take("I"), cursor.take("Q")))
    return TensorTable(metadata_end, alignment, aligned(cursor.at, alignment), tuple(tensors))


def aligned(position: int, alignment: int) -> int:
    """`position` rounded up to a multiple of `alignment`."""
    return -(-position // alignment) * alignment


def tensor_info_bytes(info: TensorInfo) -> bytes:
    """`info` as a GGUF tensor info entry."""
    name = info.name.encode("utf-8")
    return (struct.pack("<Q", len(name)) + name + struct.pack("<I", len(info.dims))
            + struct.pack(f"<{len(info.dims)}Q", *info.dims) + struct.pack("<IQ", info.tensor_type, info.offset))
