"""The one OTLP/JSON decoder (loopwatch.service.otlp_json) against protobuf's own JSON parser,
on generated ``ExportTraceServiceRequest`` documents: every AnyValue kind, nested arrays and
key-value lists, empty, null and missing fields, fields under their protobuf names, hex ids of
odd and wrong lengths, base64 ids, integers past 64 bits, doubles as text ("NaN",
"Infinity"), unicode, enum names and numbers, values of the wrong JSON type, unknown fields.

For each document either both read it and give the same span views (protobuf's message through
the service's conversion, ``span_views``), or both refuse it, or the document holds one of the
cases listed below (STRICTER: the decoder refuses where protobuf reads; LENIENT: the other way),
which the decoder's docstring names too. The ids are the one place the two formats differ by
design (OTLP/JSON writes hex, protobuf's mapping base64): protobuf is given each id as base64 of
the bytes OTLP/JSON's rules read from it (``model_id``)."""

from __future__ import annotations

import base64
import copy
import json
import math
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from loopwatch.service.otlp import RequestError, span_views
from loopwatch.service.otlp_json import decode

# The decoder refuses these where protobuf's parser reads them (or refuses them too).
STRICTER = {
    "object as text or array": "a string or an array where an object belongs",
    "bad id": "an id neither hex nor base64 of 16 or 8 bytes, or hex with an odd number of digits",
    "both names": "a field the decoder reads, written under both its names",
    "not standard JSON": "NaN or Infinity literals, which Python's json module reads",
}
# The decoder reads these where protobuf's parser refuses them.
LENIENT = {
    "extension key": 'an unknown key written as an extension name ("[x]"): ignored',
}
_EXTENSION_KEY = re.compile(r"\[[a-zA-Z0-9\._]*\]$")  # protobuf's _VALID_EXTENSION_NAME
_HEX = frozenset("0123456789abcdefABCDEF")
_ID_FIELDS = ("trace_id", "span_id", "parent_span_id")
# the fields the decoder reads, per message: written under both names, refused
_READ_TWICE = {
    "ExportTraceServiceRequest": ("resource_spans",),
    "ResourceSpans": ("scope_spans",),
    "Span": ("trace_id", "span_id", "parent_span_id", "start_time_unix_nano", "end_time_unix_nano"),
    "AnyValue": tuple(f.name for f in AnyValue.DESCRIPTOR.fields),
}


def model_id(value: str) -> bytes | None:
    """The bytes OTLP/JSON's id rules read from ``value`` (None: not an id): hex digits are hex
    (an even number of them); else base64, either alphabet, padding optional, of 16 or 8
    bytes."""
    if not value:
        return b""
    if set(value) <= _HEX:
        return bytes.fromhex(value) if len(value) % 2 == 0 else None
    text = value.replace("-", "+").replace("_", "/")
    bare = text.rstrip("=")
    if len(text) - len(bare) > 2 or (len(text) != len(bare) and len(text) % 4):
        return None
    if len(bare) % 4 == 1 or not re.fullmatch(r"[A-Za-z0-9+/]*", bare):
        return None
    decoded = base64.b64decode(bare + "=" * (-len(bare) % 4))
    return decoded if len(decoded) in (16, 8) else None


def _fields(descriptor: Descriptor) -> dict[str, FieldDescriptor]:
    out = {f.name: f for f in descriptor.fields}
    out.update({f.json_name: f for f in descriptor.fields})
    return out


def cases(document: Any) -> set[str]:
    """The listed cases (STRICTER, LENIENT) a document holds."""
    found: set[str] = set()
    if _has_non_finite(document):
        found.add("not standard JSON")
    _message(document, ExportTraceServiceRequest.DESCRIPTOR, found, None)
    return found


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_non_finite(v) for v in value)
    return False


