"""Adapter for Hugging Face transformers (optional extra `repomem[hf]`): a checkpoint folder, a hub
id already in the local cache, or a GGUF file (dequantized by transformers' GGUF support).

On CUDA when torch sees a GPU (bfloat16), else on the CPU (float32). Greedy decoding; token counts
from the model's own tokenizer; stop strings, `enough`, cancel and the deadline are checked after
every token. `generate_batch` runs many prompts in one forward pass per token (left padding), for
evaluation through repomem.backends.batching.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from repomem.backends.base import Generation, GenerationRequest, window_overflow
from repomem.backends.forced_start import StartConstraint, TokenVocabulary
from repomem.backends.models import check_gguf, gguf_names
from repomem.backends.templates import template_for
from repomem.cache import cache_root
from repomem.failures import Failure, FailureKind


def _cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    """`text` up to its earliest stop string, and whether one was found."""
    cut = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def _looks_like_hub_id(name: str) -> bool:
    """`org/name` (Hugging Face's form), not a path someone meant as a file."""
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "~")) and not name.endswith(".gguf")


def _model_named(model: str, path: Path) -> None | Failure:
    """Why `model` (a GGUF file, a checkpoint folder or a hub id) cannot be loaded, where that shows
    without transformers: a GGUF that is absent or not one, a name that is no file, folder or hub id,
    a hub id the local Hugging Face cache does not hold (it is looked up there only)."""
    if path.suffix == ".gguf":
        checked = check_gguf(path)
        return checked if isinstance(checked, Failure) else None
    if path.is_dir():
        return None
    if not _looks_like_hub_id(model):
        return Failure(FailureKind.MODEL_MISSING, f"{model}: no such model file or folder")
    try:
        from huggingface_hub.constants import HF_HUB_CACHE
    except ImportError:
        return None  # transformers' own import reports the missing backend
    if not (Path(HF_HUB_CACHE) / f"models--{model.replace('/', '--')}").is_dir():
        return Failure(FailureKind.MODEL_LOAD, f"transformers cannot load {model}: not in the local Hugging Face cache "
                                               f"({HF_HUB_CACHE}); repomem does not download models from the hub")
    return None


def _converted_folder(path: Path, dtype: str) -> Path:
    """Where a GGUF's dequantized checkpoint is kept: transformers converts the tokenizer and
    dequantizes every tensor at each load (37 s for the embedded 0.5B model on 2 cores, 54 s before
    `_gguf_read_once`), a saved checkpoint loads in seconds. Keyed by the file's name, size and mtime, and the dtype."""
    stat = path.stat()
    return cache_root() / "transformers" / f"{path.stem}-{stat.st_size}-{stat.st_mtime_ns}-{dtype}"


