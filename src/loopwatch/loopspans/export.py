"""``serve`` and ``replay --export-otlp``: the loop spans of finished turns (and their log events,
when switched on) to an OTLP/gRPC endpoint with the real OTLP exporter, from a bounded queue on
one background thread. Spans not delivered (a full queue, a failed export) are counted."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Final

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    TraceFlags,
    set_span_in_context,
)

from loopwatch.core.config import Config
from loopwatch.core.loop_marks import LoopMark
from loopwatch.core.summary import TurnSummary
from loopwatch.loopspans.attributes import EVENT_NAME, SCOPE, attributes, links, parent, span_name
from loopwatch.metrics.catalog import LOOP_SPANS_EXPORT_FAILED, LOOP_SPANS_PER_TURN_BOUND
from loopwatch.version import VERSION

log = logging.getLogger(__name__)

MAX_QUEUE: Final = 4096  # loop spans waiting to be sent; more are dropped and counted
_BATCH: Final = 512
_RESOURCES: Final = 256  # services whose resource is kept; later ones share one
OTHER_SERVICE: Final = "loopwatch"  # the service of loop spans past that bound
_SCOPE: Final = InstrumentationScope(SCOPE, VERSION)
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)


def loop_span_id(trace_id: int, mark: LoopMark) -> int:
    """The same loop gets the same span id wherever it is found (serve, a replay of its trace):
    a hash of its trace, kind and first call."""
    first = mark.span_ids[0] if mark.span_ids else 0
    digest = hashlib.blake2b(f"{trace_id}:{mark.kind}:{first}".encode(), digest_size=8).digest()
    return int.from_bytes(digest) or 1


def loop_span(summary: TurnSummary, mark: LoopMark, resource: Resource) -> ReadableSpan:
    """One loop's finished span, as the SDK would have ended it."""
    trace_id = summary.trace_id
    context = SpanContext(trace_id, loop_span_id(trace_id, mark), False, _SAMPLED)
    return ReadableSpan(
        name=span_name(mark),
        context=context,
        parent=parent(trace_id, summary.anchor),
        resource=resource,
        attributes=attributes(mark),
        links=links(trace_id, mark),
        kind=SpanKind.INTERNAL,
        instrumentation_scope=_SCOPE,
        start_time=mark.start_ns,
        end_time=mark.end_ns,
    )


def otlp_span_exporter(endpoint: str) -> SpanExporter:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=endpoint, insecure=endpoint.startswith("http://"))


class LoopExport:
    """Called with each finished turn that loops (the assembler's ``loop_spans``); ``dropped(
    reason, n)`` counts loop spans not sent. ``events``: a ``loopwatch.loop`` log event per span
    too, through an SDK LoggerProvider with the OTLP log exporter."""

    def __init__(
        self,
        endpoint: str,
        dropped: Callable[[str, int], None],
        events: bool = False,
        exporter: SpanExporter | None = None,
        max_queue: int = MAX_QUEUE,
    ) -> None:
        self.endpoint = endpoint
        self._exporter = exporter if exporter is not None else otlp_span_exporter(endpoint)
        self._dropped = dropped
        self._max_queue = max_queue
        self._queue: deque[ReadableSpan] = deque()
        self._cond = threading.Condition()
        self._sending = 0  # spans taken off the queue and not yet exported
        self._stopping = False
        self._resources: dict[str, Resource] = {}
        self._events = _Events(endpoint) if events else None
        self._worker = threading.Thread(target=self._run, name="loopwatch-loop-export", daemon=True)
        self._worker.start()

    def _resource(self, service: str) -> Resource:
        """The agent's service as the loop span's resource: Jaeger lists it under that service."""
        resource = self._resources.get(service)
        if resource is None:
            if len(self._resources) >= _RESOURCES:  # past the bound: one shared resource
                service = OTHER_SERVICE
                resource = self._resources.get(service)
                if resource is not None:
                    return resource
            resource = self._resources[service] = Resource.create({"service.name": service})
        return resource

    def __call__(self, summary: TurnSummary) -> None:
        if summary.loops_unmarked:
            self._dropped(LOOP_SPANS_PER_TURN_BOUND, summary.loops_unmarked)
        if not summary.loop_marks or not summary.anchor:
            return
        resource = self._resource(summary.service)
        spans = [loop_span(summary, mark, resource) for mark in summary.loop_marks]
        with self._cond:
            room = self._max_queue - len(self._queue)
            if self._stopping:
                room = 0
            taken = spans[: max(0, room)]
            self._queue.extend(taken)
            self._cond.notify()
        if len(taken) < len(spans):
            self._dropped(LOOP_SPANS_EXPORT_FAILED, len(spans) - len(taken))
        if self._events is not None:
            for span in taken:
                self._events.emit(span)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._stopping)
                if not self._queue and self._stopping:
                    return
                batch = [self._queue.popleft() for _ in range(min(_BATCH, len(self._queue)))]
                self._sending = len(batch)
            self._send(batch)
            with self._cond:
                self._sending = 0
                self._cond.notify_all()

    def _send(self, batch: Sequence[ReadableSpan]) -> None:
        try:
            result = self._exporter.export(batch)
        except Exception:  # the endpoint's failure loses these spans, counted, nothing else
            log.debug("loop spans not exported", exc_info=True)
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self._dropped(LOOP_SPANS_EXPORT_FAILED, len(batch))

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every loop span queued so far has been exported (or counted as lost)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._sending, timeout)

    def shutdown(self, timeout: float = 10.0) -> bool:
        done = self.flush(timeout)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._worker.join(timeout)
        self._exporter.shutdown()
        if self._events is not None:
            self._events.shutdown()
        return done


def loop_export_for(
    config: Config, dropped: Callable[[str, int], None], endpoint: str | None = None
) -> tuple[Config, LoopExport | None]:
    """The config a pipeline runs with and the export of its loop spans: to ``endpoint`` (else
    ``config.export_otlp``); with none, no export and no loop marks built at all."""
    endpoint = endpoint or config.export_otlp
    if not endpoint or not config.loop_spans_per_turn:
        return replace(config, loop_spans_per_turn=0), None
    return config, LoopExport(endpoint, dropped, events=bool(config.loop_events))


class _Events:
    """The ``loopwatch.loop`` log events, through an SDK LoggerProvider and the OTLP log exporter
    (the OTel Logs API: experimental in the pinned SDK)."""

    def __init__(self, endpoint: str) -> None:
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

        insecure = endpoint.startswith("http://")
        self.provider: Any = LoggerProvider(resource=Resource.create({"service.name": "loopwatch"}))
        self.provider.add_log_record_processor(
            BatchLogRecordProcessor(OTLPLogExporter(endpoint=endpoint, insecure=insecure))
        )
        self.logger = self.provider.get_logger(SCOPE, VERSION)

    def emit(self, span: ReadableSpan) -> None:
        assert span.context is not None
        self.logger.emit(
            timestamp=span.end_time,
            context=set_span_in_context(NonRecordingSpan(span.context)),
            event_name=EVENT_NAME,
            attributes=dict(span.attributes or {}),
        )

    def shutdown(self) -> None:
        self.provider.shutdown()
