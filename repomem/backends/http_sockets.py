"""An httpx client whose calls in flight another thread can end at once.

Closing a socket does not wake a thread blocked reading it; shutting it down does (the read
returns end of file at once). httpx offers no handle on its sockets, so its transport's connection
pool (httpcore's, with httpx's default limits) is given httpcore's own network backend, wrapped to
remember the TCP sockets it opens. Over TLS the socket read is the TLS layer's, which the shutdown
does not reach: such a call still ends at its deadline (tests/unit/test_backends.py times a plain
one).
"""

from __future__ import annotations

import contextlib
import functools
import socket
import ssl
import threading
import weakref
from typing import Any

import httpcore
import httpx


class _RememberedSockets(httpcore.SyncBackend):
    def __init__(self) -> None:
        super().__init__()
        self._open: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self._lock = threading.Lock()

    def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        stream = super().connect_tcp(*args, **kwargs)
        opened = stream.get_extra_info("socket")
        if isinstance(opened, socket.socket):
            with self._lock:
                self._open.add(opened)
        return stream

    def shut(self) -> None:
        with self._lock:
            sockets = list(self._open)
        for opened in sockets:
            with contextlib.suppress(OSError):  # closed meanwhile, or never connected
                opened.shutdown(socket.SHUT_RDWR)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default TLS context (certifi's authorities, or SSL_CERT_FILE's), built once a process:
    ~25 ms each, which every backend's client paid (and the transport below would pay twice)."""
    return httpx.create_ssl_context()


class _Transport(httpx.HTTPTransport):
    """httpx's own transport (its defaults), its connection pool given the remembering backend."""

    def __init__(self, sockets: _RememberedSockets) -> None:
        context = _tls_context()
        super().__init__(verify=context)
        self._pool = httpcore.ConnectionPool(  # httpx.Limits' defaults
            ssl_context=context, max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0,
            network_backend=sockets)


class ShuttableClient:
    """`client`: an httpx.Client; `shut()`, from any thread: every read waiting on one of its
    plain-TCP connections ends now (httpx raises a transport error in the calling thread, or the
    stream ends)."""

    def __init__(self, **client_options: Any) -> None:
        self._sockets = _RememberedSockets()
        self.client = httpx.Client(transport=_Transport(self._sockets), **client_options)

    def shut(self) -> None:
        self._sockets.shut()
