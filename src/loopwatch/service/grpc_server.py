"""OTLP/gRPC receiver: ``opentelemetry.proto.collector.trace.v1.TraceService/Export`` and
``opentelemetry.proto.collector.logs.v1.LogsService/Export``."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from loopwatch.core.config import Config
from loopwatch.service.addresses import BindError, join_address, probe, split_address
from loopwatch.service.otlp import RequestError, parse_protobuf
from loopwatch.service.otlp_logs import parse_logs_protobuf
from loopwatch.service.pipeline import Pipeline
from loopwatch.service.receive import Overloaded, accept, accept_logs

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
LOGS_SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"
_WORKERS = 4
# RPCs in progress or waiting for a worker, each holding its message (<= max_request_bytes);
# past it grpc answers RESOURCE_EXHAUSTED, which OTLP exporters retry with backoff.
MAX_CONCURRENT_RPCS = 64
# Keepalive: ping an idle client every minute and drop it if it does not answer in 20 s;
# accept client pings down to every 10 s (more often is a strike; 2 strikes end the
# connection); close connections idle for 5 minutes (the client reconnects when it next sends).
KEEPALIVE_TIME_MS = 60_000
KEEPALIVE_TIMEOUT_MS = 20_000
MIN_CLIENT_PING_INTERVAL_MS = 10_000
MAX_PING_STRIKES = 2
MAX_CONNECTION_IDLE_MS = 300_000


def _export(accept_body: Callable[[bytes], Any]) -> Any:
    # Requests arrive as raw bytes (no request_deserializer): grpcio answers a body it cannot
    # deserialize with INTERNAL, OTLP wants INVALID_ARGUMENT, so we parse it ourselves.
    def export(body: bytes, context: grpc.ServicerContext) -> Any:
        try:
            return accept_body(body)
        except RequestError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except Overloaded as e:
            # UNAVAILABLE is the retryable code of the OTLP spec: the exporter sends again
            context.abort(grpc.StatusCode.UNAVAILABLE, str(e))

    return export


def options(config: Config) -> list[tuple[str, int]]:
    """The gRPC server's limits, every one set explicitly (docs/service.md, "Limits")."""
    return [
        # applies to the decompressed message too: grpc answers RESOURCE_EXHAUSTED
        ("grpc.max_receive_message_length", config.max_request_bytes),
        ("grpc.max_metadata_size", config.max_header_bytes),
        # the HTTP/2 handshake of a new connection: the header deadline of the HTTP side
        ("grpc.server_handshake_timeout_ms", int(config.header_timeout_seconds * 1000)),
        ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_recv_ping_interval_without_data_ms", MIN_CLIENT_PING_INTERVAL_MS),
        ("grpc.http2.max_ping_strikes", MAX_PING_STRIKES),
        ("grpc.max_connection_idle_ms", MAX_CONNECTION_IDLE_MS),
        # grpc sets SO_REUSEPORT by default: a second replica on the same port would
        # silently share it instead of failing to start
        ("grpc.so_reuseport", 0),
    ]


def start_grpc(address: str, pipeline: Pipeline, config: Config) -> tuple[Any, str]:
    """Serve OTLP/gRPC on ``address``; returns the server and the bound ``HOST:PORT``."""
    host, port = split_address(address, "gRPC address")
    probe(host, port, "OTLP/gRPC")
    server = grpc.server(
        ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="loopwatch-grpc"),
        options=options(config),
        maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
    )
    handler = grpc.unary_unary_rpc_method_handler(
        _export(lambda body: accept(pipeline, parse_protobuf(body))),
        request_deserializer=None,
        response_serializer=ExportTraceServiceResponse.SerializeToString,
    )
    logs = grpc.unary_unary_rpc_method_handler(
        _export(lambda body: accept_logs(pipeline, parse_logs_protobuf(body))),
        request_deserializer=None,
        response_serializer=ExportLogsServiceResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(SERVICE, {"Export": handler}),
            grpc.method_handlers_generic_handler(LOGS_SERVICE, {"Export": logs}),
        )
    )
    try:
        bound = server.add_insecure_port(join_address(host, port))
    except RuntimeError as e:
        raise BindError(f"cannot listen for OTLP/gRPC on {address}: {e}") from None
    if not bound:
        raise BindError(f"cannot listen for OTLP/gRPC on {address}")
    server.start()
    return server, join_address(host, bound)
