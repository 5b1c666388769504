"""OTLP/JSON (an OTLP/HTTP JSON request, a line of the Collector's file exporter, Jaeger API v3's
answer with the same under ``result``), decoded by msgspec into typed structs that declare only
the fields loopwatch reads, each span turned into its span view as soon as it is decoded.

A request is one ``ExportTraceServiceRequest``; a file exporter's line is about a megabyte.
Python's ``json.loads`` builds a dict for every span, attribute and value in it, and freeing them
costs half as much again; msgspec builds these structs in C instead (no dicts, no keys, unknown
fields skipped without being built, no garbage collector tracking) in a fraction of the time.
The structs' ``__post_init__`` hooks, which msgspec calls as it finishes each struct, read each
span into its view and drop its attribute structs at once, while they are still in the CPU's
caches: a line is decoded in one pass, and a request's attribute structs never pile up.

The structs accept a strict subset of OTLP JSON: every field is of the type the file exporter
writes or absent, never ``null``, and a resource before its spans. Anything else (a ``null``, a
number where text belongs, a legacy ``instrumentationLibrarySpans``, a malformed id or value,
invalid JSON) is not read here: :func:`request_views` returns None and the caller reads it the
general way (the service: :func:`loopwatch.service.otlp.parse_json`; a replay:
:func:`loopwatch.history.formats.fast_views`, else protobuf's ``ParseDict``), which reads it or
says what is wrong. What this path does read gives the same span views as those (tests compare
them on every span)."""

from __future__ import annotations

import base64
import threading
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from loopwatch.conventions.read import UNREAD_PREFIXES
from loopwatch.core.spans import EventView, SpanView
from loopwatch.service.otlp import REMOTE_PARENT, valid_ids


# -- the structs: OTLP JSON's field names (lowerCamelCase), only what a replay reads ------------
class AnyValue(msgspec.Struct, gc=False, rename="camel"):
    string_value: str | UnsetType = UNSET
    int_value: int | str | UnsetType = UNSET  # int64: text in the OTLP file format
    double_value: float | str | UnsetType = UNSET  # "NaN", "Infinity", "-Infinity"
    bool_value: bool | UnsetType = UNSET
    bytes_value: str | UnsetType = UNSET  # base64
    array_value: ArrayValue | UnsetType = UNSET
    kvlist_value: KeyValueList | UnsetType = UNSET


class ArrayValue(msgspec.Struct, gc=False):
    values: list[AnyValue] | UnsetType = UNSET


class KeyValue(msgspec.Struct, gc=False):
    key: str
    value: AnyValue | UnsetType = UNSET


class KeyValueList(msgspec.Struct, gc=False):
    values: list[KeyValue] | UnsetType = UNSET


class Status(msgspec.Struct, gc=False):
    code: int | str | UnsetType = UNSET  # a number, or the enum's name
    message: str | UnsetType = UNSET


class Event(msgspec.Struct, gc=False):
    name: str | UnsetType = UNSET
    attributes: list[KeyValue] | UnsetType = UNSET


class Span(msgspec.Struct, gc=False, rename="camel"):
    trace_id: str | UnsetType = UNSET  # hex (the OTLP file format) or base64 (protobuf's)
    span_id: str | UnsetType = UNSET
    parent_span_id: str | UnsetType = UNSET
    flags: int | str | UnsetType = UNSET
    name: str | UnsetType = UNSET
    start_time_unix_nano: int | str | UnsetType = UNSET  # uint64: text, or a number
    end_time_unix_nano: int | str | UnsetType = UNSET
    attributes: list[KeyValue] | UnsetType = UNSET
    events: list[Event] | UnsetType = UNSET
    status: Status | UnsetType = UNSET

    def __post_init__(self) -> None:
        _span_decoded(self)


class ScopeSpans(msgspec.Struct, gc=False):
    spans: list[Span] | UnsetType = UNSET  # each one emptied once read (_span_decoded)


class Resource(msgspec.Struct, gc=False):
    attributes: list[KeyValue] | UnsetType = UNSET

    def __post_init__(self) -> None:
        if _reading.spans_here:
            raise Unusual  # after its spans: they were read under no service
        _reading.service = _service(self)


