"""The loop breaker: exact counts on the two incidents, and its decisions through the processor."""

from __future__ import annotations

import asyncio
import json
import threading
from functools import partial
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode, Tracer

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.records import GUARD_DECISIONS
from loopwatch.demo.scenarios import SEARCH_QUERIES, TICKET_SUMMARIES
from loopwatch.guards import LoopBreaker, TerminalResult, current_turn
from loopwatch.guards.breaker import BreakerTurn
from tests.fixtures.tools.tickets import TicketService
from tests.support.helpers import Pipeline, S, span
from tests.support.stand_ins import answering, logged

CONFIG = Config(
    tools={
        "create_ticket": ToolDeclaration(identity=("customer_id", "order_id")),
        "search_orders": ToolDeclaration(identity=("customer_id",), result="rows"),
    }
)


def _ticket_args(summary: str, order: str = "88214") -> dict[str, str]:
    return {"customer_id": "c_40912", "order_id": order, "summary": summary}


def _replay_tickets(turn: BreakerTurn, service: TicketService) -> list[Any]:
    """The fourteen regenerated calls, each answered by the service or by the breaker."""
    answers: list[Any] = []
    for summary in TICKET_SUMMARIES:
        args = _ticket_args(summary)
        try:
            answers.append(turn.call("create_ticket", args, partial(service.create, **args)))
        except TimeoutError as e:
            answers.append(e)
    return answers


def test_cap_two_lets_three_tickets_through_and_stops_the_fourth() -> None:
    service = TicketService()
    with LoopBreaker(CONFIG).turn() as turn:
        answers = _replay_tickets(turn, service)
    assert len(service.requests) == 3
    assert len(service.tickets) == 3
    assert [type(a).__name__ for a in answers[:4]] == [
        "TimeoutError",
        "TimeoutError",
        "TimeoutError",
        "TerminalResult",
    ]
    stops = [a for a in answers if isinstance(a, TerminalResult)]
    assert len(stops) == 11
    # the design's incident: 11 calls past a cap of 2 not run, each a 30 s timeout: 330 s
    assert sum(30 for _ in stops) == 330
    first = stops[0]
    assert (first.decision, first.tool, first.error_class, first.attempts) == (
        "stopped",
        "create_ticket",
        "timeout",
        3,
    )
    text = str(first)
    assert "outcome is unknown" in text
    assert "may have succeeded" in text
    assert "Do not retry" in text
    assert "customer_id and order_id" in text
    assert "c_40912" not in text and "88214" not in text  # no argument values
    assert turn.tools_disabled
    assert len(turn.decisions) == 11
    assert list(turn.attempts().values()) == [3]


POLL = {"action": "poll", "id": "job_7"}


def _growing_polls() -> list[str]:
    """Twenty-four answers of a running job whose log grows a line each time, then its end."""
    lines = [f"[2025-05-01T12:00:{i:02d}Z] compiled module {i} of 24" for i in range(24)]
    return ["\n".join(lines[: i + 1]) for i in range(24)] + ["\n".join([*lines, "exit code 0"])]


def _unchanged_polls() -> list[dict[str, Any]]:
    """Eleven answers that change only in their request id, time and duration."""
    return [
        {
            "request_id": f"req_{i}",
            "status": "running",
            "checked_at": f"2025-05-01T12:00:{i:02d}Z",
            "elapsed_ms": 1000 * i,
            "log": ["compiled module 1 of 24"],
        }
        for i in range(11)
    ]


@pytest.mark.parametrize(
    "config",
    [Config(), Config(tools={"process": ToolDeclaration(identity=("action", "id"))})],
    ids=["undeclared", "declared"],
)
def test_polls_that_progress_all_run_past_a_cap_of_two(config: Config) -> None:
    ran: list[int] = []
    with LoopBreaker(config, cap=2).turn() as turn:
        for i, answer in enumerate(_growing_polls()):
            turn.call("process", POLL, logged(ran, i, answer))
    assert len(ran) == 25
    assert turn.decisions == ()
    assert list(turn.attempts().values()) == [1]  # each poll progressed: a new run of one