def _message(
    value: Any,
    descriptor: Descriptor,
    found: set[str],
    to_base64: dict[int, Any] | None,
    nested: bool = False,
) -> None:
    """Walk ``value`` as the message ``descriptor``: note the cases met; with ``to_base64``,
    rewrite ids as protobuf's mapping writes them. ``nested``: inside an array or a key-value
    list value, where the decoder reads a value's keys in their order, as protobuf does (so a
    kind under both names is read as protobuf reads it)."""
    if isinstance(value, str | list):
        found.add("object as text or array")
        return
    if not isinstance(value, dict):
        return
    fields = _fields(descriptor)
    nested = nested or descriptor.name in ("ArrayValue", "KeyValueList")
    for twice in () if nested else _READ_TWICE.get(descriptor.name, ()):
        field = descriptor.fields_by_name[twice]
        if field.name in value and field.json_name in value:
            found.add("both names")
    for key in list(value):
        field = fields.get(key)
        item = value[key]
        if field is None:
            if _EXTENSION_KEY.match(key):
                found.add("extension key")
            continue
        if item is None:
            continue
        if descriptor.name in ("Span", "Link") and field.name in _ID_FIELDS:
            if isinstance(item, str):
                bytes_ = model_id(item)
                if bytes_ is None:
                    found.add("bad id")
                elif to_base64 is not None:
                    value[key] = base64.b64encode(bytes_).decode()
            continue
        if field.message_type is None:
            continue
        if field.is_repeated:
            if isinstance(item, list):
                for each in item:
                    _message(each, field.message_type, found, to_base64, nested)
        else:
            _message(item, field.message_type, found, to_base64, nested)


def for_protobuf(document: Any) -> Any:
    """The document with each id as protobuf's mapping writes it (base64 of its bytes)."""
    out = copy.deepcopy(document)
    _message(out, ExportTraceServiceRequest.DESCRIPTOR, set(), {})
    return out


def protobuf_read(document: Any) -> tuple[list[str], int] | str:
    """(span views, spans rejected) through protobuf's parser and the service's conversion; or
    why protobuf refused it."""
    try:
        message = json_format.Parse(
            json.dumps(for_protobuf(document)),
            ExportTraceServiceRequest(),
            ignore_unknown_fields=True,
        )
    except Exception as e:  # anything protobuf raises is its refusal
        return f"{type(e).__name__}: {e}"
    decoded = span_views(message)
    return [repr(v) for v in decoded.spans], decoded.rejected


def decoder_read(document: Any) -> tuple[list[str], int] | str:
    try:
        read = decode(json.dumps(document).encode())
    except RequestError as e:
        return str(e)
    return [repr(v) for v in read.spans], read.rejected


# -- documents: valid ones (each value in a form protobuf reads), then a mutation or two ---------
TEXT = st.one_of(
    st.sampled_from(["", "a", "é", "😀", "\u2028", "support-agent"]), st.text(max_size=8)
)
KEYS = st.one_of(
    st.sampled_from(
        [
            "gen_ai.operation.name",
            "gen_ai.tool.name",
            "gen_ai.tool.call.arguments",
            "gen_ai.usage.input_tokens",  # never read: skipped
            "http.method",  # never read: skipped
            "service.name",
            "k",
            "",
        ]
    ),
    st.text(max_size=6),
)
# integers as protobuf reads them: numbers, text, whole floats, and what Python's int() reads
INTEGER_TEXTS = ["1e3", "1.0", "+5", "\t5", "5\n", "1_000", "٣", "-0", "007", "1E2"]


def integers(low: int, high: int) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.integers(low, high),
        st.integers(low, high).map(str),
        st.sampled_from([t for t in INTEGER_TEXTS if low <= int(float(t.strip())) <= high]),
        st.sampled_from([float(low), float(min(high, 2**53)), 2.0, -0.0]),
    )


INT64 = integers(-(2**63), 2**63 - 1)
UINT64 = st.integers(0, 2**64 - 1).map(str) | integers(0, 2**64 - 1)
UINT32 = integers(0, 2**32 - 1)
ENUMS = st.one_of(
    st.integers(0, 5),
    st.sampled_from(["STATUS_CODE_ERROR", "STATUS_CODE_OK", "SPAN_KIND_SERVER", "NO_SUCH_NAME"]),
    st.sampled_from(["2", " 1", "1.5", 2.0, 2.7, True, False, 2**31 - 1, -(2**31)]),
)
DOUBLES = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(-(2**70), 2**70),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "inf", "NAN", "1.5", " 2 ", "1_0", "1e400"]),
    st.booleans(),
)
BYTES = st.one_of(
    st.binary(max_size=6).map(lambda b: base64.b64encode(b).decode()),
    st.binary(max_size=6).map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")),
    st.sampled_from(["", "a!b", "é", "AA==AA"]),  # protobuf drops what is not base64
)


