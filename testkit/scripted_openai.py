"""A scripted OpenAI Responses API on loopback, for running Codex CLI offline: each request
that offers tools is answered with the next step of a script (a shell command through the
shell tool it offers, then a final message), streamed as Server-Sent Events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from testkit.scripted_http import ScriptedHandler, nonce, serving


def _call(tools: list[str], command: str) -> tuple[str, dict[str, Any]]:
    """The shell tool the request offers, with ``command`` as its arguments."""
    if "exec_command" in tools:
        return "exec_command", {"cmd": command}
    if "shell_command" in tools:
        return "shell_command", {"command": command}
    return "shell", {"command": ["bash", "-lc", command]}


def _events(request: dict[str, Any], commands: list[str], run: str) -> list[dict[str, Any]]:
    tools = [t.get("name") for t in request.get("tools", []) if isinstance(t, dict)]
    items = request.get("input", [])
    # the script's step: the calls already answered in the conversation
    step = sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call_output")
    if tools and step < len(commands):
        name, arguments = _call([t for t in tools if isinstance(t, str)], commands[step])
        item: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_{run}{step}",
            "call_id": f"call_{run}{step:02d}",
            "name": name,
            "arguments": json.dumps(arguments),
        }
    else:
        text = {"type": "output_text", "text": "The service does not answer."}
        item = {"type": "message", "role": "assistant", "id": f"msg_{run}", "content": [text]}
    usage = {
        "input_tokens": 3000,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 40,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 3040,
    }
    return [
        {"type": "response.created", "response": {"id": f"resp_{run}{step}"}},
        {"type": "response.output_item.done", "item": item},
        {"type": "response.completed", "response": {"id": f"resp_{run}{step}", "usage": usage}},
    ]


def _handler(commands: list[str]) -> type[ScriptedHandler]:
    run = nonce()

    class Handler(ScriptedHandler):
        def do_GET(self) -> None:  # the model list
            self.send(200, b'{"data": [], "models": []}', "application/json")

        def do_POST(self) -> None:
            events = _events(self.read_json(), commands, run)
            body = b"".join(
                f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events
            )
            self.send(200, body, "text/event-stream")

    return Handler


@contextmanager
def scripted_openai(commands: list[str]) -> Iterator[str]:
    """The API on a free loopback port; yields its base URL (with ``/v1``)."""
    with serving(_handler(commands), "/v1") as base:
        yield base
