"""Bad input gets the protocol's error and loses nothing: after each bad request the service
serves the next good one and its earlier turns are intact."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import grpc
import pytest
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from loopwatch.core.config import Config
from loopwatch.core.declarations import ToolDeclaration
from loopwatch.demo.scenarios import fourteen_tickets
from loopwatch.service.app import Service
from loopwatch.service.otlp import hex_ids_json
from loopwatch.service.otlp_lean import LeanRequest
from tests.support.service import EXPORT, post, request_for, running, settle, value

LIMIT = 64 * 1024
CONFIG = Config(
    tools={"create_ticket": ToolDeclaration(identity=("customer_id", "order_id"))},
    grace_seconds=0.0,
    max_request_bytes=LIMIT,
)


WATCHED: tuple[tuple[str, dict[str, str], int], ...] = (
    ("loopwatch_turns_total", {}, 1),
    ("loopwatch_loops_total", {"kind": "repeat"}, 1),
    ("loopwatch_tool_calls_total", {"error_class": "timeout"}, 14),
    ("loopwatch_turn_max_attempts_sum", {}, 14),
)


class Good:
    """Sends one fourteen-tickets turn: it counts exactly once, and nothing counted before
    it was lost (a bad request may only have added to the counters)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.sent = 0
        self.last = [0.0] * len(WATCHED)

    def values(self) -> list[float]:
        return [value(self.service.registry, name, **labels) for name, labels, _ in WATCHED]

    def send_and_check(self) -> None:
        assert self.service.bound is not None
        settle(self.service)
        before = self.values()
        assert all(b >= last for b, last in zip(before, self.last, strict=True))
        body = request_for(fourteen_tickets(), start_s=1000 + 100 * self.sent)
        status, raw, _ = post(self.service.bound.http, body.SerializeToString())
        assert status == 200
        assert ExportTraceServiceResponse.FromString(raw) == ExportTraceServiceResponse()
        self.sent += 1
        settle(self.service)
        self.last = self.values()
        deltas = [a - b for a, b in zip(self.last, before, strict=True)]
        assert deltas == [float(n) for _, _, n in WATCHED]


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    with running(CONFIG) as s:
        yield s


@pytest.fixture(scope="module")
def good(service: Service) -> Good:
    g = Good(service)
    g.send_and_check()
    return g


def _status(raw: bytes) -> tuple[int, str]:
    s = status_pb2.Status.FromString(raw)
    return s.code, s.message


def _with_attribute(raw: bytes) -> bytes:
    """A valid request whose first span carries one more attribute: these serialized bytes."""
    body = request_for(fourteen_tickets(), start_s=90_000).SerializeToString()
    request = LeanRequest.FromString(body)
    request.resource_spans[0].scope_spans[0].spans[0].attributes.append(raw)
    return bytes(request.SerializeToString())


# a key the conventions read, its value cut short / not UTF-8: the whole request is refused
TRUNCATED_ATTRIBUTE = _with_attribute(b"\x0a\x10gen_ai.tool.name\x12\x05\x0a\x03ab")
NOT_UTF8_ATTRIBUTE = _with_attribute(b"\x0a\x10gen_ai.tool.name\x12\x04\x0a\x02\xff\xfe")


def _bomb() -> bytes:
    # 32 MiB of zeros gzip to ~32 KiB: under the wire limit, far over the decompressed one
    return gzip.compress(b"\0" * (32 * 1024 * 1024), compresslevel=9)


