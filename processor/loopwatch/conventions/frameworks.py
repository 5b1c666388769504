"""What frameworks emit outside the three families: Google ADK's own attributes, Logfire's
OpenAI Agents bridge, Strands' span events."""

from __future__ import annotations

from typing import Any

from loopwatch.conventions.family import Family
from loopwatch.core.spans import SpanView

ADK = Family(
    name="adk",
    arguments=("gcp.vertex.agent.tool_call_args",),
    result=("gcp.vertex.agent.tool_response",),
)

# Logfire names the span after its message template, literally.
LOGFIRE_FUNCTION_SPAN = "Function: {name}"
LOGFIRE = Family(name="logfire", tool_name=("name",), arguments=("input",), result=("output",))
LOGFIRE_ERROR_LEVEL = 17  # logfire.level_num at "error"


def adk_content_disabled(attrs: Any) -> bool:
    """ADK writes '{}' for arguments when content capture is off: unknown, not empty."""
    return attrs.get("gcp.vertex.agent.tool_call_args") == "{}" and "input.value" not in attrs


def strands_payloads(span: SpanView) -> tuple[Any, Any]:
    """Strands puts a tool's arguments and result in span events, not attributes."""
    arguments = result = None
    for event in span.events:
        a = event.attributes
        if event.name == "gen_ai.tool.message":
            arguments = a.get("content")
        elif event.name == "gen_ai.choice":
            result = a.get("message")
        elif event.name == "gen_ai.client.inference.operation.details":
            arguments = _message_part(a.get("gen_ai.input.messages"), "tool_call", "arguments")
            result = _message_part(
                a.get("gen_ai.output.messages"), "tool_call_response", "response"
            )
    return arguments, result


def _message_part(messages: Any, part_type: str, field: str) -> Any:
    from loopwatch.conventions.payloads import parse_text

    if isinstance(messages, str):
        messages = parse_text(messages)
    if not isinstance(messages, list):
        return None
    for message in messages:
        parts = message.get("parts") if isinstance(message, dict) else None
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict) and part.get("type") == part_type:
                return part.get(field)
    return None
