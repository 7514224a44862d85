"""Entry point of the model's child process: llama-cpp-python's OpenAI-compatible server for one
GGUF, tied to its parent's life.

`python -m repomem.backends.llama_child --model FILE [--alias NAME] [--context N] [--threads N]
[--gpu-layers N] [--reuse-chunk-tokens N]`, with the API key in REPOMEM_CHILD_KEY. The child binds
a free port on 127.0.0.1 itself and prints `repomem-port <port>` on stdout once the model is loaded
(no race for a port between choosing and binding it). Besides llama-cpp-python's routes it serves
`POST /repomem/tokenize` from the model's vocabulary, outside the server's lock: the server's own
tokenize route waits behind the generation in progress, so a parent counting prompt tokens while
other requests generate (evaluation workers) would stall for seconds.

The child must not outlive repomem (a killed CLI or language server would leave a 500 MB process):
repomem.child_processes ties it to its parent. Nothing of repomem's engine is imported here,
numba included: llama.cpp's CUDA build and numba's LLVM cannot share a process.

The server's model runs without `logits_all` (below), with which llama-cpp-python refuses
`logprobs`; the child's model class records them itself for greedy requests
(repomem.backends.greedy_logprobs), so the answers' confidence reaches the engine: the file-only
round and `prompt.round_choice` work with the embedded model as with a GPU server.
"""

from __future__ import annotations

import argparse
import os
import socket
import threading
import time
from pathlib import Path

from repomem.backends.bf16_layers import maps_the_file
from repomem.backends.cpu_threads import decode_counts, with_decode_threads
from repomem.backends.forced_start import FORCED_START_HEADER, TokenVocabulary, start_of_header, with_forced_starts
from repomem.backends.greedy_logprobs import ChosenTokenLogprobs, annotated_chunks, is_plain_greedy
from repomem.backends.kv_reuse import PREFIX_ONLY_HEADER, with_chunk_reuse
from repomem.backends.model_thread import ModelThread, decoding_on
from repomem.backends.prompt_states import StateFolder, folder_for, with_prompt_states
from repomem.child_processes import die_with_parent

PORT_LINE = "repomem-port"
TOKENIZE_PATH = "/repomem/tokenize"
# {} -> {"pre": the GGUF's tokenizer.ggml.pre, "special": texts of its special tokens, "strips": whether
# one of them strips the whitespace beside it}: backends.token_floor and backends.token_pieces
VOCABULARY_PATH = "/repomem/vocabulary"
COUNT_MANY_PATH = "/repomem/count_many"  # {"texts": [...]} -> {"counts": [...]}: one request for many counts
KEY_VARIABLE = "REPOMEM_CHILD_KEY"


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="repomem.backends.llama_child")
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", default="")
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)  # reading a prompt
    parser.add_argument("--decode-threads", type=int, default=0)  # writing tokens (0: cpu_threads.DecodeThreads)
    parser.add_argument("--gpu-layers", type=int, default=-1)
    parser.add_argument("--reuse-chunk-tokens", type=int, default=0)  # repomem.backends.kv_reuse
    parser.add_argument("--prompt-states", default="")  # a folder: repomem.backends.prompt_states
    parser.add_argument("--prompt-states-bytes", type=int, default=0)
    parser.add_argument("--flash-attention", action="store_true")  # ModelConfig.flash_attention
    return parser.parse_args()


def special_tokens(llama) -> tuple[list[str], bool]:
    """The texts of a llama_cpp.Llama's special tokens (control, user-defined, unknown: those its
    tokenizer splits out of a text as single tokens when it parses special tokens), and whether
    any of them strips the whitespace beside it."""
    import llama_cpp

    vocabulary = llama_cpp.llama_model_get_vocab(llama.model)
    special = (llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
               | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN)
    strip = llama_cpp.LLAMA_TOKEN_ATTR_LSTRIP | llama_cpp.LLAMA_TOKEN_ATTR_RSTRIP
    texts, strips = [], False
    for token in range(llama.n_vocab()):
        attributes = llama_cpp.llama_vocab_get_attr(vocabulary, token)
        if attributes & special:
            texts.append(llama_cpp.llama_vocab_get_text(vocabulary, token).decode("utf-8", errors="replace"))
            strips = strips or bool(attributes & strip)
    return texts, strips


