"""Compressed stored traces, decompressed as they are read: gzip (the standard library) and zstd
(the Collector file exporter's ``compression: zstd``; the optional ``zstandard`` package, the
``zstd`` extra).

The file exporter writes zstd two ways. With its native compression (the newer way), the whole
file is a zstd stream of what it would write uncompressed (one frame per write when it rotates
files, else frames as it flushes). The older way compresses each request into a frame of its
own and writes each frame after its length (4 bytes, big-endian), JSON or protobuf alike. The
first is a stream here like gzip; the second is read by the length-prefixed reader, a frame a
message (:func:`unzstd_message`)."""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable
from typing import IO, Any

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# Bytes handed to the decompressor at a time. zstd turns 4 bytes into a block of up to 128 KiB,
# so its input goes in small pieces to bound what one call can return (64 MiB, about what
# gzip's 64 KiB pieces can at its 1032:1).
_GZIP_PIECE = 1 << 16
_ZSTD_PIECE = 1 << 11
ZSTD_MISSING = (
    "zstd-compressed (the file exporter's compression: zstd) and the zstandard package is not "
    "installed: pip install 'loopwatch[zstd]'"
)


class Decompressing(io.RawIOBase):
    """A compressed stream (one member or frame, or several) decompressed as it is read; data
    that ends inside a member sets ``truncated`` and reads as the end, so everything before the
    cut is still read."""

    def __init__(self, inner: IO[bytes], new: Callable[[], Any], piece: int) -> None:
        self.inner = inner
        self._new = new
        self._piece = piece
        self._d = new()
        self._out = b""
        self._at = 0  # what of _out was read already
        self._started = False  # a member is under way
        self.truncated = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._at >= len(self._out):
            chunk = self._d.unused_data or self.inner.read(self._piece)
            if self._d.eof:  # the next member: in what followed this one, or where a piece ends
                self._d = self._new()
            if not chunk:
                if self._started and not self._d.eof:
                    self.truncated = True
                return 0
            self._started = True
            self._out = self._d.decompress(chunk)
            self._at = 0
            if self._d.eof and not self._d.unused_data:
                self._started = False
        at = self._at
        n = min(len(buffer), len(self._out) - at)
        buffer[:n] = memoryview(self._out)[at : at + n]  # no copy of the rest
        self._at = at + n
        return n


def _zstandard() -> Any:
    try:
        import zstandard
    except ImportError:
        return None
    return zstandard


def zstd_available() -> bool:
    return _zstandard() is not None


def gunzip(inner: IO[bytes]) -> Decompressing:
    return Decompressing(inner, lambda: zlib.decompressobj(wbits=31), _GZIP_PIECE)


def unzstd(inner: IO[bytes]) -> Decompressing:
    """A zstd stream as it is read (call only when :func:`zstd_available`)."""
    decompressor = _zstandard().ZstdDecompressor()
    return Decompressing(inner, decompressor.decompressobj, _ZSTD_PIECE)


def unzstd_message(body: bytes, limit: int) -> bytes:
    """One zstd-compressed message, whole (call only when :func:`zstd_available`); ValueError
    when it is cut short or decompresses to more than ``limit`` bytes."""
    stream = unzstd(io.BytesIO(body))
    parts = []
    size = 0
    while size <= limit:
        part = stream.read(1 << 20)
        if not part:
            break
        parts.append(part)
        size += len(part)
    if size > limit:
        raise ValueError(f"decompresses to more than {limit} bytes")
    if stream.truncated:
        raise ValueError("its zstd frame is cut short")
    return b"".join(parts)


def corrupt_errors() -> tuple[type[Exception], ...]:
    """What the decompressors raise on data that is not what it claims to be."""
    zstandard = _zstandard()
    return (zlib.error,) if zstandard is None else (zlib.error, zstandard.ZstdError)
