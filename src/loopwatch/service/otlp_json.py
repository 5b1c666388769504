"""OTLP/JSON trace requests into span views: the one decoder of ``loopwatch serve`` (OTLP/HTTP
with ``Content-Type: application/json``) and ``loopwatch replay`` (the Collector's file
exporter's lines, Jaeger API v3's answers, Tempo's documents).

It reads an ``ExportTraceServiceRequest`` as protobuf's JSON parser does (``json_format.Parse``,
unknown fields ignored: fields under their JSON or their protobuf names, ``null`` as absent,
64-bit integers as text or numbers, enums as numbers or names, doubles as numbers or text such
as ``"NaN"``, bytes in base64, 100 levels of messages at most) into the span views the
service's conversion of the parsed message gives (:func:`loopwatch.service.otlp.span_views`).
Ids follow OTLP/JSON: hex (either case), or base64 of 16 or 8 bytes (protobuf's own mapping,
either alphabet, padded or not); a string of hex digits is hex, and a hex id of another length
is read and its span rejected (counted), as a binary one is.

Refused with a message naming the field, where protobuf's parser reads them: a string or an
array where an object belongs (protobuf reads ``"x"`` as ``{}``); an id that is neither of the
above (protobuf's base64 decoder takes any length and drops what it does not know); a field this
decoder reads written under both its names (``traceId`` and ``trace_id``, ``stringValue`` and
``string_value``: protobuf keeps the later); what is not standard JSON, even in a field neither
reads (``NaN``, ``1e400``, a lone surrogate escape: Python's ``json`` takes them). Read, where
protobuf's parser refuses: a key twice in an object (the last one counts) and an unknown key
written like an extension name (``"[x]"``), ignored as OTLP/JSON receivers must ignore unknown
fields. Read beyond protobuf: ``instrumentationLibrarySpans``, ``scopeSpans`` as OTLP named it
before 0.15 (old Tempo). tests/test_otlp_json_differential.py holds it to this on generated
documents.

msgspec decodes the request in C into typed structs of the OTLP messages, and each span's struct
is read into its view by its ``__post_init__`` as msgspec finishes it, its attributes dropped
while still in the processor's caches. Each field of a struct costs every instance of it, so a
key-value holds only the fields exporters write (:class:`KeyValue`), and a request with any other
is decoded again with all of them (:class:`KeyValueFull`). What protobuf checks and the structs'
types cannot (integers in text, ranges, enum names, ids, one kind per value, depth) is checked in
the hooks, in time linear in the request; a field loopwatch never reads costs nothing unless
present."""

from __future__ import annotations

import base64
import binascii
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Generic, TypeVar

import msgspec
from msgspec import UNSET, Meta, UnsetType
from msgspec.structs import astuple

from loopwatch.conventions.read import UNREAD_PREFIXES
from loopwatch.core.records import OWN_SCOPE
from loopwatch.core.span_view import EventView, SpanView
from loopwatch.service.otlp import REMOTE_PARENT, RequestError, valid_ids

# protobuf's JSON parser refuses a message nested deeper than this (json_format's default)
MAX_DEPTH: Final = 100
_I32_MIN: Final = -(1 << 31)
_I32_MAX: Final = (1 << 31) - 1
_U32_MAX: Final = (1 << 32) - 1
_I64_MIN: Final = -(1 << 63)
_I64_MAX: Final = (1 << 63) - 1
_U64_MAX: Final = (1 << 64) - 1
_T = TypeVar("_T")
Int32 = Annotated[int, Meta(ge=_I32_MIN, le=_I32_MAX)]
Uint32 = Annotated[int, Meta(ge=0, le=_U32_MAX)]


# -- fields read by _hook when present: never read, or rare ---------------------------------------
class _Uint32:
    __slots__ = ()


class _Int32:
    __slots__ = ()


class _Uint64:
    __slots__ = ()


class _LinkId:
    __slots__ = ()


class _Alias:
    """A span field loopwatch reads, under its protobuf name (``trace_id``): its JSON value,
    moved to the JSON-named field by :func:`_merge` (once one is met, every span looks)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _Kind:
    """An ``AnyValue``'s kind other than a string or an integer under its JSON name: its JSON
    value (null included), counted as met (:class:`_Reading`)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


_CHECKED: Final[dict[type, Any]] = {t: t() for t in (_Uint32, _Int32, _Uint64, _LinkId)}


class _Reading:
    """What the hooks have met in the request being decoded. A value's kinds other than a
    string or an integer (``_Kind``) are counted as they are decoded, and again as a value's
    kinds are read in full (``counted``): the struct holding the values (a span, a resource,
    a scope), once decoded, finds the two counts equal, or a value it took for its string or
    integer alone held another kind too."""

    __slots__ = ("aliases", "base64_ids", "counted", "kinds")

    def __init__(self) -> None:
        self.aliases = False  # a span field under its protobuf name
        self.base64_ids = False
        self.kinds = 0  # _Kind fields decoded since the last struct holding values
        self.counted = 0  # of those, met by _value_in_full


# The hooks take no arguments but the struct: the request's state is module-wide, one request at a
# time (_LOCK).
_reading = _Reading()
_LOCK = threading.Lock()


