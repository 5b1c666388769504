"""Real agent frameworks, offline, with scripted models: loopwatch reads the spans they emit.

Each test drives a real framework (pydantic-ai with its built-in instrumentation, the OpenAI
Agents SDK under OpenInference, LangGraph under OpenInference) through a loop whose numbers are
known, and reads them back from the real LoopwatchSpanProcessor's metrics.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from tests.fixtures.openai_responses import final_message, tool_call
from tests.framework_runs.common import CUSTOMER, ORDER, QUERIES, SUMMARIES
from tests.support.helpers import Pipeline

pytestmark = pytest.mark.frameworks

TIMEOUT_MESSAGE = "timeout: ticket service did not answer"

DECLARED = Config(
    tools={
        "create_ticket": ToolDeclaration(identity=("customer_id", "order_id")),
        "search_orders": ToolDeclaration(result="rows"),
    }
)


@pytest.fixture
def pipeline() -> Iterator[Pipeline]:
    p = Pipeline(DECLARED)
    yield p
    p.close()


def _max_attempts(p: Pipeline, **labels: str) -> float:
    """The one turn's max attempts (sum over a single observation)."""
    assert p.value("loopwatch_turn_max_attempts_count", **labels) == 1
    return p.value("loopwatch_turn_max_attempts_sum", **labels)


def _assert_one_timeout_loop(p: Pipeline, agent: str, attempts: int) -> None:
    """One turn of ``agent`` whose create_ticket calls timed out ``attempts`` times on one key."""
    assert p.value("loopwatch_turns_total", agent=agent) == 1
    assert _max_attempts(p, agent=agent) == attempts
    calls = p.value("loopwatch_tool_calls_total", tool="create_ticket", error_class="timeout")
    assert calls == attempts
    assert p.value("loopwatch_repeat_calls_total", tool="create_ticket") == attempts - 1
    assert p.value("loopwatch_loops_total", tool="create_ticket", error_class="timeout") == 1
    assert p.value("loopwatch_calls_without_arguments_total") == 0


def _streak(p: Pipeline, tool: str) -> float:
    assert p.value("loopwatch_no_rows_streak_count", tool=tool) == 1
    return p.value("loopwatch_no_rows_streak_sum", tool=tool)


# --------------------------------------------------------------------------------------------
# pydantic-ai: FunctionModel + its own OpenTelemetry instrumentation (GenAI execute_tool spans)
# --------------------------------------------------------------------------------------------


