"""What both receivers do with a parsed request: queue its spans (or log records), report
rejected ones."""

from __future__ import annotations

from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from loopwatch.core.assembler import DROP_INVALID_ID
from loopwatch.core.span_view import SpanView
from loopwatch.service.otlp import span_views
from loopwatch.service.otlp_logs import count_records, log_views
from loopwatch.service.pipeline import LogBatch, Pipeline

REJECTED_MESSAGE = "spans rejected: trace_id must be 16 bytes and span_id 8 bytes, not all zero"
OVERLOADED_MESSAGE = "loopwatch is overloaded (span queue full); retry later"


class Overloaded(Exception):
    """The span queue is full or the service is stopping: a retryable refusal."""


def accept(pipeline: Pipeline, request: Any) -> Any:
    """Queue the request's spans; the ``ExportTraceServiceResponse`` to send back. Raises
    RequestError for a malformed attribute, Overloaded when the queue is full."""
    # converted here, not on the worker: a malformed attribute must fail the request; a full
    # queue refuses before that work
    if not pipeline.has_room(
        sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    ):
        raise Overloaded(OVERLOADED_MESSAGE)
    decoded = span_views(request)
    return accept_views(pipeline, decoded.spans, decoded.rejected)


def accept_views(pipeline: Pipeline, spans: list[SpanView], rejected: int) -> Any:
    """Queue a request's span views (``rejected``: its spans with invalid ids); the
    ``ExportTraceServiceResponse`` to send back. Raises Overloaded when the queue is full."""
    if not pipeline.submit(spans):
        raise Overloaded(OVERLOADED_MESSAGE)
    response = ExportTraceServiceResponse()
    if rejected:
        # OTLP partial success: the request succeeded, these spans were not used
        response.partial_success.rejected_spans = rejected
        response.partial_success.error_message = f"{rejected} {REJECTED_MESSAGE}"
        pipeline.sink.dropped(DROP_INVALID_ID, rejected)
    return response


def accept_logs(pipeline: Pipeline, request: ExportLogsServiceRequest) -> Any:
    """Queue the request's log records; the ``ExportLogsServiceResponse`` to send back. Raises
    Overloaded when the queue is full (a log record takes a span's place in it)."""
    if not pipeline.has_room(count_records(request)):
        raise Overloaded(OVERLOADED_MESSAGE)
    if not pipeline.submit(LogBatch(log_views(request))):
        raise Overloaded(OVERLOADED_MESSAGE)
    return ExportLogsServiceResponse()
