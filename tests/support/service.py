"""Helpers for the service tests: the service in process on ephemeral ports, OTLP requests,
metric snapshots. (``loopwatch serve`` as a child process: testkit/serve_process.py.)"""

from __future__ import annotations

import gzip
import re
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from prometheus_client import CollectorRegistry

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.core.span_view import SpanView
from loopwatch.demo.scenarios import fourteen_tickets
from loopwatch.metrics.catalog import FAMILIES, QUEUE_SPANS
from loopwatch.service.app import Addresses, Service
from loopwatch.service.otlp import span_views
from testkit.serve_process import wait_for

LOOPBACK = Addresses("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0")
# values that differ between two correct runs: wall-clock timestamps, and how far the queue had
# filled when the worker last looked (thread timing)
_VOLATILE = re.compile(rf"(_created$|_first_seen_timestamp_seconds$|^{QUEUE_SPANS.name}$)")
# what only `loopwatch serve` exports (its HTTP front ends), not numbers of the spans
_SERVE_ONLY = tuple(m.family for m in FAMILIES if m.serve_only)


@contextmanager
def running(config: Config | None = None) -> Iterator[Service]:
    service = Service(config or Config(grace_seconds=0.0), LOOPBACK, CollectorRegistry())
    service.start()
    try:
        yield service
    finally:
        service.stop(timeout=5)


def settle(service: Service, timeout: float = 10.0) -> None:
    """Every submitted span processed and every turn whose root came in finalized."""
    assert service.pipeline is not None
    assert service.pipeline.flush(timeout)
    wait_for(lambda: value(service.registry, "loopwatch_open_turns") == 0, timeout)


def snapshot(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample, timestamps excluded: what two runs over the same spans must agree on."""
    out = {}
    for metric in registry.collect():
        for s in metric.samples:
            if not _VOLATILE.search(s.name) and not s.name.startswith(_SERVE_ONLY):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    total = 0.0
    for metric in registry.collect():
        for s in metric.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


def post(
    address: str,
    body: bytes,
    content_type: str = "application/x-protobuf",
    encoding: str | None = None,
    path: str = "/v1/traces",
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes, dict[str, str]]:
    if encoding == "gzip":
        body = gzip.compress(body)
    request = urllib.request.Request(f"http://{address}{path}", data=body, method="POST")
    request.add_header("Content-Type", content_type)
    if encoding:
        request.add_header("Content-Encoding", encoding)
    for k, v in (headers or {}).items():
        request.add_header(k, v)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read(), dict(e.headers)


def get(address: str, path: str, accept: str = "") -> tuple[int, str, str]:
    request = urllib.request.Request(f"http://{address}{path}")
    if accept:
        request.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(), response.headers["Content-Type"]
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers["Content-Type"]


def request_for(*turns: Any, service: str = "support-agent", start_s: int = 1000) -> Any:
    """An ``ExportTraceServiceRequest`` holding the given demo turns, as the exporter encodes."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from loopwatch.demo.emit import emit_turn

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    t = start_s * 1_000_000_000
    for turn in turns:
        t = emit_turn(tracer, turn, t) + 1_000_000_000
    provider.shutdown()
    return encode_spans(list(memory.get_finished_spans()))


DECLARED = {"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))}


def tickets() -> list[SpanView]:
    spans = span_views(request_for(fourteen_tickets())).spans
    assert spans[-1].parent_id is None  # the root ends last
    return spans


def rootless(spans: list[SpanView]) -> list[SpanView]:
    """The trace as a receiver sees it when the root (an HTTP server span, say) never comes:
    the agent span hangs under a parent that is not there."""
    agent = replace(spans[-1], parent_id=0x5EED)
    return [*spans[:-1], agent]


EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