@contextlib.contextmanager
def _gguf_read_once() -> Iterator[None]:
    """While converting a GGUF, transformers opens it three times (the tokenizer, the config, the
    tensors), and each `gguf.GGUFReader` parses every metadata field again: the 151k-token
    vocabulary and its merges, 11 to 13 s a time for the embedded model on 2 cores. Inside this
    block, readers of the same file are shared (they only read: a memory map and parsed fields).
    The name transformers imports from is restored after; a gguf package without it is left alone."""
    try:
        import gguf
    except ImportError:
        yield
        return
    original = getattr(gguf, "GGUFReader", None)
    if original is None:
        yield
        return
    readers: dict[tuple[str, str], object] = {}

    def shared_reader(path, mode: str = "r"):
        key = (os.path.realpath(path), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf.GGUFReader = shared_reader
    try:
        yield
    finally:
        gguf.GGUFReader = original
        readers.clear()


def _save_converted(model, tokenizer, folder: Path) -> None:
    """Best effort (a full disk only costs the next load its conversion): written aside, then renamed."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".convert-", dir=folder.parent))
    # The tensors are plain (dequantized) by now, but the model still carries the GGUF quantizer,
    # which refuses to serialize: save it as the ordinary checkpoint it is.
    quantizer = getattr(model, "hf_quantizer", None)
    quantization = getattr(model.config, "quantization_config", None)
    try:
        model.hf_quantizer = None
        if quantization is not None:
            del model.config.quantization_config
        tokenizer.save_pretrained(scratch)
        model.save_pretrained(scratch)
        os.replace(scratch, folder)
    except (OSError, ValueError, RuntimeError):
        shutil.rmtree(scratch, ignore_errors=True)
    finally:
        model.hf_quantizer = quantizer
        if quantization is not None:
            model.config.quantization_config = quantization


class _SequenceState:
    """One request's progress inside a batch: decided once, then only reported."""

    def __init__(self, request: GenerationRequest, deadline: float):
        self.request = request
        self.deadline = deadline
        self.text = ""
        self.tokens = 0
        self.finish: str | None = None
        self.logprob = 0.0  # natural-log probability of the tokens generated until `finish`


class TransformersBackend:
    constrains_start = True  # GenerationRequest.forced_start, by a logits processor per row

    def __init__(self, model, tokenizer, torch, name: str, template, context_tokens: int, device: str):
        self._model = model
        self._tokenizer = tokenizer
        self._torch = torch
        self._vocabulary: TokenVocabulary | None = None  # read at the first forced start
        # One generation at a time (the model), and one tokenizer call at a time (the Rust tokenizer
        # is not re-entrant). Two locks: evaluation workers count their prompts' tokens while a
        # batch generates; with one lock every count waited for the running batch, and on a GPU the
        # batches stayed at about 2 prompts of 16 (docs/eval-history.md, ninth round).
        self._lock = threading.Lock()
        self._tokenizer_lock = threading.Lock()
        self.name = name
        self.template = template
        self.context_tokens = context_tokens
        self.device = device
        self.max_batch = 0  # 0 = no limit; repomem.backends.batching sets the batch size
        eos = tokenizer.eos_token_id
        self._pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
        self._eos_id = eos

    @classmethod
    def open(cls, model: str, context_tokens: int = 4096, threads: int = 0) -> TransformersBackend | Failure:
        # What `model` names is checked first: importing torch and transformers takes ~5 s here, and a
        # mistyped name deserves its one-line answer at once.
        path = Path(model).expanduser()
        named = _model_named(model, path)
        if isinstance(named, Failure):
            return named
        try:
            import torch
            import transformers
        except ImportError as error:
            return Failure(FailureKind.BACKEND_MISSING,
                           f"the transformers backend needs torch and transformers ({error}); "
                           "pip install 'repomem[hf]'")
        device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        if threads:
            torch.set_num_threads(threads)
        converted: Path | None = None
        options: dict = {}
        if path.suffix == ".gguf":
            names = (path.name, *gguf_names(path))
            converted = _converted_folder(path, str(dtype).removeprefix("torch."))
            if (converted / "config.json").is_file():
                source = str(converted)
            else:
                source, options["gguf_file"] = str(path.parent), path.name
        elif path.is_dir():
            source, names = str(path), (path.name,)
        else:  # a hub id in the local cache (_model_named): no network is assumed
            source, names, options["local_files_only"] = model, (model,), True
        try:
            with _gguf_read_once() if "gguf_file" in options else contextlib.nullcontext():
                tokenizer = transformers.AutoTokenizer.from_pretrained(source, **options)
                loaded = transformers.AutoModelForCausalLM.from_pretrained(source, dtype=dtype, **options)
        except (OSError, ValueError, RuntimeError, ImportError, KeyError) as error:
            return Failure(FailureKind.MODEL_LOAD,
                           f"transformers cannot load {model}: {str(error).splitlines()[0][:300]}")
        if converted is not None and "gguf_file" in options:
            _save_converted(loaded, tokenizer, converted)
        loaded = loaded.to(device).eval()
        label = path.name if path.exists() else model
        return cls(loaded, tokenizer, torch, f"transformers:{label}", template_for(*names), context_tokens, device)

    def _encode(self, text: str) -> list[int]:
        with self._tokenizer_lock:
            return self._tokenizer.encode(text, add_special_tokens=False)

    def _decode(self, ids: list[int]) -> str:
        with self._tokenizer_lock:
            return self._tokenizer.decode(ids, skip_special_tokens=False)

    def count(self, text: str) -> int | Failure:
        if self._model is None:
            return Failure(FailureKind.BACKEND_CLOSED, "the transformers model was closed")
        return len(self._encode(text))

    def generate(self, request: GenerationRequest) -> Generation | Failure:
        return self.generate_batch([request])[0]

    def generate_batch(self, requests: Sequence[GenerationRequest]) -> list[Generation | Failure]:
        """Greedy continuations of many prompts, padded on the left into one batch."""
        if self._model is None:
            return [Failure(FailureKind.BACKEND_CLOSED, "the transformers model was closed") for _ in requests]
        with self._lock:
            started = time.perf_counter()
            encoded = [self._encode(r.prompt) for r in requests]
            answers: list[Generation | Failure | None] = [None] * len(requests)
            runnable = []
            for i, (request, ids) in enumerate(zip(requests, encoded)):
                answers[i] = window_overflow(len(ids), request.max_tokens, self.context_tokens)
                if answers[i] is None:
                    runnable.append(i)
            if runnable:
                states = self._run([requests[i] for i in runnable], [encoded[i] for i in runnable], started)
                seconds = time.perf_counter() - started
                for i, state in zip(runnable, states):
                    answers[i] = state if isinstance(state, Failure) else Generation(
                        state.text, len(encoded[i]), state.tokens, 0, state.finish or "length", seconds,
                        state.logprob / state.tokens if state.tokens else None)
        return [a for a in answers if a is not None]

    def _run(self, requests: list[GenerationRequest], encoded: list[list[int]],
             started: float) -> list[_SequenceState] | list[Failure]:
        torch = self._torch
        width = max(len(ids) for ids in encoded)
        # input_ids, attention_mask: (batch, width); prompts right-aligned so every row's next token
        # is at the same position.
        input_ids = torch.full((len(encoded), width), self._pad_id, dtype=torch.long)
        attention = torch.zeros((len(encoded), width), dtype=torch.long)
        for row, ids in enumerate(encoded):
            if ids:
                input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
                attention[row, width - len(ids):] = 1
        states = [_SequenceState(r, started + r.deadline_s) for r in requests]
        criteria = self._stopping(states, width)
        confidence = self._confidence(states)
        # The starts first: the confidence then reads each held step's pick among the allowed tokens.
        processors = [*self._starts(states, width), confidence]
        try:
            with torch.inference_mode():
                self._model.generate(
                    input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device),
                    max_new_tokens=max(r.max_tokens for r in requests), do_sample=False, num_beams=1,
                    temperature=None, top_p=None, top_k=None, pad_token_id=self._pad_id,
                    eos_token_id=self._eos_id, stopping_criteria=[criteria], logits_processor=processors,
                )
                confidence.settle()
        except (RuntimeError, ValueError) as error:
            return [Failure(FailureKind.GENERATION,
                            f"transformers failed while generating: {str(error).splitlines()[0][:300]}")
                    for _ in requests]
        return states

    def _stopping(self, states: list[_SequenceState], width: int):
        """A transformers StoppingCriteria deciding each row after every token: (batch,) bools."""
        import transformers

        torch = self._torch
        decode = self._decode
        eos = self._eos_id

        class Stops(transformers.StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs):
                now = time.perf_counter()
                for row, state in enumerate(states):
                    if state.finish is not None:
                        continue
                    request = state.request
                    new = input_ids[row, width:].tolist()
                    state.tokens = len(new)
                    ended = bool(new) and new[-1] == eos
                    shown = new[:-1] if ended else new
                    text, stopped = _cut_at_stop(decode(shown), request.stop)
                    state.text = text
                    if stopped or ended:
                        state.finish = "stop"
                    elif request.enough is not None and request.enough(text):
                        state.finish = "stop"
                    elif len(new) >= request.max_tokens:
                        state.finish = "length"
                    elif request.cancel is not None and request.cancel():
                        state.finish = "cancelled"
                    elif now > state.deadline:
                        state.finish = "deadline"
                return torch.tensor([s.finish is not None for s in states], device=input_ids.device)

        return Stops()

    def _starts(self, states: list[_SequenceState], width: int) -> list:
        """A transformers LogitsProcessor holding each row with a forced start to the tokens
        consistent with what is left of it (repomem.backends.forced_start); none when no row has one."""
        if not any(state.request.forced_start for state in states):
            return []
        import transformers

        if self._vocabulary is None:
            special = set(self._tokenizer.all_special_ids)
            with self._tokenizer_lock:
                texts = self._tokenizer.batch_decode([[index] for index in range(len(self._tokenizer))])
            self._vocabulary = TokenVocabulary([b"" if index in special else text.encode("utf-8")
                                                for index, text in enumerate(texts)])
        # One constraint per row that has a start (its generated tokens are those past `width`).
        held = [StartConstraint(self._vocabulary, state.request.forced_start.encode("utf-8"), width)
                if state.request.forced_start else None for state in states]

        class Starts(transformers.LogitsProcessor):
            def __call__(self, input_ids, scores):
                # input_ids: (batch, width + generated); scores: (batch, vocabulary) for the next token.
                for row, constraint in enumerate(held):
                    if constraint is None or states[row].finish is not None:
                        continue
                    allowed = constraint.allowed(input_ids[row, width:].tolist())
                    if allowed:
                        kept = scores[row, allowed].clone()
                        scores[row, :] = float("-inf")
                        scores[row, allowed] = kept
                return scores

        return [Starts()]

    def _confidence(self, states: list[_SequenceState]):
        """A transformers LogitsProcessor that leaves the scores as they are and sums, per row still
        generating, the log-probability of the token greedy decoding picks (the highest score).

        The sums stay on the device, (batch,) float32, until `settle` copies them into the states
        once: a copy per token would make every step wait for the GPU."""
        import transformers

        torch = self._torch

        class Confidence(transformers.LogitsProcessor):
            def __init__(self):
                self.sums = None  # (batch,) float32 on the model's device

            def __call__(self, input_ids, scores):
                # scores: (batch, vocabulary) for the next token. A row that finished after the
                # previous token is not counted (its state says so: the stopping criteria ran).
                live = torch.tensor([s.finish is None for s in states], device=scores.device)
                chosen = scores.max(dim=-1).values - torch.logsumexp(scores.float(), dim=-1)
                step = torch.where(live, chosen.float(), torch.zeros_like(chosen, dtype=torch.float32))
                self.sums = step if self.sums is None else self.sums + step
                return scores

            def settle(self):
                if self.sums is not None:
                    for state, total in zip(states, self.sums.tolist()):
                        state.logprob = float(total)

        return Confidence()

    def close(self) -> None:
        with self._lock:
            self._model = None
            torch = self._torch
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
