"""OTLP/HTTP receiver: ``POST /v1/traces`` and ``POST /v1/logs``, binary protobuf or JSON, gzip
or deflate, with a Content-Length or chunked."""

from __future__ import annotations

import json
import logging
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]
from tornado import httputil

from loopwatch.service.http_base import TEXT, Endpoint, Front, Limits, Request
from loopwatch.service.otlp import RequestError, parse_protobuf
from loopwatch.service.otlp_json import decode as decode_json
from loopwatch.service.otlp_logs import parse_logs_json, parse_logs_protobuf
from loopwatch.service.pipeline import Pipeline
from loopwatch.service.receive import (
    OVERLOADED_MESSAGE,
    Overloaded,
    accept,
    accept_logs,
    accept_views,
)

log = logging.getLogger(__name__)

PATH = "/v1/traces"
LOGS_PATH = "/v1/logs"
_PATHS = (PATH, LOGS_PATH)
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": 32 + zlib.MAX_WBITS}  # deflate: zlib or raw hdr
_IDENTITY = ("", "identity")
_USAGE = b"POST OTLP traces to /v1/traces and OTLP logs to /v1/logs\n"
# what an exporter sending metrics here logs: loopwatch reads traces and logs only
_NO_METRICS = (
    "loopwatch does not take OTLP metrics: send traces to /v1/traces and logs to /v1/logs "
    "(turn the metrics exporter off, or point it at your metrics backend)"
)
METRICS_PATH = "/v1/metrics"
# A body over max_request_bytes is read on (and dropped) up to this much more, so the client
# gets its 413 instead of a reset while it is still sending; a longer one gets tornado's 400.
DRAIN_BYTES = 64 * 1024 * 1024
# Bodies held at once, across connections, at least this much (else 4 x max_request_bytes).
MIN_BUFFER_BYTES = 64 * 1024 * 1024
# Decoding runs off the event loop, so reading other connections goes on meanwhile.
DECODE_THREADS = 2


class TooLarge(Exception):
    pass


@dataclass(frozen=True)
class Answer:
    code: int
    body: bytes
    content_type: str = TEXT
    headers: dict[str, str] = field(default_factory=dict)


def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """Undo Content-Encoding, never producing more than ``limit`` bytes (gzip bombs)."""
    if encoding in _IDENTITY:
        return body
    inflater = zlib.decompressobj(_WBITS[encoding])
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as e:
        raise RequestError(f"body is not valid {encoding}: {e}") from None
    if len(out) > limit:
        raise TooLarge(f"decompressed body exceeds {limit} bytes")
    if not inflater.eof:
        raise RequestError(f"body is not valid {encoding}: truncated")
    return out


def unsupported_media(content_type: str, encoding: str) -> str:
    """What is unsupported about a request's content type and encoding ("" when nothing is)."""
    if content_type not in (PROTOBUF, JSON):
        return f"unsupported content type {content_type!r}; send {PROTOBUF} or {JSON}"
    if encoding not in _IDENTITY and encoding not in _WBITS:
        return f"unsupported Content-Encoding {encoding!r}; send gzip, deflate or identity"
    return ""


def refusal(
    http: int, rpc: int, message: str, content_type: str, headers: dict[str, str] | None = None
) -> Answer:
    # OTLP/HTTP: an error body is a google.rpc.Status in the request's encoding
    if content_type == JSON:
        body = json.dumps({"code": rpc, "message": message}).encode()
    elif content_type == PROTOBUF:
        body = bytes(status_pb2.Status(code=rpc, message=message).SerializeToString())
    else:
        return Answer(http, (message + "\n").encode(), TEXT, headers or {})
    return Answer(http, body, content_type, headers or {})


def _encode(response: Any, content_type: str) -> bytes:
    if content_type == JSON:
        from google.protobuf import json_format

        return str(json_format.MessageToJson(response, indent=None)).encode()
    return bytes(response.SerializeToString())


def _accept_json(pipeline: Pipeline, raw: bytes) -> Any:
    if not pipeline.has_room(1):  # a full queue refuses before the decoding, as for protobuf
        raise Overloaded(OVERLOADED_MESSAGE)
    if not raw:  # no body is an empty export, as for protobuf
        return accept_views(pipeline, [], 0)
    read = decode_json(raw)  # or RequestError: what is wrong with it
    return accept_views(pipeline, read.spans, read.rejected)


def _logs(pipeline: Pipeline, content_type: str, raw: bytes) -> Answer:
    if not pipeline.has_room(1):  # a full queue refuses before the decoding
        raise Overloaded(OVERLOADED_MESSAGE)
    if content_type == JSON:
        request = parse_logs_json(raw) if raw else parse_logs_protobuf(b"")
        return Answer(200, _encode(accept_logs(pipeline, request), JSON), JSON)
    return Answer(200, _encode(accept_logs(pipeline, parse_logs_protobuf(raw)), PROTOBUF), PROTOBUF)


