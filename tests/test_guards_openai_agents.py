"""OpenAI Agents SDK with guarded tools: the fourteen-ticket incident from a scripted Model,
offline (the SDK's trace export is replaced by the OpenInference bridge to a local pipeline)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.demo.scenarios import TICKET_SUMMARIES
from loopwatch.guards import LoopBreaker, idempotency_key
from loopwatch.guards.openai_agents import guard_agent, run
from tests.fixtures.openai_responses import final_message, tool_call
from tests.fixtures.tools.tickets import TicketService
from tests.support.helpers import Pipeline

pytestmark = pytest.mark.frameworks

CONFIG = Config(tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))})
CUSTOMER, ORDER = "c_40912", "88214"


@pytest.fixture(autouse=True)
def no_export() -> Iterator[None]:
    """Nothing leaves the process: the SDK's default exporter (to OpenAI) is removed."""
    from agents import set_trace_processors

    set_trace_processors([])
    yield
    set_trace_processors([])


@pytest.fixture
def pipeline() -> Iterator[Pipeline]:
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    p = Pipeline(CONFIG)
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=p.provider)
    yield p
    instrumentor.uninstrument()
    p.close()


def _model(orders: list[list[str]]) -> Any:
    """A Model that sends the tool calls of ``orders[step]`` (one create_ticket per order,
    reworded per step) while tools are offered, then answers with the last tool output."""
    from agents import Usage
    from agents.items import ModelResponse
    from agents.models.interface import Model

    class ScriptedModel(Model):
        def __init__(self) -> None:
            self.step = 0
            self.tools_offered: list[int] = []

        async def get_response(
            self,
            system_instructions: Any,
            input: Any,
            model_settings: Any,
            tools: Any,
            *args: Any,
            **kwargs: Any,
        ) -> ModelResponse:
            i, self.step = self.step, self.step + 1
            self.tools_offered.append(len(tools))
            output: list[Any]
            if tools and i < len(orders):
                output = [
                    tool_call(
                        f"{i}_{j}",
                        "create_ticket",
                        {
                            "customer_id": CUSTOMER,
                            "order_id": order,
                            "summary": TICKET_SUMMARIES[i % len(TICKET_SUMMARIES)],
                        },
                    )
                    for j, order in enumerate(orders[i])
                ]
            else:
                outputs = [
                    item["output"]
                    for item in input
                    if isinstance(item, dict) and item.get("type") == "function_call_output"
                ]
                output = [final_message(f"Update on your refund: {outputs[-1]}")]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the scripted model does not stream")

    return ScriptedModel()


def _agent(model: Any, service: TicketService, with_key: bool = False) -> Any:
    from agents import Agent, function_tool

    # failure_error_function=None: the exception reaches the guard, which knows its class
    @function_tool(failure_error_function=None)
    def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
        """Open a support ticket for an order."""
        args = {"customer_id": customer_id, "order_id": order_id, "summary": summary}
        key = idempotency_key("create_ticket", args, CONFIG) if with_key else None
        return service.create(customer_id, order_id, summary, idempotency_key=key)

    return Agent(name="support", model=model, tools=[create_ticket])


def _run(agent: Any, breaker: LoopBreaker) -> str:
    from agents import RunConfig

    result, _ = asyncio.run(
        run(
            agent,
            "Where is my refund for the boots?",
            breaker,
            max_turns=30,
            run_config=RunConfig(workflow_name="support"),
        )
    )
    return str(result.final_output)


def test_cap_two_creates_exactly_three_tickets_and_answers_honestly(pipeline: Pipeline) -> None:
    service = TicketService()
    model = _model([[ORDER]] * 14)
    output = _run(guard_agent(_agent(model, service)), LoopBreaker(CONFIG))
    assert len(service.requests) == 3
    assert len(service.tickets) == 3
    assert output.startswith("Update on your refund: STOPPED by loopwatch")
    assert "outcome is unknown" in output and "Do not retry" in output
    assert model.tools_offered == [1, 1, 1, 1, 0]
    p = pipeline
    assert p.value("loopwatch_tool_calls_total", tool="create_ticket", error_class="timeout") == 3
    assert p.value("loopwatch_tool_calls_total") == 3
    assert p.value("loopwatch_turn_max_attempts_sum") == 3
    assert p.value("loopwatch_guard_decisions_total", tool="create_ticket", decision="stopped") == 1


