"""How many threads llama.cpp reads a prompt with and writes tokens with, on the CPU.

Reading a prompt is one large batch a step, compute-bound, and every core helps. Writing a token is
one small step, at which llama.cpp's threads meet after every layer, spinning while they wait. On
a quiet machine every core helps there too (the 0.5B on two cores: 52 ms a token on two threads,
107 on one); but when another process takes a core (the language server's own index work at a
keystroke, the editor, a build), one thread sits descheduled while the other spins on it: 391 ms
a token on two threads against 106 on one (docs/editors.md#interactive-latency). Neither count is
right for both, and which one a machine is in changes from second to second, so by default the
tokens are written on whichever of the two counts wrote the last ones faster (`DecodeThreads`),
trying the other now and then; `model.decode_threads` fixes the count instead.

The answers stay the same: without fused attention (the command line's and the evaluation's)
llama.cpp's logits are bit for bit the same on one thread as on two (measured: 40 of 40 tokens).
With it (`model.flash_attention`, the editor's) the attention's sums are split by thread and
differ by up to 0.5 in a logit, so there, as that setting says, a near tie may go the other way.
"""

from __future__ import annotations

import os
import time

# Every this many tokens written, one is written with the count that is not the faster so far: it
# may have become the faster one (a process beside started or ended). Costs ~1/16 of the gap
# between the two counts on a quiet machine (~3 ms a token for the 0.5B on two cores).
TRY_OTHER_EVERY = 16
# Weight of the newest token's time in each count's running mean.
NEWEST_WEIGHT = 0.3


def prompt_threads(threads: int) -> int:
    """Threads reading a prompt: `threads`, 0 = every core."""
    return threads or (os.cpu_count() or 1)


def decode_counts(threads: int, decode: int) -> tuple[int, int]:
    """The (fewest, most) threads writing tokens: `decode` both when set, else one fewer than read
    the prompt (at least one) and as many."""
    if decode:
        return decode, decode
    most = prompt_threads(threads)
    return max(1, most - 1), most


class DecodeThreads:
    """Which thread count writes the next token: the faster of `fewest` and `most` by their
    recent times, each tried first, the other again every TRY_OTHER_EVERY tokens. A count's time
    is a running mean while it writes token after token; a count taken up again starts from its
    newest time (its older ones are from another state of the machine)."""

    def __init__(self, fewest: int, most: int):
        self.counts = (most, fewest)  # most first: a quiet machine's faster
        self.mean_s: dict[int, float] = {}
        self.written = 0
        self._last = 0  # the count that wrote the last token

    def next(self) -> int:
        untried = [count for count in self.counts if count not in self.mean_s]
        if untried:
            return untried[0]
        faster = min(self.counts, key=lambda count: self.mean_s[count])
        if self.written % TRY_OTHER_EVERY == TRY_OTHER_EVERY - 1:
            return next(count for count in self.counts if count != faster)
        return faster

    def record(self, count: int, seconds: float) -> None:
        self.written += 1
        mean = self.mean_s.get(count)
        self.mean_s[count] = seconds if mean is None or count != self._last else mean + NEWEST_WEIGHT * (seconds - mean)
        self._last = count


def with_decode_threads(llama_class: type, fewest: int, most: int) -> type:
    """`llama_class` (llama_cpp.Llama) writing each token with the count `DecodeThreads` chooses;
    the class itself when the two are one count (then its `n_threads` is that count)."""
    if fewest >= most:
        return llama_class

    class DecodeThreadsLlama(llama_class):
        def __init__(self, *args, **settings):
            super().__init__(*args, **settings)
            self._decode_threads = DecodeThreads(fewest, most)
            self._decode_count = self.n_threads

        def eval(self, tokens):
            if len(tokens) != 1:  # a prompt's batch: n_threads_batch, unchanged
                return super().eval(tokens)
            count = self._decode_threads.next()
            if count != self._decode_count:
                self._ctx.set_n_threads(count, self.n_threads_batch)
                self._decode_count = count
            started = time.perf_counter()
            try:
                return super().eval(tokens)
            finally:
                self._decode_threads.record(count, time.perf_counter() - started)

    return DecodeThreadsLlama
