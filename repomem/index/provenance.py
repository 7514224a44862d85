"""Which index snapshots this user wrote on this machine.

A repository can ship a `.repomem/` folder (git keeps it: marker, pointer, snapshot and all), and
nothing a folder in a repository holds can prove where it was written: a marker file proves
nothing, and a shipped index that loads as "unchanged" decides what the compiled kernels read.
So every manifest repomem writes is sealed with an HMAC-SHA256 under a key that lives only in the
user's cache (`index-seal.key`, 32 random bytes, 0600, made on first use), and the manifest holds
the SHA-256 of every other file of its snapshot. A manifest whose seal does not verify was not
written here (or was damaged): the index is rebuilt. A user who cannot keep a key (no writable
cache) gets indexes that are rebuilt by each process, and one warning saying so.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

from repomem.cache import cache_root
from repomem.failures import Failure, FailureKind
from repomem.regular_files import read_regular

KEY_NAME = "index-seal.key"
KEY_BYTES = 32

_key: bytes | Failure | None = None  # per process: read once


def key_path() -> Path:
    return cache_root() / KEY_NAME


def _read_or_make_key(path: Path) -> bytes:
    try:
        key = read_regular(path)
        if len(key) == KEY_BYTES:
            return key
        path.unlink()  # damaged: a new key (every index is rebuilt once)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Written whole under a fresh name, then linked into place: a second process making its key at
    # the same moment either wins the link or reads the complete key of the one that did.
    scratch = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
    descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(secrets.token_bytes(KEY_BYTES))
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(scratch, path)
        except OSError as error:
            if error.errno != errno.EEXIST:
                raise
    finally:
        scratch.unlink(missing_ok=True)
    key = read_regular(path)
    if len(key) != KEY_BYTES:
        raise OSError(errno.EINVAL, "the key file has the wrong length", str(path))
    return key


def seal_key() -> bytes | Failure:
    """This user's sealing key, or why there is none (read once per process)."""
    global _key
    if _key is None:
        try:
            _key = _read_or_make_key(key_path())
        except OSError as error:
            _key = Failure(FailureKind.NO_SEAL_KEY,
                           f"cannot keep the index key {key_path()} ({error.strerror or error}): "
                           "indexes are rebuilt by every run")
    return _key


# A sealed file is JSON: {"seal":"<HMAC-SHA256 of the body's bytes, 64 hex>","body":<the body>}.
# The seal covers the body's bytes as they lie in the file, so checking it hashes them once; sealing a
# parsed manifest again (the form before) re-encoded every record: 0.18 s on 50,000 files
# (docs/measurements.md#nothing-changed).
_SEAL_HEAD = b'{"seal":"'
_SEAL_HEX = 64
_BODY_HEAD = b'","body":'
_BODY_AT = len(_SEAL_HEAD) + _SEAL_HEX + len(_BODY_HEAD)


def _seal(key: bytes, body: bytes) -> bytes:
    return hmac.new(key, body, hashlib.sha256).hexdigest().encode("ascii")


def sealed_json(body: dict[str, Any]) -> bytes:
    """`body` as sealed JSON (unsealed when there is no key: it will not be trusted)."""
    text = json.dumps(body).encode("ascii")  # ensure_ascii: a name's undecodable bytes as escapes
    key = seal_key()
    if isinstance(key, Failure):
        return b'{"body":' + text + b"}"
    return _SEAL_HEAD + _seal(key, text) + _BODY_HEAD + text + b"}"


def unsealed_json(data: bytes) -> Any:
    """The body of sealed JSON `data` when this user's key sealed it; else a Failure saying why it
    is not trusted. Raises ValueError for a sealed body that is no JSON or sealed data cut short."""
    key = seal_key()
    if isinstance(key, Failure):
        return Failure(FailureKind.UNTRUSTED_INDEX, key.message)
    seal = data[len(_SEAL_HEAD):len(_SEAL_HEAD) + _SEAL_HEX]
    if not (data.startswith(_SEAL_HEAD) and data[_BODY_AT - len(_BODY_HEAD):_BODY_AT] == _BODY_HEAD
            and data.endswith(b"}")):
        if data.startswith(_SEAL_HEAD):
            # Sealed, then cut short or written over: damage, not an index of another machine.
            raise ValueError("its manifest is cut short or garbled")
        return Failure(FailureKind.UNTRUSTED_INDEX, "the index was not written on this machine (no seal)")
    body = data[_BODY_AT:-1]
    if not hmac.compare_digest(_seal(key, body), seal):
        return Failure(FailureKind.UNTRUSTED_INDEX,
                       "the index was not written on this machine by this user, or was changed or damaged "
                       "since (its seal does not match index-seal.key in the repomem cache, "
                       "which a new cache folder replaces)")
    return json.loads(body)


def file_digest(path: Path) -> str:
    """SHA-256 of a file as written (read back from the page cache: ~1 GB/s)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def bytes_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
