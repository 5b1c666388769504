"""Protobuf's wire format read by hand where encoders write it the usual way: a span's fields, an
attribute's text or small integer. Anything else (a field of another wire type, a group, a
varint past ten bytes, a length past the end, text that is not UTF-8) is answered with "not
read here", and the caller reads those bytes with protobuf's own parser, which decides."""

from __future__ import annotations

from typing import Final

# A span's fields (opentelemetry-proto's trace.proto), as (number << 3 | wire type) tags.
_TRACE_ID: Final = 0x0A
_SPAN_ID: Final = 0x12
_TRACE_STATE: Final = 0x1A
_PARENT_ID: Final = 0x22
_NAME: Final = 0x2A
_START: Final = 0x39
_END: Final = 0x41
_ATTRIBUTE: Final = 0x4A
_STATUS: Final = 0x7A
_FLAGS: Final = 0x85  # field 16, fixed32: the tag's first byte (its second is 0x01)
_VARINT: Final = 0
_FIXED64: Final = 1
_LENGTH: Final = 2
_FIXED32: Final = 5
# read by protobuf (they are checked there): events and links
_PARSED_BY_PROTOBUF: Final = (0x5A, 0x6A)

_INT64_LIMIT: Final = 1 << 63

# trace id, span id, parent id, name, start, end, attributes (serialized KeyValues), status
# (serialized), flags
SpanFields = tuple[bytes, bytes, bytes, str, int, int, list[bytes], bytes, int]


def varint(raw: bytes, at: int) -> tuple[int, int]:
    """(value, offset after it) of the varint at ``at``; value -1 past ten bytes or the end."""
    value = shift = 0
    end = min(len(raw), at + 10)
    while at < end:
        byte = raw[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
    return -1, at


def _skip(raw: bytes, at: int, wire: int) -> int:
    """The offset after an unread field's value; -1 for a wire type not read here (groups)."""
    if wire == _VARINT:
        value, at = varint(raw, at)
        return at if value >= 0 else -1
    if wire == _FIXED64:
        return at + 8 if at + 8 <= len(raw) else -1
    if wire == _LENGTH:
        size, at = varint(raw, at)
        return at + size if size >= 0 and at + size <= len(raw) else -1
    if wire == _FIXED32:
        return at + 4 if at + 4 <= len(raw) else -1
    return -1


def span_fields(raw: bytes) -> SpanFields | None:
    """The fields loopwatch reads of one serialized ``Span``, the last of a field written twice
    winning as in protobuf; None when the span has events or links (protobuf checks and reads
    those) or any layout not read here."""
    trace_id = span_id = parent = status = b""
    name = ""
    start = end = flags = 0
    attributes: list[bytes] = []
    at = 0
    size = len(raw)
    # (written out: compiled, each helper call or int.from_bytes costs more than these lines)
    while at < size:
        tag = raw[at]
        at += 1
        if tag & 7 == _LENGTH and tag < 0x80:
            length = raw[at] if at < size else 0x80
            if length < 0x80:  # most: one byte
                at += 1
            else:
                length, at = varint(raw, at)
                if length < 0:
                    return None
            first, at = at, at + length
            if at > size:
                return None
            if tag == _ATTRIBUTE:
                attributes.append(raw[first:at])
            elif tag == _TRACE_ID:
                trace_id = raw[first:at]
            elif tag == _SPAN_ID:
                span_id = raw[first:at]
            elif tag == _PARENT_ID:
                parent = raw[first:at]
            elif tag == _STATUS:
                status = raw[first:at]
            elif tag in (_NAME, _TRACE_STATE):
                try:  # a string field: protobuf refuses text that is not UTF-8
                    text = raw[first:at].decode("utf-8")
                except UnicodeDecodeError:
                    return None
                if tag == _NAME:
                    name = text
            elif tag in _PARSED_BY_PROTOBUF or tag >> 3 == 0:
                return None  # events, links; field number 0, refused by protobuf
        elif tag in (_START, _END):
            if at + 8 > size:
                return None
            value = (
                raw[at]
                | raw[at + 1] << 8
                | raw[at + 2] << 16
                | raw[at + 3] << 24
                | raw[at + 4] << 32
                | raw[at + 5] << 40
                | raw[at + 6] << 48
                | raw[at + 7] << 56
            )
            if tag == _START:
                start = value
            else:
                end = value
            at += 8
        elif tag == _FLAGS:
            if at + 5 > size or raw[at] != 0x01:
                return None
            flags = raw[at + 1] | raw[at + 2] << 8 | raw[at + 3] << 16 | raw[at + 4] << 24
            at += 5
        elif tag >= 0x80:
            return None  # a field numbered past 15
        else:
            # kind, the dropped counts, a field of another wire type than its own (protobuf
            # skips it as unknown): read past; field number 0 is refused by protobuf
            at = _skip(raw, at, tag & 7) if tag >> 3 else -1
            if at < 0:
                return None
    return trace_id, span_id, parent, name, start, end, attributes, status, flags


def text_value(raw: bytes, at: int) -> str | None:
    """The string at ``at`` when the rest of ``raw`` is a value written as encoders write a
    string (field 2, an AnyValue holding only field 1) and valid UTF-8; None for anything
    else, which protobuf then reads (and rejects)."""
    end = len(raw)
    if at + 1 >= end or raw[at] != 0x12:
        return None
    # a length in one byte (under 128: most) read here, a longer one by varint
    outer = raw[at + 1]
    at += 2
    if outer >= 0x80:
        outer, at = varint(raw, at - 1)
    if outer < 0 or at + outer != end or at + 1 >= end or raw[at] != 0x0A:
        return None
    inner = raw[at + 1]
    at += 2
    if inner >= 0x80:
        inner, at = varint(raw, at - 1)
    if inner < 0 or at + inner != end:
        return None
    try:
        return raw[at:].decode("utf-8")
    except UnicodeDecodeError:
        return None


def int_value(raw: bytes, at: int) -> int:
    """The integer at ``at`` when the rest of ``raw`` is a value written as encoders write a
    small non-negative int (field 2, an AnyValue holding only field 3: a token count); -1 for
    anything else, which protobuf then reads."""
    if at + 2 >= len(raw) or raw[at] != 0x12 or raw[at + 2] != 0x18:
        return -1
    if raw[at + 1] != len(raw) - at - 2:
        return -1
    value, end = varint(raw, at + 3)
    # past 63 bits the varint is a negative int64, which protobuf reads
    return value if end == len(raw) and value < _INT64_LIMIT else -1
