"""OpenTelemetry GenAI semantic conventions (current), and the older names pydantic-ai and
Logfire still emit (instrumentation version 2: ``running tool``, ``tool_arguments``).

Reads ``execute_tool`` spans (``gen_ai.tool.name``, ``gen_ai.tool.call.arguments``/``.result``,
``error.type``), ``invoke_agent``/``invoke_workflow`` turn spans and LLM spans. Seen from
pydantic-ai 2.68 (its own instrumentation), Google ADK 2.13 (current format), Strands Agents
1.62 and AutoGen 0.7 (its own ``execute_tool`` and ``invoke_agent`` spans)."""

from collections.abc import Mapping
from typing import Any

from loopwatch.conventions.family import ANY, Family
from loopwatch.conventions.messages import Message, parse_messages

OPERATION = "gen_ai.operation.name"

GENAI = Family(
    name="genai",
    tool=((OPERATION, "execute_tool"), ("mcp.method.name", "tools/call")),
    turn=((OPERATION, "invoke_agent"), (OPERATION, "invoke_workflow")),
    llm=(
        (OPERATION, "chat"),
        (OPERATION, "text_completion"),
        (OPERATION, "generate_content"),
        ("gen_ai.request.model", ANY),
    ),
    tool_name=("gen_ai.tool.name",),
    arguments=("gen_ai.tool.call.arguments", "tool_arguments"),
    result=("gen_ai.tool.call.result", "tool_response"),
    description=("gen_ai.tool.description",),
    agent=("gen_ai.agent.name", "gen_ai.workflow.name", "agent_name"),
    model=("gen_ai.request.model", "gen_ai.response.model", "model_name"),
    tool_definitions=("gen_ai.tool.definitions", "model_request_parameters"),
)

# Span names that mark a kind when no attribute does (pydantic-ai v2, MCP, ADK v1).
TOOL_NAME_PREFIXES = ("execute_tool ", "tools/call ")
TOOL_SPAN_NAMES = frozenset({"running tool"})
TURN_NAME_PREFIXES = ("invoke_agent", "invoke_workflow")
TURN_SPAN_NAMES = frozenset({"agent run", "invocation"})

INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"


def held_messages(attrs: Mapping[str, Any]) -> tuple[Mapping[str, Any], int] | None:
    """The attributes read_messages reads, kept apart, and the bytes they hold; None when the
    span has no history."""
    raw = attrs.get(INPUT_MESSAGES)
    if raw is None:
        return None
    raw_output = attrs.get(OUTPUT_MESSAGES)
    held = {INPUT_MESSAGES: raw, OUTPUT_MESSAGES: raw_output}
    return held, _size(raw) + _size(raw_output)


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str) else 64 if value is None else 4096


def read_messages(attrs: Mapping[str, Any]) -> tuple[list[Message], list[Message] | None] | None:
    """The history and answer of a model call (``gen_ai.input.messages`` /
    ``gen_ai.output.messages``, with content capture on); None when the history was not
    recorded or is not a message list."""
    raw = attrs.get(INPUT_MESSAGES)
    if raw is None:
        return None
    inputs = parse_messages(raw)
    if inputs is None:
        return None
    raw_output = attrs.get(OUTPUT_MESSAGES)
    return inputs, parse_messages(raw_output) if raw_output is not None else None
