"""Protobuf's wire format written by hand, for layouts no encoder writes."""

from __future__ import annotations


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes(out) + bytes([value])


def delimited(field: int, payload: bytes) -> bytes:
    """A length-delimited field: its tag, its length, ``payload``."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload
