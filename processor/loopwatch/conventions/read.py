"""One span in, one record out: tool call, turn mark, LLM mark or link.

Reads the families (GenAI, OpenInference, OpenLLMetry) and the framework fields
(conventions.frameworks) in span-conventions.md's order; applies the general rules of
conventions.results (aggregate spans, wrapped results, errors named in results); a tool call's
record is built in conventions.calls. An LLM mark keeps the model call's messages unread
(conventions.messages reads them only for a trace in which no span executes a tool). The
framework versions each reader was checked against are in its module's docstring and
docs/frameworks.md."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from loopwatch.conventions import frameworks, genai, openinference, openllmetry, results
from loopwatch.conventions.calls import keyed_call, read_result
from loopwatch.conventions.family import ANY, Family
from loopwatch.conventions.frameworks import ADK, LOGFIRE, LOGFIRE_FUNCTION_SPAN
from loopwatch.conventions.genai import GENAI
from loopwatch.conventions.messages import Message, conversation
from loopwatch.conventions.openinference import OPENINFERENCE
from loopwatch.conventions.openllmetry import OPENLLMETRY
from loopwatch.conventions.payloads import decode_arguments, parse_text
from loopwatch.conventions.tool_definitions import tool_versions
from loopwatch.core.config import Config
from loopwatch.core.records import (
    GUARD_ATTRIBUTE,
    GUARD_DECISIONS,
    GUARD_EVENT,
    Conversation,
    Link,
    LlmMark,
    Messages,
    Record,
    ToolCall,
    TurnMark,
)
from loopwatch.core.spans import STATUS_ERROR, SpanView

FAMILIES = (GENAI, OPENINFERENCE, OPENLLMETRY)
_TOOL_MARKERS = tuple(m for f in FAMILIES for m in f.tool)
_TURN_MARKERS = tuple(m for f in FAMILIES for m in f.turn)
_LLM_MARKERS = tuple(m for f in FAMILIES for m in f.llm)


# Every attribute a marker above tests: a span with none of them, and whose name marks no
# kind, is a plain span (a Link) without reading further. Keep in step with read_span.
_MARKER_KEYS = frozenset(k for k, _ in (*_TOOL_MARKERS, *_TURN_MARKERS, *_LLM_MARKERS))
_MARKER_NAME_PREFIXES = (*genai.TOOL_NAME_PREFIXES, *genai.TURN_NAME_PREFIXES)
_MARKER_NAMES = genai.TOOL_SPAN_NAMES | genai.TURN_SPAN_NAMES | {LOGFIRE_FUNCTION_SPAN}


# Attributes read_span never looks at, by prefix: what instrumentations write in bulk (messages,
# usage, request parameters) and the web and database conventions. The service skips them when it
# converts an OTLP span (each attribute costs a microsecond there). Never list one read above;
# tests/test_read_keys.py checks every convention test's span against this list.
UNREAD_PREFIXES = (
    "llm.token_count.",
    "llm.invocation_parameters",
    "llm.usage.",
    "llm.request.functions.",
    "llm.is_streaming",
    "gen_ai.prompt.",
    "gen_ai.completion.",
    "gen_ai.usage.",
    "gen_ai.response.id",
    "gen_ai.response.finish_reasons",
    "gen_ai.openai.",
    "http.",
    "url.",
    "db.",
    "server.",
    "client.",
    "network.",
    "user_agent.",
    "code.",
    "thread.",
    "session.",
    "deployment.",
    "logfire.msg",
    "logfire.span_type",
    "logfire.json_schema",
)


def may_be_genai(name: str, attributes: Mapping[str, Any], *, ended: bool = True) -> bool:
    """False only for a span that read_span reads as a Link (a cheap test on attribute keys
    and the name, for the plain spans of a web app that share the process). With ``ended``
    False, lookups only: a started span's attributes may still change on another thread."""
    if ended:
        if not _MARKER_KEYS.isdisjoint(attributes):
            return True
    else:
        for key in _MARKER_KEYS:
            if key in attributes:
                return True
    return name.startswith(_MARKER_NAME_PREFIXES) or name in _MARKER_NAMES


