"""LiteLLM's own OpenTelemetry callback, from the spans the real LiteLLM wrote
(tests/fixtures/litellm/callback.json, recorded by ``python -m tests.framework_runs.litellm_loop
litellm-otel OUT.json --record tests/fixtures/litellm/callback.json``): two runs of the three
turns (orders 012 unary and 210 streamed), each ``litellm_request`` span with its
``raw_gen_ai_request`` child, and the ``@loopwatch.tool`` spans.

Read here without LiteLLM installed: every span, in the order the spans started (each model
call before the tools it asked for: LiteLLM ends a streamed call's span when it logs it, after
the tools ran); from the model calls alone (the turns rebuilt from messages);
and through the OTLP service's decoding, which must keep the output's calls
(``gen_ai.completion.{i}.function_call.*``). tests/test_litellm.py runs the real LiteLLM, whose
logging thread delivers the spans in another order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from prometheus_client import CollectorRegistry

import loopwatch
from loopwatch.conventions import read_span
from loopwatch.core.records import LlmMark
from tests.framework_runs.handrolled import LOOPWATCH_TOML, samples
from tests.support.readings import Readings, expected

FIXTURE = Path(__file__).parent / "fixtures" / "litellm" / "callback.json"
RUNS = ("012-unary", "210-stream")
MODEL = "gpt-4.1-mini"


def recorded(run: str) -> list[dict[str, Any]]:
    return list(json.loads(FIXTURE.read_text(encoding="utf-8"))["runs"][run])


def readable(s: dict[str, Any]) -> ReadableSpan:
    def context(span_id: str) -> SpanContext:
        return SpanContext(int(s["trace_id"], 16), int(span_id, 16), False, TraceFlags(1))

    parent = s["parent_span_id"]
    return ReadableSpan(
        name=s["name"],
        context=context(s["span_id"]),
        parent=context(parent) if parent else None,
        resource=Resource.create({"service.name": "support-agent"}),
        attributes=s["attributes"],
        events=[Event(e["name"], e["attributes"]) for e in s["events"]],
        kind=SpanKind[s["kind"]],
        status=Status(StatusCode[s["status"]["code"]], s["status"]["description"]),
        start_time=s["start_time_unix_nano"],
        end_time=s["end_time_unix_nano"],
        instrumentation_scope=InstrumentationScope(s["scope"] or ""),
    )


def counted(spans: list[dict[str, Any]], tmp_path: Path) -> Readings:
    toml = tmp_path / "loopwatch.toml"
    toml.write_text(LOOPWATCH_TOML, encoding="utf-8")
    registry = CollectorRegistry()
    processor = loopwatch.LoopwatchSpanProcessor(
        config=loopwatch.load_config(toml), registry=registry
    )
    for s in spans:
        processor.on_end(readable(s))
    processor.force_flush(10_000)
    processor.shutdown()
    return Readings(samples(registry))


def wrong(r: Readings) -> list[str]:
    wants = [w for w in expected("openinference", "openai") if w[0] != "the turns' label"]
    wants += [
        ("the turns' label", "loopwatch_turns_total", {"model": MODEL}, 3),
        ("16 calls asked without an id", "loopwatch_messages_malformed_total", {}, 16),
    ]
    out = [
        f"{what}: {metric}{labels} = {r.value(metric, **labels)}, want {want}"
        for what, metric, labels, want in wants
        if r.value(metric, **labels) != want
    ]
    h = "loopwatch_turn_max_attempts"
    got = [r.bucket(h, 1), r.bucket(h, 5), r.bucket(h, 6)]
    if got != [2, 2, 3]:
        out.append(f"turn max attempts: buckets le=1,5,6 = {got}, want [2, 2, 3] (1, 1, 6)")
    return out


@pytest.mark.parametrize("run", RUNS)
def test_every_span_in_the_order_they_started(run: str, tmp_path: Path) -> None:
    """The model calls read from LiteLLM's attributes, the tool spans standing for their calls:
    exactly the three turns."""
    spans = sorted(recorded(run), key=lambda s: s["start_time_unix_nano"])
    assert wrong(counted(spans, tmp_path)) == []


@pytest.mark.parametrize("run", RUNS)
def test_the_model_calls_alone(run: str, tmp_path: Path) -> None:
    """Without the tool spans, the turns are rebuilt from the messages alone: the outputs'
    calls (no id), the results in the next inputs (the calls lost from them)."""
    spans = [s for s in recorded(run) if s["scope"] == "litellm"]
    assert len(spans) == 28  # 14 model calls, each with its raw_gen_ai_request child
    assert wrong(counted(spans, tmp_path)) == []


def test_the_service_keeps_the_outputs_calls() -> None:
    """Decoded as ``loopwatch serve`` decodes OTLP (skipping the attributes never read), each
    model call still shows the calls it asked for: 16 in all, the bulk step's six in order."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from loopwatch.service.otlp import parse_protobuf, span_views

    spans = [readable(s) for s in recorded(RUNS[0]) if s["name"] == "litellm_request"]
    request = parse_protobuf(encode_spans(spans).SerializeToString())
    views = span_views(request).spans
    asked: list[list[str]] = []
    config = loopwatch.Config()
    for view in views:
        mark = read_span(view, config)
        assert isinstance(mark, LlmMark) and mark.messages is not None
        conversation = mark.messages.read()
        assert conversation is not None
        asked.append(
            [c.tool for c in conversation.calls(()) if c.span_id in conversation.requested]
        )
    assert sum(map(len, asked)) == 16
    assert asked[:7] == [["create_ticket"]] * 6 + [[]]
    assert asked[-2:] == [["create_ticket"] * 6, []]