def test_idempotency_key_to_a_service_that_honours_it_leaves_one_ticket() -> None:
    service = TicketService(honours_keys=True)
    model = _model([[ORDER]] * 14)
    output = _run(guard_agent(_agent(model, service, with_key=True)), LoopBreaker(CONFIG, cap=20))
    assert len(service.requests) == 14
    assert len(service.tickets) == 1
    assert (
        output
        == "Update on your refund: Error: TimeoutError: ticket service did not answer within 30s"
    )


def test_bulk_turn_for_twelve_orders_is_not_stopped() -> None:
    service = TicketService()  # every order times out once: twelve keys of one attempt
    model = _model([[str(88200 + i)] for i in range(12)])
    output = _run(guard_agent(_agent(model, service)), LoopBreaker(CONFIG))
    assert len(service.tickets) == 12
    assert "STOPPED" not in output
    assert model.tools_offered == [1] * 12 + [1]


def test_a_guarded_tool_outside_a_turn_says_how_to_run_it() -> None:
    from agents import Runner
    from agents.exceptions import UserError

    agent = guard_agent(_agent(_model([[ORDER]]), TicketService()))
    with pytest.raises(UserError, match="outside a turn"):
        asyncio.run(Runner.run(agent, "hi"))


def test_errors_the_sdk_already_answered_are_counted_too() -> None:
    """With the SDK's default failure handler the exception never reaches the guard; the
    handled error on the SDK's function span still makes the call an error attempt."""
    from agents import Agent, function_tool

    service = TicketService()

    @function_tool
    def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
        """Open a support ticket for an order."""
        return service.create(customer_id, order_id, summary)

    model = _model([[ORDER]] * 14)
    agent = guard_agent(Agent(name="support", model=model, tools=[create_ticket]))
    breaker = LoopBreaker(CONFIG)
    from agents import RunConfig

    result, turn = asyncio.run(
        run(agent, "refund?", breaker, max_turns=30, run_config=RunConfig(workflow_name="x"))
    )
    assert len(service.tickets) == 3
    assert [d.error_class for d in turn.decisions] == ["tool_error"]
    assert "STOPPED by loopwatch" in str(result.final_output)


def test_without_config_the_breaker_stops_at_three_creates() -> None:
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    p = Pipeline(Config())
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=p.provider)
    try:
        service = TicketService()
        model = _model([[ORDER]] * 14)
        output = _run(guard_agent(_agent(model, service)), LoopBreaker())
        assert len(service.tickets) == 3
        assert output.startswith("Update on your refund: STOPPED by loopwatch")
        assert "with the same customer_id and order_id timed out" in output
        assert model.tools_offered == [1, 1, 1, 1, 0]
        assert p.value("loopwatch_turn_max_attempts_sum") == 3
        assert p.value("loopwatch_calls_keyed_by_inference_total", tool="create_ticket") == 3
    finally:
        instrumentor.uninstrument()
        p.close()


def test_runs_given_one_scope_share_their_counts_across_workers(tmp_path: Any) -> None:
    """A task retried on another worker: each worker's own breaker on one SQLite store, the
    task id as the run's scope. The retry is stopped at its first call; another task is not."""
    from agents import RunConfig

    store = f"sqlite:///{tmp_path}/breaker.db"
    service = TicketService()

    def attempt(task: str) -> str:
        agent = guard_agent(_agent(_model([[ORDER]] * 14), service))
        result, _ = asyncio.run(
            run(
                agent,
                "Where is my refund for the boots?",
                LoopBreaker(CONFIG, store=store),
                scope=task,
                max_turns=30,
                run_config=RunConfig(workflow_name="support"),
            )
        )
        return str(result.final_output)

    attempt("task-7")
    assert len(service.tickets) == 3
    output = attempt("task-7")
    assert len(service.tickets) == 3  # the retry ran nothing
    assert output.startswith("Update on your refund: STOPPED by loopwatch")
    attempt("task-8")
    assert len(service.tickets) == 6
