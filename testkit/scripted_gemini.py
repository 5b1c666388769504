"""A scripted Gemini API on loopback, for running gemini-cli offline: each streamed request that
offers tools is answered with the next step of a script (a ``run_shell_command`` call, then a
final text); other requests (its side queries: next speaker, loop checks) with a short JSON
text."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_USAGE = {"promptTokenCount": 2210, "candidatesTokenCount": 58, "totalTokenCount": 2268}


def _answered(request: dict[str, Any]) -> int:
    """The calls already answered in the conversation: the script's step."""
    count = 0
    for content in request.get("contents", []):
        for part in content.get("parts", []) if isinstance(content, dict) else []:
            if isinstance(part, dict) and "functionResponse" in part:
                count += 1
    return count


def _response(request: dict[str, Any], commands: list[str], streamed: bool) -> dict[str, Any]:
    step = _answered(request)
    if streamed and request.get("tools") and step < len(commands):
        call = {"name": "run_shell_command", "args": {"command": commands[step]}}
        parts: list[dict[str, Any]] = [{"functionCall": call}]
    elif streamed:
        parts = [{"text": "The service does not answer."}]
    else:  # a side query asking for JSON (who speaks next, is this a loop)
        text = json.dumps(
            {"next_speaker": "user", "reasoning": "done", "is_stuck": False, "confidence": 0.0}
        )
        parts = [{"text": text}]
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
    return {"candidates": [candidate], "usageMetadata": _USAGE, "modelVersion": "gemini-2.5-pro"}


def _handler(commands: list[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, body: bytes, content_type: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._send(b'{"models": []}', "application/json")

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                request = json.loads(raw)
            except ValueError:
                request = {}
            if not isinstance(request, dict):
                request = {}
            path = self.path.split("?", 1)[0]
            if path.endswith(":countTokens"):
                self._send(b'{"totalTokens": 2210}', "application/json")
            elif path.endswith(":streamGenerateContent"):
                answer = _response(request, commands, streamed=True)
                self._send(f"data: {json.dumps(answer)}\r\n\r\n".encode(), "text/event-stream")
            else:
                answer = _response(request, commands, streamed=False)
                self._send(json.dumps(answer).encode(), "application/json")

    return Handler


@contextmanager
def scripted_gemini(commands: list[str]) -> Iterator[str]:
    """The API on a free loopback port; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(commands))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
