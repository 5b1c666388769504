"""pydantic-ai with the loop breaker capability: the fourteen-ticket incident, replayed offline
by a scripted FunctionModel that regenerates its call after every error, as the incident's
model did."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.demo.scenarios import TICKET_SUMMARIES
from loopwatch.guards import LoopBreaker, idempotency_key
from loopwatch.guards.pydantic_ai import LoopBreakerCapability
from tests.fixtures.tools.tickets import TicketService
from tests.support.helpers import Pipeline

pytestmark = pytest.mark.frameworks

CONFIG = Config(tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))})
CUSTOMER, ORDER = "c_40912", "88214"


def _ticket_call(i: int, order: str = ORDER) -> Any:
    from pydantic_ai.messages import ToolCallPart

    args = {"customer_id": CUSTOMER, "order_id": order, "summary": TICKET_SUMMARIES[i]}
    return ToolCallPart("create_ticket", args, tool_call_id=f"call_{order}_{i}")


class Script:
    """Plays the incident: one reworded create_ticket per step while tools are offered (up to
    fourteen), then answers with the last thing a tool told it."""

    def __init__(self, bulk: bool = False) -> None:
        self.bulk = bulk
        self.tools_offered: list[int] = []

    def __call__(self, messages: list[Any], info: Any) -> Any:
        from pydantic_ai.messages import ModelResponse, TextPart

        step = sum(1 for m in messages if m.kind == "response")
        self.tools_offered.append(len(info.function_tools))
        if self.bulk and step == 0:
            return ModelResponse(parts=[_ticket_call(0, order=str(88200 + i)) for i in range(12)])
        if info.function_tools and step < len(TICKET_SUMMARIES) and not self.bulk:
            return ModelResponse(parts=[_ticket_call(step)])
        returns = [
            p
            for m in messages
            for p in getattr(m, "parts", ())
            if p.part_kind in ("tool-return", "retry-prompt")
        ]
        return ModelResponse(parts=[TextPart(f"Update on your refund: {returns[-1].content}")])


def _agent(
    script: Script,
    service: TicketService,
    capabilities: list[Any],
    with_key: bool = False,
    catch: bool = False,
) -> Any:
    """``catch``: the tool hands errors to the model itself (for runs without the breaker,
    whose adapter otherwise does that)."""
    from pydantic_ai import Agent
    from pydantic_ai.models.function import FunctionModel

    agent = Agent(
        FunctionModel(script, model_name="scripted-v1"),
        name="support",
        capabilities=capabilities,
    )

    @agent.tool_plain
    def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
        """Open a support ticket for an order."""
        args = {"customer_id": customer_id, "order_id": order_id, "summary": summary}
        key = idempotency_key("create_ticket", args, CONFIG) if with_key else None
        try:
            return service.create(customer_id, order_id, summary, idempotency_key=key)
        except TimeoutError as e:
            if not catch:
                raise
            return f"Error: {e}"

    return agent


@pytest.fixture
def pipeline() -> Iterator[Pipeline]:
    p = Pipeline(CONFIG)
    yield p
    p.close()


def _instrumentation(p: Pipeline) -> Any:
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.models.instrumented import InstrumentationSettings

    return Instrumentation(settings=InstrumentationSettings(tracer_provider=p.provider))


def test_cap_two_creates_exactly_three_tickets_and_answers_honestly(pipeline: Pipeline) -> None:
    service, script = TicketService(), Script()
    breaker = LoopBreakerCapability(LoopBreaker(CONFIG))
    agent = _agent(script, service, [_instrumentation(pipeline), breaker])
    output = agent.run_sync("Where is my refund for the boots?").output
    assert len(service.requests) == 3
    assert len(service.tickets) == 3
    assert "STOPPED by loopwatch" in output
    assert "outcome is unknown" in output and "may have succeeded" in output
    assert "Do not retry" in output
    # four model calls with the tool offered (three ran, the fourth was stopped), then none
    assert script.tools_offered == [1, 1, 1, 1, 0]
    p = pipeline
    assert p.value("loopwatch_turns_total", agent="support") == 1
    assert p.value("loopwatch_tool_calls_total", tool="create_ticket", error_class="timeout") == 3
    assert p.value("loopwatch_tool_calls_total") == 3
    assert p.value("loopwatch_turn_max_attempts_sum") == 3
    assert p.value("loopwatch_over_cap_seconds_total") == 0
    assert (
        p.value(
            "loopwatch_guard_decisions_total",
            agent="support",
            tool="create_ticket",
            decision="stopped",
        )
        == 1
    )


def test_capability_order_does_not_matter(pipeline: Pipeline) -> None:
    service = TicketService()
    breaker = LoopBreakerCapability(LoopBreaker(CONFIG))
    agent = _agent(Script(), service, [breaker, _instrumentation(pipeline)])
    agent.run_sync("Where is my refund?")
    assert len(service.tickets) == 3
    assert pipeline.value("loopwatch_tool_calls_total") == 3
    assert pipeline.value("loopwatch_guard_decisions_total", decision="stopped") == 1


def test_each_run_is_its_own_turn() -> None:
    service = TicketService()
    agent = _agent(Script(), service, [LoopBreakerCapability(LoopBreaker(CONFIG))])
    agent.run_sync("first")
    agent.run_sync("second")
    assert len(service.tickets) == 6


def test_without_the_breaker_the_incident_creates_fourteen_tickets() -> None:
    service = TicketService()
    output = _agent(Script(), service, [], catch=True).run_sync("Where is my refund?").output
    assert len(service.tickets) == 14
    assert output == "Update on your refund: Error: ticket service did not answer within 30s"


def test_idempotency_key_to_a_service_that_honours_it_leaves_one_ticket() -> None:
    service = TicketService(honours_keys=True)
    _agent(Script(), service, [], with_key=True, catch=True).run_sync("Where is my refund?")
    assert len(service.requests) == 14
    assert len({r["idempotency_key"] for r in service.requests}) == 1
    assert len(service.tickets) == 1


def test_bulk_turn_for_twelve_orders_is_not_stopped(pipeline: Pipeline) -> None:
    service, script = TicketService(times_out=False), Script(bulk=True)
    capability = LoopBreakerCapability(LoopBreaker(CONFIG))
    agent = _agent(script, service, [_instrumentation(pipeline), capability])
    output = agent.run_sync("Open a ticket for each of my twelve orders").output
    assert len(service.tickets) == 12
    assert "STOPPED" not in output
    assert script.tools_offered == [1, 1]
    assert pipeline.value("loopwatch_tool_calls_total", error_class="ok") == 12
    assert pipeline.value("loopwatch_turn_max_attempts_sum") == 1
    assert pipeline.value("loopwatch_guard_decisions_total") == 0


def test_breaker_and_idempotency_key_together() -> None:
    service = TicketService(honours_keys=True)
    capability = LoopBreakerCapability(LoopBreaker(CONFIG))
    _agent(Script(), service, [capability], with_key=True).run_sync("Where is my refund?")
    assert len(service.requests) == 3
    assert len(service.tickets) == 1


def test_without_config_the_breaker_stops_at_three_creates_and_the_metrics_see_it() -> None:
    """No loopwatch.toml: the inferred key (arguments minus free text) for the metrics and the
    breaker alike."""
    p = Pipeline(Config())
    try:
        service, script = TicketService(), Script()
        capability = LoopBreakerCapability(LoopBreaker())
        agent = _agent(script, service, [_instrumentation(p), capability])
        output = agent.run_sync("Where is my refund for the boots?").output
        assert len(service.tickets) == 3
        assert "STOPPED by loopwatch" in output and "may have succeeded" in output
        assert script.tools_offered == [1, 1, 1, 1, 0]
        assert p.value("loopwatch_turn_max_attempts_sum") == 3
        assert p.value("loopwatch_loops_total", error_class="timeout", kind="repeat") == 1
        assert p.value("loopwatch_calls_keyed_by_inference_total", tool="create_ticket") == 3
        assert p.value("loopwatch_guard_decisions_total", decision="stopped") == 1
    finally:
        p.close()


def test_without_config_or_breaker_the_metrics_show_the_fourteen_attempts() -> None:
    p = Pipeline(Config())
    try:
        service = TicketService()
        _agent(Script(), service, [_instrumentation(p)], catch=True).run_sync("refund?")
        assert len(service.tickets) == 14
        assert p.value("loopwatch_turn_max_attempts_sum") == 14
        assert p.value("loopwatch_repeat_calls_total", tool="create_ticket") == 13
        assert p.value("loopwatch_loops_total", kind="repeat") == 1
    finally:
        p.close()


def test_without_config_the_breaker_stops_empty_searches_at_the_no_rows_threshold() -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from loopwatch.demo.scenarios import SEARCH_QUERIES

    def script(messages: list[Any], info: Any) -> Any:
        step = sum(1 for m in messages if m.kind == "response")
        if info.function_tools and step < len(SEARCH_QUERIES):
            args = {"query": SEARCH_QUERIES[step], "customer_id": CUSTOMER}
            return ModelResponse(parts=[ToolCallPart("search_orders", args)])
        last = [
            p for m in messages for p in getattr(m, "parts", ()) if p.part_kind == "tool-return"
        ]
        return ModelResponse(parts=[TextPart(str(last[-1].content))])

    p = Pipeline(Config())
    ran: list[str] = []
    try:
        agent = Agent(
            FunctionModel(script, model_name="scripted-v1"),
            name="support",
            capabilities=[_instrumentation(p), LoopBreakerCapability(LoopBreaker())],
        )

        @agent.tool_plain
        def search_orders(query: str, customer_id: str) -> list[dict[str, str]]:
            """Search a customer's orders."""
            ran.append(query)
            return []

        output = agent.run_sync("Where is my refund?").output
        assert ran == list(SEARCH_QUERIES[:3])
        assert "returned no rows 3 times in a row" in output and "nothing was found" in output
        assert p.value("loopwatch_no_rows_streak_sum", tool="search_orders") == 3
        assert p.value("loopwatch_loops_total", tool="search_orders", kind="no_rows") == 1
        assert p.value("loopwatch_guard_decisions_total", decision="no_rows_stopped") == 1
    finally:
        p.close()


def test_runs_given_one_scope_share_their_counts_across_workers(tmp_path: Any) -> None:
    """A task retried on another worker: each worker's own breaker on one SQLite store, the
    task id as the run's scope. The retry is stopped at its first call; another task is not."""
    store = f"sqlite:///{tmp_path}/breaker.db"
    service = TicketService()

    def worker() -> Any:
        breaker = LoopBreaker(CONFIG, store=store)
        return _agent(Script(), service, [LoopBreakerCapability(breaker, scope=lambda c: c.deps)])

    worker().run_sync("Where is my refund?", deps="task-7")
    assert len(service.tickets) == 3
    output = worker().run_sync("Where is my refund?", deps="task-7").output
    assert len(service.tickets) == 3  # the retry ran nothing
    assert "STOPPED by loopwatch" in output
    worker().run_sync("Where is my refund?", deps="task-8")
    assert len(service.tickets) == 6
