"""OTLP/JSON's decoded structs (:mod:`loopwatch.service.otlp_json`) read into span views and
checked as protobuf's JSON parser checks them: the decoder's hook for the fields it cannot type
(integers in text, ranges, enum names, ids, one kind per value, depth), each span read into its
view as msgspec finishes it, resources and scopes checked. What the hooks met in the request
being decoded is module-wide (:class:`Reading`), one request at a time (the decoder's lock).
Compiled with the hot path: it takes the structs as they come (``Any``), so it needs none of
their classes."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from msgspec import UNSET
from msgspec.structs import astuple

from loopwatch.conventions.read import UNREAD_PREFIXES
from loopwatch.core.span_view import EventView, SpanView
from loopwatch.service.otlp import REMOTE_PARENT, valid_ids

MAX_DEPTH: Final = 100
_I32_MIN: Final = -(1 << 31)
_I32_MAX: Final = (1 << 31) - 1
_U32_MAX: Final = (1 << 32) - 1
_I64_MIN: Final = -(1 << 63)
_I64_MAX: Final = (1 << 63) - 1
_U64_MAX: Final = (1 << 64) - 1
_T = TypeVar("_T")


# -- fields read by dec_hook when present: never read, or rare ------------------------------------
class Uint32Field:
    __slots__ = ()


class Int32Field:
    __slots__ = ()


class Uint64Field:
    __slots__ = ()


class LinkIdField:
    __slots__ = ()


class Alias:
    """A span field loopwatch reads, under its protobuf name (``trace_id``): its JSON value,
    moved to the JSON-named field by :func:`_merge` (once one is met, every span looks)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class OtherKind:
    """An ``AnyValue``'s kind other than a string or an integer under its JSON name: its JSON
    value (null included), counted as met (:class:`Reading`)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


_CHECKED: Final[dict[type, Any]] = {
    t: t() for t in (Uint32Field, Int32Field, Uint64Field, LinkIdField)
}


class Reading:
    """What the hooks have met in the request being decoded. A value's kinds other than a
    string or an integer (``OtherKind``) are counted as they are decoded, and again as a value's
    kinds are read in full (``counted``): the struct holding the values (a span, a resource,
    a scope), once decoded, finds the two counts equal, or a value it took for its string or
    integer alone held another kind too."""

    __slots__ = ("aliases", "base64_ids", "counted", "kinds")

    def __init__(self) -> None:
        self.aliases = False  # a span field under its protobuf name
        self.base64_ids = False
        self.kinds = 0  # OtherKind fields decoded since the last struct holding values
        self.counted = 0  # of those, met by _value_in_full


# The hooks take no arguments but the struct: the request's state is module-wide, one request at a
# time (otlp_json's lock).
_reading = Reading()


def begin_request() -> Reading:
    """A request's decoding begins: nothing met yet."""
    global _reading
    _reading = Reading()
    return _reading


def end_request() -> None:
    """A request's decoding ended: nothing of it kept."""
    global _reading
    _reading = Reading()


def dec_hook(kind: type, value: Any) -> Any:
    """msgspec's ``dec_hook``: the fields of the classes above, as protobuf checks them."""
    if kind is OtherKind:
        _reading.kinds += 1
        return OtherKind(value)
    if kind is Alias:
        _reading.aliases = True
        return Alias(value)
    if kind is Uint32Field:
        _integer(value, 0, _U32_MAX)
    elif kind is Uint64Field:
        _integer(value, 0, _U64_MAX)
    elif kind is Int32Field:
        _integer(value, _I32_MIN, _I32_MAX)
    elif kind is LinkIdField:
        _id(value, note=False)
    else:
        raise NotImplementedError
    return _CHECKED[kind]


def one_of(json_named: Any, proto_named: Any, json_name: str, proto_name: str) -> Any:
    if proto_named is UNSET:
        return json_named
    if json_named is not UNSET:
        raise ValueError(f"{json_name} and {proto_name}: one field written under both names")
    return proto_named


