"""OTLP decoding: every AnyValue kind, ids, roots, status, events, service name; OTLP/JSON with
hex ids; deflate and chunked bodies over HTTP."""

from __future__ import annotations

import base64
import json
import socket
import zlib
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from loopwatch.core.config import Config
from loopwatch.core.span_view import STATUS_ERROR, EventView, SpanView
from loopwatch.demo.scenarios import fourteen_tickets
from loopwatch.service.otlp import (
    RequestError,
    count_spans,
    hex_ids_json,
    parse_protobuf,
    span_views,
)
from loopwatch.service.otlp_json import decode
from tests.support.service import post, request_for, running, settle, value

TRACE = bytes(range(1, 17))
SPAN = bytes(range(1, 9))
PARENT = bytes(range(9, 17))


def _request(**span: object) -> ExportTraceServiceRequest:
    body = {
        "trace_id": TRACE,
        "span_id": SPAN,
        "name": "execute_tool lookup",
        "start_time_unix_nano": 1_000,
        "end_time_unix_nano": 3_000,
        **span,
    }
    return json_format.ParseDict(
        {
            "resource_spans": [
                {
                    "resource": {
                        "attributes": [{"key": "service.name", "value": {"string_value": "svc"}}]
                    },
                    "scope_spans": [{"spans": [_b64(body)]}],
                }
            ]
        },
        ExportTraceServiceRequest(),
    )


def _b64(span: dict[str, object]) -> dict[str, object]:
    import base64

    return {k: base64.b64encode(v).decode() if isinstance(v, bytes) else v for k, v in span.items()}


def test_every_any_value_kind_becomes_what_the_sdk_would_hold() -> None:
    attributes = [
        {"key": "s", "value": {"string_value": "x"}},
        {"key": "b", "value": {"bool_value": True}},
        {"key": "i", "value": {"int_value": "-9007199254740993"}},
        {"key": "d", "value": {"double_value": 0.5}},
        {"key": "raw", "value": {"bytes_value": "AAE="}},
        {
            "key": "a",
            "value": {"array_value": {"values": [{"string_value": "p"}, {"int_value": "2"}]}},
        },
        {
            "key": "kv",
            "value": {
                "kvlist_value": {
                    "values": [
                        {"key": "inner", "value": {"array_value": {"values": []}}},
                        {"key": "none", "value": {}},
                    ]
                }
            },
        },
    ]
    request = _request(
        parent_span_id=PARENT,
        attributes=attributes,
        events=[{"name": "exception", "attributes": [attributes[0]]}],
        status={"code": 2, "message": "boom"},
    )
    [view] = span_views(request).spans
    assert view == SpanView(
        trace_id=int.from_bytes(TRACE, "big"),
        span_id=int.from_bytes(SPAN, "big"),
        parent_id=int.from_bytes(PARENT, "big"),
        name="execute_tool lookup",
        start_ns=1_000,
        end_ns=3_000,
        attributes={
            "s": "x",
            "b": True,
            "i": -9007199254740993,
            "d": 0.5,
            "raw": b"\x00\x01",
            "a": ("p", 2),
            "kv": {"inner": (), "none": None},
        },
        events=(EventView("exception", {"s": "x"}),),
        status_code=STATUS_ERROR,
        status_description="boom",
        service="svc",
    )


@pytest.mark.parametrize("parent", [b"", b"\0" * 8])
def test_no_parent_is_a_root(parent: bytes) -> None:
    [view] = span_views(_request(parent_span_id=parent)).spans
    assert view.parent_id is None


def test_missing_service_name_and_end_time() -> None:
    request = _request(end_time_unix_nano=0)
    del request.resource_spans[0].resource.attributes[:]
    [view] = span_views(request).spans
    assert view.service == "unknown"
    assert view.end_ns == view.start_ns


@pytest.mark.parametrize(
    "bad",
    [
        {"trace_id": b"\x01" * 8},
        {"trace_id": b"\0" * 16},
        {"span_id": b""},
        {"span_id": b"\0" * 8},
        {"parent_span_id": b"\x01" * 4},
    ],
)
def test_invalid_ids_are_rejected_not_fatal(bad: dict[str, bytes]) -> None:
    request = _request(**bad)
    request.resource_spans[0].scope_spans[0].spans.append(
        _request().resource_spans[0].scope_spans[0].spans[0]
    )
    assert count_spans(request) == (1, 1)
    decoded = span_views(request)
    assert len(decoded.spans) == 1 and decoded.rejected == 1


def test_otlp_json_uses_hex_ids_camel_case_and_ignores_unknown_fields() -> None:
    document = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]
                },
                "scopeSpans": [
                    {
                        "scope": {"name": "x"},
                        "spans": [
                            {
                                "traceId": TRACE.hex(),
                                "spanId": SPAN.hex(),
                                "parentSpanId": "",
                                "name": "n",
                                "kind": 1,
                                "startTimeUnixNano": "1000",
                                "endTimeUnixNano": 3000,
                                "status": {"code": 2},
                                "someFutureField": {"x": 1},
                            }
                        ],
                    }
                ],
            }
        ]
    }
    [view] = decode(json.dumps(document).encode()).spans
    assert (view.trace_id, view.span_id, view.parent_id) == (
        int.from_bytes(TRACE, "big"),
        int.from_bytes(SPAN, "big"),
        None,
    )
    assert (view.start_ns, view.end_ns, view.status_code, view.service) == (1000, 3000, 2, "svc")


@pytest.mark.parametrize(
    "body",
    [b"", b"[]", b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 7}]}]}]}', b"\xff"],
)
def test_json_that_is_not_a_request_is_a_request_error(body: bytes) -> None:
    with pytest.raises(RequestError):
        decode(body)


