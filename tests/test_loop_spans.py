"""The loop spans in process: one ``loopwatch.loop {tool}`` span per loop, under the turn's root,
through the application's own tracer provider (the SDK's in-memory exporter reads them)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client import CollectorRegistry

from loopwatch.attach.processor import LoopwatchSpanProcessor
from loopwatch.core.config import Config
from loopwatch.demo import scenarios
from loopwatch.demo.emit import emit_turn
from loopwatch.demo.scenarios import Turn

START = 1_000_000_000_000


class LoopPipeline:
    """A real TracerProvider: loopwatch's processor (loop spans through this provider) and an
    in-memory exporter behind it, as an application's own exporter."""

    def __init__(self, config: Config | None = None, logger_provider: Any = None) -> None:
        self.registry = CollectorRegistry()
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
        self.processor = LoopwatchSpanProcessor(
            config=config or Config(),
            registry=self.registry,
            tracer_provider=self.provider,
            logger_provider=logger_provider,
        )
        self.provider.add_span_processor(self.processor)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("test")

    def emit(self, turn: Turn, start: int = START) -> int:
        return emit_turn(self.tracer, turn, start, usage=lambda i: (100 + i, 10 + i))

    def spans(self) -> tuple[ReadableSpan, ...]:
        assert self.processor.force_flush(10_000)  # the worker ran: the loop spans ended
        return self.exporter.get_finished_spans()

    def loop_spans(self) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith("loopwatch.loop ")]

    def samples(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample but the clocks' (created times, first-seen gauges)."""
        assert self.processor.force_flush(10_000)
        out = {}
        for metric in self.registry.collect():
            for s in metric.samples:
                if s.name.endswith("_created") or "first_seen" in s.name:
                    continue
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    def value(self, name: str, **labels: str) -> float:
        return sum(
            v
            for (n, ls), v in self.samples().items()
            if n == name and all((k, x) in ls for k, x in labels.items())
        )


@pytest.fixture
def pipeline() -> Iterator[LoopPipeline]:
    p = LoopPipeline()
    yield p
    p.provider.shutdown()


def _tool_spans(spans: tuple[ReadableSpan, ...], tool: str) -> list[ReadableSpan]:
    calls = [s for s in spans if s.name == f"execute_tool {tool}"]
    return sorted(calls, key=lambda s: s.start_time or 0)


def test_the_seed_incident_is_one_loop_span_under_its_root(pipeline: LoopPipeline) -> None:
    pipeline.emit(scenarios.fourteen_tickets())
    spans = pipeline.spans()
    (loop,) = pipeline.loop_spans()
    (root,) = [s for s in spans if s.parent is None]
    calls = _tool_spans(spans, "create_ticket")
    assert len(calls) == 14
    assert loop.name == "loopwatch.loop create_ticket"
    assert loop.kind is SpanKind.INTERNAL
    assert loop.instrumentation_scope is not None
    assert loop.instrumentation_scope.name == "loopwatch.loop"
    assert loop.context is not None and root.context is not None and loop.parent is not None
    assert loop.context.trace_id == root.context.trace_id
    assert loop.parent.trace_id == root.context.trace_id
    assert loop.parent.span_id == root.context.span_id
    # from the first extra attempt (the second call) to the last call's end
    assert loop.start_time == calls[1].start_time
    assert loop.end_time == calls[13].end_time
    assert [link.context.span_id for link in loop.links] == [
        c.context.span_id for c in calls if c.context is not None
    ]
    assert all(link.context.trace_id == root.context.trace_id for link in loop.links)
    # the 13 model calls that asked for attempts 2..14: model call i reports (100+i, 10+i)
    attributes = dict(loop.attributes or {})
    key = attributes["loopwatch.loop.key"]
    assert isinstance(key, str) and len(key) == 16 and int(key, 16) >= 0
    assert attributes == {
        "gen_ai.tool.name": "create_ticket",
        "error.type": "timeout",
        "loopwatch.loop.kind": "repeat",
        "loopwatch.loop.attempts": 14,
        "loopwatch.loop.key": key,  # the identity's hash, checked above
        "loopwatch.loop.guard_stopped": False,
        "loopwatch.loop.model_calls": 13,
        "loopwatch.loop.input_tokens": sum(100 + i for i in range(1, 14)),
        "loopwatch.loop.output_tokens": sum(10 + i for i in range(1, 14)),
        "loopwatch.loop.total_tokens": sum(110 + 2 * i for i in range(1, 14)),
    }
    # the span's tokens are the metric's (one rule)
    assert pipeline.value("loopwatch_loop_tokens_total", tool="create_ticket") == sum(
        110 + 2 * i for i in range(1, 14)
    )
    # hashes and ids only: no argument value anywhere on it
    text = repr(attributes)
    for value in ("c_40912", "88214", "boots", "refund"):
        assert value not in text


def test_a_turn_without_a_loop_has_no_loop_span(pipeline: LoopPipeline) -> None:
    turn = scenarios.healthy(random.Random(7), "gpt-4.1")
    pipeline.emit(turn)
    assert pipeline.value("loopwatch_turns_total") == 1
    assert pipeline.value("loopwatch_loops_total") == 0
    assert pipeline.loop_spans() == []


def test_a_duplicate_write_is_a_loop_span_of_kind_duplicate(pipeline: LoopPipeline) -> None:
    pipeline.emit(scenarios.five_bookings())
    spans = pipeline.spans()
    (loop,) = pipeline.loop_spans()
    calls = _tool_spans(spans, "book_meeting")
    assert loop.name == "loopwatch.loop book_meeting"
    attributes = dict(loop.attributes or {})
    assert attributes["loopwatch.loop.kind"] == "duplicate"
    assert attributes["loopwatch.loop.attempts"] == 5
    assert "error.type" not in attributes  # every call succeeded
    assert loop.start_time == calls[1].start_time
    assert loop.end_time == calls[4].end_time
    assert len(loop.links) == 5


def test_the_empty_searches_are_a_no_rows_loop_span_without_a_key(pipeline: LoopPipeline) -> None:
    pipeline.emit(scenarios.eleven_empty_searches())
    (loop,) = pipeline.loop_spans()
    attributes = dict(loop.attributes or {})
    assert attributes["loopwatch.loop.kind"] == "no_rows"
    assert attributes["loopwatch.loop.attempts"] == 11
    assert "loopwatch.loop.key" not in attributes  # a streak over eleven keys
    assert len(loop.links) == 11


def _two_loops() -> Turn:
    tickets, searches = scenarios.fourteen_tickets(), scenarios.eleven_empty_searches()
    return Turn(tickets.agent, tickets.model, tickets.calls + searches.calls)


def test_loop_spans_past_the_bound_are_counted() -> None:
    p = LoopPipeline(Config(loop_spans_per_turn=1))
    try:
        p.emit(_two_loops())
        (loop,) = p.loop_spans()
        assert loop.name == "loopwatch.loop create_ticket"  # the first to start
        assert p.value("loopwatch_loop_spans_dropped_total", reason="per_turn_bound") == 1
    finally:
        p.provider.shutdown()


def test_one_setting_turns_them_off() -> None:
    p = LoopPipeline(Config(loop_spans_per_turn=0))
    try:
        p.emit(_two_loops())
        assert p.loop_spans() == []
        assert p.value("loopwatch_loops_total") == 2
        assert p.value("loopwatch_loop_spans_dropped_total") == 0
    finally:
        p.provider.shutdown()


def test_loop_spans_read_back_change_no_number() -> None:
    """The loop spans go through the provider loopwatch's processor is on: every number is the
    same as with them off."""
    on, off = LoopPipeline(), LoopPipeline(Config(loop_spans_per_turn=0))
    try:
        for p in (on, off):
            t = START
            for turn in (
                scenarios.fourteen_tickets(),
                scenarios.five_bookings(),
                scenarios.eleven_empty_searches(),
                scenarios.healthy(random.Random(3), "gpt-4.1"),
                _two_loops(),
            ):
                t = p.emit(turn, t) + 1_000_000
        assert len(on.loop_spans()) == 5 and off.loop_spans() == []
        assert on.samples() == off.samples()
        assert on.value("loopwatch_spans_total", kind="other") == 0
        assert on.value("loopwatch_late_spans_total") == 0
    finally:
        on.provider.shutdown()
        off.provider.shutdown()


def _with_logs(config: Config) -> tuple[LoopPipeline, Any, Any]:
    """A LoopPipeline whose processor also has an SDK logger provider (an in-memory exporter)."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    p = LoopPipeline(config, logger_provider=logger_provider)
    return p, logger_provider, logs


def test_log_events_when_switched_on_carry_the_loop_span_ids() -> None:
    p, logger_provider, logs = _with_logs(Config(loop_events=1))
    try:
        p.emit(scenarios.fourteen_tickets())
        (loop,) = p.loop_spans()
        (event,) = [r.log_record for r in logs.get_finished_logs()]
        assert loop.context is not None
        assert event.event_name == "loopwatch.loop"
        assert event.trace_id == loop.context.trace_id
        assert event.span_id == loop.context.span_id
        assert event.timestamp == loop.end_time
        assert dict(event.attributes or {}) == dict(loop.attributes or {})
    finally:
        p.provider.shutdown()
        logger_provider.shutdown()


def test_no_log_event_by_default() -> None:
    assert Config().loop_events == 0  # the Logs API is experimental in the pinned SDK
    p, logger_provider, logs = _with_logs(Config())
    try:
        p.emit(scenarios.fourteen_tickets())
        assert len(p.loop_spans()) == 1
        assert logs.get_finished_logs() == ()
    finally:
        p.provider.shutdown()
        logger_provider.shutdown()


def test_a_loop_a_guard_stopped_says_so() -> None:
    """The real loop breaker (cap 2) runs the first three tickets and stops the other eleven:
    the loop span covers the three calls that ran, and says a guard stopped it."""
    import json
    from functools import partial

    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    from loopwatch.core.declarations import ToolDeclaration
    from loopwatch.demo.scenarios import TICKET_SUMMARIES
    from loopwatch.guards import LoopBreaker, TerminalResult
    from tests.fixtures.tools.tickets import TicketService

    config = Config(tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))})
    p = LoopPipeline(config)
    second = 1_000_000_000
    try:
        with LoopBreaker(config).turn() as turn:
            root_attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"}
            root = p.tracer.start_span(
                "invoke_agent support", start_time=START, attributes=root_attrs
            )
            t = START
            with trace.use_span(root, end_on_exit=False):
                for summary in TICKET_SUMMARIES:
                    args = {"customer_id": "c_40912", "order_id": "88214", "summary": summary}
                    attrs = {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": "create_ticket",
                        "gen_ai.tool.call.arguments": json.dumps(args),
                    }
                    s = p.tracer.start_span(
                        "execute_tool create_ticket", start_time=t, attributes=attrs
                    )
                    with trace.use_span(s, end_on_exit=False):
                        try:
                            answer = turn.call(
                                "create_ticket", args, partial(TicketService().create, **args)
                            )
                        except TimeoutError as e:
                            s.record_exception(e)
                            s.set_status(Status(StatusCode.ERROR, str(e)))
                        else:
                            assert isinstance(answer, TerminalResult)
                    t += 30 * second
                    s.end(end_time=t)
            root.end(end_time=t + second)
        (loop,) = p.loop_spans()
        attributes = dict(loop.attributes or {})
        assert attributes["loopwatch.loop.attempts"] == 3
        assert attributes["loopwatch.loop.guard_stopped"] is True
        assert len(loop.links) == 3
        assert loop.start_time == START + 30 * second
        assert loop.end_time == START + 90 * second
    finally:
        p.provider.shutdown()