def _pydantic_agent(p: Pipeline, script: list[Any], include_content: bool = True) -> Any:
    """An Agent whose model plays ``script``: tool calls (name, args) in order, then an answer."""
    from pydantic_ai import Agent
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    def play(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(1 for m in messages if m.kind == "response")
        if step < len(script):
            name, args = script[step]
            return ModelResponse(parts=[ToolCallPart(name, args)])
        return ModelResponse(parts=[TextPart("I have escalated your refund.")])

    settings = InstrumentationSettings(tracer_provider=p.provider, include_content=include_content)
    return Agent(
        FunctionModel(play, model_name="scripted-v1"),
        name="support",
        retries=len(script) + 1,
        # the tool timeout turns a TimeoutError raised by the tool into a retry, as in production
        tool_timeout=30,
        capabilities=[Instrumentation(settings=settings)],
    )


def _tickets(n: int) -> list[Any]:
    return [
        ("create_ticket", {"customer_id": CUSTOMER, "order_id": ORDER, "summary": SUMMARIES[i]})
        for i in range(n)
    ]


def test_pydantic_ai_model_retry_timeouts_are_one_key(pipeline: Pipeline) -> None:
    from pydantic_ai import ModelRetry

    agent = _pydantic_agent(pipeline, _tickets(5))

    @agent.tool_plain
    def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
        """Open a support ticket for an order."""
        raise ModelRetry(TIMEOUT_MESSAGE)

    assert agent.run_sync("Where is my refund?").output == "I have escalated your refund."
    p = pipeline
    assert p.value("loopwatch_turns_total", agent="support", model="scripted-v1") == 1
    assert _max_attempts(p, agent="support", model="scripted-v1") == 5
    assert p.value("loopwatch_tool_calls_total", tool="create_ticket", error_class="timeout") == 5
    assert p.value("loopwatch_repeat_calls_total", tool="create_ticket") == 4
    assert p.value("loopwatch_loops_total", tool="create_ticket", error_class="timeout") == 1
    assert p.value("loopwatch_loops_total") == 1
    assert p.value("loopwatch_calls_without_arguments_total") == 0


def test_pydantic_ai_raised_timeout_errors_are_one_key(pipeline: Pipeline) -> None:
    agent = _pydantic_agent(pipeline, _tickets(4))

    @agent.tool_plain
    def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
        """Open a support ticket for an order."""
        raise TimeoutError("ticket service did not answer")

    agent.run_sync("Where is my refund?")
    p = pipeline
    assert _max_attempts(p) == 4
    assert p.value("loopwatch_tool_calls_total", tool="create_ticket", error_class="timeout") == 4
    assert p.value("loopwatch_loops_total", tool="create_ticket", error_class="timeout") == 1


def test_pydantic_ai_without_content_counts_calls_without_arguments(pipeline: Pipeline) -> None:
    """``include_content=False``: no arguments, no result, an exception event with its type
    only. The calls are keyed by tool and class alone and counted as calls without arguments;
    the timeout text is withheld too, so the class is tool_error."""
    agent = _pydantic_agent(pipeline, _tickets(5), include_content=False)

    @agent.tool_plain
    def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
        """Open a support ticket for an order."""
        raise TimeoutError("ticket service did not answer")

    agent.run_sync("Where is my refund?")
    p = pipeline
    assert p.value("loopwatch_calls_without_arguments_total", tool="create_ticket") == 5
    assert _max_attempts(p) == 5
    assert p.value("loopwatch_tool_calls_total", error_class="tool_error") == 5
    assert p.value("loopwatch_loops_total", tool="create_ticket", error_class="tool_error") == 1


@pytest.mark.parametrize(
    ("config", "attempts"),
    [(Config(), 5), (Config(tools={"create_ticket": ToolDeclaration(identity=("*",))}), 1)],
    ids=["undeclared", "identity-star"],
)
def test_pydantic_ai_rewordings_without_an_identity(config: Config, attempts: int) -> None:
    """Undeclared: the failed calls are keyed on their arguments minus free text (one key);
    identity = "*" keys on all arguments, so the rewordings look distinct."""
    from pydantic_ai import ModelRetry

    p = Pipeline(config)
    agent = _pydantic_agent(p, _tickets(5))

    @agent.tool_plain
    def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
        """Open a support ticket for an order."""
        raise ModelRetry(TIMEOUT_MESSAGE)

    agent.run_sync("Where is my refund?")
    assert _max_attempts(p) == attempts
    assert p.value("loopwatch_tool_calls_total", error_class="timeout") == 5
    assert p.value("loopwatch_loops_total", kind="repeat") == (1 if attempts == 5 else 0)
    # five keys failing the same way in a row reach the failing threshold; one key is a repeat
    assert p.value("loopwatch_loops_total", kind="failing") == (0 if attempts == 5 else 1)
    assert p.value("loopwatch_loops_total") == 1
    assert p.value("loopwatch_calls_keyed_by_inference_total") == (5 if attempts == 5 else 0)
    p.close()


def test_pydantic_ai_empty_searches_are_a_no_rows_streak(pipeline: Pipeline) -> None:
    script: list[Any] = [("search_orders", {"query": q}) for q in QUERIES[:4]]
    agent = _pydantic_agent(pipeline, script)

    @agent.tool_plain
    def search_orders(query: str) -> list[dict[str, str]]:
        """Search the customer's orders."""
        return []

    agent.run_sync("Where is my refund?")
    p = pipeline
    assert _streak(p, "search_orders") == 4
    assert p.value("loopwatch_loops_total", tool="search_orders", kind="no_rows") == 1
    assert p.value("loopwatch_tool_calls_total", tool="search_orders", error_class="ok") == 4
    assert _max_attempts(p) == 1


def test_pydantic_ai_rows_reset_the_streak(pipeline: Pipeline) -> None:
    script: list[Any] = [("search_orders", {"query": q}) for q in QUERIES]
    agent = _pydantic_agent(pipeline, script)
    answers = iter([[], [], [{"order_id": ORDER}], [], []])

    @agent.tool_plain
    def search_orders(query: str) -> list[dict[str, str]]:
        """Search the customer's orders."""
        return next(answers)

    agent.run_sync("Where is my refund?")
    assert _streak(pipeline, "search_orders") == 2
    assert pipeline.value("loopwatch_loops_total") == 0


# --------------------------------------------------------------------------------------------
# OpenAI Agents SDK: a scripted Model, traced by openinference-instrumentation-openai-agents
# --------------------------------------------------------------------------------------------


@pytest.fixture
def openai_agents(pipeline: Pipeline) -> Iterator[Pipeline]:
    """The OpenInference bridge on the pipeline's provider; the SDK's own exporter (which would
    send traces to OpenAI) is removed first, so nothing leaves the process."""
    from agents import set_trace_processors
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    set_trace_processors([])
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=pipeline.provider)
    yield pipeline
    instrumentor.uninstrument()
    set_trace_processors([])


