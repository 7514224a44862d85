"""Adapter for llama-cpp-python in this process: the embedded model when `model.isolate_model`
is off (the default runs it in a child process, repomem.backends.llama_process).

llama.cpp keeps the tokens of the previous prompt in its KV cache and reuses their longest common
prefix with the next prompt, so prompts that share their beginning (stable block order, a cursor
moving inside one function) skip most of the prompt processing; with `reuse_chunk_tokens` also the
runs the next prompt repeats elsewhere (repomem.backends.kv_reuse).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from repomem.backends.base import Generation, GenerationRequest, early_stop, mean_of, window_overflow
from repomem.backends.bf16_layers import maps_the_file
from repomem.backends.cpu_threads import decode_counts, prompt_threads, with_decode_threads
from repomem.backends.forced_start import StartConstraint, TokenVocabulary
from repomem.backends.greedy_logprobs import ChosenTokenLogprobs
from repomem.backends.kv_reuse import reused_tokens, with_chunk_reuse
from repomem.backends.models import check_gguf
from repomem.backends.prompt_states import StateFolder, folder_for, with_prompt_states
from repomem.backends.templates import Template, template_for
from repomem.failures import Failure, FailureKind


class LlamaBackend:
    constrains_start = True  # GenerationRequest.forced_start, by a logits processor

    def __init__(self, llama, path: Path, template: Template, context_tokens: int):
        self._llama = llama
        self._lock = threading.Lock()
        self._cache: dict[str, int] = {}
        self._vocabulary: TokenVocabulary | None = None  # read at the first forced start (~0.3 s)
        self.name = f"llama.cpp:{path.name}"
        self.template = template
        self.context_tokens = context_tokens
        self.reuse_chunk_tokens = 0  # see ModelConfig.reuse_chunk_tokens

    @classmethod
    def open(cls, path: Path, context_tokens: int = 4096, threads: int = 0,
             gpu_layers: int = 0, reuse_chunk_tokens: int = 0,
             prompt_cache: tuple[Path, int] | None = None, flash_attention: bool = False,
             decode: int = 0) -> LlamaBackend | Failure:
        checked = check_gguf(path)
        if isinstance(checked, Failure):
            return checked
        try:
            from llama_cpp import Llama
        except ImportError as error:
            return Failure(FailureKind.BACKEND_MISSING, f"llama-cpp-python is not installed ({error})")
        try:
            states = (StateFolder(folder_for(prompt_cache[0], path, context_tokens, gpu_layers, flash_attention),
                                  prompt_cache[1]) if prompt_cache else None)
            fewest, most = decode_counts(threads, decode)
            # (with_chunk_reuse reads llama.cpp's bindings from its class's module: Llama's, so it goes first.)
            llama = with_decode_threads(with_prompt_states(with_chunk_reuse(Llama, reuse_chunk_tokens), states),
                                        fewest, most)(
                model_path=str(path), n_ctx=context_tokens, n_threads=most, n_threads_batch=prompt_threads(threads),
                n_gpu_layers=gpu_layers, flash_attn=flash_attention, use_mmap=maps_the_file(), verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as error:
            return Failure(FailureKind.MODEL_LOAD, f"llama.cpp cannot load {path.name}: {error}")
        metadata = getattr(llama, "metadata", {}) or {}
        template = template_for(path.name, str(metadata.get("general.name", "")),
                                str(metadata.get("general.basename", "")))
        backend = cls(llama, path, template, context_tokens)
        backend.reuse_chunk_tokens = reuse_chunk_tokens
        return backend

    def _tokens(self, text: str) -> list[int]:
        return self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def count(self, text: str) -> int | Failure:
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        with self._lock:
            value = len(self._tokens(text))
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[text] = value
        return value

    def generate(self, request: GenerationRequest) -> Generation | Failure:
        started = time.perf_counter()
        deadline = started + request.deadline_s
        with self._lock:
            prompt_tokens = self._tokens(request.prompt)
            overflow = window_overflow(len(prompt_tokens), request.max_tokens, self.context_tokens)
            if overflow is not None:
                return overflow
            previous = list(self._llama._input_ids[: self._llama.n_tokens])
            cached = reused_tokens(previous, prompt_tokens, 0 if request.prefix_only else self.reuse_chunk_tokens)
            if hasattr(self._llama, "prefix_only"):  # a class keeping moved runs (kv_reuse)
                self._llama.prefix_only = request.prefix_only
            pieces: list[str] = []
            finish = "length"
            count = 0
            recorder = ChosenTokenLogprobs()  # the answer's confidence, without logits_all
            # The constraint first: the recorder then reads each held step's pick among the allowed tokens.
            processors = [*self._start_constraint(request.forced_start, len(prompt_tokens)), recorder]
            try:
                stream = self._llama.create_completion(
                    prompt_tokens, max_tokens=request.max_tokens, temperature=0.0, top_k=1,
                    stop=list(request.stop) or None, stream=True, logits_processor=processors,
                )
                for chunk in stream:
                    choice = chunk["choices"][0]
                    # The stream ends with a chunk holding the finish reason and no text: no token.
                    if choice.get("text") or not choice.get("finish_reason"):
                        pieces.append(choice.get("text", ""))
                        count += 1
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
                        break
                    stopped = early_stop(request, "".join(pieces), deadline)
                    if stopped is not None:
                        finish = stopped
                        break
                stream.close()
            except (RuntimeError, ValueError) as error:
                return Failure(FailureKind.GENERATION, f"llama.cpp failed while generating: {error}")
            # With prompt states (repomem.backends.prompt_states) the model also loaded some.
            cached = max(cached, getattr(self._llama, "last_prompt_reused", 0))
        return Generation(
            text="".join(pieces), prompt_tokens=len(prompt_tokens), completion_tokens=count,
            cached_tokens=min(cached, max(len(prompt_tokens) - 1, 0)), finish_reason=finish,
            seconds=time.perf_counter() - started, mean_logprob=mean_of(recorder.values),
        )

    def _start_constraint(self, start: str, prompt_tokens: int) -> list[StartConstraint]:
        if not start:
            return []
        if self._vocabulary is None:
            self._vocabulary = TokenVocabulary.of_llama(self._llama)
        return [StartConstraint(self._vocabulary, start.encode("utf-8"), prompt_tokens)]

    def close(self) -> None:
        closer = getattr(self._llama, "close", None)
        if closer is not None:
            closer()
