"""An httpx client whose calls in flight another thread can end at once.

Closing a socket does not wake a thread blocked reading it; shutting it down does (the read
returns end of file at once). httpx offers no handle on its sockets, so its transport's connection
pool (httpcore's, with httpx's default limits) is given httpcore's own network backend, wrapped to
remember the TCP sockets it opens. Over TLS the socket read is the TLS layer's, which the shutdown
does not reach: such a call still ends at its deadline (tests/unit/test_backends.py times a plain
one).

Every call also has one deadline for the whole of it (`ShuttableClient.until`): httpx's timeouts
are per operation, so a server writing its answer a byte at a time restarted the read timeout with
each byte and held a call of 3 s for over a minute. The remembering backend's streams bound each
read, write and TLS handshake by what is left of the calling thread's deadline (httpx reads in the
calling thread, so a kept-alive connection serves whichever call holds it).

A call may also be given a cancel check (`ShuttableClient.until(deadline, cancel)`): a read then
waits in slices of CANCEL_POLL_S and ends with httpx's read timeout once the check says so, so a
completion the editor no longer wants stops while the server is still reading its prompt, not at
its first token.

A model server behind a proxy is reached through the one the environment names (`https_proxy`,
`http_proxy`, `all_proxy`, `no_proxy`, as curl and pip read them): httpx reads them only for the
transport it makes itself, so every endpoint was called directly. A loopback host is never
proxied (the embedded model's own server is one, with its key in every request).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import httpcore
import httpx

_calls = threading.local()  # .deadline: the calling thread's call's end, time.perf_counter() seconds; .cancel
# How often a read waiting on the server asks the call's cancel check.
CANCEL_POLL_S = 0.05


def _bounded(timeout: float | None, late: type[Exception]) -> float | None:
    """`timeout` (seconds, None: none) cut to what is left of this thread's call; `late` raised
    where nothing is."""
    deadline = getattr(_calls, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.perf_counter()
    if left <= 0:
        raise late("the call's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every operation ends by the calling thread's call deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        cancel = getattr(_calls, "cancel", None)
        if cancel is None:
            return self._stream.read(max_bytes, _bounded(timeout, httpcore.ReadTimeout))
        started = time.perf_counter()
        while True:
            if cancel():
                raise httpcore.ReadTimeout("the call was cancelled")
            left = _bounded(None if timeout is None else timeout - (time.perf_counter() - started),
                            httpcore.ReadTimeout)
            if left is not None and left <= 0:
                raise httpcore.ReadTimeout("timed out")
            try:
                # A socket read that timed out leaves the socket as it was: the next slice reads on.
                return self._stream.read(max_bytes, CANCEL_POLL_S if left is None else min(left, CANCEL_POLL_S))
            except httpcore.ReadTimeout:
                if left is not None and left <= CANCEL_POLL_S:
                    raise

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _bounded(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname,
                                                      _bounded(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _RememberedSockets(httpcore.SyncBackend):
    def __init__(self) -> None:
        super().__init__()
        self._open: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self._lock = threading.Lock()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        stream = super().connect_tcp(host, port, _bounded(timeout, httpcore.ConnectTimeout), local_address,
                                     socket_options)
        opened = stream.get_extra_info("socket")
        if isinstance(opened, socket.socket):
            with self._lock:
                self._open.add(opened)
        return _DeadlineStream(stream)

    def shut(self) -> None:
        with self._lock:
            sockets = list(self._open)
        for opened in sockets:
            with contextlib.suppress(OSError):  # closed meanwhile, or never connected
                opened.shutdown(socket.SHUT_RDWR)


# The authorities httpx's default TLS context trusts: SSL_CERT_FILE's, else SSL_CERT_DIR's, else certifi's.
TLS_VARIABLES = ("SSL_CERT_FILE", "SSL_CERT_DIR")
_TLS_KEPT = 4  # contexts kept (one per distinct setting a resident process's clients bring)
_tls_contexts: dict[tuple, ssl.SSLContext] = {}
_tls_lock = threading.Lock()


def _stamp(path: str) -> tuple[int, int] | None:
    """What tells a certificate file (or folder) edited or replaced: its mtime and size."""
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        return None
    return found.st_mtime_ns, found.st_size


def _tls_context() -> ssl.SSLContext:
    """httpx's default TLS context for the environment the command runs with now: ~25 ms to build,
    which every backend's client paid (and the transport below would pay twice), so it is kept,
    keyed by SSL_CERT_FILE's and SSL_CERT_DIR's values and their files' stamps. A resident process
    (the daemon runs each client's command with that client's environment) kept the first
    command's authorities for every later one, and a renewed certificate file until it exited."""
    key = tuple((value, _stamp(value)) if value else ("", None)
                for value in (os.environ.get(name, "") for name in TLS_VARIABLES))
    with _tls_lock:
        context = _tls_contexts.get(key)
    if context is not None:
        return context
    context = httpx.create_ssl_context()  # reads the same variables, now
    with _tls_lock:
        _tls_contexts[key] = context
        while len(_tls_contexts) > _TLS_KEPT:
            del _tls_contexts[next(iter(_tls_contexts))]  # the oldest
    return context


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for `url` (its scheme's, else `all_proxy`), or None: none
    named, the host listed in `no_proxy`, or a loopback host (`localhost`, 127.0.0.0/8, ::1)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or not host or _is_loopback(host):
        return None
    try:
        port = parts.port
    except ValueError:
        port = None
    if _bypassed(host, port, proxies.get("no", "")):
        return None
    proxy = proxy if "://" in proxy else f"http://{proxy}"  # `proxy:3128`, as curl reads it
    # A SOCKS proxy (`all_proxy=socks5://...`) cannot be spoken here (httpx needs socksio for it):
    # an HTTP request sent to it failed a server that is reached directly, as before proxies.
    return proxy if urllib.parse.urlsplit(proxy).scheme in ("http", "https") else None


def _bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    """Whether `no_proxy` (comma-separated, as curl reads it) exempts `host`: `*`; a name, which
    also covers its subdomains (`corp` and `.corp` both take `vllm.corp`); an IP address, bracketed
    or not for IPv6; a CIDR range (`10.0.0.0/8`, `fd00::/8`); any of them with `:port` to exempt that
    port only. (urllib's reading matched neither ranges nor unbracketed IPv6 addresses.)"""
    host = host.lower().rstrip(".")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in (part.strip().lower() for part in no_proxy.split(",")):
        if entry == "*":
            return True
        entry_port = None
        bracketed = entry.startswith("[") and "]" in entry
        if bracketed:
            entry, _, rest = entry[1:].partition("]")
            entry_port = rest[1:] if rest.startswith(":") else None
        elif entry.count(":") == 1:  # a name or IPv4 address with a port (IPv6 has more colons)
            entry, _, entry_port = entry.partition(":")
        if entry_port is not None and (not entry_port.isdigit() or int(entry_port) != port):
            continue
        entry = entry.rstrip(".")
        if not entry:
            continue
        if address is not None:
            with contextlib.suppress(ValueError):
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            continue
        name = entry.lstrip(".")
        if host == name or host.endswith("." + name):
            return True
    return False


def _is_loopback(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Transport(httpx.HTTPTransport):
    """httpx's own transport (its defaults), its connection pool given the remembering backend;
    through `proxy` (a URL, credentials in it) when one is given."""

    def __init__(self, sockets: _RememberedSockets, proxy: str | None = None, tls: bool = True) -> None:
        # `tls`: whether any connection may speak TLS (an https:// endpoint or proxy). Where none
        # does (the embedded model's loopback server), no certificate authorities are read: an
        # SSL_CERT_FILE naming a missing file made every completion an internal error.
        context = _tls_context() if tls else None
        super().__init__(verify=context if context is not None else False)
        limits: dict[str, Any] = {  # httpx.Limits' defaults
            "ssl_context": context, "max_connections": 100, "max_keepalive_connections": 20,
            "keepalive_expiry": 5.0, "network_backend": sockets}
        if proxy is None:
            self._pool = httpcore.ConnectionPool(**limits)
            return
        parts = urllib.parse.urlsplit(proxy)
        auth = (urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or "")) \
            if parts.username is not None else None
        bare = urllib.parse.urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))
        self._pool = httpcore.HTTPProxy(proxy_url=bare, proxy_auth=auth,  # TLS to the proxy for https:// ones
                                        proxy_ssl_context=context if parts.scheme == "https" else None, **limits)