# -- checks and values, as protobuf's JSON parser reads them ---------------------------------------
class FieldError(ValueError):
    """What is wrong, and where below the struct whose hook met it (``attributes[3].value``)."""

    def __init__(self, message: str, *path: str) -> None:
        super().__init__(message)
        self.message = message
        self.path = list(path)

    def within(self, *segments: str) -> FieldError:
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
            raise FieldError(f"not an integer: {value!r}")
        number = int(value)
    elif type(value) is str:
        if " " in value:
            raise FieldError(f"not an integer: {_shown(value)}")
        try:
            number = int(value)
        except ValueError:
            try:
                whole = float(value)
            except ValueError:
                raise FieldError(f"not an integer: {_shown(value)}") from None
            if not whole.is_integer():
                raise FieldError(f"not an integer: {_shown(value)}") from None
            number = int(whole)
    else:
        raise FieldError(f"expected an integer, got {_json_type(value)}")
    if not low <= number <= high:
        raise FieldError(f"{_shown(number)} is out of range ({low} to {high})")
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
        raise FieldError(f"expected an enum name or number, got {_json_type(value)}")
    if not _I32_MIN <= number <= _I32_MAX:
        raise FieldError(f"{_shown(number)} is out of range for an enum")
    return number


def _double(value: Any) -> float:
    """A double: a number (or a boolean), or text Python's ``float`` reads, but ``"nan"``."""
    if type(value) in (float, int, bool):
        try:
            return float(value)
        except OverflowError:
            raise FieldError(f"{_shown(value)} is out of a double's range") from None
    if type(value) is str:
        if value != "nan":
            try:
                return float(value)
            except ValueError:
                pass
        raise FieldError(f"not a number: {_shown(value)} (NaN, Infinity and -Infinity are)")
    raise FieldError(f"expected a number, got {_json_type(value)}")


def _bytes(value: Any) -> bytes:
    """Bytes in base64, as protobuf decodes them (either alphabet, padding optional, other
    characters dropped)."""
    if type(value) is not str:
        raise FieldError(f"expected base64 text, got {_json_type(value)}")
    encoded = value.encode()
    try:
        return base64.urlsafe_b64decode(encoded + b"=" * (4 - len(encoded) % 4))
    except (binascii.Error, ValueError):
        raise FieldError(f"not base64: {_shown(value)}") from None


_HEX_DIGITS: Final = frozenset("0123456789abcdefABCDEF")


def _id(value: Any, note: bool = True) -> bytes:
    """A trace, span or parent id: hex (OTLP/JSON) of any length, or base64 (protobuf's
    mapping) of 16 or 8 bytes; empty for none. ``note``: base64 ids are noted (replay says
    so)."""
    if value is None or value is UNSET or value == "":
        return b""
    if type(value) is not str:
        raise FieldError(f"expected a hex id, got {_json_type(value)}")
    if _HEX_DIGITS.issuperset(value):
        if len(value) % 2:
            raise FieldError(f"an odd number of hex digits: {_shown(value)}")
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
    raise FieldError(f"not a hex or base64 id: {_shown(value[:40])}")


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


def _too_deep() -> FieldError:
    return FieldError(f"nested too deeply (protobuf reads {MAX_DEPTH} levels of messages)")


def _any(value: Any, depth: int) -> Any:
    """An ``AnyValue`` (a JSON object) at message depth ``depth`` as the Python value the
    service's conversion gives: its one kind's value, or None for none (or a string index,
    which means nothing outside a profile's dictionary)."""
    if type(value) is not dict:
        raise FieldError(f"expected an object, got {_json_type(value)}")
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
            raise FieldError("more than one kind of value", key)
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
                raise FieldError(f"expected a string, got {_json_type(raw)}")
            return raw
        if kind == _DOUBLE:
            return _double(raw)
        if kind == _INT:
            return _integer(raw, _I64_MIN, _I64_MAX)
        if kind == _BOOL:
            if type(raw) is not bool:
                raise FieldError(f"expected true or false, got {_json_type(raw)}")
            return raw
        if kind == _ARRAY:
            return _array(raw, depth + 1)
        if kind == _KVLIST:
            return _kvlist(raw, depth + 1)
        if kind == _BYTES:
            return _bytes(raw)
        _integer(raw, _I32_MIN, _I32_MAX)  # a string index: nothing to read
        return None
    except FieldError as e:
        raise e.within(name) from None


def _values(message: Any, depth: int) -> list[Any]:
    """The ``values`` of an ``ArrayValue`` or ``KeyValueList`` (a JSON object) at ``depth``."""
    if type(message) is not dict:
        raise FieldError(f"expected an object, got {_json_type(message)}")
    if depth > MAX_DEPTH:
        raise _too_deep()
    values = message.get("values")
    if values is None:
        return []
    if type(values) is not list:
        raise FieldError(f"expected an array, got {_json_type(values)}", "values")
    return values


def _array(message: Any, depth: int) -> tuple[Any, ...]:
    out = []
    for i, item in enumerate(_values(message, depth)):
        try:
            if item is None:
                raise FieldError("null in an array")
            out.append(_any(item, depth + 1))
        except FieldError as e:
            raise e.within(f"values[{i}]") from None
    return tuple(out)


