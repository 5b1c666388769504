"""What every framework scenario shares: the data of the three turns, the declarations, and a
global TracerProvider whose loopwatch processor is swapped per scenario.

Runs in the frameworks' own virtualenvs too (ADK and CrewAI cannot share the test venv), so it
imports only loopwatch, OpenTelemetry and prometheus_client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from prometheus_client import CollectorRegistry

from loopwatch import LoopwatchSpanProcessor
from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration

CUSTOMER, ORDER = "c_40912", "88214"
SUMMARIES = (
    "Customer has not received refund for returned boots",
    "Refund not received for returned boots - customer following up",
    "Missing refund on order 88214 (returned boots), customer awaiting resolution",
    "Follow-up: refund for returned boots still outstanding",
    "Returned boots, refund pending, customer asking again",
    "Boots returned weeks ago and refund never arrived",
)
QUERIES = (
    "boots refund",
    "boots return refund status",
    "refund for returned boots",
    "returned boots order refund",
    "boots refund c_40912",
)
# The legitimate bulk turn: six different orders refunded in one go.
BULK_ORDERS = ("88214", "88215", "88216", "88217", "88218", "88219")
TIMEOUT_MESSAGE = "ticket service did not answer"
ANSWER = "I have escalated your refund."

DECLARED = Config(
    tools={
        "create_ticket": ToolDeclaration(identity=("customer_id", "order_id")),
        "search_orders": ToolDeclaration(result="rows"),
        "refund_order": ToolDeclaration(identity=("order_id",)),
    }
)

SCENARIOS = ("timeouts", "empty_searches", "bulk")

Step = list[tuple[str, dict[str, Any]]]  # the tool calls of one model message


def create_ticket(customer_id: str, order_id: str, summary: str) -> str:
    """Open a support ticket for an order."""
    raise TimeoutError(TIMEOUT_MESSAGE)


def search_orders(query: str) -> list[dict[str, str]]:
    """Search the customer's orders."""
    return []


def refund_order(order_id: str) -> dict[str, str]:
    """Refund one order."""
    return {"order_id": order_id, "status": "refunded"}


TOOLS = (create_ticket, search_orders, refund_order)


def ticket_args(i: int) -> dict[str, Any]:
    return {"customer_id": CUSTOMER, "order_id": ORDER, "summary": SUMMARIES[i]}


def script(scenario: str, parallel: bool = True) -> list[Step]:
    """The model's messages: five reworded ticket calls, four searches, or six refunds (in
    one message when ``parallel``, else one per message)."""
    if scenario == "timeouts":
        return [[("create_ticket", ticket_args(i))] for i in range(5)]
    if scenario == "empty_searches":
        return [[("search_orders", {"query": q})] for q in QUERIES[:4]]
    refunds = [("refund_order", {"order_id": o}) for o in BULK_ORDERS]
    return [refunds] if parallel else [[r] for r in refunds]


class _Switch(SpanProcessor):
    """The one processor of the global provider; forwards to the current scenario's."""

    def __init__(self) -> None:
        self.target: SpanProcessor | None = None

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.target is not None:
            self.target.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self.target is not None:
            self.target.on_end(span)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.target.force_flush(timeout_millis) if self.target is not None else True


_SWITCH = _Switch()
PROVIDER = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
PROVIDER.add_span_processor(_SWITCH)


def install_global_provider() -> TracerProvider:
    """Make PROVIDER the global provider (frameworks with native spans write there)."""
    trace.set_tracer_provider(PROVIDER)
    return PROVIDER


def samples(registry: CollectorRegistry) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, dict(s.labels), s.value) for metric in registry.collect() for s in metric.samples
    ]


def run_scenarios(
    drive: Callable[[str], None], scenarios: tuple[str, ...] = SCENARIOS
) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    """Each scenario through a fresh loopwatch processor and registry: its metric samples."""
    out = {}
    for scenario in scenarios:
        registry = CollectorRegistry()
        processor = LoopwatchSpanProcessor(config=DECLARED, registry=registry)
        _SWITCH.target = processor
        try:
            drive(scenario)
            assert processor.force_flush(10_000)
        finally:
            _SWITCH.target = None
        out[scenario] = samples(registry)
        processor.shutdown()
    return out