def _openai_agent(script: list[Any], tools: list[Any]) -> Any:
    """An Agent whose Model plays ``script`` (tool calls in order, one per model turn), then
    answers in text."""
    from agents import Agent, Usage
    from agents.items import ModelResponse
    from agents.models.interface import Model

    class ScriptedModel(Model):
        def __init__(self) -> None:
            self.step = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            i, self.step = self.step, self.step + 1
            output: list[Any]
            if i < len(script):
                name, arguments = script[i]
                output = [tool_call(str(i), name, arguments)]
            else:
                output = [final_message("I have escalated your refund.")]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the scripted model does not stream")

    return Agent(name="support", model=ScriptedModel(), tools=tools)


def _run_openai_agent(agent: Any) -> str:
    from agents import Runner

    result = asyncio.run(Runner.run(agent, "Where is my refund?", max_turns=20))
    return str(result.final_output)


def test_openai_agents_reported_timeouts_are_one_key(openai_agents: Pipeline) -> None:
    """A tool error function that tells the model what failed (the SDK keeps its text)."""
    from agents import function_tool

    def report(ctx: Any, error: Exception) -> str:
        return f"{type(error).__name__}: {error}"

    @function_tool(failure_error_function=report)
    def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
        """Open a support ticket for an order."""
        raise TimeoutError("ticket service did not answer")

    agent = _openai_agent(_tickets(5), [create_ticket])
    assert _run_openai_agent(agent) == "I have escalated your refund."
    p = openai_agents
    # The turn is the bridge's root AGENT span, named after the run's workflow (SDK default).
    _assert_one_timeout_loop(p, agent="Agent workflow", attempts=5)


def test_openai_agents_sdk_tool_timeouts_are_one_key(openai_agents: Pipeline) -> None:
    """The SDK's own per-tool timeout hands the model a message and leaves the span OK."""
    from agents import function_tool

    @function_tool(timeout=0.02)
    async def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
        """Open a support ticket for an order."""
        await asyncio.sleep(5)
        return "TCK-1"

    _run_openai_agent(_openai_agent(_tickets(3), [create_ticket]))
    p = openai_agents
    assert _max_attempts(p) == 3
    assert p.value("loopwatch_tool_calls_total", tool="create_ticket", error_class="timeout") == 3
    assert p.value("loopwatch_loops_total", tool="create_ticket", error_class="timeout") == 1


def test_openai_agents_default_error_handler_hides_the_class(openai_agents: Pipeline) -> None:
    """With the SDK's default error function the span says only "Error details are redacted":
    the calls still form one key, of class tool_error (no span field carries more)."""
    from agents import function_tool

    @function_tool
    def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
        """Open a support ticket for an order."""
        raise TimeoutError("ticket service did not answer")

    _run_openai_agent(_openai_agent(_tickets(4), [create_ticket]))
    p = openai_agents
    assert _max_attempts(p) == 4
    assert (
        p.value("loopwatch_tool_calls_total", tool="create_ticket", error_class="tool_error") == 4
    )
    assert p.value("loopwatch_loops_total", tool="create_ticket", error_class="tool_error") == 1


def test_openai_agents_empty_searches_are_a_no_rows_streak(openai_agents: Pipeline) -> None:
    from agents import function_tool

    @function_tool
    def search_orders(query: str) -> list[dict[str, str]]:
        """Search the customer's orders."""
        return []

    script: list[Any] = [("search_orders", {"query": q}) for q in QUERIES[:4]]
    _run_openai_agent(_openai_agent(script, [search_orders]))
    p = openai_agents
    assert _streak(p, "search_orders") == 4
    assert p.value("loopwatch_loops_total", tool="search_orders", kind="no_rows") == 1
    assert p.value("loopwatch_tool_calls_total", tool="search_orders", error_class="ok") == 4
    assert _max_attempts(p) == 1


# --------------------------------------------------------------------------------------------
# LangGraph: create_react_agent with a fake chat model, traced by
# openinference-instrumentation-langchain
# --------------------------------------------------------------------------------------------


