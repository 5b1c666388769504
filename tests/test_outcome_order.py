"""A hand-rolled loop in the README's quick-start set-up (tools under ``@loopwatch.tool``, model
calls that carry their messages, each span a trace of its own, no ``loopwatch.turn``): the
decorator's ``execute_tool`` span decides the outcome of the call read from the messages, and
its spans count the same whatever order they arrive in.

The spans are made once per test by the real SDK (the real decorator around the tools, model
calls written as the GenAI instrumentations write them) into an in-memory exporter, then handed
to a fresh LoopwatchSpanProcessor, to ``loopwatch serve``'s pipeline over OTLP/gRPC, or to a
TurnAssembler on an injected clock, in order, with each step's tool spans before the model call
that asked for them, and in shuffled batches."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

import loopwatch
from loopwatch.conventions.read import read_span
from loopwatch.core.assembler import TurnAssembler
from loopwatch.core.declarations import REGISTRY
from loopwatch.metrics.exporter import metrics_for
from testkit.span_views import span_view
from tests.support.conversations import (
    conversation_config,
    conversation_script,
    genai_attributes,
    genai_message,
)
from tests.support.helpers import span

SERVICE = "support-agent"
TIMEOUT_TEXT = "Error: TimeoutError: ticket service timed out after 30s"


class Down:
    """The ticket service, down for the first turn."""

    down = False
    opened = 0


def create_ticket(customer_id: str, order_id: str, summary: str) -> dict[str, str]:
    if Down.down:
        raise TimeoutError("ticket service timed out after 30s")
    Down.opened += 1
    return {"ticket_id": f"T-{Down.opened}"}


def search_orders(query: str) -> list[dict[str, str]]:
    return []


def record(
    monkeypatch: pytest.MonkeyPatch, failing: bool, sent: Callable[[Any], Any], stray: bool = False
) -> tuple[list[ReadableSpan], list[int]]:
    """The three turns of tests/test_conversations.py's script, played as a hand-rolled loop:
    the decorated tools run for real (``create_ticket`` raises TimeoutError in the first turn
    when ``failing``), and the model is sent ``sent(what the tool returned or raised)``. With
    ``stray``, one more search runs after the last turn, asked for by no model call. Returns
    the finished spans in the order they ended and the indexes of the model calls among them."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)  # where @loopwatch.tool traces
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    # the decorator's registry is the process's: these declarations end with the test, or
    # create_ticket's identity would key the calls of tests that run after it
    monkeypatch.setattr(REGISTRY, "by_tool", REGISTRY.by_tool)
    monkeypatch.setattr(REGISTRY, "functions", REGISTRY.functions)
    tools: dict[str, Callable[..., Any]] = {
        "create_ticket": loopwatch.tool(identity=["customer_id", "order_id"])(create_ticket),
        "search_orders": loopwatch.tool(result="rows")(search_orders),
    }
    tracer = provider.get_tracer("scripted-model")
    Down.opened = 0
    history = [genai_message("system", "You are a support agent.")]

    def model_call(answer: dict[str, Any]) -> None:
        start = time.time_ns()
        attributes = genai_attributes(history, answer)
        with span(tracer, "chat gpt-scripted", start, time.time_ns() + 1, attributes):
            pass

    for turn, (user_text, responses, _results) in enumerate(conversation_script()):
        Down.down = failing and turn == 0
        history.append(genai_message("user", user_text))
        for calls in responses:
            answer = genai_message("assistant", calls=calls)
            model_call(answer)
            history.append(answer)
            pairs = []
            for call_id, tool, arguments in calls:
                try:
                    got: Any = tools[tool](**arguments)
                except TimeoutError as e:
                    got = e
                pairs.append((call_id, sent(got)))
            history.append(genai_message("tool", results=pairs))
        text = genai_message("assistant", "Done.")
        model_call(text)
        history.append(text)
    if stray:
        tools["search_orders"](query="stray boots")
    spans = list(exporter.get_finished_spans())
    provider.shutdown()
    models = [i for i, s in enumerate(spans) if s.name.startswith("chat")]
    return spans, models


def tools_first(spans: list[ReadableSpan], models: list[int]) -> list[ReadableSpan]:
    """Each model call after the tool spans of the calls it asked for (they ended after it)."""
    out: list[ReadableSpan] = []
    for n, i in enumerate(models):
        nxt = models[n + 1] if n + 1 < len(models) else len(spans)
        out += [*spans[i + 1 : nxt], spans[i]]
    return out


def shuffled_batches(
    spans: list[ReadableSpan], models: list[int], seed: int
) -> list[list[ReadableSpan]]:
    """Two streams, as two services' exporters send them: the tool spans ahead, each batch of
    them shuffled, and the model calls in order, each sent only after every tool span of the
    calls it asked for; batch sizes random."""
    rng = random.Random(seed)
    model_set = set(models)
    tool_spans = [s for i, s in enumerate(spans) if i not in model_set]
    # the tool spans each model call needs delivered first (those of the calls it asked for)
    needs = [
        (models[n + 1] if n + 1 < len(models) else len(spans)) - n - 1  # before the next one
        for n in range(len(models))
    ]
    batches: list[list[ReadableSpan]] = []
    sent_tools = sent_models = 0
    while sent_tools < len(tool_spans) or sent_models < len(models):
        ready = sent_models < len(models) and needs[sent_models] <= sent_tools
        if sent_tools < len(tool_spans) and (not ready or rng.random() < 0.5):
            size = rng.randint(1, 5)
            batch = tool_spans[sent_tools : sent_tools + size]
            rng.shuffle(batch)
            sent_tools += len(batch)
        else:
            size = 1
            while sent_models + size < len(models) and needs[sent_models + size] <= sent_tools:
                size += 1
            size = rng.randint(1, size)
            batch = [spans[i] for i in models[sent_models : sent_models + size]]
            sent_models += size
        batches.append(batch)
    return batches


def readings(registry: CollectorRegistry) -> Callable[..., float]:
    def value(name: str, **labels: str) -> float:
        return sum(
            s.value
            for m in registry.collect()
            for s in m.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
        )

    return value


def three_turns_wrong(value: Callable[..., float]) -> list[str]:
    """What differs from the three turns' numbers: one turn at max attempts 6 with one timeout
    loop, a no-rows streak of 4, the bulk turn at max attempts 1 with six calls and no loop."""
    ct, so = {"tool": "create_ticket"}, {"tool": "search_orders"}
    h = "loopwatch_turn_max_attempts_bucket"
    wants = [
        ("loopwatch_turns_total", {}, 3),
        ("loopwatch_turn_max_attempts_sum", {}, 8),
        (h, {"le": "1.0"}, 2),
        (h, {"le": "5.0"}, 2),
        (h, {"le": "6.0"}, 3),
        ("loopwatch_tool_calls_total", {**ct, "error_class": "timeout"}, 6),
        ("loopwatch_tool_calls_total", {**ct, "error_class": "ok"}, 6),
        ("loopwatch_tool_calls_total", {**so, "error_class": "ok"}, 4),
        ("loopwatch_tool_calls_total", {}, 16),
        ("loopwatch_repeat_calls_total", {}, 5),
        ("loopwatch_loops_total", {**ct, "error_class": "timeout", "kind": "repeat"}, 1),
        ("loopwatch_loops_total", {**so, "kind": "no_rows"}, 1),
        ("loopwatch_loops_total", {}, 2),
        ("loopwatch_tool_max_attempts_sum", ct, 7),
        ("loopwatch_no_rows_streak_sum", so, 4),
        ("loopwatch_no_rows_streak_count", so, 1),
        ("loopwatch_turns_evicted_total", {}, 0),
        ("loopwatch_calls_without_arguments_total", {}, 0),
        ("loopwatch_open_turns", {}, 0),
    ]
    return [
        f"{metric}{labels} = {value(metric, **labels)}, want {want}"
        for metric, labels, want in wants
        if value(metric, **labels) != want
    ]


def through_processor(spans: Sequence[ReadableSpan]) -> CollectorRegistry:
    registry = CollectorRegistry()
    processor = loopwatch.LoopwatchSpanProcessor(config=conversation_config(), registry=registry)
    for s in spans:
        processor.on_end(s)
    assert processor.force_flush(10_000)
    return registry


def _as_sent(got: Any) -> Any:
    """What the loop sends back: the result, or the error as text."""
    return TIMEOUT_TEXT if isinstance(got, BaseException) else got


# -- one outcome per call, from the best layer -------------------------------------------------


@pytest.mark.parametrize("message", ["ok", ""])
def test_the_tool_span_decides_a_call_whose_message_says_nothing_of_its_error(
    monkeypatch: pytest.MonkeyPatch, message: str
) -> None:
    """The loop sends the model ``message`` for each failed call; the decorator's span has
    status ERROR and error.type TimeoutError: the turn reads 6 attempts, one timeout loop."""
    spans, _models = record(
        monkeypatch, True, lambda got: message if isinstance(got, BaseException) else got
    )
    registry = through_processor(spans)
    assert three_turns_wrong(readings(registry)) == []


