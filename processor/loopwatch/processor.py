"""The in-process entry: an OpenTelemetry SDK SpanProcessor.

``on_end`` runs on the agent's thread, so it only appends the span to a bounded queue; a
daemon worker reads, assembles and exports. Nothing here raises into the host.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import deque
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry

from loopwatch.conventions.read import is_turn_span, may_be_genai, read_span
from loopwatch.core.assembler import DROP_ERROR, DROP_QUEUE_FULL, TurnAssembler
from loopwatch.core.config import Config, load_config
from loopwatch.core.records import KIND_OTHER, Link, kind_of
from loopwatch.core.sink import Sink
from loopwatch.core.spans import STATUS_ERROR, STATUS_OK, STATUS_UNSET, EventView, SpanView
from loopwatch.metrics import metrics_for

log = logging.getLogger("loopwatch")

_STATUS = {StatusCode.UNSET: STATUS_UNSET, StatusCode.OK: STATUS_OK, StatusCode.ERROR: STATUS_ERROR}
_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})
_POLL_SECONDS = 0.1
_SWEEP_SECONDS = 1.0


def _service(resource: Resource | None) -> str:
    service = resource.attributes.get("service.name") if resource is not None else None
    return str(service) if service else "unknown"


def _readable(attributes: Any) -> Mapping[str, Any]:
    """Attributes for reading only. The SDK keeps them in a plain dict inside a
    BoundedAttributes, whose mapping interface costs a few Python calls per lookup (and the
    conventions make a dozen): that dict is read directly where it is there, else a copy."""
    inner = getattr(attributes, "_dict", None)
    if type(inner) is dict:
        return inner
    return dict(attributes) if attributes else {}


def _attributes(span: ReadableSpan) -> Mapping[str, Any]:
    return _readable(getattr(span, "_attributes", None) or span.attributes)


def _events(span: ReadableSpan) -> Any:
    """A finished span's events. ``ReadableSpan.events`` copies them into a tuple through the
    SDK's BoundedList iterator (a Python call per event, and per span when there are none):
    its deque is read directly where it is there."""
    inner = getattr(getattr(span, "_events", None), "_dq", None)
    return inner if type(inner) is deque else span.events


def span_view(span: ReadableSpan, service: str | None = None) -> SpanView:
    """An SDK span as the core reads it (``service``: its resource's, when already known)."""
    ctx = span.context
    parent = span.parent
    start = span.start_time or 0
    events = _events(span)
    status = span.status
    return SpanView(
        ctx.trace_id if ctx is not None else 0,
        ctx.span_id if ctx is not None else 0,
        parent.span_id if parent is not None and not parent.is_remote else None,
        span.name or "",
        start,
        span.end_time or start,
        _attributes(span),
        tuple(EventView(e.name, _readable(e.attributes)) for e in events) if events else (),
        _STATUS.get(status.status_code, STATUS_UNSET),
        status.description or "",
        service if service is not None else _service(span.resource),
        _NO_EXTRA,  # not a new dict per span (the default)
    )


class LoopwatchSpanProcessor(SpanProcessor):
    """Rebuilds attempt keys from finished spans and exports loopwatch's metrics.

    ``config`` defaults to :func:`loopwatch.load_config`; metrics go to ``registry`` (default:
    prometheus_client's global registry) unless ``sink`` is given.
    """

    def __init__(
        self,
        config: Config | None = None,
        registry: CollectorRegistry | None = None,
        sink: Sink | None = None,
    ) -> None:
        self.config = config if config is not None else load_config()
        self.sink: Sink = (
            sink
            if sink is not None
            else metrics_for(
                registry,
                label_limit=self.config.label_limit,
                series_limit=self.config.series_limit,
                label_chars=self.config.label_chars,
            )
        )
        self._assembler = TurnAssembler(self.config, self.sink)
        self._queue: deque[ReadableSpan | tuple[Span]] = deque()
        self._limit = self.config.queue_spans
        # one entry per span dropped at the queue bound; deque.append is atomic under the GIL
        self._queue_drops: deque[None] = deque()
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._stopped = False
        self._lock = threading.Lock()  # held while the worker processes a batch
        self._worker: threading.Thread | None = None
        self._resource: tuple[Resource | None, str] | None = None  # the last one and its service
        self._start_worker()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._after_fork)

    # -- the agent's thread -------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        # Starts only tell an outermost agent span when it ends (the worker decides). On a full
        # queue one is skipped uncounted: its span is counted at its end, read or dropped, and
        # its turn is still finalized when the root ends.
        if len(self._queue) < self._limit:
            self._queue.append((span,))  # a 1-tuple marks a start: cheaper than any object

    def on_end(self, span: ReadableSpan) -> None:
        if len(self._queue) < self._limit:
            self._queue.append(span)
        else:
            self._queue_drops.append(None)

    def shutdown(self) -> None:
        if self._stopped:
            return
        self.force_flush()
        self._stopped = True
        self._wake.set()
        if self._worker is not None:
            self._worker.join(timeout=5)
        with self._lock:
            self._safe(self._assembler.finalize_all)
            self._safe(self.sink.open_turns, self._assembler.open_turns)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait until every span handed to ``on_end`` so far has been processed."""
        if self._stopped:
            return True
        self._idle.clear()
        self._wake.set()
        return self._idle.wait(timeout_millis / 1000)

    # -- the worker -----------------------------------------------------------------------------
    def _start_worker(self) -> None:
        self._worker = threading.Thread(target=self._run, name="loopwatch", daemon=True)
        self._worker.start()

    def _after_fork(self) -> None:
        self._queue.clear()
        self._lock = threading.Lock()
        self._start_worker()

    def _safe(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception:
            log.debug("loopwatch: internal error", exc_info=True)
            with contextlib.suppress(Exception):
                self.sink.dropped(DROP_ERROR)

    def _run(self) -> None:
        next_sweep = 0.0
        clock = self._assembler.clock
        while not self._stopped:
            self._wake.wait(_POLL_SECONDS)
            self._wake.clear()
            with self._lock:
                self._drain()
                if clock() >= next_sweep:
                    self._safe(self._assembler.sweep)
                    self._safe(self.sink.open_turns, self._assembler.open_turns)
                    next_sweep = clock() + _SWEEP_SECONDS
            if not self._queue:
                self._idle.set()
        with self._lock:
            self._drain()
        self._idle.set()

    def _service_of(self, resource: Resource | None) -> str:
        # spans of one provider share one resource: its service is looked up once
        last = self._resource
        if last is None or last[0] is not resource:
            last = self._resource = (resource, _service(resource))
        return last[1]

    def _started(self, span: Span) -> None:
        ctx, parent = span.context, span.parent
        trace_id = ctx.trace_id
        parent_id = parent.span_id if parent is not None and not parent.is_remote else None
        assembler = self._assembler
        # inside a turn already: whether it is a turn span itself does not matter (most starts)
        if not assembler.inside_turn(trace_id, parent_id):
            name, attributes = span.name or "", _attributes(span)
            if not (may_be_genai(name, attributes, ended=False) and is_turn_span(name, attributes)):
                return
        assembler.span_started(trace_id, ctx.span_id, parent_id, True)

    def _ended(self, span: ReadableSpan) -> str:
        """Read one finished span into the assembler; returns its kind."""
        ctx = span.context
        if may_be_genai(span.name or "", _attributes(span)):
            view = span_view(span, self._service_of(span.resource))
            record = read_span(view, self.config)
            self._assembler.add(view.trace_id, view.service, record)
            return kind_of(record)
        # a plain span: only its place in the trace matters, no view is built
        parent = span.parent
        start = span.start_time or 0
        self._assembler.add(
            ctx.trace_id,
            self._service_of(span.resource),
            Link(
                ctx.span_id,
                parent.span_id if parent is not None and not parent.is_remote else None,
                start,
                span.end_time or start,
            ),
        )
        return KIND_OTHER

    def _drain(self) -> None:
        queue = self._queue
        if not queue and not self._queue_drops:
            return
        counts: dict[str, int] = {}
        while queue:
            item = queue.popleft()
            try:
                if type(item) is tuple:
                    self._started(item[0])
                else:
                    kind = self._ended(item)  # type: ignore[arg-type]
                    counts[kind] = counts.get(kind, 0) + 1
            except Exception:
                log.debug("loopwatch: span not read", exc_info=True)
                self._safe(self.sink.dropped, DROP_ERROR)
        # counted once per batch: a metric update per span costs as much as reading it
        for kind, count in counts.items():
            self._safe(self.sink.span, kind, count)
        self._safe(self.sink.open_turns, self._assembler.open_turns)
        drops = self._queue_drops
        while drops:
            drops.popleft()
            self._safe(self.sink.dropped, DROP_QUEUE_FULL)
