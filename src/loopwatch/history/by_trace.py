"""Stored spans grouped by trace, in time order, whatever order they were stored in: what
``loopwatch replay`` feeds its pipeline, a whole trace at a time, so its numbers do not depend
on the order of lines or on how the spans are split across files.

Pass 1 (:meth:`Grouping.add`, a batch of span views at a time): each trace's spans of the
batch (a *fragment*) are serialized behind a fixed header (trace id, the fragment's earliest
span end, its length and encoding) and appended to one of ``Limits.buckets`` buckets, chosen by
a hash of the trace id. While everything appended fits in ``Limits.sort_bytes`` it is held in
memory; past that, each bucket's buffer is written to its file in a temporary directory when
it reaches ``Limits.flush_bytes``.

Pass 2 (:meth:`Grouping.traces`): each bucket file is read whole (one larger than
``Limits.sort_bytes`` is first split again, by another hash of the trace id), its fragments
gathered by trace, and written back as a *run*: whole traces in order of (earliest span end,
trace id). The runs are merged with a heap (in rounds of ``Limits.fan_in`` runs when there are
more), and each trace is handed on with its spans read back and ordered by (end, start, span
id). Every trace id is in exactly one bucket, so each trace is whole. (Held in memory, the
buckets are gathered by trace at once, without files.)

Memory, whatever the size of the input: the buckets' buffers (at most a quarter of
``Limits.memory``), or everything while it fits in half of it, or one bucket file being sorted
(at most half, and an index of its fragments), or the merge's read buffers (a quarter) and the
trace being handed on; a trace larger than that is held whole. Disk: about the serialized
spans, under the temporary directory (``$TMPDIR``, else the system's), removed when the
grouping is closed, on error and on Ctrl-C too.
"""

from __future__ import annotations

import heapq
import marshal
import pickle
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import IO, Any

from loopwatch.core.span_view import EventView, SpanView

DEFAULT_MEMORY = 16 << 20  # bytes the grouping may hold (see Limits)
_PREFIX = "loopwatch-replay-"
_LOW = (1 << 64) - 1
# a fragment: trace id (high, low 64 bits), its earliest span end (ns), length, encoding
_FRAGMENT = struct.Struct(">QQQIB")
# a trace in a run: its earliest span end (ns), trace id (high, low), its fragments' length
_TRACE = struct.Struct(">QQQQ")
_MAX_DEPTH = 4  # splits of one bucket; past them a bucket is read whole (one huge trace)
_SPAN_ORDER = attrgetter("end_ns", "start_ns", "span_id")


class GroupingError(Exception):
    """The temporary files could not be written or read; the message says where and why."""