HTTP_CASES = {
    "malformed protobuf": (b"\x0a\xff\xff\xff", "application/x-protobuf", None, 400),
    "malformed json": (b'{"resourceSpans": [', "application/json", None, 400),
    "truncated attribute": (TRUNCATED_ATTRIBUTE, "application/x-protobuf", None, 400),
    "attribute not UTF-8": (NOT_UTF8_ATTRIBUTE, "application/x-protobuf", None, 400),
    "json of the wrong shape": (b'{"resourceSpans": 3}', "application/json", None, 400),
    "json id not hex": (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz","spanId":"01"}]}]}]}',
        "application/json",
        None,
        400,
    ),
    "over the size limit": (b"\0" * (LIMIT + 1), "application/x-protobuf", None, 413),
    "corrupt gzip": (b"\x1f\x8bnot gzip at all", "application/x-protobuf", "gzip", 400),
    "unknown content type": (b"hello", "text/plain", None, 415),
    "unknown encoding": (b"hello", "application/x-protobuf", "br", 415),
}


@pytest.mark.parametrize("case", sorted(HTTP_CASES))
def test_http_bad_request_then_good(service: Service, good: Good, case: str) -> None:
    assert service.bound is not None
    body, content_type, encoding, expected = HTTP_CASES[case]
    status, raw, _ = post(service.bound.http, body, content_type, encoding=encoding)
    assert status == expected
    if content_type == "application/x-protobuf" and expected != 415:
        code, message = _status(raw)
        assert code == (
            code_pb2.RESOURCE_EXHAUSTED if expected == 413 else code_pb2.INVALID_ARGUMENT
        )
        assert message
    good.send_and_check()


UNSUPPORTED = {
    "content type": (
        "text/plain",
        None,
        b"unsupported content type 'text/plain'; send application/x-protobuf or application/json\n",
    ),
    "encoding": (
        "application/x-protobuf",
        "br",
        b"unsupported Content-Encoding 'br'; send gzip, deflate or identity\n",
    ),
}


@pytest.mark.parametrize("case", sorted(UNSUPPORTED))
def test_http_415_names_what_is_unsupported(service: Service, good: Good, case: str) -> None:
    assert service.bound is not None
    content_type, encoding, expected = UNSUPPORTED[case]
    status, raw, headers = post(service.bound.http, b"hello", content_type, encoding=encoding)
    assert (status, raw, headers["Content-Type"]) == (415, expected, "text/plain; charset=utf-8")
    good.send_and_check()


@pytest.mark.parametrize(
    ("content_type", "answer"), [("application/x-protobuf", b""), ("application/json", b"{}")]
)
def test_http_empty_body_is_an_empty_export(
    service: Service, good: Good, content_type: str, answer: bytes
) -> None:
    assert service.bound is not None
    settle(service)
    before = good.values()
    status, raw, headers = post(service.bound.http, b"", content_type)
    assert (status, raw, headers["Content-Type"]) == (200, answer, content_type)
    settle(service)
    assert good.values() == before
    good.send_and_check()


def test_http_gzip_bomb_is_refused(service: Service, good: Good) -> None:
    assert service.bound is not None
    bomb = _bomb()
    assert len(bomb) < LIMIT
    status, raw, _ = post(service.bound.http, bomb, encoding="gzip", content_type="x")
    assert status == 415  # content type is checked before the body is read
    headers = {"Content-Encoding": "gzip"}
    status, raw, _ = post(service.bound.http, bomb, headers=headers)
    assert status == 413
    assert _status(raw)[0] == code_pb2.RESOURCE_EXHAUSTED
    good.send_and_check()


def test_http_wrong_path_and_method(service: Service, good: Good) -> None:
    assert service.bound is not None
    assert post(service.bound.http, b"", path="/v1/metrics")[0] == 404
    good.send_and_check()


