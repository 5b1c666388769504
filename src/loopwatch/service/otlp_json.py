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

msgspec decodes the request in C into typed structs of the OTLP messages (here), and each span's
struct is read into its view by its ``__post_init__`` as msgspec finishes it, its attributes
dropped while still in the processor's caches (:mod:`loopwatch.service.otlp_json_read`, which
the compiled build compiles; these structs stay Python). Each field of a struct costs every
instance of it, so a key-value holds only the fields exporters write (:class:`KeyValue`), and a
request with any other is decoded again with all of them (:class:`KeyValueFull`). What protobuf
checks and the structs' types cannot (integers in text, ranges, enum names, ids, one kind per
value, depth) is checked in the hooks, in time linear in the request; a field loopwatch never
reads costs nothing unless present."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Final, Generic, TypeVar

import msgspec
from msgspec import UNSET, Meta, UnsetType

from loopwatch.core.records import OWN_SCOPE
from loopwatch.core.span_view import SpanView
from loopwatch.service.otlp import RequestError
from loopwatch.service.otlp_json_read import (
    _I32_MAX,
    _I32_MIN,
    _U32_MAX,
    MAX_DEPTH,
    Alias,
    FieldError,
    Int32Field,
    LinkIdField,
    OtherKind,
    Uint32Field,
    Uint64Field,
    begin_request,
    dec_hook,
    end_request,
    one_of,
    resource_service,
    scope_checked,
    span_decoded,
)

Int32 = Annotated[int, Meta(ge=_I32_MIN, le=_I32_MAX)]
Uint32 = Annotated[int, Meta(ge=0, le=_U32_MAX)]
_LOCK = threading.Lock()


# -- the structs: OTLP's messages, fields under their JSON names, then their protobuf names -------
# A field that holds what a struct read ("\x7f": no OTLP field has that name; overwritten anyway).
_READ = "\x7fread"


def _named(name: str) -> Any:
    return msgspec.field(default=UNSET, name=name)


