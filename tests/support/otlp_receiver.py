"""A real OTLP/gRPC receiver on loopback (opentelemetry-proto's services on grpcio): keeps every
trace and log request it is sent, so a test reads what an OTLP endpoint got."""

from __future__ import annotations

import threading
from concurrent import futures
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from testkit.serve_process import wait_for


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self.receiver = receiver

    def Export(self, request: Any, context: Any) -> Any:  # (gRPC's name)
        with self.receiver.lock:
            self.receiver.trace_requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()


class _Logs(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self.receiver = receiver

    def Export(self, request: Any, context: Any) -> Any:  # (gRPC's name)
        with self.receiver.lock:
            self.receiver.log_requests.append(request)
        return logs_service_pb2.ExportLogsServiceResponse()


class OtlpReceiver:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.trace_requests: list[Any] = []
        self.log_requests: list[Any] = []
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Traces(self), self.server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(_Logs(self), self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"http://127.0.0.1:{port}"
        self.server.start()

    def spans(self) -> list[tuple[Any, Any, Any]]:
        """(resource, scope, span) of every span received."""
        with self.lock:
            requests = list(self.trace_requests)
        return [
            (rs.resource, ss.scope, span)
            for request in requests
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        ]

    def log_records(self) -> list[Any]:
        with self.lock:
            requests = list(self.log_requests)
        return [
            record
            for request in requests
            for rl in request.resource_logs
            for sl in rl.scope_logs
            for record in sl.log_records
        ]

    def wait_spans(self, count: int, timeout: float = 30.0) -> list[tuple[Any, Any, Any]]:
        wait_for(lambda: len(self.spans()) >= count, timeout, f"{count} spans received")
        return self.spans()

    def close(self) -> None:
        self.server.stop(0).wait(5)
