"""``loopwatch demo --otlp-endpoint``: the real OTLP exporter, watched, so a demo whose spans
do not arrive says so and exits non-zero instead of looking like it worked."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


class WatchedExporter(SpanExporter):
    """Forwards to ``inner``; after the first failed export it fails the rest at once (one
    timeout, not one per batch) and counts the spans not delivered."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.failed = threading.Event()
        self.spans_lost = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = SpanExportResult.FAILURE
        if not self.failed.is_set():
            result = self.inner.export(spans)
        if result is not SpanExportResult.SUCCESS:
            self.failed.set()
            self.spans_lost += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def otlp_exporter(endpoint: str) -> WatchedExporter:
    """Raises ImportError when the serve extra (the OTLP exporter) is not installed."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    return WatchedExporter(OTLPSpanExporter(endpoint=endpoint, insecure=True))
