"""A scripted Anthropic Messages API on loopback, for running Claude Code offline: each request
that offers tools is answered with the next step of a script (a ``Bash`` tool call, then a final
text), every other request (Claude Code's side queries) with a short text. Streaming (SSE) and
plain JSON answers, as the request asks."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from testkit.scripted_http import ScriptedHandler, nonce, serving

MODEL = "claude-sonnet-4-5-20250929"


def _tool_results(request: dict[str, Any]) -> int:
    """How many tool results the conversation holds: the script's step."""
    count = 0
    for message in request.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            count += sum(
                1 for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
            )
    return count


class Script:
    """``commands``: the Bash commands to call in turn (each with another description), then a
    final answer."""

    def __init__(self, commands: list[str]) -> None:
        self.commands = commands
        self.requests = 0
        self.lock = threading.Lock()
        self.run = nonce()  # in every id: none repeats across runs, as a real API's

    def answer(self, request: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        """(content blocks, stop reason) for one request."""
        with self.lock:
            self.requests += 1
        if not request.get("tools"):
            return [{"type": "text", "text": "ok"}], "end_turn"
        step = _tool_results(request)
        if step < len(self.commands):
            call = {
                "type": "tool_use",
                "id": f"toolu_01{self.run}{step:04d}",
                "name": "Bash",
                "input": {
                    "command": self.commands[step],
                    "description": f"Check the service, attempt {step + 1}",
                },
            }
            return [call], "tool_use"
        return [{"type": "text", "text": "The service does not answer."}], "end_turn"


def _sse(blocks: list[dict[str, Any]], stop: str, message_id: str) -> bytes:
    usage = {
        "input_tokens": 1200,
        "output_tokens": 1,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": MODEL,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            },
        )
    ]
    for i, block in enumerate(blocks):
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": start},
            )
        )
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta})
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 40},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)


def _handler(script: Script) -> type[ScriptedHandler]:
    class Handler(ScriptedHandler):
        def _answer(self, code: int, body: bytes, content_type: str) -> None:
            self.send(code, body, content_type, request_id=f"req_{nonce()}")

        def do_GET(self) -> None:
            self._answer(
                404,
                b'{"type":"error","error":{"type":"not_found_error","message":"no"}}',
                "application/json",
            )

        def do_HEAD(self) -> None:
            self._answer(200, b"", "text/plain")

        def do_POST(self) -> None:
            request = self.read_json()
            path = self.path.split("?", 1)[0]
            if not path.endswith("/v1/messages"):
                if path.endswith("/count_tokens"):
                    self._answer(200, b'{"input_tokens": 1200}', "application/json")
                else:
                    self._answer(
                        404,
                        b'{"type":"error","error":{"type":"not_found_error",'
                        b'"message":"not scripted"}}',
                        "application/json",
                    )
                return
            blocks, stop = script.answer(request)
            message_id = f"msg_01{nonce()}"
            if request.get("stream"):
                self._answer(200, _sse(blocks, stop, message_id), "text/event-stream")
                return
            message = {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": blocks,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": 1200, "output_tokens": 40},
            }
            self._answer(200, json.dumps(message).encode(), "application/json")

    return Handler


@contextmanager
def scripted_anthropic(script: Script) -> Iterator[str]:
    """The API on a free loopback port; yields its base URL."""
    with serving(_handler(script)) as base:
        yield base
