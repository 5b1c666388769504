"""The general rules behind the framework tests, on hand-built spans with known answers:
aggregate tool spans, two instrumentation layers on one call, output wrappers, errors named in
a result."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry.trace import StatusCode

from tests.framework_runs.common import BULK_ORDERS, DECLARED, SUMMARIES, ticket_args
from tests.support.helpers import Pipeline, S, span


@pytest.fixture
def p() -> Iterator[Pipeline]:
    pipeline = Pipeline(DECLARED)
    yield pipeline
    pipeline.close()


KIND = "openinference.span.kind"


def _tool(name: str) -> dict[str, str]:
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}


def test_aggregate_tool_span_is_not_a_call(p: Pipeline) -> None:
    """ADK's ``execute_tool (merged)`` after three parallel calls (legacy format: "N/A")."""
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
    with span(p.tracer, "invoke_agent support", 0, 10 * S, agent):
        for i, order in enumerate(BULK_ORDERS[:3]):
            attrs = {
                **_tool("refund_order"),
                "gcp.vertex.agent.tool_call_args": json.dumps({"order_id": order}),
                "gcp.vertex.agent.tool_response": '{"status": "refunded"}',
            }
            with span(p.tracer, "execute_tool refund_order", i * S, i * S + 1, attrs):
                pass
        merged = {**_tool("(merged tools)"), "gcp.vertex.agent.tool_call_args": "N/A"}
        with span(p.tracer, "execute_tool (merged)", 4 * S, 4 * S + 1, merged):
            pass
    assert p.value("loopwatch_tool_calls_total") == 3
    assert p.value("loopwatch_tool_calls_total", tool="refund_order", error_class="ok") == 3
    assert p.value("loopwatch_calls_without_arguments_total") == 0
    assert p.value("loopwatch_loops_total") == 0


def _layered_call(
    p: Pipeline, start: int, arguments: dict[str, str], error: BaseException | None
) -> None:
    """OpenInference's TOOL span (arguments, status OK) around the framework's own
    ``execute_tool`` span (error.type, no arguments), as AutoGen writes them."""
    outer = {
        "openinference.span.kind": "TOOL",
        "tool.name": "create_ticket" if "summary" in arguments else "refund_order",
        "input.value": json.dumps(arguments),
    }
    tool = str(outer["tool.name"])
    with span(p.tracer, tool, start, start + 30 * S, outer):
        inner = _tool(tool)
        if error is not None:
            inner["error.type"] = type(error).__name__
        with span(p.tracer, f"execute_tool {tool}", start + 1, start + 30 * S - 1, inner, error):
            pass


def test_two_layers_of_one_call_merge_arguments_and_error(p: Pipeline) -> None:
    """As AutoGen writes them with both layers on one provider, its ``invoke_agent`` root
    ending before OpenInference's AGENT span under it."""
    from opentelemetry import trace as api

    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
    root = p.tracer.start_span("invoke_agent support", start_time=0, attributes=attrs)
    with api.use_span(root, end_on_exit=False):
        agent = p.tracer.start_span(
            "support.on_messages_stream", start_time=1, attributes={KIND: "AGENT"}
        )
    with api.use_span(agent, end_on_exit=False):
        for i in range(5):
            _layered_call(p, i * 31 * S, ticket_args(i), TimeoutError("no answer"))
    root.end(end_time=200 * S)
    agent.end(end_time=200 * S + 1)
    assert p.value("loopwatch_tool_calls_total") == 5
    assert p.value("loopwatch_tool_calls_total", tool="create_ticket", error_class="timeout") == 5
    assert p.value("loopwatch_turn_max_attempts_sum") == 5
    assert p.value("loopwatch_repeat_calls_total") == 4
    assert p.value("loopwatch_loops_total", tool="create_ticket", error_class="timeout") == 1
    assert p.value("loopwatch_calls_without_arguments_total") == 0
    # the turn's agent comes from the root span when the tool spans carry none
    assert p.value("loopwatch_turns_total", agent="support") == 1


def test_two_layers_of_six_different_orders_are_no_loop(p: Pipeline) -> None:
    with span(p.tracer, "autogen run", 0, 200 * S):
        for i, order in enumerate(BULK_ORDERS):
            _layered_call(p, i * 31 * S, {"order_id": order}, None)
    assert p.value("loopwatch_tool_calls_total") == 6
    assert p.value("loopwatch_turn_max_attempts_sum") == 1
    assert p.value("loopwatch_loops_total") == 0


