"""Adapter for httpx: any OpenAI-compatible completions server (vLLM in production).

`/v1/completions` with a rendered prompt (vLLM has no `suffix` field, so FIM strings come from
repomem.backends.templates), streamed so a cancel or a deadline stops between tokens; `/tokenize` (vLLM) or
`/extras/tokenize` (llama-cpp-python's server) for exact token counts. Every call has a deadline;
connection failures and 5xx / 429 answers are retried a bounded number of times before any
token arrived; malformed answers are Failures, not exceptions.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Iterator, Mapping

import httpx

from repomem.backends.base import Generation, GenerationRequest, early_stop, mean_of, token_logprobs
from repomem.backends.forced_start import start_header
from repomem.backends.greedy_logprobs import GREEDY_SAMPLING
from repomem.backends.http_sockets import TLS_VARIABLES, ShuttableClient
from repomem.backends.kv_reuse import PREFIX_ONLY_HEADER
from repomem.backends.templates import template_for
from repomem.failures import Failure, FailureKind

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
# Sent with a request that no cached run be moved for (GenerationRequest.prefix_only); only the
# embedded model's child reads it, other servers pass it by.
PREFIX_ONLY = {PREFIX_ONLY_HEADER: "1"}
JSON_HEADERS = {"Content-Type": "application/json"}


# Caps on a streamed answer, whatever the server does: chunks beyond max_tokens (each event carries
# about one token; a little slack for servers that send an empty first or last event), characters
# per requested token, and bytes of one line (an answer without line breaks must not fill memory).
STREAM_SLACK_CHUNKS = 8
MAX_CHARS_PER_TOKEN = 64
MAX_LINE_BYTES = 1 << 20
# A JSON answer (the model list; the token ids of a 1 MB file are ~2 MB) past this is garbage.
MAX_ANSWER_BYTES = 16 << 20


class _OversizedLine(Exception):
    pass


def _capped_body(response: httpx.Response, deadline: float) -> bytes | None:
    """A JSON answer's bytes, or None past MAX_ANSWER_BYTES or the deadline: a server that never
    stops (or answers hundreds of MB) was read whole into memory before."""
    parts: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_ANSWER_BYTES or time.perf_counter() > deadline:
            return None
        parts.append(chunk)
    return b"".join(parts)


def _sse_lines(response: httpx.Response, deadline: float) -> Iterator[str | None]:
    """The lines of a server-sent event stream, with a cap on a line's length (bad-response) and
    the deadline checked at every chunk received (None: it passed while a line was arriving)."""
    pending = b""
    for chunk in response.iter_bytes():
        pending += chunk
        while (end := pending.find(b"\n")) >= 0:
            line, pending = pending[:end], pending[end + 1 :]
            yield line.rstrip(b"\r").decode("utf-8", "replace")
        if len(pending) > MAX_LINE_BYTES:
            raise _OversizedLine
        if pending and time.perf_counter() > deadline:
            yield None
            return
    if pending:
        yield pending.decode("utf-8", "replace")


# A refusal's body is read this far for its reason; its reason is shown this long.
MAX_REASON_BYTES = 8192
MAX_REASON_CHARS = 300
# How servers word a prompt longer than their window: vLLM ("This model's maximum context length
# is 2048 tokens", "longer than the maximum model length"), llama-cpp-python (OpenAI's wording),
# llama.cpp's llama-server ("request (4476 tokens) exceeds the available context size (4096
# tokens)", type "exceed_context_size_error"; it was taken for a broken server).
_WINDOW_WORDS = ("context length", "model length", "context window", "context_length_exceeded", "context size")
# The window a refusal names: vLLM's and OpenAI's "maximum context length is 2048 tokens", vLLM's
# "(context length 2048)", llama-server's "available context size (4096 tokens)".
_WINDOW_SIZE = re.compile(r"(?:maximum context length is|context length|context size \()\s*(\d+)", re.IGNORECASE)


def _proxy_refusal(route: str) -> Failure:
    """HTTP 407: the proxy (the environment's, http_sockets.proxy_for) refused the request, not the
    model server."""
    return Failure(FailureKind.BACKEND_AUTH, f"the proxy refused the call to {route} (HTTP 407): give the proxy's "
                                             "user and password in http_proxy / https_proxy "
                                             "(http://user:password@host:port)")


def _tunnel_refused(error: Exception) -> bool:
    """Whether the proxy refused to open the tunnel to an https:// endpoint for want of credentials:
    httpcore raises ProxyError("407 Proxy Authentication Required") where an http:// one answers 407."""
    return isinstance(error, httpx.ProxyError) and str(error).startswith("407")


def _refusal(response: httpx.Response, route: str) -> tuple[Failure, int]:
    """The Failure for a 4xx / 5xx answer, with the reason the server gave in its body (OpenAI's
    `{"error": {"message"}}`, vLLM's `{"message"}`, FastAPI's `{"detail"}`): "answered HTTP 400"
    alone left a user to guess that the prompt was past the server's window. That case is
    prompt-too-long (not a broken backend the language server would reopen), and the window the
    refusal names comes with it (tokens; 0 when it names none or it is another refusal)."""
    reason, stated_window = _reason(response)
    status = response.status_code
    if status == 407:
        return _proxy_refusal(route), 0
    too_long = status in (400, 413, 422) and any(words in reason.lower() for words in _WINDOW_WORDS)
    said = f"{route} answered HTTP {status}" + (f": {reason}" if reason else "")
    if not too_long:
        return Failure(FailureKind.BACKEND_ERROR, said), 0
    named = _WINDOW_SIZE.search(reason)
    window = stated_window if _is_token_count(stated_window) else int(named.group(1)) if named else 0
    return Failure(FailureKind.PROMPT_TOO_LONG, said), window


def _refuses_the_field(status: int, reason: str) -> bool:
    """Whether an error answer to a request carrying `logprobs` is a refusal of that field, which
    the same request without it gets past: HTTP 400 / 422 (a server that does not know the field
    refuses the request), or llama-cpp-python's HTTP 500 for a model loaded without `logits_all`,
    whose reason names them ("logprobs is not supported for models created with
    logits_all=False"). Any other server error (out of memory, overloaded) is not: asked again
    without them, it failed the same, and each failing call cost a request more than its retries."""
    return status in (400, 422) or (status == 500 and "logprob" in reason.lower())


def _reason(response: httpx.Response) -> tuple[str, object]:
    """The reason an error answer's body gives, as one printable line (empty when it gives none),
    and the window it states as a field of its error (llama-server's `n_ctx`; None without one)."""
    body = b""
    try:
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) >= MAX_REASON_BYTES:
                break
        answer = json.loads(body)
    except (httpx.HTTPError, ValueError, RecursionError):
        answer = None
    error = answer.get("error") if isinstance(answer, dict) else None
    # llama-server says its window as a field of the error too.
    stated_window = error.get("n_ctx") if isinstance(error, dict) else None
    if isinstance(error, dict):
        error = error.get("message")
    reason = error if isinstance(error, str) else \
        next((answer[key] for key in ("message", "detail") if isinstance(answer, dict)
              and isinstance(answer.get(key), str)), "")
    # One line of printable text: the server's words reach a terminal.
    return " ".join("".join(c if c.isprintable() else " " for c in reason).split())[:MAX_REASON_CHARS], stated_window