def _kvlist(message: Any, depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, pair in enumerate(_values(message, depth)):
        try:
            key, value = _pair(pair, depth + 1)
        except FieldError as e:
            raise e.within(f"values[{i}]") from None
        out[key] = value
    return out


def _pair(pair: Any, depth: int) -> tuple[str, Any]:
    """A ``KeyValue`` inside a value (a JSON object) at ``depth``."""
    if type(pair) is not dict:
        raise FieldError(f"expected an object, got {_json_type(pair)}")
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
                    raise FieldError(f"expected a string, got {_json_type(raw)}")
                key = raw
            elif name == "value":
                value = _any(raw, depth + 1)
            elif name in ("keyStrindex", "key_strindex"):
                _integer(raw, _I32_MIN, _I32_MAX)
        except FieldError as e:
            raise e.within(name) from None
    return key, value


# -- the structs' values --------------------------------------------------------------------------
# each AnyValue struct's fields in order: (JSON name, kind), by its class
_FIELDS_OF: dict[type, tuple[tuple[str, int], ...]] = {}


def _fields_of(struct: type) -> tuple[tuple[str, int], ...]:
    fields = _FIELDS_OF.get(struct)
    if fields is None:
        names: tuple[str, ...] = getattr(struct, "__struct_encode_fields__")  # noqa: B009
        fields = _FIELDS_OF[struct] = tuple((name, _KINDS[name]) for name in names)
    return fields


def _value(value: Any, depth: int) -> Any:
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
            and not value.every_field  # none of AnyValueFull's other fields
            and value.double_value.__class__ is OtherKind
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


def _value_in_full(value: Any, depth: int) -> Any:
    """An ``AnyValue`` struct as :func:`_any` reads a JSON one: its one kind (of its fields
    written, those not null), never one field under both its names."""
    written: dict[int, str] = {}  # kind -> the name it was written under
    found: Any = None
    met = False
    for raw, (name, kind) in zip(astuple(value), _fields_of(value.__class__), strict=True):
        if raw is UNSET:
            continue
        if raw.__class__ is OtherKind:
            _reading.counted += 1
            raw = raw.value
        if kind in written:
            raise FieldError(f"{written[kind]} and {name}: one field written under both names")
        written[kind] = name
        if raw is None:
            continue
        if met:
            raise FieldError("more than one kind of value", name)
        met = True
        if depth > MAX_DEPTH:
            raise _too_deep()
        found = _kind_value(kind, raw, depth, name)
    return found


def _checked(read: Callable[[Sequence[Any], int], _T], pairs: Sequence[Any], depth: int) -> _T:
    """``read(pairs, depth)`` of a struct's values in full: the kinds the hooks met all among
    them (see Reading), else some were in an object's key written twice, the first one
    dropped."""
    reading = _reading
    kinds = reading.kinds
    reading.kinds = reading.counted = 0
    got = read(pairs, depth)
    if reading.counted != kinds:
        raise FieldError("an object holds a key twice")
    reading.counted = 0
    return got


def _all_attributes(pairs: Sequence[Any], depth: int) -> dict[str, Any]:
    return _attributes(pairs, depth, True)


def scope_checked(pairs: Sequence[Any] | None) -> None:
    """A scope's attributes, checked (loopwatch keeps none)."""
    _checked(_all_attributes, pairs or [], _SCOPE_VALUE_DEPTH)


def resource_service(pairs: Sequence[Any] | None) -> str:
    """The service a resource's attributes name (every value checked)."""
    return _checked(_service, pairs or [], _RESOURCE_VALUE_DEPTH)


def _read_value(value: Any, depth: int, full: bool) -> Any:
    if value is None:
        return None
    text = value.string_value
    if full:
        return _value_in_full(value, depth)
    if text.__class__ is str and value.int_value is UNSET:
        return text
    return _value(value, depth)


def _attributes(pairs: Sequence[Any], depth: int, full: bool) -> dict[str, Any]:
    """Key-values whose values are at message depth ``depth``, every one kept (``full``: each
    value read in full)."""
    out: dict[str, Any] = {}
    for i, kv in enumerate(pairs):
        try:
            got = _read_value(kv.value, depth, full)
        except FieldError as e:
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


def _span_attributes(pairs: Sequence[Any], kinds: int) -> dict[str, Any]:
    """A span's attributes, without those the conventions never read; each value checked, the
    skipped ones as little as that takes: an integer read, and, when the hooks met kinds
    (``kinds``), each value without a string read in full (see Reading)."""
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
    except FieldError as e:
        index = next(i for i, each in enumerate(pairs) if each is kv)
        raise e.within(f"attributes[{index}]", "value") from None
    return out


def _service(pairs: Sequence[Any], depth: int) -> str:
    """The service a resource's attributes name: its first ``service.name`` (each value read in
    full: checked)."""
    service: Any = None
    named = False
    for i, kv in enumerate(pairs):
        try:
            value = _read_value(kv.value, depth, True)
        except FieldError as e:
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


def _merge(span: Any) -> None:
    """The read fields written under their protobuf names moved to their JSON names."""
    for field, alias, json_name in _SPAN_ALIASES:
        written = getattr(span, alias)
        if written is not UNSET:
            if getattr(span, field) is not UNSET:
                raise FieldError(f"{json_name} and {field}: one field written under both names")
            setattr(span, field, written.value)


def _field(name: str, read: Callable[[Any], _T], value: Any) -> _T:
    """``read(value)``, what is wrong with it said of the field ``name``."""
    try:
        return read(value)
    except FieldError as e:
        raise e.within(name) from None


def _u32(value: Any) -> int:
    return _integer(value, 0, _U32_MAX)


def _kind(value: Any) -> int:
    return _enum(value, _KIND_NAMES)


def _status_code(value: Any) -> int:
    return _enum(value, _STATUS_NAMES)


def _events(events: list[Any], full: bool) -> tuple[EventView, ...]:
    out = []
    for i, event in enumerate(events):
        try:
            attributes = _attributes(event.attributes or [], _EVENT_VALUE_DEPTH, full)
        except FieldError as e:
            raise e.within(f"events[{i}]") from None
        name = event.name
        out.append(EventView("" if name is None else name, attributes))
    return tuple(out)


def _links(links: list[Any], full: bool) -> None:
    for i, link in enumerate(links):
        try:
            _attributes(link.attributes or [], _EVENT_VALUE_DEPTH, full)
        except FieldError as e:
            raise e.within(f"links[{i}]") from None


def _in_full(span: Any, kinds: int) -> None:
    """A span's values read again in full, the kinds the hooks met counted (see Reading): a
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
        raise FieldError("an object holds a key twice")


def _hex_id(raw: Any, digits: int, name: str) -> bytes:
    """An id field: the file exporter's hex of ``digits`` digits read here at once, anything
    else as :func:`_id` reads it (what is wrong said of the field ``name``)."""
    if raw.__class__ is str and len(raw) == digits:
        try:
            found = bytes.fromhex(raw)
        except ValueError:
            found = b""
        if len(found) * 2 == digits:
            return found
    return _field(name, _id, raw)


def _nanos(raw: Any, name: str) -> int:
    """A time field: the file exporter's text of digits or a number read here at once, anything
    else as :func:`_time` reads it."""
    if raw.__class__ is str and raw.isdecimal() and len(raw) < 20:
        return int(raw)
    if raw.__class__ is int and 0 <= raw <= _U64_MAX:
        return int(raw)
    return _field(name, _time, raw)


def _status(status: Any) -> tuple[int, str]:
    """A span's status: (code, message); (0, "") when absent."""
    if status is None:
        return 0, ""
    code: Any = status.code
    if code.__class__ is not int:  # a name (protobuf's JSON writes them), else in full
        named = _STATUS_NAMES.get(code) if code.__class__ is str else None
        if named is not None:
            code = named
        else:
            code = 0 if code is None else _field("status.code", _status_code, code)
    return int(code), status.message or ""


def span_decoded(span: Any) -> None:
    """A span msgspec has just built: checked, read into its view (None when its ids are
    invalid), its attributes, events and links dropped."""
    reading = _reading
    if reading.aliases:
        _merge(span)
    trace_id = _hex_id(span.trace_id, 32, "traceId")
    span_id = _hex_id(span.span_id, 16, "spanId")
    parent = _hex_id(span.parent_span_id, 16, "parentSpanId")  # unset: b"", a root
    start = _nanos(span.start_time_unix_nano, "startTimeUnixNano")
    end = _nanos(span.end_time_unix_nano, "endTimeUnixNano")
    flags: Any = span.flags
    if flags.__class__ is not int:
        flags = 0 if flags is None else _field("flags", _u32, flags)
    kind = span.kind
    if kind.__class__ is not int and kind is not None and kind not in _KIND_NAMES:
        _field("kind", _kind, kind)
    code, message = _status(span.status)
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
