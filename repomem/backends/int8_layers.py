"""The embedded 0.5B with its Q5_0 layer blocks rewritten as Q8_0, exactly, for Intel's matrix tiles.

Where the CPU has AMX and llama.cpp was built for it (scripts/llama_cpu_flags.sh), llama.cpp
multiplies 8-bit (Q8_0) and K-quant blocks in the tiles, but not Q5_0 ones, and most of the shipped
0.5B's matrices are Q5_0 (the 1.5B's are all K-quants: the tiles take its shipped file as it is). A
Q5_0 block is 32 values d * (q - 16), q a 5-bit integer and d one float16 scale; a Q8_0 block is 32
values d * q, q an 8-bit integer. So each block is rewritten with the same d and q - 16: the same
32 values, bit for bit, no re-estimation (llama.cpp's own quantizer would requantize them through
float32 with a new scale). The token embeddings (Q5_0, only looked up, never multiplied) and every
other tensor are copied unchanged, and so are the metadata bytes.

Measured on a 2-core Intel Xeon (Sapphire Rapids class), llama.cpp built with AMX: a 950-token
prompt read in 1.6 s instead of 3.9 s, tokens written in 27 instead of 40 ms (docs/measurements.md).
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import BinaryIO

import numpy as np

from repomem.backends.gguf_table import TensorInfo, aligned, mapped, read_table, tensor_info_bytes

GGML_TYPE_Q5_0, GGML_TYPE_Q8_0 = 6, 8
Q5_0_BLOCK_BYTES = 22  # float16 d, 32 high bits, 16 bytes of low nibbles (ggml's block_q5_0)
Q8_0_BLOCK_BYTES = 34  # float16 d, 32 int8 values (block_q8_0)
KEPT_AS_SHIPPED = frozenset({"token_embd.weight"})  # looked up, not multiplied: no tile reads it
BLOCKS_PER_STEP = 1 << 16  # blocks rewritten at a time: ~3.6 MB of int16 scratch, whatever the tensor


def q5_0_as_q8_0(blocks: np.ndarray) -> np.ndarray:
    """Q5_0 blocks (uint8, shape (n, 22)) as Q8_0 blocks (uint8, shape (n, 34)) of the same values.

    ggml's layout: value j < 16 is the low nibble of byte j of `qs` with bit j of `qh` above it,
    value j + 16 the high nibble of byte j with bit j + 16 of `qh`; each value is that 5-bit q
    minus 16, times d."""
    out = np.empty((blocks.shape[0], Q8_0_BLOCK_BYTES), dtype=np.uint8)
    out[:, :2] = blocks[:, :2]  # d, unchanged
    high_bits = np.ascontiguousarray(blocks[:, 2:6]).view("<u4")  # (n, 1)
    nibbles = blocks[:, 6:22]
    low = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1).astype(np.int16)  # (n, 32)
    high = ((high_bits >> np.arange(32, dtype=np.uint32)) & 1).astype(np.int16)  # (n, 32)
    out[:, 2:] = ((low | (high << 4)) - 16).astype(np.int8).view(np.uint8)
    return out


def rewrites(info: TensorInfo) -> bool:
    """Whether `info`'s blocks are rewritten as Q8_0."""
    return info.tensor_type == GGML_TYPE_Q5_0 and info.name not in KEPT_AS_SHIPPED


def write_int8_layers(source: Path, target: Path) -> None:
    """Write `target`: `source` (a GGUF file) with its Q5_0 matrices as Q8_0 blocks of the same
    values, every other byte as it was but the tensor table's types and offsets. Raises ValueError
    for a file that is not GGUF, OSError where it cannot be read or written."""
    buffer = mapped(source)
    try:
        table = read_table(buffer, source.name)
        new_infos: list[TensorInfo] = []
        offset = 0
        for info in table.tensors:
            size = info.byte_size()
            if rewrites(info):
                size = size // Q5_0_BLOCK_BYTES * Q8_0_BLOCK_BYTES
                info = TensorInfo(info.name, info.dims, GGML_TYPE_Q8_0, 0)
            new_infos.append(TensorInfo(info.name, info.dims, info.tensor_type, offset))
            offset = aligned(offset + size, table.alignment)
        with open(target, "wb") as out:
            out.write(buffer[: table.metadata_end])
            for info in new_infos:
                out.write(tensor_info_bytes(info))
            out.write(b"\0" * (aligned(out.tell(), table.alignment) - out.tell()))
            data_start = out.tell()
            for old, new in zip(table.tensors, new_infos):
                out.write(b"\0" * (data_start + new.offset - out.tell()))
                first = table.data_start + old.offset
                if not rewrites(old):
                    out.write(buffer[first : first + old.byte_size()])
                    continue
                _write_rewritten(out, buffer, first, old.byte_size())
            out.write(b"\0" * (aligned(out.tell(), table.alignment) - out.tell()))
    finally:
        buffer.close()


def _write_rewritten(out: BinaryIO, buffer: mmap.mmap, first: int, size: int) -> None:
    """The Q5_0 blocks at buffer[first:first + size] written to `out` as Q8_0 (the view of the
    mapping ends with this call, so the mapping can be closed)."""
    blocks = np.frombuffer(buffer, dtype=np.uint8, count=size, offset=first).reshape(-1, Q5_0_BLOCK_BYTES)
    for start in range(0, blocks.shape[0], BLOCKS_PER_STEP):
        out.write(q5_0_as_q8_0(blocks[start : start + BLOCKS_PER_STEP]).tobytes())
