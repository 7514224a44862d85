"""The embedded model out of process: a GGUF file served by llama-cpp-python's OpenAI-compatible
server in a child process that repomem starts, watches and stops.

Why a child (docs/design.md section 5): a crash inside llama.cpp (a damaged model, a GPU fault) ends
the child, not the CLI or the language server, which reports it and starts a new one; and
llama.cpp's CUDA build and numba's LLVM segfault when they share a process, whichever loads first.
The child listens on 127.0.0.1 at a free port and is reached through the same HTTP client as a
vLLM server. It keeps llama.cpp's prompt cache: the KV cache of the previous request is reused for
the longest common prefix of the next prompt.
"""

from __future__ import annotations

import os
import queue
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path

from repomem.backends.base import Generation, GenerationRequest, common_prefix, window_overflow
from repomem.backends.cpu_threads import prompt_threads
from repomem.backends.greedy_logprobs import GREEDY_SAMPLING
from repomem.backends.kv_reuse import reused_tokens
from repomem.backends.llama_child import (
    COUNT_MANY_PATH,
    KEY_VARIABLE,
    PORT_LINE,
    TOKENIZE_PATH,
    VOCABULARY_PATH,
)
from repomem.backends.models import check_gguf, gguf_names
from repomem.backends.openai_http import OpenAIBackend
from repomem.backends.templates import template_for
from repomem.backends.token_floor import TokenFloor, token_floor
from repomem.backends.token_pieces import PieceCounts, TokenPieces, token_pieces
from repomem.config import CompletionConfig
from repomem.failures import Failure, FailureKind

# Seconds for the child to load the model and answer when the caller names no deadline (the
# factory passes completion.deadline_s, which bounds a model's start as it bounds a generation).
START_DEADLINE_S = CompletionConfig().deadline_s
POLL_S = 0.1  # seconds between readiness checks while it starts
STOP_GRACE_S = 5.0  # seconds between SIGTERM and SIGKILL when closing
LOG_TAIL_LINES = 40  # lines of the child's stderr kept to explain a crash


def timed_out(deadline_s: float) -> str:
    """What a user reads when the embedded model ran past a generation's deadline."""
    return f"the embedded model did not answer within {deadline_s:g} s (completion.deadline_s)"


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


@dataclass
class StartedAhead:
    """A model child started before it is needed (the CLI starts it before the index step, which
    then runs while the model loads), not yet waited for: no thread of this process watches it
    yet, so the index step may still fork its parse workers. `LlamaProcessBackend.open` takes it
    when asked for the very same command; `discard` stops one nobody took."""

    command: list[str]
    process: subprocess.Popen
    key: str
    started: float  # time.perf_counter() at the start
    taken: bool = False

    def discard(self) -> None:
        if not self.taken:
            self.taken = True
            self.process.kill()
            self.process.wait()


def _command(path: Path, context_tokens: int, threads: int, gpu_layers: int, reuse_chunk_tokens: int,
             prompt_cache: tuple[Path, int] | None, flash_attention: bool = False, decode: int = 0) -> list[str]:
    return [
        # -P: the working folder (the temporary one, where any local user writes) is not on its import path
        sys.executable, "-P", "-m", "repomem.backends.llama_child", "--model", str(path), "--alias", path.name,
        "--context", str(context_tokens), "--threads", str(prompt_threads(threads)),
        "--decode-threads", str(decode),  # 0: the faster of two counts, token by token (cpu_threads)
        "--gpu-layers", str(gpu_layers),  # -1 = every layer on the GPU; a CPU-only build ignores it
        "--reuse-chunk-tokens", str(reuse_chunk_tokens),
        *(("--prompt-states", str(prompt_cache[0]), "--prompt-states-bytes", str(prompt_cache[1]))
          if prompt_cache else ()),
        *(("--flash-attention",) if flash_attention else ()),
    ]