def _hook(kind: type, value: Any) -> Any:
    """msgspec's ``dec_hook``: the fields of the classes above, as protobuf checks them."""
    if kind is _Kind:
        _reading.kinds += 1
        return _Kind(value)
    if kind is _Alias:
        _reading.aliases = True
        return _Alias(value)
    if kind is _Uint32:
        _integer(value, 0, _U32_MAX)
    elif kind is _Uint64:
        _integer(value, 0, _U64_MAX)
    elif kind is _Int32:
        _integer(value, _I32_MIN, _I32_MAX)
    elif kind is _LinkId:
        _id(value, note=False)
    else:
        raise NotImplementedError
    return _CHECKED[kind]


# -- the structs: OTLP's messages, fields under their JSON names, then their protobuf names -------
# A field that holds what a struct read ("\x7f": no OTLP field has that name; overwritten anyway).
_READ = "\x7fread"


def _named(name: str) -> Any:
    return msgspec.field(default=UNSET, name=name)


class AnyValue(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """An ``AnyValue`` as exporters write one; any other field: :class:`AnyValueFull`."""

    string_value: str | UnsetType | None = _named("stringValue")
    bool_value: _Kind | UnsetType = _named("boolValue")
    int_value: int | float | str | UnsetType | None = _named("intValue")
    double_value: _Kind | UnsetType = _named("doubleValue")
    array_value: _Kind | UnsetType = _named("arrayValue")
    kvlist_value: _Kind | UnsetType = _named("kvlistValue")
    bytes_value: _Kind | UnsetType = _named("bytesValue")


class AnyValueFull(AnyValue, forbid_unknown_fields=False):
    """Every field of an ``AnyValue``, under either name, and none other (each field a struct
    has costs every attribute: a request with no such field is decoded without them)."""

    string_value_strindex: _Kind | UnsetType = _named("stringValueStrindex")
    string_value_: _Kind | UnsetType = _named("string_value")
    bool_value_: _Kind | UnsetType = _named("bool_value")
    int_value_: _Kind | UnsetType = _named("int_value")
    double_value_: _Kind | UnsetType = _named("double_value")
    array_value_: _Kind | UnsetType = _named("array_value")
    kvlist_value_: _Kind | UnsetType = _named("kvlist_value")
    bytes_value_: _Kind | UnsetType = _named("bytes_value")
    string_value_strindex_: _Kind | UnsetType = _named("string_value_strindex")


class KeyValue(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """A ``KeyValue`` as exporters write one; any other field: :class:`KeyValueFull`."""

    key: str | None = ""
    value: AnyValue | None = None


class KeyValueFull(KeyValue, forbid_unknown_fields=False):
    value: AnyValueFull | None = None
    key_strindex: _Int32 | None = msgspec.field(default=None, name="keyStrindex")
    key_strindex_: _Int32 | None = msgspec.field(default=None, name="key_strindex")


# the key-values of a request: KeyValue, or KeyValueFull when a field of them is not in KeyValue
KV = TypeVar("KV", bound=KeyValue)


class Status(msgspec.Struct, gc=False):
    message: str | None = ""
    code: Int32 | float | str | bool | None = 0  # a number, or the enum's name


class Event(msgspec.Struct, Generic[KV], gc=False):
    time_unix_nano: _Uint64 | None = msgspec.field(default=None, name="timeUnixNano")
    name: str | None = ""
    attributes: list[KV] | None = None
    dropped_attributes_count: _Uint32 | None = msgspec.field(
        default=None, name="droppedAttributesCount"
    )
    time_unix_nano_: _Uint64 | None = msgspec.field(default=None, name="time_unix_nano")
    dropped_attributes_count_: _Uint32 | None = msgspec.field(
        default=None, name="dropped_attributes_count"
    )


class Link(msgspec.Struct, Generic[KV], gc=False):
    trace_id: _LinkId | None = msgspec.field(default=None, name="traceId")
    span_id: _LinkId | None = msgspec.field(default=None, name="spanId")
    trace_state: str | None = msgspec.field(default=None, name="traceState")
    attributes: list[KV] | None = None
    dropped_attributes_count: _Uint32 | None = msgspec.field(
        default=None, name="droppedAttributesCount"
    )
    flags: _Uint32 | None = None
    trace_id_: _LinkId | None = msgspec.field(default=None, name="trace_id")
    span_id_: _LinkId | None = msgspec.field(default=None, name="span_id")
    trace_state_: str | None = msgspec.field(default=None, name="trace_state")
    dropped_attributes_count_: _Uint32 | None = msgspec.field(
        default=None, name="dropped_attributes_count"
    )


class Span(msgspec.Struct, Generic[KV], gc=False):
    trace_id: str | UnsetType | None = _named("traceId")
    span_id: str | UnsetType | None = _named("spanId")
    trace_state: str | None = msgspec.field(default=None, name="traceState")
    parent_span_id: str | UnsetType | None = _named("parentSpanId")
    flags: Uint32 | float | str | None = None
    name: str | None = ""
    kind: Int32 | float | str | bool | None = None
    start_time_unix_nano: int | float | str | UnsetType | None = _named("startTimeUnixNano")
    end_time_unix_nano: int | float | str | UnsetType | None = _named("endTimeUnixNano")
    attributes: list[KV] | None = None
    dropped_attributes_count: _Uint32 | None = msgspec.field(
        default=None, name="droppedAttributesCount"
    )
    events: list[Event[KV]] | None = None
    dropped_events_count: _Uint32 | None = msgspec.field(default=None, name="droppedEventsCount")
    links: list[Link[KV]] | None = None
    dropped_links_count: _Uint32 | None = msgspec.field(default=None, name="droppedLinksCount")
    status: Status | None = None
    trace_id_: _Alias | UnsetType = _named("trace_id")
    span_id_: _Alias | UnsetType = _named("span_id")
    trace_state_: str | None = msgspec.field(default=None, name="trace_state")
    parent_span_id_: _Alias | UnsetType = _named("parent_span_id")
    start_time_unix_nano_: _Alias | UnsetType = _named("start_time_unix_nano")
    end_time_unix_nano_: _Alias | UnsetType = _named("end_time_unix_nano")
    dropped_attributes_count_: _Uint32 | None = msgspec.field(
        default=None, name="dropped_attributes_count"
    )
    dropped_events_count_: _Uint32 | None = msgspec.field(default=None, name="dropped_events_count")
    dropped_links_count_: _Uint32 | None = msgspec.field(default=None, name="dropped_links_count")
    view: SpanView | None = msgspec.field(default=None, name=_READ)  # None: rejected

    def __post_init__(self) -> None:
        _span_decoded(self)  # a _FieldError: msgspec adds where the span is


class InstrumentationScope(msgspec.Struct, Generic[KV], gc=False):
    name: str | None = None
    version: str | None = None
    attributes: list[KV] | None = None
    dropped_attributes_count: _Uint32 | None = msgspec.field(
        default=None, name="droppedAttributesCount"
    )
    dropped_attributes_count_: _Uint32 | None = msgspec.field(
        default=None, name="dropped_attributes_count"
    )

    def __post_init__(self) -> None:
        _checked(lambda: _attributes(self.attributes or [], _SCOPE_VALUE_DEPTH, True))
        self.attributes = None


class ScopeSpans(msgspec.Struct, Generic[KV], gc=False):
    scope: InstrumentationScope[KV] | None = None
    spans: list[Span[KV]] | None = None
    schema_url: str | None = msgspec.field(default=None, name="schemaUrl")
    schema_url_: str | None = msgspec.field(default=None, name="schema_url")


class EntityRef(msgspec.Struct, gc=False):
    schema_url: str | None = msgspec.field(default=None, name="schemaUrl")
    type: str | None = None
    id_keys: list[str] | None = msgspec.field(default=None, name="idKeys")
    description_keys: list[str] | None = msgspec.field(default=None, name="descriptionKeys")
    schema_url_: str | None = msgspec.field(default=None, name="schema_url")
    id_keys_: list[str] | None = msgspec.field(default=None, name="id_keys")
    description_keys_: list[str] | None = msgspec.field(default=None, name="description_keys")


class Resource(msgspec.Struct, Generic[KV], gc=False):
    attributes: list[KV] | None = None
    dropped_attributes_count: _Uint32 | None = msgspec.field(
        default=None, name="droppedAttributesCount"
    )
    entity_refs: list[EntityRef] | None = msgspec.field(default=None, name="entityRefs")
    dropped_attributes_count_: _Uint32 | None = msgspec.field(
        default=None, name="dropped_attributes_count"
    )
    entity_refs_: list[EntityRef] | None = msgspec.field(default=None, name="entity_refs")
    service: str = msgspec.field(default="unknown", name=_READ)

    def __post_init__(self) -> None:
        self.service = _checked(lambda: _service(self.attributes or []))
        self.attributes = None


class ResourceSpans(msgspec.Struct, Generic[KV], gc=False):
    resource: Resource[KV] | None = None
    scope_spans: list[ScopeSpans[KV]] | UnsetType | None = _named("scopeSpans")
    schema_url: str | None = msgspec.field(default=None, name="schemaUrl")
    scope_spans_: list[ScopeSpans[KV]] | UnsetType | None = _named("scope_spans")
    schema_url_: str | None = msgspec.field(default=None, name="schema_url")
    # OTLP before 0.15 (and old Tempo): read as scopeSpans
    instrumentation_library_spans: list[ScopeSpans[KV]] | None = msgspec.field(
        default=None, name="instrumentationLibrarySpans"
    )
    read: tuple[list[SpanView], int] = msgspec.field(default=([], 0), name=_READ)

    def __post_init__(self) -> None:
        scopes = _one_of(self.scope_spans, self.scope_spans_, "scopeSpans", "scope_spans")
        service = "unknown" if self.resource is None else self.resource.service
        views: list[SpanView] = []
        rejected = 0
        for group in (scopes, self.instrumentation_library_spans):
            for scope in group or ():
                if scope.scope is not None and scope.scope.name == OWN_SCOPE:
                    continue  # loopwatch's own loop spans: never an agent's
                for span in scope.spans or ():
                    view = span.view
                    if view is None:
                        rejected += 1
                    else:
                        view.service = service
                        views.append(view)
        self.read = (views, rejected)
        self.scope_spans = self.scope_spans_ = self.instrumentation_library_spans = None


class Request(msgspec.Struct, Generic[KV], gc=False):
    resource_spans: list[ResourceSpans[KV]] | UnsetType | None = _named("resourceSpans")
    resource_spans_: list[ResourceSpans[KV]] | UnsetType | None = _named("resource_spans")


class ApiV3Answer(msgspec.Struct, Generic[KV], gc=False):
    """Jaeger API v3's answer (Jaeger 2's ``/api/v3/traces``), a line of its stream too."""

    result: Request[KV] | UnsetType = UNSET


# (Jaeger API v3's answer, every field of key-values) -> its decoder
_DECODERS: Final = {
    (api_v3, full): msgspec.json.Decoder(
        (ApiV3Answer if api_v3 else Request)[KeyValueFull if full else KeyValue], dec_hook=_hook
    )
    for api_v3 in (False, True)
    for full in (False, True)
}


def _one_of(json_named: Any, proto_named: Any, json_name: str, proto_name: str) -> Any:
    if proto_named is UNSET:
        return json_named
    if json_named is not UNSET:
        raise ValueError(f"{json_name} and {proto_name}: one field written under both names")
    return proto_named


# -- checks and values, as protobuf's JSON parser reads them ---------------------------------------
class _FieldError(ValueError):
    """What is wrong, and where below the struct whose hook met it (``attributes[3].value``)."""

    def __init__(self, message: str, *path: str) -> None:
        super().__init__(message)
        self.message = message
        self.path = list(path)

    def within(self, *segments: str) -> _FieldError:
        self.path[:0] = segments
        return self

    def __str__(self) -> str:
        return f"{'.'.join(self.path)}: {self.message}" if self.path else self.message


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _json_type(value: Any) -> str:
    return {
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        list: "an array",
        dict: "an object",
    }.get(type(value), "null")


def _integer(value: Any, low: int, high: int) -> int:
    """An integer field's value: protobuf's ``_ConvertInteger`` (a number, or text Python's
    ``int``, else ``float``, reads as a whole number; no spaces, no booleans), then the field's
    range."""
    if type(value) is int:
        number = value
    elif type(value) is float:
        if not value.is_integer():
            raise _FieldError(f"not an integer: {value!r}")
        number = int(value)
    elif type(value) is str:
        if " " in value:
            raise _FieldError(f"not an integer: {_shown(value)}")
        try:
            number = int(value)
        except ValueError:
            try:
                whole = float(value)
            except ValueError:
                raise _FieldError(f"not an integer: {_shown(value)}") from None
            if not whole.is_integer():
                raise _FieldError(f"not an integer: {_shown(value)}") from None
            number = int(whole)
    else:
        raise _FieldError(f"expected an integer, got {_json_type(value)}")
    if not low <= number <= high:
        raise _FieldError(f"{_shown(number)} is out of range ({low} to {high})")
    return number


def _enum(value: Any, names: dict[str, int]) -> int:
    """An enum field's value: its name, or a number (``int`` of it, as protobuf reads it); text
    that is neither is left unset (0), as protobuf does when told to ignore unknown fields."""
    if type(value) is str:
        number = names.get(value)
        if number is not None:
            return number
        try:
            number = int(value)
        except ValueError:
            return 0
    elif type(value) in (int, float, bool):
        number = int(value)
    else:
        raise _FieldError(f"expected an enum name or number, got {_json_type(value)}")
    if not _I32_MIN <= number <= _I32_MAX:
        raise _FieldError(f"{_shown(number)} is out of range for an enum")
    return number


def _double(value: Any) -> float:
    """A double: a number (or a boolean), or text Python's ``float`` reads, but ``"nan"``."""
    if type(value) in (float, int, bool):
        try:
            return float(value)
        except OverflowError:
            raise _FieldError(f"{_shown(value)} is out of a double's range") from None
    if type(value) is str:
        if value != "nan":
            try:
                return float(value)
            except ValueError:
                pass
        raise _FieldError(f"not a number: {_shown(value)} (NaN, Infinity and -Infinity are)")
    raise _FieldError(f"expected a number, got {_json_type(value)}")


def _bytes(value: Any) -> bytes:
    """Bytes in base64, as protobuf decodes them (either alphabet, padding optional, other
    characters dropped)."""
    if type(value) is not str:
        raise _FieldError(f"expected base64 text, got {_json_type(value)}")
    encoded = value.encode()
    try:
        return base64.urlsafe_b64decode(encoded + b"=" * (4 - len(encoded) % 4))
    except (binascii.Error, ValueError):
        raise _FieldError(f"not base64: {_shown(value)}") from None


_HEX_DIGITS: Final = frozenset("0123456789abcdefABCDEF")


def _id(value: Any, note: bool = True) -> bytes:
    """A trace, span or parent id: hex (OTLP/JSON) of any length, or base64 (protobuf's
    mapping) of 16 or 8 bytes; empty for none. ``note``: base64 ids are noted (replay says
    so)."""
    if value is None or value is UNSET or value == "":
        return b""
    if type(value) is not str:
        raise _FieldError(f"expected a hex id, got {_json_type(value)}")
    if _HEX_DIGITS.issuperset(value):
        if len(value) % 2:
            raise _FieldError(f"an odd number of hex digits: {_shown(value)}")
        return bytes.fromhex(value)
    # protobuf's mapping: either alphabet, padding optional but whole when written
    text = value.replace("-", "+").replace("_", "/")
    digits = text.rstrip("=")
    padding = len(text) - len(digits)
    if len(digits) % 4 != 1 and padding <= 2 and (padding == 0 or len(text) % 4 == 0):
        try:
            decoded = base64.b64decode(digits + "=" * (-len(digits) % 4), validate=True)
        except (binascii.Error, ValueError):
            pass
        else:
            if len(decoded) in (16, 8):  # an id's: other text is more likely broken hex
                if note:
                    _reading.base64_ids = True
                return decoded
    raise _FieldError(f"not a hex or base64 id: {_shown(value[:40])}")


# A value's message depth (protobuf counts each message): the request 1, resource spans 2, a
# resource 3, a scope's spans 3, a scope 4, a span 4, an event or link 5; a key-value one more
# than its holder, its value one more again.
_RESOURCE_VALUE_DEPTH: Final = 5
_SCOPE_VALUE_DEPTH: Final = 6
_SPAN_VALUE_DEPTH: Final = 6
_EVENT_VALUE_DEPTH: Final = 7

# an AnyValue's keys -> its kind (one of them at most)
_STRING, _BOOL, _INT, _DOUBLE, _ARRAY, _KVLIST, _BYTES, _STRINDEX = range(1, 9)
_KINDS: Final = {
    "stringValue": _STRING,
    "boolValue": _BOOL,
    "intValue": _INT,
    "doubleValue": _DOUBLE,
    "arrayValue": _ARRAY,
    "kvlistValue": _KVLIST,
    "bytesValue": _BYTES,
    "stringValueStrindex": _STRINDEX,
    "string_value": _STRING,
    "bool_value": _BOOL,
    "int_value": _INT,
    "double_value": _DOUBLE,
    "array_value": _ARRAY,
    "kvlist_value": _KVLIST,
    "bytes_value": _BYTES,
    "string_value_strindex": _STRINDEX,
}


def _too_deep() -> _FieldError:
    return _FieldError(f"nested too deeply (protobuf reads {MAX_DEPTH} levels of messages)")


def _any(value: Any, depth: int) -> Any:
    """An ``AnyValue`` (a JSON object) at message depth ``depth`` as the Python value the
    service's conversion gives: its one kind's value, or None for none (or a string index,
    which means nothing outside a profile's dictionary)."""
    if type(value) is not dict:
        raise _FieldError(f"expected an object, got {_json_type(value)}")
    if depth > MAX_DEPTH:
        raise _too_deep()
    kind = 0
    met = False
    found: Any = None
    for key, raw in value.items():
        field = _KINDS.get(key)
        if field is None:
            continue  # an unknown field
        if raw is None:  # as if absent: clears that kind, when it is the one set
            if field == kind:
                kind, found = 0, None
            continue
        if met:
            raise _FieldError("more than one kind of value", key)
        met = True
        kind = field
        found = _kind_value(field, raw, depth, key)
    return found


def _kind_value(kind: int, raw: Any, depth: int, name: str) -> Any:
    """The value of an ``AnyValue``'s kind (``name``: the key it was written under), not null,
    the ``AnyValue`` at message depth ``depth``."""
    try:
        if kind == _STRING:
            if type(raw) is not str:
                raise _FieldError(f"expected a string, got {_json_type(raw)}")
            return raw
        if kind == _DOUBLE:
            return _double(raw)
        if kind == _INT:
            return _integer(raw, _I64_MIN, _I64_MAX)
        if kind == _BOOL:
            if type(raw) is not bool:
                raise _FieldError(f"expected true or false, got {_json_type(raw)}")
            return raw
        if kind == _ARRAY:
            return _array(raw, depth + 1)
        if kind == _KVLIST:
            return _kvlist(raw, depth + 1)
        if kind == _BYTES:
            return _bytes(raw)
        _integer(raw, _I32_MIN, _I32_MAX)  # a string index: nothing to read
        return None
    except _FieldError as e:
        raise e.within(name) from None


def _values(message: Any, depth: int) -> list[Any]:
    """The ``values`` of an ``ArrayValue`` or ``KeyValueList`` (a JSON object) at ``depth``."""
    if type(message) is not dict:
        raise _FieldError(f"expected an object, got {_json_type(message)}")
    if depth > MAX_DEPTH:
        raise _too_deep()
    values = message.get("values")
    if values is None:
        return []
    if type(values) is not list:
        raise _FieldError(f"expected an array, got {_json_type(values)}", "values")
    return values


def _array(message: Any, depth: int) -> tuple[Any, ...]:
    out = []
    for i, item in enumerate(_values(message, depth)):
        try:
            if item is None:
                raise _FieldError("null in an array")
            out.append(_any(item, depth + 1))
        except _FieldError as e:
            raise e.within(f"values[{i}]") from None
    return tuple(out)


def _kvlist(message: Any, depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, pair in enumerate(_values(message, depth)):
        try:
            key, value = _pair(pair, depth + 1)
        except _FieldError as e:
            raise e.within(f"values[{i}]") from None
        out[key] = value
    return out


def _pair(pair: Any, depth: int) -> tuple[str, Any]:
    """A ``KeyValue`` inside a value (a JSON object) at ``depth``."""
    if type(pair) is not dict:
        raise _FieldError(f"expected an object, got {_json_type(pair)}")
    if depth > MAX_DEPTH:
        raise _too_deep()
    key = ""
    value = None
    for name, raw in pair.items():
        if raw is None:
            continue  # as if absent
        try:
            if name == "key":
                if type(raw) is not str:
                    raise _FieldError(f"expected a string, got {_json_type(raw)}")
                key = raw
            elif name == "value":
                value = _any(raw, depth + 1)
            elif name in ("keyStrindex", "key_strindex"):
                _integer(raw, _I32_MIN, _I32_MAX)
        except _FieldError as e:
            raise e.within(name) from None
    return key, value


# -- the structs' values --------------------------------------------------------------------------
# each AnyValue struct's fields in order: (JSON name, kind)
_FIELDS_OF: Final = {
    struct: tuple((name, _KINDS[name]) for name in struct.__struct_encode_fields__)
    for struct in (AnyValue, AnyValueFull)
}


def _value(value: AnyValue, depth: int) -> Any:
    """A value that is not a string alone: an integer or a double alone read here (the file
    exporter's integer is its text of digits), the rest in full."""
    if value.string_value is UNSET:
        number: Any = value.int_value
        if number.__class__ is str:
            if number.isdecimal() and len(number) < 19:
                return int(number)
        elif number.__class__ is int:
            if _I64_MIN <= number <= _I64_MAX:
                return number
        elif (
            number is UNSET
            and value.__class__ is AnyValue  # none of AnyValueFull's other fields
            and value.double_value.__class__ is _Kind
            and value.bool_value is UNSET
            and value.array_value is UNSET
            and value.kvlist_value is UNSET
            and value.bytes_value is UNSET
        ):
            double = value.double_value.value
            if double.__class__ is float:
                _reading.counted += 1
                return double
    return _value_in_full(value, depth)


def _value_in_full(value: AnyValue, depth: int) -> Any:
    """An ``AnyValue`` struct as :func:`_any` reads a JSON one: its one kind (of its fields
    written, those not null), never one field under both its names."""
    written: dict[int, str] = {}  # kind -> the name it was written under
    found: Any = None
    met = False
    for raw, (name, kind) in zip(astuple(value), _FIELDS_OF[value.__class__], strict=True):
        if raw is UNSET:
            continue
        if raw.__class__ is _Kind:
            _reading.counted += 1
            raw = raw.value
        if kind in written:
            raise _FieldError(f"{written[kind]} and {name}: one field written under both names")
        written[kind] = name
        if raw is None:
            continue
        if met:
            raise _FieldError("more than one kind of value", name)
        met = True
        if depth > MAX_DEPTH:
            raise _too_deep()
        found = _kind_value(kind, raw, depth, name)
    return found


def _checked(read: Callable[[], _T]) -> _T:
    """``read()`` of a struct's values in full: the kinds the hooks met all among them (see
    _Reading), else some were in an object's key written twice, the first one dropped."""
    reading = _reading
    kinds = reading.kinds
    reading.kinds = reading.counted = 0
    got = read()
    if reading.counted != kinds:
        raise _FieldError("an object holds a key twice")
    reading.counted = 0
    return got


def _read_value(value: AnyValue | None, depth: int, full: bool) -> Any:
    if value is None:
        return None
    text = value.string_value
    if full:
        return _value_in_full(value, depth)
    if text.__class__ is str and value.int_value is UNSET:
        return text
    return _value(value, depth)


def _attributes(pairs: Sequence[KeyValue], depth: int, full: bool) -> dict[str, Any]:
    """Key-values whose values are at message depth ``depth``, every one kept (``full``: each
    value read in full)."""
    out: dict[str, Any] = {}
    for i, kv in enumerate(pairs):
        try:
            got = _read_value(kv.value, depth, full)
        except _FieldError as e:
            raise e.within(f"attributes[{i}]", "value") from None
        key = kv.key
        out["" if key is None else key] = got
    return out


# span attribute keys met before -> whether the conventions never read them (UNREAD_PREFIXES):
# a lookup costs less than testing the prefixes; bounded
_UNREAD: dict[str | None, bool] = {}
_UNREAD_ENTRIES: Final = 4096


def _learn(key: str | None) -> tuple[str, bool]:
    if key is None:
        return "", False  # null: as if absent, the empty key (never kept in the table)
    if len(_UNREAD) >= _UNREAD_ENTRIES:
        _UNREAD.clear()
    unread = _UNREAD[key] = key.startswith(UNREAD_PREFIXES)
    return key, unread


def _span_attributes(pairs: Sequence[KeyValue], kinds: int) -> dict[str, Any]:
    """A span's attributes, without those the conventions never read; each value checked, the
    skipped ones as little as that takes: an integer read, and, when the hooks met kinds
    (``kinds``), each value without a string read in full (see _Reading)."""
    out: dict[str, Any] = {}
    unread = _UNREAD
    unset = UNSET  # a local: read twice an attribute
    kv = None
    try:
        for kv in pairs:
            key: Any = kv.key
            skip = unread.get(key)
            if skip is None:
                key, skip = _learn(key)
            value = kv.value
            if skip:  # checked only: an integer, or a value of other kinds when there are any
                if value is not None:
                    number: Any = value.int_value
                    if number is not unset:
                        if not (
                            number.__class__ is str
                            and number.isdecimal()  # what int() reads, no sign, no spaces
                            and len(number) < 19
                            and value.string_value is unset
                        ):
                            _value(value, _SPAN_VALUE_DEPTH)
                    elif kinds and value.string_value.__class__ is not str:
                        _value(value, _SPAN_VALUE_DEPTH)
                continue
            got: Any = None
            if value is not None:
                got = value.string_value
                if got.__class__ is not str or value.int_value is not unset:
                    got = _value(value, _SPAN_VALUE_DEPTH)
            out[key] = got  # a null key: _learn made it ""
    except _FieldError as e:
        index = next(i for i, each in enumerate(pairs) if each is kv)
        raise e.within(f"attributes[{index}]", "value") from None
    return out


def _service(pairs: Sequence[KeyValue]) -> str:
    """The service a resource's attributes name: its first ``service.name`` (each value read in
    full: checked)."""
    service: Any = None
    named = False
    for i, kv in enumerate(pairs):
        try:
            value = _read_value(kv.value, _RESOURCE_VALUE_DEPTH, True)
        except _FieldError as e:
            raise e.within(f"attributes[{i}]", "value") from None
        if not named and kv.key == "service.name":
            service, named = value, True
    return str(service) if service not in (None, "") else "unknown"


def _time(value: Any) -> int:
    """A ``fixed64`` time, 0 when absent."""
    if value is None or value is UNSET:
        return 0
    return _integer(value, 0, _U64_MAX)


_STATUS_NAMES: Final = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_KIND_NAMES: Final = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_NO_EVENTS: tuple[EventView, ...] = ()
_REMOTE_BOTH: Final = 0x300  # the span flags' "is remote" known and set
_SPAN_ALIASES: Final = (
    ("trace_id", "trace_id_", "traceId"),
    ("span_id", "span_id_", "spanId"),
    ("parent_span_id", "parent_span_id_", "parentSpanId"),
    ("start_time_unix_nano", "start_time_unix_nano_", "startTimeUnixNano"),
    ("end_time_unix_nano", "end_time_unix_nano_", "endTimeUnixNano"),
)


def _merge(span: Span[Any]) -> None:
    """The read fields written under their protobuf names moved to their JSON names."""
    for field, alias, json_name in _SPAN_ALIASES:
        written = getattr(span, alias)
        if written is not UNSET:
            if getattr(span, field) is not UNSET:
                raise _FieldError(f"{json_name} and {field}: one field written under both names")
            setattr(span, field, written.value)


def _field(name: str, read: Callable[[Any], _T], value: Any) -> _T:
    """``read(value)``, what is wrong with it said of the field ``name``."""
    try:
        return read(value)
    except _FieldError as e:
        raise e.within(name) from None


def _u32(value: Any) -> int:
    return _integer(value, 0, _U32_MAX)


def _kind(value: Any) -> int:
    return _enum(value, _KIND_NAMES)


def _status_code(value: Any) -> int:
    return _enum(value, _STATUS_NAMES)


def _events(events: list[Event[Any]], full: bool) -> tuple[EventView, ...]:
    out = []
    for i, event in enumerate(events):
        try:
            attributes = _attributes(event.attributes or [], _EVENT_VALUE_DEPTH, full)
        except _FieldError as e:
            raise e.within(f"events[{i}]") from None
        name = event.name
        out.append(EventView("" if name is None else name, attributes))
    return tuple(out)


def _links(links: list[Link[Any]], full: bool) -> None:
    for i, link in enumerate(links):
        try:
            _attributes(link.attributes or [], _EVENT_VALUE_DEPTH, full)
        except _FieldError as e:
            raise e.within(f"links[{i}]") from None


def _in_full(span: Span[Any], kinds: int) -> None:
    """A span's values read again in full, the kinds the hooks met counted (see _Reading): a
    value that held another kind beside its string or integer is named."""
    reading = _reading
    reading.counted = 0
    if span.attributes:
        _attributes(span.attributes, _SPAN_VALUE_DEPTH, True)
    if span.events:
        _events(span.events, True)
    if span.links:
        _links(span.links, True)
    if reading.counted != kinds:
        raise _FieldError("an object holds a key twice")


def _span_decoded(span: Span[Any]) -> None:
    """A span msgspec has just built: checked, read into its view (None when its ids are
    invalid), its attributes, events and links dropped."""
    reading = _reading
    if reading.aliases:
        _merge(span)
    raw: Any = span.trace_id
    if raw.__class__ is str and len(raw) == 32:  # the file exporter's hex, read here at once
        try:
            trace_id = bytes.fromhex(raw)
        except ValueError:
            trace_id = b""
    else:
        trace_id = b""
    if len(trace_id) != 16:
        trace_id = _field("traceId", _id, raw)
    raw = span.span_id
    if raw.__class__ is str and len(raw) == 16:
        try:
            span_id = bytes.fromhex(raw)
        except ValueError:
            span_id = b""
    else:
        span_id = b""
    if len(span_id) != 8:
        span_id = _field("spanId", _id, raw)
    raw = span.parent_span_id
    parent = b""  # a root
    if raw is not UNSET:
        if raw.__class__ is str and len(raw) == 16:
            try:
                parent = bytes.fromhex(raw)
            except ValueError:
                parent = b""
        if len(parent) != 8:
            parent = _field("parentSpanId", _id, raw)
    start: Any = span.start_time_unix_nano
    if start.__class__ is str and start.isdecimal() and len(start) < 20:
        start = int(start)  # the file exporter's text
    elif start.__class__ is not int or not 0 <= start <= _U64_MAX:
        start = _field("startTimeUnixNano", _time, start)
    end: Any = span.end_time_unix_nano
    if end.__class__ is str and end.isdecimal() and len(end) < 20:
        end = int(end)
    elif end.__class__ is not int or not 0 <= end <= _U64_MAX:
        end = _field("endTimeUnixNano", _time, end)
    flags: Any = span.flags
    if flags.__class__ is not int:
        flags = 0 if flags is None else _field("flags", _u32, flags)
    kind = span.kind
    if kind.__class__ is not int and kind is not None and kind not in _KIND_NAMES:
        _field("kind", _kind, kind)
    code: Any = 0
    message = ""
    status = span.status
    if status is not None:
        code = status.code
        if code.__class__ is not int:  # a name (protobuf's JSON writes them), else in full
            named = _STATUS_NAMES.get(code) if code.__class__ is str else None
            if named is not None:
                code = named
            else:
                code = 0 if code is None else _field("status.code", _status_code, code)
        message = status.message or ""
    kinds = reading.kinds
    reading.kinds = reading.counted = 0
    attributes = _span_attributes(span.attributes, kinds) if span.attributes else {}
    events = _events(span.events, False) if span.events else _NO_EVENTS
    if span.links:
        _links(span.links, False)
    if reading.counted != kinds:  # a value held another kind beside its string or integer
        _in_full(span, kinds)
    reading.counted = 0
    span.attributes = span.events = span.links = None  # freed now, while in the CPU's caches
    if not valid_ids(trace_id, span_id, parent):
        span.view = None  # rejected, and counted
        return
    has_parent = any(parent)
    name = span.name
    span.view = SpanView(
        int.from_bytes(trace_id),
        int.from_bytes(span_id),
        int.from_bytes(parent) if has_parent else None,
        "" if name is None else name,
        start,
        end or start,
        attributes,
        events,
        code,
        message,
        "unknown",  # the resource's, once read (ResourceSpans)
        {REMOTE_PARENT: True} if has_parent and flags & _REMOTE_BOTH == _REMOTE_BOTH else {},
    )


# -- requests ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JsonDecoded:
    """What a request held: its spans' views, how many spans were rejected (invalid ids),
    whether ids were in base64, and whether it named spans at all (``resourceSpans``: some other
    JSON document, a Jaeger one, decodes as an empty request)."""

    spans: list[SpanView]
    rejected: int = 0
    base64_ids: bool = False
    names_spans: bool = True


def decode(body: bytes, api_v3: bool = False) -> JsonDecoded:
    """An OTLP/JSON ``ExportTraceServiceRequest`` (``api_v3``: Jaeger API v3's answer, the
    request under ``result``) as span views; RequestError naming what is wrong with it."""
    global _reading
    with _LOCK:
        try:
            for full in (False, True):
                reading = _reading = _Reading()
                try:
                    got = _DECODERS[api_v3, full].decode(body)
                except msgspec.ValidationError:
                    if full:
                        raise
                    continue  # a key-value with a field AnyValue lacks, or a mistake: in full
                break
        except msgspec.ValidationError as e:
            raise RequestError(_explained(e)) from None
        except msgspec.DecodeError as e:
            raise RequestError(f"not JSON: {e}") from None
        except RecursionError:
            raise RequestError("not JSON: nested too deeply") from None
        finally:
            _reading = _Reading()  # nothing of this request kept
    request = got.result if isinstance(got, ApiV3Answer) else got
    if request is UNSET:
        return JsonDecoded([], names_spans=False)
    try:
        groups = _one_of(
            request.resource_spans, request.resource_spans_, "resourceSpans", "resource_spans"
        )
    except ValueError as e:
        raise RequestError(str(e)) from None
    views: list[SpanView] = []
    rejected = 0
    for group in groups or ():
        views += group.read[0]
        rejected += group.read[1]
    return JsonDecoded(views, rejected, reading.base64_ids, groups is not UNSET)


def _explained(error: msgspec.ValidationError) -> str:
    """msgspec's message as loopwatch says it: the path, then what is wrong there."""
    text, _, where = str(error).rpartition(" - at `$")
    if not text:
        text, where = str(error), ""
    where = where.rstrip("`").lstrip(".")
    cause = error.__cause__
    if isinstance(cause, _FieldError):
        below = ".".join(cause.path)
        where = f"{where}.{below}" if where and below else where or below
        text = cause.message
    else:
        text = _EXPECTED.sub(_said, text)
    return f"{where}: {text}" if where else f"not an OTLP/JSON trace request: {text}"


_EXPECTED: Final = re.compile(r"^Expected `([^`]*)`(, got `([^`]*)`)?")
_JSON_TYPES: Final = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "null": "null",
    "array": "an array",
    "object": "an object",
    "list": "an array",
}


def _said(found: re.Match[str]) -> str:
    """msgspec's "Expected `array | null`, got `str`" as "expected an array or null, got a
    string"."""
    kinds = [_JSON_TYPES.get(k.strip(), "a value") for k in found.group(1).split("|")]
    said = "expected " + " or ".join(dict.fromkeys(kinds))
    if found.group(3):
        said += f", got {_JSON_TYPES.get(found.group(3), 'a value')}"
    return said


__all__ = ["MAX_DEPTH", "JsonDecoded", "decode"]
