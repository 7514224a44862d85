"""Local HTTP servers the tests point backends at: real sockets, answers of our choosing."""

from __future__ import annotations

import http.server
import json
import threading


def answer_json(handler: http.server.BaseHTTPRequestHandler, payload: object, status: int = 200) -> None:
    """An answer with `payload` as its JSON body (200 unless `status` says otherwise)."""
    body = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def answer_stream(handler: http.server.BaseHTTPRequestHandler, text: str, prompt: str, completion_tokens: int) -> None:
    """A completions endpoint's streamed answer: `text` in one event that finishes it ("stop"),
    the usage counting `prompt` at 4 characters a token, then the stream's end."""
    event = {"choices": [{"text": text, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": completion_tokens}}
    body = f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n".encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class GarbageHandler(http.server.BaseHTTPRequestHandler):
    """Answers every request with HTML where JSON is expected."""

    def do_GET(self):  # noqa: N802
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"<html>not json</html>")

    do_POST = do_GET

    def log_message(self, *args):
        pass


def serve_http(handler: type[http.server.BaseHTTPRequestHandler]) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A server on a free loopback port, answering on a daemon thread, and its base URL; the
    caller shuts it down."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"
