"""In process: each loop of a finalized turn as a span through the application's tracer provider,
and, when switched on, as a log event through its logger provider. Never raises into the host."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanKind

from loopwatch.core.summary import TurnSummary
from loopwatch.loopspans.attributes import (
    EVENT_NAME,
    SCOPE,
    attributes,
    links,
    parent,
    span_name,
)
from loopwatch.version import VERSION

log = logging.getLogger(__name__)


class LoopSpans:
    """Emits a turn's loop marks (core.loop_marks) as ``loopwatch.loop {tool}`` spans under
    the turn's root. Each span's id goes into ``own`` before it ends, so the processor that
    called this leaves its own spans unread; ``unmarked(n)`` counts loops past the bound."""

    def __init__(
        self,
        tracer_provider: Any,
        unmarked: Callable[[int], None],
        events: bool = False,
        logger_provider: Any = None,
    ) -> None:
        self._provider = tracer_provider  # None: the global one, looked up at the first loop
        self._tracer: trace.Tracer | None = None
        self.own: set[int] = set()  # the processor takes each id off as the queue brings it
        self._unmarked = unmarked
        self._events = events
        self._logger_provider = logger_provider
        self._logger: Any = None

    def _tracer_now(self) -> trace.Tracer:
        if self._tracer is None:
            provider = self._provider or trace.get_tracer_provider()
            self._tracer = provider.get_tracer(SCOPE, VERSION)
        return self._tracer

    def __call__(self, summary: TurnSummary) -> None:
        if summary.loops_unmarked:
            self._unmarked(summary.loops_unmarked)
        if not summary.loop_marks or not summary.anchor:
            return
        tracer = self._tracer_now()
        trace_id = summary.trace_id
        context = trace.set_span_in_context(NonRecordingSpan(parent(trace_id, summary.anchor)))
        logger = self._event_logger() if self._events else None
        for mark in summary.loop_marks:
            attrs = attributes(mark)
            span = tracer.start_span(
                span_name(mark),
                context=context,
                kind=SpanKind.INTERNAL,
                attributes=attrs,
                start_time=mark.start_ns,
            )
            if not span.is_recording():  # no SDK behind the provider (or not sampled): no more
                return
            # links added once recording: building them is most of a loop span's cost
            for link in links(trace_id, mark):
                span.add_link(link.context)
            self.own.add(span.get_span_context().span_id)
            span.end(end_time=mark.end_ns)
            if logger is not None:
                logger.emit(
                    timestamp=mark.end_ns,
                    context=trace.set_span_in_context(span),
                    event_name=EVENT_NAME,
                    attributes=attrs,
                )

    def _event_logger(self) -> Any:
        """The logger of the application's logger provider (the OTel Logs API, experimental in
        the pinned SDK: imported only when events are on)."""
        if self._logger is None:
            from opentelemetry import _logs

            provider = self._logger_provider or _logs.get_logger_provider()
            self._logger = provider.get_logger(SCOPE, VERSION)
        return self._logger