@pytest.mark.parametrize(
    "config",
    [Config(), Config(tools={"process": ToolDeclaration(identity=("action", "id"))})],
    ids=["undeclared", "declared"],
)
def test_polls_with_unchanged_output_stop_at_a_cap_of_two(config: Config) -> None:
    ran: list[int] = []
    with LoopBreaker(config, cap=2).turn() as turn:
        answers = [
            turn.call("process", POLL, logged(ran, i, answer))
            for i, answer in enumerate(_unchanged_polls())
        ]
    assert ran == [0, 1, 2]
    stops = [a for a in answers if isinstance(a, TerminalResult)]
    assert len(stops) == 8
    assert answers[3] is stops[0]
    assert {(s.decision, s.error_class, s.attempts) for s in stops} == {("stopped", "ok", 3)}
    assert list(turn.attempts().values()) == [3]


def test_progress_then_the_same_answer_counts_from_the_last_change() -> None:
    """Two advancing polls, then the same answer: the run of no progress starts at the second
    poll, so the cap of 2 lets that answer come three times and stops the fourth."""
    answers = ["step 1", "step 2", "step 2", "step 2", "step 2", "step 2"]
    ran: list[int] = []
    with LoopBreaker(Config(), cap=2).turn() as turn:
        got = [turn.call("process", POLL, logged(ran, i, a)) for i, a in enumerate(answers)]
    assert ran == [0, 1, 2, 3]
    assert [isinstance(g, TerminalResult) for g in got] == [False] * 4 + [True] * 2


def test_cap_is_configurable_and_defaults_follow_the_loop_threshold() -> None:
    service = TicketService()
    with LoopBreaker(CONFIG, cap=0).turn() as turn:
        _replay_tickets(turn, service)
    assert len(service.tickets) == 1
    service = TicketService()
    config = Config(loop_threshold=5, tools=CONFIG.tools)
    with LoopBreaker(config).turn() as turn:
        _replay_tickets(turn, service)
    assert len(service.tickets) == 5


def test_bulk_turn_for_twelve_orders_is_not_stopped() -> None:
    service = TicketService()
    with LoopBreaker(CONFIG).turn() as turn:
        for i in range(12):
            args = _ticket_args("Refund missing", order=str(88200 + i))
            with pytest.raises(TimeoutError):
                turn.call("create_ticket", args, partial(service.create, **args))
    assert len(service.tickets) == 12
    assert turn.decisions == ()
    assert not turn.tools_disabled


@pytest.mark.parametrize(
    ("config", "decision", "text"),
    [
        # the declared identity (customer_id) repeats with outcome "empty": the cap stops it
        (CONFIG, "stopped", "returned nothing"),
        # no config: every query is its own key; empty as the metrics read it, for every tool
        (Config(), "no_rows_stopped", "no rows 3 times in a row"),
    ],
    ids=["declared", "no-config"],
)
def test_eleven_empty_searches_stop_after_three(config: Config, decision: str, text: str) -> None:
    ran: list[str] = []
    with LoopBreaker(config).turn() as turn:
        answers: list[Any] = [
            turn.call(
                "search_orders",
                {"query": q, "customer_id": "c_40912"},
                logged(ran, q, []),
            )
            for q in SEARCH_QUERIES
        ]
    assert len(ran) == 3
    assert [a for a in answers if not isinstance(a, TerminalResult)] == [[], [], []]
    assert {d.decision for d in turn.decisions} == {decision}
    assert len(turn.decisions) == 8
    assert text in str(turn.decisions[0])


