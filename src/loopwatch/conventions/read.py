"""One span in, one record out: tool call, turn mark, LLM mark or link.

Each emitter family is a module behind one interface (conventions.emitter): GenAI (with ADK's
and Strands' fields), OpenInference, OpenLLMetry and Logfire. read_span chooses the emitter once,
from the first marker attribute set or else the span's name, and reads every field from that
emitter's attributes first, then from the other families' in EMITTERS' order (two
instrumentation layers can write one span). Below the emitters sit the generic rules: errors from
status, ``error.type``, exception events and texts (conventions.error_texts), aggregate spans and
wrapped results (conventions.results), payload decoding (conventions.payloads), and the record of
a tool call (conventions.calls). An LLM mark keeps the model call's messages unread
(conventions.messages reads them only for a trace in which no span executes a tool). The
framework versions each emitter was checked against are in its module's docstring and
docs/frameworks.md."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from loopwatch.conventions import (
    coding_agent_spans,
    genai,
    logfire,
    mcp,
    openinference,
    openllmetry,
    results,
    vercel_ai,
)
from loopwatch.conventions.calls import keyed_call, read_result
from loopwatch.conventions.emitter import (
    LLM,
    TOOL,
    TURN,
    UNMARKED,
    Emitter,
    ReadMessages,
    first,
    first_text,
    no_kind,
    no_messages,
)
from loopwatch.conventions.error_texts import error_type_in_text, openai_agents_error_text
from loopwatch.conventions.family import ANY
from loopwatch.conventions.messages import conversation
from loopwatch.conventions.payloads import decode_arguments
from loopwatch.conventions.tool_definitions import tool_versions
from loopwatch.conventions.usage import token_usage
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
from loopwatch.core.span_view import STATUS_ERROR, SpanView

# Marker attributes first, in this order; then names. MCP before GenAI: the conventions' MCP
# span is also an execute_tool span, and only the MCP reading finds the tool in its name.
EMITTERS: Final = (
    mcp.EMITTER,
    genai.EMITTER,
    openinference.EMITTER,
    openllmetry.EMITTER,
    logfire.EMITTER,
    vercel_ai.EMITTER,
    coding_agent_spans.EMITTER,
)

# Every attribute a marker tests, and the span-name prefixes and attributes the emitters'
# kind_by_name may mark a span by: a span with none of them is a plain span (a Link) without
# reading further.
_ATTRIBUTE_HINTS: Final = tuple(dict.fromkeys(a for e in EMITTERS for a in e.attribute_hints))
_MARKER_KEYS: Final = frozenset(
    (
        *(key for e in EMITTERS for key, _ in (*e.family.tool, *e.family.turn, *e.family.llm)),
        *_ATTRIBUTE_HINTS,
    )
)
_NAME_HINTS: Final = tuple(dict.fromkeys(h for e in EMITTERS for h in e.name_hints))
# The same, looked up by first character: most spans' names start with none of theirs, and a
# lookup tests that where startswith would test each hint (compiled, a C call each).
_NAME_HINTS_BY_FIRST: Final[dict[str, tuple[str, ...]]] = {
    first: tuple(h for h in _NAME_HINTS if h[:1] == first) for first in {h[:1] for h in _NAME_HINTS}
}


def _turn_markers(hints: tuple[str, ...]) -> tuple[tuple[str, frozenset[str] | None], ...]:
    """Each turn marker's key, once, and the texts it takes (None: any value); and each of
    ``hints`` (any value)."""
    values: dict[str, set[str] | None] = {key: None for key in hints}
    for emitter in EMITTERS:
        for key, value in emitter.family.turn:
            texts = values.setdefault(key, set())
            if texts is not None:
                if value == ANY:
                    values[key] = None
                else:
                    texts.add(value)
    return tuple(
        (key, None if texts is None else frozenset(texts)) for key, texts in sorted(values.items())
    )


# what is_turn_span finds a turn by, a key looked up once however many markers test it
_TURN_VALUES: Final = _turn_markers(())
# what may_be_turn may find a turn by: those and the attribute hints
_TURN_MARKERS: Final = _turn_markers(_ATTRIBUTE_HINTS)


# Attributes read_span never looks at, by prefix: what instrumentations write in bulk (messages,
# usage, request parameters) and the web and database conventions. The service skips them when it
# converts an OTLP span (each attribute costs a microsecond there). Never list one read above;
# tests/test_read_keys.py checks every convention test's span against this list.
UNREAD_PREFIXES = (
    # (the token counts of conventions.usage are read: only the details around them are not)
    "llm.token_count.prompt_details",
    "llm.token_count.completion_details",
    "llm.invocation_parameters",
    "llm.usage.cache",
    "llm.request.functions.",
    "llm.is_streaming",
    "gen_ai.prompt.",
    "gen_ai.usage.cache",
    "gen_ai.usage.reasoning",
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
    # the Vercel AI SDK's prompts, responses, usage and settings
    "ai.prompt",
    "ai.response.",
    "ai.usage.",
    "ai.settings.",
    "ai.request.headers.",
    "ai.model.provider",
    "ai.telemetry.metadata.",
)


def may_be_genai(name: str, attributes: Mapping[str, Any], *, ended: bool = True) -> bool:
    """False only for a span that read_span reads as a Link (a cheap test on attribute keys
    and the name, for the plain spans of a web app that share the process). With ``ended``
    False, lookups only: a started span's attributes may still change on another thread."""
    if type(attributes) is dict:  # every reader's
        if _has_marker_key(attributes):
            return True
    elif ended:
        if not _MARKER_KEYS.isdisjoint(attributes):
            return True
    else:
        for key in _MARKER_KEYS:
            if key in attributes:
                return True
    hints = _NAME_HINTS_BY_FIRST.get(name[:1])
    return hints is not None and name.startswith(hints)


