"""OTLP/gRPC receiver: ``opentelemetry.proto.collector.trace.v1.TraceService/Export``."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from loopwatch.service.addresses import BindError, join_address, probe, split_address
from loopwatch.service.otlp import RequestError, parse_protobuf
from loopwatch.service.pipeline import Pipeline
from loopwatch.service.receive import Overloaded, accept

SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
_WORKERS = 4


def _export(pipeline: Pipeline) -> Any:
    # Requests arrive as raw bytes (no request_deserializer): grpcio answers a body it cannot
    # deserialize with INTERNAL, OTLP wants INVALID_ARGUMENT, so we parse it ourselves.
    def export(body: bytes, context: grpc.ServicerContext) -> Any:
        try:
            request = parse_protobuf(body)
        except RequestError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        try:
            return accept(pipeline, request)
        except Overloaded as e:
            # UNAVAILABLE is the retryable code of the OTLP spec: the exporter sends again
            context.abort(grpc.StatusCode.UNAVAILABLE, str(e))

    return export


def start_grpc(address: str, pipeline: Pipeline, max_request_bytes: int) -> tuple[Any, str]:
    """Serve OTLP/gRPC on ``address``; returns the server and the bound ``HOST:PORT``."""
    host, port = split_address(address, "gRPC address")
    probe(host, port, "OTLP/gRPC")
    server = grpc.server(
        ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="loopwatch-grpc"),
        options=[
            # applies to the decompressed message too: grpc answers RESOURCE_EXHAUSTED
            ("grpc.max_receive_message_length", max_request_bytes),
            # grpc sets SO_REUSEPORT by default: a second replica on the same port would
            # silently share it instead of failing to start
            ("grpc.so_reuseport", 0),
        ],
    )
    handler = grpc.unary_unary_rpc_method_handler(
        _export(pipeline),
        request_deserializer=None,
        response_serializer=ExportTraceServiceResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, {"Export": handler}),)
    )
    try:
        bound = server.add_insecure_port(join_address(host, port))
    except RuntimeError as e:
        raise BindError(f"cannot listen for OTLP/gRPC on {address}: {e}") from None
    if not bound:
        raise BindError(f"cannot listen for OTLP/gRPC on {address}")
    server.start()
    return server, join_address(host, bound)