@st.composite
def ids(draw: Any, size: int) -> Any:
    raw = draw(st.binary(min_size=size, max_size=size))
    way = draw(st.integers(0, 23))
    if way < 17:
        return raw.hex()
    if way == 17:
        return raw.hex().upper()
    if way == 18:
        return base64.b64encode(raw).decode()
    if way == 19:
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")
    if way == 20:
        return draw(st.binary(max_size=20)).hex()  # a wrong length: its span is rejected
    if way == 21:
        return "00" * size  # all zeros: rejected
    return draw(st.sampled_from(["", None]))  # none: rejected


def _name(json_name: str, proto_name: str) -> st.SearchStrategy[str]:
    return st.integers(0, 5).map(lambda n: proto_name if n == 0 else json_name)


def _kind(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    values = st.fixed_dictionaries({}, optional={"values": st.lists(children, max_size=3)})
    pairs = st.fixed_dictionaries(
        {}, optional={"values": st.lists(key_values(children), max_size=3)}
    )
    return st.one_of(
        st.tuples(_name("stringValue", "string_value"), TEXT),
        st.tuples(_name("boolValue", "bool_value"), st.booleans()),
        st.tuples(_name("intValue", "int_value"), INT64),
        st.tuples(_name("doubleValue", "double_value"), DOUBLES),
        st.tuples(_name("bytesValue", "bytes_value"), BYTES),
        st.tuples(_name("arrayValue", "array_value"), values),
        st.tuples(_name("kvlistValue", "kvlist_value"), pairs),
        st.tuples(_name("stringValueStrindex", "string_value_strindex"), integers(0, 10)),
    ).map(lambda pair: {pair[0]: pair[1]})


@st.composite
def any_value(draw: Any, children: st.SearchStrategy[Any]) -> Any:
    value = draw(_kind(children) | st.just({}))
    way = draw(st.integers(0, 9))
    if way == 0:  # another kind, null: as if absent (before or after the one set)
        null = {draw(st.sampled_from(["intValue", "string_value", "arrayValue"])): None}
        value = {**null, **value} if draw(st.booleans()) else {**value, **null}
    elif way == 1:
        value["futureValue"] = 1
    return value


def key_values(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries(
        {},
        optional={
            "key": KEYS | st.none(),
            "value": values | st.none(),
            "keyStrindex": integers(0, 10),
        },
    )


LEAVES = st.fixed_dictionaries({"stringValue": TEXT}) | st.fixed_dictionaries({"intValue": INT64})
VALUES = st.recursive(any_value(LEAVES), any_value, max_leaves=5)
ATTRIBUTES = st.lists(key_values(VALUES), max_size=4)


def _field(draw: Any, out: dict[str, Any], names: tuple[str, str], value: Any) -> None:
    """Set a field under its JSON name, or its protobuf name; or null."""
    name = draw(_name(*names))
    out[name] = None if draw(st.integers(0, 11)) == 0 else draw(value)


def _maybe(draw: Any, one_in: int) -> bool:
    return bool(draw(st.integers(0, one_in - 1)) == 0)


def _snake(name: str) -> str:
    return re.sub(r"([A-Z])", r"_\1", name).lower()


@st.composite
def spans(draw: Any) -> Any:
    span: dict[str, Any] = {}
    _field(draw, span, ("traceId", "trace_id"), ids(16))
    _field(draw, span, ("spanId", "span_id"), ids(8))
    if draw(st.booleans()):
        _field(draw, span, ("parentSpanId", "parent_span_id"), ids(8))
    if _maybe(draw, 6):
        _field(draw, span, ("traceState", "trace_state"), TEXT)
    if draw(st.booleans()):
        span["flags"] = draw(st.sampled_from([0, 0x100, 0x300, 0x301, "768"]) | UINT32)
    if not _maybe(draw, 6):
        span["name"] = draw(TEXT)
    if draw(st.booleans()):
        span["kind"] = draw(ENUMS)
    _field(draw, span, ("startTimeUnixNano", "start_time_unix_nano"), UINT64)
    if not _maybe(draw, 5):
        _field(draw, span, ("endTimeUnixNano", "end_time_unix_nano"), UINT64)
    if not _maybe(draw, 5):
        span["attributes"] = draw(ATTRIBUTES)
    for counted in ("droppedAttributesCount", "droppedEventsCount", "droppedLinksCount"):
        if _maybe(draw, 10):
            _field(draw, span, (counted, _snake(counted)), UINT32)
    if _maybe(draw, 4):
        span["events"] = draw(st.lists(events(), max_size=2))
    if _maybe(draw, 6):
        span["links"] = draw(st.lists(links(), max_size=2))
    if not _maybe(draw, 3):
        span["status"] = draw(
            st.fixed_dictionaries({}, optional={"code": ENUMS | st.none(), "message": TEXT})
        )
    if _maybe(draw, 10):
        span["someFutureField"] = {"x": [1]}
    return span


@st.composite
def events(draw: Any) -> Any:
    event: dict[str, Any] = {}
    if draw(st.booleans()):
        _field(draw, event, ("timeUnixNano", "time_unix_nano"), UINT64)
    if not _maybe(draw, 4):
        event["name"] = draw(TEXT)
    if draw(st.booleans()):
        event["attributes"] = draw(ATTRIBUTES)
    if _maybe(draw, 10):
        _field(draw, event, ("droppedAttributesCount", "dropped_attributes_count"), UINT32)
    return event


@st.composite
def links(draw: Any) -> Any:
    link: dict[str, Any] = {}
    _field(draw, link, ("traceId", "trace_id"), ids(16))
    _field(draw, link, ("spanId", "span_id"), ids(8))
    if draw(st.booleans()):
        link["attributes"] = draw(ATTRIBUTES)
    if _maybe(draw, 4):
        link["flags"] = draw(UINT32)
    if _maybe(draw, 6):
        _field(draw, link, ("traceState", "trace_state"), TEXT)
    return link


@st.composite
def resources(draw: Any) -> Any:
    resource: dict[str, Any] = {}
    if not _maybe(draw, 5):
        named = {"key": "service.name", "value": draw(VALUES)}
        resource["attributes"] = [*draw(ATTRIBUTES), named, *draw(ATTRIBUTES)]
    if _maybe(draw, 10):
        _field(draw, resource, ("droppedAttributesCount", "dropped_attributes_count"), UINT32)
    if _maybe(draw, 10):
        ref = st.fixed_dictionaries(
            {},
            optional={
                "type": TEXT,
                "idKeys": st.lists(TEXT, max_size=2),
                "description_keys": st.lists(TEXT, max_size=2),
                "schemaUrl": TEXT,
            },
        )
        resource["entityRefs"] = draw(st.lists(ref, max_size=2))
    return resource


@st.composite
def scope_spans(draw: Any) -> Any:
    group: dict[str, Any] = {}
    if draw(st.booleans()):
        group["scope"] = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "name": TEXT,
                    "version": TEXT,
                    "attributes": ATTRIBUTES,
                    "droppedAttributesCount": UINT32,
                },
            )
        )
    group["spans"] = draw(st.lists(spans(), min_size=0 if _maybe(draw, 8) else 1, max_size=3))
    if _maybe(draw, 6):
        _field(draw, group, ("schemaUrl", "schema_url"), TEXT)
    return group


