"""What frameworks emit outside the three families: Google ADK's own attributes, Logfire's
OpenAI Agents bridge, Strands' span events, the OpenAI Agents SDK's error texts, LangGraph's
graph span.

Seen from: Google ADK 2.13 legacy format (``gcp.vertex.agent.tool_call_args``/``tool_response``),
Strands Agents 1.62 (``gen_ai.tool.message``/``gen_ai.choice`` events, ``gen_ai.tool.status``,
``Error: TimeoutError - ...`` results), the OpenAI Agents SDK 0.24 under OpenInference 2.6, and
LangGraph 1.2 under OpenInference langchain 0.1.80. Logfire's bridge is read from its source."""

from __future__ import annotations

import re
from typing import Any

from loopwatch.conventions.family import Family
from loopwatch.core.outcomes import MAX_EXAMINED_CHARS
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
    """ADK writes '{}' for arguments (and for the response) when content capture is off:
    unknown, not empty."""
    return attrs.get("gcp.vertex.agent.tool_call_args") == "{}" and "input.value" not in attrs


def adk_result_disabled(attrs: Any) -> bool:
    return adk_content_disabled(attrs) and attrs.get("gcp.vertex.agent.tool_response") == "{}"


# The OpenAI Agents SDK (0.24) reports a handled tool error as the span error
# ``{"message": "Error running tool (non-fatal)", "data": {"tool_name": ..., "error": str(e)}}``;
# the OpenInference bridge writes it as the status description ``"{message}: {data!r}"``. Only
# the ``error`` text says what failed (the tool name could read as a class: ``check_timeout``).
# The atomic group keeps it linear: retrying each earlier "tool" made "tool tool ..." quadratic.
_OPENAI_AGENTS_SPAN_ERROR = re.compile(r"^(Error running (?>[\w ]*tool)[^:]*+): (\{.*\})\s*$", re.S)
# What the SDK itself hands the model as the tool's output when it answers for the tool: its
# per-tool timeout (``error_as_result``, span status left OK) and its default error function.
_OPENAI_AGENTS_ERROR_RESULTS = (
    re.compile(r"^Tool '[^']*' timed out after [\d.]+ seconds\.$"),
    re.compile(r"^An error occurred while (?:running|parsing) the tool"),
)


def openai_agents_error_text(description: str) -> str | None:
    """The ``error`` text inside an OpenAI Agents "Error running tool (non-fatal): {...}"
    status description; None when the description has another shape."""
    if not description.startswith("Error running "):  # what the pattern starts with: cheaper
        return None
    match = _OPENAI_AGENTS_SPAN_ERROR.match(description, 0, MAX_EXAMINED_CHARS)
    if match is None:
        return None
    from loopwatch.conventions.payloads import parse_text

    data = parse_text(match.group(2))
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, str) else match.group(1)


# Frameworks that hand a tool's exception to the model as text name its class there:
# LangGraph's ToolNode ``Error: TimeoutError('...')``, Strands ``Error: TimeoutError - ...``.
_ERROR_TEXT_TYPE = re.compile(r"^\s*Error: ([A-Za-z_][\w.]*)(?:\(| - )")


def error_type_in_text(text: str) -> str | None:
    match = _ERROR_TEXT_TYPE.match(text, 0, MAX_EXAMINED_CHARS)
    return match.group(1) if match else None


def logfire_error_text(error: Any) -> str:
    """Logfire's ``error`` attribute is the SDK's SpanError; its ``data.error`` is the text."""
    from loopwatch.conventions.payloads import parse_text

    value = parse_text(error) if isinstance(error, str) else error
    data = value.get("data") if isinstance(value, dict) else None
    inner = data.get("error") if isinstance(data, dict) else None
    return inner if isinstance(inner, str) else str(error)


def framework_error_result(result: Any) -> str | None:
    """A result text a framework wrote in place of the tool's answer, reporting its failure."""
    if not isinstance(result, str) or len(result) > 500:
        return None
    text = result.strip()
    return text if any(p.match(text) for p in _OPENAI_AGENTS_ERROR_RESULTS) else None


# LangGraph under OpenInference: the graph invocation is a CHAIN span whose metadata is only
# ``{"ls_integration": "langgraph"}``; its steps (nodes, subgraphs) add ``langgraph_node``. The
# tools hang under it, not under the ``agent`` node marked AGENT, so it is the turn.
_LANGGRAPH_MARK = '"ls_integration": "langgraph"'
_LANGGRAPH_STEP = '"langgraph_node"'


def is_langgraph_graph(attrs: Any) -> bool:
    metadata = attrs.get("metadata")
    return (
        isinstance(metadata, str)
        and _LANGGRAPH_MARK in metadata
        and _LANGGRAPH_STEP not in metadata
        and attrs.get("openinference.span.kind") == "CHAIN"
    )


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
