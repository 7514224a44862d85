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
                 endpoint: str = "", vllm_model: str = "") -> Backend | Failure:
    """An OpenAI-compatible endpoint, vLLM in process, a GGUF file, or the default model
    (pulled if needed). Arguments win over settings; the API key comes from `api_key_env`."""
    if vllm_model:
        from repomem.backends.vllm_local import VLLMBackend

        return VLLMBackend.open(vllm_model, settings.context_tokens)
    endpoint = endpoint or settings.endpoint
    if endpoint:
        from repomem.backends.openai_http import OpenAIBackend

        return OpenAIBackend.connect(endpoint, api_key=api_key_from_environment(settings),
                                     deadline_s=min(settings.deadline_s, CONNECT_DEADLINE_S),
                                     context_tokens=settings.context_tokens)
    from repomem.backends.llama import LlamaBackend
    from repomem.backends.models import pull_default_model

    path = model_path or settings.model_path
    if path:
        return LlamaBackend.open(Path(path).expanduser(), settings.context_tokens, settings.threads)
    pulled = pull_default_model(progress=progress)
    if isinstance(pulled, Failure):
        return pulled
    return LlamaBackend.open(pulled, settings.context_tokens, settings.threads)