def with_greedy_logprobs(llama_class: type) -> type:
    """`llama_class` (llama_cpp.Llama) answering `logprobs` for greedy requests without
    `logits_all`: each chunk carries the log-probabilities of the tokens picked since the last."""

    class GreedyLogprobsLlama(llama_class):
        def create_completion(self, *args, **settings):
            if settings.get("logprobs") is None or self._logits_all:
                return super().create_completion(*args, **settings)
            if not is_plain_greedy(settings):
                raise ValueError("logprobs without logits_all need greedy decoding without penalties")
            recorder = ChosenTokenLogprobs()
            settings["logprobs"] = None
            # Last: it reads the logits the others leave (a forced start's held tokens, which the
            # class beneath puts first: the pick's log-probability is then among those allowed).
            settings["logits_processor"] = [*(settings.get("logits_processor") or ()), recorder]
            result = super().create_completion(*args, **settings)
            if settings.get("stream"):
                return annotated_chunks(result, recorder)
            return next(annotated_chunks(iter([result]), recorder))

    return GreedyLogprobsLlama


def _tell_models_the_request_rules(server_app) -> None:
    """The server's streamed answers (every completion repomem asks for) tell the model first
    whether the request asked that no cached run be moved (PREFIX_ONLY_HEADER; kv_reuse's
    `prefix_only`) and what text the answer must start with (FORCED_START_HEADER; forced_start's
    `with_forced_starts`). Set in the call that starts the answer, which runs under the server's
    lock as the answer's generation does, so a request never reads another's rules."""
    publish = server_app.get_event_publisher  # looked up by the route at each request

    async def publish_with_rules(request, inner_send_chan, body, body_model, llama_call, kwargs):
        prefix_only = request.headers.get(PREFIX_ONLY_HEADER) == "1"
        forced_start = start_of_header(request.headers.get(FORCED_START_HEADER))

        def call(llama, **settings):
            if hasattr(llama, "prefix_only"):  # a model keeping moved runs
                llama.prefix_only = prefix_only
            llama.forced_start = forced_start  # read as the call makes the answer's iterator
            try:
                return llama_call(llama, **settings)
            finally:
                llama.forced_start = ""  # an unstreamed request (none of these rules) holds none

        return await publish(request, inner_send_chan, body, body_model, call, kwargs)

    server_app.get_event_publisher = publish_with_rules


