"""SDK spans read as the core reads them, for tests and benchmarks that feed the core directly."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan

from loopwatch.attach.read_api import service_of
from loopwatch.attach.read_fields import span_reader
from loopwatch.core.span_view import SpanView


def span_view(span: ReadableSpan, service: str | None = None) -> SpanView:
    """An SDK span as the core reads it (``service``: its resource's, when already known)."""
    read = span_reader()
    *_, attributes, resource = read.end(span)
    return read.view(span, attributes, service_of(resource) if service is None else service)
