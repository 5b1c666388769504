"""Reading an SDK span through ReadableSpan's public API: what the processor reads of each span,
and the reference that the field reader (read_fields) must match."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import StatusCode

from loopwatch.core.span_view import STATUS_ERROR, STATUS_OK, STATUS_UNSET, EventView, SpanView

NO_EXTRA: Final[Mapping[str, Any]] = MappingProxyType({})  # not a new dict per span (the default)
ERROR: Final = StatusCode.ERROR
OK: Final = StatusCode.OK
Start = tuple[int, int, int | None, str, Mapping[str, Any]]
End = tuple[int, int, int | None, str, Mapping[str, Any], Resource | None]


class SpanReader(NamedTuple):
    """The reads the processor makes of a span, each one call.

    ``start``: what the worker reads of a started span, (trace id, span id, parent id, name,
    attributes): the parent's None for a local root, both ids 0 without a context, the
    attributes for lookups only (another thread may still be setting them). ``end``: the same
    of a finished span, the attributes a dict, and its resource. ``times``: (start, end), the
    end the start where unset. ``view``: the whole span, its ``end`` attributes and service
    given.
    """

    start: Callable[[ReadableSpan], Start]
    end: Callable[[ReadableSpan], End]
    times: Callable[[ReadableSpan], tuple[int, int]]
    view: Callable[[ReadableSpan, Mapping[str, Any], str], SpanView]


def service_of(resource: Resource | None) -> str:
    service = resource.attributes.get("service.name") if resource is not None else None
    return str(service) if service else "unknown"


def name_text(name: object) -> str:
    """A span or event name as text: the SDK stores whatever the caller passed."""
    return name if type(name) is str else "" if name is None else str(name)[:256]


def _name(span: ReadableSpan | Event) -> str:
    # typed str, but the SDK stores what the caller passed: read untyped (compiled, a typed read
    # is checked, and raises on 12345)
    return name_text(getattr(span, "name"))  # noqa: B009


def _ids(span: ReadableSpan) -> tuple[int, int, int | None]:
    ctx, parent = span.context, span.parent
    parent_id = parent.span_id if parent is not None and not parent.is_remote else None
    if ctx is None:
        return 0, 0, parent_id
    return ctx.trace_id, ctx.span_id, parent_id


def _start(span: ReadableSpan) -> Start:
    trace_id, span_id, parent_id = _ids(span)
    attributes = span.attributes  # a few lookups, most starts none: not worth a copy
    return (
        trace_id,
        span_id,
        parent_id,
        _name(span),
        {} if attributes is None else attributes,
    )


def _end(span: ReadableSpan) -> End:
    trace_id, span_id, parent_id = _ids(span)
    attributes = span.attributes
    # a copy: the conventions make a dozen lookups, each a Python call on the SDK's mapping
    readable = dict(attributes) if attributes else {}
    return trace_id, span_id, parent_id, _name(span), readable, span.resource


def _times(span: ReadableSpan) -> tuple[int, int]:
    start = span.start_time or 0
    return start, span.end_time or start


def _view(span: ReadableSpan, attributes: Mapping[str, Any], service: str) -> SpanView:
    trace_id, span_id, parent_id = _ids(span)
    start, end = _times(span)
    events = span.events
    status = span.status
    code = status.status_code
    return SpanView(
        trace_id,
        span_id,
        parent_id,
        _name(span),
        start,
        end,
        attributes,
        tuple(EventView(_name(e), dict(e.attributes) if e.attributes else {}) for e in events)
        if events
        else (),
        STATUS_ERROR if code is ERROR else STATUS_OK if code is OK else STATUS_UNSET,
        status.description or "",
        service,
        NO_EXTRA,
    )


PUBLIC: Final = SpanReader(_start, _end, _times, _view)