def _is_token_count(value: object) -> bool:
    """A window a server states: a whole, positive number of tokens (JSON's true is no count)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_STATED_WINDOW


# A window past any model's (tokens): a server's larger number is not believed.
MAX_STATED_WINDOW = 1 << 24


def served_window(models: list, model: str) -> int:
    """The window (tokens) GET /v1/models states for `model`: vLLM's `max_model_len`; 0 when the
    server does not say (llama-cpp-python's, llama-server's: their `n_ctx_train` is the training
    length, not the window they run with)."""
    for entry in models:
        if isinstance(entry, dict) and entry.get("id") == model and _is_token_count(entry.get("max_model_len")):
            return int(entry["max_model_len"])
    return 0


def _stopped(endpoint: str) -> Failure:
    return Failure(FailureKind.BACKEND_INTERRUPTED, f"the call to {endpoint} was stopped: the session ended")


def shown_url(url: str) -> str:
    """`url` as messages and results may show it: a password in it (`https://user:secret@host`)
    and its query (`?api_key=...`) replaced by `***` (they were repeated in every failure)."""
    try:
        parts = urllib.parse.urlsplit(url)
        password, host = parts.password, parts.netloc.rpartition("@")[2]
    except ValueError:
        return "the endpoint"  # not a URL httpx could call either; the call's failure says so
    user = f"{parts.username}:***@" if password is not None else \
        f"{parts.username}@" if parts.username is not None else ""
    return urllib.parse.urlunsplit((parts.scheme, user + host, parts.path, "***" if parts.query else "",
                                    parts.fragment))


def server_root(endpoint: str) -> str:
    """The server's root URL, which every route here is added to (`/v1/completions`, `/tokenize`).
    An endpoint in the OpenAI clients' base-URL form (`http://host:8000/v1/`, as vLLM's own docs
    write it) loses its `/v1`: it was called as `/v1/v1/models`, an HTTP 404 at connect. Its query
    goes with every request instead (`endpoint_query`): added to the URL, a route landed inside it
    (`/v1?api-version=2/v1/models`)."""
    parts = urllib.parse.urlsplit(endpoint)
    root = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
    return root[: -len("/v1")] if root.endswith("/v1") else root


def endpoint_query(endpoint: str) -> list[tuple[str, str]]:
    """The endpoint's query parameters (a gateway's `?api-version=...`), sent with every request."""
    return urllib.parse.parse_qsl(urllib.parse.urlsplit(endpoint).query, keep_blank_values=True)


def json_body(payload: dict) -> bytes:
    """`payload` as the bytes of a JSON request body. A lone surrogate in a prompt (an editor's
    buffer can hold one) is not UTF-8: httpx's own encoding raised UnicodeEncodeError out of the
    backend; it goes as "?" here, the same in a count as in a completion."""
    return json.dumps(payload, ensure_ascii=False).encode("utf-8", "replace")


def model_label(model: str, endpoint: str) -> str:
    """The backend's name in results: the served model, not the URL, so shards run against
    several servers of one model are one group in a report. A model id that is a file path (how
    llama-cpp-python's server names a GGUF) keeps its file name only."""
    if not model:
        return f"openai:{endpoint.rstrip('/')}"
    return f"openai:{model.rsplit('/', 1)[-1] if model.startswith(('/', '.', '~')) else model}"


# What llama-cpp-python's server names as every model's owner in GET /v1/models (vLLM: "vllm").
LLAMA_CPP_PYTHON_OWNER = "me"


class OpenAIBackend:
    def __init__(self, endpoint: str, model: str, api_key: str = "", connect_timeout_s: float = 3.0,
                 retries: int = 2, context_tokens: int = 0, template_name: str = "", tokenize_path: str = "",
                 asks_logprobs: bool = True, sampling: Mapping[str, float] | None = None):
        self.endpoint = server_root(endpoint)
        query = endpoint_query(endpoint)
        # What messages and results name: the query's values hidden (`?api_key=...`).
        self.shown_endpoint = shown_url(self.endpoint + ("?" + urllib.parse.urlencode(query) if query else ""))
        self.model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._shuttable = ShuttableClient(self.endpoint, timeout=httpx.Timeout(30.0, connect=connect_timeout_s),
                                          headers=self._headers, params=query)
        self._client = self._shuttable.client
        self._retries = retries
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()  # guards _counts: evaluation workers share one backend
        self._gone = threading.Event()  # the server is gone for good (give_up): no waits between retries
        self._killed = threading.Event()  # the session ended (kill): no call tries again
        # "/tokenize" (vLLM, {"prompt"}), else a route taking {"input"} ("/extras/tokenize" of
        # llama-cpp-python's server); found at the first count unless given.
        self._tokenize_path: str | None = tokenize_path or None
        # Ask for each token's log-probability (`logprobs: 0`; vLLM and llama-cpp-python's server
        # stream them) until the server refuses the field once (HTTP 400, 422 or 500, then answers
        # without it): the answer's confidence chooses between RepoCoder's rounds (prompt.round_choice).
        self._asks_logprobs = asks_logprobs
        # Fields sent with every completion beside temperature 0: a server whose defaults are not
        # greedy (the embedded model's child, greedy_logprobs.GREEDY_SAMPLING) is told so.
        self._sampling = dict(sampling or {})
        self.name = model_label(model, self.shown_endpoint)
        self.template = template_for(template_name or model)
        self.context_tokens = context_tokens
        # The server fails a streamed request after its status line (llama-cpp-python's): an empty
        # stream is asked again unstreamed for its reason (`_unstreamed`).
        self.fails_late = False

    def _cannot_reach(self, error: Exception) -> str:
        """A failed connection in words, naming the proxy it went through (the environment's)."""
        through = f" through the proxy {shown_url(self._shuttable.proxy)}" if self._shuttable.proxy else ""
        return f"cannot reach {self.shown_endpoint}{through} ({error.__class__.__name__})"

    @classmethod
    def connect(cls, endpoint: str, model: str = "", api_key: str = "", deadline_s: float = 10.0,
                context_tokens: int = 0, tokenize_path: str = "", asks_logprobs: bool = True,
                sampling: Mapping[str, float] | None = None) -> OpenAIBackend | Failure:
        """Reach the server and learn its model name (GET /v1/models) unless one is given."""
        if not endpoint.startswith(("http://", "https://")):
            return Failure(FailureKind.BAD_ENDPOINT, f"endpoint must be an http(s) URL, got {endpoint!r}")
        try:
            if not httpx.URL(endpoint).host:
                raise httpx.InvalidURL("no host")
        except httpx.InvalidURL as error:
            return Failure(FailureKind.BAD_ENDPOINT, f"endpoint {endpoint!r} is not a valid URL ({error})")
        if not api_key.isascii() or not api_key.isprintable():
            # An HTTP header carries ASCII only: a key pasted with a curly quote raised UnicodeEncodeError.
            return Failure(FailureKind.BACKEND_AUTH, "the API key holds characters an HTTP header cannot carry "
                                                     "(not ASCII, or a control character): check how it was pasted")
        try:
            backend = cls(endpoint, model, api_key, connect_timeout_s=min(3.0, deadline_s),
                          context_tokens=context_tokens, tokenize_path=tokenize_path, asks_logprobs=asks_logprobs,
                          sampling=sampling)
        except (OSError, ssl.SSLError) as error:  # the certificate authorities SSL_CERT_FILE / _DIR name
            named = ", ".join(f"{name}={os.environ[name]}" for name in TLS_VARIABLES if os.environ.get(name))
            return Failure(FailureKind.BAD_ENDPOINT, f"cannot read the TLS certificate authorities for "
                                                     f"{shown_url(endpoint)} ({named or 'the default ones'}): "
                                                     f"{getattr(error, 'strerror', None) or error}")
        answer = backend._request("GET", "/v1/models", None, deadline_s)
        if isinstance(answer, Failure):
            backend.close()
            return answer
        try:
            served = [entry["id"] for entry in answer["data"]]
            owners = {entry.get("owned_by") for entry in answer["data"]}
            if not all(isinstance(name, str) for name in served):
                raise TypeError("a model id that is not a string")
        except (KeyError, TypeError, AttributeError):
            backend.close()
            return Failure(FailureKind.BAD_RESPONSE,
                           f"{backend.shown_endpoint}/v1/models answered something that is not a model list")
        if LLAMA_CPP_PYTHON_OWNER in owners:
            backend.fails_late = True
            if sampling is None:
                backend.decode_greedily()
        if not model:
            if not served:
                backend.close()
                # shown_endpoint, as in every message: `endpoint` may hold a password or a key.
                return Failure(FailureKind.BAD_RESPONSE, f"{backend.shown_endpoint} serves no model")
            backend.model = served[0]
            backend.template = template_for(served[0])
            backend.name = model_label(served[0], backend.shown_endpoint)
        backend.context_tokens = served_window(answer["data"], backend.model) or backend.context_tokens
        return backend

    def decode_greedily(self) -> None:
        """Send llama-cpp-python's greedy settings with every completion. Its server fills a
        request's repeat_penalty with 1.1 when it names none, so its answers would not be the
        greedy ones repomem measures; other servers (vLLM, llama.cpp's own llama-server) decode
        greedily at temperature 0, and vLLM logs every field it does not know, so only it is told."""
        self._sampling = dict(GREEDY_SAMPLING)

    def post(self, path: str, payload: dict, deadline_s: float) -> dict | Failure:
        """POST a JSON payload to one of the server's own routes (the embedded model's child adds
        some) and read its JSON answer, with the retries and caps of every call."""
        return self._request("POST", path, payload, deadline_s)

    def _request(self, method: str, path: str, payload: dict | None, deadline_s: float) -> dict | Failure:
        started = time.perf_counter()
        with ShuttableClient.until(started + deadline_s):
            return self._attempts(method, path, payload, deadline_s, started)

    def _attempts(self, method: str, path: str, payload: dict | None, deadline_s: float,
                  started: float) -> dict | Failure:
        last = ""
        for attempt in range(self._retries + 1):
            remaining = deadline_s - (time.perf_counter() - started)
            if remaining <= 0:
                break
            if self._killed.is_set():
                return _stopped(self.shown_endpoint)
            try:
                with self._client.stream(method, self.endpoint + path,
                                         content=None if payload is None else json_body(payload),
                                         headers=None if payload is None else JSON_HEADERS,
                                         timeout=httpx.Timeout(remaining, connect=min(3.0, remaining))) as response:
                    status = response.status_code
                    body = _capped_body(response, started + deadline_s) if status < 400 else b""
            except httpx.TimeoutException:
                return Failure(FailureKind.BACKEND_TIMEOUT,
                               f"{self.shown_endpoint} did not answer within {deadline_s:.0f} s")
            except httpx.HTTPError as error:
                if _tunnel_refused(error):
                    return _proxy_refusal(f"{self.shown_endpoint}{path}")
                last = self._cannot_reach(error)
                self._gone.wait(min(0.2 * (2**attempt), max(remaining, 0)))
                continue
            if status in RETRYABLE_STATUS:
                last = f"{self.shown_endpoint}{path} answered HTTP {status}"
                self._gone.wait(min(0.2 * (2**attempt), max(remaining, 0)))
                continue
            if status == 407:
                return _proxy_refusal(f"{self.shown_endpoint}{path}")
            if status in (401, 403):
                return Failure(FailureKind.BACKEND_AUTH, f"{self.shown_endpoint} refused the API key (HTTP {status})")
            if status >= 400:
                return Failure(FailureKind.BACKEND_ERROR, f"{self.shown_endpoint}{path} answered HTTP {status}")
            if body is None:
                return Failure(FailureKind.BAD_RESPONSE,
                               f"{self.shown_endpoint}{path} answered more than {MAX_ANSWER_BYTES >> 20} MB "
                               f"or past {deadline_s:.0f} s")
            try:
                return json.loads(body)
            except (ValueError, RecursionError):  # RecursionError: arrays nested past Python's depth
                return Failure(FailureKind.BAD_RESPONSE,
                               f"{self.shown_endpoint}{path} answered something that is not JSON")
        return Failure(FailureKind.BACKEND_UNREACHABLE,
                       last or f"{self.shown_endpoint} did not answer within {deadline_s:.0f} s")

    def count(self, text: str) -> int | Failure:
        with self._lock:
            cached = self._counts.get(text)
        if cached is not None:
            return cached
        tokens = self.tokens(text)
        if isinstance(tokens, Failure):
            return tokens
        with self._lock:
            self._counts[text] = len(tokens)
            if len(self._counts) > 4096:
                self._counts.popitem(last=False)
        return len(tokens)

    def tokens(self, text: str) -> list[int] | Failure:
        """The server's token ids for `text` (no special tokens added)."""
        paths = [self._tokenize_path] if self._tokenize_path else ["/tokenize", "/extras/tokenize"]
        for path in paths:
            payload = {"model": self.model, "prompt": text, "add_special_tokens": False}
            if path != "/tokenize":
                payload = {"input": text}
            answer = self._request("POST", path, payload, 10.0)
            if isinstance(answer, Failure):
                if answer.kind == FailureKind.BACKEND_ERROR:
                    continue  # this server has the other tokenize route
                return answer
            tokens = answer.get("tokens") if isinstance(answer, dict) else None
            if not isinstance(tokens, list):
                return Failure(FailureKind.BAD_RESPONSE, f"{self.shown_endpoint}{path} answered without tokens")
            self._tokenize_path = path
            return tokens
        return Failure(FailureKind.BACKEND_ERROR,
                       f"{self.shown_endpoint} offers neither /tokenize nor /extras/tokenize")

    def generate(self, request: GenerationRequest) -> Generation | Failure:
        """`request.forced_start` goes as a header only the embedded model's child reads
        (forced_start.FORCED_START_HEADER): the engine asks it only of a backend that
        `constrains_start`, which this one alone does not."""
        started = time.perf_counter()
        deadline = started + request.deadline_s
        payload = {
            "model": self.model, "prompt": request.prompt, "max_tokens": request.max_tokens,
            "temperature": 0.0, "stream": True, "stop": list(request.stop) or None, **self._sampling,
            **({"logprobs": 0} if self._asks_logprobs else {}),
        }
        headers = {**JSON_HEADERS, **(PREFIX_ONLY if request.prefix_only else {}), **start_header(request.forced_start)}
        pieces: list[str] = []
        logprobs: list = []
        finish = ""  # a stream that ends without a finish reason was cut by the server
        usage: dict = {}
        last = ""
        # Whether the last try got an error status: a server reachable, and failing.
        server_failed = False
        refused_logprobs = False  # the server refused a request with `logprobs` in it
        # The whole answer, whatever pace it comes at; a read waiting on the server (reading the
        # prompt before the first token) also ends once the request is cancelled.
        with ShuttableClient.until(deadline, request.cancel):
            attempt = -1
            # One more try than the retries once the server refused the log-probabilities field.
            while (attempt := attempt + 1) < self._retries + 1 + int(refused_logprobs):
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    return Failure(FailureKind.BACKEND_TIMEOUT,
                                   f"{self.shown_endpoint} did not answer within {request.deadline_s:.0f} s")
                if self._killed.is_set():
                    return _stopped(self.shown_endpoint)
                if request.cancel is not None and request.cancel():
                    finish = "cancelled"  # the editor moved on before (or between) the tries: none is sent
                    break
                try:
                    with self._client.stream("POST", self.endpoint + "/v1/completions", content=json_body(payload),
                                             headers=headers,
                                             timeout=httpx.Timeout(remaining, connect=min(3.0, remaining))) as response:
                        status = response.status_code
                        # Read here for an HTTP 500 to a request with them: is it their refusal?
                        reason = _reason(response)[0] if status == 500 and "logprobs" in payload else None
                        if "logprobs" in payload and _refuses_the_field(status, reason or ""):
                            # A server without them (llama-cpp-python's with logits_all off answers
                            # 500, naming them): ask again at once without them, and no more once
                            # that is answered. A refusal of something else (vLLM's HTTP 400 for a
                            # prompt past its window) switched them off for the whole session before.
                            refused_logprobs = True
                            del payload["logprobs"]
                            continue
                        if status in RETRYABLE_STATUS:
                            # With the reason its body gives ("answered HTTP 500" alone: why?).
                            last = _refusal(response, self.shown_endpoint)[0].message if reason is None else \
                                f"{self.shown_endpoint} answered HTTP {status}" + (f": {reason}" if reason else "")
                            server_failed = True
                            self._gone.wait(min(0.2 * (2**attempt), max(remaining, 0)))
                            continue
                        if response.status_code >= 400:
                            return self._refused(response)
                        if refused_logprobs:
                            self._asks_logprobs = False
                        received = 0  # characters of completion text
                        for line in _sse_lines(response, deadline):
                            if line is None:  # the deadline passed inside a line
                                finish = "deadline"
                                break
                            if not line.startswith("data:"):
                                if time.perf_counter() > deadline:
                                    finish = "deadline"
                                    break
                                continue
                            data = line[5:].strip()
                            if data == "[DONE]":
                                break
                            try:
                                event = json.loads(data)
                                choices = event.get("choices") or []
                                if event.get("usage"):
                                    usage = event["usage"]
                                    if not isinstance(usage, dict):
                                        raise TypeError("usage is not an object")
                                if choices:
                                    text = choices[0].get("text") or ""
                                    if not isinstance(text, str):
                                        raise TypeError("a completion's text is not a string")
                                    # llama-cpp-python's server ends with a chunk holding the finish
                                    # reason and no text: no token, so no piece (the pieces count them).
                                    if text or not choices[0].get("finish_reason"):
                                        pieces.append(text)
                                    logprobs.extend(token_logprobs(choices[0]))
                                    received += len(text)
                                    if choices[0].get("finish_reason"):
                                        finish = choices[0]["finish_reason"]
                            except (ValueError, AttributeError, TypeError, RecursionError):
                                return Failure(FailureKind.BAD_RESPONSE,
                                               f"{self.shown_endpoint} streamed something that is not a completion")
                            if len(pieces) > request.max_tokens + STREAM_SLACK_CHUNKS or \
                                    received > MAX_CHARS_PER_TOKEN * request.max_tokens:
                                # A server that ignores max_tokens (or sends one endless chunk) is cut here.
                                text = "".join(pieces)[: MAX_CHARS_PER_TOKEN * request.max_tokens]
                                pieces, finish = [text], "length"
                                break
                            stopped = early_stop(request, "".join(pieces), deadline)
                            if stopped is not None:
                                finish = stopped
                                break
                        if not finish and not pieces and "logprobs" in payload and not self._killed.is_set() \
                                and self._refuses_logprobs(deadline):
                            # llama-cpp-python's server started with --logits_all False answers a
                            # streamed request for them with 200 and an empty stream (its error
                            # comes after the status): the same refusal, the same retry.
                            self._asks_logprobs = False
                            refused_logprobs = True
                            del payload["logprobs"]
                            continue
                        if not finish and not pieces and self.fails_late and not self._killed.is_set() \
                                and not (request.cancel is not None and request.cancel()):
                            # llama-cpp-python's server fails a streamed request after its status
                            # line (a prompt past its window: an empty stream, the reason in its
                            # log only); unstreamed, it answers with the reason, or the answer.
                            late = self._unstreamed(payload, deadline)
                            if isinstance(late, Failure):
                                return late
                            if late is not None:
                                pieces, finish, usage, logprobs = [late[0]], late[1], late[2], late[3]
                    break
                except _OversizedLine:
                    return Failure(FailureKind.BAD_RESPONSE,
                                   f"{self.shown_endpoint} streamed a line longer than {MAX_LINE_BYTES} bytes")
                except httpx.TimeoutException:
                    if request.cancel is not None and request.cancel():
                        finish = "cancelled"  # http_sockets ended the read waiting on the server
                        break
                    if pieces:
                        finish = "deadline"
                        break
                    return Failure(FailureKind.BACKEND_TIMEOUT,
                                   f"{self.shown_endpoint} did not answer within {request.deadline_s:.0f} s")
                except httpx.HTTPError as error:
                    if pieces:
                        return Failure(FailureKind.BACKEND_ERROR,
                                       f"{self.shown_endpoint} dropped the stream ({error.__class__.__name__})")
                    if _tunnel_refused(error):
                        return _proxy_refusal(f"{self.shown_endpoint}/v1/completions")
                    last, server_failed = self._cannot_reach(error), False
                    self._gone.wait(min(0.2 * (2**attempt), max(deadline - time.perf_counter(), 0)))
            else:
                if server_failed:
                    return Failure(FailureKind.BACKEND_ERROR, last)
                return Failure(FailureKind.BACKEND_UNREACHABLE, last or f"cannot reach {self.shown_endpoint}")
        if self._killed.is_set() and not finish:
            return _stopped(self.shown_endpoint)
        if not finish:
            return Failure(FailureKind.BACKEND_INTERRUPTED,
                           f"{self.shown_endpoint} ended the answer without a finish reason (a "
                           "llama-cpp-python server interrupts a request when another "
                           "arrives unless started with --interrupt_requests False)")
        prompt_tokens = usage.get("prompt_tokens")
        if not isinstance(prompt_tokens, int):
            # Not for a cancelled call: another round trip to the server the editor no longer waits on.
            counted = self.count(request.prompt) if finish != "cancelled" else 0
            prompt_tokens = counted if isinstance(counted, int) else 0
        details = usage.get("prompt_tokens_details") or {}
        # Counts the server got wrong ("lots", 2.5, a list) are not taken: ours, or none.
        completion_tokens = usage.get("completion_tokens")
        if type(completion_tokens) is not int or not completion_tokens:
            completion_tokens = len(pieces)
        cached_tokens = details.get("cached_tokens") if isinstance(details, dict) else 0
        return Generation(
            text="".join(pieces), prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            cached_tokens=cached_tokens if type(cached_tokens) is int else 0,
            finish_reason=finish, seconds=time.perf_counter() - started, mean_logprob=mean_of(logprobs),
        )

    def _unstreamed(self, payload: dict, deadline: float) -> tuple[str, str, dict, list] | Failure | None:
        """`payload` asked again without streaming: (text, finish reason, usage, log-probabilities),
        the server's refusal (a window it names is learned), or None (no answer of that shape)."""
        try:
            with self._client.stream("POST", self.endpoint + "/v1/completions",
                                     content=json_body({**payload, "stream": False}), headers=JSON_HEADERS,
                                     timeout=httpx.Timeout(max(deadline - time.perf_counter(), 0.1),
                                                           connect=3.0)) as response:
                if response.status_code >= 400:
                    return self._refused(response)
                answer = json.loads(_capped_body(response, deadline) or b"null")
        except (httpx.HTTPError, ValueError, RecursionError):
            return None
        choices = answer.get("choices") if isinstance(answer, dict) else None
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
        text, finish, usage = choice.get("text"), choice.get("finish_reason"), answer.get("usage") if choice else None
        if not isinstance(text, str) or not isinstance(finish, str) or not finish:
            return None
        return text, finish, usage if isinstance(usage, dict) else {}, token_logprobs(choice)

    def _refused(self, response: httpx.Response) -> Failure:
        """The failure a refused completion gives; the window it names, if any, is learned."""
        failure, window = _refusal(response, f"{self.shown_endpoint}/v1/completions")
        if window:
            # The server's own word on its window: the next prompt is fitted to it
            # (CompletionEngine), where the user's setting asked for more.
            self.context_tokens = window
        return failure

    def _refuses_logprobs(self, deadline: float) -> bool:
        """Whether the server refuses log-probabilities, asked without streaming, where a refusal
        is a status (a stream that ended empty may also be a request the server interrupted)."""
        payload = {"model": self.model, "prompt": "\n", "max_tokens": 1, "temperature": 0.0, "logprobs": 0}
        for _ in range(2):  # the first may take the connection the server closed after its error
            try:
                answer = self._client.post(self.endpoint + "/v1/completions", json=payload, timeout=httpx.Timeout(
                    max(deadline - time.perf_counter(), 0.1), connect=3.0))
            except httpx.TransportError:
                continue
            except httpx.HTTPError:
                return False
            return _refuses_the_field(answer.status_code, _reason(answer)[0] if answer.status_code == 500 else "")
        return False

    def give_up(self) -> None:
        """From any thread: the server is gone for good (its process was killed), so calls in
        progress fail at once instead of waiting between their retries."""
        self._gone.set()

    def kill(self) -> None:
        """From any thread, when the session ends: no call tries again, and one waiting on the
        server returns now with a failure (its connection is shut; over TLS, at its deadline)."""
        self._killed.set()
        self._gone.set()
        self._shuttable.shut()

    def close(self) -> None:
        self._client.close()
