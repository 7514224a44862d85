"""The one place a backend is chosen and opened from settings and command-line choices."""

from __future__ import annotations

import os
from pathlib import Path

from repomem.backends.base import Backend
from repomem.config import CompletionConfig
from repomem.failures import Failure
from repomem.progress import Progress

# Seconds to wait for a server's first answer when connecting (generation has its own deadline).
CONNECT_DEADLINE_S = 15.0


def api_key_from_environment(settings: CompletionConfig) -> str:
    return os.environ.get(settings.api_key_env, "") if settings.api_key_env else ""


def open_backend(settings: CompletionConfig, progress: Progress | None = None, *, model_path: str = "",
                 endpoint: str = "", vllm_model: str = "", hf_model: str = "") -> Backend | Failure:
    """vLLM in process, transformers, an OpenAI-compatible endpoint, a GGUF file, or the default
    model (pulled if needed), in that order. Arguments win over settings; the API key comes from
    `api_key_env`; a GGUF runs in a child process unless `isolate_model` is off."""
    if vllm_model:
        from repomem.backends.vllm_local import VLLMBackend

        return VLLMBackend.open(vllm_model, settings.context_tokens)
    hf_model = hf_model or settings.hf_model
    if hf_model:
        from repomem.backends.transformers_hf import TransformersBackend

        return TransformersBackend.open(hf_model, settings.context_tokens, settings.threads)
    endpoint = endpoint or settings.endpoint
    if endpoint:
        return connect_endpoint(endpoint, settings)
    path = Path(model_path or settings.model_path).expanduser() if (model_path or settings.model_path) else None
    if path is None:
        from repomem.backends.models import pull_default_model, say_on_stderr

        pulled = pull_default_model(progress=progress)
        if isinstance(pulled, Failure):
            return pulled
        from repomem.backends.bf16_layers import embedded_model_file

        path = embedded_model_file(pulled, settings.embedded_layers, progress, say_on_stderr)
    return open_gguf(path, settings)


def connect_endpoint(endpoint: str, settings: CompletionConfig) -> Backend | Failure:
    from repomem.backends.openai_http import OpenAIBackend

    return OpenAIBackend.connect(endpoint, api_key=api_key_from_environment(settings),
                                 deadline_s=min(settings.deadline_s, CONNECT_DEADLINE_S),
                                 context_tokens=settings.context_tokens, asks_logprobs=settings.endpoint_logprobs)


def open_gguf(path: Path, settings: CompletionConfig) -> Backend | Failure:
    if settings.isolate_model:
        from repomem.backends.llama_process import LlamaProcessBackend

        return LlamaProcessBackend.open(path, settings.context_tokens, settings.threads, settings.gpu_layers,
                                        start_deadline_s=settings.deadline_s,
                                        prefill_chunk_tokens=settings.prefill_chunk_tokens,
                                        reuse_chunk_tokens=settings.reuse_chunk_tokens)
    from repomem.backends.llama import LlamaBackend

    return LlamaBackend.open(path, settings.context_tokens, settings.threads, settings.gpu_layers,
                             reuse_chunk_tokens=settings.reuse_chunk_tokens)
