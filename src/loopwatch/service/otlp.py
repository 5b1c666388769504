"""OTLP trace requests into the core's span views: protobuf here, OTLP/JSON in
:mod:`loopwatch.service.otlp_json`."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from loopwatch.compiled import running_compiled
from loopwatch.conventions.read import UNREAD_PREFIXES
from loopwatch.core.records import OWN_SCOPE
from loopwatch.core.span_view import EventView, SpanView
from loopwatch.service.otlp_lean import LeanRequest, LeanSpan, RawSpanRequest
from loopwatch.service.otlp_wire import int_value, span_fields, text_value

# SpanView.extra key: the parent is in another process (OTLP span flags say so).
REMOTE_PARENT: Final = "remote_parent"
_REMOTE_KNOWN: Final = 0x100  # SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
_REMOTE: Final = 0x200  # SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
_REMOTE_BOTH: Final = _REMOTE_KNOWN | _REMOTE
_REMOTE_EXTRA: Final = {REMOTE_PARENT: True}


class RequestError(ValueError):
    """The request body is not an OTLP trace request (HTTP 400, gRPC INVALID_ARGUMENT)."""


@dataclass(frozen=True)
class Decoded:
    """The spans of one request, and how many of them were rejected (invalid ids)."""

    spans: list[SpanView]
    rejected: int = 0


# Compiled, each span is read from its bytes (otlp_wire.py) faster than protobuf's messages
# give its fields; as pure Python, slower.
_RAW_SPANS: Final = running_compiled()


def parse_protobuf(body: bytes) -> Any:
    """Parse a binary ``ExportTraceServiceRequest`` (span attributes left serialized, and in the
    compiled build whole spans: see :func:`span_views`)."""
    request = RawSpanRequest() if _RAW_SPANS else LeanRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise RequestError(f"not an OTLP protobuf trace request: {e}") from None
    return request


def _array(value: Any) -> tuple[Any, ...]:
    # the SDK stores sequence attributes as tuples; the core sees the same here
    return tuple(any_value(v) for v in value.array_value.values)


def _kvlist(value: Any) -> dict[str, Any]:
    return attributes(value.kvlist_value.values)


_ANY: Final[dict[str | None, Callable[[Any], Any]]] = {
    "string_value": lambda v: v.string_value,
    "bool_value": lambda v: v.bool_value,
    "int_value": lambda v: v.int_value,
    "double_value": lambda v: v.double_value,
    "bytes_value": lambda v: bytes(v.bytes_value),
    "array_value": _array,
    "kvlist_value": _kvlist,
    # an index into a profile's string table: nothing to read in a trace
    "string_value_strindex": lambda v: None,
    None: lambda v: None,
}


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` as the Python value the SDK would have held."""
    return _ANY[value.WhichOneof("value")](value)


