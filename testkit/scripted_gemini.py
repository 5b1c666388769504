"""A scripted Gemini API on loopback, for running gemini-cli offline: each streamed request that
offers tools is answered with the next step of a script (a ``run_shell_command`` call, then a
final text); other requests (its side queries: next speaker, loop checks) with a short JSON
text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from testkit.scripted_http import ScriptedHandler, serving

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


def _handler(commands: list[str]) -> type[ScriptedHandler]:
    class Handler(ScriptedHandler):
        def do_GET(self) -> None:
            self.send(200, b'{"models": []}', "application/json")

        def do_POST(self) -> None:
            request = self.read_json()
            path = self.path.split("?", 1)[0]
            if path.endswith(":countTokens"):
                self.send(200, b'{"totalTokens": 2210}', "application/json")
            elif path.endswith(":streamGenerateContent"):
                answer = _response(request, commands, streamed=True)
                self.send(200, f"data: {json.dumps(answer)}\r\n\r\n".encode(), "text/event-stream")
            else:
                answer = _response(request, commands, streamed=False)
                self.send(200, json.dumps(answer).encode(), "application/json")

    return Handler


@contextmanager
def scripted_gemini(commands: list[str]) -> Iterator[str]:
    """The API on a free loopback port; yields its base URL."""
    with serving(_handler(commands)) as base:
        yield base
