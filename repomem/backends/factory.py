"""The one place a backend is chosen and opened from settings and command-line choices."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from repomem.backends.base import Backend
from repomem.config import Config, ModelConfig
from repomem.failures import Failure
from repomem.progress import Progress

if TYPE_CHECKING:
    from repomem.backends.llama_process import StartedAhead

# Seconds to wait for a server's first answer when connecting (generation has its own deadline).
CONNECT_DEADLINE_S = 15.0


def api_key_from_environment(settings: ModelConfig) -> str:
    return os.environ.get(settings.api_key_env, "") if settings.api_key_env else ""


def start_ahead(config: Config, model_path: str = "") -> StartedAhead | None:
    """The embedded model's child process started now, when open_backend(config, model_path=...)
    would start that very process and nothing needs fetching or writing first (a pull, a
    widening, a progress bar): the caller's next steps then run while the model loads. The caller
    passes it to open_backend, and discards it when it opens none."""
    settings = config.model
    if not settings.isolate_model or settings.endpoint or settings.hf_model:
        return None
    chosen = model_path or settings.model_path
    if chosen and not embedded_model_name(chosen):
        path: Path | None = Path(chosen).expanduser()
    else:
        from repomem.backends.bf16_layers import embedded_model_file_as_is, widened_for
        from repomem.backends.models import model_named, verified_on_disk

        model = model_named(chosen or settings.embedded_model)
        shipped = None if isinstance(model, Failure) else verified_on_disk(model)
        path = None if shipped is None else embedded_model_file_as_is(shipped, settings.embedded_layers,
                                                                         widened_for(model, settings.embedded_layers))
    if path is None or not path.is_file():
        return None
    from repomem.backends.llama_process import start_ahead as start_child

    return start_child(path, settings.context_tokens, settings.threads, settings.gpu_layers,
                       settings.reuse_chunk_tokens, prompt_cache(settings), fused_attention(settings, path),
                       settings.decode_threads)


def open_backend(config: Config, progress: Progress | None = None, *, model_path: str = "",
                 endpoint: str = "", vllm_model: str = "", hf_model: str = "",
                 ahead: StartedAhead | None = None) -> Backend | Failure:
    """vLLM in process, transformers, an OpenAI-compatible endpoint, a GGUF file, or an embedded
    model (pulled if needed), in that order. Arguments win over settings; a model argument that
    names an embedded model (`--model qwen2.5-coder-1.5b`, `--hf qwen2.5-coder-1.5b`) is that
    model's file; the API key comes from `api_key_env`; a GGUF runs in a child process unless
    `isolate_model` is off. The [model] settings choose it; completion.deadline_s bounds its start.
    `ahead`: start_ahead's child, taken if it is the one wanted (else stopped)."""
    settings = config.model
    if vllm_model:
        from repomem.backends.vllm_local import VLLMBackend

        return VLLMBackend.open(vllm_model, settings.context_tokens)
    hf_model = hf_model or settings.hf_model
    if hf_model:
        from repomem.backends.transformers_hf import TransformersBackend

        if embedded_model_name(hf_model):  # transformers reads the same GGUF (eval/README.md)
            hf_path = pulled_model(hf_model, progress)
            if isinstance(hf_path, Failure):
                return hf_path
            hf_model = str(hf_path)
        return TransformersBackend.open(hf_model, settings.context_tokens, settings.threads)
    endpoint = endpoint or settings.endpoint
    if endpoint:
        return connect_endpoint(endpoint, config)
    chosen = model_path or settings.model_path
    if chosen and not embedded_model_name(chosen):
        return open_gguf(Path(chosen).expanduser(), config, ahead)
    pulled = pulled_model(chosen or settings.embedded_model, progress)
    if isinstance(pulled, Failure):
        return pulled
    from repomem.backends.bf16_layers import embedded_model_file, widened_for
    from repomem.backends.models import model_named, say_on_stderr

    widened = widened_for(model_named(chosen or settings.embedded_model), settings.embedded_layers)
    return open_gguf(embedded_model_file(pulled, settings.embedded_layers, progress, say_on_stderr, widened), config,
                     ahead)


def embedded_model_name(value: str) -> bool:
    """Whether a model argument names an embedded model rather than a file: a known name that is
    not also a file here (a file wins, as a user who has one by that name means it)."""
    from repomem.backends.models import model_named

    return not isinstance(model_named(value), Failure) and not Path(value).expanduser().exists()


def pulled_model(name: str, progress: Progress | None) -> Path | Failure:
    """The embedded model `name`'s verified file, fetched first when missing."""
    from repomem.backends.models import model_named, pull_model

    model = model_named(name)
    return model if isinstance(model, Failure) else pull_model(model, progress=progress)


def connect_endpoint(endpoint: str, config: Config) -> Backend | Failure:
    from repomem.backends.openai_http import OpenAIBackend

    settings = config.model
    # A user's server: its window is what it says (model.context_tokens is the embedded model's).
    return OpenAIBackend.connect(endpoint, api_key=api_key_from_environment(settings),
                                 deadline_s=min(config.completion.deadline_s, CONNECT_DEADLINE_S),
                                 context_tokens=0, asks_logprobs=settings.endpoint_logprobs)


def fused_attention(settings: ModelConfig, path: Path) -> bool:
    """Whether llama.cpp evaluates `path`'s attention with its fused kernel: where the setting asks
    for it and the file is an embedded model widened to bfloat16 (a build with AVX512_BF16), or the
    shipped file that "auto" timed faster here with it (the same build), the cases it was measured
    in (docs/editors.md#interactive-latency). With the AVX2 build it turned a near tie of the
    bundled example the other way, so other files keep llama.cpp's default."""
    from repomem.backends.bf16_layers import is_widened_file, runs_shipped_as_timed

    return settings.flash_attention and (is_widened_file(path) or runs_shipped_as_timed(path))


def prompt_cache(settings: ModelConfig) -> tuple[Path, int] | None:
    """Where the embedded model keeps evaluated prompts for later processes, and how many bytes
    (repomem.backends.prompt_states); None when it keeps none. Only exact prompts are kept: not
    with moved runs (reuse_chunk_tokens)."""
    if settings.prompt_cache_mb <= 0 or settings.reuse_chunk_tokens > 0:
        return None
    from repomem.cache import cache_root

    return cache_root() / "prompt-states", settings.prompt_cache_mb << 20


def open_gguf(path: Path, config: Config, ahead: StartedAhead | None = None) -> Backend | Failure:
    settings = config.model
    if settings.isolate_model:
        from repomem.backends.llama_process import LlamaProcessBackend

        return LlamaProcessBackend.open(path, settings.context_tokens, settings.threads, settings.gpu_layers,
                                        start_deadline_s=config.completion.deadline_s,
                                        prefill_chunk_tokens=settings.prefill_chunk_tokens,
                                        reuse_chunk_tokens=settings.reuse_chunk_tokens,
                                        prompt_cache=prompt_cache(settings), ahead=ahead,
                                        flash_attention=fused_attention(settings, path),
                                        decode=settings.decode_threads)
    from repomem.backends.llama import LlamaBackend

    return LlamaBackend.open(path, settings.context_tokens, settings.threads, settings.gpu_layers,
                             reuse_chunk_tokens=settings.reuse_chunk_tokens, prompt_cache=prompt_cache(settings),
                             flash_attention=fused_attention(settings, path), decode=settings.decode_threads)
