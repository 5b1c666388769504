"""A scripted OpenAI Responses API on loopback, for running Codex CLI offline: each request
that offers tools is answered with the next step of a script (a shell command through the
shell tool it offers, then a final message), streamed as Server-Sent Events."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _call(tools: list[str], command: str) -> tuple[str, dict[str, Any]]:
    """The shell tool the request offers, with ``command`` as its arguments."""
    if "exec_command" in tools:
        return "exec_command", {"cmd": command}
    if "shell_command" in tools:
        return "shell_command", {"command": command}
    return "shell", {"command": ["bash", "-lc", command]}


def _events(request: dict[str, Any], commands: list[str]) -> list[dict[str, Any]]:
    tools = [t.get("name") for t in request.get("tools", []) if isinstance(t, dict)]
    items = request.get("input", [])
    # the script's step: the calls already answered in the conversation
    step = sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call_output")
    if tools and step < len(commands):
        name, arguments = _call([t for t in tools if isinstance(t, str)], commands[step])
        item: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_{step}",
            "call_id": f"call_{step:02d}",
            "name": name,
            "arguments": json.dumps(arguments),
        }
    else:
        text = {"type": "output_text", "text": "The service does not answer."}
        item = {"type": "message", "role": "assistant", "id": "msg_1", "content": [text]}
    usage = {
        "input_tokens": 3000,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 40,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 3040,
    }
    return [
        {"type": "response.created", "response": {"id": f"resp_{step}"}},
        {"type": "response.output_item.done", "item": item},
        {"type": "response.completed", "response": {"id": f"resp_{step}", "usage": usage}},
    ]


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

        def do_GET(self) -> None:  # the model list
            self._send(b'{"data": [], "models": []}', "application/json")

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                request = json.loads(raw)
            except ValueError:
                request = {}
            if not isinstance(request, dict):
                request = {}
            events = _events(request, commands)
            body = b"".join(
                f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events
            )
            self._send(body, "text/event-stream")

    return Handler


@contextmanager
def scripted_openai(commands: list[str]) -> Iterator[str]:
    """The API on a free loopback port; yields its base URL (with ``/v1``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(commands))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
