"""The processor's lifecycle, as the SDK's own processors have it: after shutdown it takes
nothing and can be collected; a forked child starts clean; the switch that queues every span
start turns off again once its traces end or are evicted, and two gauges show the queue."""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.trace import SpanContext, Tracer
from prometheus_client import CollectorRegistry

from loopwatch import LoopwatchSpanProcessor
from loopwatch.attach import processor as processor_module
from loopwatch.core.config import Config
from loopwatch.core.summary import TurnSummary
from loopwatch.demo.emit import emit_turn
from loopwatch.demo.scenarios import fourteen_tickets
from loopwatch.metrics import catalog
from loopwatch.metrics.exporter import LoopwatchMetrics
from loopwatch.metrics.forwarding import ForwardingSink
from tests.support.helpers import ROOT, Pipeline, S, keep_build

WAIT = 30.0  # bounds a hang only: every wait here is for a state the worker reaches
AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
TOOL = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
PLAIN = {"db.system": "postgresql"}
# a finished plain span of a trace of its own (a local root), to fill the queue with
FILLER = ReadableSpan(name="x", context=SpanContext(1, 2, is_remote=False), end_time=1)


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return sum(
        s.value
        for metric in registry.collect()
        for s in metric.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def wait_for(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, "the state did not come"
        time.sleep(0.02)


def tracer_for(processor: LoopwatchSpanProcessor) -> tuple[TracerProvider, Tracer]:
    provider = TracerProvider(
        resource=Resource.create({"service.name": "svc"}), shutdown_on_exit=False
    )
    provider.add_span_processor(processor)
    return provider, provider.get_tracer("test")


class Recording(ForwardingSink):
    """The metrics, and every value the processor gave the two queue gauges, in order."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.metrics = LoopwatchMetrics(registry)
        super().__init__(self.metrics)
        self.queue: list[int] = []
        self.switch: list[bool] = []

    def turn(self, summary: TurnSummary) -> None:
        self.metrics.turn(summary)

    def queued(self, count: int) -> None:
        self.queue.append(count)
        self.metrics.queued(count)

    def all_starts(self, on: bool) -> None:
        self.switch.append(on)
        self.metrics.all_starts(on)


# -- after shutdown ------------------------------------------------------------------------------
def test_after_shutdown_nothing_is_queued_followed_or_counted() -> None:
    registry = CollectorRegistry()
    processor = LoopwatchSpanProcessor(config=Config(), registry=registry)
    _, tracer = tracer_for(processor)
    processor.shutdown()
    for _ in range(5_000):  # turns and plain spans: starts and ends both
        agent = tracer.start_span("invoke_agent a", attributes=AGENT)
        with trace.use_span(agent, end_on_exit=False):
            tracer.start_span("SELECT 1", attributes=PLAIN).end()
        agent.end()
    for _ in range(200_000):  # past the queue's bound: not counted as dropped either
        processor.on_end(FILLER)
    assert processor.worker.queued == 0
    assert processor.worker.dropped == 0
    assert len(processor.followed_traces) == 0
    assert value(registry, "loopwatch_spans_total") == 0
    assert value(registry, "loopwatch_spans_dropped_total") == 0
    assert processor.force_flush(1)


class _Counted(LoopwatchSpanProcessor):
    """A class of its own, so its instances can be counted."""


def alive() -> int:
    # counted, not weakly referenced: compiled, a processor does not clear its weak references
    # when freed
    return sum(type(o) is _Counted for o in gc.get_objects())


def test_a_shut_down_processor_is_garbage_collected() -> None:
    processor = _Counted(config=Config(), registry=CollectorRegistry())
    provider, tracer = tracer_for(processor)
    emit_turn(tracer, fourteen_tickets(), 10 * S)
    provider.shutdown()  # shuts the processor down
    del processor, provider, tracer
    gc.collect()
    assert alive() == 0


# -- across a fork -------------------------------------------------------------------------------
def in_child(run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``run()`` in a forked child, its answer sent back through a pipe."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read)
            os.write(write, json.dumps(run()).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    try:
        chunks = []
        deadline = time.monotonic() + 60
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([read], [], [], max(left, 0))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                raise AssertionError("the child did not answer (hung on an inherited lock?)")
            chunk = os.read(read, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    answer: dict[str, Any] = json.loads(b"".join(chunks))
    return answer


def test_a_forked_child_of_a_stopped_processor_starts_no_worker() -> None:
    processor = LoopwatchSpanProcessor(config=Config(), registry=CollectorRegistry())
    processor.shutdown()

    def child() -> dict[str, Any]:
        processor.on_end(FILLER)
        return {"worker running": processor.worker.alive, "queued": processor.worker.queued}

    assert in_child(child) == {"worker running": False, "queued": 0}


def test_a_forked_child_starts_clean_and_counts_its_own_turns() -> None:
    p = Pipeline()
    end = emit_turn(p.tracer, fourteen_tickets(), 10 * S)  # a turn the parent finished
    agent = p.tracer.start_span("invoke_agent a", start_time=end + S, attributes=AGENT)
    with trace.use_span(agent, end_on_exit=False):  # one the parent has open at the fork
        p.tracer.start_span("execute_tool t", start_time=end + 2 * S, attributes=TOOL).end(
            end_time=end + 3 * S
        )
    p.flush()
    processor = p.processor
    assert (len(processor.followed_traces), processor.open_turns) == (1, 1)

    def child() -> dict[str, Any]:
        held = {
            "traces": len(processor.followed_traces),
            "open turns": processor.open_turns,
            "queued": processor.worker.queued,
        }
        emit_turn(p.tracer, fourteen_tickets(), 100 * S)
        own = {
            "turns": p.value("loopwatch_turns_total"),
            "repeats": p.value("loopwatch_repeat_calls_total"),
            "worker running": processor.worker.alive,
        }
        processor.shutdown()  # the parent's open turn is not the child's to finalize
        return {
            **held,
            **own,
            "turns after shutdown": p.value("loopwatch_turns_total"),
            "evicted": p.value("loopwatch_turns_evicted_total"),
        }

    assert in_child(child) == {
        "traces": 0,
        "open turns": 0,
        "queued": 0,
        "turns": 2.0,  # the parent's one, counted before the fork, and the child's own
        "repeats": 26.0,
        "worker running": True,
        "turns after shutdown": 2.0,
        "evicted": 0.0,
    }
    agent.end(end_time=end + 4 * S)  # the parent goes on as before
    assert p.value("loopwatch_turns_total") == 2
    assert p.value("loopwatch_open_turns") == 0
    p.close()


# -- the switch that queues every start ----------------------------------------------------------
def test_the_all_starts_switch_turns_off_once_its_traces_end() -> None:
    registry = CollectorRegistry()
    sink = Recording(registry)
    processor = LoopwatchSpanProcessor(config=Config(), sink=sink, max_turn_traces=2)
    provider, tracer = tracer_for(processor)
    switch = "loopwatch_all_starts_queued"
    roots = [tracer.start_span("invoke_agent a", attributes=AGENT) for _ in range(3)]
    assert processor.force_flush(10_000)
    # two traces followed, the third started past the bound: every start is queued
    assert (len(processor.followed_traces), value(registry, switch)) == (2, 1)
    for root in roots:
        root.end()
    wait_for(lambda: value(registry, switch) == 0)
    assert (len(processor.followed_traces), value(registry, "loopwatch_turns_total")) == (0, 3)
    with processor.worker.held():  # off: a plain span's start is not queued again
        queued = processor.worker.queued
        tracer.start_span("SELECT 1", attributes=PLAIN).end()
        assert processor.worker.queued == queued + 1
    provider.shutdown()
    assert sink.switch == [True, False]
    assert value(registry, switch) == 0


def test_traces_whose_roots_were_dropped_let_the_switch_go_once_evicted() -> None:
    """Roots whose end met a full queue never reach the worker; the assembler evicts their
    traces to make room for newer turns, and the switch turns off."""
    registry = CollectorRegistry()
    sink = Recording(registry)
    config = Config(queue_spans=100, max_open_turns=3)
    processor = LoopwatchSpanProcessor(config=config, sink=sink, max_turn_traces=2)
    provider, tracer = tracer_for(processor)
    with processor.worker.held():  # the worker waits: the queue fills
        roots = [tracer.start_span("invoke_agent a", attributes=AGENT) for _ in range(3)]
        while processor.worker.queued < config.queue_spans:
            processor.on_end(FILLER)
        for root in roots:
            root.end()  # dropped: the queue is full
    assert processor.force_flush(10_000)
    assert value(registry, "loopwatch_spans_dropped_total", reason="queue_full") == 3
    assert value(registry, "loopwatch_all_starts_queued") == 1
    assert max(sink.queue) == config.queue_spans  # what the worker found when it took them
    # newer turns: the assembler evicts the three rootless traces to hold them
    newer = [tracer.start_span("invoke_agent b", attributes=AGENT) for _ in range(3)]
    for root in newer:
        root.end()
    wait_for(lambda: value(registry, "loopwatch_all_starts_queued") == 0)
    assert value(registry, "loopwatch_turns_total") == 3
    assert len(processor.followed_traces) == 0
    provider.shutdown()
    assert sink.switch == [True, False]
    assert sink.queue[-1] == 0
    assert value(registry, "loopwatch_queue_spans") == 0


def test_the_set_of_traces_followed_stays_within_its_bound() -> None:
    """Roots that never end: the set never holds more than its bound, and what the assembler
    no longer holds (evicted at capacity) leaves it."""
    config = Config(max_open_turns=4)
    processor = LoopwatchSpanProcessor(
        config=config, registry=CollectorRegistry(), max_turn_traces=8
    )
    provider, tracer = tracer_for(processor)
    for _ in range(50):
        tracer.start_span("invoke_agent a", attributes=AGENT)  # never ended
        assert len(processor.followed_traces) <= 8
    assert processor.force_flush(10_000)
    # the assembler holds the last 4; the others leave the set at the worker's next sweep
    wait_for(lambda: len(processor.followed_traces) == 4 and not processor.queues_every_start)
    provider.shutdown()


def test_the_docs_state_the_default_bound() -> None:
    bound = f"{processor_module.TURN_TRACES:,}"
    assert bound in catalog.ALL_STARTS_QUEUED.note
    overhead = (ROOT / "docs" / "overhead.md").read_text(encoding="utf-8")
    assert f"The set holds {bound} traces at most" in overhead


# -- prometheus_client's switch for _created lines ------------------------------------------------
def test_the_families_scrape_without_the_clients_private_switch() -> None:
    """As if a prometheus_client release renamed the module global behind
    ``disable_created_metrics()``: every scrape still succeeds, one warning says so."""
    script = textwrap.dedent(
        """
        import json, logging
        from prometheus_client import CollectorRegistry, Gauge, generate_latest
        from prometheus_client import metrics as client_metrics
        from loopwatch.metrics.exporter import LoopwatchMetrics
        from tests.test_lifecycle import turn

        records = []
        handler = logging.Handler()
        handler.emit = records.append
        logging.getLogger("loopwatch").addHandler(handler)
        del client_metrics._use_created
        registry = CollectorRegistry()
        Gauge("host_queue", "The host's own metric.", registry=registry).set(7)
        metrics = LoopwatchMetrics(registry)
        metrics.turn(turn())
        scrapes = [generate_latest(registry).decode() for _ in range(3)]
        print(json.dumps({
            "warnings": [(r.levelname, r.getMessage()) for r in records],
            "host": all("host_queue 7.0" in s for s in scrapes),
            "turns": all('loopwatch_turns_total{agent="a",model="m",service="svc"} 1.0' in s
                         for s in scrapes),
            "created": all("loopwatch_turns_created{" in s for s in scrapes),
        }))
        """
    )
    env = keep_build(
        {k: v for k, v in os.environ.items() if k != "PROMETHEUS_DISABLE_CREATED_SERIES"}, ROOT
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-4000:]
    got = json.loads(done.stdout)
    assert (got["host"], got["turns"], got["created"]) == (True, True, True)
    assert len(got["warnings"]) == 1
    level, message = got["warnings"][0]
    assert level == "WARNING" and "_use_created" in message


def turn() -> TurnSummary:
    return TurnSummary(2**100, "svc", "a", "m", 0, 1, 0, None, ())