class ShuttableClient:
    """`client`: an httpx.Client for calls to `endpoint` (which decides the proxy, if any);
    `shut()`, from any thread: every read waiting on one of its plain-TCP connections ends now
    (httpx raises a transport error in the calling thread, or the stream ends)."""

    def __init__(self, endpoint: str, **client_options: Any) -> None:
        self._sockets = _RememberedSockets()
        self.proxy = proxy_for(endpoint)
        tls = any(url.lower().startswith("https://") for url in (endpoint, self.proxy or ""))
        self.client = httpx.Client(transport=_Transport(self._sockets, self.proxy, tls), **client_options)

    def shut(self) -> None:
        self._sockets.shut()

    @staticmethod
    @contextlib.contextmanager
    def until(deadline: float, cancel: Callable[[], bool] | None = None) -> Iterator[None]:
        """The calls this thread makes inside end by `deadline` (time.perf_counter() seconds),
        whatever pace the server sends at, and, with `cancel`, soon after it answers True: httpx
        raises its timeout error."""
        outer, outer_cancel = getattr(_calls, "deadline", None), getattr(_calls, "cancel", None)
        _calls.deadline = deadline if outer is None else min(outer, deadline)
        _calls.cancel = cancel or outer_cancel
        try:
            yield
        finally:
            _calls.deadline, _calls.cancel = outer, outer_cancel
