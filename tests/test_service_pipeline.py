"""The service's turn finalization: spans in any order and many requests, a grace period after
the root, idle timeout, capacity eviction, late spans, back-pressure, shutdown."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from prometheus_client import CollectorRegistry

from loopwatch.core.config import Config
from loopwatch.core.span_view import SpanView
from loopwatch.demo.scenarios import eleven_empty_searches, fourteen_tickets
from loopwatch.metrics.exporter import LoopwatchMetrics
from loopwatch.service.otlp import REMOTE_PARENT, span_views
from loopwatch.service.pipeline import Pipeline
from testkit.serve_process import wait_for
from tests.support.service import (
    DECLARED,
    get,
    post,
    request_for,
    rootless,
    running,
    settle,
    tickets,
    value,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Setup:
    def __init__(self, **config: float) -> None:
        self.clock = Clock()
        self.registry = CollectorRegistry()
        self.config = Config(tools=DECLARED, **config)  # type: ignore[arg-type]
        self.pipeline = Pipeline(self.config, LoopwatchMetrics(self.registry), self.clock)

    def value(self, name: str, **labels: str) -> float:
        assert self.pipeline.flush()
        return value(self.registry, name, **labels)

    def advance(self, seconds: float) -> None:
        assert self.pipeline.flush()
        self.clock.now += seconds

    def settles_at(self, name: str, expected: float, **labels: str) -> None:
        wait_for(lambda: self.value(name, **labels) == expected, timeout=5)


@pytest.fixture
def setup() -> Iterator[Setup]:
    s = Setup(grace_seconds=5.0, idle_timeout_seconds=60.0)
    yield s
    s.pipeline.stop()


def behind_remote_parent(spans: list[SpanView]) -> list[SpanView]:
    """The agent runs in a service called by a gateway that exports elsewhere: its top span
    has a parent in another process (OTLP span flags say so) that never comes here."""
    agent = replace(spans[-1], parent_id=0x5EED, extra={REMOTE_PARENT: True})
    return [*spans[:-1], agent]


def test_spans_in_any_order_and_many_requests_make_one_turn(setup: Setup) -> None:
    spans = tickets()
    root, children = spans[-1], spans[:-1]
    assert setup.pipeline.submit([root])  # the root first,
    setup.advance(2.0)
    assert setup.pipeline.submit(children[10:][::-1])  # then the rest, reversed, in two requests
    setup.advance(2.9)
    assert setup.pipeline.submit(children[:10])
    assert setup.value("loopwatch_turns_total") == 0  # 4.9 s after the root: still waiting
    setup.advance(0.1)
    setup.settles_at("loopwatch_turns_total", 1)
    assert setup.value("loopwatch_turn_max_attempts_sum") == 14
    assert setup.value("loopwatch_repeat_calls_total", error_class="timeout") == 13
    assert setup.value("loopwatch_turns_evicted_total") == 0
    assert setup.value("loopwatch_open_turns") == 0


def test_spans_after_the_turn_is_final_are_counted_late(setup: Setup) -> None:
    spans = tickets()
    assert setup.pipeline.submit(spans[3:])
    setup.advance(5.0)
    setup.settles_at("loopwatch_turns_total", 1)
    assert setup.value("loopwatch_tool_calls_total") == 13  # spans 0..2: llm, tool, llm
    assert setup.pipeline.submit(spans[:3])
    setup.settles_at("loopwatch_late_spans_total", 3)
    assert setup.value("loopwatch_turns_total") == 1


def test_a_trace_whose_root_never_comes_ends_at_the_idle_timeout(setup: Setup) -> None:
    assert setup.pipeline.submit(rootless(tickets()))
    setup.advance(59.0)
    assert setup.value("loopwatch_turns_total") == 0
    assert setup.value("loopwatch_open_turns") == 1
    setup.advance(1.5)
    setup.settles_at("loopwatch_turns_evicted_total", 1, reason="idle")
    assert setup.value("loopwatch_turns_total") == 1  # still counted, with what came
    assert setup.value("loopwatch_turn_max_attempts_sum") == 14
    assert setup.value("loopwatch_open_turns") == 0


def test_oldest_open_turn_is_evicted_at_the_bound() -> None:
    s = Setup(grace_seconds=5.0, max_open_turns=2)
    try:
        traces = [rootless(span_views(request_for(eleven_empty_searches())).spans) for _ in "abc"]
        for spans in traces:  # three traces without their root, one at a time
            assert s.pipeline.submit(spans[1:])
            s.advance(1.0)
        assert s.value("loopwatch_turns_evicted_total", reason="capacity") == 1
        assert s.value("loopwatch_open_turns") == 2
        assert s.value("loopwatch_no_rows_streak_sum") == 11  # the oldest, finalized
        assert s.pipeline.submit(traces[0][:1])  # a straggler of the evicted one
        assert s.value("loopwatch_late_spans_total") == 1
    finally:
        s.pipeline.stop()
    # shutdown: the two still open are finalized too, counted as such
    assert value(s.registry, "loopwatch_turns_evicted_total", reason="shutdown") == 2
    assert value(s.registry, "loopwatch_turns_total") == 3
    assert value(s.registry, "loopwatch_open_turns") == 0


def test_a_process_root_after_the_agent_span_starts_the_grace(setup: Setup) -> None:
    spans = behind_remote_parent(tickets())
    # a tool service's server span: remote parent, but before the agent span came: no grace
    tool_server = replace(spans[1], span_id=0xB0B, parent_id=spans[1].span_id)
    tool_server = replace(tool_server, name="POST /tickets", attributes={}, extra=spans[-1].extra)
    assert setup.pipeline.submit([*spans[:2], tool_server])
    setup.advance(10.0)
    assert setup.value("loopwatch_turns_total") == 0
    assert setup.pipeline.submit(spans[2:])  # the rest, ending with the agent span
    setup.advance(4.9)
    assert setup.value("loopwatch_turns_total") == 0
    setup.advance(0.1)
    setup.settles_at("loopwatch_turns_total", 1)  # at the grace, not the 60 s idle timeout
    assert setup.value("loopwatch_turn_max_attempts_sum") == 14
    assert setup.value("loopwatch_turns_evicted_total") == 0


def test_remote_parent_flag_is_read_from_otlp() -> None:
    request = request_for(fourteen_tickets())
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[-1].parent_span_id = b"\x01" * 8
    spans[-1].flags = 0x300 | 1  # has-is-remote, is-remote, sampled
    spans[0].flags = 0x100 | 1  # known to be local
    views = span_views(request).spans
    assert views[-1].extra == {REMOTE_PARENT: True}
    assert [v.extra for v in views[:-1]] == [{}] * (len(views) - 1)


def test_shutdown_ends_turns_whose_root_came_normally(setup: Setup) -> None:
    assert setup.pipeline.submit(tickets())
    assert setup.pipeline.stop()
    assert value(setup.registry, "loopwatch_turns_total") == 1
    assert value(setup.registry, "loopwatch_turns_evicted_total") == 0
    assert not setup.pipeline.submit(tickets())  # stopped: refuses


class Gate:
    """Real metrics whose first span blocks until opened: a worker that has fallen behind. (A
    wrapper, not a subclass: the compiled build's LoopwatchMetrics is a C class.)"""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.metrics = LoopwatchMetrics(registry)
        self.gate = threading.Event()

    def span(self, kind: str, count: int = 1) -> None:
        self.gate.wait(10)
        self.metrics.span(kind, count)

    def __getattr__(self, name: str) -> Any:  # the rest of the Sink, as the metrics have it
        return getattr(self.metrics, name)


def test_full_queue_refuses_whole_requests_then_recovers() -> None:
    registry = CollectorRegistry()
    sink = Gate(registry)
    pipeline = Pipeline(Config(tools=DECLARED, grace_seconds=0.0, queue_spans=40), sink)
    try:
        first, second, third = (tickets() for _ in range(3))
        assert pipeline.submit(first)  # the worker takes it and blocks
        wait_for(lambda: pipeline.worker.queued == 0)
        assert pipeline.submit(second[:20])
        assert pipeline.submit(second[20:])  # 30 queued
        assert not pipeline.submit(third)  # 60 > 40: refused whole, the exporter retries
        sink.gate.set()
        assert pipeline.flush()
        assert pipeline.submit(third)
        assert pipeline.flush()
        wait_for(lambda: value(registry, "loopwatch_turns_total") == 3)
        assert value(registry, "loopwatch_tool_calls_total") == 42
    finally:
        pipeline.stop()


def test_refusal_is_retryable_on_both_protocols() -> None:
    with running(Config(grace_seconds=0.0)) as service:
        assert service.bound is not None and service.pipeline is not None
        body = request_for(fourteen_tickets()).SerializeToString()
        assert get(service.bound.metrics, "/readyz")[0] == 200
        service.pipeline.stop()
        assert get(service.bound.metrics, "/readyz")[0] == 503
        status, _, headers = post(service.bound.http, body)
        assert status == 503
        assert headers["Retry-After"] == "1"
        with grpc.insecure_channel(service.bound.grpc) as channel:
            call = channel.unary_unary(
                "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
            )
            with pytest.raises(grpc.RpcError) as caught:
                call(body, timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


def test_metrics_endpoint_negotiates_openmetrics_for_exemplars() -> None:
    with running(Config(tools=DECLARED, grace_seconds=0.0)) as service:
        assert service.bound is not None
        request = request_for(fourteen_tickets())
        status, raw, _ = post(service.bound.http, request.SerializeToString())
        assert status == 200 and ExportTraceServiceResponse.FromString(raw).ByteSize() == 0
        settle(service)
        trace_id = request.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()
        code, text, content_type = get(service.bound.metrics, "/metrics")
        assert code == 200 and content_type.startswith("text/plain")
        assert 'loopwatch_turn_max_attempts_bucket{agent="support",le="16.0"' in text
        assert trace_id not in text  # the classic text format has no exemplars
        code, text, content_type = get(
            service.bound.metrics, "/metrics", accept="application/openmetrics-text"
        )
        assert content_type.startswith("application/openmetrics-text")
        assert f'# {{trace_id="{trace_id}"}} 14.0' in text
        assert "c_40912" not in text and "88214" not in text  # identity values never shown
        assert text.endswith("# EOF\n")
        assert get(service.bound.metrics, "/healthz")[:2] == (200, "ok\n")
        assert get(service.bound.metrics, "/readyz")[:2] == (200, "ready\n")
        assert get(service.bound.metrics, "/nope")[0] == 404
