"""OTLP log requests (protobuf and OTLP/JSON) into the core's log views: the coding agents send
their tool calls as log events."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Final

import msgspec
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from loopwatch.core.log_view import LogView
from loopwatch.service.otlp import RequestError, any_value, attributes, service_name

EVENT_NAME: Final = "event.name"  # where the agents put the name (before LogRecord.event_name)
_HEX: Final = re.compile(r"[0-9a-fA-F]*")
_ID_SIZES: Final = (("traceId", 16), ("trace_id", 16), ("spanId", 8), ("span_id", 8))
# protobuf's JSON parser refuses a message nested deeper than this (json_format's default)
MAX_DEPTH: Final = 100


def parse_logs_protobuf(body: bytes) -> ExportLogsServiceRequest:
    """Parse a binary ``ExportLogsServiceRequest`` (protobuf bounds its nesting at 100)."""
    try:
        request = ExportLogsServiceRequest()
        request.ParseFromString(body)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise RequestError(f"not an OTLP protobuf logs request: {e}") from None
    return request


def _id(value: Any, where: str, size: int) -> str:
    """An id in protobuf's JSON mapping (base64): OTLP/JSON writes hex, protobuf base64."""
    if not isinstance(value, str):
        raise RequestError(f"{where}: an id must be a string, not {type(value).__name__}")
    if len(value) == 2 * size and _HEX.fullmatch(value):
        return base64.b64encode(bytes.fromhex(value)).decode()
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise RequestError(f"{where}: {value[:40]!r} is not an id of {size} bytes (hex or base64)")
    return base64.b64encode(raw).decode()


def _hex_ids(document: Any) -> None:
    """The records' ids in protobuf's JSON mapping (changed in place); a wrong shape is left to
    protobuf's parser, which names the field."""
    if not isinstance(document, dict):
        raise RequestError("an OTLP/JSON logs request must be a JSON object")
    for i, rl in enumerate(_list(document, "resourceLogs", "resource_logs")):
        for j, sl in enumerate(_list(rl, "scopeLogs", "scope_logs")):
            for k, record in enumerate(_list(sl, "logRecords", "log_records")):
                if not isinstance(record, dict):
                    continue
                for key, size in _ID_SIZES:
                    if record.get(key) not in (None, ""):
                        where = f"resourceLogs[{i}].scopeLogs[{j}].logRecords[{k}].{key}"
                        record[key] = _id(record[key], where, size)


def _list(message: Any, json_name: str, proto_name: str) -> list[Any]:
    if not isinstance(message, dict):
        return []
    found = message.get(json_name, message.get(proto_name))
    return found if isinstance(found, list) else []


def parse_logs_json(body: bytes) -> ExportLogsServiceRequest:
    """Parse an OTLP/JSON ``ExportLogsServiceRequest`` (hex ids) as protobuf's JSON parser
    does, unknown fields ignored; RequestError names what is wrong."""
    try:
        document = msgspec.json.decode(body)
    except msgspec.DecodeError as e:
        raise RequestError(f"not an OTLP/JSON logs request: {e}") from None
    except RecursionError:
        raise RequestError(
            f"not an OTLP/JSON logs request: nested deeper than {MAX_DEPTH}"
        ) from None
    return logs_request(document)


def logs_request(document: Any) -> ExportLogsServiceRequest:
    """An OTLP/JSON logs request already parsed as JSON (``replay``'s lines), as
    :func:`parse_logs_json` reads it."""
    _hex_ids(document)
    request = ExportLogsServiceRequest()
    try:
        json_format.ParseDict(
            document, request, ignore_unknown_fields=True, max_recursion_depth=MAX_DEPTH
        )
    except (json_format.ParseError, RecursionError, ValueError, TypeError) as e:
        raise RequestError(f"not an OTLP/JSON logs request: {e}") from None
    return request


def is_logs_document(document: Any) -> bool:
    """Whether a JSON document is an OTLP logs request (the Collector's file exporter writes
    one a line, as it writes traces)."""
    return isinstance(document, dict) and (
        "resourceLogs" in document or "resource_logs" in document
    )


def count_records(request: ExportLogsServiceRequest) -> int:
    return sum(len(sl.log_records) for rl in request.resource_logs for sl in rl.scope_logs)


def log_views(request: ExportLogsServiceRequest) -> list[LogView]:
    """Every record of the request as a LogView."""
    views: list[LogView] = []
    for rl in request.resource_logs:
        service = service_name(rl.resource)
        for sl in rl.scope_logs:
            scope = sl.scope.name
            for record in sl.log_records:
                attrs = attributes(record.attributes)
                # the attribute first: Codex's tracing bridge fills LogRecord.event_name with
                # its call site ("event otel/src/tool_result.rs:54"), the name in event.name
                name = attrs.get(EVENT_NAME) or record.event_name or ""
                trace_id = record.trace_id
                views.append(
                    LogView(
                        time_ns=record.time_unix_nano or record.observed_time_unix_nano,
                        event_name=name if isinstance(name, str) else str(name),
                        scope=scope,
                        attributes=attrs,
                        body=any_value(record.body) if record.HasField("body") else None,
                        service=service,
                        # a malformed id is no span context: the record is still read
                        trace_id=int.from_bytes(trace_id) if len(trace_id) == 16 else 0,
                        span_id=int.from_bytes(record.span_id) if len(record.span_id) == 8 else 0,
                    )
                )
    return views


__all__ = [
    "count_records",
    "is_logs_document",
    "log_views",
    "logs_request",
    "parse_logs_json",
    "parse_logs_protobuf",
]