def test_without_config_the_reworded_incident_stops_at_three_tickets() -> None:
    """No declaration: the failed calls share the inferred key (arguments minus free text)."""
    service = TicketService()
    with LoopBreaker().turn() as turn:
        answers = _replay_tickets(turn, service)
    assert len(service.requests) == 3
    assert len(service.tickets) == 3
    stops = [a for a in answers if isinstance(a, TerminalResult)]
    assert len(stops) == 11
    first = stops[0]
    assert (first.decision, first.error_class, first.attempts) == ("stopped", "timeout", 3)
    text = str(first)
    assert "with the same customer_id and order_id timed out" in text
    assert "may have succeeded" in text and "Do not retry" in text
    assert "c_40912" not in text and "88214" not in text
    assert [k.inferred for k in turn.attempts()] == [True]


def test_without_config_a_reworded_free_text_only_call_is_one_key() -> None:
    def fail() -> Any:
        raise ConnectionRefusedError("connection refused")

    with LoopBreaker().turn() as turn:
        for q in SEARCH_QUERIES[:3]:
            with pytest.raises(ConnectionRefusedError):
                turn.call("ask_docs", {"question": q}, fail)
        stop = turn.call("ask_docs", {"question": SEARCH_QUERIES[3]}, fail)
    assert isinstance(stop, TerminalResult)
    assert "with the same request (reworded) found the service unavailable" in str(stop)


def test_without_config_a_bulk_of_writes_runs_and_one_write_repeated_stops_at_the_cap() -> None:
    """create_ticket is a write (its name's verb): twelve orders all run; one order with
    reworded summaries is one key whatever each answer says, so the default cap (2 repeats)
    lets three tickets through and stops the rest."""
    service = TicketService(times_out=False)
    with LoopBreaker().turn() as turn:
        for i in range(12):
            args = _ticket_args("Refund missing", order=str(88200 + i))
            turn.call("create_ticket", args, partial(service.create, **args))
        assert turn.decisions == ()
        answers = []
        for summary in TICKET_SUMMARIES[:12]:
            args = _ticket_args(summary)
            answers.append(turn.call("create_ticket", args, partial(service.create, **args)))
    assert len(service.tickets) == 15
    assert [isinstance(a, TerminalResult) for a in answers] == [False] * 3 + [True] * 9
    assert "already succeeded, and each call does it again" in str(answers[3])
    assert "c_40912" not in str(answers[3]) and "88214" not in str(answers[3])


def test_without_config_the_bulk_of_failing_orders_is_not_stopped() -> None:
    service = TicketService()
    with LoopBreaker().turn() as turn:
        for i in range(12):
            args = _ticket_args(TICKET_SUMMARIES[i], order=str(88200 + i))
            with pytest.raises(TimeoutError):
                turn.call("create_ticket", args, partial(service.create, **args))
    assert len(service.tickets) == 12
    assert turn.decisions == ()


def test_without_config_side_effects_that_return_nothing_are_not_stopped() -> None:
    sent: list[str] = []
    with LoopBreaker().turn() as turn:
        for i in range(6):
            args = {"to": f"c_{i}@example.com", "body": f"Order {i} shipped"}
            turn.call("send_email", args, logged(sent, args["to"], None))
    assert len(sent) == 6
    assert turn.decisions == ()


def test_no_rows_backstop_catches_searches_with_different_identities() -> None:
    ran: list[str] = []
    with LoopBreaker(CONFIG).turn() as turn:
        answers: list[Any] = [
            turn.call(
                "search_orders",
                {"query": q, "customer_id": f"c_{i}"},
                logged(ran, q, {"results": []}),
            )
            for i, q in enumerate(SEARCH_QUERIES)
        ]
    assert len(ran) == 3
    stop = answers[3]
    assert isinstance(stop, TerminalResult)
    assert (stop.decision, stop.attempts) == ("no_rows_stopped", 3)
    assert "no rows 3 times in a row" in str(stop)
    assert len(turn.decisions) == 8


