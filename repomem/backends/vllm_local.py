"""Adapter for vLLM in process (`vllm.LLM`): batched greedy generation on a GPU for evaluation
(`generate_batch`, fed by repomem.backends.batching when `eval run --workers N`).

Imported only when asked for; without vllm or a GPU `open` returns a Failure saying so.
Automatic prefix caching is on, so prompts sharing their beginning share KV blocks.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Sequence

from repomem.backends.base import Generation, GenerationRequest
from repomem.backends.templates import template_for
from repomem.failures import Failure, FailureKind


class VLLMBackend:
    def __init__(self, llm, sampling_type, model: str, context_tokens: int):
        self._llm = llm
        self._sampling_type = sampling_type
        self._tokenizer = llm.get_tokenizer()
        self.name = f"vllm:{model}"
        self.template = template_for(model)
        self.context_tokens = context_tokens

    @classmethod
    def open(cls, model: str, context_tokens: int = 4096, tensor_parallel: int = 1) -> VLLMBackend | Failure:
        try:
            import torch
            import vllm
        except ImportError as error:
            return Failure(FailureKind.BACKEND_MISSING,
                           f"vllm is not installed ({error}); pip install vllm on a GPU machine")
        if not torch.cuda.is_available():
            return Failure(FailureKind.BACKEND_MISSING, "vllm needs a CUDA GPU and none is visible")
        try:
            llm = vllm.LLM(model=model, max_model_len=context_tokens, enable_prefix_caching=True,
                           tensor_parallel_size=tensor_parallel)
        except Exception as error:  # vLLM raises many types while loading; report them as one value
            return Failure(FailureKind.MODEL_LOAD, f"vllm cannot load {model}: {error}")
        return cls(llm, vllm.SamplingParams, model, context_tokens)

    def count(self, text: str) -> int | Failure:
        if self._tokenizer is None:
            return Failure(FailureKind.BACKEND_CLOSED, "the vLLM engine was closed")
        return len(self._tokenizer.encode(text, add_special_tokens=False))

    def generate(self, request: GenerationRequest) -> Generation | Failure:
        return self.generate_batch([request])[0]

    def generate_batch(self, requests: Sequence[GenerationRequest]) -> list[Generation | Failure]:
        """Greedy generations of many prompts in one `LLM.generate` call (vLLM schedules them
        together). `enough`, cancel and the deadline are not polled inside a batch: the scorer
        reads the same lines either way, greedy decoding being deterministic per sequence."""
        if self._llm is None:
            return [Failure(FailureKind.BACKEND_CLOSED, "the vLLM engine was closed") for _ in requests]
        started = time.perf_counter()
        # logprobs=0: the picked token's log-probability only (vLLM then fills cumulative_logprob).
        params = [self._sampling_type(temperature=0.0, max_tokens=r.max_tokens, stop=list(r.stop) or None,
                                      logprobs=0)
                  for r in requests]
        try:
            outputs = self._llm.generate([r.prompt for r in requests], params, use_tqdm=False)
        except Exception as error:  # vLLM raises many types; one value for the whole batch  # noqa: BLE001
            return [Failure(FailureKind.GENERATION, f"vllm failed while generating: {error}") for _ in requests]
        seconds = time.perf_counter() - started
        answers: list[Generation | Failure] = []
        for output in outputs:
            choice = output.outputs[0]
            answers.append(Generation(
                text=choice.text, prompt_tokens=len(output.prompt_token_ids), completion_tokens=len(choice.token_ids),
                cached_tokens=int(getattr(output, "num_cached_tokens", 0) or 0),
                finish_reason=choice.finish_reason or "stop", seconds=seconds,
                mean_logprob=_mean_logprob(choice),
            ))
        return answers

    def close(self) -> None:
        """Drop the engine and hand its GPU memory back (vLLM keeps it until collected)."""
        if self._llm is None:
            return
        self._llm = None
        self._tokenizer = None
        gc.collect()
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()


def _mean_logprob(choice) -> float | None:
    """The answer's log-probability per token, when vLLM computed it (it does when logprobs is set)."""
    value = getattr(choice, "cumulative_logprob", None)
    tokens = len(getattr(choice, "token_ids", ()) or ())
    return float(value) / tokens if isinstance(value, int | float) and tokens else None
