"""Reading an SDK span from the fields behind ReadableSpan's properties, where the installed SDK
keeps them as this module expects: checked once against real SDK spans, else the public API.

Each property of ReadableSpan is a Python call that only returns its field, ``events`` copies
its list through a Python iterator, BoundedAttributes' mapping costs a Python call a lookup (the
conventions make a dozen a span) and Status' properties are calls too: the fields are read
instead (what that saves: benchmarks/README.md). They are private, so their names may change in
any SDK release: the reader built from FIELDS is compared with the public API on real SDK spans
before it is used, and a mismatch means the public API (sdk_spans), logged once.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Mapping
from importlib import metadata
from operator import attrgetter
from typing import Any

from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    Status,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)

from loopwatch.core.spans import STATUS_ERROR, STATUS_OK, STATUS_UNSET, EventView, SpanView
from loopwatch.sdk_spans import ERROR, NO_EXTRA, OK, PUBLIC, SpanReader

log = logging.getLogger("loopwatch")

# ReadableSpan's properties the processor reads, each with the field it returns; then the fields
# inside three of them: BoundedAttributes' dict, BoundedList's deque (events), Status' two.
FIELDS: dict[str, str] = {
    "name": "_name",
    "context": "_context",
    "parent": "_parent",
    "start_time": "_start_time",
    "end_time": "_end_time",
    "status": "_status",
    "attributes": "_attributes",
    "events": "_events",
    "resource": "_resource",
    "attributes.dict": "_dict",
    "events.deque": "_dq",
    "status.status_code": "_status_code",
    "status.description": "_description",
}
_PROPERTIES = tuple(p for p in FIELDS if "." not in p)

_DIRECT: dict[type, bool] = {}  # span class -> whether its fields are read directly
_DIRECT_CLASSES = 64  # a process has a handful of span classes; past this, no cache


# A span class that overrides one of ReadableSpan's properties may return other than its field,
# so it is read through its properties; the SDK's own classes leave them as they are.
def _direct(cls: type) -> bool:
    direct = _DIRECT.get(cls)
    if direct is None:
        direct = issubclass(cls, ReadableSpan) and all(
            getattr(cls, name, None) is vars(ReadableSpan)[name] for name in _PROPERTIES
        )
        if len(_DIRECT) < _DIRECT_CLASSES:
            _DIRECT[cls] = direct
    return direct


def fields_reader(fields: Mapping[str, str] = FIELDS) -> SpanReader:
    """A reader of the fields ``fields`` names. It gives what the public API gives only where the
    SDK keeps its spans so: see :func:`mismatch`."""
    readable = _readable(fields["attributes.dict"])
    return SpanReader(
        _ids(fields),
        _head(fields, readable),
        _resource(fields),
        _times(fields),
        _view(fields, readable),
    )


# Each reader below reads a span of another class (_direct) through the public API.
def _readable(inner_dict: str) -> Callable[[Any], Mapping[str, Any]]:
    def readable(attributes: Any) -> Mapping[str, Any]:
        inner = getattr(attributes, inner_dict, None)
        if type(inner) is dict:
            return inner
        return dict(attributes) if attributes else {}

    return readable


def _ids(fields: Mapping[str, str]) -> Callable[[ReadableSpan], tuple[int, int, int | None]]:
    direct, context_parent = _DIRECT.get, attrgetter(fields["context"], fields["parent"])

    def ids(span: ReadableSpan) -> tuple[int, int, int | None]:
        if not (direct(type(span)) or _direct(type(span))):
            return PUBLIC.ids(span)
        # SpanContext is a tuple (trace_id, span_id, is_remote, ...): its properties index it
        ctx, parent = context_parent(span)
        parent_id = parent[1] if parent is not None and not parent[2] else None
        return (ctx[0], ctx[1], parent_id) if ctx is not None else (0, 0, parent_id)

    return ids


def _head(
    fields: Mapping[str, str], readable: Callable[[Any], Mapping[str, Any]]
) -> Callable[[ReadableSpan], tuple[str, Mapping[str, Any]]]:
    direct, name_attributes = _DIRECT.get, attrgetter(fields["name"], fields["attributes"])

    def head(span: ReadableSpan) -> tuple[str, Mapping[str, Any]]:
        if not (direct(type(span)) or _direct(type(span))):
            return PUBLIC.head(span)
        name, attributes = name_attributes(span)
        return name or "", readable(attributes)

    return head


def _resource(fields: Mapping[str, str]) -> Callable[[ReadableSpan], Resource | None]:
    direct, field = _DIRECT.get, attrgetter(fields["resource"])

    def resource(span: ReadableSpan) -> Resource | None:
        if not (direct(type(span)) or _direct(type(span))):
            return PUBLIC.resource(span)
        found: Resource | None = field(span)
        return found

    return resource


def _times(fields: Mapping[str, str]) -> Callable[[ReadableSpan], tuple[int, int]]:
    direct, start_end = _DIRECT.get, attrgetter(fields["start_time"], fields["end_time"])

    def times(span: ReadableSpan) -> tuple[int, int]:
        if not (direct(type(span)) or _direct(type(span))):
            return PUBLIC.times(span)
        start, end = start_end(span)
        return start or 0, end or start or 0

    return times


def _view(
    fields: Mapping[str, str], readable: Callable[[Any], Mapping[str, Any]]
) -> Callable[[ReadableSpan, Mapping[str, Any], str], SpanView]:
    direct = _DIRECT.get
    span_fields = attrgetter(
        *(fields[p] for p in ("context", "parent", "name", "start_time", "end_time")),
        *(fields["events"], fields["status"]),
    )
    status_fields = attrgetter(fields["status.status_code"], fields["status.description"])
    inner_deque = fields["events.deque"]

    def view(span: ReadableSpan, attributes: Mapping[str, Any], service: str) -> SpanView:
        if not (direct(type(span)) or _direct(type(span))):
            return PUBLIC.view(span, attributes, service)
        ctx, parent, name, start, end, events, status = span_fields(span)
        start = start or 0
        events = getattr(events, inner_deque, None)
        if type(events) is not deque:  # not the SDK's BoundedList: a tuple, say
            events = span.events
        if type(status) is Status:
            code, description = status_fields(status)
        else:
            code, description = status.status_code, status.description
        return SpanView(
            ctx[0] if ctx is not None else 0,
            ctx[1] if ctx is not None else 0,
            parent[1] if parent is not None and not parent[2] else None,
            name or "",
            start,
            end or start,
            attributes,
            tuple(EventView(e.name, readable(e.attributes)) for e in events) if events else (),
            # identity tests: an Enum member hashes (for a dict lookup) in a Python call
            STATUS_ERROR if code is ERROR else STATUS_OK if code is OK else STATUS_UNSET,
            description or "",
            service,
            NO_EXTRA,
        )

    return view


class _Recorder(SpanProcessor):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        self.spans.append(span)

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


# Real SDK spans holding all the processor reads, as on_start and on_end get them (none where
# OTEL_SDK_DISABLED turns the SDK off).
def _probe() -> list[ReadableSpan]:
    recorder = _Recorder()
    limits = SpanLimits(
        max_span_attributes=16,
        max_events=4,
        max_links=4,
        max_event_attributes=4,
        max_link_attributes=4,
    )
    settings: dict[str, Any] = {
        "sampler": ALWAYS_ON,
        "resource": Resource({"service.name": "loopwatch-probe"}),  # no resource detectors
        "shutdown_on_exit": False,
        "span_limits": limits,
    }
    try:  # the SDK's own span metrics, where it has them, must not count the probe
        provider = TracerProvider(**settings, meter_provider=NoOpMeterProvider())
    except TypeError:
        provider = TracerProvider(**settings)
    provider.add_span_processor(recorder)
    tracer = provider.get_tracer("loopwatch-probe")
    remote = SpanContext(0x51, 0x52, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    other = SpanContext(0x61, 0x62, is_remote=False)
    root = tracer.start_span(
        "invoke_agent probe",
        context=set_span_in_context(NonRecordingSpan(remote)),
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "probe"},
        start_time=1_000,
    )
    tool = tracer.start_span(
        "execute_tool probe",
        context=set_span_in_context(root),
        attributes={"gen_ai.tool.name": "probe", "n": 3, "x": 0.5, "ok": False, "ids": ("a",)},
        links=[Link(other, {"link.kind": "follows"})],
        start_time=2_000,
    )
    tool.add_event("exception", {"exception.type": "TimeoutError", "exception.message": "t"})
    tool.add_event("retry")
    tool.set_status(Status(StatusCode.ERROR, "timed out"))
    tool.end(end_time=3_000)
    root.set_status(Status(StatusCode.OK))
    root.end(end_time=4_000)
    return recorder.spans


def mismatch(reader: SpanReader) -> str | None:
    """What ``reader`` reads differently from the public API on real SDK spans; None when it
    reads every span the same."""
    try:
        spans = _probe()
        if not spans:
            return "no probe span recorded (OTEL_SDK_DISABLED?)"
        for span in spans:
            for what in SpanReader._fields:
                got, want = (_read(r, what, span) for r in (reader, PUBLIC))
                if got != want:
                    return f"{span.name!r}: {what} {got!r} != {want!r}"[:400]
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


def _read(reader: SpanReader, what: str, span: ReadableSpan) -> Any:
    if what == "view":
        return reader.view(span, reader.head(span)[1], "probe")
    return getattr(reader, what)(span)


_lock = threading.Lock()
_checked: SpanReader | None = None  # the reader the check chose: once a process
_public_only = False


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # a fork in the middle of a check must not leave the child's held


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def span_reader() -> SpanReader:
    """The field reader when it passes its check against the installed SDK (run on the first
    call), else the public one."""
    global _checked
    if _public_only:
        return PUBLIC
    with _lock:
        if _checked is None:
            try:
                problem = mismatch(fields_reader())
            except Exception as e:  # a FIELDS entry missing, say: not raised into the host
                problem = f"{type(e).__name__}: {e}"
            if problem is not None:
                log.warning(
                    "loopwatch: cannot read opentelemetry-sdk %s spans from their fields (%s); "
                    "reading them through the public ReadableSpan API (same metrics, more CPU)",
                    _sdk_version(),
                    problem,
                )
            _checked = PUBLIC if problem is not None else fields_reader()
        return _checked


def use_public_api(on: bool) -> None:
    """For tests and benchmarks: processors created from now on read spans through the public
    API (``on``), or as the check decides."""
    global _public_only
    _public_only = on


def _sdk_version() -> str:
    try:
        return metadata.version("opentelemetry-sdk")
    except Exception:
        return "(version unknown)"
