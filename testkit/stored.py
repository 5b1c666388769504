"""Spans as the stores keep them, as bytes: the Collector's file exporter (``format: json``, one
request a line in pdata's JSON; ``format: proto``, each request after its 4-byte big-endian
length), Jaeger 2's API v3 answers, and long stored periods made of timed copies of a stream."""

from __future__ import annotations

import gzip
import json
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from loopwatch.service.otlp import hex_ids
from testkit.streams import realistic_requests


def collector_json_line(request: Any) -> bytes:
    """One request as the file exporter's ``format: json`` writes it (pdata's JSON)."""
    document = json_format.MessageToDict(request, use_integers_for_enums=True)
    return json.dumps(hex_ids(document), separators=(",", ":")).encode() + b"\n"


def write_collector_json(path: Path, requests: Iterable[Any], compress: bool = False) -> Path:
    data = b"".join(collector_json_line(r) for r in requests)
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def jaeger_v3_answer(requests: Iterable[Any]) -> bytes:
    """Jaeger 2's API v3 answer to a trace search (``/api/v3/traces``, buffered): every trace's
    OTLP JSON (pdata's, as the file exporter's) in one ``TracesData`` under ``result``, one
    line with no newline after it."""
    resource_spans = [
        rs for r in requests for rs in json.loads(collector_json_line(r))["resourceSpans"]
    ]
    return json.dumps({"result": {"resourceSpans": resource_spans}}, separators=(",", ":")).encode()


def jaeger_v3_stream(requests: Iterable[Any], last: bytes = b'{"end":true}') -> bytes:
    """The same answer streamed (``Accept: application/x-ndjson``): a ``result`` line per
    message of the gRPC stream, then the end marker (or an ``error`` line)."""
    return jaeger_v3_lines((collector_json_line(r) for r in requests), last)


def jaeger_v3_lines(lines: Iterable[bytes], last: bytes = b'{"end":true}') -> bytes:
    """File exporter JSON lines as Jaeger API v3's streamed answer, each under ``result``."""
    return b"".join(b'{"result":' + line.rstrip(b"\n") + b"}\n" for line in lines) + last + b"\n"


# the values that differ between copies of a stored stream: trace ids and times
_COPIED = re.compile(rb'"(traceId|startTimeUnixNano|endTimeUnixNano|timeUnixNano)":"([0-9a-f]+)"')


def timed_copies(lines: Sequence[bytes], copies: int, every_ns: int) -> Iterator[bytes]:
    """``copies`` copies of file exporter JSON lines, as a long stored stream in time order:
    each copy's traces under new trace ids and its times ``every_ns`` after the copy before.
    Text is substituted, no span built, so ten million spans take minutes, not hours."""
    templates = []
    for line in lines:
        parts = _COPIED.split(line)  # text, (key, value, text)...
        holes = [
            (parts[i] == b"traceId", int(parts[i + 1], 16 if parts[i] == b"traceId" else 10))
            for i in range(1, len(parts), 3)
        ]
        texts = [parts[0], *(b'"' + parts[i] + b'":"' for i in range(1, len(parts), 3))]
        tails = [b'"' + parts[i + 2] for i in range(1, len(parts), 3)]
        templates.append((texts, holes, tails))
    for k in range(copies):
        salt, shift = k << 64, k * every_ns
        for texts, holes, tails in templates:
            out = [texts[0]]
            for text, (is_trace, value), tail in zip(texts[1:], holes, tails, strict=True):
                out.append(text)
                out.append(b"%032x" % (value ^ salt) if is_trace else b"%d" % (value + shift))
                out.append(tail)
            yield b"".join(out)


def write_collector_proto(path: Path, requests: Iterable[Any]) -> Path:
    """The file exporter's ``format: proto``: each message after its 4-byte big-endian length."""
    out = bytearray()
    for r in requests:
        body = r.SerializeToString()
        out += len(body).to_bytes(4, "big") + body
    path.write_bytes(bytes(out))
    return path


COPY_EVERY_NS = 3600 * 10**9  # span time between copies: more than one copy covers (55 min)


SHUFFLED_LINE_SPANS = 40  # stored_stream(shuffled=True): spans a line


def stored_stream(
    path: Path, spans: int, turns: int = 150, proto: bool = False, shuffled: bool = False
) -> tuple[int, int]:
    """About ``spans`` spans of the realistic stream, as copies in time order, written as the
    file exporter's JSON, gzipped (level 1), or its ``format: proto`` (length-prefixed, plain);
    (spans written, bytes before compression). ``shuffled``: requests of 40 spans, each copy's
    lines in a random order (a trace's spans lines apart)."""
    bodies = realistic_requests(turns, seed=1)
    if proto:
        return _stored_proto(path, spans, bodies)
    requests = [ExportTraceServiceRequest.FromString(body) for body in bodies]
    if shuffled:
        requests = _recut(requests, SHUFFLED_LINE_SPANS)
    lines = [collector_json_line(request) for request in requests]
    per_copy = sum(line.count(b'"traceId"') for line in lines)
    count = max(1, round(spans / per_copy))
    size = 0
    copy: list[bytes] = []
    with gzip.open(path, "wb", compresslevel=1) as out:
        for line in timed_copies(lines, count, COPY_EVERY_NS):
            size += len(line)
            copy.append(line)
            if len(copy) == len(lines):
                if shuffled:
                    random.Random(size).shuffle(copy)
                out.writelines(copy)
                copy.clear()
    return count * per_copy, size


def _recut(requests: list[Any], size: int) -> list[Any]:
    """The same spans in the same order, ``size`` a request (resource and scope kept)."""
    every = [
        (rs.resource, rs.schema_url, ss.scope, ss.schema_url, span)
        for r in requests
        for rs in r.resource_spans
        for ss in rs.scope_spans
        for span in ss.spans
    ]
    out = []
    for i in range(0, len(every), size):
        request = ExportTraceServiceRequest()
        for resource, resource_schema, scope, scope_schema, span in every[i : i + size]:
            rs = request.resource_spans[-1] if request.resource_spans else None
            if rs is None or rs.resource != resource:
                rs = request.resource_spans.add()
                rs.resource.CopyFrom(resource)
                rs.schema_url = resource_schema
            ss = rs.scope_spans[-1] if rs.scope_spans else None
            if ss is None or ss.scope != scope:
                ss = rs.scope_spans.add()
                ss.scope.CopyFrom(scope)
                ss.schema_url = scope_schema
            ss.spans.add().CopyFrom(span)
        out.append(request)
    return out


def _stored_proto(path: Path, spans: int, bodies: list[bytes]) -> tuple[int, int]:
    requests = [ExportTraceServiceRequest.FromString(body) for body in bodies]
    every = [
        s for r in requests for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans
    ]
    base = [(s.trace_id, s.start_time_unix_nano, s.end_time_unix_nano) for s in every]
    events = [[e.time_unix_nano for e in s.events] for s in every]
    count = max(1, round(spans / len(every)))
    size = 0
    with path.open("wb") as out:
        for k in range(count):
            shift = k * COPY_EVERY_NS
            for span, (trace_id, start, end), times in zip(every, base, events, strict=True):
                salted = int.from_bytes(trace_id, "big") ^ (k << 64)
                span.trace_id = salted.to_bytes(16, "big")
                span.start_time_unix_nano, span.end_time_unix_nano = start + shift, end + shift
                for event, at in zip(span.events, times, strict=True):
                    event.time_unix_nano = at + shift
            for request in requests:
                body = request.SerializeToString()
                out.write(len(body).to_bytes(4, "big") + body)
                size += 4 + len(body)
    return count * len(every), size
