"""Memory stays bounded: a million short turns and ten thousand that never end."""

from __future__ import annotations

import gc
import os
import weakref

import psutil
import pytest
from opentelemetry.sdk.trace import Span as SdkSpan

from loopwatch.attach.queued import SpanStart
from loopwatch.conventions import read_span
from loopwatch.core.assembler import TurnAssembler
from loopwatch.core.config import Config
from loopwatch.core.span_view import SpanView
from loopwatch.core.summary import TurnSummary
from tests.support.sinks import CountingSink

MB = 1024 * 1024


def add(assembler: TurnAssembler, span: SpanView) -> None:
    """What an entry point does with a span: read it, hand the record over, publish."""
    assembler.add(span.trace_id, span.service, read_span(span, assembler.config))
    assembler.publish()


@pytest.mark.slow
def test_million_short_turns_and_ten_thousand_never_ending() -> None:
    config = Config(max_open_turns=1000, idle_timeout_seconds=60.0)
    now = [0.0]
    sink = CountingSink()
    assembler = TurnAssembler(config, sink, clock=lambda: now[0])
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
    tool = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search_orders",
        "gen_ai.tool.call.arguments": '{"query": "boots"}',
        "gen_ai.tool.call.result": "[]",
    }
    process = psutil.Process(os.getpid())
    gc.collect()
    rss_start = process.memory_info().rss
    peak_open = 0
    rss_samples = []
    for i in range(1_000_000):
        now[0] = i * 0.001  # a thousand turns a second
        add(assembler, SpanView(i + 1, 1, None, "invoke_agent a", i, i + 1, agent, service="s"))
        if i % 100 == 0:  # a tool call whose turn never ends: 10,000 of them
            trace = 10**9 + i
            add(assembler, SpanView(trace, 2, 1, "execute_tool x", i, i + 1, tool, service="s"))
        if i % 1000 == 0:
            assembler.sweep()
            peak_open = max(peak_open, assembler.open_turns)
        if i % 100_000 == 0:
            rss_samples.append(process.memory_info().rss)
    gc.collect()
    rss_growth = process.memory_info().rss - rss_start

    assert peak_open <= config.max_open_turns
    assert sink.turns == 1_000_000 + sum(sink.evictions.values())
    # the never-ending turns were all finalized by the idle timeout (60 s of simulated time)
    # except the ones inside the last minute (600), plus one sweep interval (1 s: 10 more)
    assert sum(sink.evictions.values()) + assembler.open_turns == 10_000
    assert assembler.open_turns <= 610
    assert set(sink.evictions) == {"idle"}
    # finished-trace memory is bounded too (4 x max_open_turns ids), so RSS stays flat
    assert rss_growth < 40 * MB, [s // MB for s in rss_samples]
    assert max(rss_samples) - rss_samples[1] < 20 * MB, [s // MB for s in rss_samples]


def test_capacity_evicts_the_oldest_and_late_spans_are_counted() -> None:
    sink = CountingSink()
    assembler = TurnAssembler(Config(max_open_turns=3), sink, clock=lambda: 0.0)
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
    for trace in range(1, 6):
        add(assembler, SpanView(trace, 2, 1, "execute_tool t", 0, 1, tool))
    assert assembler.open_turns == 3
    assert sink.evictions == {"capacity": 2}
    assert sink.turns == 2  # evicted turns are still summarized
    add(assembler, SpanView(1, 1, None, "root", 0, 2, {}))  # trace 1 was already evicted
    assert sink.late_spans == 1


def test_spans_per_turn_are_bounded() -> None:
    sink = CountingSink()
    dropped = sink.drop_reasons
    assembler = TurnAssembler(Config(max_spans_per_turn=5), sink)
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
    for span_id in range(2, 10):
        add(assembler, SpanView(7, span_id, 1, "execute_tool t", 0, 1, tool))
    assert dropped == ["turn_full"] * 3


def test_plain_traffic_is_not_buffered_in_process() -> None:
    from tests.support.helpers import Pipeline, S

    p = Pipeline()
    request = p.tracer.start_span("GET /orders", start_time=S)
    from opentelemetry import trace

    with trace.use_span(request, end_on_exit=False):
        for i in range(200):  # database spans of an ordinary request: no agent anywhere
            p.tracer.start_span("SELECT orders", start_time=(2 + i) * S).end(end_time=(3 + i) * S)
        p.flush()
        assert p.processor.open_turns == 0
        agent = p.tracer.start_span(
            "invoke_agent support", start_time=300 * S, attributes={"gen_ai.agent.name": "a"}
        )
        with trace.use_span(agent, end_on_exit=False):
            p.tracer.start_span("SELECT customers", start_time=301 * S).end(end_time=302 * S)
            p.flush()
            # the agent's start opened its trace; the plain span under it was not kept
            assert p.processor.open_turns == 1
        agent.end(end_time=303 * S)
    request.end(end_time=400 * S)
    assert p.value("loopwatch_turns_total") == 1  # the agent answered without tools
    assert p.value("loopwatch_open_turns") == 0
    assert p.value("loopwatch_spans_total", kind="other") == 202
    p.close()


def test_a_started_span_is_not_held_past_its_end() -> None:
    """The SDK hands on_end a new ReadableSpan: the Span that on_start got is the agent's, and
    nothing of loopwatch's keeps it alive once it has ended (the worker is held meanwhile)."""
    from tests.support.helpers import Pipeline

    p = Pipeline()
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
    with p.processor.worker.held():  # the start and the end stay queued
        span = p.tracer.start_span("invoke_agent a", attributes=agent)
        started = weakref.ref(span)
        span.end()
        del span
        gc.collect()
        assert started() is None
        assert p.processor.worker.queued == 2
    assert p.value("loopwatch_turns_total") == 1
    p.close()


def test_only_starts_in_traces_with_a_turn_span_are_queued_until_their_root_ends() -> None:
    """A start is queued only once a span that may be a turn span has started in its trace
    (every end is); the worker lets the trace go when it takes its local root's end."""
    from opentelemetry import trace

    from tests.support.helpers import Pipeline

    p = Pipeline()
    worker = p.processor.worker
    agent_attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}
    with worker.held():
        request = p.tracer.start_span("GET /orders", attributes={"http.method": "GET"})
        with trace.use_span(request, end_on_exit=False):
            p.tracer.start_span("SELECT orders", attributes={"db.system": "postgresql"}).end()
            assert worker.queued == 1  # the query's end only
            chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
            p.tracer.start_span("chat m", attributes=chat).end()
            assert worker.queued == 2  # a model call is not a turn span: its end only
            agent = p.tracer.start_span("invoke_agent a", attributes=agent_attributes)
            assert p.processor.followed_traces == [request.get_span_context().trace_id]
            with trace.use_span(agent, end_on_exit=False):
                p.tracer.start_span("GET", attributes={"http.method": "GET"}).end()
                assert worker.queued == 5  # the agent's start, the fetch's start and end
            agent.end()
            p.tracer.start_span("UPDATE orders", attributes={"db.system": "postgresql"}).end()
            assert worker.queued == 8  # a start after the turn, in the same trace, too
        request.end()
        assert p.processor.followed_traces == [
            request.get_span_context().trace_id
        ]  # until the worker has taken the root
    assert p.value("loopwatch_turns_total") == 1
    assert not p.processor.followed_traces
    assert p.value("loopwatch_spans_total", kind="other") == 4
    assert p.value("loopwatch_spans_total", kind="llm") == 1
    p.close()


def test_past_its_bound_of_traces_every_start_is_queued() -> None:
    """Local roots that never end fill the set of traces followed; from then on every start is
    queued (the worker tests each), none is lost."""
    from tests.support.helpers import Pipeline

    bound = 2
    p = Pipeline(max_turn_traces=bound)
    for _ in range(bound):  # as many open turns
        p.tracer.start_span("invoke_agent a", attributes={"gen_ai.agent.name": "a"})
    p.flush()
    worker = p.processor.worker
    with worker.held():
        p.tracer.start_span("SELECT 1", attributes={"db.system": "postgresql"}).end()
        assert worker.queued == 1  # still not queued: nothing more to follow yet
        agent = p.tracer.start_span("invoke_agent a", attributes={"gen_ai.agent.name": "a"})
        assert worker.queued == 2 and p.processor.queues_every_start
        assert len(p.processor.followed_traces) == bound
        p.tracer.start_span("SELECT 2", attributes={"db.system": "postgresql"}).end()
        assert worker.queued == 4
        agent.end()
    assert p.value("loopwatch_turns_total") == 1
    p.close()


def test_a_start_whose_fields_are_missing_is_queued_as_the_span_not_raised() -> None:
    from tests.support.helpers import Pipeline

    p = Pipeline()
    warm = p.tracer.start_span("warm")  # the processor learns the SDK's span class
    warm.end()
    assert isinstance(warm, SdkSpan)
    bare = object.__new__(type(warm))  # of that class, without any of its fields
    with p.processor.worker.held():
        p.processor.on_start(bare)
        item = p.processor.worker.pending()[-1]
        assert isinstance(item, SpanStart)
        assert item.span is bare
    p.close()


def test_a_plain_span_that_ends_after_its_turn_is_counted_late() -> None:
    from opentelemetry import trace

    from tests.support.helpers import Pipeline, S

    p = Pipeline()
    agent = p.tracer.start_span(
        "invoke_agent support", start_time=S, attributes={"gen_ai.agent.name": "a"}
    )
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
    with trace.use_span(agent, end_on_exit=False):
        p.tracer.start_span("execute_tool t", start_time=2 * S, attributes=tool).end(end_time=3 * S)
        straggler = p.tracer.start_span("SELECT orders", start_time=4 * S)  # still running
    agent.end(end_time=5 * S)
    p.flush()  # the agent span is the root: its turn is final
    straggler.end(end_time=6 * S)
    assert p.value("loopwatch_turns_total") == 1
    assert p.value("loopwatch_late_spans_total") == 1
    assert p.value("loopwatch_spans_total", kind="other") == 1
    assert p.value("loopwatch_open_turns") == 0
    p.close()


def test_the_tool_description_cache_keeps_no_huge_description() -> None:
    """Tool versions hash descriptions; a cache of 64 entries must not hold 64 x 1 MB."""
    from loopwatch.conventions import calls

    huge = "a tool that loops " * 60_000
    version = calls.description_hash(huge)
    assert version == calls.description_hash(huge)  # same hash, computed again
    assert huge not in calls._DESCRIPTION_HASHES
    assert "short text" not in calls._DESCRIPTION_HASHES
    calls.description_hash("short text")
    assert "short text" in calls._DESCRIPTION_HASHES


def test_the_identity_cache_stays_bounded_and_gives_the_same_hashes() -> None:
    """Identities are kept by canonical JSON: the same hash as computed afresh, at most
    IDENTITIES_KEPT of them, none of a long text."""
    from loopwatch.core import identity

    long_arguments = {"query": "q" * (identity.IDENTITY_TEXT_KEPT + 1)}
    first = identity.identity_hash(long_arguments, None)
    assert first == identity.identity_hash(long_arguments, None)
    assert first == identity.short_hash(identity.canonical_json(long_arguments))
    assert identity.canonical_json(long_arguments) not in identity._IDENTITIES
    for i in range(3 * identity.IDENTITIES_KEPT):
        arguments = {"order_id": str(i), "customer_id": "c_1"}
        hashed = identity.identity_hash(arguments, ("customer_id", "order_id"))
        assert hashed == identity.short_hash(f'{{"customer_id":"c_1","order_id":"{i}"}}')
        assert hashed == identity.identity_hash(arguments, ("customer_id", "order_id"))
        assert len(identity._IDENTITIES) <= identity.IDENTITIES_KEPT


def test_a_turn_the_sink_refuses_loses_only_itself() -> None:
    class FirstTurnFails(CountingSink):
        def __init__(self) -> None:
            super().__init__()
            self.errors = 0

        def turn(self, summary: TurnSummary) -> None:
            if self.turns == 0 and not self.errors:
                self.errors += 1
                raise RuntimeError("sink down for one turn")
            super().turn(summary)

        def dropped(self, reason: str, count: int = 1) -> None:
            assert reason == "error"
            self.errors += count

    sink = FirstTurnFails()
    assembler = TurnAssembler(Config(), sink, clock=lambda: 0.0)
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t"}
    # five traces closed in one batch: their turns are published together
    for trace in range(1, 6):
        assembler.add(
            trace, "s", read_span(SpanView(trace, 2, 1, "execute_tool t", 0, 1, tool), Config())
        )
    assembler.finalize_all()
    assert sink.turns == 4
    assert sink.errors == 2  # the refusal itself, then the drop counted for it


def test_effect_and_volatile_caches_stay_bounded_on_hostile_names() -> None:
    """Many distinct tool names, long names, rows with long keys: every cache the effect and
    volatile rules keep stays within its count and holds no long name."""
    from loopwatch.core import effects, volatile
    from loopwatch.core.fingerprint import fingerprint

    effects.forget_learned()
    try:
        huge = "x" * 100_000
        effects.learn_tool_list(
            [{"name": f"t{i}", "annotations": {"readOnlyHint": True}} for i in range(10_000)]
            + [{"name": huge, "annotations": {"destructiveHint": True}}]
        )
        state = effects._EFFECTS
        assert len(state.annotated) == effects.MAX_TOOLS and huge not in state.annotated
        assert state.dropped == 10_000 - effects.MAX_TOOLS
        for i in range(10_000):
            effects.effect_of(f"create_{i}_{huge}", {"action": f"send_{i}"}, None)
        assert len(state.inferred) <= effects.MAX_TOOLS
        assert max(len(name) for name in state.inferred) <= 200
        for i in range(200):
            fingerprint([{f"{huge}{i}": 1, "id": i}])
        assert all(len(k) <= volatile.MAX_KEY_CHARS for keys in volatile._KEYS.rows for k in keys)
        assert all(len(k) <= volatile.MAX_KEY_CHARS for k in volatile._KEYS.judged)
    finally:
        effects.forget_learned()
