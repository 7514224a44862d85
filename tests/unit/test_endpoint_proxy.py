"""A model server reached through the proxy the environment names (repomem/backends/http_sockets.py):
httpx reads `http_proxy` and the others only for a transport of its own, so every endpoint was called
directly, and a server only a proxy reaches (a hosted one from behind a company's proxy) was never
reached. The proxy here is a small forwarding HTTP proxy of this module's, which also resolves a
host name the machine does not know (as a company's proxy resolves internal names): reaching that
name at all proves the request went through it."""

from __future__ import annotations

import base64
import http.client
import http.server
import urllib.parse

import pytest

from repomem.backends.http_sockets import proxy_for
from repomem.backends.openai_http import OpenAIBackend
from repomem.failures import Failure
from tests.http_servers import serve_http
from tests.unit.test_server_window import _request, _server

HIDDEN_HOST = "model.invalid"  # resolves nowhere (RFC 2606): only the proxy knows where it is


class _ForwardingProxy(http.server.BaseHTTPRequestHandler):
    """Forwards absolute-form requests for HIDDEN_HOST:port to 127.0.0.1:port; with `credentials`
    set, answers 407 to a request without them. Records (method, URL, Proxy-Authorization, the
    Authorization header it passed on)."""

    credentials = ""
    seen: list[tuple[str, str, str, str]] = []

    def _forward(self) -> None:
        target = urllib.parse.urlsplit(self.path)
        offered = self.headers.get("Proxy-Authorization", "")
        type(self).seen.append((self.command, self.path, offered, self.headers.get("Authorization", "")))
        wanted = "Basic " + base64.b64encode(type(self).credentials.encode()).decode()
        if type(self).credentials and offered != wanted:
            self.send_response(407)
            self.send_header("Proxy-Authenticate", 'Basic realm="proxy"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        assert target.hostname == HIDDEN_HOST
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        upstream = http.client.HTTPConnection("127.0.0.1", target.port, timeout=10)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-authorization", "host",
                                                                             "proxy-connection")}
        upstream.request(self.command, target.path + (f"?{target.query}" if target.query else ""), body, headers)
        answer = upstream.getresponse()
        payload = answer.read()
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)
        upstream.close()

    do_GET = do_POST = _forward  # noqa: N815

    def log_message(self, *args):
        pass


def _without_proxy_variables(monkeypatch) -> None:
    """None of the proxy variables this machine's environment may hold, in either case."""
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture
def proxied_model(monkeypatch):
    """(proxy handler class, the model server's URL under the hidden name, the proxy's address)."""
    _without_proxy_variables(monkeypatch)
    _, model, model_url = _server(window=2048)
    proxy_class = type("Proxy", (_ForwardingProxy,), {"seen": [], "credentials": ""})
    proxy, proxy_url = serve_http(proxy_class)
    port = urllib.parse.urlsplit(model_url).port
    try:
        yield proxy_class, f"http://{HIDDEN_HOST}:{port}", urllib.parse.urlsplit(proxy_url).netloc
    finally:
        proxy.shutdown()
        model.shutdown()


def test_a_server_only_the_proxy_reaches_is_reached_through_it_with_its_credentials(proxied_model, monkeypatch):
    proxy_class, endpoint, proxy_address = proxied_model
    proxy_class.credentials = "build:s3cret pass"
    monkeypatch.setenv("http_proxy", f"http://build:s3cret%20pass@{proxy_address}")
    backend = OpenAIBackend.connect(endpoint, api_key="sk-model", deadline_s=10)
    assert not isinstance(backend, Failure), backend
    try:
        answer = backend.generate(_request("def total(order):\n    return "))
    finally:
        backend.close()
    assert not isinstance(answer, Failure) and answer.text == "compute_tax(amount_cents, tax_class)"
    methods = [(method, url.split(f"{HIDDEN_HOST}:", 1)[1].split("/", 1)[1]) for method, url, _, _ in proxy_class.seen]
    assert ("GET", "v1/models") in methods and ("POST", "v1/completions") in methods
    # The proxy's credentials go to the proxy, the model server's key to the model server.
    assert {(auth, key) for _, _, auth, key in proxy_class.seen} == {
        ("Basic " + base64.b64encode(b"build:s3cret pass").decode(), "Bearer sk-model")}


