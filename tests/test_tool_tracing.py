"""``@loopwatch.tool`` traces each call as an ``execute_tool`` span and ``loopwatch.turn`` marks
a hand-rolled turn; both through the global provider, read when a call starts."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel

import loopwatch
from loopwatch.core.declarations import REGISTRY
from tests.support.helpers import Pipeline

CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


class TicketServiceTimeout(Exception):
    """Raised by the fake ticket service."""


class Address(BaseModel):
    city: str
    zip: str


@dataclass
class Window:
    days: int


class Opaque:
    def __str__(self) -> str:
        return "opaque-value"


class FakeRunContext:
    """Stands in for pydantic-ai's RunContext / OpenAI Agents' ToolContext."""

    def __init__(self, tool_call_id: str) -> None:
        self.tool_call_id = tool_call_id


# Tool functions are module-level so frameworks can resolve their (string) annotations.


def create_ticket(
    customer_id: str, order_id: str, summary: str, priority: int = 2
) -> dict[str, str]:
    """Open a support ticket for an order.

    The ticket service commits the write even when the client times out.
    """
    if summary.startswith("boom"):
        raise TicketServiceTimeout("ticket service timed out after 30000 ms")
    return {"ticket": "t_1"}


async def search_orders(query: str, limit: int = 10) -> list[str]:
    """Search the orders of the current customer."""
    await asyncio.sleep(0)
    if query == "boom":
        raise TimeoutError("search timed out")
    return []


@pytest.fixture(autouse=True)
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Declarations made here are undone after each test (the registry is process-wide)."""
    monkeypatch.setattr(REGISTRY, "by_tool", dict(REGISTRY.by_tool))
    monkeypatch.setattr(REGISTRY, "functions", dict(REGISTRY.functions))


@pytest.fixture(autouse=True)
def no_content_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CAPTURE, raising=False)


def set_global(monkeypatch: pytest.MonkeyPatch, provider: Any) -> None:
    """The API's global provider for one test (set_tracer_provider only works once)."""
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)


@pytest.fixture
def exporter(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    set_global(monkeypatch, provider)
    yield exporter
    provider.shutdown()


def spans(exporter: InMemorySpanExporter, name: str | None = None) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if name is None or s.name == name]


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


# -- the function stays the function -------------------------------------------------------


def test_name_docstring_signature_and_kind_are_the_originals() -> None:
    sync = loopwatch.tool(identity=["customer_id", "order_id"])(create_ticket)
    coro = loopwatch.tool(identity="*")(search_orders)
    for wrapped, original in ((sync, create_ticket), (coro, search_orders)):
        assert inspect.signature(wrapped) == inspect.signature(original)
        assert wrapped.__name__ == original.__name__
        assert wrapped.__doc__ == original.__doc__
        assert wrapped.__module__ == original.__module__
        assert inspect.unwrap(wrapped) is original
    assert not inspect.iscoroutinefunction(sync)
    assert inspect.iscoroutinefunction(coro)
    # the registry holds what the application holds, with the original's parameters
    assert REGISTRY.functions["create_ticket"] is sync
    assert list(inspect.signature(REGISTRY.functions["create_ticket"]).parameters) == [
        "customer_id",
        "order_id",
        "summary",
        "priority",
    ]
    assert REGISTRY.by_tool["create_ticket"].identity == ("customer_id", "order_id")
    assert REGISTRY.by_tool["search_orders"].identity == ("*",)


