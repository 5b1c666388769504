"""The processor runs inside someone else's agent: it never raises, and counts what it drops."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext, Status, StatusCode
from prometheus_client import CollectorRegistry

from loopwatch import LoopwatchSpanProcessor
from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.demo.emit import emit_turn
from loopwatch.demo.scenarios import fourteen_tickets
from tests.support.helpers import Pipeline, S

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
junk_text = st.one_of(
    st.text(max_size=200),
    json_values.map(json.dumps),
    st.sampled_from(["{", "[1,", "{'a': ", "__REDACTED__", "null", "{}", "[]", "(" * 500]),
    st.integers(1, 400_000).map(lambda n: '{"q": "' + "x" * n + '"}'),  # huge arguments
)
attribute_values = st.one_of(
    junk_text, st.integers(), st.floats(), st.booleans(), st.lists(st.text(max_size=5))
)
KEYS = [
    "gen_ai.operation.name",
    "gen_ai.tool.name",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "openinference.span.kind",
    "tool.name",
    "input.value",
    "output.value",
    "tool.parameters",
    "traceloop.span.kind",
    "traceloop.entity.input",
    "error.type",
    "gen_ai.request.model",
    "gen_ai.agent.name",
    "gen_ai.tool.definitions",
    "loopwatch.guard.decision",
]
kind_values = st.sampled_from(["execute_tool", "TOOL", "tool", "invoke_agent", "AGENT", "chat"])


class ExplodingMapping(Mapping[str, Any]):
    """Attributes that fail when read: the worst an exotic SDK could hand over."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("boom")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("boom")

    def __len__(self) -> int:
        return 1


@st.composite
def spans(draw: st.DrawFn) -> ReadableSpan:
    trace_id = draw(st.integers(1, 4))
    span_id = draw(st.integers(1, 12))
    parent_id = draw(st.one_of(st.none(), st.integers(1, 12)))  # cycles and self-parents too
    attrs: Mapping[str, Any] = draw(
        st.dictionaries(st.sampled_from(KEYS), attribute_values | kind_values, max_size=8)
    )
    if draw(st.integers(0, 30)) == 0:
        attrs = ExplodingMapping()
    events = draw(
        st.lists(
            st.builds(
                Event,
                name=st.sampled_from(["exception", "gen_ai.tool.message", "x"]),
                attributes=st.dictionaries(
                    st.sampled_from(["exception.type", "exception.message", "content"]),
                    attribute_values,
                    max_size=3,
                ),
            ),
            max_size=3,
        )
    )
    start = draw(st.integers(0, 2**63 - 1))
    return ReadableSpan(
        name=draw(st.text(max_size=20) | st.sampled_from(["execute_tool x", "running tool"])),
        context=SpanContext(trace_id, span_id, is_remote=False),
        parent=None if parent_id is None else SpanContext(trace_id, parent_id, is_remote=False),
        resource=Resource.create({"service.name": "fuzz"}),
        attributes=attrs,
        events=events,
        status=Status(draw(st.sampled_from(list(StatusCode))), draw(st.text(max_size=20))),
        start_time=start,
        end_time=draw(st.one_of(st.none(), st.integers(0, 2**63 - 1))),
    )


def _samples(registry: CollectorRegistry, name: str) -> dict[tuple[str, ...], float]:
    """The series of ``name`` that are not 0 (self-health series start at 0)."""
    return {
        tuple(sorted(s.labels.values())): s.value
        for m in registry.collect()
        for s in m.samples
        if s.name == name and s.value
    }


@pytest.fixture(scope="module")
def fuzzed() -> Iterator[tuple[LoopwatchSpanProcessor, CollectorRegistry]]:
    registry = CollectorRegistry()
    processor = LoopwatchSpanProcessor(config=Config(max_open_turns=50), registry=registry)
    yield processor, registry
    processor.shutdown()


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(spans(), min_size=1, max_size=15))
def test_on_end_never_raises_and_every_span_is_counted(
    fuzzed: tuple[LoopwatchSpanProcessor, CollectorRegistry], batch: list[ReadableSpan]
) -> None:
    processor, registry = fuzzed
    before_read = sum(_samples(registry, "loopwatch_spans_total").values())
    before_dropped = sum(_samples(registry, "loopwatch_spans_dropped_total").values())
    for span in batch:
        processor.on_end(span)  # must not raise, whatever the span holds
    assert processor.force_flush(10_000)
    read = sum(_samples(registry, "loopwatch_spans_total").values()) - before_read
    dropped = sum(_samples(registry, "loopwatch_spans_dropped_total").values()) - before_dropped
    # every span is read, or counted as dropped (an error while finalizing adds a drop too)
    assert read + dropped >= len(batch)


def test_processor_still_works_after_fuzzing(
    fuzzed: tuple[LoopwatchSpanProcessor, CollectorRegistry],
) -> None:
    processor, _ = fuzzed
    processor.shutdown()  # finalizes cyclic and rootless traces without raising
    p = Pipeline(Config(tools={"create_ticket": ToolDeclaration(identity=("customer_id",))}))
    emit_turn(p.tracer, fourteen_tickets(), 10 * S)
    assert p.value("loopwatch_turn_max_attempts_sum") == 14
    p.close()


def test_an_unreadable_span_is_counted_as_dropped() -> None:
    registry = CollectorRegistry()
    processor = LoopwatchSpanProcessor(config=Config(), registry=registry)
    span = ReadableSpan(
        name="execute_tool x",
        context=SpanContext(1, 2, is_remote=False),
        attributes=ExplodingMapping(),
        start_time=1,
        end_time=2,
    )
    processor.on_end(span)
    processor.force_flush()
    assert _samples(registry, "loopwatch_spans_dropped_total") == {("error",): 1.0}
    processor.shutdown()


