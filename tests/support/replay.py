"""Stored traces written as the tools that store them write them, from real SDK spans.

- the Collector's file exporter: ``format: json`` (pdata's JSON: one ExportTraceServiceRequest
  per line, hex ids, enums as numbers, 64-bit numbers as strings) and ``format: proto`` (each
  serialized request after its length, 4 bytes big-endian), one request per exported batch;
- Jaeger's JSON (the query service's ``/api/traces`` and the UI's download): spans per trace,
  microsecond times, OTLP fields as the Collector's Jaeger translation writes them as tags;
- Tempo's trace-by-id JSON (``/api/traces/<id>``): ``batches`` in protobuf's JSON mapping
  (base64 ids, enum names).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client import CollectorRegistry

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.demo.emit import CONVENTIONS, emit_turn
from loopwatch.demo.scenarios import (
    Turn,
    eleven_empty_searches,
    flaky,
    fourteen_tickets,
    healthy,
)
from loopwatch.history.replay import ReplayResult, run_replay
from loopwatch.metrics.exporter import LoopwatchMetrics
from tests.support.helpers import Pipeline, S

TICKETS = {"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))}
CONFIG = Config(tools=TICKETS)
BATCH = 40  # spans per exported request, as a BatchSpanProcessor's batches


def incident_turns(rng: random.Random) -> list[Turn]:
    """The two incidents (fourteen timed-out tickets, eleven empty searches) among healthy
    turns and a few retries."""
    return [
        fourteen_tickets(),
        eleven_empty_searches(),
        *(healthy(rng, rng.choice(["gpt-4.1", "claude-sonnet-4"])) for _ in range(6)),
        *(flaky(rng, "gpt-4.1", attempts=rng.randint(2, 5)) for _ in range(4)),
    ]


def record(
    turns_per_convention: Sequence[Turn], config: Config = CONFIG, start: int = 1_767_225_600
) -> tuple[list[ReadableSpan], Pipeline]:
    """The turns as real SDK spans in all three conventions, through the in-process processor
    too: (finished spans in the order they ended, the processor's pipeline)."""
    p = Pipeline(config)
    memory = InMemorySpanExporter()
    p.provider.add_span_processor(SimpleSpanProcessor(memory))
    t = start * S
    for convention in CONVENTIONS:
        for turn in turns_per_convention:
            t = emit_turn(p.tracer, turn, t, convention) + S
    p.flush()
    return list(memory.get_finished_spans()), p


def batches(spans: Sequence[ReadableSpan], size: int = BATCH) -> list[Any]:
    """The spans as the exporter's requests, ``size`` spans each, in the order they ended."""
    return [encode_spans(list(spans[i : i + size])) for i in range(0, len(spans), size)]


# -- Jaeger ----------------------------------------------------------------------------------------
_KINDS = {
    SpanKind.INTERNAL: "internal",
    SpanKind.SERVER: "server",
    SpanKind.CLIENT: "client",
    SpanKind.PRODUCER: "producer",
    SpanKind.CONSUMER: "consumer",
}


def _tag(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "type": "bool", "value": value}
    if isinstance(value, int):
        return {"key": key, "type": "int64", "value": value}
    if isinstance(value, float):
        return {"key": key, "type": "float64", "value": value}
    if isinstance(value, (tuple, list)):  # the translation writes arrays as JSON strings
        return {"key": key, "type": "string", "value": json.dumps(list(value))}
    return {"key": key, "type": "string", "value": str(value)}


def jaeger_span(span: ReadableSpan, process_id: str) -> dict[str, Any]:
    context = span.context
    assert context is not None and span.start_time is not None and span.end_time is not None
    trace_id = format(context.trace_id, "032x")
    tags = [_tag(k, v) for k, v in (span.attributes or {}).items()]
    tags.append(_tag("otel.scope.name", span.instrumentation_scope.name))  # type: ignore[union-attr]
    tags.append(_tag("span.kind", _KINDS[span.kind]))
    if span.status.status_code is StatusCode.ERROR:
        tags.append(_tag("otel.status_code", "ERROR"))
        tags.append(_tag("error", True))
        if span.status.description:
            tags.append(_tag("otel.status_description", span.status.description))
    elif span.status.status_code is StatusCode.OK:
        tags.append(_tag("otel.status_code", "OK"))
    references = []
    if span.parent is not None:
        references.append(
            {
                "refType": "CHILD_OF",
                "traceID": trace_id,
                "spanID": format(span.parent.span_id, "016x"),
            }
        )
    return {
        "traceID": trace_id,
        "spanID": format(context.span_id, "016x"),
        "operationName": span.name,
        "references": references,
        "startTime": span.start_time // 1000,
        "duration": (span.end_time - span.start_time) // 1000,
        "tags": tags,
        "logs": [
            {
                "timestamp": event.timestamp // 1000,
                "fields": [
                    _tag("event", event.name),
                    *(_tag(k, v) for k, v in (event.attributes or {}).items()),
                ],
            }
            for event in span.events
        ],
        "processID": process_id,
        "warnings": None,
        "flags": 1,
    }


def jaeger_document(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """Jaeger's ``/api/traces`` answer (and the UI's download) for these spans."""
    traces: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        assert span.context is not None
        traces.setdefault(span.context.trace_id, []).append(span)
    data = []
    for trace_id, members in traces.items():
        resource = dict(members[0].resource.attributes)
        service = str(resource.pop("service.name", "unknown"))
        data.append(
            {
                "traceID": format(trace_id, "032x"),
                "spans": [jaeger_span(s, "p1") for s in members],
                "processes": {
                    "p1": {
                        "serviceName": service,
                        "tags": [_tag(k, v) for k, v in resource.items()],
                    }
                },
                "warnings": None,
            }
        )
    return {"data": data, "total": 0, "limit": 0, "offset": 0, "errors": None}


def tempo_document(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """Tempo's ``/api/traces/<id>`` answer: ``batches``, protobuf's JSON mapping."""
    document = json_format.MessageToDict(encode_spans(list(spans)))
    return {"batches": document["resourceSpans"]}


# -- replay into a registry ------------------------------------------------------------------------
def replay_registry(
    paths: Sequence[Path | str], config: Config = CONFIG, forced: str = "auto"
) -> tuple[CollectorRegistry, ReplayResult]:
    registry = CollectorRegistry()
    metrics = LoopwatchMetrics(registry)
    outcome = run_replay([str(p) for p in paths], config, forced, forward=metrics)
    return registry, outcome
