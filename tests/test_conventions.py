"""read_span on the span shapes of the GenAI conventions, OpenInference, OpenLLMetry and the
frameworks that emit them: tool name, error class, whether the arguments were read, the result
fingerprint, and one key for reworded free text under a declared identity."""

from __future__ import annotations

import json

import pytest

from loopwatch.conventions import read_span
from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.keys import UNKNOWN_IDENTITY
from loopwatch.core.records import Link, ToolCall, TurnMark
from loopwatch.core.span_view import STATUS_ERROR, STATUS_OK, STATUS_UNSET, SpanView
from tests.support.span_shapes import (
    BUILDERS,
    DECLARED,
    ERRORS,
    GENAI_SEARCH,
    MCP_SPANS,
    OI_SEARCH,
    RESULTS,
    SUMMARY_A,
    SUMMARY_B,
    TICKET,
    TIMEOUT_TEXT,
    TURNS,
    Event,
    exception,
    failed,
    openinference_langchain,
    search,
    tool_call,
    view,
)

# --------------------------------------------------------------------------------------------
# One builder per shape: a failed create_ticket call (timeout) with the given arguments.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", sorted(BUILDERS))
def test_failed_call_is_read(shape: str) -> None:
    call = tool_call(BUILDERS[shape]({**TICKET, "summary": SUMMARY_A}, 1))
    assert (call.tool, call.error_class, call.arguments_known, call.result) == (
        "create_ticket",
        "timeout",
        True,
        "unknown",
    )
    assert call.key.outcome == "timeout"
    assert call.key.identity != UNKNOWN_IDENTITY


@pytest.mark.parametrize("shape", sorted(BUILDERS))
def test_reworded_summaries_share_a_key_under_the_declared_identity(shape: str) -> None:
    build = BUILDERS[shape]
    first = tool_call(build({**TICKET, "summary": SUMMARY_A}, 1))
    second = tool_call(build({**TICKET, "summary": SUMMARY_B}, 2))
    assert first.key == second.key
    other = tool_call(build({"customer_id": "c_77777", "order_id": "88214", "summary": "x"}, 3))
    assert other.key != first.key
    # Undeclared, a failed call is keyed on its arguments minus free text: the same key again.
    bare = Config()
    inferred = tool_call(build({**TICKET, "summary": SUMMARY_A}, 1), bare).key
    assert inferred == tool_call(build({**TICKET, "summary": SUMMARY_B}, 2), bare).key
    assert inferred.inferred and not first.key.inferred
    # identity = "*" keys on the whole arguments: the byte-equality failure, chosen explicitly.
    whole = Config(tools={"create_ticket": ToolDeclaration(identity=("*",))})
    assert (
        tool_call(build({**TICKET, "summary": SUMMARY_A}, 1), whole).key
        != tool_call(build({**TICKET, "summary": SUMMARY_B}, 2), whole).key
    )


def test_same_call_keys_alike_across_conventions() -> None:
    args = {**TICKET, "summary": SUMMARY_A}
    keys = {shape: tool_call(build(args, 1)).key for shape, build in BUILDERS.items()}
    assert len(set(keys.values())) == 1, keys


# --------------------------------------------------------------------------------------------
# Results: empty (no rows), rows, or not readable.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(RESULTS))
def test_result_is_read(case: str) -> None:
    c = RESULTS[case]
    call = tool_call(c.span)
    assert call.tool == "search_orders"
    assert call.error_class == "ok"
    assert call.result == c.result
    assert call.arguments_known is c.arguments_known
    if not c.arguments_known:
        # a successful call without its arguments is keyed on itself: never a repeat
        assert call.key.identity == f"{UNKNOWN_IDENTITY}{call.span_id:x}"


def test_bare_string_keys_like_the_named_argument_under_a_one_field_identity() -> None:
    config = Config(tools={"search_orders": ToolDeclaration(identity=("query",))})
    bare = tool_call(search({**OI_SEARCH, "output.value": "[]"}, "search_orders"), config)
    named = tool_call(search({**GENAI_SEARCH, "gen_ai.tool.call.result": "[]"}), config)
    assert bare.key == named.key
    other = tool_call(
        search({**OI_SEARCH, "input.value": "boots return", "output.value": "[]"}, "search_orders"),
        config,
    )
    assert other.key != bare.key