def test_queue_bound_drops_are_counted_not_raised() -> None:
    registry = CollectorRegistry()
    processor = LoopwatchSpanProcessor(config=Config(queue_spans=10), registry=registry)
    with processor.worker.held():  # so the queue fills
        span = ReadableSpan(name="x", context=SpanContext(1, 2, is_remote=False), end_time=1)
        for _ in range(25):
            processor.on_end(span)
        assert processor.worker.queued == 10
    processor.force_flush()
    assert _samples(registry, "loopwatch_spans_dropped_total") == {("queue_full",): 15.0}
    # 5 spans fit (a start and an end each); each of the other 20 meets a full queue twice
    # and is one drop, not two
    with processor.worker.held():
        for _ in range(25):
            processor.on_start(span)  # type: ignore[arg-type]
            processor.on_end(span)
    processor.force_flush()
    assert _samples(registry, "loopwatch_spans_dropped_total") == {("queue_full",): 35.0}
    processor.shutdown()


def test_a_flood_of_drops_is_a_number_not_a_list() -> None:
    # a flood while the worker is inside a long round: every refused span is counted, and
    # counting them takes no memory per span
    import tracemalloc

    registry = CollectorRegistry()
    processor = LoopwatchSpanProcessor(config=Config(queue_spans=10), registry=registry)
    span = ReadableSpan(name="x", context=SpanContext(1, 2, is_remote=False), end_time=1)
    with processor.worker.held():
        for _ in range(10):
            processor.on_end(span)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for _ in range(200_000):
                processor.on_end(span)
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert processor.worker.dropped == 200_000
    assert grown < 64 * 1024  # one entry per drop would be over 1.6 MB
    processor.force_flush()
    assert _samples(registry, "loopwatch_spans_dropped_total") == {("queue_full",): 200_000.0}
    processor.shutdown()


def _tool_span(trace: int, span: int) -> ReadableSpan:
    arguments = json.dumps({"customer_id": f"c{span % 7}", "query": "open orders, newest first"})
    return ReadableSpan(
        name="execute_tool search_orders",
        context=SpanContext(trace, span, is_remote=False),
        parent=SpanContext(trace, 1, is_remote=False),
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search_orders",
            "gen_ai.tool.call.arguments": arguments,
            "gen_ai.tool.call.result": '{"rows": []}',
        },
        start_time=1,
        end_time=2,
    )


def test_a_flood_is_counted_while_it_lasts() -> None:
    # producers faster than the worker keep its queue from emptying: each round takes at most a
    # full queue's worth, so spans and drops are counted during the flood, not after it
    registry = CollectorRegistry()
    processor = LoopwatchSpanProcessor(config=Config(queue_spans=1_000), registry=registry)
    spans = [_tool_span(trace, 2) for trace in range(2, 2_002)]
    stop = threading.Event()

    def flood() -> None:
        while not stop.is_set():
            for span in spans:
                processor.on_end(span)

    threads = [threading.Thread(target=flood) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
            _samples(registry, "loopwatch_spans_total")
            and _samples(registry, "loopwatch_spans_dropped_total")
        ):
            time.sleep(0.01)
        counted = _samples(registry, "loopwatch_spans_total")
        dropped = _samples(registry, "loopwatch_spans_dropped_total")
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert counted.get(("tool",), 0) > 0
    assert dropped.get(("queue_full",), 0) > 0
    processor.shutdown()


def test_eight_threads_give_exact_totals() -> None:
    p = Pipeline(
        Config(tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))})
    )
    per_thread = 25
    barrier = threading.Barrier(8)

    def agent(n: int) -> None:
        barrier.wait()
        t = (n + 1) * 10**6 * S
        for _ in range(per_thread):
            t = emit_turn(p.tracer, fourteen_tickets(model=f"m{n % 2}"), t)

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    turns = 8 * per_thread
    assert p.value("loopwatch_turns_total") == turns
    assert p.value("loopwatch_turn_max_attempts_count") == turns
    assert p.value("loopwatch_turn_max_attempts_sum") == 14 * turns
    assert p.value("loopwatch_tool_calls_total") == 14 * turns
    assert p.value("loopwatch_repeat_calls_total") == 13 * turns
    assert p.value("loopwatch_loops_total") == turns
    assert p.value("loopwatch_turns_total", model="m0") == turns / 2
    assert p.value("loopwatch_spans_dropped_total") == 0
    p.close()


def test_a_forked_child_works_even_if_the_fork_came_mid_round() -> None:
    registry = CollectorRegistry()
    processor = LoopwatchSpanProcessor(config=Config(queue_spans=10), registry=registry)
    span = ReadableSpan(name="x", context=SpanContext(1, 2, is_remote=False), end_time=1)
    with processor.worker.held():  # held at the fork, as by the worker inside a round
        pid = os.fork()
        if pid == 0:  # the child: on_end wakes the worker once the queue holds 5 (half of 10)
            try:
                for _ in range(6):
                    processor.on_end(span)
                flushed = processor.force_flush(10_000)
                spans = _samples(registry, "loopwatch_spans_total")
                os._exit(0 if flushed and spans == {("other",): 6.0} else 1)
            finally:
                os._exit(2)
    deadline = time.monotonic() + 60
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert done[0] == pid, "the child hung on a lock inherited from the parent's worker"
    assert os.waitstatus_to_exitcode(done[1]) == 0
    processor.shutdown()
