"""The zip container of a snapshot's array files, deflated and inflated by libdeflate (and its
gzipped JSON inflated the same way).

Each member is compressed whole (its length is known), so a member is its local header, its
deflate stream and nothing after it. libdeflate's level 1 writes a stream ~4% smaller than zlib's
in ~40% of the time and inflates any deflate stream ~3x faster than zlib on these arrays
(docs/measurements.md#index-on-disk). The files stay ordinary zips (zipfile and numpy's `np.load`
read them, CRC-32s included), and zip64 fields are always written, so no size or offset is
limited to 4 GiB and one layout is tested.
"""

from __future__ import annotations

import gzip
import struct
import time
import zlib
from typing import BinaryIO

import deflate

LEVEL = 1  # libdeflate's fastest; a saved edit rewrites these files

_STORED, _DEFLATED = 0, 8
_ZIP64_VERSION = 45  # version 4.5 of the format: zip64 extra fields (APPNOTE 4.4.3)
_UNKNOWN32 = 0xFFFF_FFFF  # "look in the zip64 extra field"
_LOCAL = struct.Struct("<4s5H3L2H")
_LOCAL_ZIP64 = struct.Struct("<2H2Q")  # tag 1, 16 bytes: uncompressed size, compressed size
_CENTRAL = struct.Struct("<4s4B4H3L5HLL")
_CENTRAL_ZIP64 = struct.Struct("<2H3Q")  # tag 1, 24 bytes: the two sizes, the local header's offset
_END64 = struct.Struct("<4sQ2H2L4Q")
_END64_LOCATOR = struct.Struct("<4sLQL")
_END = struct.Struct("<4s4H2LH")


class DeflateFailed(ValueError):
    """A member's deflate stream is torn or inflates to another length than its header says."""


# The most bytes libdeflate's Python binding inflates: it takes the output's size as a C unsigned
# int, so a larger size wraps around (2**32 + n asks for n bytes). zlib inflates those.
LIBDEFLATE_MAX_OUTPUT = 0xFFFF_FFFF


def inflate(stream: bytes | memoryview, size: int) -> bytearray:
    """The `size` bytes a member's deflate stream holds (writable: arrays over them need no copy)."""
    if size > LIBDEFLATE_MAX_OUTPUT:
        try:
            payload = bytearray(zlib.decompress(stream, -15, size))
        except zlib.error as error:
            raise DeflateFailed(f"deflate stream does not inflate to {size} bytes: {error}") from error
    else:
        try:
            payload = deflate.deflate_decompress(stream, size)
        except deflate.DeflateError as error:
            raise DeflateFailed(f"deflate stream does not inflate to {size} bytes: {error}") from error
    if len(payload) != size:
        raise DeflateFailed(f"deflate stream inflates to {len(payload)} bytes, not {size}")
    return payload


def gunzip(data: bytes | memoryview) -> bytearray:
    """The bytes a one-member gzip file holds (its CRC-32 and length checked); ~3.5x faster than the
    gzip module on a snapshot's symbol tables."""
    if len(data) < 18 or int.from_bytes(data[-4:], "little") == 0:
        # The wrapper sizes its output by the trailer's length and answers an empty one with
        # nothing, unchecked: such a file (this index never writes one) goes to the gzip module.
        return _gunzip_by_module(data)
    try:
        payload = deflate.gzip_decompress(data)
    except deflate.DeflateError:
        # The trailer holds the length modulo 2**32, which the wrapper sizes its output by: 4 GiB
        # or more of JSON inflates only through the gzip module, which refuses a torn file too.
        return _gunzip_by_module(data)
    # libdeflate checks the member's own trailer, not that the member ends the file.
    if int.from_bytes(data[-4:], "little") != len(payload) & 0xFFFF_FFFF:
        raise DeflateFailed("gzip file holds more than its one member")
    return payload


def _gunzip_by_module(data: bytes | memoryview) -> bytearray:
    try:
        return bytearray(gzip.decompress(data))
    except (OSError, EOFError, zlib.error) as error:
        raise DeflateFailed(f"gzip stream does not inflate: {error}") from error


class ZipWriter:
    """Members written one at a time into `handle` (a new file at offset 0), then `close()` writes
    the central directory."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self._offset = 0
        self._central: list[bytes] = []
        year, month, day, hour, minute, second = time.localtime()[:6]
        self._dos_time = (hour << 11) | (minute << 5) | (second // 2)
        self._dos_date = ((max(year, 1980) - 1980) << 9) | (month << 5) | day

    def add(self, name: str, *pieces: bytes | bytearray | memoryview, deflated: bool = True) -> None:
        """One member holding `pieces` one after another, deflated (joined first unless they are one:
        libdeflate takes one buffer), or stored as they are, written without a joined copy (bytes that barely shrink;
        W's weights are most of a large index's base file)."""
        name_bytes = name.encode("ascii")  # the snapshot's member names are ASCII
        if deflated and len(pieces) != 1:
            pieces = (b"".join(pieces),)
        size = sum(memoryview(piece).nbytes for piece in pieces)
        checksum = 0
        for piece in pieces:
            checksum = deflate.crc32(piece, checksum)
        data = (deflate.deflate_compress(pieces[0], LEVEL),) if deflated else pieces
        method = _DEFLATED if deflated else _STORED
        compressed = sum(memoryview(piece).nbytes for piece in data)
        local_extra = _LOCAL_ZIP64.pack(1, 16, size, compressed)
        header = _LOCAL.pack(b"PK\x03\x04", _ZIP64_VERSION, 0, method, self._dos_time, self._dos_date, checksum,
                             _UNKNOWN32, _UNKNOWN32, len(name_bytes), len(local_extra))
        self._handle.write(header + name_bytes + local_extra)
        for piece in data:
            self._handle.write(piece)
        central_extra = _CENTRAL_ZIP64.pack(1, 24, size, compressed, self._offset)
        self._central.append(_CENTRAL.pack(
            b"PK\x01\x02", _ZIP64_VERSION, 3, _ZIP64_VERSION, 0, 0, method, self._dos_time, self._dos_date,
            checksum, _UNKNOWN32, _UNKNOWN32, len(name_bytes), len(central_extra), 0, 0, 0, 0o600 << 16, _UNKNOWN32,
        ) + name_bytes + central_extra)
        self._offset += len(header) + len(name_bytes) + len(local_extra) + compressed

    def close(self) -> None:
        """The central directory and its end records (zip64's, then the classic one)."""
        directory = b"".join(self._central)
        count = len(self._central)
        end64_offset = self._offset + len(directory)
        self._handle.write(directory)
        self._handle.write(_END64.pack(b"PK\x06\x06", _END64.size - 12, _ZIP64_VERSION, _ZIP64_VERSION, 0, 0,
                                       count, count, len(directory), self._offset))
        self._handle.write(_END64_LOCATOR.pack(b"PK\x06\x07", 0, end64_offset, 1))
        self._handle.write(_END.pack(b"PK\x05\x06", 0, 0, min(count, 0xFFFF), min(count, 0xFFFF),
                                     min(len(directory), _UNKNOWN32), min(self._offset, _UNKNOWN32), 0))