class AnyValue(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """An ``AnyValue`` as exporters write one; any other field: :class:`AnyValueFull`."""

    every_field: ClassVar[bool] = False  # AnyValueFull: read in full
    string_value: str | UnsetType | None = _named("stringValue")
    bool_value: OtherKind | UnsetType = _named("boolValue")
    int_value: int | float | str | UnsetType | None = _named("intValue")
    double_value: OtherKind | UnsetType = _named("doubleValue")
    array_value: OtherKind | UnsetType = _named("arrayValue")
    kvlist_value: OtherKind | UnsetType = _named("kvlistValue")
    bytes_value: OtherKind | UnsetType = _named("bytesValue")


class AnyValueFull(AnyValue, forbid_unknown_fields=False):
    """Every field of an ``AnyValue``, under either name, and none other (each field a struct
    has costs every attribute: a request with no such field is decoded without them)."""

    every_field: ClassVar[bool] = True
    string_value_strindex: OtherKind | UnsetType = _named("stringValueStrindex")
    string_value_: OtherKind | UnsetType = _named("string_value")
    bool_value_: OtherKind | UnsetType = _named("bool_value")
    int_value_: OtherKind | UnsetType = _named("int_value")
    double_value_: OtherKind | UnsetType = _named("double_value")
    array_value_: OtherKind | UnsetType = _named("array_value")
    kvlist_value_: OtherKind | UnsetType = _named("kvlist_value")
    bytes_value_: OtherKind | UnsetType = _named("bytes_value")
    string_value_strindex_: OtherKind | UnsetType = _named("string_value_strindex")


class KeyValue(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """A ``KeyValue`` as exporters write one; any other field: :class:`KeyValueFull`."""

    key: str | None = ""
    value: AnyValue | None = None


class KeyValueFull(KeyValue, forbid_unknown_fields=False):
    value: AnyValueFull | None = None
    key_strindex: Int32Field | None = msgspec.field(default=None, name="keyStrindex")
    key_strindex_: Int32Field | None = msgspec.field(default=None, name="key_strindex")


# the key-values of a request: KeyValue, or KeyValueFull when a field of them is not in KeyValue
KV = TypeVar("KV", bound=KeyValue)


class Status(msgspec.Struct, gc=False):
    message: str | None = ""
    code: Int32 | float | str | bool | None = 0  # a number, or the enum's name


class Event(msgspec.Struct, Generic[KV], gc=False):
    time_unix_nano: Uint64Field | None = msgspec.field(default=None, name="timeUnixNano")
    name: str | None = ""
    attributes: list[KV] | None = None
    dropped_attributes_count: Uint32Field | None = msgspec.field(
        default=None, name="droppedAttributesCount"
    )
    time_unix_nano_: Uint64Field | None = msgspec.field(default=None, name="time_unix_nano")
    dropped_attributes_count_: Uint32Field | None = msgspec.field(
        default=None, name="dropped_attributes_count"
    )


class SpanLink(msgspec.Struct, Generic[KV], gc=False):
    """A span's link to another span (its attributes checked, never kept)."""

    trace_id: LinkIdField | None = msgspec.field(default=None, name="traceId")
    span_id: LinkIdField | None = msgspec.field(default=None, name="spanId")
    trace_state: str | None = msgspec.field(default=None, name="traceState")
    attributes: list[KV] | None = None
    dropped_attributes_count: Uint32Field | None = msgspec.field(
        default=None, name="droppedAttributesCount"
    )
    flags: Uint32Field | None = None
    trace_id_: LinkIdField | None = msgspec.field(default=None, name="trace_id")
    span_id_: LinkIdField | None = msgspec.field(default=None, name="span_id")
    trace_state_: str | None = msgspec.field(default=None, name="trace_state")
    dropped_attributes_count_: Uint32Field | None = msgspec.field(
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
    dropped_attributes_count: Uint32Field | None = msgspec.field(
        default=None, name="droppedAttributesCount"
    )
    events: list[Event[KV]] | None = None
    dropped_events_count: Uint32Field | None = msgspec.field(
        default=None, name="droppedEventsCount"
    )
    links: list[SpanLink[KV]] | None = None
    dropped_links_count: Uint32Field | None = msgspec.field(default=None, name="droppedLinksCount")
    status: Status | None = None
    trace_id_: Alias | UnsetType = _named("trace_id")
    span_id_: Alias | UnsetType = _named("span_id")
    trace_state_: str | None = msgspec.field(default=None, name="trace_state")
    parent_span_id_: Alias | UnsetType = _named("parent_span_id")
    start_time_unix_nano_: Alias | UnsetType = _named("start_time_unix_nano")
    end_time_unix_nano_: Alias | UnsetType = _named("end_time_unix_nano")
    dropped_attributes_count_: Uint32Field | None = msgspec.field(
        default=None, name="dropped_attributes_count"
    )
    dropped_events_count_: Uint32Field | None = msgspec.field(
        default=None, name="dropped_events_count"
    )
    dropped_links_count_: Uint32Field | None = msgspec.field(
        default=None, name="dropped_links_count"
    )
    view: SpanView | None = msgspec.field(default=None, name=_READ)  # None: rejected

    def __post_init__(self) -> None:
        span_decoded(self)  # a FieldError: msgspec adds where the span is


class InstrumentationScope(msgspec.Struct, Generic[KV], gc=False):
    name: str | None = None
    version: str | None = None
    attributes: list[KV] | None = None
    dropped_attributes_count: Uint32Field | None = msgspec.field(
        default=None, name="droppedAttributesCount"
    )
    dropped_attributes_count_: Uint32Field | None = msgspec.field(
        default=None, name="dropped_attributes_count"
    )

    def __post_init__(self) -> None:
        scope_checked(self.attributes)
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
    dropped_attributes_count: Uint32Field | None = msgspec.field(
        default=None, name="droppedAttributesCount"
    )
    entity_refs: list[EntityRef] | None = msgspec.field(default=None, name="entityRefs")
    dropped_attributes_count_: Uint32Field | None = msgspec.field(
        default=None, name="dropped_attributes_count"
    )
    entity_refs_: list[EntityRef] | None = msgspec.field(default=None, name="entity_refs")
    service: str = msgspec.field(default="unknown", name=_READ)

    def __post_init__(self) -> None:
        self.service = resource_service(self.attributes)
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
        scopes = one_of(self.scope_spans, self.scope_spans_, "scopeSpans", "scope_spans")
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
        (ApiV3Answer if api_v3 else Request)[KeyValueFull if full else KeyValue], dec_hook=dec_hook
    )
    for api_v3 in (False, True)
    for full in (False, True)
}


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
    with _LOCK:
        try:
            for full in (False, True):
                reading = begin_request()
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
            end_request()  # nothing of this request kept
    request = got.result if isinstance(got, ApiV3Answer) else got
    if request is UNSET:
        return JsonDecoded([], names_spans=False)
    try:
        groups = one_of(
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
    if isinstance(cause, FieldError):
        below = ".".join(cause.path)
        where = f"{where}.{below}" if where and below else where or below
        text = cause.message
    else:
        text = _EXPECTED.sub(_expected_in_words, text)
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


def _expected_in_words(found: re.Match[str]) -> str:
    """msgspec's "Expected `array | null`, got `str`" as "expected an array or null, got a
    string"."""
    kinds = [_JSON_TYPES.get(k.strip(), "a value") for k in found.group(1).split("|")]
    said = "expected " + " or ".join(dict.fromkeys(kinds))
    if found.group(3):
        said += f", got {_JSON_TYPES.get(found.group(3), 'a value')}"
    return said


__all__ = ["MAX_DEPTH", "JsonDecoded", "decode"]
