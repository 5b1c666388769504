"""Spans read from their bytes (otlp_wire.py, the compiled build's way) give the views protobuf's
messages give (the pure build's way), whatever the layout: the benchmark streams, layouts written
by hand, and mutated bytes, where both refuse the same requests."""

from __future__ import annotations

import random

import pytest
from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from loopwatch.core.span_view import SpanView
from loopwatch.service import otlp
from loopwatch.service.otlp_lean import LeanRequest, RawSpanRequest
from loopwatch.service.otlp_wire import span_fields
from tests.support.wire import delimited, stream_requests, varint


def _both(body: bytes) -> tuple[object, object]:
    """What each way reads of ``body``: (views, rejected), or "refused"."""
    out: list[object] = []
    for message in (LeanRequest, RawSpanRequest):
        try:
            decoded = otlp.span_views(message.FromString(body))
            out.append(([_plain(v) for v in decoded.spans], decoded.rejected))
        except (DecodeError, otlp.RequestError):
            out.append("refused")
    return out[0], out[1]


def _plain(view: SpanView) -> tuple[object, ...]:
    events = tuple((e.name, dict(e.attributes)) for e in view.events)
    return (
        view.trace_id,
        view.span_id,
        view.parent_id,
        view.name,
        view.start_ns,
        view.end_ns,
        dict(view.attributes),
        events,
        view.status_code,
        view.status_description,
        view.service,
        dict(view.extra),
    )


def _request(*spans: bytes) -> bytes:
    # request.resource_spans (1) > scope_spans (2) > spans (2)
    return delimited(1, delimited(2, b"".join(delimited(2, s) for s in spans)))


def _span(**fields: object) -> bytes:
    base = {"trace_id": b"\x01" * 16, "span_id": b"\x02" * 8, "name": "create_ticket"}
    return bytes(Span(**(base | fields)).SerializeToString())  # type: ignore[arg-type]


def _attribute(key: str, text: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=text))


def test_every_benchmark_stream_reads_the_same_both_ways() -> None:
    read = 0
    for body in stream_requests():
        lean, raw = _both(body)
        assert lean == raw and lean != "refused"
        read += len(lean[0])  # type: ignore[index]
    assert read > 1500


def test_the_usual_span_is_read_from_its_bytes() -> None:
    span = _span(
        parent_span_id=b"\x03" * 8,
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=1_700_000_000_000_000_000,
        end_time_unix_nano=1_700_000_001_000_000_000,
        attributes=[_attribute("gen_ai.tool.name", "create_ticket")],
        status=Status(code=Status.STATUS_CODE_ERROR, message="timeout"),
        flags=0x300,
        dropped_attributes_count=2,
    )
    fields = span_fields(span)
    assert fields is not None
    trace_id, span_id, parent, name, start, end, attributes, status, flags = fields
    assert (trace_id, span_id, parent) == (b"\x01" * 16, b"\x02" * 8, b"\x03" * 8)
    assert name == "create_ticket"
    assert (start, end) == (1_700_000_000 * 10**9, 1_700_000_001 * 10**9)
    assert len(attributes) == 1 and flags == 0x300
    assert Status.FromString(status).message == "timeout"
    lean, raw = _both(_request(span))
    assert lean == raw
    (view,) = otlp.span_views(RawSpanRequest.FromString(_request(span))).spans
    assert view.extra == {otlp.REMOTE_PARENT: True}


@pytest.mark.parametrize(
    "span",
    [
        # events and links: read by protobuf
        _span(events=[Span.Event(name="exception", attributes=[_attribute("a", "b")])]),
        _span(links=[Span.Link(trace_id=b"\x05" * 16, span_id=b"\x06" * 8)]),
        # a field written twice (the last wins), fields out of order
        _span(name="first") + b"\x2a\x06second",
        b"\x2a\x03abc" + _span(),
        # kind negative: a ten-byte varint
        _span() + b"\x30" + b"\xff" * 9 + b"\x01",
        # a field numbered past 16, of each wire type
        _span() + varint(40 << 3 | 0) + b"\x05",
        _span() + varint(41 << 3 | 1) + b"\x00" * 8,
        _span() + delimited(42, b"later"),
        _span() + varint(43 << 3 | 5) + b"\x00" * 4,
        # a known field of another wire type
        _span() + b"\x28\x01",  # name as a varint
        _span() + b"\x31" + b"\x00" * 8,  # kind as fixed64
        _span() + b"\x80\x01\x01",  # flags as a varint
        # a length written in more bytes than it needs
        b"\x0a\x90\x00" + b"\x01" * 16 + b"\x12\x08" + b"\x02" * 8,
        # text that is not UTF-8
        _span() + b"\x2a\x02\xc3\x28",
        _span() + b"\x1a\x02\xc3\x28",  # the trace state
        # cut short, field number 0, a group
        _span()[:-3],
        _span() + b"\x00\x01",
        _span() + b"\x0b\x0c",
        # invalid ids: rejected, not refused
        _span(trace_id=b"\x00" * 16),
        _span(parent_span_id=b"\x01" * 3),
    ],
)
def test_unusual_layouts_read_as_protobuf_reads_them(span: bytes) -> None:
    body = _request(span, _span(span_id=b"\x09" * 8))
    lean, raw = _both(body)
    assert lean == raw


def test_mutated_spans_read_or_are_refused_as_protobuf_decides() -> None:
    rng = random.Random(7)
    spans = [
        _span(
            parent_span_id=b"\x03" * 8,
            attributes=[_attribute("gen_ai.tool.name", "t"), _attribute("http.method", "GET")],
            status=Status(code=Status.STATUS_CODE_ERROR, message="x"),
            flags=0x100,
        ),
        _span(events=[Span.Event(name="e")], start_time_unix_nano=5, end_time_unix_nano=9),
    ]
    outcomes = {"read": 0, "refused": 0}
    for _ in range(3000):
        span = bytearray(rng.choice(spans))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(span) + 1)
            action = rng.random()
            if action < 0.5 and at < len(span):
                span[at] = rng.randrange(256)
            elif action < 0.75:
                del span[at:]
            else:
                span.insert(at, rng.randrange(256))
        lean, raw = _both(_request(bytes(span)))
        assert lean == raw, bytes(span)
        outcomes["refused" if raw == "refused" else "read"] += 1
    assert min(outcomes.values()) > 300, outcomes