def test_partial_success_reports_rejected_spans(service: Service, good: Good) -> None:
    assert service.bound is not None
    request = request_for(fourteen_tickets(), start_s=50_000)
    spans = request.resource_spans[0].scope_spans[0].spans
    trace_id = spans[0].trace_id
    spans[0].trace_id = b"\x01" * 8  # wrong length
    spans[1].span_id = b"\0" * 8  # all zero
    before = value(service.registry, "loopwatch_spans_dropped_total", reason="invalid_id")
    late = value(service.registry, "loopwatch_late_spans_total")
    status, raw, _ = post(service.bound.http, request.SerializeToString())
    assert status == 200
    response = ExportTraceServiceResponse.FromString(raw)
    assert response.partial_success.rejected_spans == 2
    assert "rejected" in response.partial_success.error_message
    # the same over JSON: the answer is OTLP/JSON too
    spans[0].trace_id = trace_id
    settle(service)  # the first request held the root: its turn is final now
    status, raw, _ = post(service.bound.http, hex_ids_json(request), "application/json")
    assert status == 200
    assert json.loads(raw)["partialSuccess"]["rejectedSpans"] in (1, "1")
    settle(service)
    after = value(service.registry, "loopwatch_spans_dropped_total", reason="invalid_id")
    assert after - before == 3
    # the first request still held the turn (its root and 12 of 14 tool calls); the resend of
    # the same trace arrived after it was final: every accepted span of it counts as late
    assert value(service.registry, "loopwatch_late_spans_total") - late == len(spans) - 1
    good.send_and_check()


def test_spans_without_meaning_pass_through_counted(service: Service, good: Good) -> None:
    assert service.bound is not None
    request = request_for(fourteen_tickets(), start_s=60_000)
    for span in request.resource_spans[0].scope_spans[0].spans:
        del span.attributes[:]  # plain spans: no tool, no turn, no model
        span.name = "GET /orders"
    before = value(service.registry, "loopwatch_spans_total", kind="other")
    turns = value(service.registry, "loopwatch_turns_total")
    status, _, _ = post(service.bound.http, request.SerializeToString())
    assert status == 200
    settle(service)
    n = len(request.resource_spans[0].scope_spans[0].spans)
    assert value(service.registry, "loopwatch_spans_total", kind="other") - before == n
    assert value(service.registry, "loopwatch_turns_total") == turns  # none for them
    good.send_and_check()


def _grpc_call(service: Service, body: bytes, compression: grpc.Compression | None = None) -> bytes:
    assert service.bound is not None
    with grpc.insecure_channel(
        service.bound.grpc, options=[("grpc.max_send_message_length", 64 * 1024 * 1024)]
    ) as channel:
        call = channel.unary_unary(EXPORT)  # raw bytes both ways
        return bytes(call(body, timeout=10, compression=compression))


@pytest.mark.parametrize(
    ("body", "compression", "code"),
    [
        (b"\x0a\xff\xff\xff", None, grpc.StatusCode.INVALID_ARGUMENT),
        (TRUNCATED_ATTRIBUTE, None, grpc.StatusCode.INVALID_ARGUMENT),
        (NOT_UTF8_ATTRIBUTE, None, grpc.StatusCode.INVALID_ARGUMENT),
        (b"\0" * (LIMIT + 1), None, grpc.StatusCode.RESOURCE_EXHAUSTED),
        # a valid request whose decompressed size is over the limit
        (
            ExportTraceServiceRequest(
                resource_spans=[
                    ResourceSpans(scope_spans=[ScopeSpans(spans=[Span(name="a" * 4 * LIMIT)])])
                ]
            ).SerializeToString(),
            grpc.Compression.Gzip,
            grpc.StatusCode.RESOURCE_EXHAUSTED,
        ),
    ],
    ids=[
        "malformed",
        "truncated attribute",
        "attribute not UTF-8",
        "over the size limit",
        "gzip bomb",
    ],
)
def test_grpc_bad_request_then_good(
    service: Service, good: Good, body: bytes, compression: grpc.Compression | None, code: object
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        _grpc_call(service, body, compression)
    assert caught.value.code() == code
    good.send_and_check()


def test_grpc_partial_success(service: Service, good: Good) -> None:
    request = request_for(fourteen_tickets(), start_s=70_000)
    request.resource_spans[0].scope_spans[0].spans[0].span_id = b"\x01\x02"
    response = ExportTraceServiceResponse.FromString(
        _grpc_call(service, request.SerializeToString())
    )
    assert response.partial_success.rejected_spans == 1
    good.send_and_check()