def test_same_tool_nested_under_another_tool_is_not_merged_across_tools(p: Pipeline) -> None:
    """Only a span of the *same* tool is another layer: a tool that calls another tool makes
    two calls."""
    with span(p.tracer, "agent run", 0, 10 * S, {"gen_ai.agent.name": "support"}):
        attrs = {**_tool("create_ticket"), "gen_ai.tool.call.arguments": json.dumps(ticket_args(0))}
        with span(p.tracer, "execute_tool create_ticket", 0, 5 * S, attrs):
            inner = {**_tool("search_orders"), "gen_ai.tool.call.arguments": '{"query": "x"}'}
            with span(p.tracer, "execute_tool search_orders", 1, 2, inner):
                pass
    assert p.value("loopwatch_tool_calls_total") == 2


def _llamaindex_output(raw_output: object, is_error: bool = False) -> str:
    content = str(raw_output)
    return json.dumps(
        {
            "blocks": [{"block_type": "text", "text": content}],
            "tool_name": "search_orders",
            "raw_input": {"args": [], "kwargs": {"query": "boots"}},
            "raw_output": raw_output,
            "is_error": is_error,
        }
    )


def test_output_wrapper_is_unwrapped_to_the_tools_value(p: Pipeline) -> None:
    with span(p.tracer, "agent", 0, 10 * S, {"openinference.span.kind": "AGENT"}):
        for i in range(4):
            attrs = {
                "openinference.span.kind": "TOOL",
                "tool.name": "search_orders",
                "input.value": json.dumps({"query": SUMMARIES[i]}),
                "output.value": _llamaindex_output([]),
            }
            with span(p.tracer, "FunctionTool.acall", i * S, i * S + 1, attrs):
                pass
    assert p.value("loopwatch_no_rows_streak_sum", tool="search_orders") == 4
    assert p.value("loopwatch_loops_total", tool="search_orders", kind="no_rows") == 1


def test_output_wrapper_error_flag_is_an_error(p: Pipeline) -> None:
    with span(p.tracer, "agent", 0, 10 * S, {"openinference.span.kind": "AGENT"}):
        attrs = {
            "openinference.span.kind": "TOOL",
            "tool.name": "search_orders",
            "input.value": '{"query": "boots"}',
            "output.value": _llamaindex_output("Request timed out", is_error=True),
        }
        with span(p.tracer, "FunctionTool.acall", 0, 1, attrs):
            pass
    assert p.value("loopwatch_tool_calls_total", error_class="timeout") == 1


def test_error_type_named_in_a_result_is_classified(p: Pipeline) -> None:
    """ADK's ReflectAndRetryToolPlugin: status unset, the failure described in the result."""
    with span(p.tracer, "invoke_agent support", 0, 10 * S, {"gen_ai.agent.name": "support"}):
        for i in range(3):
            result = {
                "response_type": "ERROR_HANDLED_BY_REFLECT_AND_RETRY_PLUGIN",
                "error_type": "TimeoutError",
                "error_details": "ticket service did not answer",
                "retry_count": i + 1,
                "reflection_guidance": "The call to tool `create_ticket` failed. Do not repeat",
            }
            attrs = {
                **_tool("create_ticket"),
                "gen_ai.tool.call.arguments": json.dumps(ticket_args(i)),
                "gen_ai.tool.call.result": json.dumps(result),
            }
            with span(p.tracer, "execute_tool create_ticket", i * S, i * S + 1, attrs):
                pass
    assert p.value("loopwatch_tool_calls_total", error_class="timeout") == 3
    assert p.value("loopwatch_loops_total", tool="create_ticket", error_class="timeout") == 1


def test_status_error_still_wins_over_an_ok_looking_result(p: Pipeline) -> None:
    with span(p.tracer, "invoke_agent support", 0, 10 * S, {"gen_ai.agent.name": "support"}):
        attrs = {**_tool("search_orders"), "gen_ai.tool.call.arguments": '{"query": "x"}'}
        with span(
            p.tracer, "execute_tool search_orders", 0, 1, attrs, status=(StatusCode.ERROR, "")
        ):
            pass
    assert p.value("loopwatch_tool_calls_total", error_class="tool_error") == 1
