"""OTLP/HTTP receiver: ``POST /v1/traces``, binary protobuf or JSON, gzip or deflate."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any

from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]

from loopwatch.service.http_base import Handler, Server, start_http
from loopwatch.service.otlp import RequestError, parse_json, parse_protobuf
from loopwatch.service.pipeline import Pipeline
from loopwatch.service.receive import Overloaded, accept

PATH = "/v1/traces"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": 32 + zlib.MAX_WBITS}  # deflate: zlib or raw hdr
_IDENTITY = ("", "identity")
_DRAIN_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class HttpState:
    pipeline: Pipeline
    max_request_bytes: int


class TooLarge(Exception):
    pass


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


def _status(code: int, message: str, content_type: str) -> bytes:
    # OTLP/HTTP: an error body is a google.rpc.Status in the request's encoding
    if content_type == JSON:
        return json.dumps({"code": code, "message": message}).encode()
    return bytes(status_pb2.Status(code=code, message=message).SerializeToString())


class OtlpHandler(Handler):
    def _fail(
        self,
        http: int,
        rpc: int,
        message: str,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        if content_type not in (PROTOBUF, JSON):
            self.reply(http, (message + "\n").encode(), headers=headers)
        else:
            self.reply(http, _status(rpc, message, content_type), content_type, headers)

    def _discard(self, length: int) -> None:
        while length > 0:
            chunk = self.rfile.read(min(length, 1 << 16))
            if not chunk:
                return
            length -= len(chunk)

    def do_GET(self) -> None:
        self.close_connection = True
        self.reply(405 if self.path == PATH else 404, b"POST OTLP traces to /v1/traces\n")

    def do_POST(self) -> None:
        state: HttpState = self.server.state
        if self.path.split("?", 1)[0] != PATH:
            self.close_connection = True
            self.reply(404, b"POST OTLP traces to /v1/traces\n")
            return
        content_type = self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        encoding = self.headers.get("Content-Encoding", "").strip().lower()
        length_header = self.headers.get("Content-Length")
        if content_type not in (PROTOBUF, JSON) or (
            encoding not in _IDENTITY and encoding not in _WBITS
        ):
            self.close_connection = True  # the body is not read
            what = f"content type {content_type!r}" if encoding in _IDENTITY else encoding
            self.reply(415, f"unsupported {what}; send {PROTOBUF} or {JSON}\n".encode())
            return
        if length_header is None or not length_header.strip().isdigit():
            self.close_connection = True
            self._fail(411, code_pb2.INVALID_ARGUMENT, "Content-Length required", content_type)
            return
        length = int(length_header)
        limit = state.max_request_bytes
        if length > limit:
            # refuse without parsing it; the body is read and discarded (up to a bound) so the
            # client gets the 413 instead of a connection reset while it is still sending
            self._discard(min(length, _DRAIN_BYTES))
            self.close_connection = True
            self._fail(
                413,
                code_pb2.RESOURCE_EXHAUSTED,
                f"request body exceeds {limit} bytes",
                content_type,
            )
            return
        body = self.rfile.read(length)
        self._handle(state, content_type, encoding, body, limit)

    def _handle(
        self, state: HttpState, content_type: str, encoding: str, body: bytes, limit: int
    ) -> None:
        try:
            raw = decompress(body, encoding, limit)
            request = parse_json(raw) if content_type == JSON else parse_protobuf(raw)
            response = accept(state.pipeline, request)
        except TooLarge as e:
            self._fail(413, code_pb2.RESOURCE_EXHAUSTED, str(e), content_type)
            return
        except RequestError as e:
            self._fail(400, code_pb2.INVALID_ARGUMENT, str(e), content_type)
            return
        except Overloaded as e:
            self._fail(
                503, code_pb2.UNAVAILABLE, str(e), content_type, headers={"Retry-After": "1"}
            )
            return
        self.reply(200, _encode(response, content_type), content_type)


def _encode(response: Any, content_type: str) -> bytes:
    if content_type == JSON:
        from google.protobuf import json_format

        return str(json_format.MessageToJson(response, indent=None)).encode()
    return bytes(response.SerializeToString())


def start_otlp_http(
    address: str, pipeline: Pipeline, max_request_bytes: int
) -> tuple[Server, str, Any]:
    """Serve OTLP/HTTP on ``address``; returns the server, the bound address, its thread."""
    return start_http(address, OtlpHandler, HttpState(pipeline, max_request_bytes), "OTLP/HTTP")
