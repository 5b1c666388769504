"""OpenInference (Arize): ``openinference.span.kind`` plus ``input.value``/``output.value``,
and a model call's ``llm.input_messages.N.message.*`` / ``llm.output_messages``.

Seen from openinference-instrumentation-openai-agents 2.6, -langchain 0.1.80, -smolagents 0.1.43,
-llama-index 4.6.1, -autogen-agentchat 0.1.22, -agno 1.0.15, -crewai 1.1.21, -openai 0.1.66 and
-anthropic 3.1.0, and LangGraph 1.2's graph span under -langchain."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from loopwatch.conventions.emitter import TURN, UNMARKED, Emitter, Held
from loopwatch.conventions.family import Family
from loopwatch.conventions.messages import Message, result_role
from loopwatch.conventions.payloads import parse_text
from loopwatch.core.span_view import SpanView

KIND = "openinference.span.kind"

OPENINFERENCE = Family(
    name="openinference",
    tool=((KIND, "TOOL"),),
    turn=((KIND, "AGENT"),),
    llm=((KIND, "LLM"),),
    tool_name=("tool.name",),
    arguments=("input.value",),
    result=("output.value",),
    description=("tool.description",),
    # graph.node.id: the agent-graph node; CrewAI (1.15) names its AGENT span after a method
    # (``support._execute_core``) and puts the role here
    agent=("agent.name", "graph.node.id"),
    model=("llm.model_name", "llm.request.model_name", "llm.response.model_name"),
    tool_definitions=(),  # llm.tools.N.tool.json_schema, read by index in tool_definitions.py
)
# Read for arguments only when nothing else holds them, and only when it holds values: several
# instrumentations put the tool's JSON Schema there.
PARAMETERS = "tool.parameters"

INPUT_MESSAGES: Final = "llm.input_messages."
OUTPUT_MESSAGES: Final = "llm.output_messages."
_MESSAGE_PREFIXES: Final = (INPUT_MESSAGES, OUTPUT_MESSAGES)
_FIRST_INPUT: Final = INPUT_MESSAGES + "0.message.role"
_FIRST_OUTPUT: Final = OUTPUT_MESSAGES + "0.message.role"
# read from one history at most (each message costs a few lookups)
MAX_MESSAGES = 20_000


def parameters_as_arguments(attrs: Mapping[str, Any]) -> Any:
    """``tool.parameters`` when it holds argument values rather than a JSON Schema."""
    value = attrs.get(PARAMETERS)
    if value is None or _looks_like_schema(parse_text(value) if isinstance(value, str) else value):
        return None
    return value


def _looks_like_schema(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    if "properties" in value or value.get("type") == "object":
        return True
    return bool(value) and all(isinstance(v, dict) and "type" in v for v in value.values())


# LangGraph under OpenInference: the graph invocation is a CHAIN span whose metadata is only
# ``{"ls_integration": "langgraph"}``; its steps (nodes, subgraphs) add ``langgraph_node``. The
# tools hang under it, not under the ``agent`` node marked AGENT, so it is the turn.
_LANGGRAPH_MARK = '"ls_integration": "langgraph"'
_LANGGRAPH_STEP = '"langgraph_node"'


def is_langgraph_graph(attrs: Mapping[str, Any]) -> bool:
    metadata = attrs.get("metadata")
    return (
        isinstance(metadata, str)
        and _LANGGRAPH_MARK in metadata
        and _LANGGRAPH_STEP not in metadata
        and attrs.get(KIND) == "CHAIN"
    )


def _kind_by_name(name: str, attrs: Mapping[str, Any]) -> int:
    return TURN if is_langgraph_graph(attrs) else UNMARKED


def _turn_agent(span: SpanView) -> str | None:
    # an AGENT span (or LangGraph's graph) is named after its agent
    if span.attributes.get(KIND) == "AGENT" or is_langgraph_graph(span.attributes):
        return span.name or None
    return None


def held_messages(attrs: Mapping[str, Any]) -> Held | None:
    """The attributes read_messages reads, kept apart, and the bytes they hold; None when the
    span has no history."""
    # (a lookup first: most spans have none, and the scan below reads every attribute; the
    # SDK's attribute limit drops the oldest first, and the answer is written last)
    if _FIRST_INPUT not in attrs and _FIRST_OUTPUT not in attrs:
        return None
    # a variable typed dict (every span view's is one): compiled, the loop reads its keys as
    # texts, and startswith is a C call rather than a method looked up on each key
    scanned: dict[str, Any] = attrs if type(attrs) is dict else dict(attrs)
    held: dict[str, Any] = {}
    size = 0
    for key in scanned:  # (keys, and values only of the few held: no pair built a key)
        if key.startswith(_MESSAGE_PREFIXES):
            value = held[key] = scanned[key]
            size += 100 + (len(value) if isinstance(value, str) else 8)
    return (held, size) if held else None


def read_messages(attrs: Mapping[str, Any]) -> tuple[list[Message], list[Message] | None] | None:
    """The history (``llm.input_messages.N.message.*``) and answer (``llm.output_messages``)
    of an LLM span; None when the history was not recorded. Messages are read by the indexes
    present: the SDK's attribute limit (128 by default) drops a long history's first ones."""
    inputs = _messages(attrs, INPUT_MESSAGES)
    if not inputs:
        return None
    outputs = _messages(attrs, OUTPUT_MESSAGES)
    return inputs, outputs or None


def _indexes(attrs: Mapping[str, Any], base: str) -> list[int]:
    found: set[int] = set()
    skip = len(base)
    for key in attrs:
        if key.startswith(base):
            number = key[skip : key.find(".", skip)]
            # ASCII digits, and few of them: int() refuses others (and very long ones)
            if number.isascii() and number.isdigit() and len(number) < 10:
                found.add(int(number))
                if len(found) >= MAX_MESSAGES:
                    break
    return sorted(found)


def _messages(attrs: Mapping[str, Any], base: str) -> list[Message]:
    found: list[Message] = []
    for index in _indexes(attrs, base):
        prefix = f"{base}{index}.message."
        message = Message(str(attrs.get(prefix + "role") or ""))
        content = attrs.get(prefix + "content")
        call_id = attrs.get(prefix + "tool_call_id")
        if result_role(message.role) or call_id is not None:
            message.results.append((call_id if isinstance(call_id, str) else None, content, None))
        elif message.role == "user" and isinstance(content, str):
            message.text = content
        _tool_calls(attrs, prefix, message)
        found.append(message)
    return found


def _tool_calls(attrs: Mapping[str, Any], prefix: str, message: Message) -> None:
    """``message.tool_calls.M.tool_call.{id,function.name,function.arguments}``."""
    for index in range(MAX_MESSAGES):
        call = f"{prefix}tool_calls.{index}.tool_call."
        name = attrs.get(call + "function.name")
        if name is None:
            return
        call_id = attrs.get(call + "id")
        message.calls.append(
            (
                call_id if isinstance(call_id, str) and call_id else None,
                str(name),
                attrs.get(call + "function.arguments"),
            )
        )


EMITTER = Emitter(
    OPENINFERENCE,
    kind_by_name=_kind_by_name,
    attribute_hints=("metadata",),
    turn_agent=_turn_agent,
    held_messages=held_messages,
    read_messages=read_messages,
)