@pytest.fixture
def langchain(pipeline: Pipeline) -> Iterator[Pipeline]:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=pipeline.provider)
    yield pipeline
    instrumentor.uninstrument()


def _react_agent(script: list[Any], tools: list[Any]) -> Any:
    """``create_react_agent`` over a fake chat model that plays ``script`` as tool calls, with
    the prebuilt ToolNode turning tool exceptions into error ToolMessages."""
    import warnings

    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langgraph.prebuilt import ToolNode, create_react_agent

    class ScriptedChatModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    messages = [
        AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{i}"}])
        for i, (name, args) in enumerate(script)
    ]
    messages.append(AIMessage(content="I have escalated your refund."))
    model = ScriptedChatModel(messages=iter(messages))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of langchain
        return create_react_agent(model, ToolNode(tools, handle_tool_errors=True), name="support")


def _run_react_agent(agent: Any) -> str:
    result = agent.invoke({"messages": [("user", "Where is my refund?")]})
    return str(result["messages"][-1].content)


def test_langgraph_raised_timeouts_are_one_key(langchain: Pipeline) -> None:
    from langchain_core.tools import tool

    @tool
    def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
        """Open a support ticket for an order."""
        raise TimeoutError("ticket service did not answer")

    agent = _react_agent(_tickets(6), [create_ticket])
    assert _run_react_agent(agent) == "I have escalated your refund."
    p = langchain
    # The turn is the graph's root span, named after the graph (create_react_agent's name).
    _assert_one_timeout_loop(p, agent="support", attempts=6)


def test_langgraph_empty_searches_with_bare_string_input(langchain: Pipeline) -> None:
    """A single-argument tool: OpenInference writes ``input.value = "boots refund"``."""
    from langchain_core.tools import tool

    @tool
    def search_orders(query: str) -> list[dict[str, str]]:
        """Search the customer's orders."""
        return []

    script: list[Any] = [("search_orders", {"query": q}) for q in QUERIES[:4]]
    _run_react_agent(_react_agent(script, [search_orders]))
    p = langchain
    assert _streak(p, "search_orders") == 4
    assert p.value("loopwatch_loops_total", tool="search_orders", kind="no_rows") == 1
    assert p.value("loopwatch_tool_calls_total", tool="search_orders", error_class="ok") == 4
    assert p.value("loopwatch_calls_without_arguments_total") == 0
    assert _max_attempts(p) == 1


def test_langgraph_same_bare_query_is_one_key_under_declared_identity() -> None:
    """The bare string of a one-argument tool keys like ``{"query": ...}`` when the declared
    identity names that one argument, so frameworks agree on the key."""
    from langchain_core.tools import tool
    from openinference.instrumentation.langchain import LangChainInstrumentor

    config = Config(tools={"search_orders": ToolDeclaration(identity=("query",))})
    p = Pipeline(config)
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=p.provider)
    try:

        @tool
        def search_orders(query: str) -> list[dict[str, str]]:
            """Search the customer's orders."""
            return [{"order_id": ORDER}]

        script: list[Any] = [("search_orders", {"query": "boots refund"})] * 3
        script.append(("search_orders", {"query": "boots return refund status"}))
        _run_react_agent(_react_agent(script, [search_orders]))
        assert _max_attempts(p) == 3  # the fourth, different query is a key of its own
        assert p.value("loopwatch_loops_total", tool="search_orders", kind="repeat") == 1
        # which got the same order back: the same data four times, over two keys
        assert p.value("loopwatch_same_result_streak_sum", tool="search_orders") == 4
        assert p.value("loopwatch_loops_total", tool="search_orders", kind="same_result") == 1
    finally:
        instrumentor.uninstrument()
        p.close()


def test_langgraph_invalid_arguments_then_timeouts(langchain: Pipeline) -> None:
    """A call the tool schema rejects, then timeouts on the same identity: two keys."""
    from langchain_core.tools import tool

    @tool
    def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
        """Open a support ticket for an order."""
        raise TimeoutError("ticket service did not answer")

    script: list[Any] = [("create_ticket", {"customer_id": CUSTOMER, "order_id": ORDER})]
    script += _tickets(3)
    _run_react_agent(_react_agent(script, [create_ticket]))
    p = langchain
    assert _max_attempts(p) == 3
    assert p.value("loopwatch_tool_calls_total", error_class="invalid_arguments") == 1
    assert p.value("loopwatch_tool_calls_total", tool="create_ticket", error_class="timeout") == 3
    assert p.value("loopwatch_loops_total", tool="create_ticket") == 1
