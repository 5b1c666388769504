"""Bad and hostile input on the logs path (``/v1/logs``, ``LogsService/Export``) gets the
protocol's error and loses nothing: after each bad request the service reads the next good one
and its earlier turns are intact. ``/v1/metrics`` says where traces and logs go."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator

import grpc
import pytest
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceResponse,
)
from prometheus_client import CollectorRegistry

from loopwatch.core.config import Config
from loopwatch.metrics.exporter import LoopwatchMetrics
from loopwatch.service.app import Service
from loopwatch.service.http_server import JSON, PROTOBUF, decode
from loopwatch.service.otlp_logs import parse_logs_json
from loopwatch.service.pipeline import Pipeline
from loopwatch.service.receive import Overloaded, accept_logs
from testkit import coding_agents
from testkit.serve_process import wait_for
from tests.support.service import post, running, value

LIMIT = 256 * 1024
CONFIG = Config(grace_seconds=0.0, idle_timeout_seconds=0.05, max_request_bytes=LIMIT)
EXPORT_LOGS = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
LOOP = (coding_agents.FIXTURES / coding_agents.name("claude-code", "loop", True)).read_text()


class Good:
    """Sends one Claude Code loop (a new prompt each time): it counts exactly once, and what
    was counted before is still there."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.sent = 0

    def turns(self) -> float:
        return value(self.service.registry, "loopwatch_turns_total")

    def send_and_check(self) -> None:
        assert self.service.bound is not None
        before = self.turns()
        assert before == self.sent
        loops = value(self.service.registry, "loopwatch_loops_total")
        body = LOOP.replace("c0ffee00", f"{self.sent:08x}").encode()
        status, raw, _ = post(self.service.bound.http, body, JSON, path="/v1/logs")
        assert status == 200, raw
        assert json.loads(raw) == {}
        self.sent += 1
        wait_for(lambda: self.turns() == self.sent, 20, "the good turn finalized")
        assert value(self.service.registry, "loopwatch_loops_total") == loops + 1


@pytest.fixture(scope="module")
def service() -> Iterator[Service]:
    with running(CONFIG) as s:
        yield s


