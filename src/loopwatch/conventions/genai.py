"""OpenTelemetry GenAI semantic conventions (current), and the older names pydantic-ai and
Logfire still emit (instrumentation version 2: ``running tool``, ``tool_arguments``).

Reads ``execute_tool`` spans (``gen_ai.tool.name``, ``gen_ai.tool.call.arguments``/``.result``,
``error.type``), ``invoke_agent``/``invoke_workflow`` turn spans and LLM spans with their
``gen_ai.input.messages``/``gen_ai.output.messages``. Frameworks that write GenAI spans add
their own fields, read here too: Google ADK's attributes (conventions.adk), Strands' span events
and ``gen_ai.tool.status``. Seen from pydantic-ai 2.68 (its own instrumentation), Google ADK
2.13 (current format), Strands Agents 1.62, AutoGen 0.7 (its own ``execute_tool`` and
``invoke_agent`` spans), OpenLLMetry 0.62's and OpenTelemetry's GenAI instrumentations of the
openai and anthropic SDKs, and the anthropic SDK's own spans."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from loopwatch.conventions import adk, litellm
from loopwatch.conventions.emitter import TOOL, TURN, UNMARKED, Emitter, Held
from loopwatch.conventions.family import ANY, Family
from loopwatch.conventions.messages import Message, parse_messages
from loopwatch.conventions.payloads import parse_text
from loopwatch.core.records import UnreadableHistory
from loopwatch.core.span_view import SpanView

OPERATION: Final = "gen_ai.operation.name"

GENAI: Final = Family(
    name="genai",
    tool=((OPERATION, "execute_tool"),),
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

# Span names that mark a kind when no attribute does (pydantic-ai v2, ADK v1).
TOOL_NAME_PREFIXES: Final = ("execute_tool ",)
TOOL_SPAN_NAMES: Final = frozenset({"running tool"})
TURN_NAME_PREFIXES: Final = ("invoke_agent", "invoke_workflow")
TURN_SPAN_NAMES: Final = frozenset({"agent run", "invocation"})

INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"


def _kind_by_name(name: str, attrs: Mapping[str, Any]) -> int:
    if name.startswith(TOOL_NAME_PREFIXES) or name in TOOL_SPAN_NAMES:
        return TOOL
    if name.startswith(TURN_NAME_PREFIXES) or name in TURN_SPAN_NAMES:
        return TURN
    return UNMARKED


def _tool_name(span: SpanView) -> str | None:
    for prefix in TOOL_NAME_PREFIXES:
        if span.name.startswith(prefix):
            return span.name[len(prefix) :].strip() or "unknown"
    return None


def _turn_agent(span: SpanView) -> str | None:
    for prefix in TURN_NAME_PREFIXES:
        if span.name.startswith(prefix + " "):
            return span.name[len(prefix) + 1 :] or None
    return None


def _payloads(span: SpanView) -> tuple[Any, Any]:
    """Strands puts a tool's arguments and result in GenAI events, not attributes."""
    arguments = result = None
    for event in span.events:
        a = event.attributes
        if event.name == "gen_ai.tool.message":
            arguments = a.get("content")
        elif event.name == "gen_ai.choice":
            result = a.get("message")
        elif event.name == "gen_ai.client.inference.operation.details":
            arguments = _message_part(a.get(INPUT_MESSAGES), "tool_call", "arguments")
            result = _message_part(a.get(OUTPUT_MESSAGES), "tool_call_response", "response")
    return arguments, result


def _message_part(messages: Any, part_type: str, field: str) -> Any:
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


def _errors(span: SpanView) -> tuple[bool, list[str]]:
    # Strands marks a failed call here, its status left unset
    return span.attributes.get("gen_ai.tool.status") == "error", []


def held_messages(attrs: Mapping[str, Any]) -> Held | None:
    """The attributes read_messages reads, kept apart, and the bytes they hold; None when the
    span has no history."""
    raw = attrs.get(INPUT_MESSAGES)
    if raw is None:
        return None
    raw_output = attrs.get(OUTPUT_MESSAGES)
    held = {INPUT_MESSAGES: raw, OUTPUT_MESSAGES: raw_output}
    size = _size(raw) + _size(raw_output)
    calls = litellm.held_calls(attrs)  # LiteLLM's callback: the output's calls, apart
    if calls:
        held.update(calls)
        size += sum(map(_size, calls.values()))
    return held, size


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str) else 64 if value is None else 4096


def read_messages(attrs: Mapping[str, Any]) -> tuple[list[Message], list[Message] | None] | None:
    """The history and answer of a model call (``gen_ai.input.messages`` /
    ``gen_ai.output.messages``, with content capture on); None when the history was not
    recorded. Raises UnreadableHistory when it is not a message list."""
    raw = attrs.get(INPUT_MESSAGES)
    if raw is None:
        return None
    inputs = parse_messages(raw)
    if inputs is None:
        raise UnreadableHistory(INPUT_MESSAGES)
    raw_output = attrs.get(OUTPUT_MESSAGES)
    outputs = parse_messages(raw_output) if raw_output is not None else None
    if outputs is not None and not any(m.calls for m in outputs):
        calls = litellm.output_calls(attrs)
        if calls:
            answer = next((m for m in reversed(outputs) if m.role == "assistant"), None)
            if answer is None:
                answer = Message("assistant")
                outputs.append(answer)
            answer.calls.extend(calls)
    return inputs, outputs


EMITTER: Final = Emitter(
    # ADK's attributes after the conventions' own: its current format writes both
    replace(
        GENAI,
        arguments=(*GENAI.arguments, adk.ARGUMENTS),
        result=(*GENAI.result, adk.RESULT),
    ),
    kind_by_name=_kind_by_name,
    name_hints=(*TOOL_NAME_PREFIXES, *TOOL_SPAN_NAMES, *TURN_NAME_PREFIXES, *TURN_SPAN_NAMES),
    tool_name=_tool_name,
    payloads=_payloads,
    errors=_errors,
    content_off=adk.content_off,
    turn_agent=_turn_agent,
    held_messages=held_messages,
    read_messages=read_messages,
)
