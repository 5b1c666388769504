"""The two incidents (fourteen timed-out tickets, eleven empty searches) through the real SDK
and processor: exact numbers."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.demo.emit import CONVENTIONS, GENAI, emit_turn
from loopwatch.demo.scenarios import Call, Turn, eleven_empty_searches, fourteen_tickets
from tests.support.helpers import Pipeline, S

DECLARED = Config(tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))})


@pytest.fixture
def declared() -> Iterator[Pipeline]:
    p = Pipeline(DECLARED)
    yield p
    p.close()


def test_fourteen_tickets_are_one_key_with_fourteen_attempts(declared: Pipeline) -> None:
    emit_turn(declared.tracer, fourteen_tickets(), 1000 * S)
    p = declared
    assert p.value("loopwatch_turns_total") == 1
    assert p.observations("loopwatch_turn_max_attempts") == {
        **{float(le): 0.0 for le in (1, 2, 3, 4, 5, 6, 8, 10, 12)},
        16.0: 1.0,
        24.0: 1.0,
        32.0: 1.0,
        64.0: 1.0,
        float("inf"): 1.0,
    }
    assert p.value("loopwatch_turn_max_attempts_sum") == 14
    assert p.value("loopwatch_tool_calls_total", tool="create_ticket", error_class="timeout") == 14
    assert p.value("loopwatch_repeat_calls_total", error_class="timeout") == 13
    assert p.value("loopwatch_over_cap_seconds_total", tool="create_ticket") == pytest.approx(
        sum(30.0 + i / 1000 for i in range(3, 14))
    )
    assert round(p.value("loopwatch_over_cap_seconds_total")) == 330
    assert p.value("loopwatch_loops_total", error_class="timeout", kind="repeat") == 1
    assert p.value("loopwatch_loops_total") == 1
    assert p.value("loopwatch_turn_max_attempts_count", model="gpt-4.1", agent="support") == 1


def test_without_declaration_the_incident_is_one_inferred_key() -> None:
    """No loopwatch.toml: the failed calls are keyed on their arguments minus free text."""
    p = Pipeline(Config())
    emit_turn(p.tracer, fourteen_tickets(), 1000 * S)
    assert p.value("loopwatch_turn_max_attempts_sum") == 14
    assert p.value("loopwatch_repeat_calls_total", error_class="timeout") == 13
    assert p.value("loopwatch_loops_total", error_class="timeout", kind="repeat") == 1
    assert p.value("loopwatch_loops_total") == 1
    assert round(p.value("loopwatch_over_cap_seconds_total"), 3) == 330.088
    assert p.value("loopwatch_calls_keyed_by_inference_total", tool="create_ticket") == 14
    p.close()


def test_identity_star_keeps_the_whole_arguments() -> None:
    p = Pipeline(Config(tools={"create_ticket": ToolDeclaration(identity=("*",))}))
    emit_turn(p.tracer, fourteen_tickets(), 1000 * S)
    assert p.value("loopwatch_turn_max_attempts_sum") == 1
    assert p.value("loopwatch_repeat_calls_total") == 0
    assert p.value("loopwatch_loops_total", kind="repeat") == 0
    # fourteen keys failing the same way in a row: a failing streak of 14, a loop of its own
    assert p.value("loopwatch_failing_streak_sum", tool="create_ticket") == 14
    assert p.value("loopwatch_loops_total", error_class="timeout", kind="failing") == 1
    assert p.value("loopwatch_loops_total") == 1
    assert p.value("loopwatch_tool_calls_total", error_class="timeout") == 14
    assert p.value("loopwatch_calls_keyed_by_inference_total") == 0
    p.close()


def _twelve_orders(summary: Callable[[int], str]) -> Turn:
    return Turn(
        "support",
        "gpt-4.1",
        tuple(
            Call(
                "create_ticket",
                {"customer_id": "c_40912", "order_id": str(88200 + i), "summary": summary(i)},
                120,
                result={"ticket": f"T-{i}"},
            )
            for i in range(12)
        ),
    )


def test_undeclared_writes_a_bulk_is_work_and_one_order_again_is_a_duplicate() -> None:
    """create_ticket is a write (its name's verb): twelve orders are twelve keys, work; one order
    with twelve different notes (prose, left out) is one key of twelve attempts, whatever each
    answer says: a duplicate side effect, eleven tickets too many."""
    p = Pipeline(Config())
    t = emit_turn(p.tracer, _twelve_orders(lambda i: "Refund missing"), 1000 * S)
    same_order = Turn(
        "support",
        "gpt-4.1",
        tuple(
            Call("create_ticket", {**c.arguments, "order_id": "88214"}, 120, result={"t": i})
            for i, c in enumerate(_twelve_orders(lambda i: f"Note {i} for the order").calls)
        ),
    )
    emit_turn(p.tracer, same_order, t)
    assert p.value("loopwatch_turns_total") == 2
    assert p.value("loopwatch_turn_max_attempts_sum") == 13
    assert p.value("loopwatch_tool_calls_total", error_class="ok") == 24
    assert p.value("loopwatch_loops_total") == 1
    assert p.value("loopwatch_loops_total", kind="duplicate", error_class="ok") == 1
    assert p.value("loopwatch_repeat_calls_total") == 11
    assert p.value("loopwatch_calls_keyed_by_inference_total") == 24
    p.close()


def _six_emails() -> Turn:
    return Turn(
        "support",
        "gpt-4.1",
        tuple(
            Call("send_email", {"to": f"c_{i}@example.com", "body": f"Order {i} shipped"}, 40)
            for i in range(6)
        ),
    )


def test_six_side_effects_that_return_nothing_are_not_a_no_rows_loop() -> None:
    """A tool returning None (recorded as ``null``) six times is work, not six empty
    searches; only a tool declared ``result = "rows"`` reads it as no rows."""
    p = Pipeline(Config())
    emit_turn(p.tracer, _six_emails(), 1000 * S)
    assert p.value("loopwatch_tool_calls_total", tool="send_email", error_class="ok") == 6
    assert p.value("loopwatch_no_rows_streak_sum", tool="send_email") == 0
    assert p.value("loopwatch_no_rows_streak_count", tool="send_email") == 1
    assert p.value("loopwatch_loops_total") == 0
    p.close()
    rows = Pipeline(Config(tools={"send_email": ToolDeclaration(result="rows")}))
    emit_turn(rows.tracer, _six_emails(), 1000 * S)
    assert rows.value("loopwatch_no_rows_streak_sum", tool="send_email") == 6
    assert rows.value("loopwatch_loops_total", tool="send_email", kind="no_rows") == 1
    rows.close()


@pytest.mark.parametrize("config", [DECLARED, Config()], ids=["declared", "undeclared"])
def test_invalid_arguments_then_timeout_on_same_identity_are_two_keys(config: Config) -> None:
    p = Pipeline(config)
    args = {"customer_id": "c_1", "order_id": "1"}
    turn = Turn(
        "support",
        "gpt-4.1",
        (
            Call(
                "create_ticket",
                {**args, "summary": "a first try"},
                20,
                error=ValueError("invalid priority"),
            ),
            Call(
                "create_ticket",
                {**args, "summary": "another try"},
                30_000,
                error=TimeoutError("slow"),
            ),
        ),
    )
    emit_turn(p.tracer, turn, 1000 * S)
    assert p.value("loopwatch_turn_max_attempts_sum") == 1
    assert p.value("loopwatch_tool_calls_total", error_class="invalid_arguments") == 1
    assert p.value("loopwatch_tool_calls_total", error_class="timeout") == 1
    assert p.value("loopwatch_calls_keyed_by_inference_total") == (0 if config.tools else 2)
    p.close()


def test_eleven_empty_searches_are_a_no_rows_streak(declared: Pipeline) -> None:
    emit_turn(declared.tracer, eleven_empty_searches(), 1000 * S)
    p = declared
    assert p.value("loopwatch_no_rows_streak_sum", tool="search_orders") == 11
    assert p.value("loopwatch_no_rows_streak_count", tool="search_orders") == 1
    assert p.value("loopwatch_loops_total", tool="search_orders", kind="no_rows") == 1
    assert p.value("loopwatch_loops_total", kind="repeat") == 0
    assert p.value("loopwatch_turn_max_attempts_sum") == 1


def test_rows_on_the_fifth_search_reset_the_streak(declared: Pipeline) -> None:
    turn = eleven_empty_searches()
    calls = list(turn.calls)
    calls[4] = Call(calls[4].tool, calls[4].arguments, 100, result=[{"order_id": "88214"}])
    emit_turn(declared.tracer, Turn(turn.agent, turn.model, tuple(calls)), 1000 * S)
    # 4 empty, rows, then 6 empty
    assert declared.value("loopwatch_no_rows_streak_sum", tool="search_orders") == 6
    assert declared.value("loopwatch_loops_total", kind="no_rows") == 1


@pytest.mark.parametrize("config", [DECLARED, Config()], ids=["declared", "undeclared"])
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_same_numbers_whichever_convention_emitted_the_trace(
    convention: str, config: Config
) -> None:
    """With the declaration or without any config (the inferred key): the same numbers."""
    p = Pipeline(config)
    t = emit_turn(p.tracer, fourteen_tickets(model="m1"), 1000 * S, convention)
    emit_turn(p.tracer, eleven_empty_searches(model="m1"), t, convention)
    got = {
        "turns": p.value("loopwatch_turns_total", model="m1", agent="support"),
        "max_attempts": p.value("loopwatch_turn_max_attempts_sum", model="m1"),
        "repeats": p.value("loopwatch_repeat_calls_total", error_class="timeout"),
        "over_cap": round(p.value("loopwatch_over_cap_seconds_total"), 3),
        "loops": p.value("loopwatch_loops_total", error_class="timeout", kind="repeat"),
        "no_rows": p.value("loopwatch_loops_total", kind="no_rows"),
        "streak": p.value("loopwatch_no_rows_streak_sum", tool="search_orders"),
        "calls": p.value("loopwatch_tool_calls_total"),
    }
    assert got == {
        "turns": 2,
        "max_attempts": 15,
        "repeats": 13,
        "over_cap": 330.088,
        "loops": 1,
        "no_rows": 1,
        "streak": 11,
        "calls": 25,
    }
    p.close()


def test_exemplar_carries_the_trace_id(declared: Pipeline) -> None:
    emit_turn(declared.tracer, fourteen_tickets(), 1000 * S, GENAI)
    declared.flush()
    exemplars = [
        s.exemplar
        for m in declared.registry.collect()
        for s in m.samples
        if s.name == "loopwatch_turn_max_attempts_bucket" and s.exemplar is not None
    ]
    assert len(exemplars) == 1
    assert exemplars[0].value == 14
    assert len(exemplars[0].labels["trace_id"]) == 32


def test_calls_without_arguments_are_counted_and_never_merged(declared: Pipeline) -> None:
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    tracer = declared.tracer
    root = tracer.start_span(
        "invoke_agent support", start_time=S, attributes={"gen_ai.agent.name": "support"}
    )
    with trace.use_span(root, end_on_exit=False):
        for i in range(6):
            args = (
                "__REDACTED__"
                if i % 2
                else json.dumps({"customer_id": "c_40912", "order_id": "88214", "summary": f"v{i}"})
            )
            span = tracer.start_span(
                "create_ticket",
                start_time=(2 + i) * S,
                attributes={
                    "openinference.span.kind": "TOOL",
                    "tool.name": "create_ticket",
                    "input.value": args,
                },
            )
            span.record_exception(TimeoutError("timed out"))
            span.set_status(Status(StatusCode.ERROR, "timed out"))
            span.end(end_time=(3 + i) * S)
    root.end(end_time=10 * S)
    # three read calls are one key, three unreadable ones another: never one key of six
    assert declared.value("loopwatch_turn_max_attempts_sum") == 3
    assert declared.value("loopwatch_repeat_calls_total", error_class="timeout") == 4
    assert declared.value("loopwatch_calls_without_arguments_total", tool="create_ticket") == 3


def test_tool_version_and_first_seen_markers(declared: Pipeline) -> None:
    turn = fourteen_tickets()
    described = Turn(turn.agent, turn.model, turn.calls[:2], {"create_ticket": "Open a ticket."})
    emit_turn(declared.tracer, described, 10 * S)
    from loopwatch.core.identity import short_hash

    version = short_hash("Open a ticket.", 8)
    assert declared.value("loopwatch_tool_max_attempts_count", tool_version=version) == 1
    assert (
        declared.value(
            "loopwatch_tool_version_first_seen_timestamp_seconds",
            tool="create_ticket",
            tool_version=version,
        )
        > 1.7e9
    )
    assert declared.value("loopwatch_model_first_seen_timestamp_seconds", model="gpt-4.1") > 1.7e9


def test_a_tool_that_only_failed_has_no_streak_observation(declared: Pipeline) -> None:
    emit_turn(declared.tracer, fourteen_tickets(), 10 * S)
    assert declared.value("loopwatch_no_rows_streak_count", tool="create_ticket") == 0


def test_a_turn_under_a_web_request_span_carries_the_service_name() -> None:
    """An agent run inside a plain HTTP server span (FastAPI, Flask) is finalized when the agent
    ends, before the request span: its service is still the resource's, not ``unknown``."""
    p = Pipeline(DECLARED, service="helpdesk-api")
    with p.tracer.start_as_current_span("POST /chat", attributes={"http.request.method": "POST"}):
        emit_turn(p.tracer, fourteen_tickets(), 1000 * S)
    assert p.value("loopwatch_turns_total", service="helpdesk-api") == 1
    assert p.value("loopwatch_turn_max_attempts_sum", service="helpdesk-api") == 14
    assert p.value("loopwatch_turns_total", service="unknown") == 0
    p.close()