@pytest.fixture(scope="module")
def good(service: Service) -> Good:
    g = Good(service)
    g.send_and_check()
    return g


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field, written out (protobuf will not build a message
    nested deeper than it parses)."""
    size, length = bytearray(), len(payload)
    while True:
        size.append((length & 0x7F) | (0x80 if length > 0x7F else 0))
        length >>= 7
        if not length:
            break
    return bytes([number << 3 | 2]) + bytes(size) + payload


def _nested_request(depth: int) -> bytes:
    """The Claude Code loop with a record whose attribute nests ``depth`` key-value lists."""
    value = _field(1, b"x")  # AnyValue.string_value
    for _ in range(depth):
        pair = _field(1, b"k") + _field(2, value)  # KeyValue
        value = _field(6, _field(1, pair))  # AnyValue.kvlist_value.values
    record = _field(6, _field(1, b"nested") + _field(2, value))  # LogRecord.attributes
    extra = _field(1, _field(2, _field(2, record)))  # resource_logs.scope_logs.log_records
    loop = parse_logs_json(LOOP.replace("c0ffee00", f"{depth:08x}").encode())
    return bytes(loop.SerializeToString()) + extra  # repeated fields concatenate


def _nested_json(depth: int) -> bytes:
    value: dict[str, object] = {"stringValue": "x"}
    for _ in range(depth):
        value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    record = {"attributes": [{"key": "nested", "value": value}]}
    document = {"resourceLogs": [{"scopeLogs": [{"logRecords": [record]}]}]}
    return json.dumps(document).encode()


def _bomb() -> bytes:
    return gzip.compress(b"\0" * (32 * 1024 * 1024), compresslevel=9)


RECORD = '{"resourceLogs":[{"scopeLogs":[{"logRecords":[%s]}]}]}'
HTTP_CASES = {
    "malformed protobuf": (b"\x0a\xff\xff\xff", PROTOBUF, None, 400),
    "malformed json": (b'{"resourceLogs": [', JSON, None, 400),
    "json not an object": (b"[1, 2]", JSON, None, 400),
    "json of the wrong shape": (b'{"resourceLogs": 3}', JSON, None, 400),
    "json time not a number": ((RECORD % '{"timeUnixNano": "soon"}').encode(), JSON, None, 400),
    "json trace id not hex": ((RECORD % '{"traceId": "zz"}').encode(), JSON, None, 400),
    "json span id too short": ((RECORD % '{"spanId": "0102"}').encode(), JSON, None, 400),
    "json nested too deep": (_nested_json(200), JSON, None, 400),
    "protobuf nested too deep": (
        _nested_request(200),
        PROTOBUF,
        None,
        400,
    ),
    # an attribute key (a string field) that is not UTF-8
    "string not UTF-8": (
        _field(1, _field(2, _field(2, _field(6, _field(1, b"\xff\xfe"))))),
        PROTOBUF,
        None,
        400,
    ),
    "over the size limit": (b"\0" * (LIMIT + 1), PROTOBUF, None, 413),
    "gzip bomb": (_bomb(), PROTOBUF, "gzip", 413),
    "corrupt gzip": (b"\x1f\x8bnot gzip at all", PROTOBUF, "gzip", 400),
    "unknown content type": (b"hello", "text/plain", None, 415),
}


@pytest.mark.parametrize("case", sorted(HTTP_CASES))
def test_http_bad_logs_request_then_good(service: Service, good: Good, case: str) -> None:
    assert service.bound is not None
    body, content_type, encoding, code = HTTP_CASES[case]
    headers = {"Content-Encoding": encoding} if encoding else None
    status, raw, _ = post(service.bound.http, body, content_type, path="/v1/logs", headers=headers)
    assert status == code, raw
    if code in (400, 413):
        if content_type == JSON:
            answer = json.loads(raw)
            assert answer["code"] in (code_pb2.INVALID_ARGUMENT, code_pb2.RESOURCE_EXHAUSTED)
            assert answer["message"]
        else:
            message = status_pb2.Status.FromString(raw).message
            assert message, case
    good.send_and_check()


def test_the_nesting_protobuf_takes_is_read(service: Service, good: Good) -> None:
    assert service.bound is not None
    # 100 messages deep at most: the request's 6 levels, then 3 a nested key-value list
    body = _nested_request(30)
    assert post(service.bound.http, body, path="/v1/logs")[0] == 200
    good.sent += 1  # the request is a loop of its own prompt
    wait_for(lambda: good.turns() == good.sent, 20)
    good.send_and_check()


def test_long_argument_values_are_read(service: Service, good: Good) -> None:
    assert service.bound is not None
    document = json.loads(LOOP.replace("c0ffee00", "1009ff00"))
    long = json.dumps({"command": "x" * (30 * 1024), "description": "d"})
    for record in document["resourceLogs"][0]["scopeLogs"][0]["logRecords"]:
        for attribute in record["attributes"]:
            if attribute["key"] == "tool_input":
                attribute["value"] = {"stringValue": long}
    body = json.dumps(document).encode()
    assert 6 * len(long) < len(body) <= LIMIT
    loops = value(service.registry, "loopwatch_loops_total")
    assert post(service.bound.http, body, JSON, path="/v1/logs")[0] == 200
    good.sent += 1
    wait_for(lambda: good.turns() == good.sent, 20)
    assert value(service.registry, "loopwatch_loops_total") == loops + 1
    good.send_and_check()


def _grpc_call(service: Service, body: bytes) -> bytes:
    assert service.bound is not None
    options = [("grpc.max_send_message_length", 64 * 1024 * 1024)]
    with grpc.insecure_channel(service.bound.grpc, options=options) as channel:
        return bytes(channel.unary_unary(EXPORT_LOGS)(body, timeout=10))


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"\x0a\xff\xff\xff", grpc.StatusCode.INVALID_ARGUMENT),
        (_nested_request(200), grpc.StatusCode.INVALID_ARGUMENT),
        (b"\0" * (LIMIT + 1), grpc.StatusCode.RESOURCE_EXHAUSTED),
    ],
    ids=["malformed", "nested too deep", "over the size limit"],
)
def test_grpc_bad_logs_request_then_good(
    service: Service, good: Good, body: bytes, code: grpc.StatusCode
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        _grpc_call(service, body)
    assert caught.value.code() == code
    good.send_and_check()


def test_grpc_logs_export_is_read(service: Service, good: Good) -> None:
    body = parse_logs_json(LOOP.replace("c0ffee00", "96c00000").encode()).SerializeToString()
    assert ExportLogsServiceResponse.FromString(_grpc_call(service, body)) == (
        ExportLogsServiceResponse()
    )
    good.sent += 1
    wait_for(lambda: good.turns() == good.sent, 20)
    good.send_and_check()


@pytest.mark.parametrize("content_type", ["", JSON, PROTOBUF])
def test_metrics_are_not_taken_and_the_answer_says_where_to_send(
    service: Service, good: Good, content_type: str
) -> None:
    assert service.bound is not None
    status, raw, _ = post(service.bound.http, b"", content_type, path="/v1/metrics")
    assert status == 404
    if content_type == JSON:
        message = json.loads(raw)["message"]
    elif content_type == PROTOBUF:
        message = status_pb2.Status.FromString(raw).message
    else:
        message = raw.decode()
    assert "does not take OTLP metrics" in message
    assert "/v1/traces" in message and "/v1/logs" in message
    good.send_and_check()


def test_a_full_queue_refuses_logs_with_a_retryable_answer() -> None:
    pipeline = Pipeline(Config(queue_spans=10), LoopwatchMetrics(CollectorRegistry()), worker=False)
    request = parse_logs_json(LOOP.encode())  # 13 records: more than the queue holds
    assert accept_logs(pipeline, request) == ExportLogsServiceResponse()  # an empty queue takes it
    with pytest.raises(Overloaded):
        accept_logs(pipeline, request)
    answer = decode(pipeline, PROTOBUF, "", request.SerializeToString(), LIMIT, "/v1/logs")
    assert (answer.code, answer.headers) == (503, {"Retry-After": "1"})
    assert status_pb2.Status.FromString(answer.body).code == code_pb2.UNAVAILABLE