def test_a_successful_tool_span_wins_over_a_message_that_reads_like_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The tools all succeed, but the loop sends the model an error text for each ticket of
    the first turn: the calls are successes, six tickets opened for one order, each answered
    with a new ticket id: a write done six times, one duplicate loop (not six timeouts)."""
    spans, _models = record(
        monkeypatch,
        False,
        lambda got: TIMEOUT_TEXT if isinstance(got, dict) and got["ticket_id"] <= "T-6" else got,
    )
    value = readings(through_processor(spans))
    assert value("loopwatch_turns_total") == 3
    assert value("loopwatch_tool_calls_total", error_class="timeout") == 0
    assert value("loopwatch_tool_calls_total", tool="create_ticket", error_class="ok") == 12
    assert value("loopwatch_loops_total", tool="create_ticket", kind="duplicate") == 1
    assert value("loopwatch_loops_total") == 2  # and the searches' no-rows streak
    assert value("loopwatch_turn_max_attempts_sum") == 6 + 1 + 1
    assert value("loopwatch_open_turns") == 0


# -- spans out of order ------------------------------------------------------------------------


def test_tool_spans_before_their_model_calls_count_as_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spans, models = record(monkeypatch, True, _as_sent)
    in_order = readings(through_processor(spans))
    assert three_turns_wrong(in_order) == []
    first = tools_first(spans, models)
    assert [s.name for s in first] != [s.name for s in spans]
    assert three_turns_wrong(readings(through_processor(first))) == []
    for seed in range(5):
        batches = shuffled_batches(spans, models, seed)
        flat = [s for b in batches for s in b]
        assert sorted(id(s) for s in flat) == sorted(id(s) for s in spans)
        assert three_turns_wrong(readings(through_processor(flat))) == [], seed


def test_serve_counts_tool_spans_sent_ahead_in_shuffled_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each batch one OTLP/gRPC export, the tool spans' batches ahead of the model calls'."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    from tests.support.service import running, settle, snapshot

    spans, models = record(monkeypatch, True, _as_sent)
    in_process = through_processor(spans)
    for seed in range(2):
        # (the grace is also how long a tool span sent ahead waits for its model call)
        with running(replace(conversation_config(), grace_seconds=2.0)) as service:
            assert service.bound
            exporter = OTLPSpanExporter(endpoint=service.bound.grpc, insecure=True)
            for batch in shuffled_batches(spans, models, seed):
                assert exporter.export(batch) is SpanExportResult.SUCCESS
            settle(service)
            assert three_turns_wrong(readings(service.registry)) == [], seed
            got, want = snapshot(service.registry), snapshot(in_process)
            assert {k: v for k, v in got.items() if want.get(k) != v} == {}, seed
            exporter.shutdown()


def test_a_tool_span_waits_for_its_model_call_at_most_the_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On the assembler's clock: each step's tool spans, come just under the grace before the
    model call that asked for them, are joined to it; a tool span no model call asks for is a
    turn of its own once the grace has passed, not before, and waits as an open turn."""
    spans, models = record(monkeypatch, True, _as_sent, stray=True)
    stray = spans.pop()
    assert stray.name == "execute_tool search_orders"
    config = conversation_config()
    registry = CollectorRegistry()
    now = [0.0]
    assembler = TurnAssembler(config, metrics_for(registry), clock=lambda: now[0])
    value = readings(registry)
    grace = config.grace_seconds
    model_calls = {id(spans[i]) for i in models}

    def add(s: ReadableSpan) -> None:
        view = span_view(s)
        assembler.add(view.trace_id, view.service, read_span(view, config))
        assembler.publish()

    for s in tools_first(spans, models):
        if id(s) in model_calls:
            now[0] += grace - 0.5  # the tool spans before it have waited just under the grace
            assembler.sweep()
        add(s)
    assert three_turns_wrong(value) == []
    add(stray)
    assert assembler.open_turns == 1
    now[0] += grace - 0.5
    assembler.sweep()
    assert value("loopwatch_turns_total") == 3  # waiting still
    assert assembler.open_turns == 1
    now[0] += 0.5
    assembler.sweep()
    assert value("loopwatch_turns_total") == 4  # past the grace: a turn of its own
    assert assembler.open_turns == 0
    assert value("loopwatch_tool_calls_total", tool="search_orders") == 5
    assert value("loopwatch_turn_max_attempts_sum") == 9
    assert value("loopwatch_turns_evicted_total") == 0
