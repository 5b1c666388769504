"""A decorated tool called with no model call traced and no ``loopwatch.turn`` around it: each
call is a trace of its own that no model call claims. It waits the grace (the one ``serve``
gives a root span), counted in ``loopwatch_open_turns`` meanwhile, then counts as a one-call
turn: in process and in ``serve``, within seconds, not after the idle timeout."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

import loopwatch
from loopwatch.core.config import Config
from loopwatch.core.declarations import REGISTRY
from testkit.serve_process import wait_for
from tests.support.service import running, settle, value

SERVICE = "support-agent"
# a grace well under the idle timeout (300 s): what is asserted is that the grace decides
CONFIG = Config(grace_seconds=0.5)


@pytest.fixture(autouse=True)
def own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The declarations made here are undone after each test (the registry is process-wide)."""
    monkeypatch.setattr(REGISTRY, "by_tool", dict(REGISTRY.by_tool))
    monkeypatch.setattr(REGISTRY, "functions", dict(REGISTRY.functions))


def _calls(provider: TracerProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three reworded create_ticket calls for one order, each timing out, through the real
    decorator on ``provider`` (the global provider for the test)."""
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)

    @loopwatch.tool(identity=["customer_id", "order_id"])
    def create_ticket(customer_id: str, order_id: str, summary: str) -> dict[str, str]:
        raise TimeoutError("ticket service timed out after 30s")

    for summary in ("refund missing", "refund still missing", "no refund yet"):
        with pytest.raises(TimeoutError):
            create_ticket("c_40912", "88214", summary)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ReadableSpan]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _calls(provider, monkeypatch)
    yield list(exporter.get_finished_spans())
    provider.shutdown()


def _three_turns(registry: CollectorRegistry) -> dict[str, float]:
    return {
        name: value(registry, name, **labels)
        for name, labels in (
            ("loopwatch_turns_total", {}),
            ("loopwatch_tool_calls_total", {"tool": "create_ticket", "error_class": "timeout"}),
            ("loopwatch_turn_max_attempts_count", {}),
            ("loopwatch_turn_max_attempts_sum", {}),
            ("loopwatch_loops_total", {}),
            ("loopwatch_turns_evicted_total", {}),
            ("loopwatch_open_turns", {}),
        )
    }


# each call a turn of its own (nothing groups them), counted once the grace has passed
COUNTED = {
    "loopwatch_turns_total": 3.0,
    "loopwatch_tool_calls_total": 3.0,
    "loopwatch_turn_max_attempts_count": 3.0,
    "loopwatch_turn_max_attempts_sum": 3.0,
    "loopwatch_loops_total": 0.0,
    "loopwatch_turns_evicted_total": 0.0,
    "loopwatch_open_turns": 0.0,
}


def test_in_process_lone_calls_wait_the_grace_then_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = CollectorRegistry()
    processor = loopwatch.LoopwatchSpanProcessor(config=CONFIG, registry=registry)
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(processor)
    _calls(provider, monkeypatch)
    assert processor.force_flush(10_000)
    wait_for(lambda: value(registry, "loopwatch_turns_total") == 3, 30, "three turns")
    wait_for(lambda: value(registry, "loopwatch_open_turns") == 0, 30, "no open turn")
    assert _three_turns(registry) == COUNTED
    provider.shutdown()


def test_in_process_open_turns_counts_the_waiting_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the grace longer than the test: the calls wait, each an open turn; shutdown counts
    them (as every open turn at shutdown)."""
    registry = CollectorRegistry()
    config = replace(CONFIG, grace_seconds=3600.0)
    processor = loopwatch.LoopwatchSpanProcessor(config=config, registry=registry)
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(processor)
    _calls(provider, monkeypatch)
    assert processor.force_flush(10_000)
    assert value(registry, "loopwatch_turns_total") == 0
    assert value(registry, "loopwatch_open_turns") == 3
    provider.shutdown()
    assert _three_turns(registry) == COUNTED


def test_serve_counts_lone_calls_after_the_grace(recorded: list[ReadableSpan]) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    with running(CONFIG) as service:
        assert service.bound
        exporter = OTLPSpanExporter(endpoint=service.bound.grpc, insecure=True)
        assert exporter.export(recorded) is SpanExportResult.SUCCESS
        settle(service)  # waits until no turn is open: the grace has passed
        assert _three_turns(service.registry) == COUNTED
        exporter.shutdown()


LONE_AGENT = """
import logging, loopwatch
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
processor = loopwatch.instrument(serve=False, frameworks=False)

@loopwatch.tool(identity=["order_id"])
def create_ticket(order_id: str, summary: str) -> str:
    return "T-1"

for summary in ("Refund missing", "Refund still missing", "Where is my refund"):
    {wrap}create_ticket(order_id="88214", summary=summary)
processor.shutdown()
"""


@pytest.mark.parametrize("turn", [False, True], ids=["bare", "in-a-turn"])
def test_bare_tool_calls_say_how_to_group_them_into_turns(turn: bool) -> None:
    """Tool calls with nothing around them are turns of one call each, where no loop can show:
    the third says so, once, with what to do; calls in a ``loopwatch.turn`` say nothing."""
    import subprocess
    import sys

    from tests.support.helpers import keep_build

    wrap = "\n    with loopwatch.turn(agent='support'):\n        " if turn else ""
    code = LONE_AGENT.replace("{wrap}", wrap)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=keep_build({"PATH": "/usr/bin:/bin"}),
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "arrive each in a trace" in line]
    assert lines == (
        []
        if turn
        else [
            "WARNING tool 'create_ticket' and others arrive each in a trace of their own, with "
            "no agent span or traced model call around them: each is counted as a turn of one "
            "call, so calls that repeat one another never show as a loop. Group each agent "
            "turn's calls with `with loopwatch.turn(agent=...):`, or trace the model calls "
            "(docs/attach.md)"
        ]
    )