def test_rows_reset_the_no_rows_streak() -> None:
    results = [[], [], [{"order_id": "1"}], [], [], []]
    with LoopBreaker(CONFIG, no_rows=3).turn() as turn:
        answers = [
            turn.call("search_orders", {"query": str(i), "customer_id": f"c_{i}"}, answering(r))
            for i, r in enumerate(results)
        ]
    assert not any(isinstance(a, TerminalResult) for a in answers)


def test_budget_is_an_outer_bound() -> None:
    with LoopBreaker(CONFIG, budget=5).turn() as turn:
        answers = [turn.call("lookup", {"q": str(i)}, answering({"row": i})) for i in range(8)]
    assert [isinstance(a, TerminalResult) for a in answers] == [False] * 5 + [True] * 3
    assert {d.decision for d in turn.decisions} == {"budget_exhausted"}
    assert turn.calls_run == 5


def test_each_error_class_gets_its_own_key_and_wording() -> None:
    args = _ticket_args("x")

    def fail(e: Exception) -> Any:
        raise e

    with LoopBreaker(CONFIG).turn() as turn:
        for _ in range(2):
            with pytest.raises(ValueError):
                turn.call("create_ticket", args, lambda: fail(ValueError("invalid priority")))
        for _ in range(3):
            with pytest.raises(PermissionError):
                turn.call("create_ticket", args, lambda: fail(PermissionError("403 forbidden")))
        stop = turn.call("create_ticket", args, lambda: "T-1")
    assert isinstance(stop, TerminalResult)
    assert stop.error_class == "unauthorized"
    assert "not authorized" in str(stop)
    assert sorted(turn.attempts().values()) == [2, 3]


def test_error_text_returned_as_result_counts_as_that_error() -> None:
    with LoopBreaker(CONFIG).turn() as turn:
        for _ in range(3):
            turn.call("create_ticket", _ticket_args("x"), lambda: "Error: rate limit exceeded")
        stop = turn.call("create_ticket", _ticket_args("y"), lambda: "T-1")
    assert isinstance(stop, TerminalResult)
    assert stop.error_class == "rate_limited"


def test_parallel_identical_calls_count_while_in_flight() -> None:
    gate = threading.Event()
    started = threading.Barrier(4)  # three calls and this thread
    out: list[Any] = []

    def slow() -> str:
        started.wait(5)
        gate.wait(5)
        return "T-1"

    with LoopBreaker(CONFIG).turn() as turn:
        threads = [
            threading.Thread(
                target=lambda: out.append(turn.call("create_ticket", _ticket_args("a"), slow))
            )
            for _ in range(3)
        ]
        for t in threads:
            t.start()
        started.wait(5)
        fourth = turn.call("create_ticket", _ticket_args("b"), lambda: "T-2")
        gate.set()
        for t in threads:
            t.join(5)
    assert out == ["T-1", "T-1", "T-1"]
    assert isinstance(fourth, TerminalResult)
    assert "still running" in str(fourth)


def test_turns_are_isolated_and_async_calls_are_counted() -> None:
    breaker = LoopBreaker(CONFIG)

    async def one_turn() -> int:
        with breaker.turn() as turn:
            assert current_turn() is turn
            ran = 0
            for summary in TICKET_SUMMARIES:

                async def create() -> str:
                    nonlocal ran
                    ran += 1
                    await asyncio.sleep(0)
                    return "T-1"

                await turn.acall("create_ticket", _ticket_args(summary), create)
            return ran

    async def both() -> list[int]:
        return list(await asyncio.gather(one_turn(), one_turn()))

    assert asyncio.run(both()) == [3, 3]
    assert current_turn() is None


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="cap"):
        LoopBreaker(cap=-1)
    with pytest.raises(ValueError, match="budget"):
        LoopBreaker(budget=0)


# -- through the real SDK and processor ------------------------------------------------------


