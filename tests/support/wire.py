"""Protobuf's wire format written by hand, for layouts no encoder writes; and the benchmark
streams as encoders write them."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from testkit.streams import STREAMS, record


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out) + bytes([value])


def delimited(field: int, payload: bytes) -> bytes:
    """A length-delimited field: its tag, its length, ``payload``."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def stream_requests() -> list[bytes]:
    """The first 600 spans of every benchmark stream, as OTLP requests of 200 spans."""
    bodies = []
    for name in sorted(STREAMS):
        spans = record(STREAMS[name])[:600]
        for i in range(0, len(spans), 200):
            bodies.append(bytes(encode_spans(spans[i : i + 200]).SerializeToString()))
    return bodies