def _spawn(command: list[str]) -> StartedAhead | Failure:
    key = secrets.token_urlsafe(24)  # only repomem may use the child, though it listens on loopback
    environment = {**os.environ, "REPOMEM_PARENT_PID": str(os.getpid()), KEY_VARIABLE: key}
    started = time.perf_counter()
    try:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=environment, cwd=tempfile.gettempdir())
    except OSError as error:
        return Failure(FailureKind.MODEL_LOAD, f"cannot start the model process: {error.strerror or error}")
    return StartedAhead(command, process, key, started)


def start_ahead(path: Path, context_tokens: int = 4096, threads: int = 0, gpu_layers: int = -1,
                reuse_chunk_tokens: int = 0, prompt_cache: tuple[Path, int] | None = None,
                flash_attention: bool = False, decode: int = 0) -> StartedAhead | None:
    """The child for `path` started now, to be taken by `LlamaProcessBackend.open` with the same
    settings; None when it cannot start (open then says why)."""
    started = _spawn(_command(path, context_tokens, threads, gpu_layers, reuse_chunk_tokens, prompt_cache,
                              flash_attention, decode))
    return None if isinstance(started, Failure) else started


class LlamaProcessBackend:
    """A GGUF model in a child llama.cpp server. Thread-safe: the child answers one request at a
    time, so concurrent callers queue there."""

    constrains_start = True  # GenerationRequest.forced_start, held by the child's model (_generate_forced)

    def __init__(self, process: subprocess.Popen, client: OpenAIBackend, path: Path, start_seconds: float,
                 log_tail: deque[str]):
        self._process = process
        self._client = client
        self._log_tail = log_tail
        self._lock = threading.Lock()
        self._previous: list[int] = []  # token ids of the last prompt: what the child's cache holds
        # The last prompt's text with the answer written after it, and the answer's tokens: the
        # child's cache holds all of them but the last (a continued prompt, completion.line_below).
        self._written: tuple[str, int] = ("", 0)
        self.path = path
        self.start_seconds = start_seconds  # child start + model load, seconds
        self.prefill_chunk_tokens = 0  # see ModelConfig.prefill_chunk_tokens
        self.reuse_chunk_tokens = 0  # the child's, see ModelConfig.reuse_chunk_tokens
        self.name = f"llama.cpp:{path.name}"
        self.template = template_for(path.name, *gguf_names(path))
        self.context_tokens = client.context_tokens
        # What the child says of its vocabulary, asked at the first count: [(floor, cutter) or Nones].
        self._vocabulary: list[tuple[TokenFloor | None, TokenPieces | None]] = []
        self._piece_counts = PieceCounts()

    @property
    def pid(self) -> int:
        return self._process.pid

    @classmethod
    def open(cls, path: Path, context_tokens: int = 4096, threads: int = 0, gpu_layers: int = -1,
             start_deadline_s: float = START_DEADLINE_S,
             prefill_chunk_tokens: int = 0, reuse_chunk_tokens: int = 0,
             prompt_cache: tuple[Path, int] | None = None,
             ahead: StartedAhead | None = None, flash_attention: bool = False,
             decode: int = 0) -> LlamaProcessBackend | Failure:
        """Start the child (or take `ahead`, started with the same command) and wait until it
        answers."""
        checked = check_gguf(path)
        if isinstance(checked, Failure):
            if ahead is not None:
                ahead.discard()
            return checked
        command = _command(path, context_tokens, threads, gpu_layers, reuse_chunk_tokens, prompt_cache,
                           flash_attention, decode)
        if ahead is not None and not ahead.taken and ahead.command == command:
            ahead.taken = True
            spawned: StartedAhead | Failure = ahead
        else:
            if ahead is not None:
                ahead.discard()
            spawned = _spawn(command)
        if isinstance(spawned, Failure):
            return spawned
        process, key, started = spawned.process, spawned.key, spawned.started
        log_tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        ports: queue.SimpleQueue[int] = queue.SimpleQueue()
        threading.Thread(target=_drain, args=(process, log_tail), name="llama-child-log", daemon=True).start()
        threading.Thread(target=_read_port, args=(process, ports), name="llama-child-port", daemon=True).start()
        deadline = started + start_deadline_s
        port: int | None = None
        client: OpenAIBackend | Failure | None = None
        while True:
            code = process.poll()
            if code is not None:
                process.wait()
                return Failure(FailureKind.MODEL_LOAD, f"the model process exited while loading {path.name} "
                                                       f"({_exit_reason(code)}){_last_line(log_tail)}")
            if port is None:
                try:
                    port = ports.get(timeout=POLL_S)
                except queue.Empty:
                    pass
            if port is not None:
                client = OpenAIBackend.connect(f"http://127.0.0.1:{port}", model=path.name, api_key=key,
                                               deadline_s=1.0, context_tokens=context_tokens,
                                               tokenize_path=TOKENIZE_PATH, sampling=GREEDY_SAMPLING)
                if not isinstance(client, Failure):
                    # Each prompt is checked against the child's window before it is sent
                    # (window_overflow): an empty stream is an interrupted one, not asked again.
                    client.fails_late = False
                    break
                time.sleep(POLL_S)
            if time.perf_counter() > deadline:
                process.kill()  # hung: nothing of it is worth a graceful stop (SIGTERM would wait on a stopped one)
                process.wait()
                return Failure(FailureKind.MODEL_LOAD,
                               f"the model process did not answer within {start_deadline_s:g} s "
                               "(completion.deadline_s)")
        backend = cls(process, client, path, time.perf_counter() - started, log_tail)
        backend.prefill_chunk_tokens = prefill_chunk_tokens
        backend.reuse_chunk_tokens = reuse_chunk_tokens
        return backend

    def _crashed(self) -> Failure | None:
        code = self._process.poll()
        if code is None:
            return None
        return Failure(FailureKind.MODEL_CRASHED, f"the model process stopped ({_exit_reason(code)})"
                                                  f"{_last_line(self._log_tail)}")

    def count(self, text: str) -> int | Failure:
        crashed = self._crashed()
        if crashed is not None:
            return crashed
        cutter = self._tokenizer_facts()[1]
        counted = self._client.count(text) if cutter is None else self._count_by_pieces(cutter, text)
        if isinstance(counted, Failure):
            return self._crashed() or counted
        return counted

    def warm_counts(self, texts: list[str]) -> None:
        """Count the pieces of `texts` not counted before, in one request: what a prompt's fit will
        count next (its blocks, the file on both sides of the cursor) then costs no request."""
        cutter = self._tokenizer_facts()[1]
        if cutter is None or self._crashed() is not None:
            return
        pieces = dict.fromkeys(piece for text in texts for piece in cutter.pieces(text)[1])
        self._counted_pieces(list(pieces))

    def _count_by_pieces(self, cutter: TokenPieces, text: str) -> int | Failure:
        """count(text) as the sum of its pieces' counts (backends.token_pieces); the pieces not
        counted before are counted in one request."""
        n_special, pieces = cutter.pieces(text)
        known = self._counted_pieces(list(dict.fromkeys(pieces)))
        if isinstance(known, Failure):
            return known
        return n_special + sum(known[piece] for piece in pieces)

    def _counted_pieces(self, unique: list[str]) -> dict[str, int] | Failure:
        """The count of each of `unique` (distinct pieces), those not known asked in one request."""
        known = self._piece_counts.known(unique)
        missing = [piece for piece in unique if piece not in known]
        if missing:
            answer = self._client.post(COUNT_MANY_PATH, {"texts": missing}, 30.0)
            if isinstance(answer, Failure):
                return answer
            counts = answer.get("counts")
            if not isinstance(counts, list) or len(counts) != len(missing) \
                    or not all(isinstance(n, int) and n >= 0 for n in counts):
                return Failure(FailureKind.BAD_RESPONSE, "the model process answered token counts that do not fit")
            fetched = dict(zip(missing, counts))
            self._piece_counts.keep(fetched)
            known.update(fetched)
        return known

    def count_floor(self, text: str) -> int:
        """A lower bound on count(text) that costs no tokenization (backends.token_floor); 0 when
        the model's tokenizer is not one it holds for, or the child could not say."""
        floor = self._tokenizer_facts()[0]
        return floor(text) if floor is not None else 0

    def _tokenizer_facts(self) -> tuple[TokenFloor | None, TokenPieces | None]:
        """What the child says of its tokenizer, asked once: the floor and the cutter it allows
        (None each when it does not allow them, or the child could not say)."""
        if not self._vocabulary:
            facts = self._client.post(VOCABULARY_PATH, {}, 10.0)
            made: tuple[TokenFloor | None, TokenPieces | None] = (None, None)
            special = facts.get("special") if isinstance(facts, dict) else None
            pre = facts.get("pre") if isinstance(facts, dict) else None
            strips = facts.get("strips", True) if isinstance(facts, dict) else True
            if isinstance(special, list) and all(isinstance(s, str) for s in special) and isinstance(pre, str):
                made = (token_floor(pre, special), token_pieces(pre, special, strips is not False))
            self._vocabulary.append(made)
        return self._vocabulary[0]

    def generate(self, request: GenerationRequest) -> Generation | Failure:
        if request.forced_start:
            return self._generate_forced(request)
        return self._generate_plain(request)

    def _generate_forced(self, request: GenerationRequest) -> Generation | Failure:
        """The answer's first tokens held to `request.forced_start` by the child's model itself
        (told it in a header: forced_start.with_forced_starts), the logits processor the
        in-process model uses: one request, where one a held token took three requests
        (docs/measurements.md, "A forced start in one request")."""
        answer = self._generate_plain(request)
        if isinstance(answer, Failure) or answer.finish_reason in ("cancelled", "deadline", "length") \
                or answer.text.startswith(request.forced_start):
            return answer
        return self._unforced(request)  # the child held nothing (no token went on with the start)

    def _unforced(self, request: GenerationRequest) -> Generation | Failure:
        """What to do when no token can go on with the forced start: the prompt with it, as an
        unconstrained backend would answer; the text still begins with it."""
        answer = self._generate_plain(replace(request, prompt=request.prompt + request.forced_start, forced_start=""))
        if isinstance(answer, Failure):
            return answer
        return replace(answer, text=request.forced_start + answer.text)

    def _generate_plain(self, request: GenerationRequest) -> Generation | Failure:
        crashed = self._crashed()
        if crashed is not None:
            return crashed
        tokens = self._client.tokens(request.prompt)
        if isinstance(tokens, Failure):
            return self._crashed() or tokens
        overflow = window_overflow(len(tokens), request.max_tokens, self.context_tokens)
        if overflow is not None:
            return overflow
        before: list[int] | None = None  # the cache before a chunked prefill changed it
        if request.cancel is not None and self.prefill_chunk_tokens > 0:
            with self._lock:
                before = self._previous
            stopped = self._prefill(request, tokens)
            if stopped is not None:
                return stopped
        answer = self._client.generate(request)
        if isinstance(answer, Failure):
            if answer.kind == FailureKind.BACKEND_TIMEOUT:  # its loopback address says nothing to a user
                return self._crashed() or Failure(FailureKind.BACKEND_TIMEOUT, timed_out(request.deadline_s))
            return self._crashed() or answer
        with self._lock:  # what the child's KV cache held before this prompt (one request at a time there)
            held = self._previous if before is None else before
            cached = reused_tokens(held, tokens, 0 if request.prefix_only else self.reuse_chunk_tokens)
            written_text, written_tokens = self._written
            if written_text and cached >= len(held) and request.prompt.startswith(written_text):
                cached += max(written_tokens - 1, 0)  # the last answer's tokens, as written, continued
            self._previous, self._written = tokens, (request.prompt + answer.text, answer.completion_tokens)
        if before is None:  # the child's own count also has the tokens it loaded (prompt_states)
            cached = max(cached, answer.cached_tokens)
        return Generation(answer.text, len(tokens), answer.completion_tokens, min(cached, max(len(tokens) - 1, 0)),
                          answer.finish_reason, answer.seconds, answer.mean_logprob)

    def _prefill(self, request: GenerationRequest, tokens: list[int]) -> Generation | Failure | None:
        """Evaluate the prompt's uncached part in chunks of about prefill_chunk_tokens, checking
        `request.cancel` between them; a cancelled Generation when it fired, else None (the
        child's KV cache then holds nearly the whole prompt, and generating costs its tail).

        Each chunk is the prompt's text up to a line end, asked for one token: the child reuses
        the cached prefix and evaluates only the rest. Cutting after a newline that starts a line
        keeps the chunk's tokens a prefix of the whole prompt's (BPE pre-tokenizers split there)."""
        assert request.cancel is not None
        started = time.perf_counter()
        with self._lock:
            cached = common_prefix(self._previous, tokens)
        chars_per_token = len(request.prompt) / max(len(tokens), 1)
        done = cached
        while len(tokens) - done > 2 * self.prefill_chunk_tokens:
            if request.cancel():
                return Generation("", len(tokens), 0, cached, "cancelled", time.perf_counter() - started)
            goal = int((done + self.prefill_chunk_tokens) * chars_per_token)
            cut = request.prompt.find("\n", goal)
            while 0 <= cut < len(request.prompt) - 1 and request.prompt[cut + 1] == "\n":
                cut = request.prompt.find("\n", cut + 2) if cut + 2 < len(request.prompt) else -1
            if cut < 0 or cut + 1 >= len(request.prompt):
                break
            chunk = request.prompt[: cut + 1]
            answer = self._client.generate(GenerationRequest(chunk, 1, [], request.deadline_s,
                                                             prefix_only=request.prefix_only))
            if isinstance(answer, Failure):
                return self._crashed() or answer
            evaluated = self._client.tokens(chunk)
            if isinstance(evaluated, Failure):
                return self._crashed() or evaluated
            with self._lock:
                self._previous = evaluated
            if len(evaluated) <= done:
                break  # no progress (a line longer than the rest): generate from here
            done = len(evaluated)
        if request.cancel():
            return Generation("", len(tokens), 0, cached, "cancelled", time.perf_counter() - started)
        return None

    def close(self) -> None:
        self._client.close()
        _stop(self._process)

    def kill(self) -> None:
        """End the child at once, from any thread (the process is exiting): a call waiting on it
        returns now with a failure, where `close` would give it STOP_GRACE_S."""
        self._client.give_up()
        if self._process.poll() is None:
            self._process.kill()


def _read_port(process: subprocess.Popen, ports: queue.SimpleQueue[int]) -> None:
    """The child prints the port it bound once its model is loaded; nothing else on stdout counts."""
    assert process.stdout is not None
    for raw in process.stdout:
        words = raw.decode("utf-8", "replace").split()
        if len(words) == 2 and words[0] == PORT_LINE and words[1].isdigit():
            ports.put(int(words[1]))


def _drain(process: subprocess.Popen, tail: deque[str]) -> None:
    """Keep the child's stderr flowing (a full pipe would block it) and its last lines at hand."""
    assert process.stderr is not None
    for raw in process.stderr:
        line = raw.decode("utf-8", "replace").rstrip()
        if line:
            tail.append(line)


def _last_line(tail: deque[str]) -> str:
    """The child's last meaningful stderr line, as ': <line>' (uvicorn's access log is noise)."""
    for line in reversed(tail):
        if '" 200' not in line and not line.startswith("INFO:"):
            return f": {line[-300:]}"
    return ""


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