class ResourceSpans(msgspec.Struct, gc=False, rename="camel"):
    resource: Resource | UnsetType = UNSET
    scope_spans: list[ScopeSpans] | UnsetType = UNSET
    # read the general way (noted here, not decoded): the old name and protobuf's field name
    instrumentation_library_spans: msgspec.Raw | UnsetType = UNSET
    scope_spans_field: msgspec.Raw | UnsetType = msgspec.field(default=UNSET, name="scope_spans")

    def __post_init__(self) -> None:
        if self.scope_spans is UNSET and not (
            self.instrumentation_library_spans is UNSET and self.scope_spans_field is UNSET
        ):
            raise Unusual  # the old name, or protobuf's field name: the general path
        _reading.service = "unknown"  # for the next one's spans, when it has no resource
        _reading.spans_here = 0


class Request(msgspec.Struct, gc=False, rename="camel"):
    resource_spans: list[ResourceSpans]


class ApiV3Answer(msgspec.Struct, gc=False):
    """Jaeger API v3's answer (Jaeger 2's ``/api/v3/traces``), a line of its stream too."""

    result: Request


_DECODER = msgspec.json.Decoder(Request)
_API_V3_DECODER = msgspec.json.Decoder(ApiV3Answer)


# -- span views ------------------------------------------------------------------------------------
class Unusual(Exception):
    """Not what this path reads: the caller reads it the general way."""


class _Reading:
    """What the hooks have read of the line being decoded."""

    def __init__(self) -> None:
        self.views: list[SpanView] = []
        self.service = "unknown"  # the current resource's
        self.spans_here = 0  # spans read under the current resource
        self.rejected = 0  # spans with invalid ids
        self.base64_ids = False


# The hooks take no arguments but the struct: the line's state is module-wide, one line at a
# time (_LOCK).
_reading = _Reading()
_LOCK = threading.Lock()


_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_DOUBLE_WORDS = frozenset({"NaN", "Infinity", "-Infinity"})
_NO_EVENTS: tuple[EventView, ...] = ()
_REMOTE_BOTH = 0x300  # the span flags' "is remote" known and set
# span attribute keys met before -> whether the conventions never read them (UNREAD_PREFIXES):
# a lookup costs less than testing the prefixes; bounded
_UNREAD: dict[str, bool] = {}
_UNREAD_ENTRIES = 4096


def _learn(key: str) -> bool:
    if len(_UNREAD) >= _UNREAD_ENTRIES:
        _UNREAD.clear()
    unread = _UNREAD[key] = key.startswith(UNREAD_PREFIXES)
    return unread


def _id(value: str) -> bytes:
    """An id as its length says: hex (32 or 16 digits) or base64 (24 or 12 characters)."""
    size = len(value)
    if size == 32 or size == 16:
        return bytes.fromhex(value)  # ValueError: Unusual
    if size == 24 or size == 12:
        return base64.b64decode(value, validate=True)
    if size == 0:
        return b""
    raise Unusual


def _int(value: int | str) -> int:
    if type(value) is int:
        return value
    if type(value) is str and value.isdigit():
        return int(value)
    raise Unusual


def any_value(value: AnyValue) -> Any:
    """An ``AnyValue`` as the Python value the SDK would have held (text wins, as in
    :func:`~loopwatch.history.formats.fast_views`; otherwise exactly one kind, or Unusual)."""
    text = value.string_value
    if text is not UNSET:
        return text
    found: Any = None
    kinds = 0
    if value.int_value is not UNSET:
        kinds += 1
        found = _signed(value.int_value)
    if value.double_value is not UNSET:
        kinds += 1
        found = _double(value.double_value)
    if value.bool_value is not UNSET:
        kinds += 1
        found = value.bool_value
    if value.array_value is not UNSET:
        kinds += 1
        values = value.array_value.values
        found = () if values is UNSET else tuple(any_value(v) for v in values)
    if value.kvlist_value is not UNSET:
        kinds += 1
        pairs = value.kvlist_value.values
        found = {} if pairs is UNSET else attributes(pairs)
    if value.bytes_value is not UNSET:
        kinds += 1
        found = base64.b64decode(value.bytes_value, validate=True)
    if kinds > 1:
        raise Unusual
    return found


def _signed(value: int | str) -> int:
    return int(value) if isinstance(value, str) else value  # ValueError: Unusual


def _double(value: float | str) -> float:
    if type(value) is str and value not in _DOUBLE_WORDS:
        raise Unusual
    return float(value)