def test_a_proxy_that_refuses_is_said_to_be_the_proxy_without_its_password(proxied_model, monkeypatch):
    """A 407 read as "answered HTTP 407", as if the model server had refused."""
    proxy_class, endpoint, proxy_address = proxied_model
    proxy_class.credentials = "build:right"
    monkeypatch.setenv("HTTP_PROXY", f"http://build:wrong@{proxy_address}")
    refused = OpenAIBackend.connect(endpoint, deadline_s=3)
    assert isinstance(refused, Failure) and refused.kind == "backend-auth"
    assert refused.message.startswith("the proxy refused the call to") and "HTTP 407" in refused.message
    assert "wrong" not in refused.message
    # A proxy nobody answers at is named in the failure (its password hidden).
    monkeypatch.setenv("HTTP_PROXY", "http://build:wrong@127.0.0.1:1")
    unreachable = OpenAIBackend.connect(endpoint, deadline_s=1)
    assert isinstance(unreachable, Failure) and unreachable.kind == "backend-unreachable", unreachable
    assert "through the proxy http://build:***@127.0.0.1:1" in unreachable.message


@pytest.mark.parametrize(("variables", "url", "proxy"), [
    ({"http_proxy": "http://proxy:3128"}, "http://gpu-box:8000", "http://proxy:3128"),
    ({"HTTP_PROXY": "proxy:3128"}, "http://gpu-box:8000", "http://proxy:3128"),  # curl's form without a scheme
    ({"http_proxy": "http://proxy:3128"}, "https://api.example.com", None),  # https has its own
    ({"https_proxy": "http://proxy:3128"}, "https://api.example.com/v1", "http://proxy:3128"),
    ({"all_proxy": "http://proxy:3128"}, "https://api.example.com", "http://proxy:3128"),
    ({"http_proxy": "http://proxy:3128", "no_proxy": "gpu-box,.corp"}, "http://gpu-box:8000", None),
    ({"http_proxy": "http://proxy:3128", "no_proxy": "gpu-box,.corp"}, "http://vllm.corp:8000", None),
    ({"http_proxy": "http://proxy:3128"}, "http://127.0.0.1:8000", None),  # loopback: the embedded model's server
    ({"http_proxy": "http://proxy:3128"}, "http://localhost:8000", None),
    ({"http_proxy": "http://proxy:3128"}, "http://[::1]:8000", None),
    ({}, "http://gpu-box:8000", None),
    # no_proxy as curl reads it: ranges, IPv6 with or without brackets, ports, `*`, a name's subdomains.
    ({"http_proxy": "http://proxy:3128", "no_proxy": "10.0.0.0/8"}, "http://10.2.3.4:8000", None),
    ({"http_proxy": "http://proxy:3128", "no_proxy": "10.0.0.0/8"}, "http://11.2.3.4:8000", "http://proxy:3128"),
    ({"http_proxy": "http://proxy:3128", "no_proxy": "fd00::1"}, "http://[fd00::1]:8000", None),
    ({"http_proxy": "http://proxy:3128", "no_proxy": "[fd00::1]:8000"}, "http://[fd00::1]:8000", None),
    ({"http_proxy": "http://proxy:3128", "no_proxy": "fd00::/8"}, "http://[fd12::5]:8000", None),
    ({"http_proxy": "http://proxy:3128", "no_proxy": "gpu-box:9000"}, "http://gpu-box:8000", "http://proxy:3128"),
    ({"http_proxy": "http://proxy:3128", "no_proxy": "gpu-box:8000"}, "http://gpu-box:8000", None),
    ({"http_proxy": "http://proxy:3128", "no_proxy": "corp"}, "http://vllm.corp:8000", None),
    ({"http_proxy": "http://proxy:3128", "no_proxy": "box"}, "http://gpu-box:8000", "http://proxy:3128"),
    ({"http_proxy": "http://proxy:3128", "NO_PROXY": " * "}, "http://gpu-box:8000", None),
    # A SOCKS proxy is not one an HTTP request can be sent to: the server is called directly, as before.
    ({"all_proxy": "socks5://127.0.0.1:1080"}, "http://gpu-box:8000", None),
    ({"http_proxy": "socks5h://proxy:1080"}, "http://gpu-box:8000", None),
])
def test_the_proxy_of_an_endpoint_is_the_environments_as_curl_reads_it(monkeypatch, variables, url, proxy):
    _without_proxy_variables(monkeypatch)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert proxy_for(url) == proxy


