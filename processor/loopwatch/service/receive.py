"""What both receivers do with a parsed request: queue its spans, report rejected ones."""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from loopwatch.core.assembler import DROP_INVALID_ID
from loopwatch.service.otlp import count_spans, span_views
from loopwatch.service.pipeline import Pipeline

REJECTED_MESSAGE = "spans rejected: trace_id must be 16 bytes and span_id 8 bytes, not all zero"
OVERLOADED_MESSAGE = "loopwatch is overloaded (span queue full); retry later"


class Overloaded(Exception):
    """The span queue is full or the service is stopping: a retryable refusal."""


def accept(pipeline: Pipeline, request: Any) -> Any:
    """Queue the request's spans; the ``ExportTraceServiceResponse`` to send back."""
    valid, rejected = count_spans(request)
    # converted on the pipeline's worker: the exporter waits only for the parse and this count
    if not pipeline.submit_lazy(valid, lambda: span_views(request).spans):
        raise Overloaded(OVERLOADED_MESSAGE)
    response = ExportTraceServiceResponse()
    if rejected:
        # OTLP partial success: the request succeeded, these spans were not used
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = f"{rejected} {REJECTED_MESSAGE}"
        for _ in range(rejected):
            pipeline.sink.dropped(DROP_INVALID_ID)
    return response