def _attrs(families: tuple[Family, ...], field: str) -> tuple[str, ...]:
    return tuple(a for f in families for a in getattr(f, field))


# Read order follows span-conventions.md §6.
_TOOL_NAME = _attrs((GENAI, OPENINFERENCE, OPENLLMETRY), "tool_name")
_ARGUMENTS = (
    *GENAI.arguments,
    *ADK.arguments,
    OPENINFERENCE.arguments[0],
    *OPENLLMETRY.arguments,
)
_RESULT = (*GENAI.result, *ADK.result, *OPENINFERENCE.result, *OPENLLMETRY.result)
_DESCRIPTION = _attrs((GENAI, OPENINFERENCE), "description")
_TOOL_AGENT = ("gen_ai.agent.name", "agent.name")
_TURN_AGENT = _attrs((GENAI, OPENINFERENCE, OPENLLMETRY), "agent")
_MODEL = _attrs((GENAI, OPENINFERENCE), "model")


def _matches(attrs: Mapping[str, Any], markers: tuple[tuple[str, str], ...]) -> bool:
    for key, value in markers:
        got = attrs.get(key)
        if got is not None and (value == ANY or got == value):
            return True
    return False


def _first(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = attrs.get(key)
        if value is not None and value != "":
            return value
    return None


def _first_text(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first value set, when it is a text (None when it is another type)."""
    for key in keys:
        value = attrs.get(key)
        if value is not None and value != "":
            return value if isinstance(value, str) else None
    return None


# What the markers make of a span, in the order read_span tests them: a span that any marker
# makes a tool is a tool call, else one marked as a turn is a turn, else an LLM call.
_TOOL, _TURN, _LLM, _UNMARKED = 0, 1, 2, 3


def _marker_table() -> tuple[tuple[str, dict[str, int], int], ...]:
    """Each attribute the markers test, once: ``(key, {value: kind}, kind for any value)``,
    tool markers' keys first. Where several markers match, the first kind wins."""
    by_value: dict[str, dict[str, int]] = {}
    any_value: dict[str, int] = {}
    for kind, markers in ((_TOOL, _TOOL_MARKERS), (_TURN, _TURN_MARKERS), (_LLM, _LLM_MARKERS)):
        for key, value in markers:  # kinds in order: the first one set is the one that wins
            values = by_value.setdefault(key, {})
            if value == ANY:
                any_value.setdefault(key, kind)
            else:
                values.setdefault(value, kind)
    return tuple(
        (
            key,
            {v: min(k, any_value.get(key, _UNMARKED)) for v, k in values.items()},
            any_value.get(key, _UNMARKED),
        )
        for key, values in by_value.items()
    )


_MARKER_TABLE = _marker_table()


def _marked_kind(attrs: Mapping[str, Any]) -> int:
    """The first kind (in read_span's order) any marker gives the span: one lookup a key."""
    found = _UNMARKED
    for key, values, any_kind in _MARKER_TABLE:
        value = attrs.get(key)
        if value is not None:
            # markers name texts; another type matches only "any value"
            kind = values.get(value, any_kind) if isinstance(value, str) else any_kind
            if kind < found:
                if kind == _TOOL:
                    return _TOOL
                found = kind
    return found


def _named_tool(name: str) -> bool:
    return (
        name.startswith(genai.TOOL_NAME_PREFIXES)
        or name in genai.TOOL_SPAN_NAMES
        or name == LOGFIRE_FUNCTION_SPAN
    )


def _named_turn(name: str, attributes: Mapping[str, Any]) -> bool:
    """is_turn_span without its markers."""
    return (
        name.startswith(genai.TURN_NAME_PREFIXES)
        or name in genai.TURN_SPAN_NAMES
        or frameworks.is_langgraph_graph(attributes)
    )


def is_tool_span(span: SpanView) -> bool:
    return _marked_kind(span.attributes) == _TOOL or _named_tool(span.name)


def is_turn_span(name: str, attributes: Mapping[str, Any]) -> bool:
    """An agent or workflow span (a turn when outermost and holding tool calls)."""
    return _matches(attributes, _TURN_MARKERS) or _named_turn(name, attributes)


def read_span(span: SpanView, config: Config) -> Record:
    """Classify a span and read what loopwatch needs from it."""
    attrs = span.attributes
    name = span.name
    kind = _marked_kind(attrs)  # is_tool_span, is_turn_span and the LLM markers, at once
    if kind == _TOOL or _named_tool(name):
        tool = _tool_name(span)
        if results.is_aggregate_tool(tool):
            return Link(span.span_id, span.parent_id, span.start_ns, span.end_ns)
        return _tool_call(span, config, tool)
    if kind == _TURN or _named_turn(name, attrs):
        return TurnMark(
            span.span_id,
            span.parent_id,
            span.start_ns,
            span.end_ns,
            _turn_agent(span),  # agent
            _first_text(attrs, _MODEL),  # model
        )
    if kind == _LLM:
        return LlmMark(
            span.span_id,
            span.parent_id,
            span.start_ns,
            span.end_ns,
            _first_text(attrs, _MODEL),  # model
            tool_versions(attrs),  # tool_versions
            _messages(span, config),
        )
    return Link(span.span_id, span.parent_id, span.start_ns, span.end_ns)


# Where each emitter family keeps a model call's messages, tested in this order.
_MESSAGE_FAMILIES = (genai, openinference)


def _messages(span: SpanView, config: Config) -> Messages | None:
    """A model call's messages, kept to be read (conventions.messages) only if the trace has
    no tool span: reading them costs more than the rest of the span."""
    attrs = span.attributes
    for family in _MESSAGE_FAMILIES:
        found = family.held_messages(attrs)
        if found is not None:
            held, size = found
            agent = _first_text(attrs, _TOOL_AGENT)
            read = partial(
                _conversation, family.read_messages, held, span.start_ns, span.end_ns, config, agent
            )
            return Messages(read, size)
    return None


def _conversation(
    read_messages: Callable[[Mapping[str, Any]], tuple[list[Message], list[Message] | None] | None],
    held: Mapping[str, Any],
    start: int,
    end: int,
    config: Config,
    agent: str | None,
) -> Conversation | None:
    found = read_messages(held)
    if found is None:
        return None
    inputs, outputs = found
    return conversation(start, end, config, inputs, outputs, agent)


def _turn_agent(span: SpanView) -> str | None:
    agent = _first_text(span.attributes, _TURN_AGENT)
    if agent:
        return agent
    for prefix in genai.TURN_NAME_PREFIXES:
        if span.name.startswith(prefix + " "):
            return span.name[len(prefix) + 1 :] or None
    if span.attributes.get(OPENINFERENCE.turn[0][0]) == "AGENT" or frameworks.is_langgraph_graph(
        span.attributes
    ):
        return span.name or None
    return None


def _tool_name(span: SpanView) -> str:
    attrs = span.attributes
    name = _first_text(attrs, _TOOL_NAME)
    if name:
        return name
    if span.name == LOGFIRE_FUNCTION_SPAN:
        return _first_text(attrs, LOGFIRE.tool_name) or "unknown"
    for prefix in genai.TOOL_NAME_PREFIXES:
        if span.name.startswith(prefix):
            return span.name[len(prefix) :].strip() or "unknown"
    if span.name.endswith(openllmetry.TOOL_NAME_SUFFIX):
        return span.name[: -len(openllmetry.TOOL_NAME_SUFFIX)] or "unknown"
    return span.name or "unknown"


def _looks_like_schema(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    if "properties" in value or value.get("type") == "object":
        return True
    return bool(value) and all(isinstance(v, dict) and "type" in v for v in value.values())


def _raw_payloads(span: SpanView) -> tuple[Any, Any]:
    attrs = span.attributes
    arguments = _first(attrs, _ARGUMENTS)
    result = _first(attrs, _RESULT)
    if span.name == LOGFIRE_FUNCTION_SPAN:
        arguments = arguments if arguments is not None else attrs.get("input")
        result = result if result is not None else attrs.get("output")
    if (arguments is None or result is None) and span.events:
        event_args, event_result = frameworks.strands_payloads(span)
        arguments = arguments if arguments is not None else event_args
        result = result if result is not None else event_result
    if arguments is None:
        fallback = attrs.get(OPENINFERENCE.arguments[1])
        if fallback is not None and not _looks_like_schema(
            parse_text(fallback) if isinstance(fallback, str) else fallback
        ):
            arguments = fallback
    return arguments, result


def _error_evidence(
    span: SpanView, result_error: str | None, result_text: str | None, result_types: list[str]
) -> tuple[bool, list[str], list[str]]:
    attrs = span.attributes
    types = result_types  # the caller's list, extended: it is not read again
    messages: list[str] = []
    errored = span.status_code == STATUS_ERROR
    error_type = attrs.get("error.type")
    if isinstance(error_type, str) and error_type:
        errored = True
        if error_type != "_OTHER":
            types.append(error_type)
    if span.events:
        for event in reversed(span.events):
            if event.name == "exception":
                errored = True
                types.append(str(event.attributes.get("exception.type") or ""))
                messages.append(str(event.attributes.get("exception.message") or ""))
    if span.status_description:
        description = span.status_description
        messages.append(frameworks.openai_agents_error_text(description) or description)
    if attrs.get("gen_ai.tool.status") == "error":
        errored = True
    level = attrs.get("logfire.level_num")
    if isinstance(level, int) and level >= frameworks.LOGFIRE_ERROR_LEVEL:
        errored = True
    logfire_error = attrs.get("error") if span.name == LOGFIRE_FUNCTION_SPAN else None
    if logfire_error:
        errored = True
        messages.append(frameworks.logfire_error_text(logfire_error))
    if result_error:
        errored = True
        messages.append(result_error)
    elif errored and result_text:
        # A failed call's result is what the model was told (pydantic-ai's retry prompt, an
        # OpenAI Agents error function's text): the last place a class can be read from.
        messages.append(result_text[:500])
    # Exception classes named inside those texts count as types (read before any message).
    if messages:
        types.extend(t for t in map(frameworks.error_type_in_text, messages) if t)
    return errored, types, messages


def _tool_call(span: SpanView, config: Config, tool: str) -> ToolCall:
    attrs = span.attributes
    raw_arguments, raw_result = _raw_payloads(span)
    known, arguments = decode_arguments(raw_arguments)
    adk_disabled = frameworks.adk_content_disabled(attrs)
    if known and adk_disabled:
        known = False
    result_known, result, result_error, result_types, result_text = read_result(raw_result)
    if result_known and adk_disabled and frameworks.adk_result_disabled(attrs):
        result_known, result = False, None
    errored, types, messages = _error_evidence(span, result_error, result_text, result_types)
    description = _first_text(attrs, _DESCRIPTION)
    # (only a span with events or the attribute can carry a decision)
    guard = _guard_decision(span) if span.events or GUARD_ATTRIBUTE in attrs else None
    return keyed_call(
        (span.span_id, span.parent_id, span.start_ns, span.end_ns),
        tool,
        config,
        (known, arguments),
        (result_known, result),
        (errored, types, messages),
        description,
        _first_text(attrs, _TOOL_AGENT),
        guard,
    )


def _guard_decision(span: SpanView) -> str | None:
    decision = span.attributes.get(GUARD_ATTRIBUTE)
    for event in span.events:
        if event.name == GUARD_EVENT:
            decision = event.attributes.get("decision", decision)
    if decision is None:
        return None
    return decision if decision in GUARD_DECISIONS else "other"