def test_the_loopback_server_of_the_embedded_model_is_never_proxied(monkeypatch):
    """A proxy in the environment must not see the embedded model's requests (its per-start key)."""
    _without_proxy_variables(monkeypatch)
    monkeypatch.setenv("http_proxy", "http://proxy.invalid:3128")
    _, server, url = _server(window=2048)
    try:
        backend = OpenAIBackend.connect(url, deadline_s=5)
        assert not isinstance(backend, Failure), backend
        backend.close()
    finally:
        server.shutdown()


class _RefusingTunnels(http.server.BaseHTTPRequestHandler):
    """A proxy that wants other credentials for every tunnel (CONNECT, an https:// endpoint's)."""

    def do_CONNECT(self):  # noqa: N802
        self.send_response(407)
        self.send_header("Proxy-Authenticate", 'Basic realm="proxy"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_tunnel_the_proxy_refuses_is_said_to_be_the_proxys_refusal(monkeypatch):
    """An https:// endpoint goes through a tunnel: the proxy's 407 there was "cannot reach ...
    (ProxyError)", asked again until the deadline, with no word of credentials."""
    _without_proxy_variables(monkeypatch)
    proxy, proxy_url = serve_http(_RefusingTunnels)
    try:
        monkeypatch.setenv("https_proxy", f"http://build:wrong@{urllib.parse.urlsplit(proxy_url).netloc}")
        refused = OpenAIBackend.connect(f"https://{HIDDEN_HOST}", deadline_s=3)
    finally:
        proxy.shutdown()
    assert isinstance(refused, Failure) and refused.kind == "backend-auth", refused
    assert refused.message.startswith("the proxy refused the call to") and "wrong" not in refused.message


def test_the_tls_authorities_follow_the_environment_each_command_runs_with(tmp_path, monkeypatch):
    """The TLS context was built once a process: a daemon running each client's command with that
    client's environment kept the first SSL_CERT_FILE (or none) for every later one, and a renewed
    certificate file until it exited."""
    import certifi

    from repomem.backends import http_sockets

    bundle = open(certifi.where(), encoding="ascii").read()
    end = "-----END CERTIFICATE-----\n"
    first_two = end.join(bundle.split(end)[:2]) + end
    whole, small = tmp_path / "whole.pem", tmp_path / "small.pem"
    whole.write_text(bundle, encoding="ascii")
    small.write_text(first_two.split(end)[0] + end, encoding="ascii")

    def authorities() -> int:
        return http_sockets._tls_context().cert_store_stats()["x509_ca"]

    for name in http_sockets.TLS_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    default = authorities()
    monkeypatch.setenv("SSL_CERT_FILE", str(small))
    assert authorities() == 1
    assert http_sockets._tls_context() is http_sockets._tls_context()  # kept while nothing changes
    monkeypatch.setenv("SSL_CERT_FILE", str(whole))
    assert authorities() == default
    small.write_text(first_two, encoding="ascii")  # the file renewed in place
    monkeypatch.setenv("SSL_CERT_FILE", str(small))
    assert authorities() == 2
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))  # a folder of hashed names: none here, loaded lazily
    assert http_sockets._tls_context() is not http_sockets._tls_contexts.get((("", None), ("", None)))
    monkeypatch.delenv("SSL_CERT_DIR")
    assert authorities() == default
