"""The idempotency arbiter: duplicates within the window are suppressed, the first replayed."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.demo.scenarios import TICKET_SUMMARIES
from loopwatch.guards import IdempotencyArbiter, TerminalResult, UndeclaredToolError
from tests.fixtures.tools.tickets import TicketService
from tests.support.helpers import Pipeline

CONFIG = Config(tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _args(summary: str, order: str = "88214") -> dict[str, str]:
    return {"customer_id": "c_40912", "order_id": order, "summary": summary}


def _create(arbiter: IdempotencyArbiter, service: TicketService, summary: str, **kw: Any) -> Any:
    args = _args(summary, **kw)
    try:
        return arbiter.call("create_ticket", args, lambda: service.create(**args))
    except TimeoutError as e:
        return e


def test_reworded_duplicates_are_suppressed_and_the_first_result_replayed() -> None:
    service = TicketService(times_out=False)
    arbiter = IdempotencyArbiter(CONFIG, circuit_after=None, clock=Clock())
    answers = [_create(arbiter, service, s) for s in TICKET_SUMMARIES]
    assert len(service.requests) == 1
    assert answers == ["T-1"] * 14


def test_first_error_is_replayed_then_the_circuit_opens() -> None:
    service = TicketService()
    arbiter = IdempotencyArbiter(CONFIG, circuit_after=3, clock=Clock())
    answers = [_create(arbiter, service, s) for s in TICKET_SUMMARIES]
    assert len(service.tickets) == 1
    assert [type(a).__name__ for a in answers[:6]] == ["TimeoutError"] * 4 + ["TerminalResult"] * 2
    circuit = answers[4]
    assert isinstance(circuit, TerminalResult)
    assert (circuit.decision, circuit.error_class, circuit.attempts) == (
        "circuit_open",
        "timeout",
        3,
    )
    assert "may have succeeded" in str(circuit)
    assert sum(isinstance(a, TerminalResult) for a in answers) == 10


def test_window_expires_and_a_new_call_runs() -> None:
    clock = Clock()
    service = TicketService(times_out=False)
    arbiter = IdempotencyArbiter(CONFIG, window_seconds=60, clock=clock)
    assert _create(arbiter, service, "a") == "T-1"
    clock.now += 59.9
    assert _create(arbiter, service, "b") == "T-1"
    clock.now += 0.1  # 60 s after the first call
    assert _create(arbiter, service, "c") == "T-2"
    assert len(service.requests) == 2


def test_without_replay_duplicates_get_a_terminal_result() -> None:
    service = TicketService(times_out=False)
    arbiter = IdempotencyArbiter(CONFIG, replay=False, circuit_after=None, clock=Clock())
    first = _create(arbiter, service, "a")
    second = _create(arbiter, service, "b")
    assert first == "T-1"
    assert isinstance(second, TerminalResult)
    assert second.decision == "suppressed"


def test_different_identities_are_not_duplicates() -> None:
    service = TicketService(times_out=False)
    arbiter = IdempotencyArbiter(CONFIG, clock=Clock())
    answers = [_create(arbiter, service, "refund", order=str(88200 + i)) for i in range(12)]
    assert answers == [f"T-{i + 1}" for i in range(12)]


def test_memory_is_bounded() -> None:
    service = TicketService(times_out=False)
    arbiter = IdempotencyArbiter(CONFIG, max_keys=5, clock=Clock())
    for i in range(12):
        _create(arbiter, service, "x", order=str(i))
    assert len(arbiter) == 5
    assert arbiter.evicted == 7
    # the oldest were dropped: order 0 runs again, order 11 is still a duplicate
    assert _create(arbiter, service, "y", order="0") == "T-13"
    assert _create(arbiter, service, "y", order="11") == "T-12"


def test_concurrent_duplicates_run_once() -> None:
    service = TicketService(times_out=False)
    arbiter = IdempotencyArbiter(CONFIG, circuit_after=None)
    barrier = threading.Barrier(8)
    release = threading.Event()
    out: list[Any] = []
    lock = threading.Lock()

    def slow_create(args: dict[str, str]) -> str:
        release.wait(5)
        return service.create(**args)

    def worker(i: int) -> None:
        args = _args(f"summary {i}")
        barrier.wait(5)
        answer = arbiter.call("create_ticket", args, lambda: slow_create(args))
        with lock:
            out.append(answer)
            if len(out) == 7:  # every duplicate has been answered while the first ran
                release.set()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(service.requests) == 1
    assert out.count("T-1") == 1
    in_progress = [a for a in out if isinstance(a, TerminalResult)]
    assert len(in_progress) == 7
    assert "already in progress" in str(in_progress[0])


def test_undeclared_tools_are_refused() -> None:
    arbiter = IdempotencyArbiter(CONFIG)
    with pytest.raises(UndeclaredToolError):
        arbiter.call("send_email", {"to": "x", "body": "y"}, lambda: None)


def test_suppressed_calls_are_counted_as_guard_decisions() -> None:
    p = Pipeline(CONFIG)
    try:
        service = TicketService(times_out=False)
        arbiter = IdempotencyArbiter(
            CONFIG, circuit_after=2, clock=Clock(), tracer_provider=p.provider
        )
        with p.tracer.start_as_current_span(
            "invoke_agent support",
            attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
        ):
            for s in TICKET_SUMMARIES[:5]:
                _create(arbiter, service, s)
        assert p.value("loopwatch_guard_decisions_total", decision="suppressed") == 2
        assert p.value("loopwatch_guard_decisions_total", decision="circuit_open") == 2
        assert p.value("loopwatch_guard_decisions_total", agent="support") == 4
    finally:
        p.close()