def main() -> None:
    die_with_parent(int(os.environ.get("REPOMEM_PARENT_PID", os.getppid())))
    args = _arguments()
    import llama_cpp
    from llama_cpp import Llama
    from llama_cpp.server.model import LlamaProxy
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    key = os.environ.get(KEY_VARIABLE) or None
    # interrupt_requests: by default the server ends a streaming answer early, as if finished, when
    # another request arrives; concurrent evaluation workers would score cut predictions.
    server = ServerSettings(host="127.0.0.1", port=0, interrupt_requests=False, api_key=key)
    # logits_all off (the server's default is on): llama.cpp then computes the vocabulary's logits
    # for the last position of a batch only, not for every prompt token. Measured on this 2-core
    # machine, a cold 1,800-token prompt: 18.6 s and +60 MB instead of 27.1 s and +1.65 GB.
    # llama-cpp-python then refuses `logprobs`; the server loads its model through the name
    # llama_cpp.Llama, bound here to the class that records greedy answers' log-probabilities.
    fewest, most = decode_counts(args.threads, args.decode_threads)
    model = ModelSettings(model=args.model, model_alias=args.alias or None, n_ctx=args.context,
                          n_threads=most, n_threads_batch=args.threads, n_gpu_layers=args.gpu_layers,
                          logits_all=False, flash_attn=args.flash_attention, use_mmap=maps_the_file(), verbose=False)
    states = (StateFolder(folder_for(Path(args.prompt_states), Path(args.model), args.context, args.gpu_layers,
                                     args.flash_attention), args.prompt_states_bytes) if args.prompt_states else None)
    # (with_chunk_reuse reads llama.cpp's bindings from its class's module: Llama's, so it goes first.)
    # The model loads on a thread of its own while the main thread imports the HTTP server
    # (fastapi, uvicorn: ~0.6 s of Python; llama.cpp loads in C without the GIL, so the child is
    # ready sooner: docs/measurements.md, "The model process's start"), and that thread then runs
    # each of its evaluations (repomem.backends.model_thread).
    load_by_settings = LlamaProxy.load_llama_from_model_settings  # bound now: replaced below
    load = ModelThread(lambda: load_by_settings(model))
    llama_cpp.Llama = decoding_on(load, with_decode_threads(with_greedy_logprobs(with_forced_starts(with_prompt_states(
        with_chunk_reuse(Llama, args.reuse_chunk_tokens), states))), fewest, most))
    load.start()
    import uvicorn
    from fastapi import Body, Header, HTTPException
    from llama_cpp.server import app as server_app

    # The server's proxy loads its default model as it is made: it takes the one loaded above.
    LlamaProxy.load_llama_from_model_settings = staticmethod(
        lambda settings: load.loaded() if settings is model else load_by_settings(settings))
    app = server_app.create_app(server_settings=server, model_settings=[model])
    _tell_models_the_request_rules(server_app)
    # The routes below tokenize with the served model itself, outside the server's lock (which a
    # generation holds): llama.cpp's tokenizer reads the vocabulary only, and llama.cpp's own
    # server tokenizes on its HTTP threads while it decodes. (A vocabulary-only copy of the
    # model did this before, loaded after it: 0.34 s more of the child's start.)
    served = load.loaded()
    tokenize_lock = threading.Lock()
    vocabularies: list[TokenVocabulary] = []  # built once, below
    building_lock = threading.Lock()

    def tokens_of(text: str) -> list[int]:
        with tokenize_lock:
            return served.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def check_key(authorization: str | None) -> None:
        if key and authorization != f"Bearer {key}":
            raise HTTPException(status_code=401, detail="bad key")

    def text_field(body: dict, name: str, authorization: str | None) -> str:
        """The request's string field `name`, once its key is checked (401 / 400 otherwise)."""
        check_key(authorization)
        text = body.get(name)
        if not isinstance(text, str):
            raise HTTPException(status_code=400, detail=f"{name} must be a string")
        return text

    @app.post(TOKENIZE_PATH)
    def tokenize(body: dict = Body(...), authorization: str | None = Header(default=None)) -> dict:  # noqa: B008
        return {"tokens": tokens_of(text_field(body, "input", authorization))}

    @app.post(VOCABULARY_PATH)
    def vocabulary_facts(authorization: str | None = Header(default=None)) -> dict:  # noqa: B008
        check_key(authorization)
        special, strips = tokenizer_facts()
        return {"pre": str(served.metadata.get("tokenizer.ggml.pre", "")), "special": special, "strips": strips}

    @app.post(COUNT_MANY_PATH)
    def count_many(body: dict = Body(...), authorization: str | None = Header(default=None)) -> dict:  # noqa: B008
        check_key(authorization)
        texts = body.get("texts")
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            raise HTTPException(status_code=400, detail="texts must be a list of strings")
        return {"counts": [len(tokens_of(text)) for text in texts]}

    # The server holds this lock while it serves a model request (llama-cpp-python's app).
    serving = getattr(server_app, "llama_inner_lock", None)
    wanted = threading.Event()

    def give_way() -> None:
        """The background builder waits while a request uses the model: its Python loop would
        take the GIL from the generation's thread at each of its many ctypes calls."""
        while serving is not None and serving.locked() and not wanted.is_set():
            time.sleep(0.02)

    facts_lock = threading.Lock()
    facts: list[tuple[list[str], bool]] = []

    def tokenizer_facts() -> tuple[list[str], bool]:
        with facts_lock:
            if not facts:
                facts.append(special_tokens(served))
            return facts[0]

    def built_vocabulary(pause=None) -> TokenVocabulary:
        # Its own lock: token counts (the other lock) go on while it is built; llama.cpp's
        # vocabulary is read-only once loaded.
        with building_lock:
            if not vocabularies:
                vocabularies.append(TokenVocabulary.of_llama(served, pause))
            return vocabularies[0]

    def vocabulary_for_starts() -> TokenVocabulary:
        wanted.set()  # a builder in the background stops giving way: the answer waits on it
        return built_vocabulary()

    served.start_vocabulary = vocabulary_for_starts  # with_forced_starts' model asks it

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # Accepted connections inherit it: without, every answer waited ~40 ms for a delayed ACK
    # (Nagle), and a prompt's dozen token counts cost half a second.
    listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    listener.bind(("127.0.0.1", 0))
    print(f"{PORT_LINE} {listener.getsockname()[1]}", flush=True)
    # Every token's bytes, for the first forced start (a word typed halfway), which the first
    # such completion of a session would wait for (docs/measurements.md, "The model process's
    # start"). Built now, while the parent still loads its index, giving way to generations.
    # The special tokens too (~0.07 s), which the parent's first token count asks for.
    threading.Thread(target=lambda: (tokenizer_facts(), built_vocabulary(give_way)), name="vocabulary",
                     daemon=True).start()
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listener])


if __name__ == "__main__":
    main()