def _tool_span_call(tracer: Tracer, turn: BreakerTurn, t: int, summary: str) -> int:
    """One create_ticket call inside a GenAI execute_tool span, as an instrumented framework
    would trace it; the breaker runs inside that span."""
    args = _ticket_args(summary)
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "create_ticket",
        "gen_ai.tool.call.arguments": json.dumps(args),
    }
    end = t + 30 * S
    s = tracer.start_span("execute_tool create_ticket", start_time=t, attributes=attrs)
    with trace.use_span(s, end_on_exit=False):
        try:
            answer = turn.call("create_ticket", args, lambda: TicketService().create(**args))
        except TimeoutError as e:
            s.record_exception(e)
            s.set_status(Status(StatusCode.ERROR, str(e)))
        else:
            assert isinstance(answer, TerminalResult)
            s.set_attribute("gen_ai.tool.call.result", str(answer))
    s.end(end_time=end)
    return end


def test_decisions_are_counted_by_the_processor_not_as_attempts() -> None:
    p = Pipeline(CONFIG)
    try:
        with LoopBreaker(CONFIG).turn() as turn:
            root_attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
            with span(p.tracer, "invoke_agent support", 1000 * S, 2000 * S, root_attrs):
                t = 1000 * S
                for summary in TICKET_SUMMARIES:
                    t = _tool_span_call(p.tracer, turn, t, summary)
        assert p.value("loopwatch_turns_total") == 1
        assert p.value("loopwatch_tool_calls_total", tool="create_ticket") == 3
        assert p.value("loopwatch_tool_calls_total", error_class="timeout") == 3
        assert p.value("loopwatch_turn_max_attempts_sum") == 3
        assert p.value("loopwatch_over_cap_seconds_total") == 0
        assert p.value("loopwatch_loops_total", error_class="timeout", kind="repeat") == 1
        assert (
            p.value(
                "loopwatch_guard_decisions_total",
                service="support-agent",
                agent="support",
                tool="create_ticket",
                decision="stopped",
            )
            == 11
        )
        assert p.value("loopwatch_guard_decisions_total") == 11
    finally:
        p.close()


def test_without_a_tool_span_the_breaker_emits_its_own() -> None:
    p = Pipeline(CONFIG)
    try:
        breaker = LoopBreaker(CONFIG, budget=1, tracer_provider=p.provider)
        with breaker.turn() as turn:
            root_attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
            with span(p.tracer, "invoke_agent support", 1000 * S, 2000 * S, root_attrs):
                turn.call("lookup", {"q": "a"}, lambda: [1])
                turn.call("lookup", {"q": "b"}, lambda: [1])
                turn.call("lookup", {"q": "c"}, lambda: [1])
        assert p.value("loopwatch_guard_decisions_total", decision="budget_exhausted") == 2
        assert p.value("loopwatch_guard_decisions_total", agent="support") == 2
        assert p.value("loopwatch_tool_calls_total") == 0
    finally:
        p.close()


def test_decision_names_are_the_cores() -> None:
    from loopwatch.guards import terminal

    names = {
        terminal.STOPPED,
        terminal.NO_ROWS_STOPPED,
        terminal.BUDGET_EXHAUSTED,
        terminal.SUPPRESSED,
        terminal.CIRCUIT_OPEN,
        terminal.STORE_UNAVAILABLE,
        terminal.STORE_UNCHECKED,
    }
    assert names == GUARD_DECISIONS


def test_no_rows_decisions_are_counted_by_the_processor() -> None:
    p = Pipeline(CONFIG)
    try:
        breaker = LoopBreaker(CONFIG, tracer_provider=p.provider)
        with breaker.turn() as turn:
            root_attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
            with span(p.tracer, "invoke_agent support", 1000 * S, 2000 * S, root_attrs):
                for i, q in enumerate(SEARCH_QUERIES):
                    turn.call("search_orders", {"query": q, "customer_id": f"c_{i}"}, list)
        assert (
            p.value(
                "loopwatch_guard_decisions_total",
                tool="search_orders",
                decision="no_rows_stopped",
            )
            == 8
        )
    finally:
        p.close()