def test_bare_decorator_traces_the_function_and_declares_no_identity(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``@loopwatch.tool`` without parentheses: the function traced, nothing declared."""
    monkeypatch.setattr(REGISTRY, "by_tool", REGISTRY.by_tool)  # the declaration ends here

    @loopwatch.tool
    def lookup_order(order_id: str) -> dict[str, str]:
        """Look an order up."""
        return {"order_id": order_id}

    assert lookup_order(order_id="o-1") == {"order_id": "o-1"}
    assert lookup_order.__name__ == "lookup_order"
    assert REGISTRY.by_tool["lookup_order"].identity is None
    (call,) = spans(exporter, "execute_tool lookup_order")
    assert attributes(call)["gen_ai.tool.call.arguments"] == '{"order_id":"o-1"}'
    with pytest.raises(TypeError, match="takes no options"):  # not silently dropped
        loopwatch.tool(lookup_order, effect="write")  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="unexpected keyword argument 'efect'"):
        loopwatch.tool(efect="write")  # type: ignore[call-overload]


def test_generator_functions_are_declared_and_returned_as_they_are() -> None:
    def rows(query: str) -> Iterator[str]:
        yield query

    async def stream(query: str) -> AsyncIterator[str]:
        yield query

    assert loopwatch.tool(name="lw_rows")(rows) is rows
    assert loopwatch.tool(name="lw_stream")(stream) is stream
    assert "lw_rows" in REGISTRY.by_tool and "lw_stream" in REGISTRY.by_tool


# -- no SDK provider: no span, next to no cost ---------------------------------------------


def test_without_an_sdk_provider_the_call_goes_straight_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    set_global(monkeypatch, None)  # nothing set: the API hands out its proxy

    def no_lookup(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("looked up a tracer with no SDK provider set")

    monkeypatch.setattr(trace.ProxyTracerProvider, "get_tracer", no_lookup)
    monkeypatch.setattr(trace.NoOpTracerProvider, "get_tracer", no_lookup)
    tool = loopwatch.tool(identity=["customer_id"])(create_ticket)
    assert tool("c_1", "o_1", "refund") == {"ticket": "t_1"}
    with pytest.raises(TicketServiceTimeout):
        tool("c_1", "o_1", "boom")
    assert asyncio.run(loopwatch.tool()(search_orders)("boots")) == []
    with loopwatch.turn(agent="support"):
        assert tool("c_1", "o_1", "refund") == {"ticket": "t_1"}
    set_global(monkeypatch, trace.NoOpTracerProvider())  # an explicit no-op provider alike
    assert tool("c_1", "o_1", "refund") == {"ticket": "t_1"}


def test_a_provider_set_after_decoration_is_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    set_global(monkeypatch, None)
    tool = loopwatch.tool(identity=["customer_id"])(create_ticket)
    tool("c_1", "o_1", "before")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    set_global(monkeypatch, provider)
    tool("c_1", "o_1", "after")
    [span] = spans(exporter)
    assert json.loads(attributes(span)["gen_ai.tool.call.arguments"])["summary"] == "after"
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "loopwatch"
    assert span.instrumentation_scope.version == loopwatch.__version__


# -- the execute_tool span -----------------------------------------------------------------


def test_a_call_is_an_execute_tool_span_with_the_genai_attributes(
    exporter: InMemorySpanExporter,
) -> None:
    tool = loopwatch.tool(identity=["customer_id", "order_id"])(create_ticket)
    assert tool("c_40912", order_id="88214", summary="Refund not received") == {"ticket": "t_1"}
    tool("c_40912", "88214", "Refund still missing", priority=1)
    first, second = spans(exporter)
    assert first.name == "execute_tool create_ticket"
    assert first.kind is SpanKind.INTERNAL
    assert first.status.status_code is StatusCode.UNSET
    attrs = attributes(first)
    call_id = attrs.pop("gen_ai.tool.call.id")
    assert call_id.startswith("call_") and call_id != attributes(second)["gen_ai.tool.call.id"]
    assert attrs == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "create_ticket",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Open a support ticket for an order.",
        # the bound arguments by name, with the defaults (frameworks pass them)
        "gen_ai.tool.call.arguments": json.dumps(
            {
                "customer_id": "c_40912",
                "order_id": "88214",
                "summary": "Refund not received",
                "priority": 2,
            },
            separators=(",", ":"),
        ),
        "gen_ai.tool.call.result": '{"ticket":"t_1"}',
    }
    assert json.loads(attributes(second)["gen_ai.tool.call.arguments"])["priority"] == 1


def test_values_json_cannot_write_are_recorded_by_their_fields_or_their_text(
    exporter: InMemorySpanExporter,
) -> None:
    @loopwatch.tool(identity=["address.city"], name="lw_ship")
    def ship(address: Address, window: Window, note: Opaque, *more: str, **extra: Any) -> str:
        return "shipped"

    assert ship(Address(city="Oslo", zip="0150"), Window(3), Opaque(), carrier="dhl") == "shipped"
    [span] = spans(exporter)
    assert json.loads(attributes(span)["gen_ai.tool.call.arguments"]) == {
        "address": {"city": "Oslo", "zip": "0150"},
        "window": {"days": 3},
        "note": "opaque-value",
        "carrier": "dhl",  # **extra spread out, as the model named it; no empty *more
    }
    assert attributes(span)["gen_ai.tool.call.result"] == "shipped"  # a string stays as it is


def test_an_exception_marks_the_span_and_propagates_unchanged(
    exporter: InMemorySpanExporter,
) -> None:
    tool = loopwatch.tool(identity=["customer_id", "order_id"])(create_ticket)
    with pytest.raises(TicketServiceTimeout) as raised:
        tool("c_40912", "88214", "boom: refund")
    # the original exception object, raised from the tool's own frame
    assert str(raised.value) == "ticket service timed out after 30000 ms"
    assert raised.traceback[-1].name == "create_ticket"
    [span] = spans(exporter)
    assert span.status.status_code is StatusCode.ERROR
    attrs = attributes(span)
    assert attrs["error.type"] == f"{__name__}.TicketServiceTimeout"
    assert "gen_ai.tool.call.result" not in attrs
    assert "gen_ai.tool.call.arguments" in attrs
    [event] = span.events
    assert event.name == "exception"
    assert dict(event.attributes or {})["exception.type"] == attrs["error.type"]


def test_async_tools_are_traced_across_the_await(exporter: InMemorySpanExporter) -> None:
    tool = loopwatch.tool(identity="*")(search_orders)

    async def agent() -> None:
        assert await tool("boots refund") == []
        with pytest.raises(TimeoutError):
            await tool("boom")

    asyncio.run(agent())
    ok, failed = spans(exporter)
    assert attributes(ok)["gen_ai.tool.call.arguments"] == '{"query":"boots refund","limit":10}'
    assert attributes(ok)["gen_ai.tool.call.result"] == "[]"
    assert failed.status.status_code is StatusCode.ERROR
    assert attributes(failed)["error.type"] == "TimeoutError"  # builtins unqualified
    assert trace.get_current_span() is trace.INVALID_SPAN  # the context was restored


@pytest.mark.parametrize(
    ("setting", "captured"),
    [
        (None, True),
        ("SPAN_ONLY", True),
        ("span_and_event", True),
        ("true", True),
        ("false", False),
        ("NO_CONTENT", False),
        ("EVENT_ONLY", False),
        ("0", False),
    ],
)
def test_content_follows_the_genai_capture_switch_and_defaults_on(
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    setting: str | None,
    captured: bool,
) -> None:
    if setting is not None:
        monkeypatch.setenv(CAPTURE, setting)
    loopwatch.tool(identity=["customer_id"])(create_ticket)("c_1", "o_1", "refund")
    attrs = attributes(spans(exporter)[0])
    assert ("gen_ai.tool.call.arguments" in attrs) is captured
    assert ("gen_ai.tool.call.result" in attrs) is captured
    assert attrs["gen_ai.tool.name"] == "create_ticket"  # the rest is there either way


def test_a_frameworks_context_is_left_out_and_its_call_id_used(
    exporter: InMemorySpanExporter,
) -> None:
    @loopwatch.tool(identity=["order_id"], name="lw_cancel")
    def cancel(ctx: FakeRunContext, order_id: str) -> str:
        return "cancelled"

    @loopwatch.tool(identity=["order_id"], name="lw_refund")
    def refund(order_id: str) -> str:
        return "refunded"

    cancel(FakeRunContext("call_from_the_model"), "88214")
    tracer = trace.get_tracer("framework")
    framework_attrs = {"gen_ai.tool.name": "lw_refund", "gen_ai.tool.call.id": "call_outer"}
    with tracer.start_as_current_span("execute_tool lw_refund", attributes=framework_attrs):
        refund("88214")
    cancel_span = spans(exporter, "execute_tool lw_cancel")[0]
    assert attributes(cancel_span)["gen_ai.tool.call.arguments"] == '{"order_id":"88214"}'
    assert attributes(cancel_span)["gen_ai.tool.call.id"] == "call_from_the_model"
    inner, outer = spans(exporter, "execute_tool lw_refund")  # the inner one ends first
    assert inner.parent is not None and inner.parent.span_id == outer.context.span_id
    assert attributes(inner)["gen_ai.tool.call.id"] == "call_outer"


def test_a_tracing_failure_never_reaches_the_application(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("exporter bug")

    tool = loopwatch.tool(identity=["customer_id"])(create_ticket)
    monkeypatch.setattr(TracerProvider, "get_tracer", broken)
    import loopwatch.attach.own_spans as tracing

    monkeypatch.setattr(tracing, "_cached", None)
    assert tool("c_1", "o_1", "refund") == {"ticket": "t_1"}
    with pytest.raises(TicketServiceTimeout):
        tool("c_1", "o_1", "boom")


# -- loopwatch.turn ------------------------------------------------------------------------


def test_turn_as_context_manager_and_decorator_sync_and_async(
    exporter: InMemorySpanExporter,
) -> None:
    tool = loopwatch.tool(identity=["customer_id"])(create_ticket)
    search = loopwatch.tool(identity="*")(search_orders)

    with loopwatch.turn(agent="support"):
        tool("c_1", "o_1", "refund")

    @loopwatch.turn(agent="billing")
    def sync_turn(summary: str) -> str:
        tool("c_1", "o_1", summary)
        return "done"

    @loopwatch.turn(agent="search")
    async def async_turn(query: str) -> list[str]:
        return await search(query)

    async def with_async() -> None:
        async with loopwatch.turn(agent="async-support"):
            await search("boots")

    assert sync_turn("refund") == "done"
    assert asyncio.run(async_turn("boots")) == []
    asyncio.run(with_async())
    assert inspect.iscoroutinefunction(async_turn)
    assert inspect.signature(sync_turn).parameters.keys() == {"summary"}
    turns = [s for s in spans(exporter) if s.name.startswith("invoke_agent")]
    assert [s.name for s in turns] == [
        "invoke_agent support",
        "invoke_agent billing",
        "invoke_agent search",
        "invoke_agent async-support",
    ]
    for turn in turns:
        assert turn.kind is SpanKind.INTERNAL
        assert attributes(turn)["gen_ai.operation.name"] == "invoke_agent"
        assert attributes(turn)["gen_ai.agent.name"] == turn.name.split(" ", 1)[1]
        [inside] = [
            s
            for s in spans(exporter)
            if s.parent is not None and s.parent.span_id == turn.context.span_id
        ]
        assert inside.name.startswith("execute_tool ")
        assert turn.parent is None


def test_an_exception_in_a_turn_marks_it_and_propagates(exporter: InMemorySpanExporter) -> None:
    with pytest.raises(KeyError), loopwatch.turn(agent="support"):
        raise KeyError("customer")

    @loopwatch.turn()
    async def unnamed() -> None:
        raise ValueError("bad")

    with pytest.raises(ValueError, match="bad"):
        asyncio.run(unnamed())
    named, anonymous = spans(exporter)
    assert named.status.status_code is StatusCode.ERROR
    assert attributes(named)["error.type"] == "KeyError"
    assert anonymous.name == "invoke_agent"
    assert "gen_ai.agent.name" not in attributes(anonymous)
    assert anonymous.status.status_code is StatusCode.ERROR


# -- with the real processor ---------------------------------------------------------------


def test_inside_a_frameworks_span_of_the_same_tool_it_stays_one_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A framework's ``execute_tool create_ticket`` span around the decorated function: two
    spans per call, counted as one (the layers are merged), keyed on the decorator's
    arguments."""
    pipeline = Pipeline()
    set_global(monkeypatch, pipeline.provider)
    tool = loopwatch.tool(identity=["customer_id", "order_id"])(create_ticket)
    framework = pipeline.provider.get_tracer("some.framework")
    with loopwatch.turn(agent="support"):
        for summary in ("boom: refund missing", "boom: refund not received", "boom: no refund"):
            framework_attrs = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "create_ticket",
            }
            with (
                framework.start_as_current_span(
                    "execute_tool create_ticket", attributes=framework_attrs
                ),
                pytest.raises(TicketServiceTimeout),
            ):
                tool("c_40912", "88214", summary)
    labels = {"agent": "support", "tool": "create_ticket"}
    assert pipeline.value("loopwatch_tool_calls_total", **labels) == 3
    assert pipeline.value("loopwatch_tool_calls_total", error_class="timeout", **labels) == 3
    assert pipeline.value("loopwatch_repeat_calls_total", **labels) == 2
    assert pipeline.value("loopwatch_turns_total", agent="support") == 1
    assert pipeline.value("loopwatch_turn_max_attempts_sum", agent="support") == 3
    assert pipeline.value("loopwatch_loops_total", kind="repeat", **labels) == 1
    pipeline.close()