def may_be_turn(name: str, attributes: dict[str, Any]) -> bool:
    """False only for a span that is_turn_span says is not one (a cheap test, as may_be_genai,
    for the starts of the spans of a web app that share the process)."""
    if _has_turn_key(attributes):
        for key, texts in _TURN_MARKERS:
            value = attributes.get(key)
            if value is not None and (texts is None or (isinstance(value, str) and value in texts)):
                return True
    hints = _NAME_HINTS_BY_FIRST.get(name[:1])
    return hints is not None and name.startswith(hints)


# The keys of _MARKER_KEYS and of _TURN_MARKERS spelled out: compiled, each test is one C
# lookup, cheaper than a loop over the keys (most spans of a web app take every test).
# tests/test_read_keys.py checks that each key is here.
def _has_marker_key(attributes: dict[str, Any]) -> bool:
    return (
        _has_turn_key(attributes)
        or "gen_ai.request.model" in attributes
        or "llm.request.type" in attributes
        or "mcp.method.name" in attributes
    )


def _has_turn_key(attributes: dict[str, Any]) -> bool:
    return (
        "gen_ai.operation.name" in attributes
        or "openinference.span.kind" in attributes
        or "traceloop.span.kind" in attributes
        or "ai.operationId" in attributes
        or "metadata" in attributes
    )


@dataclass(frozen=True)
class _Reading:
    """Where read_span reads each field of a span its emitter wrote: that emitter's attributes
    first, then the other families' in EMITTERS' order."""

    emitter: Emitter
    tool_name: tuple[str, ...]
    arguments: tuple[str, ...]
    result: tuple[str, ...]
    description: tuple[str, ...]
    agent: tuple[str, ...]
    model: tuple[str, ...]
    messages: tuple[tuple[Any, ReadMessages], ...]  # (held_messages, read_messages)


def _own_first(emitter: Emitter, field: str) -> tuple[str, ...]:
    own: tuple[str, ...] = getattr(emitter.family, field)
    others = (a for e in EMITTERS for a in getattr(e.family, field))
    return tuple(dict.fromkeys((*own, *others)))


def _reading(emitter: Emitter) -> _Reading:
    messages = {
        e.held_messages: e.read_messages
        for e in (emitter, *EMITTERS)
        if e.held_messages is not no_messages
    }
    return _Reading(
        emitter,
        tool_name=_own_first(emitter, "tool_name"),
        arguments=_own_first(emitter, "arguments"),
        result=_own_first(emitter, "result"),
        description=_own_first(emitter, "description"),
        agent=_own_first(emitter, "agent"),
        model=_own_first(emitter, "model"),
        messages=tuple(messages.items()),
    )


