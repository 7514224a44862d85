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
from collections.abc import Sequence

import numpy as np

# What a step's allowed tokens get added to their logits through an OpenAI-style `logit_bias`
# (the API's bound): a 0.5B model's logits span ~60 nats, so the best allowed token wins greedy
# decoding, and its log-probability over the biased logits is the one among the allowed tokens.
ALLOWED_BIAS = 100.0


class TokenVocabulary:
    """A model's tokens by their bytes, to find those consistent with a text to start with."""

    def __init__(self, pieces: Sequence[bytes]):
        # pieces[i]: the bytes token i decodes to; empty for control tokens (end of text, FIM
        # sentinels), which never start a word.
        self.pieces = list(pieces)
        order = sorted((piece, index) for index, piece in enumerate(pieces) if piece)
        self._sorted = [piece for piece, _ in order]
        self._ids = [index for _, index in order]
        self._by_piece: dict[bytes, list[int]] = {}
        for piece, index in order:
            self._by_piece.setdefault(piece, []).append(index)

    @classmethod
    def of_llama(cls, llama) -> TokenVocabulary:
        """The vocabulary of a llama_cpp.Llama (a vocabulary-only one will do): ~0.3 s for 151k tokens."""
        return cls([llama.detokenize([index], special=False) for index in range(llama.n_vocab())])

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
            found.extend(self._by_piece.get(rest[:end], ()))
        return sorted(found)


class StartConstraint:
    """A llama-cpp-python logits processor that allows, until the generated tokens spell out
    `start` (or more), only the tokens consistent with what is left of it; then changes nothing.
    Put it before any processor that reads the logits it leaves (the confidence recorder)."""

    def __init__(self, vocabulary: TokenVocabulary, start: bytes, prompt_tokens: int):
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
        allowed = self.allowed(input_ids[self._prompt_tokens:])
        if not allowed:
            return scores
        held = np.full_like(scores, -np.inf)
        held[allowed] = scores[allowed]
        return held


class LogitBias:
    """An OpenAI-style `logit_bias` as one vectorised llama-cpp-python logits processor (the
    library's own loops over the map in Python, and runs after the processors a caller gives)."""

    def __init__(self, bias: dict[int, float]):
        self._ids = np.fromiter(bias.keys(), dtype=np.int64, count=len(bias))
        self._values = np.fromiter(bias.values(), dtype=np.float32, count=len(bias))

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        biased = scores.copy()
        inside = self._ids < biased.shape[0]
        biased[self._ids[inside]] += self._values[inside]
        return biased