def test_a_hand_rolled_turn_of_decorated_tools_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    pipeline = Pipeline()
    set_global(monkeypatch, pipeline.provider)
    search = loopwatch.tool(result="rows", identity="*")(search_orders)

    async def agent() -> None:
        async with loopwatch.turn(agent="support"):
            for query in ("boots refund", "boots return refund status", "refund boots"):
                await search(query)

    asyncio.run(agent())
    labels = {"agent": "support", "tool": "search_orders"}
    assert pipeline.value("loopwatch_tool_calls_total", error_class="ok", **labels) == 3
    assert pipeline.value("loopwatch_loops_total", kind="no_rows", **labels) == 1
    assert pipeline.value("loopwatch_no_rows_streak_sum", **labels) == 3
    pipeline.close()


# -- under the frameworks' own tool decorators ----------------------------------------------


def _sync_tool() -> Any:
    return loopwatch.tool(identity=["customer_id", "order_id"])(create_ticket)


def _async_tool() -> Any:
    return loopwatch.tool(identity="*")(search_orders)


@pytest.mark.frameworks
def test_langchain_derives_the_same_tool_and_the_call_is_traced(
    exporter: InMemorySpanExporter,
) -> None:
    from langchain_core.tools import tool as langchain_tool
    from pydantic import BaseModel

    for original, decorated in ((create_ticket, _sync_tool()), (search_orders, _async_tool())):
        plain, ours = langchain_tool(original), langchain_tool(decorated)
        assert ours.name == plain.name
        assert ours.description == plain.description
        assert ours.args == plain.args
        ours_schema, plain_schema = ours.tool_call_schema, plain.tool_call_schema
        assert isinstance(ours_schema, type) and issubclass(ours_schema, BaseModel)
        assert isinstance(plain_schema, type) and issubclass(plain_schema, BaseModel)
        assert ours_schema.model_json_schema() == plain_schema.model_json_schema()
    ours = langchain_tool(_sync_tool())
    assert ours.invoke({"customer_id": "c_1", "order_id": "o_1", "summary": "s"}) == {
        "ticket": "t_1"
    }
    [span] = spans(exporter, "execute_tool create_ticket")
    # as a direct call records them: langchain passes the default too
    assert attributes(span)["gen_ai.tool.call.arguments"] == (
        '{"customer_id":"c_1","order_id":"o_1","summary":"s","priority":2}'
    )


@pytest.mark.frameworks
def test_openai_agents_derives_the_same_function_tool() -> None:
    from agents import function_tool

    for original, decorated in ((create_ticket, _sync_tool()), (search_orders, _async_tool())):
        plain, ours = function_tool(original), function_tool(decorated)
        assert ours.name == plain.name
        assert ours.description == plain.description
        assert ours.params_json_schema == plain.params_json_schema
        assert ours.strict_json_schema == plain.strict_json_schema


@pytest.mark.frameworks
def test_pydantic_ai_derives_the_same_tool_definition() -> None:
    from pydantic_ai import Tool

    for original, decorated in ((create_ticket, _sync_tool()), (search_orders, _async_tool())):
        plain, ours = Tool(original), Tool(decorated)
        assert ours.name == plain.name
        assert ours.tool_def == plain.tool_def
