"""span_view reads the SDK's span fields directly: it must give what the public properties say."""

from __future__ import annotations

import logging
import threading

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags
from prometheus_client import CollectorRegistry

from loopwatch import LoopwatchSpanProcessor
from loopwatch.core.config import Config
from loopwatch.core.span_view import STATUS_ERROR, STATUS_OK, STATUS_UNSET, EventView, SpanView
from loopwatch.core.worker import Worker
from testkit.span_views import span_view

_CODES = {StatusCode.UNSET: STATUS_UNSET, StatusCode.OK: STATUS_OK, StatusCode.ERROR: STATUS_ERROR}


def _by_properties(span: ReadableSpan) -> SpanView:
    """The view, built from the public API only."""
    assert span.context is not None
    parent = span.parent
    return SpanView(
        span.context.trace_id,
        span.context.span_id,
        parent.span_id if parent is not None and not parent.is_remote else None,
        span.name,
        span.start_time or 0,
        span.end_time or span.start_time or 0,
        dict(span.attributes or {}),
        tuple(EventView(e.name, dict(e.attributes or {})) for e in span.events),
        _CODES[span.status.status_code],
        span.status.description or "",
        str(span.resource.attributes["service.name"]),
    )


def test_sdk_spans_read_from_their_fields_equal_their_properties() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    remote = SpanContext(7, 8, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    with tracer.start_as_current_span(
        "invoke_agent a",
        context=trace.set_span_in_context(trace.NonRecordingSpan(remote)),
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"},
    ):
        with tracer.start_as_current_span("execute_tool t", start_time=5) as tool:
            tool.set_attribute("gen_ai.tool.name", "t")
            tool.add_event("exception", {"exception.message": "no rows"})
            tool.set_status(Status(StatusCode.ERROR, "timed out"))
        with tracer.start_as_current_span("chat m") as chat:
            chat.set_status(Status(StatusCode.OK))
    spans = memory.get_finished_spans()
    assert [s.name for s in spans] == ["execute_tool t", "chat m", "invoke_agent a"]
    views = [span_view(s) for s in spans]
    assert views == [_by_properties(s) for s in spans]
    tool_view, chat_view, agent_view = views
    assert (tool_view.status_code, tool_view.status_description) == (STATUS_ERROR, "timed out")
    assert tool_view.events == (EventView("exception", {"exception.message": "no rows"}),)
    assert tool_view.parent_id == agent_view.span_id and tool_view.start_ns == 5
    assert chat_view.status_code == STATUS_OK
    assert agent_view.parent_id is None  # its parent is in another process
    assert agent_view.trace_id == 7 and agent_view.service == "agent"


class Renamed(ReadableSpan):
    """A span class whose properties do not return its stored fields."""

    @property
    def name(self) -> str:
        return "execute_tool renamed"

    @property
    def end_time(self) -> int | None:
        return 99


def test_a_span_class_with_its_own_properties_is_read_through_them() -> None:
    span = Renamed(
        "stored name",
        SpanContext(1, 2, is_remote=False),
        SpanContext(1, 3, is_remote=False),
        attributes={"gen_ai.tool.name": "t"},
        status=Status(StatusCode.ERROR, "boom"),
        start_time=10,
        end_time=20,
    )
    view = span_view(span, "svc")
    assert view == SpanView(
        1, 2, 3, "execute_tool renamed", 10, 99, {"gen_ai.tool.name": "t"}, (), 2, "boom", "svc"
    )


def test_the_processor_reads_such_a_class_through_them_beside_the_sdks() -> None:
    """The processor reads the SDK's own span class from its fields once it has seen one; a
    span of a class with its own properties, before it or after, is read through them (here
    its name marks it a tool call, where its stored name does not)."""
    registry = CollectorRegistry()
    processor = LoopwatchSpanProcessor(config=Config(), registry=registry)
    sdk_span = ReadableSpan("GET /", SpanContext(1, 2, is_remote=False), end_time=1)
    before, after = (
        Renamed(
            "stored name",
            SpanContext(trace_id, 5, is_remote=False),
            attributes={"gen_ai.tool.name": "t"},
            start_time=10,
            end_time=20,
        )
        for trace_id in (3, 4)
    )
    for span in (before, sdk_span, after):
        processor.on_end(span)
    processor.shutdown()
    labels = {"agent": "unknown", "error_class": "ok", "model": "unknown", "tool": "t"}
    calls = registry.get_sample_value(
        "loopwatch_tool_calls_total", {**labels, "service": "unknown_service:python"}
    )
    assert calls == 2
    assert registry.get_sample_value("loopwatch_spans_total", {"kind": "other"}) == 1


def test_a_queued_batch_wakes_the_worker_before_its_poll() -> None:
    ran = threading.Event()

    def round() -> int:
        ran.set()
        return len(worker.take(10))

    # wakes when a put finds 5 queued, else once an hour
    worker: Worker[int] = Worker(
        round, limit=10, wake_at=5, poll=3600.0, name="t", log=logging.getLogger("t"), where="t"
    )
    worker.start()
    for i in range(5):
        worker.put(i)
    assert not ran.wait(0.2)
    worker.put(5)
    assert ran.wait(30)
    assert worker.shutdown(30)
