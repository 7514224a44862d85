"""How fast llama.cpp reads a prompt and writes tokens with each of the embedded model's layer files
on this machine: the figures `model.embedded_layers = "auto"` chooses a file by
(repomem.backends.bf16_layers).

Which file is faster is the CPU's answer, not its flags': on a 2-core AMD EPYC with AVX512_BF16
the layers widened to bfloat16 read a cold prompt 1.53x faster than the shipped 4- to 8-bit blocks
and decode 1.3x slower; on a 2-core Intel Xeon with the same flag they read it no faster and
decode 1.4x slower (docs/editors.md#interactive-latency). So both files are timed here once, in
turns, under the same load, with fused attention (the editor's setting, where the time is waited
for), the same tokens for each.
"""

from __future__ import annotations

import logging
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from repomem.backends.cpu_threads import prompt_threads
from repomem.failures import Failure, FailureKind

SAMPLE_PROMPT_TOKENS = 512  # one prompt read cold: long enough that the matrices, not set-up, dominate
SAMPLE_DECODE_TOKENS = 8  # then written one at a time
WARM_UP_TOKENS = 16  # read first and dropped: pages the mapped weights in
# A first completion in an editor, what the choice weighs (docs/editors.md: ~1,000-token prompts,
# one-line answers of ~5-20 tokens).
REFERENCE_PROMPT_TOKENS = 1000
REFERENCE_ANSWER_TOKENS = 16


@dataclass(frozen=True)
class LayerTiming:
    prompt_ms_per_token: float  # reading a cold prompt, per token
    decode_ms_per_token: float  # writing one token after it

    def first_answer_s(self) -> float:
        """The model's time for a first completion: a cold 1,000-token prompt read, 16 tokens written."""
        return (REFERENCE_PROMPT_TOKENS * self.prompt_ms_per_token
                + REFERENCE_ANSWER_TOKENS * self.decode_ms_per_token) / 1000.0

    def as_record(self) -> dict[str, float]:
        return {name: round(value, 3) for name, value in asdict(self).items()}


def sample_text() -> str:
    """Code to time on: this package's own sources (the same bytes for every file timed)."""
    folder = Path(__file__).resolve().parent
    return "\n".join(path.read_text(encoding="utf-8") for path in sorted(folder.glob("*.py")))


def time_files(paths: list[Path], threads: int = 0, flash_attention: bool = True) -> list[LayerTiming] | Failure:
    """Each file's LayerTiming, all loaded at once and timed in turns (prompt, prompt, ..., then
    decoding), the same token ids for each: the files are one model's weights in different types,
    so they share a vocabulary. `threads`: 0 = every core, as the embedded model runs."""
    try:
        import llama_cpp
    except ImportError as error:
        return Failure(FailureKind.BACKEND_MISSING, f"llama-cpp-python is not installed ({error})")
    workers = prompt_threads(threads)  # a quiet machine's counts, as the embedded model runs there
    context = WARM_UP_TOKENS + SAMPLE_PROMPT_TOKENS + SAMPLE_DECODE_TOKENS + 16
    llama_logger = logging.getLogger("llama-cpp-python")
    level = llama_logger.level
    llama_logger.setLevel(logging.ERROR)
    models = []
    try:
        for path in paths:
            try:
                models.append(llama_cpp.Llama(model_path=str(path), n_ctx=context, n_threads=workers,
                                              n_threads_batch=workers, flash_attn=flash_attention, verbose=False))
            except (ValueError, RuntimeError, OSError) as error:
                return Failure(FailureKind.MODEL_LOAD, f"llama.cpp could not load {path.name} to time it ({error})")
        tokens = models[0].tokenize(sample_text().encode("utf-8"), add_bos=False)
        needed = SAMPLE_PROMPT_TOKENS + SAMPLE_DECODE_TOKENS
        if len(tokens) < needed:
            tokens = tokens * (needed // max(1, len(tokens)) + 1)
        prompt, answer = tokens[:SAMPLE_PROMPT_TOKENS], tokens[SAMPLE_PROMPT_TOKENS:needed]
        for model in models:
            model.eval(prompt[:WARM_UP_TOKENS])
            model.reset()
        prompt_s = []
        for model in models:
            started = time.perf_counter()
            model.eval(prompt)
            prompt_s.append(time.perf_counter() - started)
        decode_s = []
        for model in models:
            steps = []
            for token in answer:  # one at a time, as a completion writes them (which token is no matter)
                started = time.perf_counter()
                model.eval([token])
                steps.append(time.perf_counter() - started)
            # The median step: one token's stall (the disk writing a file back meanwhile) is no rate.
            decode_s.append(statistics.median(steps) * len(steps))
    finally:
        for model in models:
            model.close()
        llama_logger.setLevel(level)
    return [LayerTiming(1000.0 * read / len(prompt), 1000.0 * written / len(answer))
            for read, written in zip(prompt_s, decode_s, strict=True)]