@st.composite
def valid_requests(draw: Any) -> Any:
    groups = []
    for _ in range(0 if _maybe(draw, 10) else draw(st.integers(1, 2))):
        group: dict[str, Any] = {}
        if not _maybe(draw, 4):
            group["resource"] = draw(resources())
        _field(
            draw,
            group,
            ("scopeSpans", "scope_spans"),
            st.lists(scope_spans(), min_size=1, max_size=2),
        )
        if draw(st.booleans()):  # the resource after its spans
            group = dict(reversed(list(group.items())))
        groups.append(group)
    request: dict[str, Any] = {}
    _field(draw, request, ("resourceSpans", "resource_spans"), st.just(groups))
    return request


# what a mutation writes in place of a value
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.sampled_from([[], [1], ["x"], ["name"], {}, "", "zz", "abc", "0x1f", "1.5", " 5"]),
    st.sampled_from(["9" * 25, "-" + "9" * 20, "nan", "Infinity", "[x]", "0" * 31]),
    st.sampled_from([{"stringValue": 1}, {"values": None}, {"values": [None]}, {"key": 5}]),
).map(copy.deepcopy)  # a fresh one: mutations change what they are put in


def _messages(descriptor: Descriptor, seen: dict[str, Descriptor]) -> dict[str, Descriptor]:
    if descriptor.full_name not in seen:
        seen[descriptor.full_name] = descriptor
        for f in descriptor.fields:
            if f.message_type is not None:
                _messages(f.message_type, seen)
    return seen


