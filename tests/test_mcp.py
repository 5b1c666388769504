"""Tools called over MCP (a real stdio server, tests/fixtures/mcp/server.py), each turn marked by
``loopwatch.turn``: the three turns of the framework tests, counted exactly where the spans carry
what is needed, and never read as a loop where they do not.

- mcp 2.x with ``loopwatch.instrument()``: loopwatch's ``tools/call`` span around each call (the
  SDK's own span nested in it, read as the same call).
- mcp 1.x with OpenLLMetry's MCP instrumentor (``.venv-crewai``): its ``{tool}.tool`` spans.
- mcp 2.x's own spans alone: tool names only; no failure and no result can be seen, and
  successful calls without arguments are never repeats of each other."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import run_scenario, venv_python

ROOT = Path(__file__).resolve().parents[1]
SAMPLES: dict[tuple[str, str], list[tuple[str, dict[str, str], float]]] = {}


def samples(venv: str, mode: str, tmp_path: Path) -> list[tuple[str, dict[str, str], float]]:
    if (venv, mode) not in SAMPLES:
        out = tmp_path / "samples.json"
        found = run_scenario(
            venv_python(venv), ["tests.framework_runs.mcp_agent", mode, str(out)], out
        )
        SAMPLES[(venv, mode)] = [tuple(s) for s in found]
    return SAMPLES[(venv, mode)]


def value(found: list[tuple[str, dict[str, str], float]], name: str, **labels: str) -> float:
    return sum(
        v for n, got, v in found if n == name and all(got.get(k) == w for k, w in labels.items())
    )


@pytest.mark.parametrize(
    "venv", [".venv", ".venv-crewai"], ids=["mcp2-loopwatch", "mcp1-openllmetry"]
)
def test_three_turns_over_mcp_are_counted_exactly(venv: str, tmp_path: Path) -> None:
    found = samples(venv, "instrument", tmp_path)
    turn = {"agent": "support", "model": "unknown"}
    assert value(found, "loopwatch_turns_total", **turn) == 3
    # max attempts 6 (the timeouts), 1 (the searches), 1 (six tickets for six orders)
    assert value(found, "loopwatch_turn_max_attempts_sum", **turn) == 8
    assert value(found, "loopwatch_turn_max_attempts_bucket", le="1.0", **turn) == 2
    assert value(found, "loopwatch_loops_total", tool="create_ticket") == 1
    assert (
        value(
            found,
            "loopwatch_loops_total",
            tool="create_ticket",
            error_class="timeout",
            kind="repeat",
        )
        == 1
    )
    assert value(found, "loopwatch_loops_total", tool="search_orders", kind="no_rows") == 1
    assert value(found, "loopwatch_no_rows_streak_sum", tool="search_orders") == 4
    assert (
        value(found, "loopwatch_tool_calls_total", tool="create_ticket", error_class="timeout") == 6
    )
    assert value(found, "loopwatch_tool_calls_total", tool="create_ticket", error_class="ok") == 6
    assert value(found, "loopwatch_tool_calls_total", tool="search_orders") == 4
    assert value(found, "loopwatch_tool_calls_total", tool="unknown") == 0


def test_the_sdk_spans_alone_never_make_a_false_loop(tmp_path: Path) -> None:
    found = samples(".venv", "sdk-only", tmp_path)
    turn = {"agent": "support", "model": "unknown"}
    assert value(found, "loopwatch_turns_total", **turn) == 3
    assert value(found, "loopwatch_turn_max_attempts_sum", **turn) == 3  # 1 each: nothing repeats
    assert value(found, "loopwatch_loops_total") == 0
    # what these spans cannot show: the timeouts read as successful calls of create_ticket
    assert value(found, "loopwatch_tool_calls_total", tool="create_ticket", error_class="ok") == 12
    assert value(found, "loopwatch_tool_calls_total", tool="search_orders", error_class="ok") == 4


def _handrolled_mcp(pipeline: Any, turn_spans: bool, tool_attributes: dict[str, str]) -> None:
    """The three turns of a hand-rolled loop: GenAI model calls with their messages, and an MCP
    client span for each call, named after its tool and carrying ``tool_attributes``. With
    ``turn_spans`` each turn is under ``invoke_agent``; without, every span is its own trace."""
    from tests.support.conversations import conversation_script, genai_attributes, genai_message
    from tests.support.helpers import S, span

    tracer = pipeline.tracer
    clock = 0
    history = [genai_message("system", "You are a support agent.")]
    for user_text, responses, results in conversation_script():
        history.append(genai_message("user", user_text))
        turn = (
            span(tracer, "invoke_agent support", clock, clock + 3600 * S)
            if turn_spans
            else contextlib.nullcontext()
        )
        with turn:
            answered = 0
            for calls in responses:
                answer = genai_message("assistant", calls=calls)
                with span(tracer, "chat", clock, clock + S, genai_attributes(history, answer)):
                    pass
                history.append(answer)
                for i, (_, tool, _) in enumerate(calls):
                    start = clock + S + i
                    name = f"MCP send tools/call {tool}"
                    with span(tracer, name, start, start + 30 * S, tool_attributes):
                        pass
                clock += 32 * S
                done = results[answered : answered + len(calls)]
                answered += len(calls)
                pairs = [(c[0], r) for c, r in zip(calls, done, strict=True)]
                history.append(genai_message("tool", results=pairs))
            text = genai_message("assistant", "Done.")
            with span(tracer, "chat", clock, clock + S, genai_attributes(history, text)):
                pass
            history.append(text)
            clock += 2 * S


def _assert_three_turns(p: Any) -> None:
    assert p.value("loopwatch_turns_total") == 3
    assert p.value("loopwatch_turn_max_attempts_sum") == 8  # 6, 1, 1
    assert p.value("loopwatch_loops_total", tool="create_ticket", error_class="timeout") == 1
    assert p.value("loopwatch_loops_total", tool="create_ticket") == 1
    assert p.value("loopwatch_loops_total", tool="search_orders", kind="no_rows") == 1
    assert p.value("loopwatch_no_rows_streak_sum", tool="search_orders") == 4
    assert p.value("loopwatch_tool_calls_total", tool="create_ticket", error_class="timeout") == 6
    assert p.value("loopwatch_tool_calls_total", tool="create_ticket", error_class="ok") == 6
    assert p.value("loopwatch_tool_calls_total") == 16
    assert p.value("loopwatch_calls_without_arguments_total") == 0


def test_argument_less_tool_spans_are_completed_from_the_model_calls() -> None:
    """The MCP SDK's own spans alone (tool name only) in turns whose model calls carry their
    messages: each span is the next call of its tool the model asked for, with that call's
    arguments and the result (and error) it was sent: exact numbers, no false loop."""
    from tests.support.conversations import conversation_config
    from tests.support.helpers import Pipeline

    p = Pipeline(conversation_config())
    _handrolled_mcp(p, True, {"mcp.method.name": "tools/call"})
    _assert_three_turns(p)
    p.close()


def test_lone_tool_spans_of_a_handrolled_loop_count_once() -> None:
    """No span around the turns: each model call and each MCP call is a trace of its own. A
    lone tool span that an open conversation asked for is that call, counted once there."""
    from tests.support.conversations import conversation_config
    from tests.support.helpers import Pipeline

    p = Pipeline(conversation_config())
    _handrolled_mcp(p, False, {"mcp.method.name": "tools/call", "jsonrpc.request.id": "1"})
    _assert_three_turns(p)
    assert p.value("loopwatch_spans_total", kind="tool") == 16
    p.close()


def test_a_call_seen_by_the_client_and_the_server_is_one_call() -> None:
    """A trace that crosses into the MCP server: loopwatch's client span, the SDK's send span
    under it and the server's span under that (the conventions' opt-in arguments and result on
    the server side) are one call of create_ticket, its arguments from the server span."""
    from tests.support.conversations import conversation_config
    from tests.support.helpers import Pipeline, S, span

    client = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "create_ticket",
        "mcp.method.name": "tools/call",
    }
    server = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "create_ticket",
        "gen_ai.tool.call.result": "TimeoutError: ticket service timed out after 30s",
        "error.type": "tool_error",
    }
    p = Pipeline(conversation_config())
    with span(p.tracer, "invoke_agent support", 0, 200 * S):
        for n in range(3):
            arguments = {"customer_id": "c_40912", "order_id": "88214", "summary": f"try {n}"}
            at = (1 + n * 40) * S
            with (
                span(p.tracer, "tools/call create_ticket", at, at + 31 * S, client),
                span(
                    p.tracer,
                    "MCP send tools/call create_ticket",
                    at,
                    at + 31 * S,
                    {"mcp.method.name": "tools/call"},
                ),
                span(
                    p.tracer,
                    "tools/call create_ticket",
                    at + S,
                    at + 30 * S,
                    {**server, "gen_ai.tool.call.arguments": json.dumps(arguments)},
                ),
            ):
                pass
    assert p.value("loopwatch_tool_calls_total", tool="create_ticket") == 3
    assert p.value("loopwatch_tool_calls_total", tool="create_ticket", error_class="timeout") == 3
    assert p.value("loopwatch_turn_max_attempts_sum") == 3  # one key: the three are one attempt
    assert p.value("loopwatch_loops_total", tool="create_ticket", error_class="timeout") == 1
    assert p.value("loopwatch_calls_without_arguments_total") == 0
    p.close()


def test_the_service_counts_lone_tool_spans_once_too() -> None:
    """The same spans over OTLP/gRPC to ``loopwatch serve``'s pipeline: every sample equal."""
    from dataclasses import replace

    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from tests.support.conversations import conversation_config
    from tests.support.helpers import Pipeline
    from tests.support.service import running, settle, snapshot

    config = replace(conversation_config(), grace_seconds=0.0)
    with running(config) as service:
        assert service.bound
        p = Pipeline(config=config)
        exporter = OTLPSpanExporter(endpoint=service.bound.grpc, insecure=True)
        p.provider.add_span_processor(SimpleSpanProcessor(exporter))
        _handrolled_mcp(p, False, {"mcp.method.name": "tools/call"})
        p.flush()
        settle(service)
        _assert_three_turns(p)
        assert snapshot(service.registry) == snapshot(p.registry)
        p.close()