_READINGS: Final = {e.family.name: _reading(e) for e in EMITTERS}
# the emitters whose span names (or shapes) mark a kind
_NAMED: Final = tuple(r for r in _READINGS.values() if r.emitter.kind_by_name is not no_kind)
_TOOL_AGENT: Final = ("gen_ai.agent.name", "agent.name")
_Hit = tuple[int, "_Reading | None"]
_UNREAD: _Hit = (UNMARKED, None)


def _marker_table() -> tuple[tuple[str, dict[str, _Hit], _Hit], ...]:
    """Each attribute the markers test, once: ``(key, {value: (kind, reading)}, (kind,
    reading) for any value)``, tool markers' keys first. Where several markers match, the
    first kind wins; within a kind, the first emitter."""
    by_value: dict[str, dict[str, _Hit]] = {}
    any_value: dict[str, _Hit] = {}
    for kind in (TOOL, TURN, LLM):
        for emitter in EMITTERS:
            family = emitter.family
            markers = (family.tool, family.turn, family.llm)[kind]
            for key, value in markers:
                values = by_value.setdefault(key, {})
                hit: _Hit = (kind, _READINGS[family.name])
                if value == ANY:
                    any_value.setdefault(key, hit)
                else:
                    values.setdefault(value, hit)
    return tuple(
        (
            key,
            {v: min(hit, any_value.get(key, hit), key=lambda h: h[0]) for v, hit in values.items()},
            any_value.get(key, _UNREAD),
        )
        for key, values in by_value.items()
    )


_MARKER_TABLE: Final = _marker_table()


def _choose(name: str, attrs: Mapping[str, Any]) -> tuple[int, _Reading | None]:
    """What the span is and which emitter wrote it: a tool if any marker or name says so,
    else a turn, else an LLM call; one lookup a marker key."""
    kind, reading = UNMARKED, None
    if type(attrs) is dict:  # every span view's: compiled, its lookups are C calls
        for key, values, any_hit in _MARKER_TABLE:
            value = attrs.get(key)
            if value is not None:
                # markers name texts; another type matches only "any value"
                hit = values.get(value, any_hit) if isinstance(value, str) else any_hit
                if hit[0] < kind:
                    if hit[0] == TOOL:
                        return hit
                    kind, reading = hit
    else:  # the same through another mapping's own get
        for key, values, any_hit in _MARKER_TABLE:
            value = attrs.get(key)
            if value is not None:
                hit = values.get(value, any_hit) if isinstance(value, str) else any_hit
                if hit[0] < kind:
                    if hit[0] == TOOL:
                        return hit
                    kind, reading = hit
    hints = _NAME_HINTS_BY_FIRST.get(name[:1])
    if (hints is not None and name.startswith(hints)) or _has_attribute_hint(attrs):
        for named in _NAMED:
            by_name = named.emitter.kind_by_name(name, attrs)
            if by_name < kind:
                kind, reading = by_name, named
                if kind == TOOL:
                    break
    return kind, reading


def _has_attribute_hint(attrs: Mapping[str, Any]) -> bool:
    for key in _ATTRIBUTE_HINTS:  # noqa: SIM110 (any() over a generator costs more here)
        if key in attrs:
            return True
    return False


def is_tool_span(span: SpanView) -> bool:
    return _choose(span.name, span.attributes)[0] == TOOL


def is_turn_span(name: str, attributes: Mapping[str, Any]) -> bool:
    """An agent or workflow span (a turn when outermost and holding tool calls)."""
    for key, texts in _TURN_VALUES:
        got = attributes.get(key)
        if got is not None and (texts is None or (isinstance(got, str) and got in texts)):
            return True
    hints = _NAME_HINTS_BY_FIRST.get(name[:1])
    if not ((hints is not None and name.startswith(hints)) or _has_attribute_hint(attributes)):
        return False
    return any(r.emitter.kind_by_name(name, attributes) == TURN for r in _NAMED)