def attributes(pairs: list[KeyValue]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in pairs:
        value = kv.value
        if value is UNSET:
            out[kv.key] = None
            continue
        text = value.string_value
        out[kv.key] = text if text is not UNSET else any_value(value)
    return out


def span_attributes(pairs: list[KeyValue]) -> dict[str, Any]:
    """A span's attributes, without those the conventions never read."""
    out: dict[str, Any] = {}
    unread = _UNREAD
    unset = UNSET  # a local: read twice an attribute
    for kv in pairs:
        key = kv.key
        skip = unread.get(key)
        if skip or (skip is None and _learn(key)):
            continue
        value = kv.value
        if value is unset:
            out[key] = None
            continue
        text = value.string_value
        out[key] = text if text is not unset else any_value(value)
    return out


def _status(status: Status) -> tuple[int, str]:
    code = status.code
    number = _STATUS_NAMES.get(code, -1) if isinstance(code, str) else 0 if code is UNSET else code
    if not 0 <= number <= 2:
        raise Unusual
    message = status.message
    return number, "" if message is UNSET else message


def _service(resource: Resource | UnsetType) -> str:
    if resource is UNSET or resource.attributes is UNSET:
        return "unknown"
    for kv in resource.attributes:
        if kv.key == "service.name":
            value = None if kv.value is UNSET else any_value(kv.value)
            return str(value) if value not in (None, "") else "unknown"
    return "unknown"


def _events(events: list[Event]) -> tuple[EventView, ...]:
    return tuple(
        EventView(
            "" if e.name is UNSET else e.name,
            {} if e.attributes is UNSET else attributes(e.attributes),
        )
        for e in events
    )


def _span_decoded(span: Span) -> None:
    """A span msgspec has just built: its view onto the line's, its attributes and events
    dropped (Unusual, or ValueError, for what the general path reads)."""
    reading = _reading
    reading.spans_here += 1
    unset = UNSET  # a local: read a dozen times
    raw_trace, raw_span, raw_parent = span.trace_id, span.span_id, span.parent_span_id
    if raw_trace is unset or raw_span is unset:
        raise Unusual  # trace_id, span_id: the general path
    # the file exporter's hex inline, anything else through _id
    trace_id = bytes.fromhex(raw_trace) if len(raw_trace) == 32 else _id(raw_trace)
    span_id = bytes.fromhex(raw_span) if len(raw_span) == 16 else _id(raw_span)
    if raw_parent is unset:
        parent = b""
    else:
        parent = bytes.fromhex(raw_parent) if len(raw_parent) == 16 else _id(raw_parent)
    if len(raw_trace) == 24:
        reading.base64_ids = True
    if not valid_ids(trace_id, span_id, parent):
        reading.rejected += 1
        return
    has_parent = bool(parent) and any(parent)
    start = 0 if span.start_time_unix_nano is unset else _int(span.start_time_unix_nano)
    end = 0 if span.end_time_unix_nano is unset else _int(span.end_time_unix_nano)
    flags = 0 if span.flags is unset else _int(span.flags)
    code, message = (0, "") if span.status is unset else _status(span.status)
    events = span.events
    reading.views.append(
        SpanView(
            int.from_bytes(trace_id),
            int.from_bytes(span_id),
            int.from_bytes(parent) if has_parent else None,
            "" if span.name is unset else span.name,
            start,
            end or start,
            {} if span.attributes is unset else span_attributes(span.attributes),
            _events(events) if events else _NO_EVENTS,
            code,
            message,
            reading.service,
            {REMOTE_PARENT: True} if has_parent and flags & _REMOTE_BOTH == _REMOTE_BOTH else {},
        )
    )
    span.attributes = span.events = unset  # freed now, while in the CPU's caches


def request_views(line: bytes, api_v3: bool = False) -> tuple[list[SpanView], int, bool] | None:
    """The span views of one line of the file exporter's JSON (with ``api_v3``, of a Jaeger API
    v3 answer): (views, spans rejected for invalid ids, whether base64 ids were met); None when
    the line is not one this path reads."""
    global _reading
    decoder = _API_V3_DECODER if api_v3 else _DECODER
    with _LOCK:
        reading = _reading = _Reading()
        try:
            decoder.decode(line)
        except (msgspec.DecodeError, Unusual, ValueError, RecursionError):
            return None  # the general path reads it or names what is wrong
        finally:
            _reading = _Reading()  # the views are the caller's alone
    return reading.views, reading.rejected, reading.base64_ids