@dataclass(frozen=True)
class Limits:
    """What the grouping may hold in memory: ``memory`` bytes, shared as the module says."""

    memory: int = DEFAULT_MEMORY
    buckets: int = 64
    fan_in: int = 64  # runs merged at once

    @property
    def flush_bytes(self) -> int:
        return max(1024, self.memory // (4 * self.buckets))

    @property
    def sort_bytes(self) -> int:
        return max(4096, self.memory // 2)

    @property
    def read_bytes(self) -> int:
        return max(4096, self.memory // (4 * self.fan_in))


DEFAULT_LIMITS = Limits()


@dataclass(slots=True)
class Trace:
    trace_id: int
    first_end_ns: int  # the earliest end of its spans: when its first span was exported
    spans: list[SpanView]  # ordered by (end, start, span id)


# -- spans as bytes --------------------------------------------------------------------------------
# Each span's fields as a tuple, through marshal (C; three quarters of pickle's cost on these
# spans): the readers' span views hold only what it writes back exactly (str, int, float, bool,
# bytes, None, tuples and dicts of them). A fragment holding anything else is pickled instead.
_MARSHAL, _PICKLE = 0, 1


def _dumps(spans: list[SpanView]) -> tuple[int, bytes]:
    # each span's fields (its events as (name, attributes) pairs), written out: a call a span
    # costs as much as building the tuple
    fields = [
        (
            s.trace_id,
            s.span_id,
            s.parent_id,
            s.name,
            s.start_ns,
            s.end_ns,
            s.attributes,
            tuple([(e.name, e.attributes) for e in s.events]) if s.events else (),
            s.status_code,
            s.status_description,
            s.service,
            s.extra,
        )
        for s in spans
    ]
    try:
        return _MARSHAL, marshal.dumps(fields)
    except ValueError:  # an object marshal does not write
        return _PICKLE, pickle.dumps(fields, protocol=pickle.HIGHEST_PROTOCOL)


def _loads(kind: int, blob: bytes | memoryview) -> list[SpanView]:
    # pickle: the files are this process's own, in a directory only its user can read
    fields = marshal.loads(blob) if kind == _MARSHAL else pickle.loads(blob)
    return [SpanView(*f) if not f[7] else _with_events(f) for f in fields]


def _with_events(f: tuple[Any, ...]) -> SpanView:
    events = tuple([EventView(name, attributes) for name, attributes in f[7]])
    return SpanView(f[0], f[1], f[2], f[3], f[4], f[5], f[6], events, *f[8:])


def _clamp(ns: int) -> int:
    return ns if 0 <= ns <= _LOW else (0 if ns < 0 else _LOW)


def _bucket(trace_id: int, depth: int, buckets: int) -> int:
    # ints and tuples of ints hash the same in every process (no hash randomization)
    return (hash(trace_id) if depth == 0 else hash((trace_id, depth))) % buckets


# -- the grouping --------------------------------------------------------------------------------
class Grouping:
    """Use as a context manager: the temporary directory lives as long as the ``with``."""

    def __init__(self, limits: Limits = DEFAULT_LIMITS, directory: str | None = None) -> None:
        self.limits = limits
        self._parent = directory  # None: $TMPDIR, else the system's
        self.path: Path | None = None
        self.spans = 0
        self.fragments = 0
        self.spilled_bytes = 0  # written to the bucket files in pass 1 (0: all held)
        self._buckets: _Buckets | None = None
        self._names = 0

    def __enter__(self) -> Grouping:
        try:
            self.path = Path(tempfile.mkdtemp(prefix=_PREFIX, dir=self._parent))
        except OSError as e:
            raise GroupingError(_why("cannot create a temporary directory", e)) from None
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._buckets is not None:
            self._buckets.close()
            self._buckets = None
        if self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path = None

    def _file(self, kind: str) -> Path:
        assert self.path is not None, "use Grouping in a with statement"
        self._names += 1
        return self.path / f"{kind}-{self._names}"

    # -- pass 1 ---------------------------------------------------------------------------------
    def add(self, spans: list[SpanView]) -> None:
        """Spill one batch of spans, a fragment per trace."""
        if not spans:
            return
        if self._buckets is None:
            # held in memory while they fit in what a bucket may take to be sorted
            self._buckets = _Buckets(self, 0, hold=self.limits.sort_bytes)
        by_trace: dict[int, list[SpanView]] = {}
        for span in spans:
            members = by_trace.get(span.trace_id)
            if members is None:
                by_trace[span.trace_id] = [span]
            else:
                members.append(span)
        buckets, count = self._buckets, self.limits.buckets
        for trace_id, members in by_trace.items():
            kind, blob = _dumps(members)
            first = _clamp(min([s.end_ns for s in members]))
            header = _FRAGMENT.pack(trace_id >> 64, trace_id & _LOW, first, len(blob), kind)
            buckets.append(_bucket(trace_id, 0, count), header, blob)
        self.spans += len(spans)
        self.fragments += len(by_trace)

    # -- pass 2 ---------------------------------------------------------------------------------
    def traces(self, on_bucket: Callable[[int, int], None] | None = None) -> Iterator[Trace]:
        """Every trace, whole, in order of (earliest span end, trace id). ``on_bucket(n, of)``
        before each bucket is sorted (progress)."""
        buckets, self._buckets = self._buckets, None
        if buckets is None:
            return
        if buckets.held is not None:  # it all fit: no file written
            held, buckets.held = buckets.held, None
            if on_bucket is not None:
                on_bucket(1, 1)
            for first, trace_id, parts in _by_trace(held):
                yield Trace(trace_id, first, _spans(parts))
            return
        files = buckets.finish()
        self.spilled_bytes = buckets.written
        runs: list[Path] = []
        for n, path in enumerate(files):
            if on_bucket is not None:
                on_bucket(n + 1, len(files))
            runs.extend(self._sorted(path, 1))
        while len(runs) > self.limits.fan_in:
            runs = [
                self._merged_to_file(runs[i : i + self.limits.fan_in])
                for i in range(0, len(runs), self.limits.fan_in)
            ]
        for first, trace_id, payload in self._merge(runs):
            yield Trace(trace_id, first, _spans([payload]))

    def _sorted(self, path: Path, depth: int) -> list[Path]:
        """A bucket file as runs (one, unless it had to be split), the file removed."""
        try:
            size = path.stat().st_size
            if size > self.limits.sort_bytes and depth <= _MAX_DEPTH:
                parts = self._split(path, depth)
                # one part: a single trace (or ids that always hash alike): read it whole
                deeper = depth + 1 if len(parts) > 1 else _MAX_DEPTH + 1
                return [run for part in parts for run in self._sorted(part, deeper)]
            data = path.read_bytes()
            path.unlink()
            run = self._file("run")
            with open(run, "wb", buffering=self.limits.read_bytes) as out:
                for first, trace_id, fragments in _by_trace([data]):
                    payload = b"".join(fragments)
                    out.write(_TRACE.pack(first, trace_id >> 64, trace_id & _LOW, len(payload)))
                    out.write(payload)
            return [run]
        except OSError as e:
            raise GroupingError(_why(f"cannot sort {path}", e)) from None

    def _split(self, path: Path, depth: int) -> list[Path]:
        buckets = _Buckets(self, depth)
        try:
            with open(path, "rb", buffering=self.limits.read_bytes) as f:
                while fragment := _read_fragment(f):
                    trace_id, header, blob = fragment
                    buckets.append(_bucket(trace_id, depth, self.limits.buckets), header, blob)
            path.unlink()
            return buckets.finish()
        finally:
            buckets.close()

    def _merge(self, runs: list[Path]) -> Iterator[tuple[int, int, bytes]]:
        """(earliest end, trace id, fragments) of every trace in the runs, in order."""
        files: list[IO[bytes]] = []
        try:
            heap: list[tuple[int, int, int, bytes]] = []  # (first, trace id, run, fragments)
            for n, run in enumerate(runs):
                f = open(run, "rb", buffering=self.limits.read_bytes)  # noqa: SIM115
                files.append(f)
                head = _read_trace(f)
                if head is not None:
                    heap.append((head[0], head[1], n, head[2]))
            heapq.heapify(heap)
            while heap:
                first, trace_id, n, payload = heap[0]
                yield first, trace_id, payload
                following = _read_trace(files[n])
                if following is None:
                    heapq.heappop(heap)
                else:
                    heapq.heapreplace(heap, (following[0], following[1], n, following[2]))
        except OSError as e:
            raise GroupingError(_why("cannot read the sorted spans", e)) from None
        finally:
            for opened in files:
                opened.close()
            for run in runs:
                run.unlink(missing_ok=True)

    def _merged_to_file(self, runs: list[Path]) -> Path:
        out_path = self._file("run")
        try:
            with open(out_path, "wb", buffering=self.limits.read_bytes) as out:
                for first, trace_id, payload in self._merge(runs):
                    out.write(_TRACE.pack(first, trace_id >> 64, trace_id & _LOW, len(payload)))
                    out.write(payload)
        except OSError as e:
            raise GroupingError(_why(f"cannot write {out_path}", e)) from None
        return out_path


class _Buckets:
    """Bucket files with a buffer each, written out at ``flush_bytes``; or, while everything
    appended fits in ``hold`` bytes, held in memory and never written (``held``)."""

    def __init__(self, grouping: Grouping, depth: int, hold: int = 0) -> None:
        self.grouping = grouping
        count = grouping.limits.buckets
        self.flush = grouping.limits.flush_bytes
        self.buffers = [bytearray() for _ in range(count)]
        self.paths: list[Path | None] = [None] * count
        self.files: list[IO[bytes] | None] = [None] * count
        self.kind = f"bucket{depth}"
        self.written = 0
        self.hold = hold
        self.total = 0
        self.held: list[bytearray] | None = self.buffers if hold else None

    def append(self, bucket: int, header: bytes, blob: bytes) -> None:
        buffer = self.buffers[bucket]
        buffer += header
        buffer += blob
        if self.held is not None:
            self.total += len(header) + len(blob)
            if self.total <= self.hold:
                return
            self.held = None  # too much to hold: every bucket to its file from now on
            for n, other in enumerate(self.buffers):
                if other:
                    self._write(n)
        elif len(buffer) >= self.flush:
            self._write(bucket)

    def _write(self, bucket: int) -> None:
        buffer = self.buffers[bucket]
        f = self.files[bucket]
        try:
            if f is None:
                path = self.paths[bucket] = self.grouping._file(self.kind)
                f = self.files[bucket] = open(path, "wb", buffering=0)  # noqa: SIM115
            f.write(buffer)
        except OSError as e:
            raise GroupingError(_why("cannot write the spans grouped by trace", e)) from None
        self.written += len(buffer)
        buffer.clear()

    def finish(self) -> list[Path]:
        """Write what is buffered; the files, in bucket order."""
        for bucket, buffer in enumerate(self.buffers):
            if buffer:
                self._write(bucket)
        self.close()
        return [p for p in self.paths if p is not None]

    def close(self) -> None:
        for n, f in enumerate(self.files):
            if f is not None:
                f.close()
                self.files[n] = None


def _why(what: str, error: OSError) -> str:
    where = tempfile.gettempdir()
    return (
        f"{what}: {error.strerror or error} (temporary files go under {where}; set TMPDIR to a "
        "directory with room for about the size of the spans read)"
    )


# -- the files' records --------------------------------------------------------------------------
def _read_record(
    f: IO[bytes], layout: struct.Struct
) -> tuple[tuple[int, ...], bytes, bytes] | None:
    """The next record of a file in ``layout`` (both hold the payload's size fourth): its header's
    fields, the header, the payload; None at the end of the file."""
    header = f.read(layout.size)
    if not header:
        return None
    if len(header) < layout.size:
        raise OSError(0, "a temporary file was cut short")
    fields = layout.unpack(header)
    payload = f.read(fields[3])
    if len(payload) < fields[3]:
        raise OSError(0, "a temporary file was cut short")
    return fields, header, payload


def _read_fragment(f: IO[bytes]) -> tuple[int, bytes, bytes] | None:
    record = _read_record(f, _FRAGMENT)
    if record is None:
        return None
    fields, header, blob = record
    return fields[0] << 64 | fields[1], header, blob


def _read_trace(f: IO[bytes]) -> tuple[int, int, bytes] | None:
    record = _read_record(f, _TRACE)
    if record is None:
        return None
    fields, _, payload = record
    return fields[0], fields[1] << 64 | fields[2], payload


def _by_trace(datas: Sequence[bytes | bytearray]) -> Iterator[tuple[int, int, list[bytes]]]:
    """The fragments of ``datas`` gathered by trace: (earliest span end, trace id, its
    fragments) in order of (earliest span end, trace id)."""
    where: dict[int, list[tuple[int, int, int]]] = {}  # trace id -> (data, start, stop)
    firsts: dict[int, int] = {}
    unpack, size = _FRAGMENT.unpack_from, _FRAGMENT.size
    for n, data in enumerate(datas):
        at, end = 0, len(data)
        while at < end:
            high, low, first, length, _ = unpack(data, at)
            trace_id = high << 64 | low
            stop = at + size + length
            known = where.get(trace_id)
            if known is None:
                where[trace_id] = [(n, at, stop)]
                firsts[trace_id] = first
            else:
                known.append((n, at, stop))
                if first < firsts[trace_id]:
                    firsts[trace_id] = first
            at = stop
        if at != end:
            raise OSError(0, "a temporary file was cut short")
    order = sorted([(first, trace_id) for trace_id, first in firsts.items()])
    firsts.clear()
    for first, trace_id in order:
        fragments = [bytes(datas[n][at:stop]) for n, at, stop in where.pop(trace_id)]
        if len(fragments) > 1:  # by content: the same spans give the same order, however read
            fragments.sort()
        yield first, trace_id, fragments


def _spans(payloads: list[bytes]) -> list[SpanView]:
    """A trace's fragments read back, its spans in order of (end, start, span id)."""
    spans: list[SpanView] = []
    size = _FRAGMENT.size
    for payload in payloads:
        at, end = 0, len(payload)
        view = memoryview(payload)
        while at < end:
            length, kind = _FRAGMENT.unpack_from(payload, at)[3:]
            spans.extend(_loads(kind, view[at + size : at + size + length]))
            at += size + length
    spans.sort(key=_SPAN_ORDER)
    return spans