def test_truncated_protobuf_is_a_request_error() -> None:
    body = request_for(fourteen_tickets()).SerializeToString()
    with pytest.raises(RequestError):
        parse_protobuf(body[: len(body) // 2])


def test_round_trip_through_otlp_json() -> None:
    request = request_for(fourteen_tickets())
    assert decode(hex_ids_json(request)).spans == span_views(request).spans


def test_deflate_and_chunked_bodies() -> None:
    with running(Config(grace_seconds=0.0)) as service:
        assert service.bound is not None
        body = request_for(fourteen_tickets()).SerializeToString()
        status, _, _ = post(
            service.bound.http, zlib.compress(body), headers={"Content-Encoding": "deflate"}
        )
        assert status == 200
        settle(service)
        assert value(service.registry, "loopwatch_turns_total") == 1
        # chunked (no Content-Length), as the Collector accepts it: counted like any other
        body = request_for(fourteen_tickets(), start_s=5000).SerializeToString()
        pieces = [body[i : i + 1000] for i in range(0, len(body), 1000)]
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
        host, port = service.bound.http.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(
                b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n" + chunked
            )
            assert s.recv(100).startswith(b"HTTP/1.1 200")
        settle(service)
        assert value(service.registry, "loopwatch_turns_total") == 2
        assert len(pieces) > 1


def test_otlp_json_gives_the_views_protobuf_gives() -> None:
    """OTLP/JSON requests give the span views their protobuf gives: for every convention's
    spans, and for the requests OpenTelemetry JS's own serializer wrote
    (tests/fixtures/vercel_ai), against protobuf's JSON parser (base64 ids) there."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from loopwatch.demo.emit import CONVENTIONS, emit_turn
    from loopwatch.demo.scenarios import eleven_empty_searches
    from tests.support.helpers import Pipeline, S
    from tests.support.vercel_ai import FIXTURES, RECORDINGS, requests

    p = Pipeline(Config())
    memory = InMemorySpanExporter()
    p.provider.add_span_processor(SimpleSpanProcessor(memory))
    for i, convention in enumerate(CONVENTIONS):
        emit_turn(p.tracer, fourteen_tickets(), (1000 + 100 * i) * S, convention)
        emit_turn(p.tracer, eleven_empty_searches(), (1050 + 100 * i) * S, convention)
    request = encode_spans(list(memory.get_finished_spans()))
    p.close()
    read = decode(hex_ids_json(request))
    assert (read.rejected, read.base64_ids) == (0, False)
    assert read.spans == span_views(parse_protobuf(request.SerializeToString())).spans
    assert len(read.spans) == len(memory.get_finished_spans()) > 100
    lines = [line for recording in RECORDINGS for line in requests(recording)]
    assert len(lines) == 6 and FIXTURES.is_dir()
    for line in lines:
        read = decode(line)
        message = json_format.Parse(
            json.dumps(_base64_ids(json.loads(line))), ExportTraceServiceRequest()
        )
        assert read.spans == span_views(message).spans


def _base64_ids(document: Any) -> Any:
    for rs in document["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return document


def test_the_service_reads_otlp_json_as_protobuf_would_and_names_what_is_wrong() -> None:
    """What protobuf's JSON parser refuses, the service refuses, naming the field (a count
    written negative); base64 ids (protobuf's JSON mapping) are read; an id that is neither
    hex nor base64 is named."""
    request = request_for(fourteen_tickets())
    document = json.loads(hex_ids_json(request))
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    with running(Config(grace_seconds=0.0)) as service:
        assert service.bound is not None
        status, raw, _ = post(service.bound.http, json.dumps(document).encode(), "application/json")
        assert (status, json.loads(raw)) == (200, {})
        spans[3]["droppedAttributesCount"] = -1
        status, raw, _ = post(service.bound.http, json.dumps(document).encode(), "application/json")
        assert status == 400
        assert json.loads(raw)["message"] == (
            "resourceSpans[0].scopeSpans[0].spans[3].droppedAttributesCount: "
            "-1 is out of range (0 to 4294967295)"
        )
        del spans[3]["droppedAttributesCount"]
        for span in spans:
            span["traceId"] = base64.b64encode(bytes.fromhex(span["traceId"])).decode()
            span["traceId"] = span["traceId"].replace("==", "")  # unpadded: read too
        again = json.loads(hex_ids_json(request_for(fourteen_tickets(), start_s=5000)))
        again["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "zz" * 16
        for body, expected in ((document, 200), (again, 400)):
            status, raw, _ = post(service.bound.http, json.dumps(body).encode(), "application/json")
            assert status == expected
        assert json.loads(raw)["message"] == (
            f"resourceSpans[0].scopeSpans[0].spans[0].traceId: not a hex or base64 id: '{'z' * 32}'"
        )
        settle(service)
        assert value(service.registry, "loopwatch_turns_total") == 1  # the first, once
        assert value(service.registry, "loopwatch_repeat_calls_total") == 13


def test_otlp_json_with_nulls_is_read_with_the_same_numbers() -> None:
    """A request with ``null`` fields (valid OTLP/JSON: as if absent) gives the numbers the
    same request without them gives."""
    request = request_for(fourteen_tickets())
    document = json.loads(hex_ids_json(request))
    first = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    first["status"] = None
    first["flags"] = None
    first["events"] = None
    with running(Config(grace_seconds=0.0)) as service:
        assert service.bound is not None
        status, _, _ = post(service.bound.http, json.dumps(document).encode(), "application/json")
        assert status == 200
        settle(service)
        assert value(service.registry, "loopwatch_turns_total") == 1
        assert value(service.registry, "loopwatch_repeat_calls_total") == 13
