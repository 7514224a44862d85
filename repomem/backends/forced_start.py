"""Generation whose first tokens are held to a given text: token healing inside a word.

After a partly typed name (`validated_value = se`) a prompt that ends mid-word steers a BPE model
off its usual tokens: the tokenizer cuts `se` where it never cuts `self`, and the 0.5B model goes
on as if the word were complete (`._call_and_store(`, dropping `lf`). The engine instead ends the
prompt before the word (and the space glued to it) and asks the backend to start its answer with
that text: each step may pick only a token that is a prefix of what is left of it or that starts
with all of it, so the model chooses how the word ends (`self`, `self_`, `setattr`) with the
tokens it was trained on. 28 cursors after half a typed identifier (RepoEval line tasks): 2 right
lines without, 14 with.

Only the standard library and numpy are imported here: the model's child process
(repomem.backends.llama_child) uses it and must not load repomem's engine.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from urllib.parse import quote, unquote

import numpy as np

PAUSE_EVERY_TOKENS = 4096  # TokenVocabulary.of_llama: ~10 ms of its work between two pauses
# How a client of the model's child asks for an answer that starts with a text (a completion
# request's GenerationRequest.forced_start): this header, the text's UTF-8 percent-encoded, which
# the child's server hands to the model as its `forced_start` for that answer (`with_forced_starts`).
FORCED_START_HEADER = "X-Repomem-Forced-Start"


def start_header(start: str) -> dict[str, str]:
    """The request header asking the child to start its answer with `start` (none for "")."""
    return {FORCED_START_HEADER: quote(start, safe="")} if start else {}


def start_of_header(value: str | None) -> str:
    """The text a FORCED_START_HEADER asks for ("" without one)."""
    return unquote(value, errors="strict") if value else ""


class TokenVocabulary:
    """A model's tokens by their bytes, to find those consistent with a text to start with."""

    def __init__(self, pieces: Sequence[bytes]):
        # pieces[i]: the bytes token i decodes to; empty for control tokens (end of text, FIM
        # sentinels), which never start a word.
        self.pieces = list(pieces)
        # Ids of the non-empty pieces in the pieces' byte order (ties by id): one search finds
        # the pieces that start with a text, one per length the pieces that a text starts with.
        self._ids = sorted((index for index, piece in enumerate(self.pieces) if piece), key=self.pieces.__getitem__)
        self._sorted = [self.pieces[index] for index in self._ids]

    @classmethod
    def of_llama(cls, llama, pause: Callable[[], None] | None = None) -> TokenVocabulary:
        """The vocabulary of a llama_cpp.Llama (a vocabulary-only one will do): ~0.35 s for 151k
        tokens. `pause` is called between blocks of tokens (a builder that yields to generations).
        llama.cpp's own token_to_piece with a buffer that fits every token: llama-cpp-python's
        detokenize reads 32 bytes at most and gives b"" for the longer tokens (runs of spaces or
        dashes, 240 of the Qwen vocabulary's)."""
        import ctypes

        import llama_cpp

        vocabulary = llama_cpp.llama_model_get_vocab(llama.model)
        size = 256
        buffer = ctypes.create_string_buffer(size)
        pieces: list[bytes] = []
        for index in range(llama.n_vocab()):
            if pause is not None and index % PAUSE_EVERY_TOKENS == 0:
                pause()
            length = llama_cpp.llama_token_to_piece(vocabulary, index, buffer, size, 0, False)
            if length < 0:  # -length bytes needed
                size = -length
                buffer = ctypes.create_string_buffer(size)
                length = llama_cpp.llama_token_to_piece(vocabulary, index, buffer, size, 0, False)
            pieces.append(buffer.raw[:length])
        return cls(pieces)

    def consistent_with(self, rest: bytes) -> list[int]:
        """Ids of the tokens that either start with all of `rest` or are a proper prefix of it,
        sorted: one of them must come next for the answer to start with `rest`."""
        if not rest:
            return []
        found: list[int] = []
        at = bisect.bisect_left(self._sorted, rest)
        while at < len(self._sorted) and self._sorted[at].startswith(rest):
            found.append(self._ids[at])
            at += 1
        for end in range(1, len(rest)):
            prefix = rest[:end]
            at = bisect.bisect_left(self._sorted, prefix)
            while at < len(self._sorted) and self._sorted[at] == prefix:
                found.append(self._ids[at])
                at += 1
        return sorted(found)


class StartConstraint:
    """A llama-cpp-python logits processor that allows, until the generated tokens spell out
    `start` (or more), only the tokens consistent with what is left of it; then changes nothing.
    Put it before any processor that reads the logits it leaves (the confidence recorder).
    `prompt_tokens` None: the prompt is what its first call sees (llama-cpp-python calls a processor
    first for the token after the prompt)."""

    def __init__(self, vocabulary: TokenVocabulary, start: bytes, prompt_tokens: int | None):
        self._vocabulary = vocabulary
        self._start = start
        self._prompt_tokens = prompt_tokens

    def allowed(self, generated: Sequence[int]) -> list[int]:
        """The ids the next token may take after the `generated` ones; [] when nothing is held
        (the start is written, or no token goes on with it: every byte is a token in a real
        vocabulary). Ids past the vocabulary's (a model's padded rows) spell nothing."""
        pieces = self._vocabulary.pieces
        written = b"".join(pieces[int(token)] if int(token) < len(pieces) else b"" for token in generated)
        if len(written) >= len(self._start):
            return []
        return self._vocabulary.consistent_with(self._start[len(written):])

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        # input_ids: (prompt + generated,) token ids; scores: (n_vocab,) float32 logits.
        if self._prompt_tokens is None:
            self._prompt_tokens = int(input_ids.shape[0])
        allowed = self.allowed(input_ids[self._prompt_tokens:])
        if not allowed:
            return scores
        held = np.full_like(scores, -np.inf)
        held[allowed] = scores[allowed]
        return held


def with_forced_starts(llama_class: type) -> type:
    """`llama_class` (llama_cpp.Llama) whose `create_completion` starts its answer with the
    instance's `forced_start` when set (the child's server sets it per request from
    FORCED_START_HEADER), by a StartConstraint put before the caller's logits processors; the
    vocabulary comes from the instance's `start_vocabulary()`, which the child sets once loaded."""

    class ForcedStartLlama(llama_class):
        forced_start = ""

        def create_completion(self, *args, **settings):
            if self.forced_start:
                held = StartConstraint(self.start_vocabulary(), self.forced_start.encode("utf-8"), None)
                settings["logits_processor"] = [held, *(settings.get("logits_processor") or ())]
            return super().create_completion(*args, **settings)

    return ForcedStartLlama
