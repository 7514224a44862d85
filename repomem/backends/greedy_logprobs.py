"""The log-probability of each token greedy decoding picks, from llama.cpp without `logits_all`.

llama-cpp-python computes per-token log-probabilities only for a model loaded with `logits_all`,
which makes llama.cpp project every prompt position onto the 151k-token vocabulary (on a 2-core
machine a cold 1,800-token prompt took 27.1 s instead of 18.6 s, and +1.65 GB). The answer's
confidence needs only the generated positions, whose logits llama.cpp computes anyway to pick the
next token: a logits processor sees them at each step, and with greedy decoding and no penalties
the token picked is their argmax, so its log-probability is `max - logsumexp(logits)`.

Only numpy is imported here: the model's child process (repomem.backends.llama_child) uses it and
must not load repomem's engine.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

# The llama-cpp-python server's per-request defaults are not greedy (repeat_penalty 1.1 over the
# last 64 generated tokens: `0, 0, 0, 0,` stops after two zeros); the client of the embedded
# model's child sends these with every request so that its answers are the greedy ones the
# in-process model and the GPU backends give.
GREEDY_SAMPLING = {"repeat_penalty": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0.0}


class ChosenTokenLogprobs:
    """A llama-cpp-python logits processor that records, at each sampling step, the natural-log
    probability of the most likely token (the one greedy decoding picks) and changes nothing."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        # scores: (n_vocab,) float32 logits of the position being sampled.
        top = float(scores.max())
        total = float(np.exp(scores - top).sum(dtype=np.float64))
        self.values.append(-float(np.log(total)))
        return scores


def is_plain_greedy(settings: dict) -> bool:
    """Whether a completion call's settings pick each token as the logits' argmax: temperature 0
    and no penalty that would move the pick away from it (llama-cpp-python's own defaults)."""
    return (settings.get("temperature", 0.8) == 0.0 and settings.get("repeat_penalty", 1.0) == 1.0
            and not settings.get("presence_penalty") and not settings.get("frequency_penalty")
            and not settings.get("logit_bias") and settings.get("grammar") is None)


def annotated_chunks(chunks: Iterator[dict], recorder: ChosenTokenLogprobs) -> Iterator[dict]:
    """A completion stream with each chunk carrying the log-probabilities recorded since the
    previous one, as OpenAI's `logprobs.token_logprobs` (llama.cpp may hold a token back while it
    checks the stop strings, so a chunk's values and its text need not pair one to one)."""
    given = 0
    try:
        for chunk in chunks:
            values, given = recorder.values[given:], len(recorder.values)
            for choice in chunk.get("choices") or ():
                choice["logprobs"] = {"token_logprobs": values, "tokens": None, "top_logprobs": None,
                                      "text_offset": None}
            yield chunk
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()  # a reader that stops early ends llama.cpp's generation too
