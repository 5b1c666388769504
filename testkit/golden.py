"""The metrics exposition of each stream of ``testkit.streams``, in process and through the
service, with times of day (first-seen gauges, ``_created``, exemplar timestamps) masked: what
tests/golden/ holds (written by benchmarks/golden.py --write, compared by
tests/test_golden_metrics.py)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client import CollectorRegistry
from prometheus_client.openmetrics.exposition import generate_latest

from loopwatch import LoopwatchSpanProcessor
from loopwatch.attach.read_api import SpanReader
from loopwatch.metrics.exporter import LoopwatchMetrics
from loopwatch.service.otlp import span_views
from loopwatch.service.pipeline import Pipeline
from testkit.streams import CONFIG, STREAMS, provider, record

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden"
BATCH = 512
_EXEMPLAR_TIME = re.compile(r"(# \{[^}]*\} \S+) \S+$")


def normalize(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if line.startswith("#"):
            lines.append(line)
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name.endswith("_created"):
            continue
        if "_first_seen_timestamp_seconds" in name:
            line = line.rsplit(" ", 1)[0] + " <time>"
        lines.append(_EXEMPLAR_TIME.sub(r"\1 <time>", line))
    return "\n".join(lines) + "\n"


def in_process(name: str, span_reader: SpanReader | None = None) -> str:
    """A stream's exposition from the processor (``span_reader``: the processor's)."""
    registry = CollectorRegistry()
    processor = LoopwatchSpanProcessor(config=CONFIG, registry=registry, span_reader=span_reader)
    p = provider(11, processor)
    STREAMS[name](p.get_tracer("bench"))
    p.shutdown()
    return normalize(generate_latest(registry).decode())


def service(name: str) -> str:
    spans = record(STREAMS[name])
    registry = CollectorRegistry()
    # a grace longer than the run: every trace ends at stop, as its root or as shutdown says
    pipeline = Pipeline(replace(CONFIG, grace_seconds=3600.0), LoopwatchMetrics(registry))
    for i in range(0, len(spans), BATCH):
        body = encode_spans(spans[i : i + BATCH]).SerializePartialToString()
        assert pipeline.submit(span_views(ExportTraceServiceRequest.FromString(body)).spans)
    assert pipeline.stop(600)
    return normalize(generate_latest(registry).decode())


def expositions() -> dict[str, str]:
    out = {}
    for name in STREAMS:
        out[f"{name}-processor.txt"] = in_process(name)
        out[f"{name}-service.txt"] = service(name)
    return out
