"""The embedded model's evaluated prompts kept on disk, so that another process starts where an
earlier one stopped.

Every `repomem complete` starts a new model process, and the CLI's prompts repeat: the same
file a moment later, the same cursor after an edit below it, the file-only round of a cursor
completed before. llama.cpp keeps a prompt's work (its KV cache) only in the process that did it.
Here, after a prompt is evaluated, the model's state (llama.cpp's `llama_state_get_data`: the KV
cells of the prompt's tokens) is written to the user's cache; before the next prompt, the stored
state sharing the longest beginning with it is loaded, and only the rest is evaluated
(docs/measurements.md#prompt-states). The model then answers bit for bit as one that evaluated
that beginning itself, which is what llama.cpp's own prompt cache does inside a process between
consecutive prompts (tests/e2e/test_prompt_states.py). Against a cold evaluation of the whole
prompt the last bits may differ, as they do after any cached beginning: llama.cpp's CPU kernels
take a batch's rows in groups, so where a batch starts changes a row's rounding, and greedy text
can change only at a near-tie.

A state is only valid for the same model file, llama.cpp build, window and offload: the folder a
state lives in is named by all of them (`state_folder`). Each file holds its tokens and a BLAKE2b
digest of tokens and state, checked before llama.cpp reads a byte of it; a file that fails is
deleted and the prompt evaluated cold. The folder is bounded (model.prompt_cache_mb over every
model's folder, least recently used first); files are written whole and renamed into place, so
concurrent processes see a state entire or not at all.

The model's child process (repomem.backends.llama_child) uses this module: it must not load
repomem's engine.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from repomem.backends.base import common_prefix

MAGIC = b"repomem-prompt-state-1\n"
# After MAGIC: token count (u32), state bytes (u64), BLAKE2b-256 of tokens and state; then the
# tokens (int32 little-endian) and the state.
HEADER = struct.Struct("<IQ32s")
SUFFIX = ".state"
# A state is written only for a prompt that evaluated at least this many tokens (fewer: the state
# it was restored from or the one before already holds nearly all of it); one is loaded only when
# it holds at least this many tokens more than the model's memory already does. A token costs
# ~10 ms on two cores; reading and checking a state ~20 ms.
MIN_NEW_TOKENS = 64
STALE_TEMPORARY_S = 3600.0  # a temporary file this old was left by a killed writer


def folder_for(root: Path, model: Path, context_tokens: int, gpu_layers: int, flash_attention: bool = False) -> Path:
    """`state_folder` for llama-cpp-python as installed here, on this CPU (states computed with the
    fused attention apart: their values differ in the last bits)."""
    import llama_cpp

    system = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
    return state_folder(root, model, (llama_cpp.__version__, system, context_tokens, gpu_layers,
                                      *(("flash attention",) if flash_attention else ())))


def state_folder(root: Path, model: Path, identity: Sequence[object]) -> Path:
    """The folder under `root` for states of `model` computed as `identity` says (llama.cpp's
    version and CPU features, the window, the offload): one name per combination."""
    status = model.stat()
    digest = hashlib.blake2b(digest_size=10)
    for part in (str(model.resolve()), status.st_size, status.st_mtime_ns, *identity):
        digest.update(str(part).encode("utf-8", "surrogateescape") + b"\0")
    return root / f"{model.name}-{digest.hexdigest()}"


@dataclass(frozen=True)
class StoredState:
    path: Path
    shared: int  # tokens its beginning shares with the prompt asked about


class StateFolder:
    """Prompt states of one model, in `folder`; `capacity_bytes` bounds every folder beside it."""

    def __init__(self, folder: Path, capacity_bytes: int):
        self.folder = folder
        self.capacity_bytes = capacity_bytes

    def longest(self, tokens: Sequence[int], at_least: int) -> StoredState | None:
        """The stored state sharing the longest beginning with `tokens`, if at least `at_least`."""
        best: StoredState | None = None
        for path in self._files():
            stored = _read_tokens(path)
            if stored is None:
                continue
            shared = common_prefix(stored, tokens)
            if shared >= at_least and (best is None or shared > best.shared):
                best = StoredState(path, shared)
        return best

    def read(self, path: Path) -> tuple[list[int], bytes] | None:
        """A state's tokens and bytes, checked; None (and the file deleted) when it fails."""
        try:
            with open(path, "rb") as stream:
                data = stream.read()
        except OSError:
            return None
        checked = _checked(data)
        if checked is None:
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: eviction goes by modification time
        return checked

    def write(self, tokens: Sequence[int], state: bytes) -> None:
        """Keep `state` for `tokens`, dropping stored states it holds whole, then evict."""
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            return
        token_bytes = np.asarray(tokens, dtype="<i4").tobytes()
        digest = hashlib.blake2b(token_bytes, digest_size=32)
        digest.update(state)
        name = hashlib.blake2b(token_bytes, digest_size=16).hexdigest() + SUFFIX
        temporary = self.folder / f".{name}.{os.getpid()}.tmp"
        try:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as stream:
                stream.write(MAGIC + HEADER.pack(len(tokens), len(state), digest.digest()))
                stream.write(token_bytes)
                stream.write(state)
            os.replace(temporary, self.folder / name)
        except OSError:
            with contextlib.suppress(OSError):
                temporary.unlink()
            return
        for path in self._files():
            if path.name != name:
                stored = _read_tokens(path)
                if stored is not None and len(stored) <= len(tokens) and common_prefix(stored, tokens) == len(stored):
                    with contextlib.suppress(OSError):
                        path.unlink()
        self.evict()

    def evict(self) -> None:
        """Delete the least recently used states of every model until all fit the capacity, and
        temporary files a killed writer left."""
        files: list[tuple[float, int, Path]] = []
        now = time.time()
        for folder in _subfolders(self.folder.parent):
            for entry in _entries(folder):
                try:
                    status = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if entry.name.endswith(".tmp"):
                    if now - status.st_mtime > STALE_TEMPORARY_S:
                        with contextlib.suppress(OSError):
                            os.unlink(entry.path)
                elif entry.name.endswith(SUFFIX):
                    files.append((status.st_mtime, status.st_size, Path(entry.path)))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.capacity_bytes:
                break
            with contextlib.suppress(OSError):
                path.unlink()
            total -= size

    def _files(self) -> list[Path]:
        return [Path(entry.path) for entry in _entries(self.folder) if entry.name.endswith(SUFFIX)]