def test_positional_arguments_never_collapse_into_one_identity() -> None:
    """A declared identity cannot be read from positional arguments (Traceloop decorators
    called positionally): the whole arguments key the call instead, so two customers never
    share a key."""

    def positional(*args: str) -> SpanView:
        return view(
            "create_ticket.tool",
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "create_ticket",
                "traceloop.entity.input": json.dumps({"args": list(args), "kwargs": {}}),
            },
            (exception("TimeoutError", TIMEOUT_TEXT),),
            STATUS_ERROR,
        )

    one = tool_call(positional("c_40912", "88214", SUMMARY_A))
    again = tool_call(positional("c_40912", "88214", SUMMARY_A))
    other = tool_call(positional("c_77777", "99999", SUMMARY_A))
    assert one.arguments_known and other.arguments_known
    assert one.key == again.key
    assert one.key != other.key


def test_redacted_and_read_arguments_never_share_a_key() -> None:
    redacted = tool_call(
        view(
            "create_ticket",
            {
                "openinference.span.kind": "TOOL",
                "tool.name": "create_ticket",
                "input.value": "__REDACTED__",
            },
            (exception("TimeoutError", TIMEOUT_TEXT),),
            STATUS_ERROR,
        )
    )
    read = tool_call(openinference_langchain({**TICKET, "summary": SUMMARY_A}, 1))
    assert not redacted.arguments_known
    assert redacted.key.identity == UNKNOWN_IDENTITY
    assert redacted.key != read.key
    assert (redacted.tool, redacted.error_class) == (read.tool, read.error_class)


# --------------------------------------------------------------------------------------------
# Error classes: exception types and messages, error.type, status, framework texts, results.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_error_class(case: str) -> None:
    span, expected = ERRORS[case]
    call = tool_call(span)
    assert call.error_class == expected
    assert call.key.outcome == expected
    assert call.result == "unknown"


def test_successful_call_is_ok() -> None:
    call = tool_call(failed(status=STATUS_OK, result='{"ticket": "TCK-1"}'))
    # create_ticket writes: its key's outcome is "ok" whatever it answers
    assert (call.error_class, call.result, call.key.outcome) == ("ok", "rows", "ok")


# --------------------------------------------------------------------------------------------
# Turns: which spans mark one.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(TURNS))
def test_turn_mark(case: str) -> None:
    span, agent = TURNS[case]
    record = read_span(span, DECLARED)
    assert isinstance(record, TurnMark)
    assert record.agent == agent


def test_langgraph_steps_are_not_turns() -> None:
    step = view(
        "tools",
        {
            "openinference.span.kind": "CHAIN",
            "metadata": '{"ls_integration": "langgraph", "langgraph_step": 2, '
            '"langgraph_node": "tools"}',
        },
    )
    assert isinstance(read_span(step, DECLARED), Link)


def test_mcp_calls_are_read_by_tool_name_with_their_error_class() -> None:
    conventions = tool_call(MCP_SPANS["conventions"])
    openllmetry = tool_call(MCP_SPANS["openllmetry"])
    for call in (conventions, openllmetry):
        assert (call.tool, call.error_class, call.arguments_known) == (
            "create_ticket",
            "timeout",
            True,
        )
    # OpenLLMetry's {"tool_name", "arguments"} envelope unwrapped: the identity fields are read,
    # so the reworded summaries are one attempt
    assert conventions.key == openllmetry.key


def test_mcp_sdk_spans_name_the_tool_never_the_span() -> None:
    sdk = tool_call(MCP_SPANS["sdk"])
    assert (sdk.tool, sdk.error_class, sdk.arguments_known) == ("create_ticket", "ok", False)
    assert tool_call(MCP_SPANS["sdk-untargeted"]).tool == "unknown"
    assert isinstance(
        read_span(view("MCP send tools/list", {"mcp.method.name": "tools/list"}), DECLARED), Link
    )


def test_calls_without_arguments_repeat_only_when_they_fail_alike() -> None:
    def sdk_call(status: int = STATUS_UNSET, *events: Event) -> ToolCall:
        return tool_call(
            view(
                "MCP send tools/call create_ticket",
                {"mcp.method.name": "tools/call"},
                events,
                status,
            )
        )

    succeeded = [sdk_call() for _ in range(6)]
    assert len({c.key for c in succeeded}) == 6  # six tickets for six orders: no repeat
    failed = [sdk_call(STATUS_ERROR, exception("TimeoutError", "timed out")) for _ in range(2)]
    assert failed[0].key == failed[1].key
    assert failed[0].error_class == "timeout"