def read_span(span: SpanView, config: Config) -> Record:
    """Classify a span and read what loopwatch needs from it."""
    # a plain span (no marker key, no hinted name: most of a web app's) is a Link at the cost
    # of one lookup a marker key (may_be_genai would look them up again for every other span)
    kind, reading = _choose(span.name, span.attributes)
    if reading is None or coding_agent_spans.read_from_events(span.attributes):
        return Link(span.span_id, span.parent_id, span.start_ns, span.end_ns)
    attrs = span.attributes
    if kind == TOOL:
        tool = first_text(attrs, reading.tool_name) or reading.emitter.tool_name(span)
        tool = tool or span.name or "unknown"
        if results.is_aggregate_tool(tool):
            return Link(span.span_id, span.parent_id, span.start_ns, span.end_ns)
        return _tool_call(span, config, reading, tool)
    if kind == TURN:
        return TurnMark(
            span.span_id,
            span.parent_id,
            span.start_ns,
            span.end_ns,
            first_text(attrs, reading.agent) or reading.emitter.turn_agent(span),  # agent
            first_text(attrs, reading.model),  # model
        )
    input_tokens, output_tokens, unsplit_tokens = token_usage(attrs)
    return LlmMark(
        span.span_id,
        span.parent_id,
        span.start_ns,
        span.end_ns,
        first_text(attrs, reading.model),  # model
        tool_versions(attrs),  # tool_versions
        _messages(span, config, reading),
        input_tokens,
        output_tokens,
        unsplit_tokens,
    )


def _messages(span: SpanView, config: Config, reading: _Reading) -> Messages | None:
    """A model call's messages, kept to be read (conventions.messages) only if the trace has
    no tool span: reading them costs more than the rest of the span."""
    attrs = span.attributes
    for held_messages, read_messages in reading.messages:
        found = held_messages(attrs)
        if found is not None:
            held, size = found
            agent = first_text(attrs, _TOOL_AGENT)
            read = partial(
                _conversation, read_messages, held, span.start_ns, span.end_ns, config, agent
            )
            return Messages(read, size)
    return None


def _conversation(
    read_messages: ReadMessages,
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


def _payloads(span: SpanView, reading: _Reading) -> tuple[Any, Any]:
    attrs = span.attributes
    arguments = first(attrs, reading.arguments)
    # the first result set, as first() finds it; and whether one is set to the empty text (a
    # tool that printed nothing: a known, empty result where no other is found), in one pass
    result = None
    empty = False
    for key in reading.result:
        value = attrs.get(key)
        if value is not None:
            if value != "":
                result = value
                break
            empty = True
    if arguments is None or result is None:
        hook_arguments, hook_result = reading.emitter.payloads(span)
        arguments = arguments if arguments is not None else hook_arguments
        result = result if result is not None else hook_result
    if arguments is None:
        arguments = openinference.parameters_as_arguments(attrs)
    if result is None and empty:
        result = ""
    return arguments, result


def _error_evidence(
    span: SpanView,
    reading: _Reading,
    result_error: str | None,
    result_text: str | None,
    result_types: list[str],
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
        messages.append(openai_agents_error_text(description) or description)
    level = attrs.get(logfire.LEVEL)  # on every span Logfire exports, whichever family
    if isinstance(level, int) and level >= logfire.ERROR_LEVEL:
        errored = True
    family_errored, family_messages = reading.emitter.errors(span)
    errored = errored or family_errored
    messages.extend(family_messages)
    if result_error:
        errored = True
        messages.append(result_error)
    elif errored and result_text:
        # A failed call's result is what the model was told (pydantic-ai's retry prompt, an
        # OpenAI Agents error function's text): the last place a class can be read from.
        messages.append(result_text[:500])
    # Exception classes named inside those texts count as types (read before any message).
    if messages:
        types.extend(t for t in map(error_type_in_text, messages) if t)
    return errored, types, messages


def _tool_call(span: SpanView, config: Config, reading: _Reading, tool: str) -> ToolCall:
    attrs = span.attributes
    raw_arguments, raw_result = _payloads(span, reading)
    known, arguments = decode_arguments(raw_arguments)
    arguments_off, result_off = reading.emitter.content_off(attrs)
    if known and arguments_off:
        known = False
    result_known, result, result_error, result_types, result_text = read_result(raw_result)
    if result_known and result_off:
        result_known, result = False, None
    errored, types, messages = _error_evidence(
        span, reading, result_error, result_text, result_types
    )
    # (only a span with events or the attribute can carry a decision)
    guard = _guard_decision(span) if span.events or GUARD_ATTRIBUTE in attrs else None
    return keyed_call(
        (span.span_id, span.parent_id, span.start_ns, span.end_ns),
        tool,
        config,
        (known, arguments),
        (result_known, result),
        (errored, types, messages),
        first_text(attrs, reading.description),
        first_text(attrs, _TOOL_AGENT),
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