def _entries(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as entries:
            return [entry for entry in entries if entry.is_file(follow_symlinks=False)]
    except OSError:
        return []


def _subfolders(root: Path) -> list[Path]:
    try:
        with os.scandir(root) as entries:
            return [Path(entry.path) for entry in entries if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _read_tokens(path: Path) -> list[int] | None:
    """The tokens a state file says it holds (unchecked: only to choose which file to read)."""
    try:
        with open(path, "rb") as stream:
            head = stream.read(len(MAGIC) + HEADER.size)
            if len(head) != len(MAGIC) + HEADER.size or not head.startswith(MAGIC):
                return None
            count, _, _ = HEADER.unpack_from(head, len(MAGIC))
            data = stream.read(4 * count)
    except OSError:
        return None
    if len(data) != 4 * count:
        return None
    return np.frombuffer(data, dtype="<i4").tolist()


def _checked(data: bytes) -> tuple[list[int], bytes] | None:
    start = len(MAGIC) + HEADER.size
    if len(data) < start or not data.startswith(MAGIC):
        return None
    count, size, digest = HEADER.unpack_from(data, len(MAGIC))
    if len(data) != start + 4 * count + size:
        return None
    body = memoryview(data)[start:]
    if hashlib.blake2b(body, digest_size=32).digest() != digest:
        return None
    tokens = np.frombuffer(body[:4 * count], dtype="<i4").tolist()
    return tokens, bytes(body[4 * count:])


def with_prompt_states(llama_class: type, states: StateFolder | None) -> type:
    """`llama_class` (llama_cpp.Llama) that, before each prompt, loads the stored state sharing
    the longest beginning with it, and after evaluating one keeps its state; the class itself
    when `states` is None. `last_prompt_reused` says how many tokens of the last prompt were not
    evaluated (held in memory or loaded)."""
    if states is None:
        return llama_class

    class PromptStateLlama(llama_class):
        def __init__(self, *args, **settings):
            super().__init__(*args, **settings)
            self._state_prompt: list[int] | None = None  # the prompt being evaluated, until it is
            self._prompt_evaluated = 0
            self.last_prompt_reused = 0
            self.last_prompt_tokens = 0

        def generate(self, tokens, *args, **settings):
            tokens = list(tokens)
            if settings.get("reset", True) and tokens:
                held = common_prefix(self.input_ids[:self.n_tokens].tolist(), tokens)
                usable = len(tokens) - 1  # at least one token is evaluated, for fresh logits
                if usable - held >= MIN_NEW_TOKENS:
                    found = states.longest(tokens, at_least=held + MIN_NEW_TOKENS)
                    if found is not None:
                        self._restore(found.path, min(found.shared, usable))
                self._state_prompt, self._prompt_evaluated = tokens, 0
                self.last_prompt_reused = len(tokens)  # unless it evaluates some (eval, below)
                self.last_prompt_tokens = len(tokens)
            return super().generate(tokens, *args, **settings)

        def eval(self, tokens):
            super().eval(tokens)
            prompt = self._state_prompt
            if prompt is None:
                return
            self._prompt_evaluated += len(tokens)
            if self.n_tokens >= len(prompt):
                self._state_prompt = None
                self.last_prompt_reused = max(len(prompt) - self._prompt_evaluated, 0)
                if self._prompt_evaluated >= MIN_NEW_TOKENS and self.input_ids[:len(prompt)].tolist() == prompt:
                    states.write(prompt, self._state_bytes())

        def create_completion(self, *args, **settings):
            result = super().create_completion(*args, **settings)
            return self._reported(result) if settings.get("stream") else self._usage_added(result)

        def _reported(self, chunks):
            try:
                for chunk in chunks:
                    yield self._usage_added(chunk)
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()  # a reader that stops early ends llama.cpp's generation too

        def _usage_added(self, chunk: dict) -> dict:
            """The answer's last chunk with OpenAI's count of prompt tokens served from a cache,
            which the embedded model's client reads (repomem.backends.llama_process)."""
            if any(choice.get("finish_reason") for choice in chunk.get("choices") or ()):
                usage = dict(chunk.get("usage") or {})
                usage.setdefault("prompt_tokens", self.last_prompt_tokens)
                usage["prompt_tokens_details"] = {"cached_tokens": self.last_prompt_reused}
                chunk["usage"] = usage
            return chunk

        def _state_bytes(self) -> bytes:
            from llama_cpp import llama_cpp as native

            size = native.llama_state_get_size(self._ctx.ctx)
            buffer = (ctypes.c_uint8 * size)()
            written = native.llama_state_get_data(self._ctx.ctx, buffer, size)
            return ctypes.string_at(buffer, written)

        def _restore(self, path: Path, length: int) -> None:
            """Load the state in `path` and keep its first `length` tokens; on any failure the
            memory is emptied (a cold evaluation follows)."""
            from llama_cpp import llama_cpp as native

            read = states.read(path)
            if read is None:
                return
            stored, state = read
            buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
            if native.llama_state_set_data(self._ctx.ctx, buffer, len(state)) != len(state):
                self._ctx.kv_cache_clear()
                self.n_tokens = 0
                with contextlib.suppress(OSError):
                    path.unlink()
                return
            kept = min(length, len(stored))
            self.input_ids[:len(stored)] = stored
            self._ctx.kv_cache_seq_rm(-1, kept, -1)
            self.n_tokens = kept
            self._requires_eval = True

    return PromptStateLlama
