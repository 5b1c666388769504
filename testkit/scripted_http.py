"""What the scripted model APIs (testkit.scripted_anthropic, scripted_gemini, scripted_openai)
share: a quiet HTTP/1.1 handler that answers JSON or server-sent events, and the server on a free
loopback port. Each server draws a nonce its ids carry, so ids never repeat across runs, as a
real API's do not."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def nonce() -> str:
    """A fresh id part for one scripted server's answers."""
    return uuid.uuid4().hex[:12]


class ScriptedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def send(self, code: int, body: bytes, content_type: str, **headers: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def read_json(self) -> dict[str, Any]:
        """The request body as a JSON object; ``{}`` for anything else."""
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            request = json.loads(raw or b"{}")
        except ValueError:
            return {}
        return request if isinstance(request, dict) else {}


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler], path: str = "") -> Iterator[str]:
    """``handler`` on a free loopback port; yields its base URL (with ``path``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{path}"
    finally:
        server.shutdown()
        server.server_close()