# each field's other name: traceId <-> trace_id (both names: a mutation)
OTHER_NAME = {
    name: other
    for message in _messages(ExportTraceServiceRequest.DESCRIPTOR, {}).values()
    for f in message.fields
    if f.json_name != f.name
    for name, other in ((f.json_name, f.name), (f.name, f.json_name))
}


def _positions(value: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key or index) in a document."""
    items = value.items() if isinstance(value, dict) else enumerate(value)
    for key, item in list(items):
        out.append((value, key))
        if isinstance(item, dict | list):
            _positions(item, out)
    return out


BAD_IDS = ["zz", "abc", "0x0102030405060708", "zz" * 16, "0102030405060708090", "AQID", "é" * 16]


@st.composite
def requests(draw: Any) -> Any:
    document = draw(valid_requests())
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2]))):
        places = _positions(document, [])
        if not places:
            break
        way = draw(st.integers(0, 9))
        if way == 9:  # an id that is not one
            places = [(p, k) for p, k in places if isinstance(k, str) and _snake(k) in _ID_FIELDS]
        elif way == 6:  # a field under both its names
            places = [(p, k) for p, k in places if isinstance(k, str) and k in OTHER_NAME]
        if not places:
            continue
        parent, key = places[draw(st.integers(0, len(places) - 1))]
        if way < 5:  # a value of another type, or one protobuf does not read
            parent[key] = draw(JUNK)
        elif way == 5:  # Python's json writes and reads these; standard JSON has no such thing
            parent[key] = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
        elif way == 6:
            parent[OTHER_NAME[key]] = copy.deepcopy(parent[key])
        elif way == 7 and isinstance(parent, dict):  # a second kind of value
            parent[draw(st.sampled_from(["boolValue", "int_value", "arrayValue"]))] = draw(
                st.sampled_from([True, "5", {"values": []}])
            )
        elif way == 8 and isinstance(parent, dict):
            parent[draw(st.sampled_from(["[ext.name]", "unknownField", "[]"]))] = draw(JUNK)
        elif way == 9:
            parent[key] = draw(st.sampled_from(BAD_IDS))
        elif isinstance(parent, list):
            parent.insert(key, draw(JUNK))
        else:
            del parent[key]
    return document


_TRACE, _SPAN = "0102030405060708090a0b0c0d0e0f10", "0102030405060708"


def _one_span(**fields: Any) -> dict[str, Any]:
    span = {"traceId": _TRACE, "spanId": _SPAN, "name": "n", **fields}
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}


@pytest.mark.slow
def test_the_decoder_reads_what_protobuf_reads_and_gives_the_same_span_views() -> None:
    seen: Counter[str] = Counter()

    @settings(
        max_examples=1000,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(requests())
    @example(_one_span(status="x"))  # object as text or array
    @example(_one_span(spanId="zz"))  # bad id
    @example(_one_span(trace_id=_TRACE))  # both names
    @example(_one_span(attributes=[{"key": "k", "value": {"doubleValue": math.nan}}]))
    @example(_one_span(**{"[ext.name]": 1}))  # extension key
    def check(document: Any) -> None:
        listed = cases(document)
        ours, theirs = decoder_read(document), protobuf_read(document)
        strict, lenient = listed & STRICTER.keys(), listed & LENIENT.keys()
        what = (
            f"{json.dumps(document)}\nlisted: {sorted(listed)}\ndecoder: {ours}\nprotobuf: {theirs}"
        )
        if strict:  # refused, whatever protobuf does
            assert isinstance(ours, str), what
            seen.update(f"refused: {c}" for c in strict)
            seen["refused, protobuf reads" if not isinstance(theirs, str) else "both refuse"] += 1
        elif isinstance(theirs, str):
            assert isinstance(ours, str) or lenient, what
            seen["both refuse" if isinstance(ours, str) else "read, protobuf refuses"] += 1
        else:
            assert ours == theirs, what
            seen["same spans" if theirs[0] else "same, no spans"] += 1
            seen["rejected spans"] += bool(theirs[1])

    check()
    print(dict(seen))
    # each kind of outcome was met, often: the generated documents reach every case (bounds well
    # under what runs draw: the documents drawn differ with what else a session imports)
    assert seen["same spans"] >= 250, seen
    assert seen["both refuse"] >= 120, seen
    assert seen["rejected spans"] >= 200, seen
    assert seen["refused, protobuf reads"] >= 40, seen
    assert seen["read, protobuf refuses"] >= 1, seen
    for case in STRICTER:
        assert seen[f"refused: {case}"] >= 1, (case, seen)


def test_the_listed_lenient_cases_are_read_and_protobuf_refuses_them() -> None:
    """A key twice in an object: the last one counts (protobuf's Python parser refuses the
    object). An unknown key written like an extension name: ignored like any unknown key."""
    body = json.dumps(_one_span(name="first")).replace(
        '"name": "first"', '"name": "a", "name": "b"'
    )
    [view] = decode(body.encode()).spans
    assert view.name == "b"
    assert "duplicate key name" in str(protobuf_refusal(body))
    document = _one_span(**{"[ext.name]": 1})
    assert cases(document) == {"extension key"}
    assert [v.name for v in decode(json.dumps(document).encode()).spans] == ["n"]
    assert "does not have extensions" in str(protobuf_refusal(json.dumps(document)))


def protobuf_refusal(text: str) -> Exception | None:
    try:
        json_format.Parse(text, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except json_format.ParseError as e:
        return e
    return None


def test_otlps_legacy_scope_name_is_read_too() -> None:
    """``instrumentationLibrarySpans`` (OTLP before 0.15, old Tempo): read as ``scopeSpans``,
    beside them; protobuf ignores it as an unknown field."""
    document = _one_span()
    group = document["resourceSpans"][0]
    group["instrumentationLibrarySpans"] = [
        {
            "instrumentationLibrary": {"name": "old"},
            "spans": [{"traceId": _TRACE, "spanId": "0a" * 8}],
        }
    ]
    read = decode(json.dumps(document).encode())
    assert [v.span_id for v in read.spans] == [int(_SPAN, 16), int("0a" * 8, 16)]
    assert protobuf_read(document) == (protobuf_read(_one_span())[0], 0)


def test_each_refusal_names_the_field() -> None:
    cases_: dict[str, dict[str, Any]] = {
        "resourceSpans[0].scopeSpans[0].spans[0].traceId: an odd number of hex digits: '012'": {
            "traceId": "012"
        },
        "resourceSpans[0].scopeSpans[0].spans[0].spanId: not a hex or base64 id: 'zz'": {
            "spanId": "zz"
        },
        "resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano: "
        "18446744073709551616 is out of range (0 to 18446744073709551615)": {
            "startTimeUnixNano": str(2**64)
        },
        "resourceSpans[0].scopeSpans[0].spans[0].attributes[1].value.intValue: "
        "not an integer: '1.5'": {
            "attributes": [{"key": "a"}, {"key": "b", "value": {"intValue": "1.5"}}]
        },
        "resourceSpans[0].scopeSpans[0].spans[0].attributes[0].value.boolValue: "
        "more than one kind of value": {
            "attributes": [{"key": "a", "value": {"stringValue": "x", "boolValue": True}}]
        },
        "resourceSpans[0].scopeSpans[0].spans[0].events[0].attributes[0].value.arrayValue: "
        "expected an object, got a string": {
            "events": [{"attributes": [{"key": "a", "value": {"arrayValue": "x"}}]}]
        },
        "resourceSpans[0].scopeSpans[0].spans[0]: traceId and trace_id: one field written "
        "under both names": {"trace_id": _TRACE},
        "resourceSpans[0].scopeSpans[0].spans[0].status.code: expected an integer <= 2147483647": {
            "status": {"code": 2**32}
        },
        "resourceSpans[0].scopeSpans[0].spans[0].status.code: 4294967296 is out of range "
        "for an enum": {"status": {"code": str(2**32)}},
    }
    for message, fields in cases_.items():
        with pytest.raises(RequestError) as refused:
            decode(json.dumps(_one_span(**fields)).encode())
        assert str(refused.value) == message
    deep: Any = {"stringValue": "x"}
    for _ in range(47):  # an AnyValue at depth 6 + 2 a level: 100 messages, protobuf's most
        deep = {"arrayValue": {"values": [deep]}}
    [view] = decode(json.dumps(_one_span(attributes=[{"key": "k", "value": deep}])).encode()).spans
    assert str(view.attributes["k"]).count("(") == 47
    deeper = {"arrayValue": {"values": [deep]}}
    with pytest.raises(RequestError, match="nested too deeply"):
        decode(json.dumps(_one_span(attributes=[{"key": "k", "value": deeper}])).encode())
    assert isinstance(protobuf_read(_one_span(attributes=[{"key": "k", "value": deeper}])), str)


def test_serve_and_replay_give_the_same_span_views_for_the_same_bytes(tmp_path: Path) -> None:
    """The same bytes, posted to the service's OTLP/HTTP decoding and written as a line the
    file exporter's way for replay, give the same span views: the views the service queues are
    those replay reads."""
    from prometheus_client import CollectorRegistry

    from loopwatch.core.config import Config
    from loopwatch.history.formats import Reader
    from loopwatch.metrics.exporter import LoopwatchMetrics
    from loopwatch.service import http_server
    from loopwatch.service.pipeline import LogBatch, Pipeline
    from testkit.stored import collector_json_line
    from tests.support.replay import batches, incident_turns, record

    spans, p = record(incident_turns(random.Random(3))[:6])
    p.close()
    bodies = [collector_json_line(r).rstrip(b"\n") for r in batches(spans)]
    odd = json.loads(bodies[0])
    for rs in odd["resourceSpans"]:
        rs["scope_spans"] = rs.pop("scopeSpans")  # protobuf's names
        first = rs["scope_spans"][0]["spans"][0]
        first["trace_id"] = base64.b64encode(bytes.fromhex(first.pop("traceId"))).decode()
        first["status"] = None
        first["attributes"].append({"key": "x", "value": {"doubleValue": "Infinity"}})
    bodies.append(json.dumps(odd).encode())
    served = []
    for body in bodies:
        pipeline = Pipeline(Config(), LoopwatchMetrics(CollectorRegistry()), worker=False)
        answer = http_server.decode(pipeline, http_server.JSON, "", body, 1 << 30)
        assert answer.code == 200
        served.append(
            [
                repr(v)
                for batch in pipeline.worker.pending()
                if not isinstance(batch, LogBatch)  # (spans only: a logs batch is not one)
                for v in batch
            ]
        )
    path = tmp_path / "t.json"
    path.write_bytes(b"\n".join(bodies) + b"\n")
    replayed = [[repr(v) for v in batch] for batch in Reader([str(path)]).batches()]
    assert replayed == served
    assert sum(map(len, served)) == len(spans) + len(
        json.loads(bodies[-1])["resourceSpans"][0]["scope_spans"][0]["spans"]
    )