def attributes(pairs: Iterable[Any], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """OTLP key-values as a dict, without the keys that start with one of ``skip``."""
    out: dict[str, Any] = {}
    for kv in pairs:
        key = kv.key
        if skip and key.startswith(skip):
            continue
        v = kv.value
        kind = v.WhichOneof("value")
        # the common case inline: most attributes are strings
        out[key] = v.string_value if kind == "string_value" else _ANY[kind](v)
    return out


# Serialized span attributes met before, each with what it became (_SKIPPED: not kept): spans
# repeat most of theirs (model, provider, kind, code location, HTTP method), and a lookup costs a
# fraction of decoding one. Bounded in entries, and in the bytes of each (a longer one would
# cost more to hash than it saves).
SEEN_ENTRIES: Final = 8192
SEEN_BYTES: Final = 128
# Not kept: the mark is the value, compared by identity (no attribute value is it). Not the
# tuple's identity: compiled, a tuple is rebuilt each time it is passed around.
_NOT_KEPT: Final = object()
_SKIPPED: Final[tuple[str, Any]] = ("", _NOT_KEPT)
# Final: compiled, a C global, not a lookup in the module's dict (never rebound, only emptied)
_SEEN: Final[dict[bytes, tuple[str, Any]]] = {}
_SHAREABLE: Final = (str, int, float, bool, bytes, type(None))  # immutable: one value, many spans


class _Key:
    """A serialized key (UTF-8) met before: its name, None for a key the conventions never read,
    whose values are skipped undecoded; for such a key, how many more of its values may enter
    _SEEN (one whose values keep changing, an id or a message, stops filling it)."""

    __slots__ = ("left", "name")

    def __init__(self, name: str | None, left: int) -> None:
        self.name = name
        self.left = left


_UNREAD_BYTES: Final = tuple(p.encode() for p in UNREAD_PREFIXES)
_KEYS_ENTRIES: Final = 4096  # bounded in entries
_VALUES_PER_UNREAD_KEY: Final = 16
_KEYS: Final[dict[bytes, _Key]] = {}


def _learn_key(key: bytes) -> _Key | None:
    """The key's entry; None for a key not UTF-8 (protobuf then reads the pair, and rejects it)."""
    if key.startswith(_UNREAD_BYTES):
        known = _Key(None, _VALUES_PER_UNREAD_KEY)
    else:
        try:
            known = _Key(key.decode("utf-8"), 0)
        except UnicodeDecodeError:
            return None
    if len(_KEYS) >= _KEYS_ENTRIES:
        _KEYS.clear()
    _KEYS[key] = known
    return known


def _remember(raw: bytes, got: tuple[str, Any]) -> None:
    if len(raw) <= SEEN_BYTES:
        if len(_SEEN) >= SEEN_ENTRIES:
            _SEEN.clear()
        _SEEN[raw] = got


def _key_value(raw: bytes) -> tuple[str, Any]:
    # The key as encoders write it: the first field (tag 0x0A), its length in one byte. An
    # attribute skipped by it is not decoded, so not checked: its value is never read.
    size = raw[1] if len(raw) > 1 and raw[0] == 0x0A else 0x80
    if size < 0x80 and 2 + size <= len(raw):
        key = raw[2 : 2 + size]
        known = _KEYS.get(key)
        if known is None:
            known = _learn_key(key)
        if known is not None:
            name = known.name
            if name is None:
                if known.left:
                    known.left -= 1
                    _remember(raw, _SKIPPED)
                return _SKIPPED
            # a text value written as encoders write it (most are): read here, without the
            # message objects protobuf builds for the pair (they cost more than the reading)
            text = text_value(raw, 2 + size)
            if text is not None:
                got: tuple[str, Any] = (name, text)
                _remember(raw, got)
                return got
            number = int_value(raw, 2 + size)
            if number >= 0:
                got = (name, number)
                _remember(raw, got)
                return got
    try:
        pair = KeyValue.FromString(raw)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise RequestError(f"not an OTLP protobuf trace request: attribute: {e}") from None
    name = pair.key
    if name.startswith(UNREAD_PREFIXES):  # written unusually: a long key, fields reordered
        got = _SKIPPED
    else:
        value = pair.value
        text = value.string_value  # most are strings: one call, not WhichOneof and a get
        got = (name, text) if text else (name, any_value(value))
        if not isinstance(got[1], _SHAREABLE):
            return got
    _remember(raw, got)
    return got


def span_attributes(raw: Iterable[bytes]) -> dict[str, Any]:
    """A span's serialized ``KeyValue`` attributes as a dict, without the ones whose key starts
    with one of the conventions' ``UNREAD_PREFIXES`` (RequestError for a malformed one)."""
    out: dict[str, Any] = {}
    seen = _SEEN
    for kv in raw:
        # a long one is never there, so not hashed (a prompt history's several KB a value)
        got = seen.get(kv) if len(kv) <= SEEN_BYTES else None
        if got is None:
            got = _key_value(kv)
        if got[1] is not _NOT_KEPT:
            out[got[0]] = got[1]
    return out


def service_name(resource: Any) -> str:
    """The service an OTLP ``Resource`` names: its ``service.name``, else "unknown"."""
    for kv in resource.attributes:
        if kv.key == "service.name":
            value = any_value(kv.value)
            return str(value) if value not in (None, "") else "unknown"
    return "unknown"


_ZERO_TRACE: Final = bytes(16)
_ZERO_SPAN: Final = bytes(8)


def valid_ids(trace_id: bytes, span_id: bytes, parent: bytes) -> bool:
    """Whether a span's ids are a trace id, a span id and an absent or whole parent id, the
    first two not all zeros."""
    return (
        len(trace_id) == 16
        and len(span_id) == 8
        and len(parent) in (0, 8)
        and trace_id != _ZERO_TRACE
        and span_id != _ZERO_SPAN
    )


def _status(raw: bytes) -> tuple[int, str]:
    """(code, message) of a span's serialized ``Status``; unset when empty (most spans)."""
    if not raw:
        return 0, ""
    try:
        status = Status.FromString(raw)
    except (DecodeError, RuntimeError, ValueError) as e:
        raise RequestError(f"not an OTLP protobuf trace request: status: {e}") from None
    return status.code, status.message


def count_spans(request: Any) -> tuple[int, int]:
    """(valid spans, rejected spans) of a request, without converting any."""
    valid = rejected = 0
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                if valid_ids(span.trace_id, span.span_id, span.parent_span_id):
                    valid += 1
                else:
                    rejected += 1
    return valid, rejected


def _event_views(events: Any) -> tuple[EventView, ...]:
    return tuple(EventView(e.name, attributes(e.attributes[:])) for e in events[:])


def _scopes(request: Any) -> Iterator[tuple[str, list[Any]]]:
    """(service, spans) of each scope, but loopwatch's own loop spans (never an agent's)."""
    for rs in request.resource_spans:
        service = service_name(rs.resource)
        for ss in rs.scope_spans:
            if ss.scope.name != OWN_SCOPE:
                # upb's fields read as slices: one call builds the list, where iterating one
                # costs a call per item and a formatted IndexError at its end
                yield service, ss.spans[:]


def span_views(request: Any) -> Decoded:
    """Every span of the request as a SpanView; spans with invalid ids are rejected, a malformed
    attribute or span is a RequestError. ``request``: from :func:`parse_protobuf`, or any
    ``ExportTraceServiceRequest`` message."""
    if isinstance(request, RawSpanRequest):
        return _raw_span_views(request)
    if not isinstance(request, LeanRequest):
        request = LeanRequest.FromString(request.SerializeToString())
    spans: list[SpanView] = []
    append = spans.append
    rejected = 0
    from_bytes = int.from_bytes
    # (the view written out here and in _raw_view: as pure Python, a call a span costs 1.5%)
    for service, scope_spans in _scopes(request):
        for span in scope_spans:
            trace_id, span_id, parent = span.trace_id, span.span_id, span.parent_span_id
            if not valid_ids(trace_id, span_id, parent):
                rejected += 1
                continue
            has_parent = bool(parent) and parent != _ZERO_SPAN
            start = span.start_time_unix_nano
            events = span.events
            code, message = _status(span.status)
            append(
                SpanView(
                    trace_id=from_bytes(trace_id),
                    span_id=from_bytes(span_id),
                    parent_id=from_bytes(parent) if has_parent else None,
                    name=span.name,
                    start_ns=start,
                    end_ns=span.end_time_unix_nano or start,
                    attributes=span_attributes(span.attributes[:]),
                    events=_event_views(events) if events else (),
                    status_code=code,
                    status_description=message,
                    service=service,
                    extra=_REMOTE_EXTRA
                    if has_parent and span.flags & _REMOTE_BOTH == _REMOTE_BOTH
                    else {},
                )
            )
    return Decoded(spans, rejected)


def _raw_span_views(request: Any) -> Decoded:
    """span_views of a ``RawSpanRequest``: each span read from its bytes."""
    spans: list[SpanView] = []
    rejected = 0
    for service, scope_spans in _scopes(request):
        for raw in scope_spans:
            view = _raw_view(raw, service)
            if view is None:
                rejected += 1
            else:
                spans.append(view)
    return Decoded(spans, rejected)


def _raw_view(raw: bytes, service: str) -> SpanView | None:
    """A serialized span's view; None when its ids are invalid (the span is rejected)."""
    fields = span_fields(raw)
    events: tuple[EventView, ...] = ()
    if fields is None:  # events, links, or a layout read by protobuf's parser, which checks it
        try:
            span = LeanSpan.FromString(raw)
        except (DecodeError, RuntimeError, ValueError) as e:
            raise RequestError(f"not an OTLP protobuf trace request: span: {e}") from None
        fields = (
            span.trace_id,
            span.span_id,
            span.parent_span_id,
            span.name,
            span.start_time_unix_nano,
            span.end_time_unix_nano,
            span.attributes[:],
            span.status,
            span.flags,
        )
        if span.events:
            events = _event_views(span.events)
    trace_id, span_id, parent, name, start, end, raw_attributes, status, flags = fields
    if not valid_ids(trace_id, span_id, parent):
        return None
    has_parent = bool(parent) and parent != _ZERO_SPAN
    code, message = _status(status)
    from_bytes = int.from_bytes
    return SpanView(
        trace_id=from_bytes(trace_id),
        span_id=from_bytes(span_id),
        parent_id=from_bytes(parent) if has_parent else None,
        name=name,
        start_ns=start,
        end_ns=end or start,
        attributes=span_attributes(raw_attributes),
        events=events,
        status_code=code,
        status_description=message,
        service=service,
        extra=_REMOTE_EXTRA if has_parent and flags & _REMOTE_BOTH == _REMOTE_BOTH else {},
    )


def hex_ids(document: dict[str, Any]) -> dict[str, Any]:
    """A trace request in protobuf's JSON mapping (base64 ids) with its spans' and links' ids
    in hex, as OTLP/JSON writes them (changed in place)."""
    for rs in document.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for item in [span, *span.get("links", [])]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in item:
                            item[key] = base64.b64decode(item[key]).hex()
    return document


def hex_ids_json(request: Any) -> bytes:
    """``request`` as OTLP/JSON (hex ids), e.g. to send to an OTLP/JSON receiver."""
    return json.dumps(hex_ids(json_format.MessageToDict(request))).encode()


__all__ = [
    "REMOTE_PARENT",
    "Decoded",
    "RequestError",
    "count_spans",
    "hex_ids",
    "hex_ids_json",
    "parse_protobuf",
    "service_name",
    "span_attributes",
    "span_views",
]
