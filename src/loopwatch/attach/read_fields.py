"""Reading an SDK span from the fields behind ReadableSpan's properties, where the installed SDK
keeps them as this module expects: checked once against real SDK spans, else the public API.

Each property of ReadableSpan is a Python call that only returns its field, ``events`` copies
its list through a Python iterator, BoundedAttributes' mapping costs a Python call a lookup (the
conventions make a dozen a span) and Status' properties are calls too: the fields are read
instead (what that saves: benchmarks/README.md). They are private, so their names may change in
any SDK release: before the field reader is used, FIELDS (what it reads) is looked up and its
reads compared with the public API's on real SDK spans; a mismatch means the public API
(read_api), logged once.

Every other read of opentelemetry's or prometheus_client's private state is here too, each with
a public way to fall back on and one warning when it is taken: the API's global tracer provider
(``no_tracer_provider``), the SDK's helpers that read ``OTEL_TRACES_EXPORTER``
(``traces_exporters``); prometheus_client's, in ``loopwatch.metrics.created_lines``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Mapping
from importlib import metadata
from operator import attrgetter
from typing import Any, Final

from opentelemetry import trace as trace_api
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

from loopwatch.attach.read_api import ERROR, NO_EXTRA, OK, PUBLIC, End, SpanReader, Start, name_text
from loopwatch.conventions.read import may_be_turn
from loopwatch.core.span_view import STATUS_ERROR, STATUS_OK, STATUS_UNSET, EventView, SpanView

log = logging.getLogger(__name__)

# What the readers below read of an SDK span in place of each ReadableSpan property, as
# attribute paths (the SDK keeps attributes in a BoundedAttributes around a dict, events in a
# BoundedList around a deque). The check reads each path on real SDK spans.
FIELDS: dict[str, str] = {
    "name": "_name",
    "context": "_context",
    "parent": "_parent",
    "start_time": "_start_time",
    "end_time": "_end_time",
    "attributes": "_attributes._dict",
    "events": "_events._dq",
    "status.status_code": "_status._status_code",
    "status.description": "_status._description",
    "resource": "_resource",
}
_PROPERTIES = tuple(dict.fromkeys(p.split(".")[0] for p in FIELDS))

_DIRECT: Final[dict[type, bool]] = {}  # span class -> whether its fields are read directly
_DIRECT_CLASSES: Final = 64  # a process has a handful of span classes; past this, no cache
# the classes the readers test for, as C statics when compiled (an import is a module global)
_DEQUE: Final = deque
_STATUS: Final = Status


# A span class that overrides one of ReadableSpan's properties may return other than its field,
# so it is read through its properties; the SDK's own classes leave them as they are. Each
# reader below tests this first (inline: a call costs as much as the reads).
def _direct(cls: type) -> bool:
    direct = _DIRECT.get(cls)
    if direct is None:
        direct = issubclass(cls, ReadableSpan) and all(
            getattr(cls, name, None) is vars(ReadableSpan)[name] for name in _PROPERTIES
        )
        if len(_DIRECT) < _DIRECT_CLASSES:
            _DIRECT[cls] = direct
    return direct


def _readable(attributes: Any) -> Mapping[str, Any]:
    inner = getattr(attributes, "_dict", None)
    if type(inner) is dict:
        return inner
    return dict(attributes) if attributes else {}  # a dict of the caller's, say


def direct(cls: type) -> bool:
    """Whether spans of ``cls`` are read from their fields (the SDK's own classes are)."""
    return bool(_DIRECT.get(cls) or _direct(cls))


class StartFields:
    """What on_start keeps of an SDK Span of a class ``direct`` approved: its context, parent,
    name and attributes, read from their fields. Kept in place of the span: the SDK hands
    on_end a new ReadableSpan, and a started Span held until the worker runs outlives its end."""

    __slots__ = ("attributes", "context", "name", "parent")

    def __init__(self, context: Any, parent: Any, name: Any, attributes: Any) -> None:
        self.context = context
        self.parent = parent
        self.name = name
        self.attributes = attributes


def kept_start(span: ReadableSpan) -> StartFields:
    """on_start's read of a started span, unchecked: for a class ``direct`` approved."""
    # typed str, but the SDK stores what the caller passed: read untyped (compiled, a typed read
    # is checked, and raises on 12345)
    name = getattr(span, "_name")  # noqa: B009
    return StartFields(span._context, span._parent, name, span._attributes)


def start_trace(start: StartFields) -> int:
    """The trace id of a kept start (a TypeError where it has no context)."""
    # SpanContext is a tuple (trace_id, span_id, is_remote, ...): its properties index it
    trace_id: int = start.context[0]
    return trace_id


def start_may_be_turn(start: StartFields) -> bool:
    """may_be_turn on a kept start; True for what only the worker reads (an odd name, or
    attributes that are not the SDK's mapping around a dict)."""
    name = start.name
    inner = getattr(start.attributes, "_dict", None)
    if type(name) is not str or type(inner) is not dict:
        return True
    return may_be_turn(name, inner)


def start_fields(start: StartFields) -> Start:
    """A kept start as the worker reads it."""
    return _fields(start.context, start.parent, start.name, start.attributes)


def _fields(ctx: Any, parent: Any, name: Any, attributes: Any) -> Start:
    """A span's ids, name and attributes from its fields (a start's or an end's)."""
    # SpanContext is a tuple (trace_id, span_id, is_remote, ...): its properties index it
    inner = getattr(attributes, "_dict", None)  # _readable, inline: once a span
    if type(inner) is not dict:
        inner = dict(attributes) if attributes else {}
    return (
        ctx[0] if ctx is not None else 0,
        ctx[1] if ctx is not None else 0,
        parent[1] if parent is not None and not parent[2] else None,
        name if type(name) is str else name_text(name),
        inner,
    )


# Two readers, not one: the SDK hands on_start a Span and on_end a ReadableSpan, and CPython
# specializes each attribute read to one class (a read that sees both takes the slow path).
def read_start(span: ReadableSpan) -> Start:
    if not (_DIRECT.get(type(span)) or _direct(type(span))):
        return PUBLIC.start(span)
    # typed str, but the SDK stores what the caller passed: read untyped (compiled, a typed read
    # is checked, and raises on 12345)
    return start_fields(kept_start(span))


def read_end(span: ReadableSpan) -> End:
    if not (_DIRECT.get(type(span)) or _direct(type(span))):
        return PUBLIC.end(span)
    trace_id, span_id, parent_id, name, attributes = end_fields(span)
    return trace_id, span_id, parent_id, name, attributes, span._resource


def end_fields(span: ReadableSpan) -> Start:
    """read_end but the resource, unchecked: for a span of a class ``direct`` approved."""
    # typed str, but the SDK stores what the caller passed: read untyped (compiled, a typed read
    # is checked, and raises on 12345)
    name = getattr(span, "_name")  # noqa: B009
    return _fields(span._context, span._parent, name, span._attributes)


def resource_field(span: ReadableSpan) -> Resource | None:
    """The span's resource, unchecked: for a span of a class ``direct`` approved."""
    return span._resource


def read_times(span: ReadableSpan) -> tuple[int, int]:
    if not (_DIRECT.get(type(span)) or _direct(type(span))):
        return PUBLIC.times(span)
    start = span._start_time or 0
    return start, span._end_time or start


def read_view(span: ReadableSpan, attributes: Mapping[str, Any], service: str) -> SpanView:
    if not (_DIRECT.get(type(span)) or _direct(type(span))):
        return PUBLIC.view(span, attributes, service)
    return view_fields(span, attributes, service)


def view_fields(span: ReadableSpan, attributes: Mapping[str, Any], service: str) -> SpanView:
    """read_view, unchecked: for a span of a class ``direct`` approved."""
    ctx, parent = span._context, span._parent
    # typed str, but the SDK stores what the caller passed: read untyped (compiled, a typed read
    # is checked, and raises on 12345)
    name = getattr(span, "_name")  # noqa: B009
    start = span._start_time or 0
    events = getattr(span._events, "_dq", None)
    if type(events) is not _DEQUE:  # not the SDK's BoundedList: a tuple, say
        events = span.events
    status = span._status
    if type(status) is _STATUS:
        code, description = status._status_code, status._description
    else:
        code, description = status.status_code, status.description
    return SpanView(
        ctx[0] if ctx is not None else 0,
        ctx[1] if ctx is not None else 0,
        parent[1] if parent is not None and not parent[2] else None,
        name if type(name) is str else name_text(name),
        start,
        span._end_time or start,
        attributes,
        tuple(EventView(name_text(e.name), _readable(e.attributes)) for e in events)
        if events
        else (),
        # identity tests: an Enum member hashes (for a dict lookup) in a Python call
        STATUS_ERROR if code is ERROR else STATUS_OK if code is OK else STATUS_UNSET,
        description or "",
        service,
        NO_EXTRA,
    )


FAST: Final = SpanReader(read_start, read_end, read_times, read_view)


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


def mismatch(reader: SpanReader = FAST) -> str | None:
    """What ``reader`` reads differently from the public API on real SDK spans, or a FIELDS
    path they lack; None when there is nothing."""
    try:
        spans = _probe()
        if not spans:
            return "no probe span recorded (OTEL_SDK_DISABLED?)"
        for span in spans:
            for path in FIELDS.values():
                attrgetter(path)(span)  # an AttributeError where the SDK has renamed one
            for what in SpanReader._fields:
                got, want = (_read(r, what, span) for r in (reader, PUBLIC))
                if got != want:
                    return f"{span.name!r}: {what} {got!r} != {want!r}"[:400]
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


def _read(reader: SpanReader, what: str, span: ReadableSpan) -> Any:
    if what == "view":
        return reader.view(span, reader.end(span)[4], "probe")
    return getattr(reader, what)(span)


_lock = threading.Lock()
_checked: SpanReader | None = None  # the reader the check chose: once a process


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # a fork in the middle of a check must not leave the child's held


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def span_reader() -> SpanReader:
    """The field reader when it passes its check against the installed SDK (run on the first
    call), else the public one."""
    global _checked
    with _lock:
        if _checked is None:
            try:
                problem = mismatch()
            except Exception as e:  # not raised into the host, whatever it is
                problem = f"{type(e).__name__}: {e}"
            if problem is not None:
                log.warning(
                    "cannot read opentelemetry-sdk %s spans from their fields (%s); "
                    "reading them through the public ReadableSpan API (same metrics, more CPU)",
                    _sdk_version(),
                    problem,
                )
            _checked = PUBLIC if problem is not None else FAST
        return _checked


def _sdk_version() -> str:
    return _version("opentelemetry-sdk")


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except Exception:
        return "(version unknown)"


# -- other libraries' private state, each read where it is as expected, else the public way ----

# While no global provider is set, get_tracer_provider() looks up OTEL_PYTHON_TRACER_PROVIDER
# on every call, and the miss costs more than the rest of an untraced call: the API's private
# global is read first (where a release lacks it, the lookup runs, with one warning).
_PROVIDER_GLOBAL = "_TRACER_PROVIDER"
_UNKNOWN: Final = object()
_PROVIDER_FROM_ENVIRONMENT = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
_provider_warned = False


def no_tracer_provider() -> bool:
    """True when no global tracer provider is set (read from the API's global); False when one
    is, or when that cannot be told without get_tracer_provider()."""
    global _provider_warned
    provider = getattr(trace_api, _PROVIDER_GLOBAL, _UNKNOWN)
    if provider is None:
        return not _PROVIDER_FROM_ENVIRONMENT
    if provider is _UNKNOWN and not _provider_warned:
        _provider_warned = True
        log.warning(
            "opentelemetry-api %s has no %s; an untraced @loopwatch.tool call looks "
            "the tracer provider up instead (same spans, more CPU)",
            _version("opentelemetry-api"),
            _PROVIDER_GLOBAL,
        )
    return False


def traces_exporters() -> dict[str, Any]:
    """The span exporter classes ``OTEL_TRACES_EXPORTER`` names, by name, or the error that kept
    each from loading: from the SDK's private helpers that ``opentelemetry-instrument``
    configures the SDK with (the same names mean the same exporters). Where a release lacks
    them, none, with one warning."""
    try:
        from opentelemetry.sdk._configuration import _get_exporter_names, _import_exporters
    except ImportError as e:
        log.warning(
            "opentelemetry-sdk %s lacks the helpers that read OTEL_TRACES_EXPORTER "
            "(%s); no exporter is set up from it",
            _sdk_version(),
            e,
        )
        return {}
    found: dict[str, Any] = {}
    for name in _get_exporter_names("traces"):
        try:
            found.update(_import_exporters([name], [], [])[0])
        except Exception as e:
            found[name] = e
    return found
