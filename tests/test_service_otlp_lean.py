"""Span attributes and status read from their serialized bytes (otlp_lean, otlp.span_attributes):
the same values the official messages give, whatever the encoder's layout, with bounded caches."""

from __future__ import annotations

import pytest
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue, KeyValueList
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from loopwatch.conventions.read import UNREAD_PREFIXES
from loopwatch.service import otlp
from loopwatch.service.otlp import attributes, parse_protobuf, span_attributes, span_views
from tests.support.wire import delimited, stream_requests


def _kv(key: str, text: str) -> bytes:
    return bytes(KeyValue(key=key, value=AnyValue(string_value=text)).SerializeToString())


def test_every_benchmark_stream_reads_as_the_official_messages_do() -> None:
    checked = 0
    for body in stream_requests():
        official = [
            attributes(s.attributes, UNREAD_PREFIXES)
            for rs in ExportTraceServiceRequest.FromString(body).resource_spans
            for ss in rs.scope_spans
            for s in ss.spans
        ]
        for _ in range(2):  # first from the bytes, then from the cache
            views = span_views(parse_protobuf(body)).spans
            assert [v.attributes for v in views] == official
            checked += len(views)
    assert checked > 2000


def test_unusual_layouts_read_as_protobuf_reads_them() -> None:
    value_first = bytes(
        KeyValue(value=AnyValue(string_value="GET")).SerializeToString()
        + KeyValue(key="http.method").SerializeToString()
    )
    long_unread = _kv("http." + "x" * 200, "skipped")
    long_read = _kv("gen_ai." + "y" * 200, "kept")
    short = _kv("db", "a key shorter than the prefix db.")
    out = span_attributes(
        [value_first, long_unread, long_read, short, _kv("tool", "a"), _kv("tool", "b"), b""]
    )
    assert out == {
        "gen_ai." + "y" * 200: "kept",
        "db": "a key shorter than the prefix db.",
        "tool": "b",
        "": None,
    }


def test_an_unread_attribute_is_not_decoded() -> None:
    # its key says it is never read: its value is skipped unchecked (here: not protobuf at all)
    garbage = b"\x0a\x09http.path\xff\xff\xff"
    assert span_attributes([garbage, _kv("tool", "a")]) == {"tool": "a"}


def test_a_key_cut_short_teaches_nothing_about_the_whole_key() -> None:
    # the bytes left of a cut "http.method" spell "http.", itself an unread key
    with pytest.raises(otlp.RequestError):
        span_attributes([b"\x0a\x0bhttp."])
    assert span_attributes([_kv("http.", "GET"), _kv("tool", "a")]) == {"tool": "a"}


def test_caches_stay_bounded_and_share_only_immutable_values() -> None:
    for i in range(otlp.SEEN_ENTRIES * 2 + 10):
        span_attributes([_kv(f"k{i % 5000}", f"v{i}"), _kv(f"http.k{i}", "x")])
        assert len(otlp._SEEN) <= otlp.SEEN_ENTRIES
    assert len(otlp._KEYS) <= otlp._KEYS_ENTRIES
    long = _kv("tool", "z" * otlp.SEEN_BYTES)
    span_attributes([long])
    assert long not in otlp._SEEN
    kvlist = bytes(
        KeyValue(
            key="meta", value=AnyValue(kvlist_value=KeyValueList(values=[_pair("a", "b")]))
        ).SerializeToString()
    )
    first, second = span_attributes([kvlist]), span_attributes([kvlist])
    assert first == second == {"meta": {"a": "b"}}
    assert first["meta"] is not second["meta"]


def _pair(key: str, text: str) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(string_value=text))


def _official(raw: bytes) -> object:
    try:
        return attributes([KeyValue.FromString(raw)], UNREAD_PREFIXES)
    except DecodeError:
        return "rejected"


def _ours(raw: bytes) -> object:
    try:
        return span_attributes([raw])
    except otlp.RequestError:
        return "rejected"


def test_text_values_read_without_protobuf_read_as_protobuf_reads_them() -> None:
    texts = ["", "a", "é" * 70, "x" * 200, "y" * 20_000, "line\nbreak", "\u2603", "\U0001f600"]
    written = [_kv(f"tool.k{i}", t) for i, t in enumerate(texts)]
    others = [
        KeyValue(key="n", value=AnyValue(int_value=5)),
        KeyValue(key="b", value=AnyValue(bool_value=True)),
        KeyValue(key="d", value=AnyValue(double_value=0.5)),
        KeyValue(key="raw", value=AnyValue(bytes_value=b"\xff\x00")),
        KeyValue(key="none"),
    ]
    by_hand = [
        b"\x0a\x01k\x12\x84\x00\x0a\x02hi",  # the value's length written in two bytes
        b"\x0a\x01k\x12\x06\x0a\x01a\x0a\x01b",  # two strings: protobuf keeps the last
        b"\x0a\x01k\x12\x03\x0a\x01a\x0a\x01k",  # the key again after the value
        b"\x0a\x01k\x12\x04\x0a\x02\xc3\x28",  # the text not UTF-8
        b"\x0a\x01\xff\x12\x03\x0a\x01a",  # the key not UTF-8
        b"\x0a\x01k\x12\x03\x0a\x05abc",  # the text's length past the end
        b"\x0a\x01k\x12\xff\xff\xff\xff\xff\x0a\x01a",  # a length of five bytes
    ]
    cases = [*written, *(bytes(o.SerializeToString()) for o in others), *by_hand]
    cases += [c[:cut] for c in written for cut in (4, len(c) - 1) if cut < len(c)]
    for raw in cases:
        expected = _official(raw)
        assert _ours(raw) == expected, raw[:40]
        assert _ours(raw) == expected, raw[:40]  # again, from the cache
    assert _ours(written[4]) == {"tool.k4": "y" * 20_000}


def _one_span_request(status: bytes) -> bytes:
    """A request of one span whose status field holds ``status`` as written (any bytes)."""
    span = Span(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, name="create_ticket")
    span_bytes = span.SerializeToString() + (delimited(15, status) if status else b"")
    # request.resource_spans (1) > scope_spans (2) > spans (2)
    return delimited(1, delimited(2, delimited(2, span_bytes)))


def test_a_span_status_reads_as_the_official_message_does() -> None:
    error = Status(code=Status.STATUS_CODE_ERROR, message="timeout").SerializeToString()
    ok = Status(code=Status.STATUS_CODE_OK).SerializeToString()
    for raw, expected in ((error, (2, "timeout")), (ok, (1, "")), (b"", (0, ""))):
        body = _one_span_request(raw)
        official = ExportTraceServiceRequest.FromString(body)
        status = official.resource_spans[0].scope_spans[0].spans[0].status
        assert (status.code, status.message) == expected
        (view,) = span_views(parse_protobuf(body)).spans
        assert (view.status_code, view.status_description) == expected


def test_a_malformed_status_is_a_request_error() -> None:
    body = _one_span_request(b"\x12\x05ab")  # a message field cut short
    with pytest.raises(DecodeError):
        ExportTraceServiceRequest.FromString(body)
    with pytest.raises(otlp.RequestError, match="status"):
        span_views(parse_protobuf(body))