def decode(
    pipeline: Pipeline,
    content_type: str,
    encoding: str,
    body: bytes,
    limit: int,
    path: str = PATH,
) -> Answer:
    """Decode one request body and queue its spans (or log records: ``path``); the answer to
    send (never raises)."""
    try:
        raw = decompress(body, encoding, limit)
        if path == LOGS_PATH:
            return _logs(pipeline, content_type, raw)
        if content_type == JSON:
            return Answer(200, _encode(_accept_json(pipeline, raw), JSON), JSON)
        return Answer(200, _encode(accept(pipeline, parse_protobuf(raw)), PROTOBUF), PROTOBUF)
    except TooLarge as e:
        return refusal(413, code_pb2.RESOURCE_EXHAUSTED, str(e), content_type)
    except RequestError as e:
        return refusal(400, code_pb2.INVALID_ARGUMENT, str(e), content_type)
    except Overloaded as e:
        return refusal(503, code_pb2.UNAVAILABLE, str(e), content_type, {"Retry-After": "1"})
    except Exception:
        log.exception("OTLP/HTTP request not decoded")
        return refusal(500, code_pb2.INTERNAL, "internal error", content_type)


class OtlpFront(Front):
    """What every OTLP/HTTP request shares: the pipeline, the limits, the bytes held."""

    def __init__(self, pipeline: Pipeline, max_request_bytes: int, body_timeout: float) -> None:
        super().__init__(DECODE_THREADS, "loopwatch-http", body_timeout)
        self.pipeline = pipeline
        self.limit = max_request_bytes
        self.buffer_budget = max(4 * max_request_bytes, MIN_BUFFER_BYTES)
        self.buffered = 0  # body bytes held now, across connections

    def start_request(
        self, server_conn: object, request_conn: httputil.HTTPConnection
    ) -> httputil.HTTPMessageDelegate:
        return _Export(self, request_conn)


class _Export(Request[OtlpFront]):
    def __init__(self, front: OtlpFront, connection: httputil.HTTPConnection) -> None:
        super().__init__(front, connection)
        self.content_type = ""
        self.encoding = ""
        self.chunks: list[bytes] = []
        self.size = 0
        self.held = 0  # of front.buffered
        self.decoding = False
        self.refused: Answer | None = None  # decided before the body is in; read on, then sent

    def received(self) -> None:
        headers = self.headers
        self.content_type = headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        self.encoding = headers.get("Content-Encoding", "").strip().lower()
        if self.path == METRICS_PATH:
            self.refused = refusal(404, code_pb2.UNIMPLEMENTED, _NO_METRICS, self.content_type)
        elif self.path not in _PATHS:
            self.refused = Answer(404, _USAGE)
        elif self.method != "POST":
            self.refused = Answer(405, _USAGE, headers={"Allow": "POST"})
        else:
            unsupported = unsupported_media(self.content_type, self.encoding)
            if unsupported:
                self.refused = Answer(415, (unsupported + "\n").encode())

    def data_received(self, chunk: bytes) -> None:
        if self.refused is not None:
            return
        front = self.front
        self.size += len(chunk)
        if self.size > front.limit:
            message = f"request body exceeds {front.limit} bytes"
            self.refused = refusal(413, code_pb2.RESOURCE_EXHAUSTED, message, self.content_type)
            self._drop()
        elif front.buffered + len(chunk) > front.buffer_budget:
            message = f"loopwatch holds {front.buffer_budget} bytes of request bodies; retry later"
            self.refused = refusal(
                503, code_pb2.UNAVAILABLE, message, self.content_type, {"Retry-After": "1"}
            )
            self._drop()
        else:
            front.buffered += len(chunk)
            self.held += len(chunk)
            self.chunks.append(chunk)

    def complete(self) -> None:
        if self.refused is not None:
            self._drop()
            self._send(self.refused)
            return
        body = b"".join(self.chunks)
        self.chunks = []
        self.decoding = True
        self.front.spawn(self._decode(body))

    async def _decode(self, body: bytes) -> None:
        front = self.front
        try:
            answer = await front.workers.run(
                lambda: decode(
                    front.pipeline, self.content_type, self.encoding, body, front.limit, self.path
                )
            )
        except RuntimeError:  # the workers are closed: the service is stopping
            message = "loopwatch is stopping; retry later"
            answer = refusal(
                503, code_pb2.UNAVAILABLE, message, self.content_type, {"Retry-After": "1"}
            )
        finally:
            self.decoding = False
            self._drop()
        self._send(answer)

    def closed(self) -> None:
        if not self.decoding:
            self._drop()

    def _send(self, answer: Answer) -> None:
        self.respond(answer.code, answer.body, answer.content_type, answer.headers)

    def _drop(self) -> None:
        self.front.buffered -= self.held
        self.held = 0
        self.chunks = []


def start_otlp_http(
    address: str,
    pipeline: Pipeline,
    max_request_bytes: int,
    limits: Limits,
    refused: Callable[[], None],
) -> tuple[Endpoint, str]:
    """Serve OTLP/HTTP on ``address``; returns the endpoint and the bound address.
    ``refused`` is called for each connection refused at ``limits.max_connections``."""
    front = OtlpFront(pipeline, max_request_bytes, limits.body_timeout_seconds)
    endpoint = Endpoint("OTLP/HTTP", front, limits, max_request_bytes + DRAIN_BYTES, refused)
    return endpoint, endpoint.start(address)
