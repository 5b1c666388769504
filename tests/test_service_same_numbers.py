"""Same spans, same numbers: one set of traces through the in-process processor and, through
the real OTLP exporters (gRPC, HTTP protobuf, and OTLP/JSON), through the service."""

from __future__ import annotations

import random

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.demo.emit import CONVENTIONS, emit_turn
from loopwatch.demo.scenarios import eleven_empty_searches, flaky, fourteen_tickets, healthy
from loopwatch.service.otlp import hex_ids_json
from tests.support.helpers import Pipeline, S
from tests.support.service import post, running, settle, snapshot, value

CONFIG = Config(
    tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))},
    grace_seconds=0.0,
)


class JsonExporter(SpanExporter):
    """OTLP/JSON over HTTP, gzipped: the exporter's own encoder, hex ids per the spec."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.statuses: list[int] = []

    def export(self, spans: object) -> SpanExportResult:
        body = hex_ids_json(encode_spans(list(spans)))  # type: ignore[call-overload]
        status, _, _ = post(self.address, body, "application/json", encoding="gzip")
        self.statuses.append(status)
        return SpanExportResult.SUCCESS if status == 200 else SpanExportResult.FAILURE


def _emit_everything(p: Pipeline) -> int:
    rng = random.Random(7)
    t = 1000 * S
    turns = 0
    for convention in CONVENTIONS:
        for turn in (
            fourteen_tickets(),
            eleven_empty_searches(),
            *(healthy(rng, rng.choice(["gpt-4.1", "claude-sonnet-4"])) for _ in range(6)),
            *(flaky(rng, "gpt-4.1", attempts=rng.randint(2, 5)) for _ in range(4)),
        ):
            t = emit_turn(p.tracer, turn, t, convention) + S
            turns += 1
    return turns


def test_processor_and_service_agree_on_every_sample() -> None:
    with running(CONFIG) as via_grpc, running(CONFIG) as via_http, running(CONFIG) as via_json:
        assert via_grpc.bound and via_http.bound and via_json.bound
        p = Pipeline(CONFIG)
        grpc_exporter = GrpcExporter(endpoint=via_grpc.bound.grpc, insecure=True)
        http_exporter = HttpExporter(
            endpoint=f"http://{via_http.bound.http}/v1/traces", compression=Compression.Gzip
        )
        json_exporter = JsonExporter(via_json.bound.http)
        p.provider.add_span_processor(BatchSpanProcessor(grpc_exporter, schedule_delay_millis=50))
        p.provider.add_span_processor(BatchSpanProcessor(http_exporter, schedule_delay_millis=50))
        p.provider.add_span_processor(SimpleSpanProcessor(json_exporter))
        turns = _emit_everything(p)
        assert p.provider.force_flush(30_000)
        p.flush()
        for service in (via_grpc, via_http, via_json):
            settle(service)
        expected = snapshot(p.registry)
        assert value(p.registry, "loopwatch_turns_total") == turns == 36
        assert value(p.registry, "loopwatch_loops_total") > 6  # the incidents, three times over
        for service in (via_grpc, via_http, via_json):
            assert snapshot(service.registry) == expected
        assert set(json_exporter.statuses) == {200}
        p.close()


def test_exporter_span_survives_the_wire_unchanged() -> None:
    """The OTLP decoding yields exactly the SpanView the in-process processor builds."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from loopwatch.service.otlp import parse_protobuf, span_views
    from loopwatch.service.otlp_json import decode
    from testkit.span_views import span_view

    p = Pipeline(CONFIG)
    memory = InMemorySpanExporter()
    p.provider.add_span_processor(SimpleSpanProcessor(memory))
    for convention in CONVENTIONS:
        emit_turn(p.tracer, fourteen_tickets(), 1000 * S, convention)
    spans: list[ReadableSpan] = list(memory.get_finished_spans())
    request = encode_spans(spans)
    local = [span_view(s) for s in spans]
    assert span_views(parse_protobuf(request.SerializeToString())).spans == local
    assert decode(hex_ids_json(request)).spans == local
    p.close()
